"""Shared helpers of the frontier (Nutch's CrawlDb; docs/design.md §4): bucket files, reading and writing
buckets, building new rows, times, and the seed scope.

The frontier of a generation is ``K = manifest.buckets`` Parquet files, one per DRUM bucket (IRLbot
§5.1), listed in ``manifest.tables["frontier"]`` in bucket order; a URL lives in bucket
``url_key % K`` and each file is sorted by ``url_key``. Generation 0 (``init``) lists no file: every
bucket is then empty. A step that does not change a bucket keeps pointing at its older file.

Times are stored as ``TIMESTAMP_MS`` holding UTC wall-clock time. Every step takes ``now`` from its
caller (a :class:`datetime.datetime` or epoch seconds) and never reads the clock itself.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from batchcrawl.errors import BatchcrawlError, CrawlDirError
from batchcrawl.records import UrlStatus
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest
from batchcrawl.store.paths import bucket_base as bucket_path

__all__ = [
    "DUE_STATUSES",
    "FrontierError",
    "UrlStatus",
    "bucket_entries",
    "bucket_path",
    "empty_bucket",
    "epoch_ms",
    "iter_buckets",
    "new_rows",
    "read_bucket",
    "seed_scope",
    "write_bucket",
]


class FrontierError(BatchcrawlError, ValueError):
    """Rows handed to a frontier step are invalid (e.g. a links ``seq`` out of range); the
    message names the column and the allowed range."""

    exit_code = 3


#: Statuses a URL may be fetched in (when not leased and its ``next_fetch_time`` has passed).
DUE_STATUSES = (UrlStatus.QUEUED.value, UrlStatus.ERROR.value)

#: Columns stored with Parquet dictionary encoding (few distinct values per bucket).
_DICT_COLUMNS = ["host", "domain", "status", "reason", "content_digest"]


def bucket_entries(manifest: Manifest) -> list[FileEntry | None]:
    """The file of each bucket of ``manifest`` (``None``: the bucket is empty, generation 0).

    Raises
    ------
    CrawlDirError
        The manifest lists a number of frontier files other than 0 or ``manifest.buckets``.
    """
    entries = list(manifest.tables.get("frontier", ()))
    if not entries:
        return [None] * manifest.buckets
    if len(entries) != manifest.buckets:
        raise CrawlDirError(
            f"generation {manifest.generation}: frontier lists {len(entries)} files but the crawl "
            f"has {manifest.buckets} buckets; the manifest is damaged (restore an older generation)"
        )
    return entries


def empty_bucket() -> pa.Table:
    """A zero-row frontier table."""
    return schemas.empty("frontier")


def read_bucket(
    crawl: CrawlDir, entry: FileEntry | None, columns: list[str] | None = None
) -> pa.Table:
    """Read one bucket file whole (``entry`` None: an empty bucket). ``columns`` projects."""
    if entry is None:
        t = empty_bucket()
        return t if columns is None else t.select(columns)
    return crawl.read_table("frontier", [entry], columns=columns)


def iter_buckets(
    crawl: CrawlDir, manifest: Manifest, columns: list[str] | None = None
) -> Iterator[tuple[int, pa.Table]]:
    """``(bucket, table)`` for every bucket of ``manifest``, one at a time (bounded memory)."""
    for b, entry in enumerate(bucket_entries(manifest)):
        yield b, read_bucket(crawl, entry, columns)


def write_bucket(
    crawl: CrawlDir, rel: str, parts: pa.Table | Iterable[pa.Table], *, row_group_bytes: int
) -> FileEntry:
    """Write a bucket file at ``rel`` from one table or a stream of tables (already sorted by
    ``url_key``), validated against the frontier schema, in row groups of about
    ``row_group_bytes`` bytes in memory (so :mod:`batchcrawl.frontier.drum` can stream it back by row group).

    Like :meth:`CrawlDir.write_table` (through :meth:`CrawlDir.open_output`), but streaming and
    with a row group size.
    """
    if isinstance(parts, pa.Table):
        parts = [parts]
    target = schemas.schema("frontier")
    rows = 0
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
                rows += part.num_rows
            if rows == 0:
                writer.write_table(target.empty_table())
        finally:
            writer.close()
    return FileEntry(rel, rows)


def epoch_ms(now: dt.datetime | float | int) -> int:
    """``now`` as integer milliseconds since the Unix epoch (UTC wall clock).

    Parameters
    ----------
    now : datetime or float
        An aware datetime (converted to UTC), a naive datetime (taken as UTC), or epoch seconds.
    """
    if isinstance(now, dt.datetime):
        if now.tzinfo is None:
            now = now.replace(tzinfo=dt.UTC)
        return int(round(now.timestamp() * 1000))
    return int(round(float(now) * 1000))


def new_rows(
    *,
    url_key: np.ndarray | pa.Array,
    url: pa.Array | list[str],
    host: pa.Array | list[str],
    domain: pa.Array | list[str],
    depth: np.ndarray | pa.Array | int,
    hops_out: np.ndarray | pa.Array | int,
    discovered_round: np.ndarray | pa.Array | int,
    discovered_seq: np.ndarray | pa.Array,
    status: pa.Array | list[str] | str = UrlStatus.QUEUED.value,
    reason: pa.Array | list[str | None] | None = None,
    source_url_key: np.ndarray | pa.Array | None = None,
) -> pa.Table:
    """Frontier rows for newly discovered URLs (never fetched, no lease, no retries), in the order
    given (not sorted).

    Parameters
    ----------
    url_key : uint64 array, shape (n,)
        Keys of the canonical URLs.
    url, host, domain : string arrays, shape (n,)
        Canonical URL, its host and pay-level domain.
    depth, hops_out, discovered_round : int arrays shape (n,) or one int for all rows
    discovered_seq : int64 array, shape (n,)
        Breadth-first order inside the discovery round.
    status, reason : string arrays shape (n,), or one value for all rows
    source_url_key : uint64 array shape (n,) with nulls, or None (seeds)
    """
    n = len(url_key)

    def col(value, typ):
        if isinstance(value, pa.ChunkedArray):
            value = value.combine_chunks()
        if isinstance(value, pa.Array):
            return value.cast(typ)
        if value is None or isinstance(value, int | str):
            return pa.array(np.full(n, value) if isinstance(value, int) else [value] * n, typ)
        return pa.array(value, typ)

    table = pa.table(
        {
            "url_key": col(url_key, pa.uint64()),
            "url": col(url, pa.string()),
            "host": col(host, pa.string()),
            "domain": col(domain, pa.string()),
            "depth": col(depth, pa.int32()),
            "hops_out": col(hops_out, pa.int32()),
            "status": col(status, pa.string()),
            "reason": col(reason, pa.string()),
            "discovered_round": col(discovered_round, pa.int32()),
            "discovered_seq": col(discovered_seq, pa.int64()),
            "source_url_key": col(source_url_key, pa.uint64()),
            "retries": pa.array(np.zeros(n, dtype=np.int32)),
        }
    )
    return schemas.conform("frontier", table)


def seed_scope(crawl: CrawlDir, manifest: Manifest) -> tuple[set[str], set[str]]:
    """Hosts and pay-level domains of the seeds of the crawl (rows with ``discovered_round == 0``
    and no ``source_url_key``), read one bucket at a time.

    Returns
    -------
    (seed_hosts, seed_domains) : (set of str, set of str)
    """
    hosts: set[str] = set()
    domains: set[str] = set()
    cols = ["host", "domain", "discovered_round", "source_url_key"]
    for _, t in iter_buckets(crawl, manifest, cols):
        if t.num_rows == 0:
            continue
        mask = np.asarray(t.column("discovered_round").to_numpy() == 0) & np.asarray(
            t.column("source_url_key").is_null().to_numpy(zero_copy_only=False)
        )
        if mask.any():
            seeds = t.filter(pa.array(mask))
            hosts.update(seeds.column("host").unique().to_pylist())
            domains.update(seeds.column("domain").unique().to_pylist())
    return hosts, domains
