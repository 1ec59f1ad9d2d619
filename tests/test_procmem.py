"""Allocator settings of the embedded cluster's processes (batchcrawl.procmem, issue 16 memory).

A real LocalCluster: its worker processes must start with ``round.malloc_arena_max`` and
``round.arrow_pool`` in force, and keep them when the nanny restarts a worker."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from batchcrawl import procmem
from batchcrawl.config import Config, loopback_test_config
from batchcrawl.round import dask_client


def _allocators() -> tuple[str | None, str]:
    import pyarrow

    return os.environ.get("MALLOC_ARENA_MAX"), pyarrow.default_memory_pool().backend_name


@pytest.mark.parametrize("pool", ["system", "mimalloc"])  # in turn: the first must not decide
def test_workers_start_with_the_configured_allocators_and_keep_them_after_a_restart(pool):
    cfg = loopback_test_config(round={"workers": 1, "malloc_arena_max": 3, "arrow_pool": pool})
    before = pa.default_memory_pool()
    try:
        with dask_client(cfg) as client:
            assert set(client.run(_allocators).values()) == {("3", pool)}
            assert pa.default_memory_pool().backend_name == pool  # the driver too
            client.restart()  # the nanny starts a new worker process
            assert set(client.run(_allocators).values()) == {("3", pool)}
    finally:
        pa.set_memory_pool(before)


def test_defaults_and_off_settings():
    env = procmem.worker_environ(Config().round)
    assert env == {"MALLOC_ARENA_MAX": "2", "ARROW_DEFAULT_MEMORY_POOL": "system"}
    off = Config().replace(round={"malloc_arena_max": 0, "arrow_pool": "default"}).round
    assert procmem.worker_environ(off) == {}
