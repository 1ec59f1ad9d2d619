"""The memory-bounded shuffle between fetch shards and DRUM buckets (Hadoop's map-side partitioning).

A fetch shard writes its ``fetched``, ``links`` and ``edges`` rows as one file per table, sorted
by DRUM bucket of their url key (``url_key``, ``dst_url_key``, ``src_url_key``; bucket ids from
the caller) with **one Parquet row group per non-empty bucket**. The row group of each bucket is
recorded in the returned :class:`Partitioned` index, so the update task of bucket *b* reads exactly
its slice of every shard's file (``ParquetFile.read_row_groups``) and nothing else: no all-to-all
transfer through the scheduler, and memory bounded by one bucket's share of the round's facts.

Like a Hadoop map task, which sorts its output buffer by partition and spills it to a spill file
each time it fills (``io.sort.mb``), then merges the spill files into one partitioned output, a
shard that passes ``round.spill_pages`` appends its rows so far, bucket-sorted, to a spill file
(:class:`SpillFile`: an Arrow IPC file, one record batch per bucket per spill) and drops them;
when its fetch ends, :meth:`SpillFile.merge_into` reads the spill file once, one bucket at a
time, and writes the table's file with one row group per bucket. Tiny row groups would cost every later reader (each a footer entry
and a read per column; 10 spills of 2,000 pages made reading 64 buckets 10x slower), hence the
merge. Both files are written through the crawl's temp names: a shard killed between two spills
leaves only ``.tmp-`` files, which ``gc`` removes and nothing else reads.
"""

from __future__ import annotations

import contextlib
import io
import os
import posixpath
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry, read_columns, reading


@dataclass(frozen=True)
class Partitioned:
    """One partitioned file: its entry and ``{bucket: row group indexes}`` (in write order; one
    per bucket in a table's file, one per spill in a spill file) for the non-empty buckets."""

    entry: FileEntry
    row_groups: dict[int, tuple[int, ...]] = field(default_factory=dict)


def bucket_slices(
    table: str, rel: str, data: pa.Table, bucket_of: np.ndarray
) -> Iterator[tuple[int, pa.Table]]:
    """``(bucket, rows)`` for each non-empty bucket of ``data``, in bucket order, after
    validating ``data`` against ``table``'s schema (rows of one bucket keep their order: a stable
    sort). ``bucket_of`` is each row's bucket (int array, shape ``(data.num_rows,)``); ``rel``
    names the file in errors. Raises :class:`~batchcrawl.errors.SchemaError` when ``data`` does
    not fit the schema, ValueError when the lengths differ."""
    data = schemas.conform(table, data)
    bucket_of = np.asarray(bucket_of, dtype=np.int64)
    if len(bucket_of) != data.num_rows:
        raise ValueError(f"{rel}: {len(bucket_of)} bucket ids for {data.num_rows} rows")
    if data.num_rows == 0:
        return
    order = np.argsort(bucket_of, kind="stable")
    data = data.take(pa.array(order))
    sorted_buckets = bucket_of[order]
    bounds = np.flatnonzero(np.diff(sorted_buckets)) + 1
    starts = np.concatenate(([0], bounds))
    ends = np.concatenate((bounds, [len(sorted_buckets)]))
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        yield int(sorted_buckets[start]), data.slice(start, end - start)


#: How the fact files are encoded: LZ4 (Parquet's ``LZ4_RAW``), no dictionary pages. Their row
#: groups are one bucket's share of one shard's round, so small (a few to a few thousand rows) and
#: many (64 buckets x ~15-32 columns), and per column chunk zstd and dictionary encoding cost a
#: fixed setup each: the fact files of two rounds (six files of 247-155,000 rows, 64 row groups
#: each) took 515 ms to write with zstd and dictionaries, 307 ms with zstd alone, 122 ms with LZ4
#: alone, for 4.92, 4.23 and 4.97 MB; reading back their row groups one by one went 2x faster too
#: (docs/benchmarks.md, "Session 8"). The frontier's buckets, larger and kept, stay zstd.
FACT_PARQUET_OPTIONS = {"compression": "lz4", "use_dictionary": False}


