"""``--scheduler`` errors: a malformed address is bad input (exit 2, before any connection); an
unreachable one (a free loopback port with nothing listening) is one line naming the address after
``round.connect_timeout_s``; a relative crawl path is made absolute before it goes to the cluster."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time

import pytest
from crawl_helpers import small_crawl
from round_helpers import cli_command, subprocess_env

from batchcrawl.engine.cluster import cluster_url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(*args, timeout=60):
    return subprocess.run(cli_command(*args), capture_output=True, text=True,
                          env=subprocess_env(), timeout=timeout)  # fmt: skip


@pytest.mark.parametrize("address", ["notanaddress", "tcp://host", "http://127.0.0.1:8786"])
def test_malformed_scheduler_address_exits_2(tmp_path, address):
    crawl = small_crawl(tmp_path / "c")
    proc = run_cli("round", crawl.url, "--scheduler", address)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a Dask scheduler address" in lines[0] and address in lines[0]


@pytest.mark.timeout(60)
def test_unreachable_scheduler_is_one_line_naming_the_address(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    address = f"tcp://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    proc = run_cli("round", crawl.url, "--scheduler", address, "--set", "round.connect_timeout_s=1")
    assert proc.returncode == 1, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith(f"batchcrawl: error: cannot reach the Dask scheduler at {address}")
    assert time.monotonic() - t0 < 30
    assert not os.path.exists(crawl.path("_lock.json"))


def test_relative_crawl_path_goes_to_the_cluster_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cluster_url("c") == str(tmp_path / "c")
    assert cluster_url("file://" + str(tmp_path / "c")) == str(tmp_path / "c")
    assert cluster_url("memory://bucket/c") == "memory://bucket/c"


@pytest.mark.timeout(90)
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_while_waiting_for_the_scheduler_says_nothing_began(tmp_path, signum):
    """A ``--scheduler`` that accepts connections and never answers (a port of something else,
    or a scheduler too busy): a stop while the round waits for it ends the command with one line
    saying that the round had not begun -- not "round 1 was not committed ... gc removes its
    partial files" (issue 34: no file of the round existed)."""
    crawl = small_crawl(tmp_path / "c")
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever reads or writes
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        proc = subprocess.Popen(
            cli_command("round", crawl.url, "--scheduler", address,
                        "--set", "round.connect_timeout_s=60"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(),
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 30  # until it waits: connected to the listener
            while time.monotonic() < deadline:
                silent.settimeout(0.2)
                try:
                    silent.accept()[0].detach()  # keep it open: the client waits for an answer
                    break
                except TimeoutError:
                    assert proc.poll() is None, proc.communicate()[1][-3000:]
            proc.send_signal(signum)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 128 + signum, err[-3000:]
    name, m = signal.Signals(signum).name, crawl.manifest()
    assert err.strip().splitlines() == [
        f"batchcrawl: stopped by {name} before round {m.round + 1} began: nothing committed by "
        f"this run (last generation {m.generation}, round {m.round})"
    ], err[-3000:]
    assert not os.path.exists(crawl.path("_lock.json"))
