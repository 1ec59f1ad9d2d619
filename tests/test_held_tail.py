"""A shard's held tail (``fetch.tail_*`` with the round driver's release): a fetch run whose tail
rule fired goes on fetching until it is released, and a round releases a shard only once no other
shard still fetches outside its tail, since the round waits for that shard anyway. At D = 1 s on
the 500-host benchmark a shard cut 11 s before the other left its hosts idle for those seconds.

The worker tests run a real :class:`FetchWorker` against the loopback web; the round tests a real
two-process Dask cluster with one host set routed to each shard."""

from __future__ import annotations

import threading
import time
from collections import Counter

import fsspec
import pytest
from fetch_helpers import fetch_item as _item
from fsspec.implementations.dirfs import DirFileSystem
from round_helpers import fetched_rows, hosts_by_shard, new_crawl, round_config, serve

from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.round import Crawler, dask_client
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import host_of

#: the capacity rule only (fetch.tail_capacity_ratio), measured over half-second windows
TAIL = {"tail_rate_ratio": 0.0, "tail_idle_s": 0.0, "tail_overlap_s": 0.0,
        "throughput_window_s": 0.5, "tail_capacity_ratio": 0.6}  # fmt: skip
DELAY_S = 0.1


def _page(host: str, path: str, headers) -> Response:
    """robots.txt 404; a ``short`` host's pages link to a new page (URLs for the next round),
    the others' link nowhere."""
    if path == "/robots.txt":
        return Response(404)
    link = f'<a href="/new{path[2:]}">n</a>' if "short" in host else ""
    body = f"<html><body>{host} {path} {link}</body></html>".encode()  # no two alike
    return Response(200, [("Content-Type", "text/html")], body)


@pytest.mark.parametrize("release", ["none", "never", "on_held"])
def test_a_run_with_a_release_goes_on_fetching_in_its_tail_until_released(
    web, test_config, tmp_path, release
):
    # six short hosts (5 pages) and one long one (40 pages), 0.1 s apart each: once the short
    # hosts are dry with new links, the capacity rule fires (tests/test_tail_capacity.py).
    # Without a release event the run ends there; with one never set it fetches every URL; with
    # one set once its progress shows the held tail, it ends then.
    cfg = test_config.replace(
        politeness={"host_delay_s": DELAY_S, "ip_delay_s": 0.0, "ip_concurrency": 8},
        fetch={"threads": 8, **TAIL},
    )
    short = [f"held-{release}-short{i}.w1.test" for i in range(6)]
    long_ = f"held-{release}-long.w1.test"
    items = []
    for host, n in [(h, 5) for h in short] + [(long_, 40)]:
        for i in range(n):
            web.app.add(host, f"/p{i}", _page(host, f"/p{i}", {}))
            items.append(_item(f"{web.base_url(host)}/p{i}"))
        web.app.add(host, "/robots.txt", Response(404))
    gate = None if release == "none" else threading.Event()
    held_at: list[float] = []

    def progress(counters: Counter) -> None:
        if counters.get("tail_held") and not held_at:
            held_at.append(time.monotonic())
            if release == "on_held":
                gate.set()

    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(cfg, 0, fs, seed_hosts={*short, long_})
    run = w.run(items, round=1, progress=progress, tail_release=gate)
    w.close()
    assert len(run.fetched) + len(run.unfetched) == len(items)
    if release == "never":  # held from the tail on, to the end of its list
        assert run.counters["tail_held"] == 1 and held_at
        assert not run.unfetched and "tail_cut" not in run.counters
    else:  # ended in its tail, the long host's URLs queued for the next round
        assert run.counters["tail_cut"] == 1
        assert {i.host for i in run.unfetched} == {long_} and len(run.unfetched) >= 10
        assert ("tail_held" in run.counters) == (release == "on_held")


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("other_has_a_tail", [False, True])
def test_a_round_holds_a_shards_tail_while_another_shard_fetches(tmp_path, other_has_a_tail):
    # Shard A: six short hosts (10 pages, links to new pages) and a long one (40 pages); its
    # tail rule fires after ~1.5 s (the short hosts' burst must span a tick of the monitor to
    # count as the best rate). Shard B: one long host (80 pages, 8 s at 0.1 s), and with
    # ``other_has_a_tail`` six short hosts too, so its tail fires at about the same time.
    # B alone fetching for 6 s: A is held and fetches its whole list meanwhile. Both in their
    # tails: both are released and cut, their long hosts' URLs left for the next round.
    cfg = round_config(
        politeness={"host_delay_s": DELAY_S, "ip_delay_s": 0.0, "ip_concurrency": 16},
        fetch={"threads": 8, **TAIL},
    )
    longs, shorts = hosts_by_shard(cfg, "long-hold", 1), hosts_by_shard(cfg, "short-hold", 6)
    long_a, long_b = longs[0][0], longs[1][0]
    pages = {long_a: 40, long_b: 80, **dict.fromkeys(shorts[0][:6], 10)}
    if other_has_a_tail:
        pages.update(dict.fromkeys(shorts[1][:6], 10))
    with serve(_page) as web:
        seeds = [f"{web.base_url(h)}/p{i}" for h, n in pages.items() for i in range(n)]
        crawl = new_crawl(tmp_path / "c", cfg, seeds)
        with dask_client(cfg) as client:
            crawler = Crawler(crawl.url, client)
            try:
                summary = crawler.run_round(cfg)
            finally:
                crawler.close_actors()
    fetched = Counter(host_of(r["url"]) for r in fetched_rows(crawl))
    if not other_has_a_tail:  # A held while B fetched: A's whole list, nothing cut
        assert summary["not_fetched"] == 0, summary
        assert fetched[long_a] == 40 and fetched[long_b] == 80
        assert summary["shards_tail_cut"] == 0
    else:  # both in their tails: released, cut; each long host's URLs left for later
        assert summary["shards_tail_cut"] == 2, summary
        assert fetched[long_a] < 40 and fetched[long_b] < 80
        assert summary["not_fetched"] == 120 - fetched[long_a] - fetched[long_b]
