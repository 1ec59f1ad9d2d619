"""Fact-file compaction and automatic retention (issue 35 items 3 and 4).

Property tests on real Parquet files (a merge keeps every row, each round reads back exactly its
own rows), then a real crawl of a loopback sample web with compaction and retention on at every
round: the SQL views, the export (idempotent per round across a later merge), the link graph and
``gc`` all read the merged files, and retention leaves exactly what a full ``gc`` would keep."""

from __future__ import annotations

from collections import Counter

import duckdb
import pytest
from crawl_helpers import fetched_row
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from round_helpers import new_crawl, round_config, sample_web, serve

from batchcrawl.export.lake import export_crawl
from batchcrawl.graph.build import build_graph
from batchcrawl.round import run_rounds
from batchcrawl.store import factcompact, paths, retention, sql
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.factcompact import FactCompaction, compact_listing
from batchcrawl.store.gc import gc, referenced_files


def keyed(table) -> Counter:
    return Counter(zip(*(table.column(c).to_pylist() for c in ("url_key", "round")), strict=True))


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    files=st.lists(st.tuples(st.integers(1, 9), st.integers(0, 5)), min_size=1, max_size=14),
    min_files=st.integers(2, 4),
    target=st.integers(1, 12),
    age=st.integers(0, 3),
)
def test_a_merge_keeps_every_row_and_each_round_reads_back_its_own(
    tmp_path_factory, files, min_files, target, age
):
    crawl = CrawlDir.create(str(tmp_path_factory.mktemp("f") / "c"), "", buckets=1)
    listing = []
    for i, (rnd, n) in enumerate(sorted(files)):
        rel = paths.round_file("fetched", rnd, i)
        listing.append(crawl.write_table(
            "fetched", rel, [fetched_row(100 * i + k, round=rnd) for k in range(n)]))  # fmt: skip
    policy = FactCompaction(min_files, target, age)
    before = crawl.read_table("fetched", listing)
    current = 10
    listing2 = listing
    for generation in (1, 2):  # merging again merges merged files (a higher tier)
        listing2, merged = compact_listing(crawl, "fetched", listing2, current, generation, policy)
    after = crawl.read_table("fetched", listing2)
    assert keyed(after) == keyed(before)
    assert len(listing2) <= len(listing)
    for e in listing2:
        assert paths.LAYOUT_RE["fetched"].fullmatch(e.path), e.path
    for r, entries in factcompact.round_entries(listing2).items():
        got = factcompact.read_round(crawl, "fetched", entries, r)
        assert keyed(got) == Counter({k: v for k, v in keyed(before).items() if k[1] == r})
    if len(factcompact.due_groups(listing, current, policy)) == 0:
        assert listing2 == listing


@pytest.fixture(scope="module")
def compacted_crawl(tmp_path_factory):
    """Four real rounds, fact files merged at every commit that has two due (min age 1 round),
    retention keeping the newest 2 generations."""
    web = sample_web(hosts=4, pages=60)
    cfg = round_config(
        store={"compact_facts_min_files": 2, "compact_facts_min_age_rounds": 1},
        gc={"auto": True, "keep_seconds": 0.0},
        crawl={"keep_generations": 2, "name": "cc"},
    )
    with serve(web):
        crawl = new_crawl(tmp_path_factory.mktemp("cc") / "crawl", cfg, web.seeds())
        before = export_dest = None
        summaries = run_rounds(crawl.url, cfg, 2)
        before = crawl.manifest()
        export_dest = str(tmp_path_factory.mktemp("lake") / "lake")
        first = export_crawl(crawl, export_dest, crawl_name="cc", tables="fetched,links")
        summaries += run_rounds(crawl.url, cfg, 2)
    yield crawl, summaries, before, export_dest, first


def test_merged_files_replace_the_rounds_own_files(compacted_crawl):
    crawl, summaries, *_ = compacted_crawl
    m = crawl.manifest()
    for table in ("fetchlists", "fetched", "links", "edges"):  # one file per shard per round
        merged = [e for e in m.tables[table] if factcompact.is_merged(e)]
        assert merged, table
        rounds = {r for e in m.tables[table] for r in range(*_span(e.path))}
        assert rounds == {s["round"] for s in summaries}, table
    fetched = crawl.read_current("fetched", columns=["round"]).column(0).to_pylist()
    # a row per attempt and per URL a held host gave back
    assert Counter(fetched) == {s["round"]: s["attempts"] + s["given_back"] for s in summaries}


