"""The CLI's first line: a stop signal before a command's step begins ends the process at once.

Its own module, importing nothing but the standard library's ``os``, ``signal`` and
``threading``, so that the window in which Python's default handling applies (a ``KeyboardInterrupt``
traceback for Ctrl-C) is only the interpreter's own start-up: ``batchcrawl.console.signals``
imports ``logging`` and ``multiprocessing`` (10 ms, issue 34). What comes after, while a step
runs, is :mod:`batchcrawl.console.signals`.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading

#: The signals handled (as :data:`batchcrawl.console.signals.STOP_SIGNALS`).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_before_start() -> None:
    """Until :func:`~batchcrawl.console.signals.stop_on_signals` or
    :func:`~batchcrawl.console.signals.stop_requested` take over (and after they are left),
    SIGINT and SIGTERM end the process at once with one line on stderr and exit ``128 + signal``:
    nothing of a crawl is being changed then (issue 34: a signal while the CLI imported pyarrow
    printed a KeyboardInterrupt traceback, or ended it silently). Also unblocks them in the main
    thread: a parent that had them blocked (a test process that ran a cluster in-process, see
    :func:`~batchcrawl.console.signals.starting_workers`) passed its mask on. The CLI calls it on its first lines."""
    if threading.current_thread() is not threading.main_thread():
        return
    for s in STOP_SIGNALS:
        signal.signal(s, _exit_at_once)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    atexit.register(_end_process)  # the first registered: it runs last


def finished(code: int) -> None:
    """The command is done, its result printed, its exit code ``code``: a stop signal from now on
    ends the process at once with ``code`` and no line (nothing is left to stop; issue 34, a
    fresh-user trial: a Ctrl-C just after ``inject`` printed its result was told "nothing was
    changed", or killed it silently with 130)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def exit_done(signum: int, frame: object) -> None:
        _flush_and_exit(code)

    for s in STOP_SIGNALS:
        signal.signal(s, exit_done)


#: The exit code of the command that ran (:func:`exiting`); None until it ended by ``sys.exit``.
_exit_code: int | None = None


def exiting(code: object) -> None:
    """The command ended with ``SystemExit(code)`` (click's standalone mode, ``ctx.exit``): the
    process's exit code, which :func:`_end_process` gives the operating system. ``code`` as
    ``sys.exit`` takes it: None is 0, an int itself, anything else (a message) 1."""
    global _exit_code
    _exit_code = 0 if code is None else code if isinstance(code, int) else 1


def _end_process() -> None:
    """The last ``atexit`` hook (every other hook has run: logging flushed, worker processes and
    temporary folders gone). First the stop signals are ignored for the rest of the exit: after
    the hooks Python gives every signal with a Python handler its default action back
    (``_PySignal_Fini``; an ignored one stays ignored), and a signal in the teardown (modules,
    garbage: 10-100 ms) killed a process whose command had ended, with 128 + signal and no line.

    Then, once the command has ended with an exit code (:func:`exiting`), stdout and stderr are
    flushed and the process ends with that code (``os._exit``), skipping the interpreter's
    teardown and the C library's exit handlers. Those run the destructors of Arrow's and
    DuckDB's native thread pools, which abort now and then with "terminate called without an
    active exception" (exit -6) when a pool thread is still alive (apache/arrow#34314; a
    ``graph outlinks`` process in CI, whose result was complete). Nothing of ours needs the
    teardown: a command closes its files, releases its lock and prints its result before it
    returns. It also skips the teardown's last garbage collection, a walk of the whole heap (a
    stopped ``crawl`` spent 1.3-2.2 s in it; issue 34's target for a stop is 2 s)."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    if _exit_code is not None:  # else an uncaught exception: Python's own exit prints it
        _flush_and_exit(_exit_code)


def _flush_and_exit(code: int) -> None:
    """Flush stdout and stderr (a reader gone or a stream closed: nothing more to give) and end
    the process with ``code`` at once (``os._exit``: no teardown, no exit handlers)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _exit_at_once(signum: int, frame: object) -> None:
    name = signal.Signals(signum).name
    os.write(2, f"batchcrawl: stopped by {name} outside a step: nothing was changed\n".encode())
    os._exit(128 + signum)
