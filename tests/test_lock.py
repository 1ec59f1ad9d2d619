"""The crawl's single-writer lock: exclusive, named owner, heartbeat, stale takeover, safe release."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from batchcrawl.errors import LockedError
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.lock import LOCK_FILE, WriterLock

REPO = Path(__file__).resolve().parents[1]


class FakeClock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def crawl(tmp_path) -> CrawlDir:
    return CrawlDir.create(str(tmp_path / "crawl"), "", buckets=1)


def lock_record(crawl: CrawlDir) -> dict:
    return json.loads(Path(crawl.path(LOCK_FILE)).read_text())


def write_record(crawl: CrawlDir, **fields) -> None:
    base = {"owner": "someone", "host": "elsewhere", "pid": 1, "started": 0.0, "token": "t0"}
    Path(crawl.path(LOCK_FILE)).write_text(json.dumps({**base, **fields}))


def test_lock_file_names_holder_and_is_removed_on_release(crawl):
    clock = FakeClock()
    with WriterLock(crawl, owner="batchcrawl round", clock=clock) as lock:
        rec = lock_record(crawl)
        assert rec["owner"] == "batchcrawl round"
        assert rec["pid"] == os.getpid()
        assert rec["heartbeat"] == clock.t and rec["started"] == clock.t
        assert rec["token"] == lock.token
    assert not os.path.exists(crawl.path(LOCK_FILE))


def test_second_writer_gets_locked_error_naming_owner(crawl):
    with WriterLock(crawl, owner="first writer"):
        with pytest.raises(LockedError, match="first writer") as info:
            WriterLock(crawl, owner="second").acquire()
        assert info.value.exit_code == 4
    # released: a new writer gets it
    with WriterLock(crawl, owner="second"):
        assert lock_record(crawl)["owner"] == "second"


def test_heartbeat_refreshes_the_record(crawl):
    clock = FakeClock()
    with WriterLock(crawl, clock=clock, heartbeat_s=3600) as lock:
        clock.t += 30
        assert lock.beat() is True
        assert lock_record(crawl)["heartbeat"] == clock.t
        assert lock_record(crawl)["started"] == clock.t - 30


def test_fresh_lock_of_another_host_is_respected_stale_one_taken_over(crawl, caplog):
    clock = FakeClock()
    write_record(crawl, owner="remote round", heartbeat=clock.t - 59)
    with pytest.raises(LockedError, match="remote round.*host elsewhere"):
        WriterLock(crawl, clock=clock, stale_after_s=60).acquire()
    clock.t += 2  # now 61 s without heartbeat
    with caplog.at_level(logging.WARNING, logger="batchcrawl.store.lock"):
        with WriterLock(crawl, owner="me", clock=clock, stale_after_s=60):
            assert lock_record(crawl)["owner"] == "me"
    assert "taking over the writer lock of remote round" in caplog.text
    assert "no heartbeat for 61 s" in caplog.text


def test_unreadable_lock_file_is_stale(crawl):
    Path(crawl.path(LOCK_FILE)).write_text("{torn")
    with WriterLock(crawl, owner="me"):
        assert lock_record(crawl)["owner"] == "me"


def test_lock_of_dead_process_on_this_host_is_taken_over(crawl, caplog):
    """A real writer process killed with SIGKILL leaves its lock; the pid check frees it at once."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, crawl.url],
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert holder.stdout.readline().strip() == "LOCKED"
        with pytest.raises(LockedError, match="holder process"):
            WriterLock(crawl).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        holder.stdout.close()
        holder.stdin.close()
    assert lock_record(crawl)["pid"] == holder.pid  # the dead holder's lock is still there
    with caplog.at_level(logging.WARNING, logger="batchcrawl.store.lock"):
        with WriterLock(crawl, owner="successor", stale_after_s=3600, nest=True) as lock:
            assert lock_record(crawl)["owner"] == "successor"
            # what the dead writer did after its last commit was never persisted: a stream
            # cools every host down (engine.shard.StreamShardActor), a step nested in the
            # command's hold learns it too
            assert lock.took_over is not None and str(holder.pid) in lock.took_over
            with WriterLock(crawl, owner="step") as step:
                assert step.took_over == lock.took_over
    assert f"process {holder.pid}" in caplog.text and "is gone" in caplog.text
    with WriterLock(crawl, owner="after a clean release") as lock:  # nobody died holding it
        assert lock.took_over is None


HOLDER = """
import sys
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.lock import WriterLock
lock = WriterLock(CrawlDir.open(sys.argv[1]), owner="holder process", heartbeat_s=3600).acquire()
print("LOCKED", flush=True)
sys.stdin.readline()
"""


def test_release_after_takeover_leaves_the_new_owners_lock(crawl):
    clock_a, clock_b = FakeClock(), FakeClock()
    a = WriterLock(crawl, owner="a", clock=clock_a, heartbeat_s=3600, stale_after_s=60).acquire()
    try:
        # b's clock is far ahead: a looks stale to b (e.g. a was paused for minutes)
        clock_b.t = clock_a.t + 600
        b = WriterLock(crawl, owner="b", clock=clock_b, stale_after_s=60).acquire()
        assert a.beat() is False and a.lost
        with pytest.raises(LockedError, match="taken over"):
            a.check()
    finally:
        a.release()
    assert lock_record(crawl)["owner"] == "b"
    b.release()
    assert not os.path.exists(crawl.path(LOCK_FILE))


def test_concurrent_writers_exactly_one_wins(crawl):
    wins, losses, barrier = [], [], threading.Barrier(8)

    def contend(i: int) -> None:
        lock = WriterLock(crawl, owner=f"w{i}", heartbeat_s=3600)
        barrier.wait()
        try:
            lock.acquire()
            wins.append(lock)
        except LockedError:
            losses.append(i)

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(losses) == 7
    assert lock_record(crawl)["owner"] == wins[0].owner
    wins[0].release()
    assert not [n for n in os.listdir(crawl.root) if ".tmp-" in n or ".stale-" in n]


def test_a_nesting_hold_lets_this_process_take_the_lock_again(crawl):
    """The CLI holds the lock for a whole command (``nest=True``) and its steps take it again
    under another name of the same crawl (the cluster's absolute path): they nest, checking and
    releasing through the hold, which alone removes the file; another writer is refused."""
    with WriterLock(crawl, owner="batchcrawl crawl", nest=True) as hold:
        same = CrawlDir.open(os.path.relpath(crawl.url))
        with WriterLock(same, owner="batchcrawl round") as step:
            assert (step.token, step.started) == (hold.token, hold.started)
            step.check()
            assert lock_record(crawl)["owner"] == "batchcrawl crawl"
        assert os.path.exists(crawl.path(LOCK_FILE))  # the step left it to the hold
        with pytest.raises(LockedError):  # a second writer is still refused
            WriterLock(crawl, owner="other").check_free()
    assert not os.path.exists(crawl.path(LOCK_FILE))
    with WriterLock(crawl, owner="first"):  # without a nesting hold: a second writer
        with pytest.raises(LockedError, match="first"):
            WriterLock(crawl, owner="second").acquire()
