"""Log-structured frontier buckets: a base file plus sorted delta runs (docs/design.md §4).

IRLbot's DRUM (§5.1) merges every bucket with its batch and rewrites it, so a round costs the whole
frontier. Here, as in an LSM tree (O'Neil et al., "The Log-Structured Merge-Tree", 1996), a bucket is
a **base** file plus an ordered list of **delta runs**, each a Parquet file sorted by ``url_key``
holding whole rows, and a round's update writes one new run per touched bucket with only the rows it
changed or added. The manifest lists, per bucket, the base (if any) then the runs oldest first
(:class:`~batchcrawl.store.crawldir.FileEntry` with ``bucket`` and ``run`` set). Readers merge them:
for each ``url_key`` the row of the newest file wins. **Compaction** merges a bucket's runs into a
new base once they hold ``frontier.compact_run_ratio`` rows per base row or number
``frontier.max_runs``; like every write it only creates new files, published by the next manifest,
and ``gc`` later drops the superseded ones. A round's update compacts in the same task when its
run would pass the rule (:func:`add_run` with ``compact``: the new base is written instead of the run,
which is then never written and read back); ``batchcrawl compact`` and the round's compact step
take the buckets that pass it otherwise.

Deciding known vs new (DRUM *check*) reads only the ``url_key`` column of each file; memory is one
bucket's keys (8 bytes per URL), never the frontier.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from batchcrawl.config import Config
from batchcrawl.errors import CrawlDirError
from batchcrawl.frontier import due
from batchcrawl.store import paths, schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest, read_parquet, reading

KEY = "url_key"
#: ``mapper(fn, items) -> list``: runs one task per item (threads here, Dask in a round).
Mapper = Callable[[Callable[[Any], Any], list[Any]], list[Any]]


def thread_mapper(workers: int) -> Mapper:
    """A :data:`Mapper` on ``workers`` threads of this process (1: in order, no threads)."""

    def mapper(fn: Callable[[Any], Any], items: list[Any]) -> list[Any]:
        if workers <= 1:
            return [fn(i) for i in items]
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(fn, items))

    return mapper


#: Columns stored with Parquet dictionary encoding (few distinct values per bucket).
_DICT_COLUMNS = ["host", "domain", "status", "reason", "content_digest"]


@dataclass(frozen=True)
class BucketFiles:
    """The files of one bucket: ``base`` (None: no base yet) and ``runs``, oldest first, and
    ``rows``, the bucket's merged row count (None: not recorded, count the keys)."""

    bucket: int
    base: FileEntry | None = None
    runs: tuple[FileEntry, ...] = ()
    rows: int | None = None

    @property
    def files(self) -> list[FileEntry]:
        """Base then runs: the merge order (later wins)."""
        return ([self.base] if self.base is not None else []) + list(self.runs)

    def entries(self) -> list[FileEntry]:
        """The manifest entries of this bucket (``bucket`` and ``run`` set; ``bucket_rows`` on
        the newest)."""
        out = [dataclasses.replace(e, bucket=self.bucket, run=e is not self.base, bucket_rows=None)
               for e in self.files]  # fmt: skip
        if out:
            out[-1] = dataclasses.replace(out[-1], bucket_rows=self.rows)
        return out


def bucket_files(manifest: Manifest, table: str = "frontier") -> list[BucketFiles]:
    """The base and runs of every bucket of ``manifest``, in bucket order (of the frontier, or of
    another table bucketed the same way: ``content``, :mod:`batchcrawl.frontier.content`).

    A manifest written before delta runs existed lists one plain file per bucket (or none): each is
    read as that bucket's base.

    Raises
    ------
    CrawlDirError
        The frontier listing does not fit the crawl's bucket count.
    """
    k = manifest.buckets
    entries = list(manifest.tables.get(table, ()))
    if entries and all(e.bucket is None for e in entries):
        if len(entries) != k:
            raise CrawlDirError(
                f"generation {manifest.generation}: frontier lists {len(entries)} files but the "
                f"crawl has {k} buckets; the manifest is damaged (restore an older generation)"
            )
        return [BucketFiles(b, e, (), e.rows) for b, e in enumerate(entries)]
    base: list[FileEntry | None] = [None] * k
    runs: list[list[FileEntry]] = [[] for _ in range(k)]
    for e in entries:
        if e.bucket is None or not 0 <= e.bucket < k or (not e.run and runs[e.bucket]):
            raise CrawlDirError(
                f"generation {manifest.generation}: frontier entry {e.path!r} has no valid bucket "
                "or a base after a run; the manifest is damaged (restore an older generation)"
            )
        if e.run:
            runs[e.bucket].append(e)
        else:
            base[e.bucket] = e
    out = []
    for b in range(k):
        files = BucketFiles(b, base[b], tuple(runs[b]))
        rows = files.files[-1].bucket_rows if files.files else 0
        out.append(dataclasses.replace(files, rows=rows))
    return out


