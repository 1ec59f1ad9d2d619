"""A stop signal at any moment (issue 34): ``round``, ``crawl`` and ``crawl --stream`` as real
subprocesses against a loopback web, SIGINT to the whole process group (a terminal's Ctrl-C) or
SIGTERM to the process (Airflow, Kubernetes), at a fixed time after the start -- while the
interpreter imports, while the LocalCluster starts, while the first round runs -- and in the middle
of a round's fetch (a page held until the signal was sent).

Checked: the command exits (a generous timeout on the wait: the point is that it does; it was
minutes before, the signal being ignored while the cluster started) with 130 / 143 -- a stream
that took its last checkpoint, 0 --, the stop line alone on stderr besides progress records (no
worker traceback or warning, no ``Task exception was never retrieved``, no "Exception ignored"),
the lock released, every process of the group gone, and
the crawl's committed generation never lower than before.

The subprocess starts with both signals blocked, as a shell's child would be if its parent had
them blocked: a signal that comes while the interpreter itself starts (site packages, before any
line of batchcrawl runs) stays pending until the CLI's first line unblocks it and then stops it
with one line; without that block the earliest moments would test Python's start-up, not
batchcrawl (on a busy machine the interpreter alone can take 0.5 s).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from round_helpers import (
    HoldPages,
    cli_command,
    group_members,
    kill_group,
    new_crawl,
    round_config,
    sample_web,
    serve,
    subprocess_env,
    wait_gone,
)

from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.lock import LOCK_FILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

COMMANDS = {
    "round": ("round",),
    "crawl": ("crawl", "--rounds", "50"),
    "stream": ("crawl", "--stream", "--max-seconds", "120"),
}
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}


def _send(proc: subprocess.Popen, signum: int, group: bool = False) -> None:
    if signum == signal.SIGINT or group:
        os.killpg(proc.pid, signum)  # a terminal's Ctrl-C, systemd's stop: the whole group
    else:
        proc.send_signal(signal.SIGTERM)


def _stop_and_check(proc, signum, crawl: CrawlDir, generation_before: int, command: str,
                    group: bool = False):  # fmt: skip
    """Send ``signum`` (``group``: a SIGTERM to the whole process group too), wait for the exit,
    check what the module docstring lists."""
    _send(proc, signum, group)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        kill_group(proc)
    lines = [ln for ln in err.strip().splitlines()
             if ln and " INFO batchcrawl.console.progress: " not in ln]  # fmt: skip
    stream_done = command == "stream" and proc.returncode == 0
    assert proc.returncode == EXIT[signum] or stream_done, err[-3000:]
    if stream_done:  # its summary on stderr: a headline and counts, no traceback
        assert lines[0].startswith(f"batchcrawl: stream stopped by {signum.name}"), err[-3000:]
        assert len(lines) <= 3, err[-3000:]  # the headline and two lines of counts
    else:  # the stop line alone: nothing after it (a worker's log, a half-started cluster's)
        assert len(lines) == 1, err[-3000:]
        assert lines[0].startswith(f"batchcrawl: stopped by {signum.name}"), err
    for noise in ("Traceback", "never retrieved", "Exception ignored", "Error", "WARNING"):
        assert noise not in err, err[-3000:]
    assert not os.path.exists(crawl.path(LOCK_FILE))
    assert wait_gone(group_members(proc.pid), 30) == []
    assert CrawlDir.open(crawl.url).manifest().generation >= generation_before
    return out


def _block_stop_signals() -> None:  # in the child, before exec: the mask survives exec
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def _start(crawl: CrawlDir, command: str, script: Path | None = None) -> subprocess.Popen:
    args = [*COMMANDS[command][:1], crawl.url, *COMMANDS[command][1:]]
    return subprocess.Popen(
        cli_command(*args) if script is None else [sys.executable, str(script), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(),
        start_new_session=True, preexec_fn=_block_stop_signals,
    )  # fmt: skip


@pytest.fixture(scope="module")
def web():
    app = sample_web(hosts=4, pages=400, links_per_page=8, menu_links=3, extras_every=0)
    with serve(app):
        yield app


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("after_s", [0.2, 0.5, 1.0, 1.5, 3.0])
def test_a_signal_at_a_fixed_moment_stops_the_command(tmp_path, web, command, signum, after_s):
    # a single round must outlast the latest moment: each host's page waits 4 s after its
    # robots.txt (with 0.2 s the seed round ended in 2 s on a quiet CI machine, before 3.0 s)
    delay_s = 4.0 if command == "round" else 0.2
    cfg = round_config(politeness={"host_delay_s": delay_s, "ip_delay_s": 0.0, "ip_concurrency": 8})
    crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
    before = crawl.manifest().generation
    proc = _start(crawl, command)
    try:  # the moment: a wait that must time out (the command must still be running)
        proc.wait(timeout=after_s)
    except subprocess.TimeoutExpired:
        pass
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    _stop_and_check(proc, signum, crawl, before, command)


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_fetch_stops_the_command(tmp_path, command, signum):
    app = HoldPages(sample_web(hosts=3, pages=30, extras_every=0))
    cfg = round_config()
    with serve(app):
        crawl = new_crawl(tmp_path / "crawl", cfg, app.web.seeds())
        before = crawl.manifest().generation
        app.armed.set()
        proc = _start(crawl, command)
        try:
            assert app.arrived.wait(120), "no page was fetched"
            _stop_and_check(proc, signum, crawl, before, command)
        finally:
            app.release.set()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_run_after_a_stop_reruns_the_round_without_a_warning(tmp_path, command):
    """The stop's own line says the round was not committed and to rerun it; the rerun then began
    with "WARNING ... round 2 was started before ... and did not commit" (issue 34, a fresh-user
    trial: every command after a Ctrl-C printed it, past the three lines a stop may print)."""
    app = HoldPages(sample_web(hosts=3, pages=30, extras_every=0))
    with serve(app):
        crawl = new_crawl(tmp_path / "crawl", round_config(), app.web.seeds())
        before = crawl.manifest().generation
        app.armed.set()
        proc = _start(crawl, command)
        try:
            assert app.arrived.wait(120), "no page was fetched"
            _stop_and_check(proc, signal.SIGINT, crawl, before, command)
        finally:
            app.release.set()
        app.armed.clear()
        again = subprocess.run(cli_command("round", crawl.url), capture_output=True, text=True,
                               env=subprocess_env(), timeout=180)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert "WARNING" not in again.stderr and "did not commit" not in again.stderr, again.stderr


@pytest.mark.parametrize("command", ["round", "stream"])
def test_ctrl_c_mid_fetch_through_the_batchcrawl_script(tmp_path, command):
    """The ``batchcrawl`` console script (not ``python -m``): Dask's spawned worker processes
    import the parent's main script again, with its argv; the CLI's early signal handler was
    installed there too and unblocked SIGINT, so a terminal's Ctrl-C killed the workers: the
    stream ended with exit 5 (a lost worker) and no last checkpoint, a round sometimes hung for
    30 s (issue 34, a fresh user's trial)."""
    script = tmp_path / "bin" / "batchcrawl"
    script.parent.mkdir()
    script.write_text(  # what pip writes for a console script
        "import sys\nfrom batchcrawl.cli import main\n\nif __name__ == '__main__':\n"
        "    sys.exit(main())\n"
    )
    app = HoldPages(sample_web(hosts=3, pages=30, extras_every=0))
    with serve(app):
        crawl = new_crawl(tmp_path / "crawl", round_config(), app.web.seeds())
        before = crawl.manifest().generation
        app.armed.set()
        proc = _start(crawl, command, script)
        try:
            assert app.arrived.wait(120), "no page was fetched"
            _stop_and_check(proc, signal.SIGINT, crawl, before, command)
        finally:
            app.release.set()


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("after_s", [1.7, 2.5])
def test_sigterm_to_the_whole_process_group_stops_the_command(tmp_path, web, command, after_s):
    """SIGTERM to every process of the group (``kill -TERM -PGID``; systemd's default KillMode
    sends it to the whole control group): the Dask workers must not take it. A fresh user's trial
    (issue 34): the workers died of it, then a ``round`` waited forever for its shard actors (10
    minutes, no output, its lock already released), or exited after 30 s; a stream ended with exit
    5, "a Dask worker was lost"."""
    delay_s = 4.0 if command == "round" else 0.2
    cfg = round_config(politeness={"host_delay_s": delay_s, "ip_delay_s": 0.0, "ip_concurrency": 8})
    crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
    before = crawl.manifest().generation
    proc = _start(crawl, command)
    try:
        proc.wait(timeout=after_s)
    except subprocess.TimeoutExpired:
        pass
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    _stop_and_check(proc, signal.SIGTERM, crawl, before, command, group=True)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_before_the_lock_says_nothing_was_written(tmp_path, signum):
    """A ``round`` stopped at ~0.5 s, before it took the crawl's lock, was told "before the step
    finished; its commit did not happen" (issue 34, 2nd trial). Here the command sends itself the
    signal (a real one) while it opens the crawl, so it surely lands before the lock."""
    crawl = new_crawl(tmp_path / "crawl", round_config(), ["http://h1.test/"])
    before = sorted(os.listdir(crawl.path("")))
    script = tmp_path / "stop_while_opening.py"
    script.write_text(
        "import os, signal, sys\n"
        "from batchcrawl.store.crawldir import CrawlDir\n"
        "from batchcrawl.cli import main, exit_before_start\n"
        "exit_before_start()  # what the CLI does first when it is the program\n"
        "opened = CrawlDir.open.__func__\n"
        "def open_and_stop(cls, url):\n"
        "    crawl = opened(cls, url)\n"
        f"    os.kill(os.getpid(), {int(signum)})\n"
        "    return crawl\n"
        "CrawlDir.open = classmethod(open_and_stop)\n"
        "sys.exit(main())\n"
    )
    proc = _start(crawl, "round", script)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT[signum], err[-3000:]
    assert err.strip().splitlines() == [
        f"batchcrawl: stopped by {signum.name} before `batchcrawl round` changed the crawl: "
        "nothing was changed"
    ], err[-3000:]
    assert sorted(os.listdir(crawl.path(""))) == before  # no lock file, nothing new
    assert CrawlDir.open(crawl.url).manifest().generation == crawl.manifest().generation


def test_a_second_ctrl_c_ends_the_command_without_the_trackers_warning(tmp_path):
    """A second Ctrl-C ends the command at once; multiprocessing's resource tracker then removed
    the cluster's semaphores and printed "resource_tracker: There appear to be 12 leaked semaphore
    objects to clean up at shutdown" (issue 34, 2nd trial)."""
    app = HoldPages(sample_web(hosts=3, pages=30, extras_every=0))
    with serve(app):
        crawl = new_crawl(tmp_path / "crawl", round_config(), app.web.seeds())
        app.armed.set()
        proc = _start(crawl, "round")
        try:
            assert app.arrived.wait(120), "no page was fetched"
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.05)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            app.release.set()
            kill_group(proc)
    assert proc.returncode == 130, err[-3000:]
    # one line, and no lock left for the next command to take over (issue 34, 4th trial: the
    # process died silently and left _lock.json)
    assert [ln for ln in err.splitlines() if ln.startswith("batchcrawl:")] == [
        "batchcrawl: stopped at once by a second SIGINT: committed generations are intact; what "
        "was not committed is redone by the next run"
    ] or err.strip().splitlines()[-1].startswith("batchcrawl: stopped by SIGINT"), err[-3000:]
    assert not os.path.exists(crawl.path(LOCK_FILE)), err[-3000:]
    assert wait_gone(group_members(proc.pid), 30) == []  # the tracker too: its stderr is read
    for noise in ("resource_tracker", "leaked", "Traceback", "Warning"):
        assert noise not in err, err[-3000:]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stop_during_a_duckdb_query_is_a_stop(tmp_path, signum):
    """DuckDB turns the KeyboardInterrupt of a stop into ``RuntimeError: Query interrupted``:
    Ctrl-C during ``status``, ``sql`` or ``report`` printed that traceback and exited 1 (issue 34,
    a fresh-user trial). A query that runs until it is stopped: ``sql`` must end by the signal."""
    crawl = new_crawl(tmp_path / "crawl", round_config(), ["http://h1.test/"])
    query = "SELECT count(*) FROM range(1000000000000) a"
    proc = subprocess.Popen(
        cli_command("sql", crawl.url, query), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=subprocess_env(), start_new_session=True,
    )  # fmt: skip
    try:
        time.sleep(3)  # the interpreter, DuckDB and the views: then the query runs
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        _send(proc, signum)
        out, err = proc.communicate(timeout=60)
    finally:
        kill_group(proc)
    assert proc.returncode == EXIT[signum], err[-3000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"batchcrawl: stopped by {signum.name}"), err
    assert "Traceback" not in err and "interrupted" not in err, err
    # not "before it wrote anything": a read-only command may have printed part of its output
    assert lines[0].endswith("`batchcrawl sql` only reads the crawl; nothing was changed"), err