class PartitionedWriter:
    """Appends bucket-sorted spills of one table to one open Parquet file (see the module doc).

    Parameters
    ----------
    fh
        The open output file (from :meth:`CrawlDir.open_output`).
    table
        The table's name (its schema in ``storage/``).
    rel
        The file's path relative to the crawl (for the returned entry).

    Use :func:`partitioned_writer` (a table's file, published whole).
    """

    def __init__(self, fh: IO[bytes], table: str, rel: str) -> None:
        self.table = table
        self.rel = rel
        self.rows = 0
        self._row_groups: dict[int, list[int]] = {}
        self._groups = 0
        self._fh = fh
        self._writer = pq.ParquetWriter(fh, schemas.schema(table), **FACT_PARQUET_OPTIONS)
        self._open = True

    def append(self, data: pa.Table, bucket_of: np.ndarray) -> None:
        """Validate ``data`` against the table's schema and add it sorted by bucket (stable: the
        rows of one bucket keep their order), one row group per non-empty bucket.

        ``bucket_of`` (int array, shape ``(data.num_rows,)``) is each row's DRUM bucket, computed
        by the caller with the one bucket function (:func:`batchcrawl.urls.bucket_ids`), so the
        store layer holds no copy of it.

        Raises :class:`~batchcrawl.errors.SchemaError` when ``data`` does not fit the schema.
        """
        for bucket, rows in bucket_slices(self.table, self.rel, data, bucket_of):
            self._writer.write_table(rows, row_group_size=rows.num_rows)
            self._row_groups.setdefault(bucket, []).append(self._groups)
            self._groups += 1
            self.rows += rows.num_rows
        self._fh.flush()  # the spill's bytes leave this process's buffers

    def _finish(self) -> None:
        if self._open:
            self._open = False
            self._writer.close()

    def close(self) -> Partitioned:
        """Write the file's footer (an empty file gets one empty row group) and return its
        index."""
        if self._groups == 0:
            self._writer.write_table(schemas.schema(self.table).empty_table())
        self._finish()
        return Partitioned(
            FileEntry(self.rel, self.rows), {b: tuple(g) for b, g in self._row_groups.items()}
        )


@contextlib.contextmanager
def partitioned_writer(crawl: CrawlDir, table: str, rel: str) -> Iterator[PartitionedWriter]:
    """A :class:`PartitionedWriter` for a new file ``rel`` of ``table``; the file appears at
    ``rel``, whole, when the block ends without an error (and not at all otherwise). Call
    :meth:`PartitionedWriter.close` as the block's last step to get the file's index."""
    with crawl.open_output(rel) as fh:
        writer = PartitionedWriter(fh, table, rel)
        try:
            yield writer
        finally:
            writer._finish()  # after an error too: the handle is then discarded whole


def write_partitioned(
    crawl: CrawlDir, table: str, rel: str, data: pa.Table, bucket_of: np.ndarray
) -> Partitioned:
    """Write ``data`` at ``rel`` as one spill of a :class:`PartitionedWriter` (one row group per
    non-empty bucket; see :meth:`PartitionedWriter.append` for ``bucket_of`` and errors)."""
    with partitioned_writer(crawl, table, rel) as writer:
        writer.append(data, bucket_of)
        return writer.close()


class SpillFile:
    """A spill file of one table (see the module doc): an Arrow IPC file on a new temp file
    ``rel`` (:func:`batchcrawl.store.paths.spill_file`), one record batch per bucket per spill.
    :meth:`merge_into` writes the table's file from it; :meth:`discard` (always call it, e.g. from
    a ``finally``) removes it.

    Spills are Arrow IPC, not Parquet: a spill is read back once, by the merge, so it is written
    as Arrow's own buffers (no encoding, no compression, no per-column-chunk statistics); the
    table's file is encoded once, at the merge, as an unspilled round's file is. Parquet spills
    (64 buckets x 3 tables x ~15 columns of small zstd column chunks per spill) cost ~0.3 ms of
    worker CPU per page (docs/benchmarks.md, "Spills").

    Parameters
    ----------
    crawl
        The crawl directory.
    table
        The table's name.
    rel
        The spill file's path relative to the crawl.
    """

    def __init__(self, crawl: CrawlDir, table: str, rel: str) -> None:
        self.crawl = crawl
        self.table = table
        self.rel = rel
        self.rows = 0
        path = crawl.path(rel)
        crawl.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        self._fh = crawl.fs.open(path, "wb")
        self._writer = pa.ipc.new_file(self._fh, schemas.schema(table))
        self._batches: dict[int, list[int]] = {}
        self._count = 0
        self._open = True

    def append(self, data: pa.Table, bucket_of: np.ndarray) -> None:
        """One spill: ``data`` validated against the table's schema, sorted by bucket (stable),
        one record batch per non-empty bucket (``bucket_of`` as in
        :meth:`PartitionedWriter.append`). Raises :class:`~batchcrawl.errors.SchemaError` when
        ``data`` does not fit the schema."""
        for bucket, rows in bucket_slices(self.table, self.rel, data, bucket_of):
            for batch in rows.to_batches():
                self._writer.write_batch(batch)
                self._batches.setdefault(bucket, []).append(self._count)
                self._count += 1
            self.rows += rows.num_rows
        self._fh.flush()  # the spill's bytes leave this process's buffers

    def _close(self) -> None:
        if self._open:
            self._open = False
            try:
                self._writer.close()
            finally:
                self._fh.close()

    def merge_into(self, rel: str) -> Partitioned:
        """Close the spill file and write its rows as the table's file ``rel``: one row group
        per bucket (its spills' batches, in order), one bucket in memory at a time; returns that
        file's index."""
        self._close()
        schema = schemas.schema(self.table)
        with (
            self.crawl.fs.open(self.crawl.path(self.rel), "rb") as src,
            partitioned_writer(self.crawl, self.table, rel) as out,
        ):
            reader = pa.ipc.open_file(src)
            for bucket in sorted(self._batches):
                batches = [reader.get_batch(i) for i in self._batches[bucket]]
                rows = pa.Table.from_batches(batches, schema=schema)
                out.append(rows, np.full(rows.num_rows, bucket, dtype=np.int64))
            return out.close()

    def discard(self) -> None:
        """Close (if still open) and remove the spill file."""
        try:
            self._close()
        finally:
            with contextlib.suppress(FileNotFoundError):
                self.crawl.fs.rm_file(self.crawl.path(self.rel))


