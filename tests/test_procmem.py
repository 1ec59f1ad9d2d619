"""Allocator settings of the embedded cluster's processes (batchcrawl.procmem, issue 16 memory).

A real LocalCluster: its worker processes must start with ``round.malloc_arena_max``,
``round.malloc_*_threshold_bytes`` and ``round.arrow_pool`` in force, and keep them when the nanny
restarts a worker."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import dask
import pyarrow as pa
import pytest

from batchcrawl import procmem
from batchcrawl.config import Config, loopback_test_config
from batchcrawl.engine.cluster import dask_client


def _allocators() -> tuple[str | None, ...]:
    import pyarrow

    return (*map(os.environ.get, procmem.VARIABLES[:3]), pyarrow.default_memory_pool().backend_name)


def _profiling(dask_worker=None) -> bool:
    """Whether this worker runs Dask's statistical profiler (off in the embedded cluster:
    ``cluster.EMBEDDED_CLUSTER_CONFIG``)."""
    return "profile" in dask_worker.periodic_callbacks


def _monitor_periods_ms(server) -> tuple[float, float]:
    """A Dask server's system monitor and memory monitor periods, ms (``cluster.
    EMBEDDED_CLUSTER_CONFIG``); 0 for a monitor it does not run."""
    callbacks = server.periodic_callbacks
    memory = callbacks.get("memory_monitor")
    return (callbacks["monitor"].callback_time, memory.callback_time if memory else 0)


def _worker_monitors(dask_worker=None) -> tuple[float, float]:
    return _monitor_periods_ms(dask_worker)


def _low_level_log_length(dask_worker=None) -> int:
    """How many of Dask's developer log entries this worker keeps (its stream to the scheduler's
    recent messages, its state machine's log)."""
    return max(dask_worker.batched_stream.recent_message_log.maxlen, dask_worker.state.log.maxlen)


def _sent_payloads(nbytes: int) -> int:
    """Messages this process still holds that carry a frame of at least ``nbytes`` bytes (the
    tasks a client or scheduler sent, kept in Dask's logs of recent messages)."""
    import gc

    from distributed.protocol.serialize import Serialized

    gc.collect()
    frames = (f for o in gc.get_objects() if isinstance(o, Serialized) for f in o.frames)
    return sum(1 for f in frames if memoryview(f).nbytes >= nbytes)


def _rows(_, table: pa.Table) -> int:
    return table.num_rows


def test_the_driver_keeps_no_log_of_the_tasks_it_sent():
    """The tasks of a long crawl (the keyset and frontier updates carry Arrow tables) are not
    kept by the driver after they ran: Dask's streams log their last 1,000 messages, payloads
    included, unless ``distributed.admin.low-level-log-length`` is 0 (EMBEDDED_CLUSTER_CONFIG)."""
    import functools

    import numpy as np

    cfg = loopback_test_config(round={"workers": 1})
    table = pa.table({"url_key": np.arange(50_000, dtype=np.int64)})  # 400 KB of keys
    with dask_client(cfg) as client:
        assert client.scheduler_comm.recent_message_log.maxlen == 0
        assert client.cluster.scheduler.transition_log.maxlen == 0
        for _ in range(12):
            got = client.gather(client.map(functools.partial(_rows, table=table), range(3),
                                           pure=False))  # fmt: skip
            assert got == [50_000] * 3
        # at most the last graph, still on its way through the comm (seen in 1 of ~6 runs);
        # with Dask's logs on, all 12 stay
        assert _sent_payloads(table.nbytes) <= 1
    assert dask.config.get("distributed.admin.low-level-log-length") == 1000  # given back


@pytest.mark.parametrize("pool", ["system", "mimalloc"])  # in turn: the first must not decide
def test_workers_start_with_the_configured_allocators_and_keep_them_after_a_restart(pool):
    cfg = loopback_test_config(
        round={"workers": 1, "malloc_arena_max": 3, "malloc_trim_threshold_bytes": 1 << 21,
               "malloc_mmap_threshold_bytes": 1 << 19, "arrow_pool": pool}
    )  # fmt: skip
    want = {("3", str(1 << 21), str(1 << 19), pool)}  # Dask's own trim threshold is 65536
    environ_before = {k: os.environ.get(k) for k in procmem.VARIABLES}
    before = pa.default_memory_pool()
    try:
        with dask_client(cfg) as client:
            assert set(client.run(_allocators).values()) == want
            assert pa.default_memory_pool().backend_name == pool  # the driver too
            assert set(client.run(_profiling).values()) == {False}
            # the monitors' periods: Dask's defaults are 500 and 100 ms
            assert set(client.run(_worker_monitors).values()) == {(2000, 1000)}
            assert _monitor_periods_ms(client.cluster.scheduler)[0] == 2000
            nannies = client.cluster.workers.values()
            assert {_monitor_periods_ms(n) for n in nannies} == {(2000, 1000)}
            assert set(client.run(_low_level_log_length).values()) == {0}
            client.restart()  # the nanny starts a new worker process
            assert set(client.run(_allocators).values()) == want
            assert set(client.run(_profiling).values()) == {False}
            assert set(client.run(_worker_monitors).values()) == {(2000, 1000)}
            assert set(client.run(_low_level_log_length).values()) == {0}
            # the scheduler's stream to the new worker, made when it registered
            streams = client.cluster.scheduler.stream_comms.values()
            assert {s.recent_message_log.maxlen for s in streams} == {0}
            names = list(procmem.worker_environ(cfg.round))
            assert procmem.mismatches(client.run(procmem.worker_variables, names), cfg.round) == {}
        assert dask.config.get("distributed.admin.system-monitor.interval") == "500ms"  # restored
    finally:
        pa.set_memory_pool(before)
    # the restart's nanny wrote the workers' variables into os.environ: given back on close
    assert {k: os.environ.get(k) for k in procmem.VARIABLES} == environ_before


