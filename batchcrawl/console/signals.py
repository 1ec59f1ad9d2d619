"""Stopping a running command cleanly on Ctrl-C (SIGINT) or SIGTERM (what Airflow and Kubernetes
send).

:func:`stop_on_signals` turns either signal into :class:`Interrupted`, a ``KeyboardInterrupt``
carrying the signal number, raised in the main thread: every ``with`` block unwinds (the writer lock
is released, the embedded Dask cluster closes) and the CLI prints one line and exits ``128 + signal``
(130 for SIGINT, 143 for SIGTERM, the shell's convention). A second signal during that cleanup gets
the default action (the process ends at once).

A terminal's Ctrl-C reaches the whole process group: the embedded LocalCluster's worker processes
too. They must not react (a KeyboardInterrupt traceback from each), and this process must never
miss it, not even while the cluster starts (issue 34: SIGINT was set to ignored for the start, so
that the workers would inherit that, and a Ctrl-C then was lost: the crawl ran on for minutes).
:func:`starting_workers` blocks SIGINT in the main thread while the cluster starts instead: the
mask is inherited by every thread created then and survives fork and exec, so the workers never
get it, while a signal still reaches this process (another thread takes it). Python runs a handler only in the main thread, and
a main thread waiting on a lock (``distributed``'s ``sync`` waits 10 s at a time) saw a signal taken
by another thread only at its next wake-up: the stop message came seconds late (issue 34: ~12 s to
exit). So a watcher thread reads the interpreter's signal wake-up fd and wakes the main thread at
once with :data:`WAKE_SIGNAL` (a no-op handler; the pending SIGINT/SIGTERM handler then runs).
Before a command's step begins (the CLI imports pyarrow, fsspec ...) :func:`exit_before_start`
ends the process at once with one line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator

#: The signals handled by :func:`stop_on_signals`.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """The process was asked to stop by signal ``signum``; ``exit_code`` is ``128 + signum``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = int(signum)
        self.exit_code = 128 + self.signum

    @property
    def signal_name(self) -> str:
        """``"SIGINT"``, ``"SIGTERM"``."""
        return signal.Signals(self.signum).name


def _raise_interrupted(signum: int, frame: object) -> None:
    for s in STOP_SIGNALS:  # a second signal: default action, the process ends at once
        signal.signal(s, signal.SIG_DFL)
    quiet_distributed_for_exit()
    raise Interrupted(signum)


