"""Run one of batchcrawl's modules in a short-lived child Python process (``python -m MODULE``),
input on stdin, output on stdout: for DuckDB work that a crawl's long-running driver hands off so
that it never loads DuckDB itself (the schemas' derivation, :mod:`batchcrawl.store.schemas`; the
``crawl.duckdb`` file, :mod:`batchcrawl.store.views`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys


class ChildFailed(RuntimeError):
    """The child process exited with an error or took longer than its time limit."""


#: Modules that import nothing of batchcrawl: :func:`run_module` runs them by file path
#: (``python -P FILE``), so the child does not import their packages' ``__init__`` (that of
#: ``batchcrawl.store`` loads pyarrow and numpy: ~45 MB of the crawl.duckdb child's ~130 MB).
STANDALONE = frozenset({"batchcrawl.store.duckdbfile"})


def run_module(module: str, data: bytes, timeout_s: float) -> bytes:
    """Run ``python -m module`` with the same interpreter, ``data`` on its stdin; return its
    stdout. The package this file belongs to comes first on the child's ``PYTHONPATH`` (it is the
    same code as the parent's, whatever the working directory). A module of :data:`STANDALONE`
    runs as ``python -P`` with its file's path instead (the same file; neither its folder nor the
    working directory on ``sys.path``). The child runs in its own session:
    a Ctrl-C sent to the parent's process group does not interrupt it (the parent, stopping,
    waits for it).

    Raises
    ------
    ChildFailed
        The child exited with a non-zero status (the message ends with its last stderr lines) or
        ran longer than ``timeout_s`` seconds (it is killed).
    """
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    try:
        done = subprocess.run(
            [sys.executable, *_target(module)],
            input=data,
            capture_output=True,
            env=env,
            timeout=timeout_s,
            check=False,
            start_new_session=True,  # a terminal's Ctrl-C stops the parent, not this short job
        )
    except subprocess.TimeoutExpired:
        raise ChildFailed(f"python -m {module} took over {timeout_s:.0f} s") from None
    if done.returncode != 0:
        raise ChildFailed(
            f"python -m {module} exited with {done.returncode}: {error_lines(done.stderr)}"
        )
    return done.stdout


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
