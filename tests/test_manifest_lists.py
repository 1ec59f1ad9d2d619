"""Manifests of format 2 (issue 35 item 1): append-only tables go through immutable file lists, so
a commit writes O(change) bytes; every generation reads back the listing that was committed; old
format-1 manifests still read and move into lists on their next commit; gc keeps the lists of kept
generations."""

from __future__ import annotations

import json
import os

import pytest
from crawl_helpers import fetched_row, frontier_row, small_crawl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchcrawl.errors import CrawlDirError
from batchcrawl.store import crawldir, paths
from batchcrawl.store.crawldir import CrawlDir, FileEntry
from batchcrawl.store.gc import gc


def fake_entries(table: str, start: int, n: int) -> list[FileEntry]:
    """Entries naming files that are never read (the listing is what is under test)."""
    return [FileEntry(paths.round_file(table, start + i, 0), start + i) for i in range(n)]


def manifest_bytes(crawl: CrawlDir, generation: int) -> int:
    return os.path.getsize(crawl.path(paths.commit_file(generation)))


def test_appending_commits_keep_manifest_small_and_lists_few(tmp_path, monkeypatch):
    monkeypatch.setattr(crawldir, "INLINE_MAX", 8)
    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    parent = crawl.manifest()
    sizes = []
    for r in range(1, 601):
        new = [FileEntry(paths.round_file("fetched", r, s), 1) for s in range(2)]
        parent = crawl.commit(parent, {"fetched": [*parent.tables["fetched"], *new]}, {}, round=r)
        sizes.append(manifest_bytes(crawl, parent.generation))
    assert len(parent.tables["fetched"]) == 1200
    # O(log) lists, each at least LIST_FANOUT times the next; manifests do not grow with history
    refs = parent.lists["fetched"]
    assert 1 <= len(refs) <= 6
    assert all(
        a.files >= crawldir.LIST_FANOUT * b.files for a, b in zip(refs, refs[1:], strict=False)
    )
    assert max(sizes[-100:]) <= max(sizes[:100]) + 400
    # read back from disk (no cache): the same listing, in order
    crawldir._LIST_CACHE.clear()
    again = CrawlDir.open(crawl.url).manifest()
    assert again.tables["fetched"] == parent.tables["fetched"]
    assert again.rows("fetched") == 1200


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["append", "rewrite", "other"]), st.integers(0, 7)),
        min_size=1,
        max_size=30,
    ),  # fmt: skip
    inline_max=st.integers(0, 5),
)
def test_every_generation_reads_back_what_was_committed(
    tmp_path_factory, monkeypatch, steps, inline_max
):
    """For any history of appends, rewrites (a compaction replacing a suffix of the listing) and
    commits of other tables, every generation's listing read from disk (lists uncached) equals
    the listing committed, and no list is larger than the entries a commit could merge."""
    monkeypatch.setattr(crawldir, "INLINE_MAX", inline_max)
    crawl = CrawlDir.create(str(tmp_path_factory.mktemp("m") / "c"), "", buckets=1)
    parent = crawl.manifest()
    committed = {0: parent.tables}
    serial = 0
    for kind, n in steps:
        listing = list(parent.tables["edges"])
        if kind == "append":
            listing += fake_entries("edges", serial, n)
        elif kind == "rewrite":  # the last n files merged into one
            keep = listing[: max(0, len(listing) - n)]
            listing = [*keep, FileEntry(f"edges/round={serial}/shard=99.parquet", n)]
        serial += 8
        tables = (
            {"edges": listing} if kind != "other" else {"links": fake_entries("links", serial, 1)}
        )
        parent = crawl.commit(parent, tables, {"step": kind})
        committed[parent.generation] = parent.tables
    crawldir._LIST_CACHE.clear()
    fresh = CrawlDir.open(crawl.url)
    for gen, tables in committed.items():
        got = fresh.manifest(gen)
        assert got.tables == tables
        for t, refs in got.lists.items():
            assert sum(r.files for r in refs) <= len(got.tables[t])


def test_format_1_manifest_reads_and_its_next_commit_moves_files_into_lists(tmp_path, monkeypatch):
    monkeypatch.setattr(crawldir, "INLINE_MAX", 4)
    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    m0 = crawl.manifest()
    old = fake_entries("fetched", 1, 10)
    legacy = {
        "format": 1, "generation": 1, "parent": 0, "round": 10, "buckets": 1,
        "created": "2026-01-01T00:00:00.000Z", "summary": {"step": "round"},
        "tables": {t: [e.to_json() for e in (old if t == "fetched" else m0.tables[t])]
                   for t in m0.tables},
    }  # fmt: skip
    with open(crawl.path(paths.commit_file(1)), "w") as fh:
        json.dump(legacy, fh)
    m1 = crawl.manifest()
    assert m1.generation == 1 and m1.tables["fetched"] == tuple(old) and not m1.lists
    m2 = crawl.commit(m1, {"fetched": [*old, *fake_entries("fetched", 11, 1)]}, {}, round=11)
    assert [r.files for r in m2.lists["fetched"]] == [11]
    data = json.loads(open(crawl.path(paths.commit_file(2))).read())
    assert data["format"] == 2 and data["tables"]["fetched"]["files"] == []
    crawldir._LIST_CACHE.clear()
    assert crawl.manifest().tables["fetched"] == m2.tables["fetched"]


