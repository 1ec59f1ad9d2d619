"""The Dask side of every crawl driver (docs/design.md §7): the client (to an existing scheduler or
an embedded ``LocalCluster`` on 127.0.0.1), the mapper that runs one task per bucket on it, the
compaction tasks, and the crawl URL as the workers see it."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from batchcrawl import procmem, workersetup
from batchcrawl.config import Config
from batchcrawl.console.signals import (
    holding_stop,
    quiet_distributed_for_exit,
    raise_if_stopped,
    silence_distributed,
    starting_workers,
    stopping,
)
from batchcrawl.engine.taskpriority import lowered
from batchcrawl.errors import ClusterUnreachable, first_line
from batchcrawl.frontier import runs
from batchcrawl.frontier.runs import BucketFiles
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir

log = logging.getLogger(__name__)


def dask_mapper(client: Any, nice: int = 0) -> runs.Mapper:
    """A :data:`~batchcrawl.frontier.runs.Mapper` that runs one Dask task per item: the round's
    generate and update are the library's own drivers, mapped on the cluster. Each call is a safe
    point for a stop signal (:func:`~batchcrawl.console.signals.raise_if_stopped`). ``nice``
    (``round.task_nice``, 0-19) lowers the CPU priority of the threads that run the tasks below
    the fetch threads sharing their processes (:mod:`~batchcrawl.engine.taskpriority`)."""

    from dask.utils import funcname

    def mapper(fn: Callable[[Any], Any], items: Any) -> list[Any]:
        raise_if_stopped()
        task = lowered(fn, nice)  # named after fn on the dashboard, not the wrapper
        return client.gather(client.map(task, list(items), key=funcname(fn), pure=False))

    return mapper


def compact_task(crawl_url: str, files: BucketFiles, generation: int, cfg: Config) -> BucketFiles:
    """Compaction, one bucket: merge its runs into a new base (:func:`runs.compact_bucket`)."""
    return runs.compact_bucket(CrawlDir.open(crawl_url), files, generation, cfg)


def compact_buckets(
    mapper: runs.Mapper, crawl_url: str, buckets: list[BucketFiles], generation: int, cfg: Config
) -> list[BucketFiles]:
    """Compact, one task each through ``mapper``, the buckets whose runs passed
    ``frontier.max_runs`` or ``frontier.compact_run_ratio`` (:func:`runs.needs_compaction`); the
    others are returned as they are (the same objects). New bases are written for
    ``generation``; nothing is committed."""
    todo = [i for i, bf in enumerate(buckets) if runs.needs_compaction(bf, cfg)]
    task = functools.partial(compact_task, crawl_url, generation=generation, cfg=cfg)
    done = mapper(task, [buckets[i] for i in todo]) if todo else []
    out = list(buckets)
    for i, bf in zip(todo, done, strict=True):
        out[i] = bf
    return out


@contextlib.contextmanager
def dask_client(cfg: Config, scheduler: str | None = None) -> Iterator[Any]:
    """A ``distributed.Client``: to ``scheduler`` (an existing cluster; a warning names workers
    that lack the allocator settings, :func:`procmem.warn_unless_applied`) if given, else to an
    embedded ``LocalCluster`` of ``round.workers`` processes on 127.0.0.1 (closed on exit). Its
    workers are given the table schemas (:func:`workersetup.register`)."""
    import dask
    from distributed import Client

    address = scheduler or cfg.round.scheduler
    if address:
        timeout = cfg.round.connect_timeout_s
        try:
            client = Client(address, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            first = first_line(exc)
            raise ClusterUnreachable(
                f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({first}); "
                "check that it runs and the address, or raise round.connect_timeout_s"
            ) from None
        with client:
            procmem.warn_unless_applied(client, cfg.round)
            workersetup.register(client)
            yield client
        return
    # nannies write the workers' variables into os.environ; EMBEDDED_CLUSTER_CONFIG holds for the
    # cluster's whole life in this process, where its scheduler reads some settings again later
    # (the stream to a worker that registers after a restart, to a client that reconnects)
    with procmem.environ_kept(), dask.config.set(EMBEDDED_CLUSTER_CONFIG):
        prepared = _in_background(schemas.prepare_without_duckdb)  # while the workers start
        cluster = client = None
        timeout: float | None = None
        interrupted = False
        try:
            # a stop signal meanwhile is held until the cluster and its client exist, then raised
            # here: the cluster is closed whole; the workers never see Ctrl-C
            with starting_workers():
                cluster = _local_cluster(cfg)
            raise_if_stopped()
            prepared.result()  # a child process: a stop meanwhile closes the whole cluster
            with holding_stop():  # a client is not unwound half made either
                client = Client(cluster)
            raise_if_stopped()
            workersetup.register(client)
            with lost_workers_said_once():
                yield client
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM (signals.Interrupted) unwinding a round
            interrupted = True
            raise
        finally:
            # A stop (a round unwinding, or a stream whose last checkpoint after a signal is
            # committed): do not wait for the workers to say goodbye; nothing uncommitted matters
            # (the round reruns whole). Their nannies stop them within STOP_WORKER_TIMEOUT_S (a
            # worker busy in a fetch took the whole 2 s close timeout and was killed only by the
            # interpreter's exit: exit 2.4-2.6 s after SIGTERM, issue 34)
            if interrupted or stopping():
                timeout = 2
                quiet_distributed_for_exit()
            # the results are in: what closing makes the processes log (a worker's heartbeat to
            # the scheduler that just closed) is not an error of the crawl
            dist_log = logging.getLogger("distributed")
            level = dist_log.level
            with contextlib.suppress(Exception):
                if timeout is None and client is not None:
                    client.run(_quiet_distributed, wait=True)
            dist_log.setLevel(logging.CRITICAL)
            if timeout is not None and cluster is not None:  # a stop signal: the workers'
                with contextlib.suppress(Exception):  # running tasks are abandoned
                    _stop_workers_now(cluster, client, STOP_WORKER_TIMEOUT_S)
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close(timeout=timeout)
            if cluster is not None:
                with contextlib.suppress(Exception):
                    cluster.close(timeout=timeout)
            dist_log.setLevel(level)


#: The starts of the records a lost worker makes the scheduler and the client print: "Removing
#: worker ... caused the cluster to lose already computed task(s)", the scheduler's ERROR
#: "Couldn't gather keys {...}" and the client's WARNING "Couldn't gather 30 keys, rescheduling"
#: (a stream's worker killed mid-gather: issue 34, 4th fresh-user trial).
LOST_WORKER_RECORDS = ("Removing worker", "Couldn't gather ")


class _LostWorkerRecords(logging.Filter):
    """Turns the embedded scheduler's and the client's records of a lost worker
    (:data:`LOST_WORKER_RECORDS`) into DEBUG lines of ``batchcrawl.engine.cluster``
    (:func:`lost_workers_said_once`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.getMessage().startswith(LOST_WORKER_RECORDS):
            return True
        log.debug("distributed: %s", record.getMessage())
        return False


@contextlib.contextmanager
def lost_workers_said_once() -> Iterator[None]:
    """Inside the block, the embedded scheduler (it runs in this process and logs on its stderr)
    does not print "Removing worker 'tcp://...' caused the cluster to lose already computed
    task(s) ... {keys}": a worker lost mid-round or mid-stream ends the command with one line of
    its own, naming the loss and what is intact (exit 5, :func:`batchcrawl.console.faults.round_fault`).
    A stream whose killed worker held a micro-batch's results printed that record before it
    (issue 34, a fresh-user trial). With ``-vv`` the record is a DEBUG line."""
    loggers = [logging.getLogger(n) for n in ("distributed.scheduler", "distributed.client")]
    said_once = _LostWorkerRecords()
    for logger in loggers:
        logger.addFilter(said_once)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(said_once)


#: Seconds a worker of the embedded cluster is given to stop after a stop signal before its nanny
#: kills it (its running tasks are abandoned: nothing uncommitted matters, the round reruns).
STOP_WORKER_TIMEOUT_S = 0.25


def _stop_workers_now(cluster: Any, client: Any, timeout_s: float) -> None:
    """Close every nanny of the embedded ``cluster`` at once, in parallel: each asks its worker
    process to stop and kills it after ``0.8 * timeout_s`` (distributed's ``WorkerProcess.kill``),
    then reaps it. A nanny that is closing does not restart its worker. Without it the cluster's
    close waits for the workers' running tasks (a fetch holding a slow response) the whole
    timeout, and the worker processes are killed only by the interpreter's exit.

    First the workers' ``distributed`` loggers are silenced (through ``client``, at most
    ``timeout_s``): a worker logs on its own stderr, and the tasks the stop cancels printed
    "Async instruction for <Task cancelled ...> ended with CancelledError" after the stop line
    (issue 34)."""
    import asyncio

    async def close_all() -> None:
        if client is not None:
            with contextlib.suppress(Exception, asyncio.TimeoutError):
                await asyncio.wait_for(
                    client._run(_quiet_distributed, wait=True, on_error="ignore"), timeout_s
                )
        nannies = list(cluster.workers.values())
        await asyncio.gather(*(n.close(timeout=timeout_s) for n in nannies),
                             return_exceptions=True)  # fmt: skip

    cluster.sync(close_all, callback_timeout=5 * timeout_s + 1)


def _in_background(fn: Callable[[], None]) -> Future:
    """Run ``fn`` in a daemon thread; its future. The embedded cluster's driver derives its table
    schemas (:func:`schemas.prepare_without_duckdb`: a child process, ~0.3 s, more on a loaded
    machine) while its worker processes start instead of after (issue 30: a ``batchcrawl
    round`` process's start-up). A daemon thread: a stop signal meanwhile does not wait for it."""
    done: Future = Future()

    def run() -> None:
        try:
            fn()
        except BaseException as exc:  # handed to the caller's result()
            done.set_exception(exc)
        else:
            done.set_result(None)

    threading.Thread(target=run, name="batchcrawl-schemas", daemon=True).start()
    return done


def _quiet_distributed() -> None:
    """Silence ``distributed``'s loggers in this (worker) process: its cluster is closing."""
    silence_distributed()


#: Dask settings of the embedded cluster, set in this process for the cluster's whole life
#: (:func:`dask_client`): its scheduler and nannies (here) read them when they are made, the
#: scheduler again for each worker that registers, and each nanny hands them to the worker
#: processes it starts and restarts (:func:`_embedded_worker_config`). An existing cluster keeps
#: its own.
#:
#: * No statistical profiler in the workers: it feeds the dashboard, which the embedded cluster
#:   does not serve, and costs every worker's event loop a walk of every thread's stack each
#:   10 ms: 0.6 s of CPU per worker per 100 s at D = 0 (its main thread 3.8 -> 3.3 s;
#:   docs/benchmarks.md, "Session 9").
#: * Dask's system monitor (``psutil`` reads of the process's memory, CPU, file descriptors and
#:   disk counters) every 2 s instead of 0.5 s, and the memory monitor of each nanny (the
#:   ``terminate`` fraction) and worker (``pause``) every 1 s instead of 0.1 s: both wake an event
#:   loop that then contends for the GIL with the fetch threads. Two pairs of
#:   ``scripts/bench_peers.py --crawlers batchcrawl --seconds 60`` runs: 3.33 -> 3.04 and 3.33 ->
#:   3.16 ms of the tree's CPU per page (docs/benchmarks.md, "Issue 33, 2026-12-06"). A crawl's
#:   memory grows with its fetch lists and spills, not in bursts a second would miss.
#: * No developer logs of Dask's own (``distributed.admin.low-level-log-length``: the recent
#:   messages of every batched stream, the scheduler's transition log, the workers' stimulus and
#:   state logs). Each kept the last 1,000 entries, a stream's messages whole when under 1 MB: the
#:   driver held every task it had sent with its arguments (the keyset and frontier tasks carry
#:   Arrow tables), about 900 message frames more per round on the 500-host benchmark web, until
#:   1,000 messages per stream; in a stream, whose micro-batches send tasks every few seconds for
#:   weeks, that bound is memory kept for nothing (docs/benchmarks.md, "Issue 33, 2026-12-06").
#:   The same setting empties the scheduler's event log (``Client.get_events``), which the crawler
#:   does not read.
EMBEDDED_CLUSTER_CONFIG = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.worker.memory.monitor-interval": "1s",
    "distributed.admin.low-level-log-length": 0,
}


