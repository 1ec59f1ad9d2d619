"""Stopping a running command cleanly on Ctrl-C (SIGINT) or SIGTERM (what Airflow and Kubernetes
send).

:func:`stop_on_signals` turns either signal into :class:`Interrupted`, a ``KeyboardInterrupt``
carrying the signal number, raised in the main thread: every ``with`` block unwinds (the writer lock
is released, the embedded Dask cluster closes) and the CLI prints one line and exits ``128 + signal``
(130 for SIGINT, 143 for SIGTERM, the shell's convention). A second signal during that cleanup gets
the default action (the process ends at once). :func:`ignoring_sigint` starts child processes (the
LocalCluster's workers) that ignore Ctrl-C, so only this process reacts to it: no worker tracebacks.
"""

from __future__ import annotations

import contextlib
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
    raise Interrupted(signum)


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


@contextlib.contextmanager
def ignoring_sigint() -> Iterator[None]:
    """Processes started inside the block ignore SIGINT (a terminal's Ctrl-C reaches the whole
    process group; Python keeps an inherited SIG_IGN). This process's handler comes back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class StopRequest:
    """Set by SIGINT or SIGTERM inside :func:`stop_requested`: a streaming crawl polls it and stops
    at its next checkpoint instead of unwinding at once (``crawl --stream`` exits 0)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None

    def is_set(self) -> bool:
        """True once a stop signal came."""
        return self.event.is_set()

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for a stop signal; True if one came."""
        return self.event.wait(max(0.0, timeout_s))

    @property
    def signal_name(self) -> str | None:
        """``"SIGINT"``, ``"SIGTERM"`` or None (no signal)."""
        return None if self.signum is None else signal.Signals(self.signum).name


@contextlib.contextmanager
def stop_requested() -> Iterator[StopRequest]:
    """Inside the block, SIGINT and SIGTERM set the yielded :class:`StopRequest` (a second signal
    gets the default action: the process ends at once). Outside the main thread it changes nothing."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def handler(signum: int, frame: object) -> None:
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_DFL)
        request.signum = int(signum)
        request.event.set()

    previous = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield request
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
