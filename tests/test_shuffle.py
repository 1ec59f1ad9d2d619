"""The bucket-partitioned shuffle files between fetch shards and DRUM buckets."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.store import schemas, shuffle
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.shuffle import read_partition, write_partitioned
from batchcrawl.urls import bucket_ids


def _links(keys: list[int]) -> pa.Table:
    n = len(keys)
    return schemas.conform(
        "links",
        {
            "round": [1] * n,
            "shard": [0] * n,
            "seq": list(range(1, n + 1)),
            "src_url_key": [7] * n,
            "dst_url_key": pa.array(keys, pa.uint64()),
            "dst_url": [f"http://h.test/{k}" for k in keys],
            "dst_host": ["h.test"] * n,
            "dst_domain": ["h.test"] * n,
            "depth": [1] * n,
            "hops_out": [0] * n,
            "tag": ["a"] * n,
            "nofollow": [False] * n,
        },
    )


@settings(max_examples=40, deadline=None)
@given(
    shards=st.lists(st.lists(st.integers(0, 2**64 - 1), max_size=40), min_size=1, max_size=3),
    buckets=st.integers(1, 9),
)
def test_each_bucket_reads_back_exactly_its_rows_in_discovery_order(
    tmp_path_factory, shards, buckets
):
    crawl = CrawlDir.create(str(tmp_path_factory.mktemp("c")), "", buckets)
    parts = [
        write_partitioned(crawl, "links", f"links/round=1/shard={s:02d}.parquet", _links(keys),
                          bucket_ids(np.array(keys, np.uint64), buckets))
        for s, keys in enumerate(shards)
    ]  # fmt: skip
    for part, keys in zip(parts, shards, strict=True):
        assert part.entry.rows == len(keys)
        meta = pq.ParquetFile(crawl.path(part.entry.path)).metadata
        assert meta.num_row_groups == max(1, len({k % buckets for k in keys}))
    for b in range(buckets):
        got = read_partition(crawl, "links", parts, b)
        want = [(s, i + 1) for s, keys in enumerate(shards) for i, k in enumerate(keys)
                if k % buckets == b]  # fmt: skip
        if not want:
            assert got is None
            continue
        assert got.schema == schemas.schema("links")
        assert all(k % buckets == b for k in got.column("dst_url_key").to_pylist())
        # rows of one shard keep their discovery order (seq) inside the bucket
        seqs = got.column("seq").to_pylist()
        assert sorted(seqs) == sorted(seq for _, seq in want)
        offset = 0
        for s, keys in enumerate(shards):
            mine = [i + 1 for i, k in enumerate(keys) if k % buckets == b]
            assert seqs[offset : offset + len(mine)] == mine, s
            offset += len(mine)


@settings(max_examples=40, deadline=None)
@given(
    keys=st.lists(st.integers(0, 2**64 - 1), max_size=60),
    cuts=st.lists(st.integers(0, 60), max_size=5),
    buckets=st.integers(1, 9),
)
def test_spills_appended_to_one_file_read_back_per_bucket_in_order(
    tmp_path_factory, keys, cuts, buckets
):
    """Rows appended in several spills (cut at ``cuts``) give each bucket exactly its rows, in
    append order, one row group per bucket per spill that had rows of it."""
    from batchcrawl.store.shuffle import partitioned_writer

    crawl = CrawlDir.create(str(tmp_path_factory.mktemp("c")), "", buckets)
    bounds = sorted({0, len(keys), *(min(c, len(keys)) for c in cuts)})
    table = _links(keys)
    with partitioned_writer(crawl, "links", "links/round=1/shard=00.parquet") as writer:
        for a, b in zip(bounds, bounds[1:], strict=False):
            chunk = table.slice(a, b - a)
            writer.append(chunk, bucket_ids(np.array(keys[a:b], np.uint64), buckets))
        part = writer.close()
    assert (
        part.entry.rows
        == len(keys)
        == pq.ParquetFile(crawl.path(part.entry.path)).metadata.num_rows
    )
    for b in range(buckets):
        got = read_partition(crawl, "links", [part], b)
        want = [i + 1 for i, k in enumerate(keys) if k % buckets == b]
        assert (got.column("seq").to_pylist() if got is not None else []) == want
        spills = {a for a, e in zip(bounds, bounds[1:], strict=False)
                  if any(k % buckets == b for k in keys[a:e])}  # fmt: skip
        assert len(part.row_groups.get(b, ())) == len(spills)


@settings(max_examples=25, deadline=None)
@given(
    keys=st.lists(st.integers(0, 2**64 - 1), max_size=60),
    cuts=st.lists(st.integers(0, 60), max_size=5),
    buckets=st.integers(1, 9),
)
def test_merged_spills_equal_one_write_of_all_rows(tmp_path_factory, keys, cuts, buckets):
    """A spill file merged into the table's file gives what one write of all the rows gives: one
    row group per non-empty bucket, each bucket's rows in append order; the spill file is gone."""
    from batchcrawl.store import paths
    from batchcrawl.store.shuffle import SpillFile

    crawl = CrawlDir.create(str(tmp_path_factory.mktemp("c")), "", buckets)
    bounds = sorted({0, len(keys), *(min(c, len(keys)) for c in cuts)})
    table = _links(keys)
    ids = bucket_ids(np.array(keys, np.uint64), buckets)
    spill = SpillFile(crawl, "links", paths.spill_file("links", 1, 0, "abc"))
    try:
        for a, b in zip(bounds, bounds[1:], strict=False):
            spill.append(table.slice(a, b - a), ids[a:b])
        merged = spill.merge_into(paths.round_file("links", 1, 0))
    finally:
        spill.discard()
    whole = write_partitioned(crawl, "links", paths.round_file("links", 1, 1), table, ids)
    assert not any(paths.TMP_MARKER in p for p in crawl.fs.ls(crawl.path("links/round=1")))
    assert merged.entry.rows == whole.entry.rows == len(keys)
    assert {b: len(g) for b, g in merged.row_groups.items()} == {b: 1 for b in whole.row_groups}
    for b in range(buckets):
        got, want = (read_partition(crawl, "links", [p], b) for p in (merged, whole))
        assert (got is None and want is None) or got.equals(want)


