"""The memory-bounded shuffle between fetch shards and DRUM buckets (Hadoop's map-side partitioning).

A fetch shard writes its ``fetched`` and ``links`` rows once, as the committed table files, sorted by
DRUM bucket of their url key (``url_key`` resp. ``dst_url_key``, bucket ids from the caller) with **one Parquet
row group per non-empty bucket**. The row group of each bucket is recorded in the returned
:class:`Partitioned` index, so the update task of bucket *b* reads exactly its slice of every shard's
file (``ParquetFile.read_row_group``) and nothing else: no spill files, no all-to-all transfer
through the scheduler, and memory bounded by one bucket's share of the round's facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry


@dataclass(frozen=True)
class Partitioned:
    """One partitioned file: its entry and ``{bucket: row group index}`` for non-empty buckets."""

    entry: FileEntry
    row_groups: dict[int, int] = field(default_factory=dict)


def write_partitioned(
    crawl: CrawlDir, table: str, rel: str, data: pa.Table, bucket_of: np.ndarray
) -> Partitioned:
    """Validate ``data`` against ``table``'s schema and write it at ``rel`` (relative to the crawl),
    sorted by bucket (stable: the rows of one bucket keep their order), one row group per
    non-empty bucket.

    ``bucket_of`` (int array, shape ``(data.num_rows,)``) is each row's DRUM bucket, computed by the
    caller with the one bucket function (:func:`batchcrawl.urls.bucket_ids`), so the store layer
    holds no copy of it.

    Raises :class:`~batchcrawl.errors.SchemaError` when ``data`` does not fit the schema.
    """
    data = schemas.conform(table, data)
    bucket_of = np.asarray(bucket_of, dtype=np.int64)
    if len(bucket_of) != data.num_rows:
        raise ValueError(f"write_partitioned: {len(bucket_of)} bucket ids for {data.num_rows} rows")
    order = np.argsort(bucket_of, kind="stable")
    data = data.take(pa.array(order))
    sorted_buckets = bucket_of[order]
    bounds = np.flatnonzero(np.diff(sorted_buckets)) + 1
    starts = np.concatenate(([0], bounds)) if len(sorted_buckets) else np.zeros(0, dtype=np.int64)
    ends = np.concatenate((bounds, [len(sorted_buckets)])) if len(sorted_buckets) else starts
    row_groups: dict[int, int] = {}
    with crawl.open_output(rel) as fh:
        writer = pq.ParquetWriter(fh, data.schema, compression="zstd")
        try:
            for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
                writer.write_table(data.slice(int(s), int(e - s)), row_group_size=int(e - s))
                row_groups[int(sorted_buckets[s])] = i
            if data.num_rows == 0:
                writer.write_table(data)
        finally:
            writer.close()
    return Partitioned(FileEntry(rel, data.num_rows), row_groups)


def read_partition(
    crawl: CrawlDir, table: str, parts: list[Partitioned], bucket: int
) -> pa.Table | None:
    """The rows of ``bucket`` from each partitioned file of ``parts``, concatenated (None if no file
    has rows of that bucket)."""
    tables = []
    for part in parts:
        rg = part.row_groups.get(bucket)
        if rg is None:
            continue
        with crawl.fs.open(crawl.path(part.entry.path), "rb") as fh:
            tables.append(pq.ParquetFile(fh).read_row_group(rg))
    if not tables:
        return None
    return pa.concat_tables([schemas.conform(table, t) for t in tables])
