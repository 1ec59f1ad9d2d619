"""The crawl directory: commits, conflicts, crash safety under SIGKILL, crawl.duckdb, and gc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest
from crawl_helpers import PAUSE_POINTS, commit_step, fetched_row, frontier_row, put, small_crawl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from round_helpers import subprocess_env

from batchcrawl.errors import CommitConflict, CrawlDirError, SchemaError
from batchcrawl.store import crawldir, schemas, views
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.gc import gc

HELPER = Path(__file__).resolve().parent / "crawl_helpers.py"


def all_files(root: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs}


def assert_generation_complete(crawl: CrawlDir, generation: int | None = None) -> None:
    """Every file of the generation exists and reads, and the row counts match the manifest."""
    manifest = crawl.manifest(generation)
    for table in schemas.TABLES:
        data = crawl.read_current(table, generation=manifest.generation)
        assert data.num_rows == manifest.rows(table), table
        assert data.schema == schemas.schema(table)


# -- basics ----------------------------------------------------------------------------------
def test_create_commit_and_time_travel(tmp_path):
    crawl = CrawlDir.create(str(tmp_path / "c"), "[crawl]\n", buckets=2)
    g0 = crawl.manifest()
    assert (g0.generation, g0.round, g0.buckets) == (0, 0, 2)
    entry = crawl.write_table(
        "frontier", "frontier/gen=1/bucket=000.parquet", [frontier_row(i) for i in range(3)]
    )
    g1 = crawl.commit(g0, {"frontier": [entry]}, {"step": "inject"})
    assert crawl.generations() == [0, 1]
    assert CrawlDir.open(crawl.url).manifest().generation == 1
    assert crawl.read_current("frontier").num_rows == 3
    assert crawl.read_current("frontier", generation=0).num_rows == 0
    assert g1.parent == 0 and g1.files("frontier") == ["frontier/gen=1/bucket=000.parquet"]


def test_create_refuses_existing_crawl_and_open_refuses_non_crawl(tmp_path):
    CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    with pytest.raises(CrawlDirError, match="already exists"):
        CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    with pytest.raises(CrawlDirError, match="not a crawl directory.*batchcrawl init"):
        CrawlDir.open(str(tmp_path / "nothing"))


def test_second_commit_on_same_parent_conflicts(tmp_path):
    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    parent = crawl.manifest()
    crawl.commit(parent, {}, {"step": "a"})
    with pytest.raises(CommitConflict, match="generation 1"):
        crawl.commit(parent, {}, {"step": "b"})
    assert crawl.manifest().summary["step"] == "a"


def test_write_table_validates_schema(tmp_path):
    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    with pytest.raises(SchemaError, match="frontier.*url"):
        crawl.write_table("frontier", "frontier/x.parquet", [{"url_key": 1}])


def test_copied_and_moved_crawl_duckdb_reads_its_own_files_from_any_directory(tmp_path):
    """``cp -a crawl crawl2``, then change the original: plain duckdb (no batchcrawl) on the copy
    reads the copy's files, from any working directory; after ``mv`` too; with the original gone
    the moved copy still reads."""
    import shutil

    crawl = small_crawl(tmp_path / "c")
    copy = tmp_path / "copies" / "c2"
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", crawl.root, str(copy)], check=True)
    crawl.commit(crawl.manifest(), {"fetched": []}, {"step": "x"})  # the original changes
    code = (
        "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True);"
        "print(con.sql('SELECT count(*) FROM frontier').fetchall()[0][0],"
        " con.sql('SELECT count(*) FROM fetched').fetchall()[0][0])"
    )

    def counts(db, cwd):
        out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True,
                             text=True, cwd=cwd)  # fmt: skip
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.split()

    assert counts(crawl.path("crawl.duckdb"), tmp_path) == ["6", "0"]
    assert counts(copy / "crawl.duckdb", "/") == ["6", "5"]
    moved = tmp_path / "moved"
    shutil.move(str(copy), moved)
    shutil.rmtree(crawl.root)
    assert counts(moved / "crawl.duckdb", moved) == ["6", "5"]
    assert counts("crawl.duckdb", moved) == ["6", "5"]


def test_commit_refreshes_crawl_duckdb_usable_on_its_own(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    db = crawl.path("crawl.duckdb")
    # a fresh interpreter that does not import batchcrawl
    code = (
        "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True);"
        "print(con.sql('SELECT count(*) FROM frontier').fetchall()[0][0],"
        " con.sql('SELECT count(*) FROM fetched').fetchall()[0][0],"
        " con.sql('SELECT count(*) FROM links').fetchall()[0][0])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, db], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.split() == ["6", "5", "0"]
    parent = crawl.manifest()
    crawl.commit(parent, {"fetched": []}, {"step": "x"})
    con = duckdb.connect(db, read_only=True)
    assert con.sql("SELECT count(*) FROM fetched").fetchall() == [(0,)]
    con.close()
    assert not [f for f in all_files(crawl.root) if ".tmp-" in f]


def test_background_refresh_writes_the_newest_generation_in_child_processes(tmp_path, monkeypatch):
    """Inside views.background_refresh commits return before crawl.duckdb is written; children
    write it, at most one per REFRESH_INTERVAL_S (the commits in between are folded into the
    next), and leaving the context writes the newest generation at once."""
    crawl = small_crawl(tmp_path / "c")
    db = crawl.path("crawl.duckdb")
    children = []
    real = views.run_module

    def counted(module, data, timeout_s, fed=None):  # the real child, counted
        children.append(module)
        return real(module, data, timeout_s, fed)

    monkeypatch.setattr(views, "run_module", counted)
    monkeypatch.setattr(views, "REFRESH_INTERVAL_S", 3600.0)
    monkeypatch.setattr(views._background, "_last", -float("inf"))
    fetched = crawl.manifest().tables["fetched"]
    with views.background_refresh():
        m = crawl.manifest()
        for i in range(4):  # 4 commits: fetched listed, empty, listed, empty
            m = crawl.commit(m, {"fetched": [] if i % 2 == 0 else fetched}, {"step": f"x{i}"})
    assert children == ["batchcrawl.store.duckdbfile"] * 2
    con = duckdb.connect(db, read_only=True)
    try:  # the last commit listed the fetched file again: 5 rows, as in the newest generation
        assert con.sql("SELECT count(*) FROM fetched").fetchall() == [(5,)]
    finally:
        con.close()
    assert not [f for f in all_files(crawl.root) if ".tmp-" in f]


def test_a_stopping_process_leaves_the_last_refresh_to_its_child(tmp_path):
    """A command stopped by a signal waits for the last crawl.duckdb refresh at most
    views.STOP_WAIT_S (a refresh is seconds on a loaded machine or a large crawl, issue 34): here
    a process commits inside background_refresh and leaves at once (STOP_WAIT_S = 0) while the
    child refreshes. The child renames the file itself, so once it ends crawl.duckdb names the
    new generation although its parent is gone; no temp file is left."""
    crawl = small_crawl(tmp_path / "c")
    before = crawl.manifest().generation
    code = (
        "import sys\n"
        "from batchcrawl.store import views\n"
        "from batchcrawl.store.crawldir import CrawlDir\n"
        "views.STOP_WAIT_S = 0.0\n"
        "crawl = CrawlDir.open(sys.argv[1])\n"
        "with views.background_refresh(lambda: True):\n"
        "    crawl.commit(crawl.manifest(), {'fetched': []}, {'step': 'x'})\n"
        "print(views._background._thread is not None)\n"  # the child still ran at the exit
    )
    out = subprocess.run([sys.executable, "-c", code, crawl.url], capture_output=True, text=True,
                         check=True, env=subprocess_env(), timeout=120)  # fmt: skip
    assert out.stdout.split() == ["True"], out.stderr
    assert crawl.manifest().generation == before + 1
    db = crawl.path("crawl.duckdb")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the orphaned child: no process to wait for
        if not [f for f in all_files(crawl.root) if ".tmp-" in f] and _fetched_rows(db) == 0:
            break
        time.sleep(0.1)
    assert _fetched_rows(db) == 0  # the new generation's views (small_crawl's had 5 rows)
    assert not [f for f in all_files(crawl.root) if ".tmp-" in f]


def _fetched_rows(db: str) -> int | None:
    """Rows of the ``fetched`` view of the DuckDB file ``db`` (None while it cannot be read)."""
    try:
        con = duckdb.connect(db, read_only=True)
    except duckdb.Error:
        return None
    try:
        return con.sql("SELECT count(*) FROM fetched").fetchall()[0][0]
    finally:
        con.close()


def test_a_refresh_of_a_superseded_generation_leaves_the_newer_file(tmp_path):
    """A refresh that finishes after a newer generation was published (a slow child, another
    process) must not put the older views back: crawl.duckdb names the newest generation."""
    crawl = small_crawl(tmp_path / "c")
    db = crawl.path("crawl.duckdb")
    old = crawl.manifest()
    crawl.commit(old, {"fetched": []}, {"step": "x"})  # refreshes in this process: 0 rows
    for child in (False, True):
        assert views.refresh_file(crawl, old, child=child) is None
        con = duckdb.connect(db, read_only=True)
        try:
            assert con.sql("SELECT count(*) FROM fetched").fetchall() == [(0,)]
        finally:
            con.close()
    assert views.refresh_file(crawl, crawl.manifest(), child=True) == db
    assert not [f for f in all_files(crawl.root) if ".tmp-" in f]


def test_a_refresh_of_a_generation_expired_meanwhile_is_skipped_not_raised(tmp_path):
    """Automatic retention may expire a generation (and delete its files) while a background
    refresh writes its views (a fast stream with gc.keep_seconds = 0): the refresh fails, and as
    a newer generation exists it is skipped (None), in this process and in a child; a refresh
    of the current generation that fails still raises."""
    from batchcrawl.store import retention

    crawl = small_crawl(tmp_path / "c")
    old = crawl.manifest()
    m = crawl.commit(old, {"frontier": [], "fetched": []}, {"step": "x"})
    assert retention.expire(crawl, 1, 0.0)["deleted_files"] > 0  # old's files are gone
    for child in (False, True):
        assert views.refresh_file(crawl, old, child=child) is None
    assert not [f for f in all_files(crawl.root) if ".tmp-" in f]
    assert views.refresh_file(crawl, m, child=True) == crawl.path("crawl.duckdb")


def test_a_failed_background_refresh_is_logged_and_the_next_one_writes_the_file(
    tmp_path, monkeypatch, caplog
):
    crawl = small_crawl(tmp_path / "c")
    monkeypatch.setattr(views, "REFRESH_INTERVAL_S", 0.0)
    m = crawl.manifest()
    with views.background_refresh():
        monkeypatch.setenv("PYTHONPATH", str(tmp_path / "missing"))  # still finds batchcrawl
        monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))  # cannot start
        m = crawl.commit(m, {"fetched": []}, {"step": "x"})
        views._background.wait()
        monkeypatch.undo()
        monkeypatch.setattr(views, "REFRESH_INTERVAL_S", 0.0)
        m = crawl.commit(m, {"fetched": []}, {"step": "y"})
    assert "could not refresh crawl.duckdb" in caplog.text
    assert "the commit stands" in caplog.text and "a later commit refreshes it" in caplog.text
    con = duckdb.connect(crawl.path("crawl.duckdb"), read_only=True)
    try:
        assert con.sql("SELECT count(*) FROM fetched").fetchall() == [(0,)]
    finally:
        con.close()


# -- crash safety ----------------------------------------------------------------------------
@pytest.mark.parametrize("point", PAUSE_POINTS)
def test_sigkill_during_commit_leaves_previous_generation_whole(tmp_path, point, monkeypatch):
    # every commit past the first writes a file list (``list_tmp`` pauses in it)
    monkeypatch.setattr(crawldir, "INLINE_MAX", 0)
    path = str(tmp_path / "c")
    crawl = CrawlDir.create(path, "", buckets=1)
    parent = crawl.manifest()
    for _ in range(2):
        parent = commit_step(crawl, parent, n=3 + parent.generation)
    before = parent.generation
    proc = subprocess.Popen(
        [sys.executable, str(HELPER), path, "1", point],
        env={**os.environ, "BATCHCRAWL_TEST_INLINE_MAX": "0"},
        stdout=subprocess.PIPE,
        stdin=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == f"PAUSED {point}"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stdin.close()
    assert proc.returncode == -signal.SIGKILL

    crawl = CrawlDir.open(path)
    published = point in ("linked", "duckdb")
    assert crawl.manifest().generation == before + (1 if published else 0)
    for gen in crawl.generations():
        assert_generation_complete(crawl, gen)
    con = duckdb.connect(crawl.path("crawl.duckdb"), read_only=True)  # old or new, never torn
    assert con.sql("SELECT count(*) FROM frontier").fetchall()[0][0] in (
        crawl.manifest(before).rows("frontier"),
        crawl.manifest().rows("frontier"),
    )
    con.close()

    # the next run succeeds, and gc clears what the killed one left
    parent = crawl.manifest()
    for _ in range(2):
        parent = commit_step(crawl, parent, n=3 + parent.generation)
    assert crawl.generations()[-1] == before + (3 if published else 2)
    assert_generation_complete(crawl)
    gc(crawl, keep=1, tmp_min_age_s=0)
    left = all_files(crawl.root)
    assert not [f for f in left if ".tmp-" in f]
    assert {f for f in left if f.startswith("_commits/lists/")} == set(
        crawl.manifest().list_files()
    )
    assert crawl.manifest().list_files()
    assert_generation_complete(crawl)


def test_helper_runs_clean_commits(tmp_path):
    """Control for the crash test: the same helper without a pause point commits and exits 0."""
    path = str(tmp_path / "c")
    out = subprocess.run(
        [sys.executable, str(HELPER), path, "3"], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "DONE 3"
    assert_generation_complete(CrawlDir.open(path))


# -- gc --------------------------------------------------------------------------------------
def test_gc_keeps_referenced_files_of_older_generations(tmp_path):
    crawl = small_crawl(tmp_path / "c", buckets=2)
    g1 = crawl.manifest()
    # generation 2 rewrites bucket 0 only; bucket 1 (written at gen 1) stays referenced
    new0 = crawl.write_table("frontier", "frontier/gen=2/bucket=000.parquet", [frontier_row(0)])
    g2 = crawl.commit(g1, {"frontier": [new0, g1.tables["frontier"][1]]}, {"step": "round"})
    # an orphan of a round that died, and an old temp leftover
    crawl.write_table("fetched", "fetched/round=9/shard=00.parquet", [fetched_row(1)])
    put(crawl, "warc/round=9/shard=00-00000.warc.gz", b"orphan")
    put(crawl, "warc/round=9/shard=00-00000.cdxj", b"orphan's index")
    put(crawl, "warc/round=1/shard=00-00000.cdxj", b"kept WARC's index")
    put(crawl, "frontier/gen=3/bucket=000.parquet.tmp-abc", b"partial")
    put(crawl, "crawl.duckdb.tmp-abc", b"partial")
    put(crawl, "_lock.json.stale-abc", b"{}")

    result = gc(crawl, keep=1, tmp_min_age_s=0)
    files = all_files(crawl.root)
    assert "frontier/gen=1/bucket=001.parquet" in files  # still referenced by gen 2
    assert "frontier/gen=1/bucket=000.parquet" not in files  # only gen 1 used it
    assert "warc/round=1/shard=00-00000.warc.gz" in files  # named by gen 2's fetched rows
    assert "fetched/round=9/shard=00.parquet" not in files
    assert "warc/round=9/shard=00-00000.warc.gz" not in files
    assert "warc/round=1/shard=00-00000.cdxj" in files  # beside a kept WARC file
    assert "warc/round=9/shard=00-00000.cdxj" not in files
    assert "frontier/gen=3/bucket=000.parquet.tmp-abc" not in files
    assert "_commits/000001.json" not in files and "_commits/000002.json" in files
    assert "crawl.duckdb.tmp-abc" not in files and "_lock.json.stale-abc" not in files
    assert "crawl.duckdb" in files and "crawl.toml" in files
    assert result["kept_generations"] == [g2.generation]
    assert result["deleted_manifests"] == 2 and result["deleted_files"] == 7
    assert_generation_complete(crawl)


FOREIGN = (
    "notes.txt",
    "notes.tmp-1",
    "crawl.duckdb.bak",
    "_commits/README",
    "_commits/000001.json.orig",
    "frontier/mine.parquet",
    "frontier/gen=1/bucket=000.parquet.bak",
    "frontier/gen=1/extra.csv",
    "frontier/keep/bucket=000.parquet",
    "hosts/gen=1/shard=00.csv",
    "fetchlists/round=1/part-00.parquet",
    "fetched/crawl=lake/round=1/part-00.parquet",
    "fetched/round=1/shard=00.parquet.old",
    "links/round=1/links.json",
    "warc/round=1/mine.warc.gz",
    "warc/round=9/shard=00-00000.warc.gz.cdxj",
    "_batchcrawl_export/crawl=c/round=1.json",
    "other/frontier/gen=1/bucket=000.parquet",
)


def test_gc_deletes_only_the_crawls_own_layout_paths(tmp_path):
    """Foreign files in every folder (root, _commits, each table folder, partition folders, an
    export's layout) survive gc, even old ones whose names look like temp files; the crawl's own
    orphans next to them go."""
    crawl = small_crawl(tmp_path / "c", buckets=2)
    g1 = crawl.manifest()
    new0 = crawl.write_table("frontier", "frontier/gen=2/bucket=000.parquet", [frontier_row(0)])
    crawl.commit(g1, {"frontier": [new0, g1.tables["frontier"][1]]}, {"step": "round"})
    for rel in FOREIGN:
        put(crawl, rel, b"not batchcrawl's")
    os.makedirs(crawl.path("links/empty-but-mine"))
    put(crawl, "fetched/round=9/shard=00.parquet", b"orphan")
    put(crawl, "hosts/gen=9/shard=01.parquet.tmp-0a1b", b"partial")

    result = gc(crawl, keep=1, tmp_min_age_s=0)
    files = all_files(crawl.root)
    assert set(FOREIGN) <= files
    for rel in FOREIGN:
        assert Path(crawl.path(rel)).read_bytes() == b"not batchcrawl's", rel
    assert os.path.isdir(crawl.path("links/empty-but-mine"))
    assert "fetched/round=9/shard=00.parquet" not in files
    assert "hosts/gen=9/shard=01.parquet.tmp-0a1b" not in files
    assert "frontier/gen=1/bucket=000.parquet" not in files  # only generation 1 used it
    assert result["deleted_files"] == 3
    assert_generation_complete(crawl)


def test_init_refuses_a_non_empty_directory_naming_what_is_there(tmp_path):
    lake = tmp_path / "lake"
    (lake / "fetched").mkdir(parents=True)
    (lake / "_batchcrawl_export").mkdir()
    with pytest.raises(CrawlDirError, match=r"not empty.*_batchcrawl_export, fetched"):
        CrawlDir.create(str(lake), "", buckets=2)
    assert sorted(os.listdir(lake)) == ["_batchcrawl_export", "fetched"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert CrawlDir.create(str(empty), "", buckets=2).generations() == [0]


def test_gc_spares_young_temp_files_and_dry_run_deletes_nothing(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    put(crawl, "frontier/gen=5/bucket=000.parquet.tmp-young", b"being written")
    before = all_files(crawl.root)
    dry = gc(crawl, keep=1, dry_run=True, tmp_min_age_s=0)
    assert all_files(crawl.root) == before and dry["deleted_files"] == 1
    gc(crawl, keep=1, tmp_min_age_s=3600)
    assert "frontier/gen=5/bucket=000.parquet.tmp-young" in all_files(crawl.root)


def test_gc_dry_run_counts_what_the_real_run_does(tmp_path):
    """A fresh-user trial: ``gc --dry-run`` said 687 kept files and the run 679: the manifests it
    would delete were counted as deleted and as kept."""
    crawl = small_crawl(tmp_path / "c")
    for _ in range(3):  # generations for gc to drop
        crawl.commit(crawl.manifest(), {}, {"step": "noop"})
    dry = gc(crawl, keep=1, dry_run=True)
    real = gc(crawl, keep=1)
    assert dry["deleted_manifests"] == real["deleted_manifests"] >= 3
    assert {k: v for k, v in dry.items() if k != "dry_run"} == {
        k: v for k, v in real.items() if k != "dry_run"
    }


def test_gc_refuses_keep_zero(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    with pytest.raises(ValueError, match="at least 1"):
        gc(crawl, keep=0)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    steps=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=6),
    keep=st.integers(1, 4),
)
def test_gc_invariant_kept_generations_whole_and_nothing_unreferenced(
    tmp_path_factory, steps, keep
):
    """For any history of commits (each rewriting bucket 0 and/or bucket 1 and/or adding a fetched
    file with a WARC, or leaving an orphan), after gc every kept generation reads completely and
    every remaining data file is referenced by a kept generation."""
    crawl = CrawlDir.create(str(tmp_path_factory.mktemp("g") / "c"), "", buckets=2)
    parent = crawl.manifest()
    buckets = [
        crawl.write_table("frontier", f"frontier/gen=0/bucket={b:03d}.parquet", [frontier_row(b)])
        for b in range(2)
    ]
    for g, (rewrite0, rewrite1, fetch) in enumerate(steps, start=1):
        for b, rewrite in enumerate((rewrite0, rewrite1)):
            if rewrite:
                buckets[b] = crawl.write_table(
                    "frontier", f"frontier/gen={g}/bucket={b:03d}.parquet", [frontier_row(b)]
                )
        tables = {"frontier": list(buckets)}
        if fetch:
            warc = f"warc/round={g}/shard=00-00000.warc.gz"
            put(crawl, warc, b"W")
            new = crawl.write_table(
                "fetched", f"fetched/round={g}/shard=00.parquet", [fetched_row(g, warc=warc)]
            )
            tables["fetched"] = [*parent.tables["fetched"], new]
        else:  # an orphan: written, never committed
            crawl.write_table("links", f"links/round={g}/shard=00.parquet", [])
        parent = crawl.commit(parent, tables, {"step": "round"})
    gc(crawl, keep=keep, tmp_min_age_s=0)
    kept = crawl.generations()
    assert kept == list(range(len(steps) + 1))[-keep:]
    referenced = set()
    for gen in kept:
        assert_generation_complete(crawl, gen)
        m = crawl.manifest(gen)
        for table in schemas.TABLES:
            referenced.update(m.files(table))
        for rel in m.files("fetched"):
            referenced.update(
                crawl.read_table("fetched", [rel]).column("warc_filename").to_pylist()
            )
    data = {
        f
        for f in all_files(crawl.root)
        if f.split("/")[0] in ("frontier", "hosts", "fetchlists", "fetched", "links", "warc")
    }
    assert data == referenced


def test_write_table_writes_zstd_without_dictionaries_and_duckdb_reads_it(tmp_path):
    """``crawldir.TABLE_PARQUET_OPTIONS``: every column chunk zstd, no dictionary page (smaller
    and faster for these tables' mostly distinct values); DuckDB reads back every row."""
    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    rows = [
        {"digest_key": i * 7919, "digest": f"sha1:{i:032d}", "url_key": i * 104729,
         "url": f"http://h{i % 3}.test/{i}", "round": 1, "fetch_time": 1_700_000_000_000 + i}
        for i in range(300)
    ]  # fmt: skip
    entry = crawl.write_table("content", "content/gen=1/bucket=000.run.parquet", rows)
    path = crawl.path(entry.path)
    meta = pq.ParquetFile(path).metadata
    chunks = [meta.row_group(g).column(c) for g in range(meta.num_row_groups)
              for c in range(meta.num_columns)]  # fmt: skip
    assert {c.compression for c in chunks} == {"ZSTD"}
    assert not any(c.has_dictionary_page for c in chunks)
    got = duckdb.connect().execute(f"SELECT url FROM '{path}' ORDER BY digest").fetchall()
    assert got == [(r["url"],) for r in rows]