def test_a_file_written_again_at_its_path_is_read_with_its_new_footer(tmp_path):
    """The footer cache (``shuffle.FOOTERS``) answers a file once parsed, but a round rerun that
    writes the same path again gets the new file's rows, never the old footer's."""
    crawl = CrawlDir.create(str(tmp_path / "c"), "", 4)
    rel = "links/round=1/shard=00.parquet"
    cache = shuffle.FooterCache()
    kept, shuffle.FOOTERS = shuffle.FOOTERS, cache
    try:
        first = write_partitioned(crawl, "links", rel, _links([4, 8, 1]),
                                  bucket_ids(np.array([4, 8, 1], np.uint64), 4))  # fmt: skip
        assert read_partition(crawl, "links", [first], 0).column("dst_url_key").to_pylist() == [
            4,
            8,
        ]
        assert read_partition(crawl, "links", [first], 1).column("dst_url_key").to_pylist() == [1]
        assert (cache.misses, cache.hits) == (1, 1)
        again = write_partitioned(crawl, "links", rel, _links([5, 12, 16, 20]),
                                  bucket_ids(np.array([5, 12, 16, 20], np.uint64), 4))  # fmt: skip
        got = read_partition(crawl, "links", [again], 0).column("dst_url_key").to_pylist()
        assert got == [12, 16, 20]
        assert cache.misses == 2
    finally:
        shuffle.FOOTERS = kept


