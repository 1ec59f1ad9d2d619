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
:func:`starting_workers` blocks SIGINT (and SIGTERM) in the main thread while the cluster starts instead: the
mask is inherited by every thread created then and survives fork and exec, so the workers never
get it, while a signal still reaches this process (another thread takes it). Python runs a handler only in the main thread, and
a main thread waiting on a lock (``distributed``'s ``sync`` waits 10 s at a time) saw a signal taken
by another thread only at its next wake-up: the stop message came seconds late (issue 34: ~12 s to
exit). So a watcher thread reads the interpreter's signal wake-up fd and wakes the main thread at
once with :data:`WAKE_SIGNAL` (a no-op handler; the pending SIGINT/SIGTERM handler then runs).
Before a command's step begins (the CLI imports pyarrow, fsspec ...)
:func:`batchcrawl.console.early.exit_before_start` ends the process at once with one line.

The handler records the signal and raises only where that is safe (:func:`_raise_when_safe`): not
inside importlib's machinery or an extension module's initialisation (importlib's locks and Rust
extensions print their own errors for a ``KeyboardInterrupt`` raised there), and not while the embedded cluster starts
(:func:`holding_stop`; its owner raises at the first safe point, :func:`raise_if_stopped`, which
the cluster's mapper also calls before each step, so a stop is never lost to code that swallowed
the exception).
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

from batchcrawl.console.early import STOP_SIGNALS  # the signals handled here too


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


class _StopState:
    """The stop signal this process received (:func:`_raise_interrupted`), kept until the block
    that installed the handler ends: ``signum`` (None: none came), whether :class:`Interrupted`
    was raised for it, and how many :func:`holding_stop` blocks the main thread is in."""

    signum: int | None = None
    raised = False
    holding = 0
    #: Called once, in the main thread, when a stop signal comes inside the outermost hold.
    on_stop: Callable[[], None] | None = None
    #: The request of the :func:`stop_requested` block the process is in (a stream), if any.
    request: StopRequest | None = None


_state = _StopState()


def _raise_interrupted(signum: int, frame: object) -> None:
    """The stop signals' handler: record ``signum`` and raise :class:`Interrupted` in the main
    thread, now if that is safe, else as soon as it is (:func:`_raise_when_safe`)."""
    _second_stop_ends_process()
    quiet_distributed_for_exit()
    if _state.signum is None:
        _state.signum = int(signum)
        if _state.holding and _state.on_stop is not None:
            _state.on_stop()  # cut the held start short (starting_workers)
    _raise_when_safe(frame)


def _raise_when_safe(frame: object) -> None:
    """Raise :class:`Interrupted` for the recorded stop signal, once, unless the main thread is
    where an exception must not land: inside a :func:`holding_stop` block (the owner raises at
    its end, :func:`raise_if_stopped`), or where code cannot unwind cleanly (:func:`_cannot_unwind`:
    an import, fsspec, the writer lock's file operations). There the watcher thread wakes the
    main thread again every :data:`POKE_S` seconds until it is out of it."""
    if _state.signum is None or _state.raised or _state.holding:
        return
    if _cannot_unwind(frame) and _watcher is not None:
        return  # the watcher pokes again (_watch)
    _state.raised = True
    raise Interrupted(_state.signum)


#: Modules whose code must not be cut by a raised stop (:func:`_cannot_unwind`), by ``__name__``
#: prefix: fsspec's ``exists`` (and more) catch every exception with a bare ``except:`` and answer
#: False (CI, issue 34: a demo stopped between two rounds reported its crawl as "not a crawl
#: directory (no crawl.toml)"); the writer lock writes, rewrites and removes its file in steps (a
#: stop between them left ``_lock.json`` or a ``_lock.json.tmp-*`` file behind), and so does the
#: publication of a commit's manifest (:mod:`batchcrawl.store.publish`).
_NOT_CUT = ("fsspec.", "batchcrawl.store.lock", "batchcrawl.store.publish")


def _cannot_unwind(frame: object) -> bool:
    """Whether an exception raised in ``frame`` (the main thread's, as a signal handler gets it)
    would land where it cannot unwind cleanly: in importlib's own machinery (its module locks:
    "Exception ignored in _get_module_lock"), anywhere inside an extension module's
    initialisation (a Rust extension turns it into a pyo3 ``PanicException``), or inside code of
    :data:`_NOT_CUT` (it swallows the exception, or leaves a file half changed). A pure-Python
    module's top-level code unwinds like any other code: a stop inside ``import distributed``
    (1.5 s on a loaded machine) is not delayed."""
    f = frame
    if f is not None and f.f_code.co_filename.startswith("<frozen importlib"):  # type: ignore[attr-defined]
        return True
    while f is not None:
        code = f.f_code  # type: ignore[attr-defined]
        if (code.co_name in ("create_module", "exec_module")
                and code.co_filename.startswith("<frozen importlib")
                and type(f.f_locals.get("self")).__name__ == "ExtensionFileLoader"):  # type: ignore[attr-defined]  # fmt: skip
            return True
        if f"{f.f_globals.get('__name__', '')}.".startswith(_NOT_CUT):  # type: ignore[attr-defined]
            return True
        f = f.f_back  # type: ignore[attr-defined]
    return False


def raise_if_stopped() -> None:
    """A safe point: raise :class:`Interrupted` if a stop signal came (also when it was raised
    before and something swallowed it). Call it in the main thread, outside :func:`holding_stop`
    blocks."""
    if _state.signum is not None:
        _state.raised = True
        raise Interrupted(_state.signum)


def stop_behind(exc: BaseException) -> Interrupted | None:
    """The :class:`Interrupted` to raise instead of ``exc`` when a stop signal came and a library
    turned the :class:`KeyboardInterrupt` it got into another exception: DuckDB interrupts the
    running query and raises ``RuntimeError("Query interrupted")`` (issue 34, a fresh-user trial:
    Ctrl-C in ``status``, ``sql`` or ``report`` printed that traceback and exited 1). None when no
    stop signal came, or ``exc`` is the stop itself."""
    if _state.signum is None or isinstance(exc, KeyboardInterrupt):
        return None
    _state.raised = True
    return Interrupted(_state.signum)


def _forget_stop() -> None:
    _state.signum = None
    _state.raised = False


@contextlib.contextmanager
def holding_stop(on_stop: Callable[[], None] | None = None) -> Iterator[None]:
    """Inside the block a stop signal is recorded but not raised; the caller raises it at its
    first safe point after the block (:func:`raise_if_stopped`). For a start that must not be
    unwound half done: the embedded cluster's (see :func:`starting_workers`). ``on_stop`` is
    called (once, in the main thread, from the signal handler) when a stop signal comes inside
    the block: it may make what the block waits for end sooner, not raise."""
    outer = _state.holding == 0
    _state.holding += 1
    if outer:
        _state.on_stop = on_stop
    try:
        yield
    finally:
        _state.holding -= 1
        if outer:
            _state.on_stop = None


#: The warning filter (``-W``) given to multiprocessing's resource tracker: :func:`quiet_resource_tracker`.
TRACKER_WARNINGS = "ignore:resource_tracker:UserWarning"


def quiet_resource_tracker() -> None:
    """Let multiprocessing's resource tracker, started after this call, keep quiet about leaked
    semaphores. A second Ctrl-C ends this process at once (the default
    action), before the cluster's semaphores are released; the tracker then removes them, as it
    exists to, and printed "resource_tracker: There appear to be 12 leaked semaphore objects to
    clean up at shutdown" with its source line after the stop (issue 34, a fresh-user trial). The
    tracker is a ``python -c`` child that gets this interpreter's ``-W`` options
    (``multiprocessing.util._args_from_interpreter_flags`` reads ``sys.warnoptions``), so the
    filter is added there before it starts; the tracker still removes what it finds."""
    if TRACKER_WARNINGS not in sys.warnoptions:
        sys.warnoptions.append(TRACKER_WARNINGS)


def quiet_distributed_for_exit() -> None:
    """Silence ``distributed``'s loggers in this process for the rest of its life: it is
    stopping. Its nannies' watcher threads log a worker process that the interpreter's exit reaped
    first ("process N exit status was already read, will report exitcode 255"), at any moment,
    after the stop line too (issue 34; CI failed on that line after the stop message)."""
    silence_distributed()
    # and asyncio's "Task exception was never retrieved" of what the stop cut short
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)


