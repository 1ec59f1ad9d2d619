"""A stream keeps what rounds keep (issue 30 items 1 and 4), on a real LocalCluster against a
SampleWeb on loopback: its ``hosts`` table is checkpointed with its micro-batches and survives a
crash (no robots.txt fetched twice, Crawl-delays restored); batch, pipelined and streamed crawls of
one web end with the same URLs, statuses and drops; a stream throttles probable traps and counts
what it did not select; its summary gives the discovery-to-fetch latency."""

from __future__ import annotations

from collections import Counter

import pytest
from round_helpers import (
    by_host,
    new_crawl,
    robots_not_first,
    round_config,
    sample_delay,
    sample_web,
    serve,
)

from batchcrawl.console.signals import StopRequest
from batchcrawl.round import run_rounds
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
            assert row["crawl_delay_s"] == web.crawl_delay(host), row
            # the effective delay: at least the Crawl-delay (capped), more when the host is slow
            assert row["host_delay_s"] >= delay(host) - 1e-9, row
        assert any(web.crawl_delay(h) for h in fetched_hosts), "a Crawl-delay host was fetched"
        summary = run_stream(crawl.url, cfg, StopRequest(), max_seconds=120)
        entries = server.log.entries()
    assert summary["stopped_by"] == "nothing_due"
    robots = {h: sum(e.path == "/robots.txt" for e in lst) for h, lst in by_host(entries).items()}
    # checkpointed before the crash: not fetched again by the rerun
    assert {h: n for h, n in robots.items() if h in fetched_hosts and n != 1} == {}


def _end_state(crawl) -> tuple[dict[str, tuple[str, str | None]], dict[tuple[str, str], int]]:
    """``{url: (status, reason)}`` of the frontier, and the attempts by ``(url, outcome)``."""
    frontier = sql.query(crawl, "SELECT url, status, reason FROM frontier").to_pylist()
    attempts = sql.query(crawl, "SELECT url, outcome, count(*) AS n FROM fetched GROUP BY 1, 2")
    return (
        {r["url"]: (r["status"], r["reason"]) for r in frontier},
        {(r["url"], r["outcome"]): r["n"] for r in attempts.to_pylist()},
    )


def test_batch_pipelined_and_streamed_crawls_end_with_the_same_urls_statuses_and_drops(tmp_path):
    web = sample_web()
    # max_depth 2 leaves URLs filtered ('max_depth'): a drop every mode must count the same
    cfg = round_config(stream={"flush_interval_s": 0.5}, filters={"max_depth": 2})
    with serve(web):
        crawls = {}
        for mode in ("batch", "pipelined"):
            crawls[mode] = new_crawl(tmp_path / mode, cfg, web.seeds())
            run_rounds(crawls[mode].url, cfg, 20, pipeline=mode == "pipelined")
        crawls["stream"] = new_crawl(tmp_path / "stream", cfg, web.seeds())
        summary = run_stream(crawls["stream"].url, cfg, StopRequest(), max_seconds=120)
    assert summary["stopped_by"] == "nothing_due"
    states = {mode: _end_state(c) for mode, c in crawls.items()}
    frontier, attempts = states["batch"]
    statuses = Counter(status for status, _ in frontier.values())
    assert statuses["fetched"] > 50 and statuses["filtered"] > 0, statuses
    for mode in ("pipelined", "stream"):
        assert states[mode][0] == frontier, mode  # every URL, its status and reason
        assert states[mode][1] == attempts, mode  # every attempt, once, with the same outcome
    # the stream measured how long a URL waited from its discovery to its fetch
    latency = summary["latency_s"]
    assert latency["urls"] > 20 and 0 < latency["p50"] <= latency["p95"] <= latency["max"]


def test_a_stream_throttles_probable_traps_and_counts_what_it_did_not_select(tmp_path):
    # the calendar trap is flagged after 4 near-duplicate pages; then at most one of its URLs is
    # in flight at a time, the others held back (trap_throttled), as generate does for a round
    web = sample_web(hosts=4, pages=60, trap=True)
    cfg = round_config(stream={"flush_interval_s": 0.5},
                       dedup={"trap_min_pages": 4, "trap_max_urls_per_host": 1},
                       filters={"max_depth": 12})  # fmt: skip
    with serve(web):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        summary = run_stream(crawl.url, cfg, StopRequest(), max_seconds=40)
    hosts = crawl.read_current("hosts", ["host", "trap"]).to_pylist()
    assert {h["host"]: h["trap"] for h in hosts if h["trap"]} == {web.trap_host: "near"}
    assert summary["not_selected"].get("trap_throttled", 0) > 0, summary["not_selected"]
    checkpoints = [
        crawl.manifest(g).summary for g in crawl.generations()[-summary["checkpoints"] :]
    ]
    assert sum(s["generate"]["not_selected"].get("trap_throttled", 0) for s in checkpoints) > 0


@pytest.mark.parametrize("crash", [False, True])
def test_links_queued_by_the_shards_are_fetched_once_and_end_as_a_batch_crawl(tmp_path, crash):
    # stream.direct_links: a shard queues the links to its page's own host at once; each URL is
    # still requested once (server log), the frontier and attempts end as a batch crawl's
    # (max_depth does not bind here: depths may follow the order URLs are found)
    web = sample_web()
    cfg = round_config(stream={"flush_interval_s": 0.5, "direct_links": True},
                       filters={"max_depth": 20})  # fmt: skip
    with serve(web) as server:
        batch = new_crawl(tmp_path / "batch", cfg, web.seeds())
        run_rounds(batch.url, cfg, 30)
        before = len(server.log.entries())
        crawl = new_crawl(tmp_path / "stream", cfg, web.seeds())
        if crash:  # killed while merging micro-batch 3: what it fetched is lost, not committed
            with pytest.raises(_Crash):
                run_stream(crawl.url, cfg, StopRequest(), on_step=_crash_at("update", 3))
        summary = run_stream(crawl.url, cfg, StopRequest(), max_seconds=120)
        entries = server.log.entries()[before:]
    assert summary["stopped_by"] == "nothing_due"
    # a rerun queues none directly for hosts the crashed run checkpointed (they have hosts rows)
    assert crash or summary["direct_links"] > 0, summary
    # every committed attempt once: nothing committed lost, nothing counted twice
    assert _end_state(crawl) == _end_state(batch)
    if not crash:  # a crash refetches the lost micro-batch's pages (a rerun's cool-down holds)
        requests = Counter((e.host, e.path) for e in entries)
        assert {k: n for k, n in requests.items() if n > 1} == {}
        assert robots_not_first(entries) == []