def frontier_listing(buckets: Iterable[BucketFiles]) -> list[FileEntry]:
    """The manifest's ``frontier`` listing of ``buckets`` (the inverse of :func:`bucket_files`)."""
    return [e for bf in buckets for e in bf.entries()]


def write_bucket(
    crawl: CrawlDir, rel: str, parts: pa.Table | Iterable[pa.Table], *, row_group_bytes: int
) -> FileEntry:
    """Write a frontier file at ``rel`` from one table or a stream of tables (already sorted by
    ``url_key``), validated against the frontier schema, in row groups of about
    ``row_group_bytes`` bytes in memory (so :mod:`batchcrawl.frontier.drum` can stream it back).
    Written through :meth:`CrawlDir.open_output` (whole or absent), then its due-time index
    (:mod:`batchcrawl.frontier.due`), named by the returned entry's ``due``."""
    if isinstance(parts, pa.Table):
        parts = [parts]
    target = schemas.schema("frontier")
    rows = 0
    due_parts = [due.index_rows(target.empty_table())]
    with crawl.open_output(rel) as fh:
        writer = pq.ParquetWriter(
            fh, target, compression="zstd", use_dictionary=_DICT_COLUMNS, write_statistics=True
        )
        try:
            for part in parts:
                part = schemas.conform("frontier", part)
                if part.num_rows == 0:
                    continue
                per_row = max(1, part.nbytes // part.num_rows)
                writer.write_table(part, row_group_size=max(1024, row_group_bytes // per_row))
                due_parts.append(due.index_rows(part))
                rows += part.num_rows
            if rows == 0:
                writer.write_table(target.empty_table())
        finally:
            writer.close()
    index = pa.concat_tables(due_parts).sort_by([(due.TIME, "ascending"), (KEY, "ascending")])
    return FileEntry(rel, rows, due=due.write_index(crawl, paths.due_index(rel), index))


def read_file(
    crawl: CrawlDir, entry: FileEntry, columns: list[str] | None, *, threads: bool = True
) -> pa.Table:
    """The ``columns`` (None: all) of one frontier file. ``threads=False`` reads without Arrow's
    thread pools and pre-buffering: for a process that exits right after its reads
    (:mod:`batchcrawl.engine.duecheck` says why)."""
    with reading(crawl.fs, crawl.path(entry.path)) as fh:
        return read_parquet(fh, columns, threads=threads)


def newest_wins(tables: list[pa.Table]) -> pa.Table:
    """Merge tables each sorted by ``url_key`` with unique keys, oldest first: one row per key,
    from the newest table holding it, sorted by key. Vectorized (a stable sort of the
    concatenation, which timsort does in about linear time on sorted runs)."""
    tables = [t for t in tables if t.num_rows] or tables[:1]
    if len(tables) == 1:
        return tables[0]
    both = pa.concat_tables(tables, promote_options="default")
    keys = np.asarray(both.column(KEY).to_numpy(), dtype=np.uint64)
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    last = np.ones(len(sk), dtype=bool)
    last[:-1] = sk[1:] != sk[:-1]
    return both.take(pa.array(order[last]))


def read_bucket(crawl: CrawlDir, files: BucketFiles, columns: list[str] | None = None) -> pa.Table:
    """The merged rows of one bucket (newest run wins per ``url_key``), sorted by key.

    ``columns`` projects (``url_key`` is always read, and kept only if asked for).
    """
    cols = None if columns is None else list(dict.fromkeys([KEY, *columns]))
    parts = [read_file(crawl, e, cols) for e in files.files]
    if not parts:
        t = schemas.empty("frontier")
        return t if columns is None else t.select(columns)
    merged = newest_wins(parts)
    return merged if columns is None else merged.select(columns)


def iter_buckets(
    crawl: CrawlDir, manifest: Manifest, columns: list[str] | None = None
) -> Iterator[tuple[int, pa.Table]]:
    """``(bucket, merged table)`` for every bucket of ``manifest``, one at a time (bounded memory)."""
    for bf in bucket_files(manifest):
        yield bf.bucket, read_bucket(crawl, bf, columns)


def bucket_keys(crawl: CrawlDir, files: BucketFiles, key: str = KEY) -> np.ndarray:
    """The sorted unique ``key`` values (default ``url_key``) of a bucket (base and runs), reading
    only that column (IRLbot's DRUM check without the values): ``uint64``, shape ``(rows,)``."""
    keys = [
        np.asarray(read_file(crawl, e, [key]).column(key).to_numpy(), dtype=np.uint64)
        for e in files.files
    ]
    if not keys:
        return np.empty(0, np.uint64)
    if len(keys) == 1:
        return keys[0]
    return np.unique(np.concatenate(keys))


def file_keys(crawl: CrawlDir, files: BucketFiles) -> list[np.ndarray]:
    """The ``url_key`` column of each file of a bucket (base, then runs), each sorted and unique
    (``uint64``): the DRUM check reads 8 bytes per key and never sorts their union."""
    return [
        np.asarray(read_file(crawl, e, [KEY]).column(KEY).to_numpy(), dtype=np.uint64)
        for e in files.files
    ]


def known_in(file_keys: list[np.ndarray], keys: np.ndarray) -> np.ndarray:
    """For each of ``keys``, whether any of the sorted arrays ``file_keys`` holds it (bool,
    shape of ``keys``): one binary search per file, no merge."""
    keys = np.asarray(keys, dtype=np.uint64)
    out = np.zeros(len(keys), dtype=bool)
    for fk in file_keys:
        out |= is_known(fk, keys)
    return out


def bucket_rows(crawl: CrawlDir, files: BucketFiles) -> int:
    """The merged row count of a bucket: recorded in the manifest, else its keys counted."""
    if files.rows is not None:
        return files.rows
    if not files.runs:
        return files.base.rows if files.base is not None else 0
    return len(bucket_keys(crawl, files))


def is_known(bucket_keys: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """For each of ``keys``, whether it is in the sorted ``bucket_keys`` (bool, shape of keys)."""
    keys = np.asarray(keys, dtype=np.uint64)
    if len(bucket_keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    pos = np.minimum(np.searchsorted(bucket_keys, keys), len(bucket_keys) - 1)
    known: np.ndarray = bucket_keys[pos] == keys
    return known


def lookup(
    crawl: CrawlDir,
    files: BucketFiles,
    keys: np.ndarray,
    file_keys: list[np.ndarray] | None = None,
) -> pa.Table:
    """The merged rows of ``keys`` (sorted unique ``uint64``) that the bucket holds, sorted by key.

    Each file's key column is read first (or taken from ``file_keys``, :func:`file_keys` of the
    same files); whole rows are read only from the row groups that hold one of ``keys``.
    """
    keys = np.asarray(keys, dtype=np.uint64)
    parts = []
    for i, e in enumerate(files.files):
        if len(keys) == 0:
            break
        if file_keys is not None and not is_known(file_keys[i], keys).any():
            continue
        with reading(crawl.fs, crawl.path(e.path)) as fh:
            pf = pq.ParquetFile(fh)
            if file_keys is None:
                fk = np.asarray(pf.read(columns=[KEY]).column(KEY).to_numpy(), dtype=np.uint64)
            else:
                fk = file_keys[i]
            hit = np.flatnonzero(np.isin(fk, keys, assume_unique=True))
            if len(hit) == 0:
                continue
            sizes = [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)]
            starts = np.concatenate(([0], np.cumsum(sizes)))
            groups = np.unique(np.searchsorted(starts, hit, side="right") - 1)
            t = pf.read_row_groups([int(g) for g in groups])
            offset = np.concatenate(([0], np.cumsum([sizes[g] for g in groups])))
            local = np.searchsorted(starts[groups], hit, side="right") - 1
            parts.append(t.take(pa.array(offset[local] + hit - starts[groups][local])))
    if not parts:
        return schemas.empty("frontier")
    return newest_wins(parts)


def add_run(
    crawl: CrawlDir,
    files: BucketFiles,
    generation: int,
    rows: pa.Table,
    cfg: Config,
    *,
    bucket_rows: int | None = None,
    compact: bool = False,
) -> BucketFiles:
    """Write ``rows`` (changed and new rows of the bucket, unique keys, any order) as the bucket's
    newest run, ``frontier/gen=G/bucket=BBB.run.parquet``; no rows: the bucket is unchanged.
    ``bucket_rows``: the bucket's row count with the run merged (recorded in the manifest).
    ``compact``: if the bucket's runs with this one would pass the compaction rule
    (:func:`needs_compaction`), write the new base (:func:`compact_bucket` of the bucket and
    ``rows``) instead, so the run is never written and read back; the result then has no runs.
    Returns the new file list (uncommitted)."""
    if rows.num_rows == 0:
        return dataclasses.replace(files, rows=bucket_rows if files.rows is None else files.rows)
    if compact and needs_compaction(files, cfg, rows.num_rows):
        return compact_bucket(crawl, files, generation, cfg, rows)
    rows = rows.take(pa.array(np.argsort(rows.column(KEY).to_numpy(), kind="stable")))
    rel = paths.bucket_run(generation, files.bucket)
    entry = write_bucket(crawl, rel, rows, row_group_bytes=cfg.frontier.drum_batch_bytes // 4)
    return BucketFiles(files.bucket, files.base, (*files.runs, entry), bucket_rows)


def needs_compaction(files: BucketFiles, cfg: Config, new_run_rows: int = 0) -> bool:
    """Whether a bucket's runs passed ``frontier.max_runs`` (count) or
    ``frontier.compact_run_ratio`` (run rows per base row); ``new_run_rows`` > 0: whether they
    would with one more run of that many rows."""
    if not files.runs and not new_run_rows:
        return False
    runs_ = len(files.runs) + (new_run_rows > 0)
    run_rows = sum(r.rows for r in files.runs) + new_run_rows
    base_rows = files.base.rows if files.base is not None else 0
    f = cfg.frontier
    return runs_ >= f.max_runs or run_rows >= f.compact_run_ratio * max(base_rows, 1)


def compact_bucket(
    crawl: CrawlDir, files: BucketFiles, generation: int, cfg: Config, new: pa.Table | None = None
) -> BucketFiles:
    """Merge a bucket's base, runs and ``new`` rows (unique keys, any order; newest of all) into
    a new base ``frontier/gen=G/bucket=BBB.parquet`` (one Dask task per bucket). Only writes a
    new file: the old ones stay until ``gc`` finds no kept manifest naming them. Returns the new
    file list (uncommitted). Memory: one bucket."""
    if not files.runs and (new is None or new.num_rows == 0):
        return files
    merged = read_bucket(crawl, files)
    if new is not None:
        merged = newest_wins([merged, schemas.conform("frontier", new)])
    rel = paths.bucket_base(generation, files.bucket)
    entry = write_bucket(crawl, rel, merged, row_group_bytes=cfg.frontier.drum_batch_bytes // 4)
    return BucketFiles(files.bucket, entry, (), merged.num_rows)


def compact(
    crawl: CrawlDir, cfg: Config, *, force: bool = False, workers: int = 1
) -> dict[str, Any]:
    """Compact the current generation's buckets and commit a generation (``batchcrawl compact``).

    Buckets past ``frontier.max_runs`` or ``frontier.compact_run_ratio`` (every bucket with runs
    if ``force``) get a new base; the caller holds the writer lock. Crash-safe like a round: new
    files only, published by the next manifest; ``gc`` removes the superseded runs later.

    Returns
    -------
    dict
        The committed summary: ``step``, ``buckets_compacted``, ``rows_written``, ``generation``.
    """
    from concurrent.futures import ThreadPoolExecutor

    manifest = crawl.manifest()
    gen = manifest.generation + 1
    buckets = bucket_files(manifest)

    def one(bf: BucketFiles) -> BucketFiles:
        return compact_bucket(crawl, bf, gen, cfg) if force or needs_compaction(bf, cfg) else bf

    with ThreadPoolExecutor(max(1, workers)) as pool:
        out = list(pool.map(one, buckets))
    done = [a for a, b in zip(out, buckets, strict=True) if a is not b]
    summary = {
        "step": "compact",
        "buckets_compacted": len(done),
        "rows_written": sum(bf.base.rows for bf in done if bf.base is not None),
    }
    committed = crawl.commit(manifest, {"frontier": frontier_listing(out)}, summary)
    return {**summary, "generation": committed.generation}