def test_a_missing_or_damaged_list_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(crawldir, "INLINE_MAX", 0)
    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    m = crawl.commit(crawl.manifest(), {"links": fake_entries("links", 1, 3)}, {})
    (ref,) = m.lists["links"]
    crawldir._LIST_CACHE.clear()
    with open(crawl.path(ref.path), "w") as fh:
        fh.write('{"files": []}')
    with pytest.raises(CrawlDirError, match="holds 0 entries"):
        crawl.manifest()
    crawldir._LIST_CACHE.clear()
    os.unlink(crawl.path(ref.path))
    with pytest.raises(CrawlDirError, match="file list is missing"):
        crawl.manifest()


def test_gc_keeps_the_lists_of_kept_generations_only(tmp_path, monkeypatch):
    monkeypatch.setattr(crawldir, "INLINE_MAX", 0)
    crawl = small_crawl(tmp_path / "c")
    parent = crawl.manifest()
    for r in range(2, 7):
        f = crawl.write_table("fetched", paths.round_file("fetched", r, 0), [fetched_row(r)])
        parent = crawl.commit(parent, {"fetched": [*parent.tables["fetched"], f]}, {}, round=r)
    orphan = paths.file_list("fetched", 99, "abc")  # a commit killed before its manifest
    with open(crawl.path(orphan), "w") as fh:
        fh.write('{"files": []}')
    gc(crawl, keep=2, tmp_min_age_s=0)
    lists = {f"_commits/lists/{n}" for n in os.listdir(crawl.path("_commits/lists"))}
    want = set(crawl.manifest().list_files()) | set(
        crawl.manifest(parent.generation - 1).list_files()
    )
    assert lists == want and orphan not in lists
    crawldir._LIST_CACHE.clear()
    assert crawl.read_current("fetched").num_rows == 5 + 5  # small_crawl wrote 5 rows


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    steps=st.lists(st.sampled_from(["append", "merge", "bucket"]), min_size=1, max_size=16),
    keep=st.integers(1, 4),
    inline_max=st.integers(0, 3),
)
def test_retention_after_every_commit_leaves_what_a_full_gc_keeps(
    tmp_path_factory, steps, keep, inline_max
):
    """Whatever the history (fact files appended, merged into one, frontier buckets rewritten),
    expiring after every commit leaves the newest ``keep`` generations whole and exactly the
    files a full ``gc`` keeps: a gc run after it finds nothing to delete."""
    from batchcrawl.store import retention

    monkey = pytest.MonkeyPatch()
    monkey.setattr(crawldir, "INLINE_MAX", inline_max)
    try:
        crawl = CrawlDir.create(str(tmp_path_factory.mktemp("r") / "c"), "", buckets=1)
        parent = crawl.manifest()
        for g, kind in enumerate(steps, start=1):
            tables = {}
            if kind == "append":
                f = crawl.write_table(
                    "fetched", paths.round_file("fetched", g, 0), [fetched_row(g, round=g)]
                )
                tables["fetched"] = [*parent.tables["fetched"], f]
            elif kind == "merge" and parent.tables["fetched"]:
                rows = crawl.read_table("fetched", parent.tables["fetched"])
                rel = paths.compacted_file("fetched", 1, g, 1, g, 0)
                tables["fetched"] = [crawl.write_table("fetched", rel, rows)]
            else:
                rel = paths.bucket_base(g, 0)
                tables["frontier"] = [crawl.write_table("frontier", rel, [frontier_row(g)])]
            parent = crawl.commit(parent, tables, {"step": kind})
            retention.expire(crawl, keep, 0.0)
        assert crawl.generations() == list(range(len(steps) + 1))[-keep:]
        dry = gc(crawl, keep=keep, tmp_min_age_s=1e9, dry_run=True)
        assert dry["deleted_files"] == 0 and dry["deleted_manifests"] == 0
        for gen in crawl.generations():
            m = crawl.manifest(gen)
            assert crawl.read_current("fetched", generation=gen).num_rows == m.rows("fetched")
            assert crawl.read_current("frontier", generation=gen).num_rows == m.rows("frontier")
    finally:
        monkey.undo()


def test_retention_keeps_the_generations_of_the_time_window(tmp_path):
    from batchcrawl.store import retention

    crawl = small_crawl(tmp_path / "c")
    parent = crawl.manifest()
    for _ in range(4):
        parent = crawl.commit(parent, {}, {"step": "noop"})
    assert retention.expire(crawl, 1, 3600.0)["expired"] == []  # all younger than an hour
    assert len(crawl.generations()) == 6
    later = retention.expire(crawl, 2, 3600.0, clock=lambda: 2e9)  # in 2033: all old
    assert later["expired"] == [0, 1, 2, 3] and crawl.generations() == [4, 5]
    with pytest.raises(ValueError, match="at least 1"):
        retention.expire(crawl, 0, 0.0)
