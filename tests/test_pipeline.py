"""Pipelined rounds (issue 16 item 2; docs/design.md §8; :mod:`batchcrawl.pipeline`): round N+1
fetched while round N is updated and committed.

* generate's lease: a selection leaving out a round in flight takes the next URLs of each host,
  the caps applied after the lease (so a capped host is not starved);
* the split of one selection into two rounds' worth (hypothesis);
* the fallback rule (:func:`batchcrawl.pipeline.min_hosts`) on config values and on a real crawl;
* a pipelined crawl to completion on a LocalCluster against the loopback SampleWeb fetches the
  same URLs and ends with the same frontier status counts as sequential rounds, with no URL fetched
  twice, robots.txt first and no two requests to a host closer than its delay.

Crash safety of pipelined rounds is in tests/test_crash.py.
"""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from round_helpers import (
    fetched_rows,
    frontier_rows,
    new_crawl,
    politeness_violations,
    read_every_file,
    robots_not_first,
    round_config,
    sample_delay,
    sample_web,
    serve,
)

from batchcrawl.frontier import generate as gen_mod
from batchcrawl.pipeline import min_hosts
from batchcrawl.round import run_rounds

ANSWERED = {"ok", "redirect", "gone", "http_error", "server_error", "truncated", "not_modified"}


# -- generate's lease and the split (no cluster) ----------------------------------------------------
def test_select_with_a_lease_takes_the_next_urls_of_each_capped_host(tmp_path):
    cfg = round_config(generate={"max_urls_per_host": 2})
    urls = [f"http://h{h}.test/p{i}.html" for h in range(3) for i in range(5)]
    crawl = new_crawl(tmp_path / "crawl", cfg, urls)
    manifest = crawl.manifest()
    first, counts, rows, _ = gen_mod.select(crawl, manifest, 1, cfg, now=4e9)
    assert first.num_rows == 6 and counts["capped_host"] == 9
    keys = np.asarray(first.column("url_key").to_numpy(), dtype=np.uint64)
    second, counts2, rows2, _ = gen_mod.select(crawl, manifest, 2, cfg, now=4e9, leased=keys)
    # the same caps, over the URLs not leased: two more of each host, none of the first six
    assert second.num_rows == 6
    assert not set(second.column("url").to_pylist()) & set(first.column("url").to_pylist())
    assert Counter(second.column("host").to_pylist()) == {"h0.test": 2, "h1.test": 2,
                                                          "h2.test": 2}  # fmt: skip
    assert counts2["leased"] == 6 and counts2["capped_host"] == 3
    # every frontier row is accounted for: selected + not selected
    not_selected = sum(v for k, v in counts2.items() if k != "lease_expired")
    assert rows2 == rows == second.num_rows + not_selected
    # control: without the lease the same six as the first selection come back
    again, *_ = gen_mod.select(crawl, manifest, 2, cfg, now=4e9)
    assert again.column("url").to_pylist() == first.column("url").to_pylist()


def test_drop_leased_counts_what_it_leaves_out():
    table = pa.table({"url_key": pa.array([1, 2, 3, 4], pa.uint64()), "x": [1, 2, 3, 4]})
    kept, n = gen_mod.drop_leased(table, np.array([2, 4, 9], dtype=np.uint64))
    assert kept.column("url_key").to_pylist() == [1, 3] and n == 2
    assert gen_mod.drop_leased(table, None) == (table, 0)


