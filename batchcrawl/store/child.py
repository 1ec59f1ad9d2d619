"""Run one of batchcrawl's modules in a short-lived child Python process (``python -m MODULE``),
input on stdin, output on stdout: for DuckDB work that a crawl's long-running driver hands off so
that it never loads DuckDB itself (the schemas' derivation, :mod:`batchcrawl.store.schemas`; the
``crawl.duckdb`` file, :mod:`batchcrawl.store.views`)."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import threading
import time


class ChildFailed(RuntimeError):
    """The child process exited with an error or took longer than its time limit."""


#: Modules that import nothing of batchcrawl: :func:`run_module` runs them by file path
#: (``python -P FILE``), so the child does not import their packages' ``__init__`` (that of
#: ``batchcrawl.store`` loads pyarrow and numpy: ~45 MB of the crawl.duckdb child's ~130 MB).
STANDALONE = frozenset({"batchcrawl.store.duckdbfile"})


def run_module(
    module: str, data: bytes, timeout_s: float, fed: threading.Event | None = None
) -> bytes:
    """Run ``python -m module`` with the same interpreter, ``data`` on its stdin; return its
    stdout. The package this file belongs to comes first on the child's ``PYTHONPATH`` (it is the
    same code as the parent's, whatever the working directory). A module of :data:`STANDALONE`
    runs as ``python -P`` with its file's path instead (the same file; neither its folder nor the
    working directory on ``sys.path``). The child runs in its own session:
    a Ctrl-C sent to the parent's process group does not interrupt it, and it goes on when the
    parent exits. ``fed`` is set once the child has all of ``data`` (from then on it needs its
    parent no more, if it prints nothing).

    Raises
    ------
    ChildFailed
        The child exited with a non-zero status (the message ends with its last stderr lines) or
        ran longer than ``timeout_s`` seconds (it is killed).
    """
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    status, out, err = spawn_run([sys.executable, *_target(module)], env, data, timeout_s, fed)
    if status is None:
        raise ChildFailed(f"python -m {module} took over {timeout_s:.0f} s")
    if status != 0:
        raise ChildFailed(f"python -m {module} exited with {status}: {error_lines(err)}")
    return out


def spawn_run(
    argv: list[str],
    env: dict[str, str],
    data: bytes,
    timeout_s: float,
    fed: threading.Event | None = None,
) -> tuple[int | None, bytes, bytes]:
    """Run ``argv`` (``argv[0]`` a path) in a new session with ``os.posix_spawn``, ``data`` on
    its stdin; returns ``(exit status, stdout, stderr)``, the status None when it ran longer than
    ``timeout_s`` seconds (it is killed, SIGKILL). Exit statuses as :mod:`subprocess` gives them
    (``-N`` for signal N). ``fed`` (if given) is set once ``data`` is written and the child's
    stdin closed (or the child exited without reading it all).

    Not ``subprocess.run``, which forks the driver: until its ``exec`` the child shows the
    driver's whole RSS (copy-on-write pages), and on a loaded machine that lasted long enough to
    be the crawl tree's measured peak (issue 33: +170-180 MB in ``scripts/bench_peers.py``).
    glibc's ``posix_spawn`` uses ``clone(CLONE_VM | CLONE_VFORK)``: no copy, the driver waits for
    the ``exec``. Only the three pipes and the parent's inheritable descriptors reach the child
    (Python's own are not inheritable, PEP 446)."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    dup = os.POSIX_SPAWN_DUP2
    try:
        pid = os.posix_spawn(
            argv[0], argv, env, file_actions=[(dup, in_r, 0), (dup, out_w, 1), (dup, err_w, 2)],
            setsid=True,  # a terminal's Ctrl-C stops the parent, not this short job
            setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),  # as subprocess's restore_signals
        )  # fmt: skip
    except BaseException:
        for fd in (in_w, out_r, err_r):
            os.close(fd)
        raise
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    out: list[bytes] = []
    err: list[bytes] = []
    pumps = [
        threading.Thread(target=_feed, args=(in_w, data, fed), daemon=True),
        threading.Thread(target=_drain, args=(out_r, out), daemon=True),
        threading.Thread(target=_drain, args=(err_r, err), daemon=True),
    ]
    reaped = False
    try:
        for t in pumps:
            t.start()
        deadline = time.monotonic() + timeout_s
        for t in pumps[1:]:  # the child closes its stdout and stderr when it exits
            t.join(max(0.0, deadline - time.monotonic()))
        timed_out = any(t.is_alive() for t in pumps[1:])
        if timed_out:
            os.kill(pid, signal.SIGKILL)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        reaped = True
        for t in pumps:
            t.join()
    finally:
        if not reaped:  # interrupted while waiting: do not leave the child behind
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return (None if timed_out else status), b"".join(out), b"".join(err)


def _feed(fd: int, data: bytes, fed: threading.Event | None = None) -> None:
    """Write ``data`` to the pipe ``fd`` and close it; then set ``fed``."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view) :]
    except BrokenPipeError:  # the child exited without reading it all: its status reports why
        return
    finally:
        os.close(fd)
        if fed is not None:
            fed.set()


def _drain(fd: int, into: list[bytes]) -> None:
    """Read the pipe ``fd`` to its end into ``into`` and close it."""
    with open(fd, "rb") as pipe:
        into.append(pipe.read())


def _target(module: str) -> list[str]:
    """The interpreter's arguments that run ``module`` (:func:`run_module`)."""
    if module not in STANDALONE:
        return ["-m", module]
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ChildFailed(f"python -m {module}: no such module")
    return ["-P", spec.origin]


def error_lines(stderr: bytes) -> str:
    """What a failed child said, for one log line: the exception line of its traceback (a full
    disk's ``OSError: [Errno 28] No space left on device``; issue 34: the last three lines were a
    traceback fragment), else its last three lines joined by `` | ``."""
    lines = [ln for ln in stderr.decode("utf-8", "replace").strip().splitlines() if ln.strip()]
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        return lines[-1].strip()
    return " | ".join(ln.strip() for ln in lines[-3:])