def silence_distributed() -> None:
    """Set ``distributed`` and every child logger that has a level of its own to CRITICAL in this
    process: Dask's logging configuration gives ``distributed.client`` WARNING, so silencing the
    parent alone let "Couldn't gather 64 keys, rescheduling" (3,900 characters) through after a
    stop during an update (a fresh-user trial, issue 34)."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)
    for name in list(logging.root.manager.loggerDict):
        child = logging.getLogger(name)
        if name.startswith("distributed.") and child.level != logging.NOTSET:
            child.setLevel(logging.CRITICAL)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Inside the block, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread; the
    previous handlers come back when it ends. Outside the main thread it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers; the caller's own handling stays
        return
    route_stop_signals()  # a signal that came inside an import is raised right after it
    previous = {s: signal.signal(s, _raise_interrupted) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _forget_stop()


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


def _wake(signum: int, frame: object) -> None:
    """:data:`WAKE_SIGNAL`'s handler: its arrival lets the main thread run the pending handlers;
    a stop signal that came while the main thread imported is raised now if that is safe."""
    _raise_when_safe(frame)


#: Seconds between the watcher's wake-ups of a main thread that was importing when a stop signal
#: came (:func:`_raise_when_safe`).
POKE_S = 0.02


_exit_lock = threading.Lock()


def _second_stop_ends_process() -> None:
    """After a first stop signal, a second one ends the process at once (:func:`exit_at_once`),
    from its Python handler in the main thread or from the watcher thread (:func:`_watch`), which
    does not wait for the main thread to come back from C code."""
    for s in STOP_SIGNALS:
        signal.signal(s, lambda signum, frame: exit_at_once(signum))


def exit_at_once(signum: int) -> None:
    """A second stop signal: end the process now, without the clean-up the first one started
    (the README's exit codes). First the worker processes this process started are killed (they
    would go on writing to the crawl), then the writer lock this process holds is removed (the
    next command then starts without taking over a dead holder's lock), one line is written, and
    the process exits with ``128 + signum``. What was not committed is left as the next command
    finds after any stop: orphan files for ``gc``, a stream's open WARC files cut back to their
    committed end (issue 34, 4th fresh-user trial: the process died silently and left its lock)."""
    if not _exit_lock.acquire(blocking=False):
        return  # the other thread is ending the process
    name = signal.Signals(signum).name
    with contextlib.suppress(Exception):
        _kill_children(set())
    lock = sys.modules.get("batchcrawl.store.lock")  # not imported: no lock taken
    with contextlib.suppress(Exception):
        if lock is not None:
            lock.remove_held_for_exit()
    with contextlib.suppress(OSError):
        os.write(2, f"batchcrawl: stopped at once by a second {name}: committed generations are "
                    "intact; what was not committed is redone by the next run\n".encode())  # fmt: skip
    os._exit(128 + signum)


def _watch(read_fd: int, main_id: int) -> None:
    import select

    stops = 0
    while True:
        pending = _state.signum is not None and not _state.raised
        waiting = pending and not _state.holding
        cutting = _state.on_stop if pending and _state.holding else None
        timeout = POKE_S if waiting or cutting is not None else None
        ready, _, _ = select.select([read_fd], [], [], timeout)
        received = os.read(read_fd, 64) if ready else b""
        if cutting is not None:  # a held start: what it started since the last call, too
            cutting()
        for b in received:
            if b in STOP_SIGNALS:
                stops += 1
                if stops >= 2 and stopping():  # a second stop signal
                    exit_at_once(b)
        if any(b in STOP_SIGNALS for b in received):
            interrupt_queries()
        if any(b in STOP_SIGNALS for b in received) or (waiting and not ready):
            signal.pthread_kill(main_id, WAKE_SIGNAL)


def interrupt_queries() -> None:
    """Interrupt the DuckDB queries this process runs (:data:`batchcrawl.store.sql.
    OPEN_CONNECTIONS`, when that module is loaded; looked up, not imported: it is a lower layer
    and loads DuckDB). The main thread's wait for a running query never looks at the signal
    flags, so a stop signal alone does not end it (``sql``, ``status``, ``report``: the query ran
    on after Ctrl-C); ``DuckDBPyConnection.interrupt`` from this thread ends it with
    ``InterruptException``, which :func:`stop_behind` turns into the stop. Called by the watcher
    thread when a stop signal comes; a closed connection's error is ignored."""
    sql = sys.modules.get("batchcrawl.store.sql")
    try:
        connections = list(getattr(sql, "OPEN_CONNECTIONS", ()))
    except RuntimeError:  # the set changed while it was copied (the main thread connected)
        connections = list(getattr(sql, "OPEN_CONNECTIONS", ()))
    for con in connections:
        with contextlib.suppress(Exception):
            con.interrupt()


@contextlib.contextmanager
def starting_workers() -> Iterator[None]:
    """Around the start of the embedded Dask cluster: SIGINT and SIGTERM are blocked in the main
    thread inside the block, so the threads created there (the cluster's event loop, its process
    watchers) and the worker processes they start, then or later (a restart), never get them -- a
    terminal's Ctrl-C to the whole process group, or systemd's SIGTERM to the whole control group
    (issue 34: a ``round`` sent ``kill -TERM -PGID`` lost its workers to the signal, then waited
    forever for its shard actors, or ended as "a Dask worker was lost") --, while this process still
    reacts to them at once, inside the block too (another thread takes them:
    :func:`route_stop_signals`). The nannies stop their workers by message and SIGKILL, never by
    SIGTERM, so the block changes nothing in a normal close. Multiprocessing's resource tracker is started first: starting it
    later, from the cluster's event loop thread, would unblock SIGINT there
    (``resource_tracker.ensure_running`` unblocks what it blocked for its own start), and every
    worker spawned from that thread would get Ctrl-C again.

    A stop signal inside the block is held (:func:`holding_stop`): its owner raises it once the
    cluster and its client exist, inside the block that closes them (:func:`raise_if_stopped`).
    Unwinding a half-started cluster printed, after the stop line, its nannies' "Task exception
    was never retrieved ... Nanny failed to start" and its spawned workers' ``SemLock._rebuild``
    FileNotFoundError (the parent had gone before the child read its semaphore): issue 34, CI,
    ~1 in 40 stops at 0.5-1.5 s. The start is cut short instead (:func:`_kill_children`: its
    worker processes are killed, so it fails at once; waiting for it took 3-5 s on a loaded
    machine), and its failure is the stop.

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

    quiet_resource_tracker()
    resource_tracker.ensure_running()
    route_stop_signals()
    before = set(SpecCluster._instances)
    children_before = set(multiprocessing.active_children())
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)  # inherited by the new threads
    try:
        with holding_stop(on_stop=lambda: _kill_children(children_before)):
            yield
    except Exception:
        if _state.signum is None:
            raise
        # the start failed because a stop signal cut it short (_kill_children): the stop it is
        raise_if_stopped()
    finally:
        for cluster in set(SpecCluster._instances) - before:
            cluster.shutdown_on_close = False  # its closing is its owner's: see the docstring
        # the processes this one starts later (subprocess) get Ctrl-C as usual
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)


def _kill_children(spared: set) -> None:
    """A stop signal came while the embedded cluster started: SIGKILL the worker processes
    started meanwhile (``multiprocessing`` children not in ``spared``), so that their nannies' start
    fails now instead of waiting for them to start (3-5 s on a loaded machine) only to be closed.
    A killed process prints nothing; what the failed start logs in this process (``distributed``,
    asyncio's "Task exception was never retrieved") is silenced; the start still ends in this
    process before the stop is raised, so no child is left to find its parent gone. Called by
    the signal handler, then every :data:`POKE_S` seconds by the watcher thread until the start
    has ended (for a process spawned after the first call)."""
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    try:  # not active_children(): it reaps, and the watcher thread calls this too
        children = list(multiprocessing.process._children)  # type: ignore[attr-defined]
    except RuntimeError:  # the set changed while copied (a process started): next call
        return
    for child in children:
        if child not in spared:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                child.kill()


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
            return  # held (a cluster start, an import): raised at the next safe point
        _second_stop_ends_process()
        quiet_distributed_for_exit()
        request.signum = int(signum)
        request.event.set()

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    _state.request = request
    try:
        yield request
    finally:
        _state.request = None
        for s, h in previous.items():
            signal.signal(s, h)
        _forget_stop()


def stopping() -> bool:
    """Whether this process was asked to stop by a signal inside :func:`stop_on_signals` or
    :func:`stop_requested`: the embedded cluster is then closed at once, not gracefully
    (``engine.cluster.dask_client``), also after a stream's last checkpoint, when nothing
    uncommitted is left (0.4 s of a stop's 0.9 s went to the graceful close, issue 34)."""
    request = _state.request
    return _state.signum is not None or (request is not None and request.signum is not None)


class AbandonedGatherFilter(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" records whose exception is
    ``distributed.client.AllExit``: when the client closes (after Ctrl-C or SIGTERM stopped a
    ``gather``), every key the gather was still waiting for raises ``AllExit`` in a task that
    ``distributed.utils.All`` stopped listening to after the first one (issue 34: 54 copies, 329
    lines, before the stop message). It is distributed's internal signal, not an error of the
    crawl. Every other record passes. Install it on the ``asyncio`` logger
    (:func:`quiet_stop_races`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__name__ == "AllExit"
                    and type(exc).__module__ == "distributed.client")  # fmt: skip


class UnstartedSyncCancelFilter(logging.Filter):
    """Drops tornado's "Exception in callback ... sync.<locals>.cancel" records whose exception
    is the ``NameError`` of ``distributed.utils.sync``'s ``cancel`` callback: a stop signal that
    comes before ``sync`` has created its future schedules ``cancel``, which then reads the unset
    ``future`` (a race inside distributed; CI, a SIGINT mid-round printed 10 lines of traceback
    before the stop line). The stop itself goes on as usual. Every other record passes. Install
    it on the ``tornado.application`` logger (:func:`quiet_stop_races`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, NameError) or exc.__traceback__ is None:
            return True
        tb = exc.__traceback__
        while tb.tb_next is not None:
            tb = tb.tb_next
        code = tb.tb_frame.f_code
        return not (code.co_name == "cancel"
                    and code.co_filename.replace("\\", "/").endswith("distributed/utils.py"))  # fmt: skip


def quiet_stop_races() -> None:
    """Keep distributed's own races after a stop signal out of the output: install
    :class:`AbandonedGatherFilter` on the ``asyncio`` logger and
    :class:`UnstartedSyncCancelFilter` on ``tornado.application`` (once each)."""
    for name, kind in (("asyncio", AbandonedGatherFilter),
                       ("tornado.application", UnstartedSyncCancelFilter)):  # fmt: skip
        target = logging.getLogger(name)
        if not any(isinstance(f, kind) for f in target.filters):
            target.addFilter(kind())
