"""DRUM check / update / check+update against a plain-dict reference (IRLbot §5.1)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.local import LocalFileSystem
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.frontier import drum

SCHEMA = pa.schema(
    [pa.field("url_key", pa.uint64(), nullable=False), pa.field("value", pa.int64())]
)

keys_st = st.one_of(st.integers(0, 40), st.integers(0, 2**64 - 1))
bucket_st = st.dictionaries(keys_st, st.integers(-5, 5), max_size=60)
batch_st = st.lists(st.tuples(keys_st, st.integers(100, 200), st.integers(0, 9)), max_size=60)


def bucket_table(d: dict[int, int]) -> pa.Table:
    ks = sorted(d)
    return pa.table(
        {"url_key": pa.array(ks, pa.uint64()), "value": [d[k] for k in ks]}, schema=SCHEMA
    )


def batch_table(batch: list[tuple[int, int, int]]) -> pa.Table:
    return pa.table(
        {
            "url_key": pa.array([b[0] for b in batch], pa.uint64()),
            "value": pa.array([b[1] for b in batch], pa.int64()),
            "aux": pa.array([b[2] for b in batch], pa.int64()),
        }
    )


def as_dict(t: pa.Table) -> dict[int, int]:
    keys = t.column("url_key").to_pylist()
    assert keys == sorted(keys), "bucket must stay sorted by key"
    assert len(keys) == len(set(keys)), "a key appears once"
    return dict(zip(keys, t.column("value").to_pylist(), strict=True))


def reference(old: dict[int, int], batch):
    """Plain-dict DRUM: first occurrence in the batch wins."""
    new, seen, known, is_new = dict(old), set(), [], []
    for k, v, _aux in batch:
        known.append(k in old)
        first = k not in seen
        seen.add(k)
        is_new.append(first and k not in old)
        if first:
            new[k] = v
    return new, np.array(known, bool), np.array(is_new, bool)


def sources(tmp_path, d: dict[int, int]):
    """The same bucket as an in-memory table, and as a file streamed in tiny chunks."""
    t = bucket_table(d)
    path = tmp_path / "bucket.parquet"
    pq.write_table(t, path, row_group_size=4)
    return [("table", t), ("file", drum.BucketFile(LocalFileSystem(), str(path)))]


@settings(max_examples=60, deadline=None)
@given(old=bucket_st, batch=batch_st)
def test_update_and_check_match_dict(tmp_path_factory, old, batch):
    tmp = tmp_path_factory.mktemp("drum")
    want, want_known, want_new = reference(old, batch)
    for name, src in sources(tmp, old):
        budget = 64  # bytes: forces one or two row groups per chunk for the file source
        got = drum.update(src, batch_table(batch), budget_bytes=budget)
        assert as_dict(got) == want, name
        known = drum.check(src, batch_table(batch), budget_bytes=budget)
        assert known.tolist() == want_known.tolist(), name
        table, is_new = drum.check_update(src, batch_table(batch), budget_bytes=budget)
        assert is_new.tolist() == want_new.tolist(), name
        inserted = {k: v for k, v in want.items() if k not in old}
        assert as_dict(table) == {**old, **inserted}, name  # known keys keep their value


@settings(max_examples=30, deadline=None)
@given(batch=batch_st)
def test_empty_bucket(batch):
    want, want_known, want_new = reference({}, batch)
    table, is_new = drum.check_update(None, batch_table(batch), schema=SCHEMA)
    assert as_dict(table) == want
    assert is_new.tolist() == want_new.tolist()
    assert not drum.check(None, batch_table(batch)).any()


def test_large_bucket_streams_by_row_group(tmp_path):
    rng = np.random.default_rng(7)
    keys = np.unique(rng.integers(0, 2**63, 20_000, dtype=np.uint64) * np.uint64(2))
    old = {int(k): int(k % 7) for k in keys}
    path = tmp_path / "big.parquet"
    pq.write_table(bucket_table(old), path, row_group_size=1000)
    src = drum.BucketFile(LocalFileSystem(), str(path))
    budget = 20_000  # bytes: a chunk is about one row group of 1000 rows (16 bytes each)
    chunks = list(drum.iter_chunks(src, budget_bytes=budget))
    assert len(chunks) >= 10  # 20 row groups of 1000 rows, at most two per chunk
    assert max(c.num_rows for _, _, c in chunks) <= 2000
    batch = [(int(k), 150, 0) for k in rng.choice(keys, 500)] + [
        (int(k) + 1, 160, 1) for k in rng.choice(keys, 500)
    ]
    want, _, want_new = reference(old, batch)
    parts = []
    drum.update(src, batch_table(batch), budget_bytes=budget, sink=parts.append)
    assert len(parts) == len(chunks)
    assert as_dict(pa.concat_tables(parts)) == want
    _, is_new = drum.check_update(src, batch_table(batch), budget_bytes=budget)
    assert is_new.tolist() == want_new.tolist()


def test_partition_by_bucket_keeps_order_and_rows():
    keys = [5, 3, 8, 13, 0, 21, 3]
    t = pa.table({"url_key": pa.array(keys, pa.uint64()), "i": list(range(len(keys)))})
    parts = drum.partition_by_bucket(t, 5)
    assert sum(p.num_rows for p in parts.values()) == t.num_rows
    for b, p in parts.items():
        assert all(k % 5 == b for k in p.column("url_key").to_pylist())
        assert p.column("i").to_pylist() == sorted(p.column("i").to_pylist())
    assert set(parts) == {0, 1, 3}


def test_insert_needs_every_bucket_column():
    with pytest.raises(ValueError, match="lack bucket column"):
        drum.update(bucket_table({1: 1}), pa.table({"url_key": pa.array([2], pa.uint64())}))