def quiet_distributed_for_exit() -> None:
    """Silence ``distributed``'s loggers in this process for the rest of its life: it is
    stopping. Its nannies' watcher threads log a worker process that the interpreter's exit reaped
    first ("process N exit status was already read, will report exitcode 255"), at any moment,
    after the stop line too (issue 34; CI failed on that line after the stop message)."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def skip_final_collection() -> None:
    """Let a stopped command exit without the interpreter's last garbage collection: the CLI
    calls it after the stop line, once the lock is released and the cluster closed. At exit
    Python collects every generation while it tears the modules down, a walk of the whole heap:
    a ``crawl`` stopped mid-fetch printed its stop line 0.3-0.7 s after SIGTERM and exited 1.3-2.2 s
    later, in that walk (gdb; a shared 2-core machine; issue 34's target is 2 s). ``gc.freeze`` moves every object to the
    permanent generation, which that collection skips; objects are still freed by reference
    counting. Nothing uncommitted matters after a stop (the round reruns), so the finalizers of
    cyclic garbage left unrun lose nothing."""
    import gc

    gc.freeze()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread; the
    previous handlers come back when it ends. Outside the main thread it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; the caller's own handling stays
        return
    previous = {s: signal.signal(s, _raise_interrupted) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


#: Sent by the watcher thread to the main thread to wake it for a pending stop signal (no-op handler;
#: its default action is to ignore it, so nothing else in this process reacts to it).
WAKE_SIGNAL = signal.SIGURG

_watcher_lock = threading.Lock()
_watcher: threading.Thread | None = None


def route_stop_signals() -> bool:
    """From now on SIGINT and SIGTERM reach the main thread's handlers at once whichever thread the
    kernel gives them to (module docstring: the watcher thread and :data:`WAKE_SIGNAL`). Call it in
    the main thread. Process-wide, for the process's life; a second call changes nothing. Returns
    False (and does nothing) outside the main thread or when the interpreter's wake-up fd is
    already in use (by an asyncio loop in the main thread)."""
    global _watcher
    if threading.current_thread() is not threading.main_thread():
        return False
    with _watcher_lock:
        if _watcher is not None:
            return True
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        if previous != -1:
            signal.set_wakeup_fd(previous)  # someone else's: leave it as it was
            os.close(read_fd)
            os.close(write_fd)
            return False
        if signal.getsignal(WAKE_SIGNAL) in (signal.SIG_DFL, None):
            signal.signal(WAKE_SIGNAL, _wake)
        main_id = threading.main_thread().ident
        _watcher = threading.Thread(target=_watch, args=(read_fd, main_id), daemon=True,
                                    name="stop signal watcher")  # fmt: skip
        _watcher.start()
    return True


def exit_before_start() -> None:
    """Until :func:`stop_on_signals` or :func:`stop_requested` take over (and after they are left),
    SIGINT and SIGTERM end the process at once with one line on stderr and exit ``128 + signal``:
    nothing of a crawl is being changed then (issue 34: a signal while the CLI imported pyarrow
    printed a KeyboardInterrupt traceback, or ended it silently). Also unblocks them in the main
    thread: a parent that had them blocked (a test process that ran a cluster in-process, see
    :func:`starting_workers`) passed its mask on. The CLI calls it on its first lines."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in STOP_SIGNALS:
        signal.signal(s, _exit_at_once)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _exit_at_once(signum: int, frame: object) -> None:
    name = signal.Signals(signum).name
    os.write(2, f"batchcrawl: stopped by {name} outside a step: nothing was changed\n".encode())
    os._exit(128 + signum)


def _wake(signum: int, frame: object) -> None:
    """:data:`WAKE_SIGNAL`'s handler: nothing; its arrival lets the main thread run the pending
    handlers."""


def _watch(read_fd: int, main_id: int) -> None:
    while True:
        received = os.read(read_fd, 64)
        if any(b in STOP_SIGNALS for b in received):
            signal.pthread_kill(main_id, WAKE_SIGNAL)


@contextlib.contextmanager
def starting_workers() -> Iterator[None]:
    """Around the start of the embedded Dask cluster: SIGINT is blocked in the main thread inside
    the block, so the threads created there (the cluster's event loop, its process watchers) and
    the worker processes they start, then or later (a restart), never get it -- a terminal's
    Ctrl-C to the whole process group --, while this process still reacts to it at once, inside
    the block too (another thread takes it: :func:`route_stop_signals`). Multiprocessing's resource tracker is started first: starting it
    later, from the cluster's event loop thread, would unblock SIGINT there
    (``resource_tracker.ensure_running`` unblocks what it blocked for its own start), and every
    worker spawned from that thread would get Ctrl-C again.

    A cluster started inside the block is taken off distributed's exit hook, which closes every
    cluster still open at exit for up to 10 s: its owner closes it (``round.dask_client``, within
    2 s after a stop signal), and the hook closed it again after such a close ran out of time
    (issue 34: 12 s to exit after SIGTERM) or failed on the unstarted workers of a cluster a signal
    left half started (an AssertionError traceback after the stop message). Whatever is left ends
    with this process: a worker exits when its parent-alive pipe closes, and multiprocessing ends
    its daemonic children (the nannies' worker processes) at exit."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    from multiprocessing import resource_tracker

    from distributed.deploy.spec import SpecCluster

    resource_tracker.ensure_running()
    route_stop_signals()
    before = set(SpecCluster._instances)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})  # inherited by the new threads
    try:
        yield
    finally:
        for cluster in set(SpecCluster._instances) - before:
            cluster.shutdown_on_close = False  # its closing is its owner's: see the docstring
        # the processes this one starts later (subprocess) get Ctrl-C as usual
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


class StopRequest:
    """Set by SIGINT or SIGTERM inside :func:`stop_requested`: a streaming crawl polls it and stops
    at its next checkpoint instead of unwinding at once (``crawl --stream`` exits 0).

    Until the stream first polls it (:meth:`is_set`, :meth:`wait`) there is nothing to checkpoint:
    a signal then raises :class:`Interrupted` like :func:`stop_on_signals` (issue 34: a Ctrl-C while
    the cluster started waited for the whole start-up, 16-26 s, to take an empty checkpoint)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        self.polled = False

    def is_set(self) -> bool:
        """True once a stop signal came."""
        self.polled = True
        return self.event.is_set()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for a stop signal; True if one came."""
        self.polled = True
        return self.event.wait(max(0.0, timeout_s))

    @property
    def signal_name(self) -> str | None:
        """``"SIGINT"``, ``"SIGTERM"`` or None (no signal)."""
        return None if self.signum is None else signal.Signals(self.signum).name


@contextlib.contextmanager
def stop_requested() -> Iterator[StopRequest]:
    """Inside the block, SIGINT and SIGTERM set the yielded :class:`StopRequest` (a second signal
    gets the default action: the process ends at once), or raise :class:`Interrupted` before the
    request was first polled. Outside the main thread it changes nothing."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handler(signum: int, frame: object) -> None:
        if not request.polled:  # nothing to checkpoint yet: unwind
            _raise_interrupted(signum, frame)
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_DFL)
        quiet_distributed_for_exit()
        request.signum = int(signum)
        request.event.set()

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield request
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class AbandonedGatherFilter(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" records whose exception is
    ``distributed.client.AllExit``: when the client closes (after Ctrl-C or SIGTERM stopped a
    ``gather``), every key the gather was still waiting for raises ``AllExit`` in a task that
    ``distributed.utils.All`` stopped listening to after the first one (issue 34: 54 copies, 329
    lines, before the stop message). It is distributed's internal signal, not an error of the
    crawl. Every other record passes. Install it on the ``asyncio`` logger
    (:func:`quiet_abandoned_gathers`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__name__ == "AllExit"
                    and type(exc).__module__ == "distributed.client")  # fmt: skip


def quiet_abandoned_gathers() -> None:
    """Install :class:`AbandonedGatherFilter` on the ``asyncio`` logger (once)."""
    target = logging.getLogger("asyncio")
    if not any(isinstance(f, AbandonedGatherFilter) for f in target.filters):
        target.addFilter(AbandonedGatherFilter())
