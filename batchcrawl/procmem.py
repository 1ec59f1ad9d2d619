"""Allocator settings of the crawler's processes (issue 16: the process tree's memory).

Two allocators keep memory a round freed instead of giving it back to the system:

* glibc's malloc gives each thread that allocates concurrently its own arena (up to 8 per core) and
  keeps freed chunks in each; a fetch worker's 8-16 fetch threads thus hold several arenas of
  freed page bodies and parse trees. ``MALLOC_ARENA_MAX`` caps the arenas (glibc manual, "Memory
  Allocation Tunables").
* pyarrow's default pool (mimalloc or jemalloc) keeps freed pages for reuse: the Arrow tables a
  shard builds from its rows at the end of each round stay counted in the worker's RSS. The system
  pool (malloc) lets them go with the rest.

And one setting of Dask's costs CPU: its workers start with ``MALLOC_TRIM_THRESHOLD_=65536``, so
free memory above 64 KB at the top of a heap goes back to the system at once. A 20 KB page's
working set (SimHash's prefix sums, the parse tree, WARC buffers: ~0.5 MB) is larger, so each
page's buffers were returned and faulted in anew, page by page: ~136 minor faults and 0.13 ms of
CPU per page in ``page_simhash`` alone, 2.34-2.46 against 2.10-2.26 ms of worker CPU per page in
``scripts/bench_fetch.py`` (docs/benchmarks.md, "Session 7"). Setting a threshold also stops glibc
from adapting its mmap threshold, which stays at 128 KB. ``round.malloc_trim_threshold_bytes`` (1
MiB) and ``round.malloc_mmap_threshold_bytes`` (256 KiB) replace Dask's: a page's buffers are
reused, larger blocks (Arrow tables, big bodies) are still mapped on their own, and at most 1 MiB
of free memory stays at the top of each arena until the round's :func:`trim`.

:func:`worker_environ` gives the environment a Dask worker process must start with (both
settings are read once, at start-up: Dask's ``distributed.nanny.pre-spawn-environ``);
:func:`apply_here` sets the same in an already-running process (the driver) through
``mallopt(3)`` and :func:`pyarrow.set_memory_pool`.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import logging
import os
from collections.abc import Iterator, Mapping
from unittest import mock

from batchcrawl.config import RoundSection

log = logging.getLogger(__name__)

#: ``M_ARENA_MAX``, ``M_TRIM_THRESHOLD`` and ``M_MMAP_THRESHOLD`` of glibc's ``<malloc.h>``.
_M_ARENA_MAX = -8
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: The environment variables :func:`worker_environ` may set.
VARIABLES = (
    "MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_",
    "ARROW_DEFAULT_MEMORY_POOL",
)  # fmt: skip


def worker_environ(section: RoundSection) -> dict[str, str]:
    """Environment variables for a worker process started under ``section``
    (``round.malloc_arena_max``, ``round.malloc_trim_threshold_bytes``,
    ``round.malloc_mmap_threshold_bytes``, ``round.arrow_pool``; 0 / ``"default"`` set nothing,
    leaving Dask's or glibc's own)."""
    env = {}
    if section.malloc_arena_max:
        env["MALLOC_ARENA_MAX"] = str(section.malloc_arena_max)
    if section.malloc_trim_threshold_bytes:
        env["MALLOC_TRIM_THRESHOLD_"] = str(section.malloc_trim_threshold_bytes)
    if section.malloc_mmap_threshold_bytes:
        env["MALLOC_MMAP_THRESHOLD_"] = str(section.malloc_mmap_threshold_bytes)
    if section.arrow_pool != "default":
        env["ARROW_DEFAULT_MEMORY_POOL"] = section.arrow_pool
    return env


def mismatches(
    environs: Mapping[str, Mapping[str, str]], section: RoundSection
) -> dict[str, dict[str, str | None]]:
    """Per process (``environs``: address -> its environment variables, as
    ``Client.run(worker_variables)`` returns them), the variables of :func:`worker_environ` that
    it lacks (None) or has with another value; processes that have them all are left out."""
    want = worker_environ(section)
    out = {}
    for address, env in environs.items():
        wrong = {k: env.get(k) for k, v in want.items() if env.get(k) != v}
        if wrong:
            out[address] = wrong
    return out


def worker_variables(names: list[str]) -> dict[str, str]:
    """The values of ``names`` in this process's environment (run on each worker by
    :func:`warn_unless_applied`)."""
    return {k: os.environ[k] for k in names if k in os.environ}


def warn_unless_applied(client, section: RoundSection) -> None:
    """Log one warning if workers of an existing Dask cluster (``client``) did not start with
    :func:`worker_environ` of ``section``: the crawler cannot set it for processes it did not
    start, and at Dask's own trim threshold a fetch worker spends ~10 % more CPU per page (module
    doc; docs/cluster.md says how to set it). Never raises: a worker that cannot be asked is
    skipped."""
    want = worker_environ(section)
    if not want:
        return
    try:
        environs = client.run(worker_variables, list(want))
    except Exception as exc:  # noqa: BLE001 - a check, not a step: the round goes on
        log.debug("could not read the workers' environment: %r", exc)
        return
    wrong = mismatches(environs, section)
    if not wrong:
        return
    address, values = next(iter(sorted(wrong.items())))
    found = ", ".join(f"{k}={values[k] or 'unset'} (want {want[k]})" for k in sorted(values))
    log.warning(
        "%d of %d workers of the cluster started without the crawler's allocator settings "
        "(%s: %s); set them in the workers' environment (docs/cluster.md, 'The allocator "
        "environment')",
        len(wrong), len(environs), address, found,
    )  # fmt: skip


def pre_spawn_environ(section: RoundSection) -> dict[str, object]:
    """What a Dask nanny starts a worker process with under ``section``: Dask's
    ``distributed.nanny.pre-spawn-environ`` with :func:`worker_environ` over it (values as Dask
    holds them; ``scripts/bench_fetch.py`` runs its worker in the same environment)."""
    import dask
    import distributed  # noqa: F401  (puts distributed's defaults into dask.config)

    return {**dask.config.get("distributed.nanny.pre-spawn-environ"), **worker_environ(section)}


@contextlib.contextmanager
def spawn_environ(section: RoundSection) -> Iterator[None]:
    """While Dask's nannies are created: :func:`worker_environ` in Dask's
    ``distributed.nanny.pre-spawn-environ`` (each nanny keeps it for the worker processes it
    starts and restarts) and in ``os.environ``, which Dask lets override that setting; the earlier
    values of ``os.environ`` are restored afterwards, so that a nanny that has put this cluster's
    values there does not decide the next cluster's."""
    import dask

    with (
        mock.patch.dict(os.environ, worker_environ(section)),
        dask.config.set({"distributed.nanny.pre-spawn-environ": pre_spawn_environ(section)}),
    ):
        yield


