"""A worker of the embedded cluster lost while it holds a result: the scheduler (in the driver's
process) logged "Removing worker ... caused the cluster to lose already computed task(s)" on the
driver's stderr, before the command's own exit-5 line (issue 34, a fresh-user trial of a stream).
A real LocalCluster, a worker process really killed."""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest
from round_helpers import round_config

from batchcrawl.round import dask_client

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def _held_result() -> bytes:
    return b"x" * 1000


def test_a_lost_worker_is_not_recorded_on_stderr_by_the_embedded_scheduler(capfd, caplog):
    caplog.set_level(logging.DEBUG, logger="batchcrawl.engine.cluster")
    with dask_client(round_config()) as client:
        pids = client.run(os.getpid)
        victim = sorted(pids)[0]
        held = client.submit(_held_result, workers=[victim], pure=False)
        assert held.result(timeout=30)
        os.kill(pids[victim], signal.SIGKILL)
        deadline = time.monotonic() + 60
        while victim in client.scheduler_info()["workers"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert victim not in client.scheduler_info()["workers"]
        time.sleep(0.5)  # the scheduler logs as it removes the worker
        err = capfd.readouterr().err
    assert "Removing worker" not in err, err[-3000:]
    # the control: the record was made, and became a DEBUG line of batchcrawl's
    said = [r.getMessage() for r in caplog.records if r.name == "batchcrawl.engine.cluster"]
    assert any(m.startswith("distributed: Removing worker") and "lose" in m for m in said), said


@pytest.mark.parametrize(("logger", "level", "message"), [
    ("distributed.scheduler", logging.ERROR, "Couldn't gather keys: {'_select_leased_task-1': 'queued'}"),
    ("distributed.client", logging.WARNING, "Couldn't gather 30 keys, rescheduling ('x', 'y')"),
    ("distributed.scheduler", logging.INFO, "Removing worker 'tcp://127.0.0.1:1' caused the cluster to lose"),
])  # fmt: skip
def test_the_records_of_a_lost_worker_become_debug_lines(caplog, logger, level, message):
    """A stream's worker killed mid-gather printed the scheduler's ERROR and the client's WARNING
    "Couldn't gather ..." before the command's exit-5 line (issue 34, 4th fresh-user trial)."""
    from batchcrawl.engine.cluster import lost_workers_said_once

    # the logger itself: the CLI's tests leave "batchcrawl" at WARNING (main() sets it)
    caplog.set_level(logging.DEBUG, logger="batchcrawl.engine.cluster")
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    keep = Keep()
    logging.getLogger(logger).addHandler(keep)
    try:
        with lost_workers_said_once():
            logging.getLogger(logger).log(level, message)
        logging.getLogger(logger).log(level, "another record")  # outside: passes
    finally:
        logging.getLogger(logger).removeHandler(keep)
    assert seen == ["another record"]
    said = [r.getMessage() for r in caplog.records if r.name == "batchcrawl.engine.cluster"]
    assert said == [f"distributed: {message}"]
