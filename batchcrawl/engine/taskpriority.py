"""The CPU priority of the crawl's Dask tasks beside the fetch threads (issue 33: the politeness
bound at D = 1 s).

A fetch worker's process runs two kinds of threads: its fetch threads, which keep every host's
politeness schedule, and Dask's task threads, which run the frontier's work (a stream's selection
and micro-batch merges; a round's generate, update and compaction). While a merge runs on every
core, the kernel shares the cores out evenly among the runnable threads, and a host's next request
goes out late: a stream at D = 1 s over 500 hosts sent its requests 0.3-0.6 s late for the ~4 s of
each micro-batch (nginx's log), 0.88-0.92 of the politeness bound. A task thread at a higher nice
value (a lower priority: Linux's scheduler gives a thread at nice 10 about a tenth of the CPU one
at nice 0 gets when both want it, and all of it when the other does not) lets the fetch threads go
first; the merge takes what they leave (docs/benchmarks.md, "Issue 33, 2026-12-07, second
session").

Linux alone applies ``setpriority(PRIO_PROCESS, tid)`` to one thread (POSIX names the whole
process); elsewhere nothing is changed. Without privilege a thread's nice value can only be raised
(``RLIMIT_NICE``), so a task thread keeps it for its life: Dask's task threads run only tasks.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: Per thread: the nice value this module has set on it (0: none).
_thread = threading.local()


def lower_this_thread(nice: int) -> bool:
    """Give the calling thread at least nice value ``nice`` (Linux; 0 leaves it as it is).

    Parameters
    ----------
    nice
        A nice value, 0-19 (``round.task_nice``); a thread already at it or above is left alone.

    Returns
    -------
    bool
        True when the thread runs at ``nice`` or above on return. False where threads cannot be
        reniced one by one (not Linux), for ``nice`` 0, or when the system refused (logged at
        debug level; the task runs anyway).
    """
    if nice <= 0 or not sys.platform.startswith("linux"):
        return False
    if getattr(_thread, "nice", 0) >= nice:
        return True
    tid = threading.get_native_id()
    try:
        if os.getpriority(os.PRIO_PROCESS, tid) < nice:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
    except OSError as exc:  # a sandbox without setpriority: the task runs at its priority
        log.debug("task thread %d kept its priority: %s", tid, exc)
        return False
    _thread.nice = nice
    return True


def run_lowered(nice: int, fn: Callable[[T], R], item: T) -> R:
    """``fn(item)`` on the calling thread, lowered to ``nice`` first (:func:`lower_this_thread`)."""
    lower_this_thread(nice)
    return fn(item)


def lowered(fn: Callable[[T], R], nice: int) -> Callable[[T], R]:
    """``fn`` as a task function that runs at nice value ``nice`` (``fn`` itself for 0). The result
    pickles by reference to this module, so Dask ships it like ``fn``."""
    if nice <= 0:
        return fn
    task: Callable[[T], R] = partial(run_lowered, nice, fn)
    return task


__all__ = ["lower_this_thread", "lowered", "run_lowered"]