def _embedded_worker_config() -> dict[str, Any]:
    """The ``config`` each Nanny of the embedded cluster gives the worker processes it starts and
    restarts: this process's ``distributed`` settings (a copy, taken while
    :data:`EMBEDDED_CLUSTER_CONFIG` is set). A Nanny merges its ``config`` over the global one key
    by key at the top level only, and keeps it for restarts, so the whole ``distributed`` section
    is passed."""
    import copy

    import dask

    return {"distributed": copy.deepcopy(dask.config.get("distributed"))}


def _local_cluster(cfg: Config) -> Any:
    """The embedded ``LocalCluster``: ``round.workers`` processes, everything on 127.0.0.1, with
    the allocator settings (``round.malloc_*``, ``round.arrow_pool``) in them and in this process
    (:mod:`batchcrawl.procmem`), and :data:`EMBEDDED_CLUSTER_CONFIG` (which the caller has set)
    in all its servers."""
    from distributed import LocalCluster

    _quiet_worker_restarts()
    procmem.apply_here(cfg.round)
    with procmem.spawn_environ(cfg.round):
        # each Nanny reads the environment and its settings here, once: a restarted worker
        # gets them too
        return LocalCluster(
            n_workers=cfg.round.workers,
            threads_per_worker=cfg.round.threads_per_worker,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            # no dashboard, but the scheduler's HTTP server still listens: on loopback, on an
            # ephemeral port (its default is the fixed :8787 on every interface)
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            silence_logs=logging.WARNING,
            config=_embedded_worker_config(),
        )


