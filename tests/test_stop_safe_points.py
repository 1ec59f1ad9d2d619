"""Where a stop signal is raised (issue 34, :mod:`batchcrawl.console.signals`): never inside an
import (a ``KeyboardInterrupt`` there printed "Exception ignored in _get_module_lock" or a pyo3
``PanicException``), never inside :func:`holding_stop` (the embedded cluster's start: unwinding it
half done printed nannies' and spawned workers' tracebacks), and never lost: it is raised right
after the import, at the first :func:`raise_if_stopped` after the hold.

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


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_inside_an_import_is_raised_after_it(tmp_path, signum):
    # the module signals itself, then goes on running its body: the import must complete
    (tmp_path / "slow_module.py").write_text(
        f"import os\nos.kill(os.getpid(), {int(signum)})\n"
        "total = 0\nfor i in range(300_000):\n    total += i\nDONE = True\n"
    )
    result = _run(tmp_path, """
        try:
            with stop_on_signals():
                import slow_module
                while True:  # the raise comes within the watcher's next poke
                    pass
        except Interrupted as exc:
            print("interrupted", exc.signal_name, sys.modules["slow_module"].DONE)
    """)  # fmt: skip
    assert result.stdout.strip() == f"interrupted {signum.name} True", result.stderr
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
