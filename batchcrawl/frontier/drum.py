"""DRUM: Disk Repository with Update Management, over Parquet buckets.

IRLbot (Lee, Leonard, Wang, Loguinov, "IRLbot: Scaling to 6 Billion Pages and Beyond", WWW 2008 and
ACM TWEB 3(3), 2009), §5.1 "Disk Repository with Update Management": keys are spread over K
buckets; a batch of ``(key, value, aux)`` tuples is partitioned by the same bucket function, sorted,
and each bucket is merged with its batch in **one sequential pass**. The three operations:

* **check** — is each key of the batch already in the bucket? (nothing is written)
* **update** — merge the batch into the bucket: a known key's row is replaced (or combined with
  the old row by a ``combine`` function), an unknown key is inserted;
* **check+update** — both in one pass: insert the unknown keys and report which were new.

Here a bucket is an Arrow table or a Parquet file sorted by ``key`` (``url_key``, unsigned 64-bit);
a batch is an Arrow table with the same ``key`` column: the *value* columns are those that also
exist in the bucket (what an insert stores), any other columns are *aux* (carried for the caller,
e.g. by ``combine``, never stored).

Rules (tested against a plain-dict reference):

* Duplicates inside one batch: the **first occurrence** (in batch order) wins; later ones are
  reported as known duplicates and never inserted or applied.
* Memory is bounded by one chunk of the bucket plus the batch: a bucket file larger than
  ``budget_bytes`` (``frontier.drum_batch_bytes``) is read a few row groups at a time, each chunk
  covering a key range ``[lo, hi)``, and only the slice of the (sorted) batch inside that range is
  merged with it. Nothing ever holds the whole frontier.
* Vectorized: sorting, searching and merging use numpy (``argsort`` stable, ``searchsorted``) and
  Arrow ``take``/``concat``; there is no per-row Python loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeAlias

import fsspec
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from batchcrawl.store.crawldir import reading
from batchcrawl.urls import bucket_ids

__all__ = [
    "BucketFile",
    "Combine",
    "SortedBatch",
    "check",
    "check_update",
    "iter_chunks",
    "key_array",
    "merge_chunk",
    "partition_by_bucket",
    "update",
]

KEY = "url_key"

#: ``combine(old_rows, batch_rows) -> new_rows``: both tables aligned row by row (same keys, same
#: order); returns rows with the bucket's columns, in the same order.
Combine = Callable[[pa.Table, pa.Table], pa.Table]


@dataclass(frozen=True)
class BucketFile:
    """A bucket stored as a Parquet file sorted by key: ``path`` on the fsspec filesystem ``fs``."""

    fs: fsspec.AbstractFileSystem
    path: str


BucketSource: TypeAlias = pa.Table | BucketFile | None


def key_array(table: pa.Table, key: str = KEY) -> np.ndarray:
    """Column ``key`` of ``table`` as a numpy ``uint64`` array (no nulls allowed)."""
    col = table.column(key)
    if col.null_count:
        raise ValueError(f"DRUM key column {key!r} contains nulls; every row needs a key")
    return np.asarray(col.to_numpy(), dtype=np.uint64)


def partition_by_bucket(table: pa.Table, buckets: int, key: str = KEY) -> dict[int, pa.Table]:
    """Split ``table`` by ``key % buckets``; each part keeps the rows' original order.

    Parameters
    ----------
    table : pyarrow.Table
        Any table with an unsigned 64-bit ``key`` column (``url_key`` for ``fetched``,
        ``dst_url_key`` for ``links``).
    buckets : int
        K, the frontier's bucket count (``manifest.buckets``).

    Returns
    -------
    dict of int to pyarrow.Table
        Only buckets that receive rows appear.
    """
    if table.num_rows == 0:
        return {}
    ids = bucket_ids(key_array(table, key), buckets)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    taken = table.take(pa.array(order))
    present = np.unique(sorted_ids)
    starts = np.searchsorted(sorted_ids, present, side="left")
    ends = np.searchsorted(sorted_ids, present, side="right")
    return {
        int(b): taken.slice(int(s), int(e - s))
        for b, s, e in zip(present, starts, ends, strict=True)
    }


class SortedBatch:
    """A batch sorted by key with duplicates removed (first occurrence kept), plus the map back to
    the caller's row order.

    Attributes
    ----------
    table : pyarrow.Table
        Unique-key rows sorted by key.
    keys : numpy.ndarray of uint64
        Their keys, ascending.
    rows : numpy.ndarray of int64
        ``rows[i]`` is the input position of ``table`` row ``i``.
    n : int
        Rows in the input batch (duplicates included).
    """

    def __init__(self, batch: pa.Table, key: str = KEY):
        keys = key_array(batch, key)
        order = np.argsort(keys, kind="stable")  # equal keys keep batch order: first one first
        sk = keys[order]
        first = np.ones(len(sk), dtype=bool)
        first[1:] = sk[1:] != sk[:-1]
        self.n = batch.num_rows
        self.rows = order[first]
        self.keys = sk[first]
        self.table = batch.take(pa.array(self.rows)) if batch.num_rows else batch
        self.key = key

    def range(self, lo: int, hi: int | None) -> tuple[int, int]:
        """Positions ``[start, end)`` of the keys in ``[lo, hi)`` (``hi`` None: no upper bound)."""
        start = int(np.searchsorted(self.keys, np.uint64(lo), side="left"))
        end = (
            len(self.keys)
            if hi is None
            else int(np.searchsorted(self.keys, np.uint64(hi), side="left"))
        )
        return start, end


def _bucket_columns(old: pa.Table, rows: pa.Table) -> pa.Table:
    """``rows`` reduced and cast to the columns of ``old`` (the bucket schema)."""
    missing = [n for n in old.schema.names if n not in rows.schema.names]
    if missing:
        raise ValueError(
            f"DRUM batch rows lack bucket column(s) {missing}; inserts need every bucket column"
        )
    return rows.select(old.schema.names).cast(old.schema)


def _replace_values(old_rows: pa.Table, batch_rows: pa.Table) -> pa.Table:
    """Default ``combine``: batch value columns replace the old ones; other columns stay."""
    cols = []
    for f in old_rows.schema:
        if f.name in batch_rows.schema.names:
            cols.append(batch_rows.column(f.name).cast(f.type))
        else:
            cols.append(old_rows.column(f.name))
    return pa.Table.from_arrays(cols, schema=old_rows.schema)


def merge_chunk(
    old: pa.Table,
    batch: SortedBatch,
    start: int,
    end: int,
    *,
    combine: Combine | None = None,
    insert: bool = True,
    apply: bool = True,
    make_rows: Callable[[pa.Table], pa.Table] | None = None,
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """Merge rows ``[start, end)`` of a :class:`SortedBatch` into one sorted chunk of a bucket.

    Parameters
    ----------
    old : pyarrow.Table
        Bucket rows sorted by key; every batch key in the slice must fall in this chunk's range.
    combine : callable or None
        How a known key's row changes (default: batch value columns replace the old ones).
    insert : bool
        Insert unknown keys (update, check+update) or not.
    apply : bool
        Change known keys' rows (update) or leave them (check+update of "insert only" facts).
    make_rows : callable or None
        Turns the batch rows to insert into bucket rows (default: the batch has the bucket
        columns). Called only on the rows actually inserted.

    Returns
    -------
    (table, known, inserted)
        The new chunk sorted by key; for each batch row of the slice, whether its key was in
        ``old`` and whether it was inserted (both boolean arrays of length ``end - start``).
    """
    bkeys = batch.keys[start:end]
    okeys = key_array(old, batch.key) if old.num_rows else np.empty(0, np.uint64)
    pos = np.searchsorted(okeys, bkeys, side="left")
    clipped = np.minimum(pos, max(len(okeys) - 1, 0))
    known = (
        (pos < len(okeys)) & (okeys[clipped] == bkeys)
        if len(okeys)
        else np.zeros(len(bkeys), dtype=bool)
    )
    inserted = ~known if insert else np.zeros(len(bkeys), dtype=bool)
    if not (known.any() and apply) and not inserted.any():
        return old, known, inserted
    bslice = batch.table.slice(start, end - start)
    parts = []
    if apply and known.any():
        keep = np.ones(len(okeys), dtype=bool)
        keep[pos[known]] = False
        old_matched = old.take(pa.array(pos[known]))
        new_matched = (combine or _replace_values)(old_matched, bslice.filter(pa.array(known)))
        parts += [old.filter(pa.array(keep)), _bucket_columns(old, new_matched)]
    else:
        parts.append(old)
    if inserted.any():
        new = bslice.filter(pa.array(inserted))
        parts.append(_bucket_columns(old, make_rows(new) if make_rows else new))
    merged = pa.concat_tables(parts)
    # Each part is sorted: a stable sort (timsort) merges the runs in linear time.
    order = np.argsort(key_array(merged, batch.key), kind="stable")
    return merged.take(pa.array(order)), known, inserted


def iter_chunks(
    source: BucketSource,
    *,
    budget_bytes: int,
    columns: list[str] | None = None,
    key: str = KEY,
    schema: pa.Schema | None = None,
) -> Iterator[tuple[int, int | None, pa.Table]]:
    """The chunks of a bucket in key order: ``(lo, hi, table)`` covering keys ``[lo, hi)``
    (``lo`` 0 for the first, ``hi`` None for the last), so every possible key falls in one chunk.

    A file whose row groups hold at most ``budget_bytes`` bytes is read whole; a larger one is read
    a few row groups at a time, each chunk at most ``budget_bytes`` (or one row group, if a single
    group is larger). Sizes are the Parquet row groups' uncompressed sizes (``total_byte_size``),
    close to their Arrow size in memory; write buckets with row groups well below the budget
    (:func:`batchcrawl.frontier.runs.write_bucket` does). ``source`` None is an empty bucket (``schema`` needed).
    """
    if source is None:
        if schema is None:
            raise ValueError("iter_chunks: an empty bucket (None) needs a schema")
        empty = schema.empty_table()
        yield 0, None, empty if columns is None else empty.select(columns)
        return
    if isinstance(source, pa.Table):
        yield 0, None, source if columns is None else source.select(columns)
        return
    with reading(source.fs, source.path) as fh:
        pf = pq.ParquetFile(fh)
        meta = pf.metadata
        sizes = [meta.row_group(i).total_byte_size for i in range(meta.num_row_groups)]
        if sum(sizes) <= budget_bytes or meta.num_row_groups <= 1:
            yield 0, None, pf.read(columns=columns)
            return
        groups: list[list[int]] = [[]]
        used = 0
        for i, size in enumerate(sizes):
            if groups[-1] and used + size > budget_bytes:
                groups.append([])
                used = 0
            groups[-1].append(i)
            used += size
        key_idx = pf.schema_arrow.get_field_index(key)
        lows = [0] + [_row_group_min(pf, g[0], key, key_idx) for g in groups[1:]]
        for j, g in enumerate(groups):
            hi = lows[j + 1] if j + 1 < len(groups) else None
            yield lows[j], hi, pf.read_row_groups(g, columns=columns)


def _row_group_min(pf: pq.ParquetFile, i: int, key: str, key_idx: int) -> int:
    stats = pf.metadata.row_group(i).column(key_idx).statistics
    if stats is not None and stats.has_min_max:
        return int(stats.min) % (1 << 64)  # uint64 stats may come back signed
    return int(pf.read_row_group(i, columns=[key]).column(key)[0].as_py())


def _scatter(batch: SortedBatch, parts: list[np.ndarray]) -> np.ndarray:
    """Per unique sorted row flags -> per input row flags (duplicates False)."""
    out = np.zeros(batch.n, dtype=bool)
    if parts:
        out[batch.rows] = np.concatenate(parts)
    return out


def _known_all(batch: SortedBatch, keys_in: np.ndarray, input_keys: np.ndarray) -> np.ndarray:
    """Known flag for every input row, duplicates included (a key is known or not)."""
    known_keys = batch.keys[keys_in]
    return np.isin(input_keys, known_keys) if len(known_keys) else np.zeros(batch.n, bool)


def _run(
    source: BucketSource,
    batch: pa.Table,
    *,
    key: str,
    budget_bytes: int,
    combine: Combine | None,
    insert: bool,
    apply: bool,
    sink: Callable[[pa.Table], None] | None,
    schema: pa.Schema | None,
) -> tuple[pa.Table | None, np.ndarray, np.ndarray]:
    sb = SortedBatch(batch, key)
    knowns, inserts, out = [], [], []
    for lo, hi, chunk in iter_chunks(source, budget_bytes=budget_bytes, key=key, schema=schema):
        start, end = sb.range(lo, hi)
        merged, known, inserted = merge_chunk(
            chunk, sb, start, end, combine=combine, insert=insert, apply=apply
        )
        knowns.append(known)
        inserts.append(inserted)
        if sink is not None:
            sink(merged)
        else:
            out.append(merged)
    known_u = np.concatenate(knowns) if knowns else np.zeros(0, bool)
    known_all = _known_all(sb, known_u, key_array(batch, key) if batch.num_rows else np.empty(0))
    is_new = _scatter(sb, inserts)
    table = None if sink is not None else pa.concat_tables(out)
    return table, known_all, is_new


def check(
    source: BucketSource, batch: pa.Table, *, key: str = KEY, budget_bytes: int = 64_000_000
) -> np.ndarray:
    """DRUM **check**: for each batch row, is its key in the bucket?

    Reads only the key column of the bucket, chunk by chunk.

    Returns
    -------
    numpy.ndarray of bool, shape (batch.num_rows,)
    """
    sb = SortedBatch(batch, key)
    parts = []
    schema = pa.schema([pa.field(key, pa.uint64())])
    for lo, hi, chunk in iter_chunks(
        source, budget_bytes=budget_bytes, columns=[key], key=key, schema=schema
    ):
        start, end = sb.range(lo, hi)
        okeys = key_array(chunk, key) if chunk.num_rows else np.empty(0, np.uint64)
        parts.append(np.isin(sb.keys[start:end], okeys, assume_unique=True))
    known_u = np.concatenate(parts) if parts else np.zeros(0, bool)
    return _known_all(sb, known_u, key_array(batch, key) if batch.num_rows else np.empty(0))


def update(
    source: BucketSource,
    batch: pa.Table,
    *,
    combine: Combine | None = None,
    key: str = KEY,
    budget_bytes: int = 64_000_000,
    sink: Callable[[pa.Table], None] | None = None,
    schema: pa.Schema | None = None,
) -> pa.Table | None:
    """DRUM **update**: merge the batch into the bucket (known keys replaced or combined, unknown
    keys inserted; the first occurrence of a duplicated key wins).

    Parameters
    ----------
    source : pyarrow.Table, BucketFile or None
        The bucket (sorted by key); None is an empty bucket (then ``schema`` is required).
    batch : pyarrow.Table
        Rows with the key column and at least every bucket column (for inserts).
    combine : callable or None
        ``combine(old_rows, batch_rows) -> new_rows`` for known keys; default replaces the value
        columns the batch has.
    budget_bytes : int
        Memory budget for one chunk of the bucket, bytes.
    sink : callable or None
        Receives each merged chunk in key order (to stream it to a file); then None is returned.

    Returns
    -------
    pyarrow.Table or None
        The new bucket sorted by key (None when ``sink`` is given).
    """
    table, _, _ = _run(
        source,
        batch,
        key=key,
        budget_bytes=budget_bytes,
        combine=combine,
        insert=True,
        apply=True,
        sink=sink,
        schema=schema,
    )
    return table


def check_update(
    source: BucketSource,
    batch: pa.Table,
    *,
    combine: Combine | None = None,
    apply: bool = False,
    key: str = KEY,
    budget_bytes: int = 64_000_000,
    sink: Callable[[pa.Table], None] | None = None,
    schema: pa.Schema | None = None,
) -> tuple[pa.Table | None, np.ndarray]:
    """DRUM **check+update**: insert the batch's unknown keys and report which rows were new.

    Known keys keep their row unless ``apply`` is True (then they are combined as in
    :func:`update`). Arguments as in :func:`update`.

    Returns
    -------
    (table, is_new)
        The new bucket (None with ``sink``) and, per batch row, True for the first occurrence of
        a key that was not in the bucket (shape ``(batch.num_rows,)``).
    """
    table, _, is_new = _run(
        source,
        batch,
        key=key,
        budget_bytes=budget_bytes,
        combine=combine,
        insert=True,
        apply=apply,
        sink=sink,
        schema=schema,
    )
    return table, is_new
