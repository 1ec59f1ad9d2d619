"""The overlap rule of a fetch phase's tail (``fetch.tail_overlap_s``, issue 30): a host found one
level after another (a mirror linked from the original's home page) gets its large level run beside
the original's in the next round instead of after it. The rule on numbers, the workbench's seconds
of work, and a real worker run against the loopback web with its control."""

from __future__ import annotations

import math
import time
from collections import Counter
from concurrent.futures import Future
from types import SimpleNamespace

import fsspec
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from hypothesis import given
from hypothesis import strategies as st

from batchcrawl.config import loopback_test_config
from batchcrawl.console.signals import StopRequest
from batchcrawl.fetch.idle import OVERLAP_GAIN, overlap_pays
from batchcrawl.fetch.workbench import Workbench
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import FetchItem
from batchcrawl.stream import Stream
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key

seconds = st.floats(0, 100)
rates = st.floats(0, 1000)


@given(working=rates, waiting=rates, work_s=seconds, wait_s=seconds, min_s=st.floats(0, 20))
def test_overlap_pays_when_the_next_round_is_faster_and_both_sides_last(
    working, waiting, work_s, wait_s, min_s
):
    got = overlap_pays(working, waiting, work_s, wait_s, min_s)
    expect = (
        min_s > 0
        and waiting > 0
        and working + waiting >= OVERLAP_GAIN * working
        and min(work_s, wait_s) >= min_s
    )
    assert got == expect
    assert not overlap_pays(working, waiting, work_s, wait_s, 0.0)  # 0 turns it off
    assert not overlap_pays(math.inf, waiting, work_s, wait_s, min_s)  # no fixed delay: never


def test_workbench_counts_seconds_of_work_by_host_delay():
    wb = Workbench(lambda: 0.0, host_delay_s=0.5, ip_delay_s=0.0, ip_concurrency=8)
    wb.add("a.test", "127.0.0.1", list("abcd"))  # 4 x 0.5 s
    wb.add("b.test", "127.0.0.2", ["x"])
    wb.visit_state("b.test").set_crawl_delay(3.0)  # 1 x 3 s: the longest
    assert wb.politeness_left_s({}) == (pytest.approx(3.0), 0.0)
    wb.add("c.test", "127.0.0.3", [])  # dry
    found = {"c.test": 10, "a.test": 99, "elsewhere.test": 1000}  # only dry hosts count
    assert wb.politeness_left_s(found) == (pytest.approx(3.0), pytest.approx(5.0))


def _item(url: str) -> FetchItem:
    url = canonicalize(url)
    return FetchItem(url_key(url), url, host_of(url), domain_of(host_of(url)), 0)


@pytest.mark.parametrize("overlap_s", [0.5, 0.0])
def test_worker_ends_a_level_when_a_dry_mirror_waits_with_many_links(
    web, test_config, tmp_path, overlap_s
):
    # The original host has 30 pages queued (3 s at 0.1 s); the mirror's 2 pages link to 20 new
    # pages (2 s): with fetch.tail_overlap_s the phase ends once the mirror is dry, the original's
    # URLs go back queued (the next round runs both); without (the control) all are fetched.
    cfg = test_config.replace(
        politeness={"host_delay_s": 0.1},
        fetch={"threads": 4, "tail_rate_ratio": 0.0, "tail_capacity_ratio": 0.0,
               "tail_idle_s": 0.0, "tail_overlap_s": overlap_s},
    )  # fmt: skip
    orig, mirror = "overlap-orig.w1.test", "overlap-mirror.w1.test"
    items = []
    for host, n in ((orig, 30), (mirror, 2)):
        web.app.add(host, "/robots.txt", Response(404))
        for i in range(n):
            body, ctype = b"x", "text/plain"
            if host == mirror:
                links = "".join(f'<a href="/m{i}-{j}">m</a>' for j in range(10))
                body, ctype = links.encode(), "text/html"
            web.app.add(host, f"/p{i}", Response(200, [("Content-Type", ctype)], body))
            items.append(_item(f"{web.base_url(host)}/p{i}"))
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(cfg, 0, fs, seed_hosts={orig, mirror})
    run = w.run(items, round=1)
    w.close()
    assert len(run.fetched) + len(run.unfetched) == len(items)
    assert {r["url"] for r in run.fetched} >= {i.url for i in items if i.host == mirror}
    if overlap_s:
        assert run.counters["tail_cut"] == 1
        assert run.unfetched and {i.host for i in run.unfetched} == {orig}
    else:
        assert not run.unfetched and "tail_cut" not in run.counters