@contextlib.contextmanager
def environ_kept() -> Iterator[None]:
    """Give :data:`VARIABLES` of ``os.environ`` their earlier values on exit. Dask's ``Nanny``
    writes its ``pre-spawn-environ`` into this process's ``os.environ`` each time it starts a
    worker, restarts after :func:`spawn_environ` has exited included; without this, one
    cluster's values would stay for the next cluster (where 0 must mean Dask's own) and for
    every subprocess started later."""
    before = {k: os.environ.get(k) for k in VARIABLES}
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, looked up once (``find_library`` runs ``ldconfig``: not once per round)."""
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def trim() -> None:
    """Return the free memory of every malloc arena to the system (glibc's ``malloc_trim(0)``;
    a no-op on other C libraries): called once a shard has written its round, so that the next
    round's peak does not build on the last one's freed rows."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


def apply_here(section: RoundSection) -> None:
    """Apply ``section``'s allocator settings to this (running) process: cap glibc's malloc arenas
    created from now on (``mallopt(M_ARENA_MAX)``), set the trim and mmap thresholds
    (``round.malloc_trim_threshold_bytes``, ``round.malloc_mmap_threshold_bytes``; none of these
    on other C libraries), and make pyarrow's default memory pool the one named by
    ``round.arrow_pool``."""
    settings = [
        (_M_ARENA_MAX, section.malloc_arena_max),
        (_M_TRIM_THRESHOLD, section.malloc_trim_threshold_bytes),
        (_M_MMAP_THRESHOLD, section.malloc_mmap_threshold_bytes),
    ]
    options = [(option, value) for option, value in settings if value]
    libc = _libc()
    if options and libc is not None and hasattr(libc, "mallopt"):
        for option, value in options:
            libc.mallopt(option, value)
    elif options:
        log.debug("no mallopt in the C library: round.malloc_* not applied here")
    if section.arrow_pool != "default":
        import pyarrow as pa

        pools = {
            "system": pa.system_memory_pool,
            "jemalloc": pa.jemalloc_memory_pool,
            "mimalloc": pa.mimalloc_memory_pool,
        }
        pa.set_memory_pool(pools[section.arrow_pool]())