class _FakeLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def mallopt(self, option: int, value: int) -> int:
        self.calls.append((option, value))
        return 1


def test_the_driver_gets_the_same_settings_through_mallopt(monkeypatch):
    libc = _FakeLibc()
    monkeypatch.setattr(procmem, "_libc", lambda: libc)
    section = Config().replace(round={"arrow_pool": "default"}).round
    procmem.apply_here(section)
    # glibc's <malloc.h>: M_ARENA_MAX -8, M_TRIM_THRESHOLD -1, M_MMAP_THRESHOLD -3
    assert libc.calls == [(-8, 2), (-1, 1 << 20), (-3, 1 << 18)]
    libc.calls.clear()
    zero = ("malloc_arena_max", "malloc_trim_threshold_bytes", "malloc_mmap_threshold_bytes")
    procmem.apply_here(
        Config().replace(round={**dict.fromkeys(zero, 0), "arrow_pool": "default"}).round
    )
    assert libc.calls == []


_FAULTS_PER_PAGE = """
import resource, numpy as np
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(100):  # a page's working set: five 100 KB buffers, written, then freed
    buffers = [np.ones(100_000, np.uint8) for _ in range(5)]
    del buffers
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 100)
"""


def _faults_per_page(env: dict[str, str]) -> float:
    """Minor page faults per page-sized working set in a fresh interpreter started with ``env`` (a
    fresh heap, as a worker's at start-up: later, free chunks left by imports can hide the
    effect)."""
    inherited = {
        k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"
    }
    done = subprocess.run(
        [sys.executable, "-c", _FAULTS_PER_PAGE],
        env={**inherited, **env}, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return float(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc tunables")
def test_a_pages_buffers_are_reused_not_faulted_in_anew():
    # Dask's MALLOC_TRIM_THRESHOLD_ (64 KB) returns the 500 KB at the top of the heap (less
    # glibc's 128 KiB top pad) each time they are freed, so each page faults them in again (~90
    # faults of 4 KiB pages); 1 MiB keeps them (~1).
    dask_only = {"MALLOC_TRIM_THRESHOLD_": "65536"}
    ours = {**dask_only, **procmem.worker_environ(Config().round)}
    refaulted = (500_000 - 128 * 1024) / resource.getpagesize()
    dask, mine = _faults_per_page(dask_only), _faults_per_page(ours)
    assert dask > refaulted / 2
    assert mine < max(1.0, dask / 10)


def test_defaults_and_off_settings():
    env = procmem.worker_environ(Config().round)
    assert env == {
        "MALLOC_ARENA_MAX": "2",
        "MALLOC_TRIM_THRESHOLD_": str(1 << 20),
        "MALLOC_MMAP_THRESHOLD_": str(1 << 18),
        "ARROW_DEFAULT_MEMORY_POOL": "system",
    }
    zero = ("malloc_arena_max", "malloc_trim_threshold_bytes", "malloc_mmap_threshold_bytes")
    off = Config().replace(round={**dict.fromkeys(zero, 0), "arrow_pool": "default"}).round
    assert procmem.worker_environ(off) == {}


def test_mismatches_name_each_variable_a_worker_lacks_or_has_otherwise():
    section = Config().round
    want = procmem.worker_environ(section)
    dask_default = {**want, "MALLOC_TRIM_THRESHOLD_": "65536"}
    unset = {k: v for k, v in want.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    got = procmem.mismatches({"a": want, "b": dask_default, "c": unset}, section)
    assert got == {"b": {"MALLOC_TRIM_THRESHOLD_": "65536"}, "c": {"MALLOC_MMAP_THRESHOLD_": None}}
