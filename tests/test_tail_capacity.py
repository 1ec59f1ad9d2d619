"""The politeness-capacity tail rule (issue 16: politeness-bound rounds, ``fetch.tail_capacity_ratio``):
the workbench's capacity on a fake clock, the detector's rule, and a real worker run against the
loopback web, where hosts that ran dry with new links end the phase and hosts that ran dry with
nothing new do not."""

from __future__ import annotations

import math

import fsspec
import pytest
from fetch_helpers import fetch_item as _item
from fsspec.implementations.dirfs import DirFileSystem
from hypothesis import given
from hypothesis import strategies as st

from batchcrawl.fetch.workbench import Workbench
from batchcrawl.fetch.worker import FetchWorker, TailDetector
from batchcrawl.testing.webserver import Response


def _bench(host_delay_s: float, ip_delay_s: float = 0.0, ip_concurrency: int = 8) -> Workbench:
    return Workbench(lambda: 0.0, host_delay_s=host_delay_s, ip_delay_s=ip_delay_s,
                     ip_concurrency=ip_concurrency)  # fmt: skip


def test_capacity_sums_one_fetch_per_delay_of_working_and_waiting_hosts():
    wb = _bench(host_delay_s=0.5)
    wb.add("a.test", "127.0.0.1", ["x", "y"])
    wb.add("b.test", "127.0.0.2", ["x"])
    wb.add("c.test", "127.0.0.3", ["x"])
    vs = wb.visit_state("c.test")
    vs.set_crawl_delay(2.0)  # Crawl-delay raises c's delay: 0.5 fetches/s
    assert wb.polite_capacity() == (pytest.approx(2 + 2 + 0.5), 0.0)
    # b runs dry: it counts as waiting only when it was given new links
    got, delay = wb.acquire()
    while got.host != "b.test":
        wb.release(got, 0.0)
        got, delay = wb.acquire()
    got.pop()
    wb.release(got, 0.0)
    assert wb.polite_capacity() == (pytest.approx(2.5), 0.0)
    assert wb.polite_capacity({"b.test", "elsewhere.test"}) == (pytest.approx(2.5), 2.0)


def test_capacity_is_capped_per_ip_and_infinite_without_a_delay():
    wb = _bench(host_delay_s=0.5, ip_delay_s=1.0, ip_concurrency=2)
    for h in ("a.test", "b.test", "c.test", "d.test"):  # one address: 4 x 2/s, capped at 2/s
        wb.add(h, "127.0.0.1", ["x"])
    assert wb.polite_capacity() == (pytest.approx(2.0), 0.0)
    free = _bench(host_delay_s=0.0)
    free.add("a.test", "127.0.0.1", ["x"])
    assert free.polite_capacity() == (math.inf, 0.0)


@given(
    best_rate=st.floats(1, 1000),
    working=st.floats(0, 2000),
    waiting=st.floats(0, 2000),
    ratio=st.floats(0.05, 1),
)
def test_detector_fires_when_working_hosts_give_less_than_the_ratio(
    best_rate, working, waiting, ratio
):
    tail = TailDetector(ratio=0.0, window_s=1.0, capacity_ratio=ratio)
    done = 0
    for step in range(5):  # a steady rate: the rate rule (off here) would never fire anyway
        fired = tail.observe(step * 0.5, done, working, waiting)
        done += round(best_rate / 2)
    expect = working < ratio * min(tail._best_any, working + waiting)
    assert fired == expect
    if waiting == 0:  # dry hosts given nothing new never end the phase
        assert not fired
    off = TailDetector(ratio=0.0, window_s=1.0, capacity_ratio=0.0)
    assert not any(off.observe(i * 0.5, i * 100, 0.0, 1e9) for i in range(10))


def test_detector_need_not_wait_a_whole_window_for_the_capacity_rule():
    # the seed round: every host's one page is done within 1.5 s, then only a few Crawl-delay
    # hosts have work (2 pages/s) while the others wait with new links (200 pages/s)
    tail = TailDetector(ratio=0.3, window_s=5.0, capacity_ratio=0.6)
    fired_at = None
    for step in range(20):
        t = step * 0.5
        done = min(300, step * 100)
        working, waiting = (200.0, 0.0) if t < 1.5 else (2.0, 200.0)
        if tail.observe(t, done, working, waiting):
            fired_at = t
            break
    assert fired_at is not None and fired_at < 5.0
    assert fired_at >= TailDetector.MIN_SPAN_S  # not on the first sample's rate
    rate_only = TailDetector(ratio=0.3, window_s=5.0, capacity_ratio=0.0)
    assert not any(rate_only.observe(i * 0.5, min(300, i * 100)) for i in range(10))


@pytest.mark.parametrize(("links", "ratio", "cut"), [(True, 0.6, True), (False, 0.6, False),
                                                     (True, 0.0, False)])  # fmt: skip
def test_worker_ends_a_polite_phase_when_dry_hosts_wait_with_new_links(
    web, test_config, tmp_path, links, ratio, cut
):
    # six short hosts (10 pages) and one long one (40 pages), 0.1 s apart each: once the short
    # hosts are dry the long one gives 10 of the 70 pages/s the seven could. With links on the
    # short hosts' pages (new URLs for the next round) the phase ends and the long host's URLs go
    # back queued; with no new links, or the rule off, every URL is fetched.
    cfg = test_config.replace(
        politeness={"host_delay_s": 0.1, "ip_delay_s": 0.0, "ip_concurrency": 8},
        fetch={"threads": 8, "tail_rate_ratio": 0.0, "tail_idle_s": 0.0,
               "throughput_window_s": 0.5, "tail_capacity_ratio": ratio},
    )  # fmt: skip
    tag = f"cap{int(links)}{int(ratio * 10)}"
    short = [f"{tag}-s{i}.w1.test" for i in range(6)]
    long_ = f"{tag}-long.w1.test"
    items = []
    for host, n in [(h, 10) for h in short] + [(long_, 40)]:
        web.app.add(host, "/robots.txt", Response(404))
        for i in range(n):
            link = f'<a href="/new{i}">n</a>' if links and host != long_ else ""
            body = f"<html><body>{host} {i} {link}</body></html>".encode()  # no duplicates
            web.app.add(host, f"/p{i}", Response(200, [("Content-Type", "text/html")], body))
            items.append(_item(f"{web.base_url(host)}/p{i}"))
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(cfg, 0, fs, seed_hosts={*short, long_})
    run = w.run(items, round=1)
    w.close()
    assert len(run.fetched) + len(run.unfetched) == len(items)
    fetched_hosts = {r["url_host_name"] for r in run.fetched}
    assert fetched_hosts >= set(short)
    if cut:
        assert run.counters["tail_cut"] == 1
        assert {i.host for i in run.unfetched} == {long_}
        assert len(run.unfetched) >= 10  # ended well before the long host was done
    else:
        assert not run.unfetched and "tail_cut" not in run.counters
