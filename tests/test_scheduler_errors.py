"""``--scheduler`` errors: a malformed address is bad input (exit 2, before any connection); an
unreachable one (a free loopback port with nothing listening) is one line naming the address after
``round.connect_timeout_s``; a relative crawl path is made absolute before it goes to the cluster."""

from __future__ import annotations

import os
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
