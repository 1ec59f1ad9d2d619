"""One line for a round killed by its environment rather than by its input (issue 13, 11a): a
Dask worker lost mid-round (its process died, or it stopped answering) and a crawl directory that
cannot take writes (full, over quota, read-only).

Both leave the crawl safe: nothing of the round is committed (docs/design.md §7: a round that dies
before its commit leaves only orphan files), the last generation is intact and a rerun does the
round again. :func:`round_fault` says so, naming what failed and what to do, as a
:class:`~batchcrawl.errors.BatchcrawlError` with its documented exit code.
"""

from __future__ import annotations

from batchcrawl.errors import BatchcrawlError, CrawlDirError, WorkerLost
from batchcrawl.store.crawldir import CrawlDir, Manifest
from batchcrawl.store.faults import storage_fault

#: Text of distributed's error when an actor's worker cannot be reached (distributed/actor.py).
ACTOR_UNREACHABLE = "Unable to contact Actor's worker"
#: Text of distributed's ``RuntimeError`` for a call on an actor whose worker died (actor.py,
#: scheduler.py): what a stream's top-up of a shard actor met when a worker was killed (issue 34).
ACTOR_LOST = "Worker holding Actor was lost"


def is_lost_worker(exc: BaseException) -> bool:
    """True if ``exc`` is how distributed reports a worker that died or stopped answering:
    ``KilledWorker``, ``CommClosedError``, a cancelled future, the actor's ``OSError``, or the
    ``RuntimeError`` of a call on an actor whose worker is gone."""
    from distributed import KilledWorker
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    if isinstance(exc, KilledWorker | CommClosedError | FutureCancelledError):
        return True
    if isinstance(exc, RuntimeError) and ACTOR_LOST in str(exc):
        return True
    return isinstance(exc, OSError) and ACTOR_UNREACHABLE in str(exc)


def round_fault(
    crawl: CrawlDir, before: Manifest, exc: BaseException, stream: bool = False
) -> BatchcrawlError | None:
    """The one-line error for rounds of ``crawl`` (last manifest ``before`` the run) that failed
    with ``exc``; None if ``exc`` is neither a lost worker nor a storage fault. ``stream``: the
    rounds were a stream's micro-batches, and the message says so.

    Returns
    -------
    WorkerLost or CrawlDirError or None
        :class:`WorkerLost` (exit 5) for a lost worker, :class:`CrawlDirError` (exit 3) for a
        full or read-only crawl directory.
    """
    now = crawl.manifest()
    unit, units = ("micro-batch", "micro-batches") if stream else ("round", "rounds")
    state = (f"nothing of {unit} {now.round + 1} was committed and the last generation "
             f"({now.generation}, {unit} {now.round}) is intact")  # fmt: skip
    if now.round == before.round + 1:
        state += f" (this run committed {unit} {now.round})"
    elif now.round > before.round:
        state += f" (this run committed {units} {before.round + 1}-{now.round})"
    first = (str(exc).splitlines() or [""])[0]
    if (fault := storage_fault(exc)) is not None:
        where = f" writing {fault.filename}" if fault.filename else ""
        return CrawlDirError(
            f"the crawl directory cannot take writes{where} ({fault.strerror or first}); {state}; "
            "free space (or make it writable) and rerun; `batchcrawl gc` removes the partial files"
        )
    if is_lost_worker(exc):
        return WorkerLost(
            f"a Dask worker was lost during the {'stream' if stream else 'round'} "
            f"({type(exc).__name__}: {first}); {state}; "
            "rerun the command (check the workers' memory limit and logs if it happens again)"
        )
    return None
