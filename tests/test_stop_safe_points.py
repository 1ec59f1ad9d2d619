"""Where a stop signal is raised (issue 34, :mod:`batchcrawl.console.signals`): never inside
importlib's machinery or an extension module's initialisation (a ``KeyboardInterrupt`` there
printed "Exception ignored in _get_module_lock" or a pyo3 ``PanicException``), never inside
:func:`holding_stop` (the embedded cluster's start: unwinding it half done printed nannies' and
spawned workers' tracebacks), and never lost: it is raised at the first :func:`raise_if_stopped`
after the hold, and again there if something swallowed it.

Each case is a real subprocess that sends itself the signal (a handler is process-wide state).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest
from round_helpers import subprocess_env

pytestmark = pytest.mark.timeout(120)

PRELUDE = """
import os, signal, sys
from batchcrawl.console.signals import Interrupted, holding_stop, raise_if_stopped, stop_on_signals
"""


def _run(tmp_path, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / "case.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    env = subprocess_env()
    env["PYTHONPATH"] = f"{tmp_path}:{env['PYTHONPATH']}"
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip


def test_an_extension_modules_initialisation_is_not_interrupted(tmp_path):
    """Frames where a raise is held (:func:`_cannot_unwind`), seen for real: ``_decimal``'s C
    initialisation imports ``numbers``; a meta path finder records, from inside each lookup,
    whether a stop would be held there. The lookup of ``_decimal`` itself runs Python code of the
    finder (a raise there unwinds the import cleanly); the lookup of ``numbers`` runs inside the
    extension's initialisation (a raise there became a pyo3 PanicException in a Rust module)."""
    result = _run(tmp_path, """
        from batchcrawl.console.signals import _cannot_unwind
        seen = {}
        class Recorder:
            def find_spec(self, name, path, target=None):
                seen[name] = _cannot_unwind(sys._getframe(0))
        sys.meta_path.insert(0, Recorder())
        import _decimal
        print(seen["_decimal"], seen["numbers"])
    """)  # fmt: skip
    assert result.stdout.strip() == "False True", result.stderr


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_inside_a_python_modules_import_is_raised_at_once(tmp_path, signum):
    """A pure-Python module's top-level code unwinds like any other: the stop is not delayed to
    the end of its import (``import distributed`` takes seconds on a loaded machine)."""
    (tmp_path / "slow_module.py").write_text(
        f"import os\nos.kill(os.getpid(), {int(signum)})\nwhile True:\n    pass\n"
    )
    result = _run(tmp_path, """
        try:
            with stop_on_signals():
                import slow_module
        except Interrupted as exc:
            print("interrupted", exc.signal_name, "slow_module" in sys.modules)
    """)  # fmt: skip
    assert result.stdout.strip() == f"interrupted {signum.name} False", result.stderr
    assert result.stderr == ""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_inside_a_hold_is_raised_at_the_next_safe_point(tmp_path, signum):
    result = _run(tmp_path, f"""
        steps = []
        try:
            with stop_on_signals():
                with holding_stop():
                    os.kill(os.getpid(), {int(signum)})
                    for i in range(200_000):  # time for the handler to run, and to wrongly raise
                        pass
                    steps.append("hold ended")
                steps.append("after the hold")
                raise_if_stopped()
                steps.append("lost")
        except Interrupted as exc:
            print(steps, exc.signal_name)
    """)  # fmt: skip
    assert result.stdout.strip() == f"['hold ended', 'after the hold'] {signum.name}", result.stderr


def test_a_swallowed_stop_is_raised_again_at_the_next_safe_point(tmp_path):
    result = _run(tmp_path, """
        try:
            with stop_on_signals():
                try:
                    os.kill(os.getpid(), signal.SIGTERM)
                    while True:
                        pass
                except KeyboardInterrupt:
                    pass  # library code that swallows it
                raise_if_stopped()
                print("lost")
        except Interrupted as exc:
            print("raised again", exc.exit_code)
    """)  # fmt: skip
    assert result.stdout.strip() == "raised again 143", result.stderr


def test_outside_the_block_no_stop_is_left_over(tmp_path):
    result = _run(tmp_path, """
        try:
            with stop_on_signals():
                os.kill(os.getpid(), signal.SIGTERM)
                while True:
                    pass
        except Interrupted:
            pass
        raise_if_stopped()  # the stop was handled: a later safe point has nothing to raise
        print("clean")
    """)  # fmt: skip
    assert result.stdout.strip() == "clean", result.stderr


def test_a_signal_inside_fsspec_is_raised_after_it_not_swallowed(tmp_path):
    """fsspec's ``exists`` catches every exception (a bare ``except:``) and answers False: a stop
    raised inside it made an existing ``crawl.toml`` look missing (CI: a demo stopped between two
    rounds said "not a crawl directory"). The stop is raised once fsspec returned."""
    (tmp_path / "there").write_text("x")
    result = _run(tmp_path, f"""
        import fsspec
        real_stat = os.stat
        def stat(path, *args, **kwargs):  # called by LocalFileSystem.info, inside exists()
            os.kill(os.getpid(), signal.SIGINT)
            for i in range(200_000):  # time for the handler to run, and to wrongly raise
                pass
            return real_stat(path, *args, **kwargs)
        fs = fsspec.filesystem("file")
        answers = []
        try:
            with stop_on_signals():
                os.stat = stat
                answers.append(fs.exists({str(tmp_path / "there")!r}))
                os.stat = real_stat
                raise_if_stopped()  # a swallowed stop is raised here: the answer is still seen
        except Interrupted as exc:
            print(answers, exc.signal_name)
    """)  # fmt: skip
    assert result.stdout.strip() == "[True] SIGINT", result.stderr


def test_a_signal_inside_a_lock_heartbeat_leaves_the_lock_whole(tmp_path):
    """The writer lock rewrites its file by a temporary file and a rename: a stop between the two
    left ``_lock.json.tmp-*`` beside the lock (CI). The stop lands after the rewrite."""
    result = _run(tmp_path, f"""
        from batchcrawl.store.crawldir import CrawlDir
        from batchcrawl.store.lock import WriterLock
        crawl = CrawlDir.create({str(tmp_path / "crawl")!r}, "", buckets=2)
        real_replace = os.replace
        def replace(src, dst):
            os.kill(os.getpid(), signal.SIGTERM)
            for i in range(200_000):
                pass
            return real_replace(src, dst)
        try:
            with stop_on_signals():
                lock = WriterLock(crawl, owner="test").acquire()
                os.replace = replace
                lock.beat()
                os.replace = real_replace
                while True:
                    pass
        except Interrupted as exc:
            lock.release()
            print(sorted(os.listdir(crawl.url)), exc.signal_name)
    """)  # fmt: skip
    listing, name = result.stdout.strip().rsplit(" ", 1)
    assert name == "SIGTERM" and "_lock" not in listing, (result.stdout, result.stderr)