class FooterCache:
    """Parsed Parquet footers of partitioned fact files, kept per process (LRU of ``size``).

    Each of a round's per-bucket update tasks reads its row groups from every shard's ``fetched``
    and ``links`` file, so without a cache each worker parses each file's footer (one entry per
    row group and column: ~0.6 ms for a 64-bucket file) once per bucket task it runs instead of
    once. The cache must hold a round's fact files (2 per shard), or the tasks, reading them in
    the same order, would evict each one before its next use: :meth:`reserve` grows it to that,
    up to :attr:`MAX_SIZE`. A parsed footer of a 64-bucket ``fetched`` file takes ~1.9 MB of
    memory (200 KB serialized; docs/benchmarks.md, "Session 6"), so the bound is kept small: at
    the default 8 entries, ~15 MB per process; older rounds' and micro-batches' files leave it as
    newer ones come, and :meth:`clear` drops them as the next fetch starts.

    An entry is keyed by the file's path and its identity as opened: inode, size and
    modification time of the open descriptor locally (``os.fstat``, so the key and the bytes
    read are the same file), :meth:`fsspec.AbstractFileSystem.ukey` elsewhere (the ETag on
    object stores). A file written again at the same path (a round rerun after a crash) is parsed
    again, never read with a stale footer. Safe to use from several threads.
    """

    #: The most entries :meth:`reserve` grows a cache to (16 shards' fact files, ~60 MB).
    MAX_SIZE = 32

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.hits = self.misses = 0
        self._footers: OrderedDict[tuple[object, ...], pq.FileMetaData] = OrderedDict()
        self._lock = threading.Lock()

    def reserve(self, files: int) -> None:
        """Let the cache hold at least ``files`` entries (at most :attr:`MAX_SIZE`): the fact
        files one task reads."""
        with self._lock:
            self.size = max(self.size, min(files, self.MAX_SIZE))

    def clear(self) -> None:
        """Drop every entry (its size and counts stay). A shard calls it as it starts fetching a
        round or takes a micro-batch: the fact files of the update before are read no more, and
        their footers (~2 MB each) would otherwise stay through the fetch, the worker's peak."""
        with self._lock:
            self._footers.clear()

    def open(self, crawl: CrawlDir, rel: str, fh: IO[bytes]) -> pq.ParquetFile:
        """``rel`` (open as ``fh``) as a :class:`pyarrow.parquet.ParquetFile`, its footer parsed
        at most once while it stays in the cache and unchanged."""
        key = (crawl.url, rel, *_identity(crawl, rel, fh))
        with self._lock:
            meta = self._footers.get(key)
            if meta is not None:
                self._footers.move_to_end(key)
                self.hits += 1
        if meta is not None:
            return pq.ParquetFile(fh, metadata=meta)
        pf = pq.ParquetFile(fh)
        with self._lock:
            self.misses += 1
            self._footers[key] = pf.metadata
            while len(self._footers) > self.size:
                self._footers.popitem(last=False)
        return pf


def _identity(crawl: CrawlDir, rel: str, fh: IO[bytes]) -> tuple[object, ...]:
    """What tells this version of ``rel`` from another written at the same path (see
    :class:`FooterCache`)."""
    try:
        st = os.fstat(fh.fileno())
    except (AttributeError, OSError, io.UnsupportedOperation):
        return ("ukey", crawl.fs.ukey(crawl.path(rel)))
    return ("fstat", st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


#: The process's footer cache of fact files (:func:`read_partition`).
FOOTERS = FooterCache()


def read_partition(
    crawl: CrawlDir,
    table: str,
    parts: list[Partitioned],
    bucket: int,
    columns: list[str] | None = None,
) -> pa.Table | None:
    """The rows of ``bucket`` from each partitioned file of ``parts`` (every spill's row group,
    in write order), concatenated (None if no file has rows of that bucket). ``columns``: only
    these, in this order, of the schema's types, a column the file lacks as nulls (default: all,
    conformed to ``table``'s schema, as when written)."""
    tables = []
    for part in parts:
        groups = part.row_groups.get(bucket)
        if not groups:
            continue
        with reading(crawl.fs, crawl.path(part.entry.path)) as fh:
            pf = FOOTERS.open(crawl, part.entry.path, fh)
            tables.append(read_columns(table, pf, columns, list(groups)))
    if not tables:
        return None
    if columns is None:
        return pa.concat_tables([schemas.conform(table, t) for t in tables])
    full = schemas.schema(table)
    target = pa.schema([full.field(c) for c in columns])
    return pa.concat_tables([t if t.schema.equals(target) else t.cast(target) for t in tables])