class _RedundantRecords(logging.Filter):
    """Drops two records of the embedded cluster that only precede an error of our own when one
    of its worker processes died (killed, out of memory; issue 34: a lost worker printed them
    before the round's one line, :class:`~batchcrawl.errors.WorkerLost`, exit 5): the nanny's
    "Restarting worker (status=...)" and the scheduler's "broadcast to ... failed" (a shard
    actor's call to the dead worker: the caller gets the error, and the round turns it into
    WorkerLost). A task-only step is recomputed by Dask on the restarted worker."""

    PREFIXES = ("Restarting worker", "broadcast to ")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.PREFIXES)


def _quiet_worker_restarts() -> None:
    """Install :class:`_RedundantRecords` on ``distributed.nanny`` and ``distributed.scheduler``
    (once per process)."""
    for name in ("distributed.nanny", "distributed.scheduler"):
        target = logging.getLogger(name)
        if not any(isinstance(f, _RedundantRecords) for f in target.filters):
            target.addFilter(_RedundantRecords())


def cluster_url(crawl_url: str) -> str:
    """``crawl_url`` as every Dask worker must see it: a local path made absolute (a worker's
    working directory is not ours), a remote URL unchanged."""
    crawl = CrawlDir(crawl_url)
    return os.path.abspath(crawl.root) if crawl.local else crawl_url