def test_projected_read_gives_nulls_for_a_column_the_file_lacks(tmp_path):
    """``read_partition(columns=...)`` reads only those columns; one added to the schema after
    the file was written reads as nulls (old crawls stay readable)."""
    crawl = CrawlDir.create(str(tmp_path / "c"), "", 2)
    rel = "links/round=1/shard=00.parquet"
    old = _links([2, 4]).drop_columns(["lastmod"])
    with crawl.open_output(rel) as fh:
        pq.write_table(old, fh)
    part = shuffle.Partitioned(shuffle.FileEntry(rel, 2), {0: (0,)})
    got = read_partition(crawl, "links", [part], 0, columns=["dst_url_key", "lastmod"])
    assert got.column_names == ["dst_url_key", "lastmod"]
    assert got.column("dst_url_key").to_pylist() == [2, 4]
    assert got.column("lastmod").null_count == 2


def test_footer_cache_keeps_at_most_its_size_and_reserve_grows_it_to_a_rounds_files(tmp_path):
    """Bounded memory (a parsed footer is ~2 MB): the oldest entry leaves; ``reserve`` lets one
    task's files all stay, so each is parsed once."""
    crawl = CrawlDir.create(str(tmp_path / "c"), "", 2)
    parts = [
        write_partitioned(
            crawl,
            "links",
            f"links/round=1/shard={s:02d}.parquet",
            _links([s]),
            bucket_ids(np.array([s], np.uint64), 2),
        )  # fmt: skip
        for s in range(3)
    ]
    cache = shuffle.FooterCache(size=2)
    kept, shuffle.FOOTERS = shuffle.FOOTERS, cache
    try:
        # bucket 0 reads shards 0 and 2, bucket 1 shard 1: files 0, 2, 1 in turn
        for _ in range(2):  # 3 files through 2 places, in the same order: every read a miss
            for b in (0, 1):
                read_partition(crawl, "links", parts, b)
        assert (cache.hits, cache.misses) == (0, 6) and len(cache._footers) == 2
        cache.reserve(3)
        for _ in range(2):
            for b in (0, 1):
                read_partition(crawl, "links", parts, b)
        assert (cache.hits, cache.misses) == (5, 7)  # only file 0 (evicted) parsed again
        cache.reserve(10_000)
        assert cache.size == shuffle.FooterCache.MAX_SIZE
    finally:
        shuffle.FOOTERS = kept


def test_fact_files_are_lz4_without_dictionaries_and_duckdb_reads_them(tmp_path):
    """The fact files' encoding (``shuffle.FACT_PARQUET_OPTIONS``, docs/benchmarks.md "Session
    8"): every column chunk LZ4 (Parquet's LZ4_RAW), no dictionary page; DuckDB, which the crawl's
    SQL views use, reads back every row and value."""
    import duckdb

    from batchcrawl.store import paths

    keys = [(i * 2654435761) % 2**64 for i in range(500)]
    crawl = CrawlDir.create(str(tmp_path / "c"), "", 8)
    table = _links(keys)
    part = write_partitioned(crawl, "links", paths.round_file("links", 1, 0), table,
                             bucket_ids(np.array(keys, np.uint64), 8))  # fmt: skip
    path = crawl.path(part.entry.path)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == len(part.row_groups) == 8
    chunks = [meta.row_group(g).column(c) for g in range(meta.num_row_groups)
              for c in range(meta.num_columns)]  # fmt: skip
    assert {c.compression for c in chunks} == {"LZ4"} and not any(
        c.has_dictionary_page for c in chunks
    )
    con = duckdb.connect()
    codecs = con.execute(f"SELECT DISTINCT compression FROM parquet_metadata('{path}')").fetchall()
    assert codecs == [("LZ4_RAW",)]
    got = con.execute(f"SELECT dst_url_key, dst_url FROM '{path}' ORDER BY dst_url_key").fetchall()
    assert got == sorted(zip(keys, (f"http://h.test/{k}" for k in keys), strict=True))
