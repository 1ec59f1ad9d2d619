"""Workers are handed the driver's table schemas and never load DuckDB (batchcrawl.workersetup);
the driver of a running crawl does not either (crawl.duckdb from child processes:
batchcrawl.store.views).

A real LocalCluster: after a round's generate, fetch and update tasks ran in them, the worker
processes have not imported DuckDB, and their schemas are the driver's; a worker restarted by its
nanny gets them again. :func:`schemas.install` refuses schemas of another DDL. A crawl whose driver
cannot import DuckDB at all runs its rounds (batch and stream) and leaves a ``crawl.duckdb`` over
its newest generation.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from round_helpers import (
    fetched_rows,
    frontier_rows,
    helper_command,
    new_crawl,
    round_config,
    sample_web,
    serve,
    subprocess_env,
)

from batchcrawl.round import Crawler, dask_client
from batchcrawl.store import schemas

pytestmark = pytest.mark.timeout(300)


def _state() -> tuple[bool, bool, dict[str, bytes], bool]:
    """In a worker: DuckDB loaded?, schemas installed?, the schemas it uses (IPC bytes),
    ``pyarrow.dataset`` loaded (15 MB a process; ``crawldir.read_parquet`` says why not)?"""
    import batchcrawl.fetch.worker  # noqa: F401  (what a shard actor imports)
    import batchcrawl.frontier.generate  # noqa: F401
    from batchcrawl.store import schemas as worker_schemas

    used = {t: worker_schemas.schema(t).serialize().to_pybytes() for t in worker_schemas.TABLES}
    loaded = "duckdb" in sys.modules, worker_schemas._installed is not None, used
    return (*loaded, "pyarrow.dataset" in sys.modules)


def test_workers_get_the_drivers_schemas_and_never_load_duckdb_or_arrow_datasets(tmp_path):
    cfg = round_config(round={"workers": 2}, fetch={"shards": 2})
    want = {t: schemas.schema(t).serialize().to_pybytes() for t in schemas.TABLES}
    with serve(sample_web()) as web, dask_client(cfg) as client:
        crawl = new_crawl(tmp_path / "c", cfg, web.app.seeds())
        crawler = Crawler(crawl.url, client)
        try:  # two rounds: generate, fetch, update and compaction tasks ran in the workers
            summaries = [crawler.run_round(cfg) for _ in range(2)]
        finally:
            crawler.close_actors()
        states = list(client.run(_state).values())
        client.restart()  # new worker processes: the plugin is set up in them again
        states += list(client.run(_state).values())
    assert all(s["attempts"] > 0 for s in summaries)
    assert len(states) == 4
    for duckdb_loaded, installed, used, dataset_loaded in states:
        assert not duckdb_loaded
        assert installed
        assert used == want
        assert not dataset_loaded  # the frontier's reads and the round's tasks do without it


def test_install_refuses_schemas_of_another_ddl(monkeypatch):
    given = schemas.exported()
    other = dict(given, ddl_digest="0" * 64)
    monkeypatch.setattr(schemas, "_installed", None)
    assert schemas.install(other) is False
    assert schemas._installed is None
    assert schemas.install(given) is True
    assert schemas.schema("fetched").equals(schemas._derived()["fetched"], check_metadata=True)
    assert [f.nullable for f in schemas.schema("fetched")] == [
        f.nullable for f in schemas._derived()["fetched"]
    ]


def test_the_crawlers_modules_import_without_duckdb():
    """Everything a worker runs imports with DuckDB unavailable; only the SQL views, status and the
    report need it."""
    code = """
import importlib, importlib.abc, pkgutil, sys
class NoDuckDB(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("duckdb", "_duckdb"):
            raise ImportError("no DuckDB here")
sys.meta_path.insert(0, NoDuckDB())
import batchcrawl
failed = []
for m in pkgutil.walk_packages(batchcrawl.__path__, "batchcrawl."):
    try:
        importlib.import_module(m.name)
    except ImportError:
        failed.append(m.name)
print(" ".join(sorted(failed)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    failed = set(out.stdout.split())
    needs_sql = {"batchcrawl.store.sql", "batchcrawl.store.status", "batchcrawl.demo"}
    assert failed - needs_sql <= {m for m in failed if m.startswith("batchcrawl.report.")}
    for module in ("batchcrawl.round", "batchcrawl.stream", "batchcrawl.cli",
                   "batchcrawl.fetch.worker", "batchcrawl.frontier.update",
                   "batchcrawl.store.crawldir", "batchcrawl.workersetup"):  # fmt: skip
        assert module not in failed


@pytest.mark.parametrize("mode", ["batch", "stream"])
def test_a_crawl_driver_without_duckdb_leaves_crawl_duckdb_over_its_newest_generation(
    tmp_path, mode
):
    import duckdb  # here: the workers unpickle this module's functions and must not load it

    cfg = round_config(round={"workers": 2}, fetch={"shards": 2})
    with serve(sample_web()) as web:
        crawl = new_crawl(tmp_path / "c", cfg, web.app.seeds())
        extra = ["--stream"] if mode == "stream" else []
        done = subprocess.run(
            helper_command(crawl.url, 3, None, "--no-duckdb", *extra),
            capture_output=True, text=True, env=subprocess_env(), timeout=240,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "could not refresh" not in done.stderr
    newest = crawl.manifest()
    assert newest.generation >= 3  # init, inject, and the crawl's commits
    fetched, frontier = fetched_rows(crawl), frontier_rows(crawl)
    assert fetched
    con = duckdb.connect(crawl.path("crawl.duckdb"), read_only=True)
    try:
        count = con.execute("SELECT count(*) FROM fetched").fetchone()[0]
        keys = {r[0] for r in con.execute("SELECT url_key FROM frontier").fetchall()}
    finally:
        con.close()
    assert count == len(fetched)
    assert keys == {r["url_key"] for r in frontier}
    assert not list((tmp_path / "c").glob("crawl.duckdb.tmp-*"))