def _span(path: str) -> tuple[int, int]:
    first, last, _ = paths.fact_rounds(path)
    return first, last + 1


def test_sql_views_and_the_graph_read_merged_files(compacted_crawl):
    crawl, summaries, *_ = compacted_crawl
    m = crawl.manifest()
    got = sql.query(crawl, "SELECT count(*) AS n FROM fetched").to_pylist()
    assert got == [{"n": sum(s["attempts"] + s["given_back"] for s in summaries)}]
    edges = sql.query(crawl, "SELECT count(*) AS n FROM edges").to_pylist()[0]["n"]
    assert edges == m.rows("edges") > 0
    con = duckdb.connect(crawl.path("crawl.duckdb"), read_only=True)
    try:
        assert con.sql("SELECT count(*) FROM links").fetchall() == [(m.rows("links"),)]
    finally:
        con.close()
    graph = build_graph(crawl)
    assert graph["edges"] == m.rows("edges")


def test_export_is_idempotent_across_a_merge_and_exports_merged_rounds(compacted_crawl):
    crawl, summaries, before, dest, first = compacted_crawl
    assert first["exported"] == [1, 2]
    again = export_crawl(crawl, dest, crawl_name="cc", tables="fetched,links")
    assert again["skipped"] == [1, 2] and again["replaced"] == []  # merged since: same rows
    assert again["exported"] == [3, 4]
    lake = duckdb.sql(
        f"SELECT round, count(*) AS n FROM read_parquet('{dest}/fetched/**/*.parquet', "
        "hive_partitioning = true) GROUP BY round ORDER BY round"
    ).fetchall()
    assert lake == [(s["round"], s["attempts"] + s["given_back"]) for s in summaries]


def test_retention_keeps_the_window_and_exactly_what_gc_would(compacted_crawl):
    crawl, *_ = compacted_crawl
    gens = crawl.generations()
    assert len(gens) == 2  # crawl.keep_generations, applied after every commit
    referenced = referenced_files(crawl, gens)
    for rel in referenced:
        if not rel.startswith("warc/"):  # a WARC file's CDXJ/WET may not exist
            assert crawl.fs.exists(crawl.path(rel)), rel
    dry = gc(crawl, keep=2, tmp_min_age_s=1e9, dry_run=True)
    assert dry["deleted_manifests"] == 0 and dry["deleted_files"] == 0
    assert retention.expire(crawl, 2, 0.0) == {"expired": [], "deleted_files": 0}


KILLED_MERGE = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from batchcrawl.store import factcompact
from batchcrawl.store.crawldir import CrawlDir
real = factcompact._merge
def merge(*args, **kwargs):
    real(*args, **kwargs)  # one merged file written whole, then the process dies
    os.kill(os.getpid(), signal.SIGKILL)
factcompact._merge = merge
crawl = CrawlDir.open(sys.argv[1])
m = crawl.manifest()
policy = factcompact.FactCompaction(2, 1000, 0)
listing, _ = factcompact.compact_listing(crawl, "fetched", m.tables["fetched"], 9, m.generation + 1, policy)
crawl.commit(m, {"fetched": listing}, {})
"""


def test_sigkill_during_a_merge_keeps_the_committed_generation_and_gc_clears_it(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    parent = crawl.manifest()
    for r in range(1, 5):
        f = crawl.write_table(
            "fetched", paths.round_file("fetched", r, 0), [fetched_row(r, round=r)]
        )
        parent = crawl.commit(parent, {"fetched": [*parent.tables["fetched"], f]}, {}, round=r)
    before = crawl.read_current("fetched")
    repo = str(Path(__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", KILLED_MERGE, crawl.url, repo], check=False)
    assert proc.returncode == -9
    assert crawl.manifest().generation == parent.generation  # nothing committed
    assert keyed(crawl.read_current("fetched")) == keyed(before)
    orphans = [p for p in Path(crawl.root, "fetched").rglob("*.parquet") if "rounds=" in str(p)]
    assert orphans  # the merged file written before the kill
    gc(crawl, keep=1, tmp_min_age_s=0)
    assert not [p for p in Path(crawl.root, "fetched").rglob("*") if "rounds=" in str(p)]
    listing, merged = compact_listing(
        crawl, "fetched", parent.tables["fetched"], 9, parent.generation + 1,
        FactCompaction(2, 1000, 0),
    )  # fmt: skip
    assert merged == 4
    crawl.commit(parent, {"fetched": listing}, {})
    assert keyed(crawl.read_current("fetched")) == keyed(before)
