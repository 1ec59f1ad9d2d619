"""A stream keeps what rounds keep (issue 30 item 4), on a real LocalCluster against a SampleWeb on
loopback: its ``hosts`` table is checkpointed with its micro-batches and survives a crash (no
robots.txt fetched twice, Crawl-delays restored), and a stopped stream leaves no sitemap job among
its unfetched fetch items."""

from __future__ import annotations

from collections import Counter

import pytest
from round_helpers import by_host, new_crawl, round_config, sample_delay, sample_web, serve

from batchcrawl.console.signals import StopRequest
from batchcrawl.store import sql
from batchcrawl.stream import run_stream

pytestmark = pytest.mark.timeout(300)


class _Crash(RuntimeError):
    """Raised from ``on_step`` to end a stream between two checkpoints (a crash: the micro-batch
    being merged is never committed)."""


def _crash_at(step: str, nth: int):
    seen = Counter()

    def on_step(name: str) -> None:
        seen[name] += 1
        if name == step and seen[name] == nth:
            raise _Crash(f"{step} #{nth}")

    return on_step


def test_stream_checkpoints_the_hosts_table_and_a_rerun_after_a_crash_keeps_it(tmp_path):
    web = sample_web()
    # host delay 0.1 s: the 90-page web takes several micro-batches; Crawl-delays up to 0.3 s
    cfg = round_config(stream={"flush_interval_s": 0.5}, politeness={"host_delay_s": 0.1})
    with serve(web) as server:
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        with pytest.raises(_Crash):
            run_stream(crawl.url, cfg, StopRequest(), on_step=_crash_at("commit", 3))
        crashed = crawl.manifest()
        hosts = crawl.read_table("hosts", crashed.files("hosts")).to_pylist()
        fetched = sql.query(crawl, "SELECT DISTINCT url_host_name AS h FROM fetched")
        fetched_hosts = set(fetched.column("h").to_pylist())
        assert fetched_hosts, "the stream committed fetches before the crash"
        newest = {}
        for row in hosts:  # newest run last
            newest[row["host"]] = row
        assert fetched_hosts <= set(newest)
        delay = sample_delay(web, cfg)
        for host in fetched_hosts:
            row = newest[host]
            assert row["robots_fetch_time"] is not None, row
            assert row["host_delay_s"] == pytest.approx(delay(host)), row
        assert any(web.crawl_delay(h) for h in fetched_hosts), "a Crawl-delay host was fetched"
        summary = run_stream(crawl.url, cfg, StopRequest(), max_seconds=120)
        entries = server.log.entries()
    assert summary["stopped_by"] == "nothing_due"
    robots = {h: sum(e.path == "/robots.txt" for e in lst) for h, lst in by_host(entries).items()}
    # checkpointed before the crash: not fetched again by the rerun
    assert {h: n for h, n in robots.items() if h in fetched_hosts and n != 1} == {}