def _wait_drained(worker: FetchWorker, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while worker.stream_held and time.monotonic() < deadline:
        time.sleep(0.02)
    assert worker.stream_held == 0


@pytest.mark.parametrize("links", [True, False])
def test_stream_worker_says_when_its_dry_hosts_wait_with_new_links(
    web, test_config, tmp_path, links
):
    # stream.early_flush_s asks this: a host that ran dry with new links (not yet handed out)
    # waits for the next micro-batch; a take starts counting again. Without links the shard
    # finished every URL it was given and its rows wait for the merge (a stream's end): it waits
    # too; after the take, neither waits.
    host = f"overlap-stream-{int(links)}.w1.test"
    body = "".join(f'<a href="/n{j}">n</a>' for j in range(5)) if links else "none"
    web.app.add(host, "/robots.txt", Response(404))
    web.app.add(host, "/", Response(200, [("Content-Type", "text/html")], body.encode()))
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(test_config, 0, fs, seed_hosts={host})
    w.stream_start(round=1)
    try:
        assert w.stream_hosts_wait() is None
        w.stream_add([_item(web.base_url(host) + "/")])
        _wait_drained(w)
        assert w.stream_hosts_wait() == "finished"  # checked before the dry hosts' links
        w.stream_take(next_round=2)
        assert w.stream_hosts_wait() is None
    finally:
        w.stream_stop()
        w.close()


class _DryHostsActor:
    """Stands in for a stream's shard actor whose dry hosts always wait with new links (what a
    loaded machine gives: every micro-batch outlasts ``stream.early_flush_s``), or, with
    ``why="finished"``, that finished every URL it was given."""

    def __init__(self, why: str | None = "dry") -> None:
        self.why = why

    def hosts_wait(self) -> Future:
        done: Future = Future()
        done.set_result(self.why)
        return done


@pytest.mark.parametrize("why", ["finished", "dry", None])
def test_a_finished_shard_starts_the_micro_batch_at_once(test_config, why):
    # A shard that finished every URL it was given has nothing to fetch until the merge: its
    # micro-batch starts at the first ask (the seeds of a 9-host site fetched 2.6 s after the
    # launch waited to 3.5 s for their links). Dry hosts with new links wait for early_flush_s;
    # with neither the micro-batch waits for flush_interval_s.
    now = [1000.0]
    stream = SimpleNamespace(
        cfg=test_config.replace(stream={"flush_interval_s": 5.0, "early_flush_s": 1.0}),
        clock=lambda: now[0], actors={0: _DryHostsActor(None), 1: _DryHostsActor(why)},
        stop=_FakeStop(now), totals=Counter(),
    )  # fmt: skip
    started = now[0]
    assert Stream.wait_for_flush(stream, started, started + 3600) is False
    waited = {"finished": 0.0, "dry": 1.0, None: 5.0}[why]
    assert now[0] - started == pytest.approx(waited)
    assert stream.totals["early_flushes"] == (0 if why is None else 1)


@pytest.mark.parametrize("stopped", [True, False])
def test_a_stop_request_wins_over_an_early_flush(test_config, stopped):
    # a fresh user's SIGTERM to `crawl --stream` went unheard for 26-60 s on a loaded machine:
    # the early flush returned before the stop request was looked at, micro-batch after
    # micro-batch. Control: without a stop the early flush fires.
    stream = SimpleNamespace(
        cfg=test_config.replace(stream={"flush_interval_s": 60.0, "early_flush_s": 0.01}),
        clock=time.monotonic, actors={0: _DryHostsActor()}, stop=StopRequest(),
        totals=Counter(),
    )  # fmt: skip
    if stopped:
        stream.stop.event.set()
    started = time.monotonic() - 1.0  # the micro-batch before took longer than early_flush_s
    assert Stream.wait_for_flush(stream, started, started + 3600) is stopped
    assert stream.totals["early_flushes"] == (0 if stopped else 1)


class _FakeStop:
    """A stop request never set whose ``wait`` moves a fake clock on by its timeout."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock

    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float) -> bool:
        self.clock[0] += timeout
        return False


@given(
    flush=st.floats(0.1, 30), cost=st.floats(0, 60), share=st.floats(0.01, 1),
    left=st.floats(0.5, 200),
)  # fmt: skip
def test_a_costly_micro_batch_delays_the_next_regular_one(flush, cost, share, left):
    # stream.max_batch_share: on the 500-host web at D = 1 s each micro-batch took 4-6 s, and
    # started every 5 s they took all the stream's time (0.53 of the politeness bound). The next
    # regular micro-batch starts max(flush_interval_s, cost / share) after the last one's start,
    # never after the deadline.
    now = [1000.0]
    stream = SimpleNamespace(
        cfg=loopback_test_config(stream={"flush_interval_s": flush, "early_flush_s": 0.0,
                                         "max_batch_share": share}),
        clock=lambda: now[0], actors={}, stop=_FakeStop(now), totals=Counter(),
    )  # fmt: skip
    started = now[0]
    assert Stream.wait_for_flush(stream, started, started + left, cost) is False
    assert now[0] == pytest.approx(started + min(max(flush, cost / share), left))
