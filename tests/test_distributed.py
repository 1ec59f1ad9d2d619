"""Distributed for real (issue 5.6; docs/design.md §7): a ``dask scheduler`` and two ``dask worker``
processes on loopback, rounds run through ``batchcrawl crawl --scheduler ADDRESS`` until nothing is
due, and the same frontier (URL set and statuses) as an embedded-LocalCluster crawl of the same web;
and the same for ``batchcrawl crawl --stream --scheduler ADDRESS`` (issue 11).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import subprocess
import sys
import threading

import pytest
from round_helpers import (
    cli_command,
    frontier_rows,
    new_crawl,
    politeness_violations,
    robots_not_first,
    round_config,
    sample_delay,
    sample_web,
    serve,
    subprocess_env,
)

from batchcrawl import procmem
from batchcrawl.config import loopback_test_config
from batchcrawl.round import dask_client, run_rounds
from batchcrawl.store.crawldir import CrawlDir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

MAX_ROUNDS = 12


def _drain(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


class DaskCluster:
    """``python -m dask scheduler`` and ``dask worker`` processes on 127.0.0.1 (each in its own
    process group, so :meth:`close` takes nannies and their workers down too)."""

    def __init__(self, workdir) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []
        self.scheduler_log: list[str] = []
        self.address = ""

    def start(
        self, workers: int = 2, timeout_s: float = 60.0, environ: dict[str, str] | None = None
    ) -> DaskCluster:
        """Start the scheduler and ``workers`` workers; ``environ`` is added to their environment.
        The allocator variables are dropped from it first: the workers start as ``dask worker``
        does unless ``environ`` says otherwise."""
        env = {k: v for k, v in subprocess_env().items() if k not in procmem.VARIABLES}
        env.update(environ or {})
        sched = self._spawn(
            ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--dashboard-address", "127.0.0.1:0"],
            env, stderr=subprocess.PIPE,
        )  # fmt: skip
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_drain, args=(sched.stderr, lines), daemon=True).start()
        while not self.address:
            line = lines.get(timeout=timeout_s)
            if line is None:
                raise RuntimeError("dask scheduler exited:\n" + "".join(self.scheduler_log))
            self.scheduler_log.append(line)
            if "Scheduler at:" in line:
                self.address = line.split("Scheduler at:", 1)[1].strip()
        self._lines = lines
        for i in range(workers):
            log = open(self.workdir / f"worker-{i}.log", "w")  # noqa: SIM115 - closed with proc
            self._spawn(
                ["worker", self.address, "--host", "127.0.0.1", "--nthreads", "2",
                 "--no-dashboard", "--name", f"w{i}", "--local-directory",
                 str(self.workdir / f"w{i}")],
                env, stderr=log, stdout=log,
            )  # fmt: skip
        from distributed import Client

        with Client(self.address, timeout=timeout_s) as client:
            client.wait_for_workers(workers, timeout=timeout_s)
            self.worker_hosts = sorted(
                w["host"] for w in client.scheduler_info()["workers"].values()
            )
        return self

    def _spawn(self, args: list[str], env, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dask", *args], env=env, text=True, start_new_session=True,
            stdin=subprocess.DEVNULL, **kwargs,
        )  # fmt: skip
        self.procs.append(proc)
        return proc

    def log_text(self) -> str:
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.scheduler_log.append(line)
        return "".join(self.scheduler_log)

    def close(self) -> None:
        for proc in reversed(self.procs):  # workers first, then the scheduler
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # nannies' children, if any remain
            except ProcessLookupError:
                pass
            proc.wait()


@pytest.fixture
def dask_cluster(tmp_path):
    cluster = DaskCluster(tmp_path)
    try:
        yield cluster.start()
    finally:
        cluster.close()


def test_workers_of_an_existing_cluster_without_the_allocator_settings_are_named(
    dask_cluster, caplog
):
    # `dask worker` starts its processes with Dask's MALLOC_TRIM_THRESHOLD_=65536 and none of the
    # crawler's settings (docs/cluster.md): the driver says so once, and goes on.
    with caplog.at_level(logging.WARNING, logger="batchcrawl.procmem"):
        with dask_client(loopback_test_config(), dask_cluster.address) as client:
            assert len(client.scheduler_info()["workers"]) == 2
    warnings = [r.getMessage() for r in caplog.records if r.name == "batchcrawl.procmem"]
    assert len(warnings) == 1
    assert warnings[0].startswith("2 of 2 workers")
    assert "MALLOC_TRIM_THRESHOLD_=65536 (want 1048576)" in warnings[0]
    assert "MALLOC_ARENA_MAX=unset (want 2)" in warnings[0]


def test_workers_started_with_the_allocator_settings_give_no_warning(tmp_path, caplog):
    # docs/cluster.md: variables of the `dask worker` command win over Dask's pre-spawn-environ
    cfg = loopback_test_config()
    cluster = DaskCluster(tmp_path)
    try:
        cluster.start(environ=procmem.worker_environ(cfg.round))
        with caplog.at_level(logging.WARNING, logger="batchcrawl.procmem"):
            with dask_client(cfg, cluster.address) as client:
                names = list(procmem.worker_environ(cfg.round))
                assert (
                    procmem.mismatches(client.run(procmem.worker_variables, names), cfg.round) == {}
                )
    finally:
        cluster.close()
    assert not [r for r in caplog.records if r.name == "batchcrawl.procmem"]


def _statuses(crawl: CrawlDir) -> dict[str, str]:
    return {r["url"]: r["status"] for r in frontier_rows(crawl)}


def test_rounds_on_an_existing_dask_cluster_match_a_local_cluster_run(dask_cluster, tmp_path):
    web = sample_web(hosts=5, pages=60, seed=11)
    cfg = round_config()
    with serve(web) as server:
        local = new_crawl(tmp_path / "local", cfg, web.seeds())
        local_rounds = run_rounds(local.url, cfg, MAX_ROUNDS)
        mark = server.log.mark()
        remote = new_crawl(tmp_path / "remote", cfg, web.seeds())
        proc = subprocess.run(
            cli_command("crawl", remote.url, "--scheduler", dask_cluster.address,
                        "--rounds", MAX_ROUNDS),
            capture_output=True, text=True, env=subprocess_env(), timeout=240,
        )  # fmt: skip
        remote_log = server.log.since(mark)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summaries = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [s["round"] for s in summaries] == list(range(1, len(summaries) + 1))
    assert len(summaries) < MAX_ROUNDS, "rounds ran until nothing was due"
    assert dask_cluster.worker_hosts == ["127.0.0.1", "127.0.0.1"]
    assert "Receive client connection" in dask_cluster.log_text()
    remote_status = _statuses(CrawlDir.open(remote.url))
    local_status = _statuses(local)
    assert set(remote_status) == set(local_status)
    assert len(local_status) > 50
    assert {"fetched", "redirect", "gone", "filtered", "robots_denied", "queued"} <= set(
        local_status.values()
    )
    differ = {u: (local_status[u], remote_status[u]) for u in local_status
              if local_status[u] != remote_status[u]}  # fmt: skip
    assert differ == {}
    assert sum(s["responses"] for s in summaries) == sum(s["responses"] for s in local_rounds)
    assert {e.host for e in remote_log} <= {h.name for h in web.hosts}
    assert robots_not_first(remote_log) == []
    assert politeness_violations(remote_log, sample_delay(web, cfg)) == []


def test_a_stream_on_an_existing_dask_cluster_matches_local_rounds(dask_cluster, tmp_path):
    # issue 11 item 6: `crawl --stream --scheduler`: the shard actors live on the cluster's
    # workers, the driver's update and select tasks run there too
    web = sample_web(hosts=5, pages=60, seed=11)
    cfg = round_config(stream={"flush_interval_s": 0.5})
    with serve(web) as server:
        local = new_crawl(tmp_path / "local", cfg, web.seeds())
        run_rounds(local.url, cfg, MAX_ROUNDS)
        mark = server.log.mark()
        remote = new_crawl(tmp_path / "remote", cfg, web.seeds())
        proc = subprocess.run(
            cli_command("crawl", remote.url, "--stream", "--scheduler", dask_cluster.address,
                        "--max-seconds", 180),
            capture_output=True, text=True, env=subprocess_env(), timeout=240,
        )  # fmt: skip
        remote_log = server.log.since(mark)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["stopped_by"] == "nothing_due" and summary["checkpoints"] >= 2, summary
    assert "Receive client connection" in dask_cluster.log_text()
    remote_status = _statuses(CrawlDir.open(remote.url))
    local_status = _statuses(local)
    assert len(local_status) > 50 and set(remote_status) == set(local_status)
    differ = {u: (local_status[u], remote_status[u]) for u in local_status
              if local_status[u] != remote_status[u]}  # fmt: skip
    assert differ == {}
    assert {e.host for e in remote_log} <= {h.name for h in web.hosts}
    assert robots_not_first(remote_log) == []
    assert politeness_violations(remote_log, sample_delay(web, cfg)) == []