@settings(deadline=None)
@given(st.lists(st.sampled_from("abcde"), max_size=40))
def test_split_per_host_gives_each_host_first_half_rounded_up(hosts):
    selected = pa.table({"host": pa.array(hosts, pa.string()), "i": list(range(len(hosts)))})
    first, rest = gen_mod.split_per_host(selected)
    assert sorted(first.column("i").to_pylist() + rest.column("i").to_pylist()) == list(
        range(len(hosts))
    )
    for h, n in Counter(hosts).items():
        mine = [i for i, x in enumerate(hosts) if x == h]
        assert [i for i, x in zip(first["i"].to_pylist(), first["host"].to_pylist(),
                                  strict=True) if x == h] == mine[: (n + 1) // 2]  # fmt: skip
    assert first.column("i").to_pylist() == sorted(first.column("i").to_pylist())


def test_fallback_rule_is_a_share_of_all_fetch_threads():
    cfg = round_config(fetch={"threads": 4, "shards": 2})
    assert min_hosts(cfg) == 4  # default share 0.5 of 8 threads
    assert min_hosts(cfg.replace(round={"pipeline_min_busy_share": 1.0})) == 8
    assert min_hosts(cfg.replace(round={"pipeline_min_busy_share": 0.3})) == 3  # rounded up
    assert min_hosts(cfg.replace(round={"pipeline_min_busy_share": 0.0})) == 1


# -- whole crawls on a LocalCluster -----------------------------------------------------------------
def _web():
    """4 hosts (allow, disallow /s1/, Crawl-delay, robots 404), 48 pages, no extras or trap."""
    return sample_web(hosts=4, pages=48, extras_every=0, links_per_page=8, menu_links=3)


def _cfg(pipeline: bool, share: float = 0.0):
    # 2 URLs per host and round: the frontier keeps a backlog, so rounds can be pipelined; every
    # shard waits for the others (no grace cut), so a round's URLs are all fetched
    return round_config(
        generate={"max_urls_per_host": 2},
        fetch={"tail_capacity_ratio": 0.0, "connect_timeout_s": 20.0, "read_timeout_s": 20.0,
               "total_timeout_s": 30.0},  # no timeouts on a loaded machine: all answered
        round={"pipeline": pipeline, "pipeline_min_busy_share": share, "workers": 2,
               "threads_per_worker": 1},
    )  # fmt: skip


def _portless(url: str) -> str:
    """``url`` without its port: each crawl is served on its own ephemeral port."""
    return re.sub(r"^(https?://[^/:]+):\d+", r"\1", url)


def _crawl(tmp_path, name, cfg):
    web = _web()
    steps: list[str] = []
    with serve(web) as server:
        crawl = new_crawl(tmp_path / name, cfg, web.seeds())
        summaries = run_rounds(crawl.url, cfg, 60, on_step=steps.append)
        entries = server.log.entries()
    return web, crawl, summaries, entries, steps


@pytest.fixture(scope="module")
def crawls(tmp_path_factory):
    """The same web crawled to completion with sequential and with pipelined rounds."""
    tmp = tmp_path_factory.mktemp("pipeline")
    return {p: _crawl(tmp, f"crawl-{p}", _cfg(p)) for p in (False, True)}


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_pipelined_crawl_matches_sequential_rounds(crawls):
    results = {}
    for pipelined, (web, crawl, summaries, entries, _) in crawls.items():
        assert len(summaries) < 60, "the crawl ended because nothing was due"
        fetched = fetched_rows(crawl)
        urls = [_portless(f["url"]) for f in fetched]
        assert len(urls) == len(set(urls)), "a URL fetched twice"
        # the newest row of each URL (files in listing order, oldest first, as test_round reads)
        status = Counter({_portless(r["url"]): r["status"] for r in frontier_rows(crawl)}.values())
        answered = {_portless(f["url"]) for f in fetched if f["outcome"] in ANSWERED}
        results[pipelined] = (set(urls), answered, status)
        assert robots_not_first(entries) == []
        assert politeness_violations(entries, sample_delay(web, _cfg(pipelined))) == []
        # rounds commit in order, one generation each, every file readable
        assert [s["round"] for s in summaries] == list(range(1, len(summaries) + 1))
        gens = [s["generation"] for s in summaries]
        assert gens == list(range(gens[0], gens[0] + len(gens)))
        read_every_file(crawl, crawl.manifest())
    assert results[True] == results[False]
    # the pipelined crawl did overlap: a round's fetch started before the round before committed
    _, _, summaries, _, steps = crawls[True]
    assert any(s["pipelined"] for s in summaries) and not summaries[0]["pipelined"]
    assert not summaries[1]["pipelined"], "round 2 falls back: generation 0 minus the seeds"
    assert "preselect" in steps
    fetch_of_next = [i for i, s in enumerate(steps) if s == "fetch"]
    commits = [i for i, s in enumerate(steps) if s == "commit"]
    assert any(
        f < c and f > p for p, c in zip(commits, commits[1:], strict=False) for f in fetch_of_next
    )
    for s in summaries:
        if s["pipelined"]:  # fetched while the round before was updated: spans overlap
            prev = next(p for p in summaries if p["round"] == s["round"] - 1)
            assert s["step_spans_s"]["fetch"][0] < prev["step_spans_s"]["commit"][1]
    # control: the sequential crawl never overlaps
    _, _, seq, _, seq_steps = crawls[False]
    assert not any(s["pipelined"] for s in seq) and "preselect" not in seq_steps


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_pre_selection_below_the_busy_share_falls_back_to_sequential(tmp_path):
    # 4 hosts on 2 shards x 4 threads: a share of 1.0 wants 8 hosts, never met
    cfg = _cfg(True, share=1.0)
    _, crawl, summaries, entries, steps = _crawl(tmp_path, "crawl", cfg)
    assert "preselect" in steps, "it tried"
    assert not any(s["pipelined"] for s in summaries)
    # every round generated after the commit before it (the last generate finds nothing due)
    assert [s for s in steps if s != "preselect"] == ["generate", "fetch", "update", "compact",
                                                      "commit"] * len(summaries) + ["generate"]  # fmt: skip
    assert not crawl.fs.exists(crawl.path(f"fetchlists/round={len(summaries) + 1}"))
