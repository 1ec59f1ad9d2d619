"""The crawl's Dask tasks run below the fetch threads (``round.task_nice``,
:mod:`batchcrawl.engine.taskpriority`): on a real multi-process cluster, the threads that ran a
crawl's mapped tasks are at the configured nice value, and the worker processes' own threads (where
the fetch threads and the actors start from) are not."""

from __future__ import annotations

import os
import sys
import threading

import pytest
from round_helpers import round_config

from batchcrawl.engine.cluster import dask_client, dask_mapper
from batchcrawl.engine.taskpriority import lower_this_thread, lowered
from batchcrawl.round import Crawler

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="one thread's nice value is Linux's (setpriority)"
)


def thread_nice() -> int:
    """The calling thread's nice value (Linux: ``getpriority`` of its thread id)."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def in_new_thread(fn):
    """``fn()`` on a fresh thread (its nice value is then that thread's, not the test's)."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


def test_lowering_changes_the_calling_thread_only_and_only_upwards():
    base = thread_nice()
    want = min(base + 5, 19)

    def probe():
        first = lower_this_thread(want)
        again = lower_this_thread(max(want - 3, 1))  # lower than it is: left at want
        return first, again, thread_nice()

    assert in_new_thread(probe) == (True, True, want)
    assert thread_nice() == base  # the caller's thread kept its priority
    assert in_new_thread(lambda: (lower_this_thread(0), thread_nice())) == (False, base)


def test_lowered_task_functions_keep_their_results_and_pickle():
    import cloudpickle

    task = lowered(len, 4)
    assert cloudpickle.loads(cloudpickle.dumps(task))("abc") == 3
    assert lowered(len, 0) is len


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_crawls_tasks_run_lowered_on_the_workers_and_nothing_else_does():
    base = os.nice(0)  # the workers start from this process's nice value
    want = min(base + 7, 19)
    cfg = round_config(round={"workers": 2, "threads_per_worker": 2, "task_nice": want})

    def probe(_: int) -> tuple[int, int, int, str]:
        import os
        import threading

        from distributed import get_worker

        tid = threading.get_native_id()
        return (
            os.getpid(),
            os.getpriority(os.PRIO_PROCESS, tid),
            os.getpriority(os.PRIO_PROCESS, os.getpid()),  # the process's main thread
            str(get_worker().get_current_task()),
        )

    with dask_client(cfg) as client:
        plain = dask_mapper(client, 0)(probe, range(8))
        assert {nice for _, nice, _, _ in plain} == {base}  # 0: nothing changed
        crawler = Crawler(crawl_url="unused", client=client)
        done = crawler.mapper(cfg)(probe, range(16))
        assert {nice for _, nice, _, _ in done} == {want}
        assert {main for _, _, main, _ in done} == {base}  # the fetch threads' side is untouched
        assert os.getpid() not in {pid for pid, *_ in done}  # ran in the worker processes
        assert all(key.startswith("probe-") for *_, key in done)  # named after the step
    assert thread_nice() == base