def test_init_stopped_while_it_injects_says_how_to_finish_the_crawl(tmp_path):
    """``init --seeds`` creates the crawl, then injects: a stop in between was told "rerun it",
    and a rerun of ``init`` is refused (the crawl exists; issue 34, a fresh-user trial). The
    message now names ``inject``, and that command finishes the crawl."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://h1.test/\nhttp://h2.test/\n")
    script = tmp_path / "stop_while_injecting.py"
    script.write_text(
        "import os, signal, sys\n"
        "import batchcrawl.frontier.inject as inject_mod\n"
        "from batchcrawl.cli import main, exit_before_start\n"
        "exit_before_start()\n"
        "def stopped(*args, **kwargs):\n"
        "    os.kill(os.getpid(), signal.SIGINT)\n"
        "    raise AssertionError('the signal did not stop the command')\n"
        "inject_mod.inject = stopped\n"
        "sys.exit(main())\n"
    )
    url = str(tmp_path / "crawl")
    proc = subprocess.run(
        [sys.executable, str(script), "init", url, "--seeds", str(seeds)],
        capture_output=True, text=True, env=subprocess_env(), timeout=120,
    )  # fmt: skip
    assert proc.returncode == 130, proc.stderr[-3000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "was created, but its seeds were not injected" in lines[0], lines
    command = lines[0].split("`")[1].split()
    assert command[:3] == ["batchcrawl", "inject", CrawlDir.open(url).url], command
    again = subprocess.run(cli_command(*command[1:]), capture_output=True, text=True,
                           env=subprocess_env(), timeout=120)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert CrawlDir.open(url).manifest().rows("frontier") == 2


def test_a_stop_right_after_the_commit_says_the_result_stands(tmp_path):
    """A stop between the manifest's publication and the command's JSON line was told "its commit
    did not happen ... rerun it" with the generation committed, or left a ``_commits/*.tmp-*``
    file (issue 34, a fresh-user trial: ``inject`` stopped at 0.7 s). Here the signal comes while
    the manifest is written (a real one, sent by the process to itself)."""
    crawl = new_crawl(tmp_path / "crawl", round_config(), ["http://h1.test/"])
    before = crawl.manifest().generation
    seeds = tmp_path / "more.txt"
    seeds.write_text("http://h2.test/\n")
    script = tmp_path / "stop_while_publishing.py"
    script.write_text(
        "import os, signal, sys\n"
        "from batchcrawl.store.crawldir import CrawlDir\n"
        "from batchcrawl.cli import main, exit_before_start\n"
        "exit_before_start()\n"
        "create = CrawlDir.create_exclusive\n"
        "def create_and_stop(self, rel, data):\n"
        "    if rel.startswith('_commits/'):  # the manifest's publication, not a data file\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "    return create(self, rel, data)\n"
        "CrawlDir.create_exclusive = create_and_stop\n"
        "sys.exit(main())\n"
    )
    proc = subprocess.run([sys.executable, str(script), "inject", crawl.url, str(seeds)],
                          capture_output=True, text=True, env=subprocess_env(), timeout=120)  # fmt: skip
    assert proc.returncode == 130, proc.stderr[-3000:]
    now = CrawlDir.open(crawl.url).manifest()
    assert now.generation == before + 1  # the publication was not cut
    assert proc.stderr.strip().splitlines() == [
        f"batchcrawl: stopped by SIGINT after `batchcrawl inject` committed generation "
        f"{now.generation} of {crawl.url}: its result stands (`batchcrawl status` shows it)"
    ]
    assert not [f for f in os.listdir(crawl.path("_commits")) if ".tmp-" in f]


def cli_script(
    path: Path, before: str = "", after_start: str = ""
) -> Callable[..., subprocess.CompletedProcess]:
    """Write a script at ``path`` that runs the CLI as the ``batchcrawl`` program does
    (``exit_before_start`` first, then ``main``), with the Python lines ``before`` ahead of its
    import and ``after_start`` after ``exit_before_start``; return a function that runs it with
    CLI arguments (text output captured, 120 s limit)."""
    path.write_text(
        f"import sys\n{before}"
        "from batchcrawl.cli import main, exit_before_start\n"
        f"exit_before_start()\n{after_start}"
        "sys.exit(main())\n"
    )

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(path), *args], capture_output=True,
                              text=True, env=subprocess_env(), timeout=120)  # fmt: skip

    return run


def test_a_stop_after_the_command_ended_changes_nothing(tmp_path):
    """Once a command printed its result, a stop signal ends the process with the command's own
    exit code and no line; in the interpreter's teardown, after the exit hooks, Python gave the
    signals their default action back and one killed the process silently (-SIGINT, a shell's
    130) after ``inject`` had printed its JSON (issue 34, a fresh-user trial). Here a thread
    sends SIGINT every millisecond from the first exit hook on."""
    crawl = new_crawl(tmp_path / "crawl", round_config(), ["http://h1.test/"])
    run = cli_script(
        tmp_path / "stop_at_exit.py",
        after_start="import atexit, os, signal, threading, time\n"
        "def flood():\n"
        "    while True:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(0.001)\n"
        "atexit.register(lambda: threading.Thread(target=flood, daemon=True).start())\n",
    )
    for _ in range(3):
        proc = run("status", crawl.url, "--format", "json")
        assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
        assert json.loads(proc.stdout)["generation"] == crawl.manifest().generation
        assert proc.stderr == ""


def test_a_native_exit_handler_that_aborts_does_not_change_the_exit_code(tmp_path):
    """A command that ended keeps its exit code even when a native library's exit-time code
    aborts: Arrow's and DuckDB's thread pools are destroyed by the C library's exit handlers and
    now and then end a finished process with "terminate called without an active exception"
    (SIGABRT; ``graph outlinks`` in CI, apache/arrow#34314). Here ``abort`` itself is registered
    as such a handler (``__cxa_atexit``, as a C++ static destructor is): without
    :func:`batchcrawl.console.early._end_process` every run below dies with -SIGABRT."""
    crawl = new_crawl(tmp_path / "crawl", round_config(), ["http://h1.test/"])
    run = cli_script(
        tmp_path / "abort_at_exit.py",
        before="import ctypes\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.__cxa_atexit(ctypes.cast(libc.abort, ctypes.c_void_p), None, None)\n",
    )
    ok = run("status", crawl.url, "--format", "json")
    assert ok.returncode == 0, (ok.returncode, ok.stderr[-3000:])
    assert json.loads(ok.stdout)["generation"] == crawl.manifest().generation  # flushed in full
    missing = run("status", str(tmp_path / "nowhere"))
    assert missing.returncode == 3, missing.stderr  # not a crawl directory
    assert missing.stderr.startswith("batchcrawl: ") and missing.stderr.count("\n") == 1
    usage = run("sideways")
    assert usage.returncode == 2 and "No such command" in usage.stderr


@pytest.mark.parametrize("seeded", [True, False], ids=["seeds", "no-seeds"])
def test_init_stopped_before_or_after_its_first_commit_says_what_exists(tmp_path, seeded):
    """``init`` stopped at 0.3 s was told "its result stands" with no seed injected, and before
    generation 0 a half-written crawl made a rerun fail with "a crawl already exists here" (issue
    34, 4th fresh-user trial). Before the commit the partial crawl is removed and the rerun
    works; after it, the message says what stands."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://h1.test/\n")
    url = str(tmp_path / "crawl")
    extra = ["--seeds", str(seeds)] if seeded else []

    def run_stopped(where: str):
        script = tmp_path / f"stop_{where}.py"
        script.write_text(
            "import os, signal, sys\n"
            "from batchcrawl.store.crawldir import CrawlDir\n"
            "from batchcrawl.cli import main, exit_before_start\n"
            "exit_before_start()\n"
            f"original = CrawlDir.{where}\n"
            "def stop_first(*args, **kwargs):\n"
            "    os.kill(os.getpid(), signal.SIGINT)\n"
            "    raise AssertionError('the signal did not stop the command')\n"
            f"CrawlDir.{where} = stop_first\n"
            "sys.exit(main())\n"
        )
        return subprocess.run([sys.executable, str(script), "init", url, *extra],
                              capture_output=True, text=True, env=subprocess_env(),
                              timeout=120)  # fmt: skip

    before = run_stopped("_publish")  # crawl.toml written, generation 0 not yet
    assert before.returncode == 130, before.stderr[-3000:]
    assert before.stderr.strip().splitlines() == [
        "batchcrawl: stopped by SIGINT before `batchcrawl init` created the crawl: nothing was "
        "changed; rerun it"
    ]
    assert not os.path.exists(url)  # the partial crawl is gone: a rerun can create it
    after = run_stopped("_after_publish")  # generation 0 committed
    assert after.returncode == 130, after.stderr[-3000:]
    (line,) = after.stderr.strip().splitlines()
    crawl = CrawlDir.open(url)
    assert crawl.manifest().generation == 0
    if seeded:
        assert (
            "was created, but its seeds were not injected; add them with `batchcrawl "
            f"inject {crawl.url} {seeds}`" in line
        ), line
    else:
        assert (
            line == f"batchcrawl: stopped by SIGINT after `batchcrawl init` created the "
            f"crawl {crawl.url}: it stands"
        )
