"""Insert-only sets keyed by a 64-bit hash, bucketed like the frontier: ``content`` (payload
digests) and ``domainlinks`` (pay-level-domain link pairs).

Each is IRLbot's DRUM *check+update* (§5.1) with nothing to update: a round's rows are split into
the crawl's K buckets by key (:func:`batchcrawl.urls.bucket_ids`), each bucket checks them against
its keys and writes the ones it did not know as its newest run, so a key lives in exactly one file
and a row never changes. Runs are merged into a new base with the frontier's rule
(:func:`batchcrawl.frontier.runs.needs_compaction`: ``frontier.max_runs`` runs or
``frontier.compact_run_ratio`` run rows per base row), in the same task, so a bucket never holds
more than ``max_runs`` files (O'Neil et al. 1996, the LSM tree). Like every write, compaction only
creates files; the manifest publishes them and ``gc`` drops the superseded ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa

from batchcrawl.config import Config
from batchcrawl.frontier.runs import (
    BucketFiles,
    Mapper,
    bucket_files,
    bucket_keys,
    is_known,
    needs_compaction,
)
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest
from batchcrawl.urls import bucket_ids

__all__ = ["KeySet", "SetUpdate", "compact_bucket", "insert_bucket", "update_set"]


@dataclass(frozen=True)
class KeySet:
    """Which set: its ``table`` (schema name and manifest key), its ``key`` column (``uint64``)
    and ``path(generation, bucket, run=...)`` (:mod:`batchcrawl.store.paths`)."""

    table: str
    key: str
    path: Callable[..., str]


def _read(crawl: CrawlDir, ks: KeySet, entry: FileEntry) -> pa.Table:
    return crawl.read_table(ks.table, [entry])


def compact_bucket(
    crawl: CrawlDir,
    ks: KeySet,
    files: BucketFiles,
    generation: int,
    new: pa.Table | None = None,
) -> BucketFiles:
    """Merge a bucket's base, runs and ``new`` rows (all with disjoint keys) into one base sorted
    by key, written as ``ks.path(generation, bucket, run=False)``. Memory: one bucket."""
    if not files.runs and (new is None or new.num_rows == 0):
        return files
    parts = [_read(crawl, ks, e) for e in files.files] + ([new] if new is not None else [])
    t = pa.concat_tables(parts, promote_options="default").sort_by([(ks.key, "ascending")])
    entry = crawl.write_table(ks.table, ks.path(generation, files.bucket, run=False), t)
    return BucketFiles(files.bucket, entry, (), t.num_rows)


def insert_bucket(
    crawl: CrawlDir, ks: KeySet, files: BucketFiles, generation: int, rows: pa.Table, cfg: Config
) -> tuple[BucketFiles, pa.Table]:
    """DRUM check+update of one bucket: write the rows of ``rows`` (this bucket's, unique keys,
    sorted by key) whose key the bucket does not know as its newest run or, when the bucket's runs
    with that run would pass the frontier's compaction rule, as part of a new base at once (no
    run written and read back). Returns the new file list (uncommitted) and the new rows."""
    known = is_known(bucket_keys(crawl, files, ks.key), rows.column(ks.key).to_numpy())
    new = rows.filter(pa.array(~known))
    total = (files.rows or 0) + new.num_rows
    if new.num_rows == 0:
        return BucketFiles(files.bucket, files.base, files.runs, total), new
    if needs_compaction(files, cfg, new.num_rows):
        return compact_bucket(crawl, ks, files, generation, new), new
    entry = crawl.write_table(ks.table, ks.path(generation, files.bucket, run=True), new)
    return BucketFiles(files.bucket, files.base, (*files.runs, entry), total), new


@dataclass(frozen=True)
class SetUpdate:
    """What :func:`update_set` did: the listing to commit and the rows that were new."""

    listing: list[FileEntry]
    new: pa.Table


def _task(
    crawl_url: str,
    ks: KeySet,
    generation: int,
    cfg: Config,
    item: tuple[BucketFiles, pa.Table],
) -> tuple[BucketFiles, pa.Table]:
    files, rows = item
    return insert_bucket(CrawlDir.open(crawl_url), ks, files, generation, rows, cfg)


def update_set(
    crawl: CrawlDir,
    manifest: Manifest,
    ks: KeySet,
    generation: int,
    rows: pa.Table,
    cfg: Config,
    mapper: Mapper,
) -> SetUpdate:
    """Insert ``rows`` (unique keys, any order) into the set: one task per touched bucket through
    ``mapper`` (Dask in a round). Memory: the rows plus one bucket's keys per task."""
    rows = rows.sort_by([(ks.key, "ascending")])
    all_files = bucket_files(manifest, ks.table)
    buckets = bucket_ids(rows.column(ks.key).to_numpy(), manifest.buckets)
    items = [(all_files[int(b)], rows.filter(pa.array(buckets == b))) for b in np.unique(buckets)]
    done = mapper(partial(_task, crawl.url, ks, generation, cfg), items) if items else []
    out = list(all_files)
    new = [rows.schema.empty_table()]
    for bf, n in done:
        out[bf.bucket] = bf
        new.append(n)
    listing = [e for bf in out for e in bf.entries()]
    return SetUpdate(listing, pa.concat_tables(new))
