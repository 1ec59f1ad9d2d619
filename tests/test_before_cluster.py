"""What ``round`` and ``crawl`` check before they start or reach a Dask cluster (issue 34): a
crawl locked by another writer is said at once, naming the command that holds it (a ``crawl`` was
named ``round``, after a 6 s cluster start), and a scheduler address where nothing listens is said
at once (it was 30 s of silence, ``round.connect_timeout_s``). Real subprocesses; the proof that no
cluster was started is that ``distributed`` was never imported (``python -X importtime``)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from crawl_helpers import small_crawl
from round_helpers import subprocess_env
from test_scheduler_errors import free_port

from batchcrawl.store import lock as lock_mod
from batchcrawl.store.lock import WriterLock


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "batchcrawl.cli", *args],
        capture_output=True, text=True, env=subprocess_env(), timeout=timeout,
    )  # fmt: skip


def _messages(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if not ln.startswith("import time:")]


def _imported(stderr: str, module: str) -> bool:
    return any(ln.rstrip().endswith(f"| {module}") for ln in stderr.splitlines())


@pytest.fixture
def crawl_held_by_crawl(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    lock_mod.name_command("batchcrawl crawl")
    try:
        with WriterLock(crawl, owner="batchcrawl round"):
            yield crawl
    finally:
        lock_mod.name_command(None)


@pytest.mark.parametrize("command", [["round"], ["crawl"], ["crawl", "--stream"]])
def test_a_locked_crawl_is_refused_before_any_cluster_naming_its_command(
    crawl_held_by_crawl, command
):
    done = _cli(command[0], crawl_held_by_crawl.url, *command[1:])
    assert done.returncode == 4, done.stderr[-3000:]
    lines = _messages(done.stderr)
    assert len(lines) == 1, lines
    assert "locked by batchcrawl crawl (its step batchcrawl round)" in lines[0]
    assert not _imported(done.stderr, "distributed"), "a cluster was started"


def test_a_refused_scheduler_is_said_at_once_not_after_the_connect_timeout(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    address = f"tcp://127.0.0.1:{free_port()}"
    # the client would wait 600 s; the wait's timeout (120 s) fails the test if it does
    done = _cli("round", crawl.url, "--scheduler", address, "--set", "round.connect_timeout_s=600")
    assert done.returncode == 1, done.stderr[-3000:]
    lines = _messages(done.stderr)
    assert lines == [f"batchcrawl: error: cannot reach the Dask scheduler at {address} "
                     "(connection refused); check that it runs (dask scheduler) and the address "
                     "(--scheduler, round.scheduler)"]  # fmt: skip
    assert not _imported(done.stderr, "distributed")


def test_a_listener_that_is_no_scheduler_is_said_within_the_connect_timeout(tmp_path):
    """Something accepts the connection and says nothing (an HTTP server, a wrong port): the
    client waited without end; now ``round.connect_timeout_s`` bounds it, with one line saying
    what to check (a fresh-user trial, issue 34)."""
    crawl = small_crawl(tmp_path / "c")
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; nobody speaks
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        done = _cli(
            "round", crawl.url, "--scheduler", address, "--set", "round.connect_timeout_s=3"
        )
    assert done.returncode == 1, done.stderr[-3000:]
    lines = _messages(done.stderr)
    assert len(lines) == 2, lines
    assert lines[0].startswith(f"batchcrawl: the Dask scheduler at {address} does not answer yet")
    assert lines[1].startswith(f"batchcrawl: error: {address} accepts connections but did not "
                               "answer as a Dask scheduler within 3 s")  # fmt: skip
    assert not _imported(done.stderr, "distributed")


def test_the_lock_record_names_the_command_and_its_step(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    with WriterLock(crawl, owner="batchcrawl gc (pid 1)"):
        with pytest.raises(lock_mod.LockedError, match=r"locked by batchcrawl gc \(pid 1\) \("):
            WriterLock(crawl).check_free()
    WriterLock(crawl).check_free()  # released: free


@pytest.mark.parametrize("command", [["round"], ["crawl", "--stream", "--max-seconds", "2"]])
def test_the_lock_is_taken_before_the_cluster_starts(tmp_path, command):
    """A second writer started a moment after the first (a fresh-user trial, issue 34: 0.3-1 s
    later) found no lock yet -- the first took it only once its cluster had started, 1.7 s in --,
    started a cluster of its own and was refused 3-4 s later. The lock now comes first: when its
    file appears, the command has no worker process yet; a second writer then is refused at once,
    without importing ``distributed``."""
    import os
    import time

    import psutil

    crawl = small_crawl(tmp_path / "c")
    lock_file = crawl.path(lock_mod.LOCK_FILE)
    proc = subprocess.Popen([sys.executable, "-m", "batchcrawl.cli", command[0], crawl.url,
                             *command[1:]], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=subprocess_env())  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(lock_file) and proc.poll() is None:
            assert time.monotonic() < deadline, "no lock taken"
            time.sleep(0.002)
        workers = [p for p in psutil.Process(proc.pid).children(recursive=True)
                   if "spawn_main" in " ".join(p.cmdline())]  # fmt: skip
        assert workers == [], "the cluster started before the lock was taken"
        second = _cli(command[0], crawl.url, *command[1:])
        assert second.returncode == 4, second.stderr[-3000:]
        assert not _imported(second.stderr, "distributed")
    finally:
        proc.kill()
        proc.wait()
