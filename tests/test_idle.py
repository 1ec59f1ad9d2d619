"""The fetch phase's idle share (issue 16): the meter on a fake clock, the round's figure from
the shards' numbers, and a real worker run against the loopback web."""

from __future__ import annotations

import gc

import fsspec
import pytest
from fetch_helpers import fetch_item as _item
from fsspec.implementations.dirfs import DirFileSystem
from hypothesis import given
from hypothesis import strategies as st

from batchcrawl.engine.report import ShardReport
from batchcrawl.engine.summary import fetch_idle
from batchcrawl.fetch.idle import IdleMeter
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import FetchItem
from batchcrawl.testing.webserver import Response


@given(
    threads=st.integers(1, 32),
    samples=st.lists(st.tuples(st.floats(0, 5), st.integers(0, 40)), max_size=30),
    end_gap=st.floats(0, 5),
)
def test_meter_charges_each_interval_to_the_state_at_its_start(threads, samples, end_gap):
    meter = IdleMeter(threads, start_s=10.0)
    now, state_busy, idle, busy_until = 10.0, False, 0.0, 10.0
    for gap, with_work in samples:
        now += gap
        meter.observe(now, with_work)
        if state_busy:
            busy_until = now
        else:
            idle += gap
        state_busy = 2 * with_work >= threads  # at least half the threads can have work
    end = now + end_gap
    assert meter.finish(end) == pytest.approx(idle + (0.0 if state_busy else end_gap))
    assert meter.tail_s(end) == pytest.approx(end - (end if state_busy else busy_until))
    assert 0.0 <= meter.tail_s(end) <= meter.idle_s + 1e-9


def test_meter_start_up_is_idle_and_a_busy_middle_is_not():
    meter = IdleMeter(16, start_s=0.0)
    meter.observe(2.0, 16)  # the first 2 s (queueing the fetch list) had no thread working
    meter.observe(7.0, 8)  # 8 of 16: half, still busy
    meter.observe(9.0, 7)  # the tail begins
    assert meter.finish(12.0) == pytest.approx(2.0 + 3.0)
    assert meter.tail_s(12.0) == pytest.approx(3.0)


def test_round_idle_share_counts_start_up_run_idle_and_waiting_for_other_shards():
    shards = [
        ShardReport(0, startup_s=1.0, fetch_seconds=8.0, idle_s=2.0, tail_s=1.5),  # busy 6 s
        ShardReport(1, startup_s=0.5, fetch_seconds=4.0, idle_s=1.0, tail_s=1.0),  # busy 3 s
    ]
    got = fetch_idle(shards, step_s=10.0)
    assert got["share"] == pytest.approx((10 - 6 + 10 - 3) / 20)
    assert got["startup_s"] == 1.0
    assert got["tail_s"] == pytest.approx(10.0 - (1.0 + 8.0 - 1.5))
    assert fetch_idle([], 10.0)["share"] == 0.0


@pytest.mark.parametrize(("threads", "whole_run_idle"), [(4, True), (2, False)])
def test_worker_run_is_idle_while_fewer_hosts_than_half_its_threads_have_work(
    web, host_name, test_config, tmp_path, threads, whole_run_idle
):
    # One host can keep one thread busy: below half of 4 threads for the whole run, at half of
    # 2 threads until its last page (the control: the same run is not all idle).
    cfg = test_config.replace(politeness={"host_delay_s": 0.1}, fetch={"threads": threads})
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(404))
    for i in range(5):
        web.app.add(host_name, f"/p{i}", Response(200, [("Content-Type", "text/plain")], b"x"))
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(cfg, 0, fs, seed_hosts={host_name})
    run = w.run([_item(f"{base}/p{i}") for i in range(5)], round=1)
    w.close()
    assert len(run.fetched) == 5
    assert 0.0 <= run.tail_s <= run.idle_s <= run.seconds + 1e-9
    if whole_run_idle:
        assert run.idle_s == pytest.approx(run.seconds)
        assert run.tail_s == pytest.approx(run.seconds)
    else:
        assert run.idle_s < run.seconds - 0.3  # 5 pages 0.1 s apart kept the host busy


@pytest.mark.parametrize(("tail_idle_s", "links"), [(0.5, True), (0.0, True), (0.5, False)])
def test_worker_ends_its_tail_after_tail_idle_s(web, test_config, tmp_path, tail_idle_s, links):
    # Two hosts keep 2 of 4 threads in work until the short one is done; then one host is left
    # (the tail): with fetch.tail_idle_s its URLs go back queued, without (the control) all are
    # fetched. The cut only pays when the short host ran dry with new links for the next round
    # (fetch.idle.tail_cut_pays); without them the next round would have the same one host.
    cfg = test_config.replace(
        politeness={"host_delay_s": 0.2},
        fetch={
            "threads": 4,
            "tail_rate_ratio": 0.0,
            "tail_capacity_ratio": 0.0,
            "tail_idle_s": tail_idle_s,
        },
    )
    short, long_ = "idle-short.w1.test", "idle-long.w1.test"
    items = []
    for host, n in ((short, 3), (long_, 25)):
        web.app.add(host, "/robots.txt", Response(404))
        for i in range(n):
            body, ctype = b"x", "text/plain"
            if host == short and links:
                body, ctype = f'<a href="/next{i}">next</a>'.encode(), "text/html"
            web.app.add(host, f"/p{i}", Response(200, [("Content-Type", ctype)], body))
            items.append(_item(f"{web.base_url(host)}/p{i}"))
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(cfg, 0, fs, seed_hosts={short, long_})
    run = w.run(items, round=1)
    w.close()
    assert len(run.fetched) + len(run.unfetched) == len(items)
    assert {r["url_host_name"] for r in run.fetched if r["url"].endswith("/p2")} >= {short}
    if tail_idle_s and links:
        assert run.counters["tail_cut"] == 1
        assert run.unfetched and {i.host for i in run.unfetched} == {long_}
    else:
        assert not run.unfetched and "tail_cut" not in run.counters


def test_a_run_lets_each_fetched_item_go_while_the_others_wait(
    web, host_name, test_config, tmp_path
):
    """A round's fetch list is handed to the run (``ShardActor.fetch_sync``), which keeps no list
    of it once queued: an item fetched is freed while the rest still wait, instead of the whole
    list living until the run ends (issue 33: a fetch list of 40,000 items is ~13 MB of a fetch
    worker)."""
    cfg = test_config.replace(politeness={"host_delay_s": 0.1}, fetch={"threads": 2})
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(404))
    n = 12
    for i in range(n):
        web.app.add(host_name, f"/p{i}", Response(200, [("Content-Type", "text/plain")], b"x"))
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(cfg, 0, fs, seed_hosts={host_name})
    alive: list[int] = []  # our items still in memory at each of the run's ticks

    def progress(counters):
        alive.append(
            sum(1 for o in gc.get_objects() if isinstance(o, FetchItem) and o.host == host_name)
        )

    handed = [[_item(f"{base}/p{i}") for i in range(n)]]
    run = w.run(handed.pop(), round=1, progress=progress)
    w.close()
    assert len(run.fetched) == n
    assert alive and min(alive) < n  # 12 at every tick while the run held its list
