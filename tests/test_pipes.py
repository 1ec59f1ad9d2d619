"""Every command that prints, with its stdout on a pipe whose reader is already gone (``batchcrawl
status CRAWL | head -2`` once ``head`` has its lines): exit 0, nothing on stderr, and the work
done (issue 34: ``status`` exited 1, rich's broken-pipe handling raising ``SystemExit(1)`` first).

The pipe's read end is closed before the command starts, so its first write fails: the test does
not depend on when a reader would have closed it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from crawl_helpers import small_crawl
from round_helpers import cli_command, new_crawl, round_config, sample_web, serve, subprocess_env

from batchcrawl.store.crawldir import CrawlDir


def _run_into_closed_pipe(*args: object, cwd: str | None = None) -> subprocess.CompletedProcess:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            cli_command(*args), stdout=write_end, stderr=subprocess.PIPE, text=True,
            env=subprocess_env(), cwd=cwd, timeout=300, check=False,
        )  # fmt: skip
    finally:
        os.close(write_end)


READERS = {
    "status": ["status", "{crawl}"],
    "status-json": ["status", "{crawl}", "--format", "json"],
    "sql-table": ["sql", "{crawl}", "SELECT * FROM frontier"],
    "sql-csv": ["sql", "{crawl}", "SELECT * FROM frontier", "--format", "csv"],
    "sql-json": ["sql", "{crawl}", "SELECT * FROM frontier", "--format", "json"],
    "sql-named": ["sql", "{crawl}", "--query", "top-hosts"],
    "sql-list": ["sql", "{crawl}", "--list"],
    "report": ["report", "{crawl}", "--out", "{tmp}/r.html"],
    "gc-dry-run": ["gc", "{crawl}", "--dry-run"],
    "gc": ["gc", "{crawl}"],
    "compact": ["compact", "{crawl}"],
    "help": ["--help"],
    "version": ["--version"],
}


@pytest.mark.parametrize("name", list(READERS))
def test_a_closed_pipe_exits_0_quietly(tmp_path, name):
    crawl = small_crawl(tmp_path / "c")
    args = [a.format(crawl=crawl.url, tmp=tmp_path) for a in READERS[name]]
    done = _run_into_closed_pipe(*args)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr[-3000:]


def test_init_and_inject_commit_before_the_closed_pipe(tmp_path):
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\n")
    done = _run_into_closed_pipe("init", tmp_path / "c", "--seeds", seeds)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    seeds.write_text("http://b.test/\n")
    done = _run_into_closed_pipe("inject", tmp_path / "c", seeds)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert CrawlDir.open(str(tmp_path / "c")).manifest().generation == 2


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("args", "rounds", "headline"),
    [
        (("round",), 1, "batchcrawl: round 1 committed"),
        (("crawl", "--rounds", "2"), 2, "batchcrawl: rounds 1-2 committed"),
        (("crawl", "--stream", "--max-seconds", "4"), None, "batchcrawl: stream stopped by"),
    ],
    ids=["round", "crawl", "stream"],
)
def test_a_crawl_goes_on_and_says_its_summary_when_stdout_closed(tmp_path, args, rounds, headline):
    """The JSON lines have no reader (``round CRAWL | true``): the rounds asked for are all done
    and the closing summary reaches stderr (a fresh-user trial, issue 34: the summary was lost, and
    a crawl's first JSON line ended it)."""
    web = sample_web(hosts=2, pages=10, extras_every=0)
    with serve(web):
        crawl = new_crawl(tmp_path / "c", round_config(), web.seeds())
        done = _run_into_closed_pipe(args[0], crawl.url, *args[1:])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [ln for ln in done.stderr.strip().splitlines()
             if " INFO batchcrawl.console.progress: " not in ln]  # fmt: skip
    assert lines and lines[0].startswith(headline) and len(lines) == 3, done.stderr[-3000:]
    m = CrawlDir.open(crawl.url).manifest()
    assert m.round == (rounds if rounds is not None else m.round) and m.round >= 1


def test_graph_build_prints_nodes_arcs_and_bytes_not_its_file_list(tmp_path):
    """Issue 34: `graph build` printed the whole graph.json (every file path, 7 KB); the README
    promises nodes, arcs and bytes. The summary is what the command prints."""
    from batchcrawl.cli import graph_summary
    from batchcrawl.graph import build_graph

    doc = build_graph(small_crawl(tmp_path / "c"))
    assert "files" in doc
    summary = graph_summary(doc)
    assert list(summary) == ["generation", "nodes", "edges", "arcs", "bytes", "parts"]
    assert summary["nodes"] == doc["nodes"] and summary["arcs"] == doc["arcs"]


def test_a_failed_child_is_reported_by_its_exception_line_not_a_traceback_fragment():
    """Issue 34: a crawl.duckdb refresh on a full disk logged the last three lines of the child's
    traceback. A real child process whose traceback ends in an OSError (json.tool writing to a
    file in a folder that does not exist)."""
    from batchcrawl.store.child import ChildFailed, error_lines, run_module

    with pytest.raises(ChildFailed):
        run_module("batchcrawl.no_such_module_for_the_test", b"", timeout_s=60)
    failed = subprocess.run(
        [sys.executable, "-c", "open('/nonexistent-folder-of-the-test/x', 'w')"],
        capture_output=True, check=False,
    )  # fmt: skip
    assert b"Traceback" in failed.stderr
    assert error_lines(failed.stderr).startswith("FileNotFoundError: [Errno 2]")
    assert error_lines(b"one\ntwo\nthree\nfour\n") == "two | three | four"  # no traceback


def test_the_crawl_duckdb_child_runs_its_module_file_alone(tmp_path):
    """Issue 33: ``python -m batchcrawl.store.duckdbfile`` imported the package's ``__init__``
    (pyarrow, numpy: ~45 MB of the child's ~130 MB peak RSS). A module of ``child.STANDALONE``
    imports only the standard library at module level, and its real child, run by file path,
    still writes a database with the job's views."""
    import ast
    import importlib.util

    import duckdb

    from batchcrawl.store import schemas
    from batchcrawl.store.child import STANDALONE, run_module

    for module in STANDALONE:
        tree = ast.parse(open(importlib.util.find_spec(module).origin, encoding="utf-8").read())
        top = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        top |= {n.module for n in tree.body if isinstance(n, ast.ImportFrom)}
        assert {name.split(".")[0] for name in top} <= set(sys.stdlib_module_names), module
    db = tmp_path / "x.duckdb"
    job = {"tmp": f"{db}.tmp", "final": str(db), "commits_dir": str(tmp_path / "_commits"),
           "generation": 0, "search_path": str(tmp_path), "ddl": schemas.schema_sql(),
           "views": {"answer": "SELECT 42 AS n", "fetched": None}}  # fmt: skip
    run_module("batchcrawl.store.duckdbfile", json.dumps(job).encode("utf-8"), timeout_s=120)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.sql("SELECT n FROM answer").fetchall() == [(42,)]
        assert con.sql("SELECT count(*) FROM fetched").fetchall() == [(0,)]
    finally:
        con.close()


def test_the_children_give_their_result_when_a_native_exit_handler_aborts(tmp_path, monkeypatch):
    """DuckDB's and Arrow's thread pools, destroyed by the C library's exit handlers, now and
    then abort a process that has done its work (apache/arrow#34314): a child that did so would
    be a failed schema derivation or crawl.duckdb refresh. Both children end by ``os._exit``
    after flushing; here a ``sitecustomize`` on the children's ``PYTHONPATH`` registers
    ``abort`` as such a handler (``__cxa_atexit``), and without the ``os._exit`` both fail."""
    import duckdb

    from batchcrawl.store import schemas
    from batchcrawl.store.child import run_module

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import ctypes\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.__cxa_atexit(ctypes.cast(libc.abort, ctypes.c_void_p), None, None)\n"
    )
    monkeypatch.setenv("PYTHONPATH", str(site))
    aborts = subprocess.run([sys.executable, "-c", "print('done')"], capture_output=True,
                            text=True, env=dict(os.environ), check=False)  # fmt: skip
    assert (aborts.returncode, aborts.stdout) == (-signal.SIGABRT, "done\n")  # the fault is real
    derived = json.loads(run_module(schemas.__name__, b"", timeout_s=120))
    assert set(derived["schemas"]) >= {"frontier", "fetched"}
    db = tmp_path / "x.duckdb"
    job = {"tmp": f"{db}.tmp", "final": str(db), "commits_dir": str(tmp_path / "_commits"),
           "generation": 0, "search_path": str(tmp_path), "ddl": schemas.schema_sql(),
           "views": {"answer": "SELECT 7 AS n"}}  # fmt: skip
    run_module("batchcrawl.store.duckdbfile", json.dumps(job).encode("utf-8"), timeout_s=120)
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.sql("SELECT n FROM answer").fetchall() == [(7,)]
    finally:
        con.close()


def test_a_spawned_child_gets_its_input_and_gives_its_output_status_and_timeout():
    """``child.spawn_run`` (posix_spawn, issue 33) does what ``subprocess.run`` did for the
    children: megabytes through stdin and stdout (more than a pipe buffer), stderr apart, the
    exit status, a child that ignores its input, and a child killed at its time limit."""
    from batchcrawl.store.child import spawn_run

    env = dict(os.environ)
    echo = "import sys; d = sys.stdin.buffer.read(); sys.stdout.buffer.write(d[::-1]); print('e', file=sys.stderr)"
    data = bytes(range(256)) * 20_000
    assert spawn_run([sys.executable, "-c", echo], env, data, 120) == (0, data[::-1], b"e\n")
    status, out, err = spawn_run([sys.executable, "-c", "raise SystemExit(3)"], env, data, 120)
    assert (status, out) == (3, b"")
    hang = "import time; time.sleep(600)"
    assert spawn_run([sys.executable, "-c", hang], env, b"", 0.5) == (None, b"", b"")
