"""Shared helpers of the frontier (Nutch's CrawlDb; docs/design.md §4): building new rows, times, the
due statuses and the seed scope. The bucket files themselves (base + delta runs, merged on read)
are :mod:`batchcrawl.frontier.runs`.

Times are stored as ``TIMESTAMP_MS`` holding UTC wall-clock time. Every step takes ``now`` from its
caller (a :class:`datetime.datetime` or epoch seconds) and never reads the clock itself.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from batchcrawl.errors import BatchcrawlError
from batchcrawl.frontier.due import DUE_STATUSES
from batchcrawl.frontier.runs import iter_buckets
from batchcrawl.records import UrlStatus
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir, Manifest

__all__ = [
    "DUE_STATUSES",
    "FrontierError",
    "UrlStatus",
    "empty_bucket",
    "epoch_ms",
    "new_rows",
    "seed_scope",
]


class FrontierError(BatchcrawlError, ValueError):
    """Rows handed to a frontier step are invalid (e.g. a links ``seq`` out of range); the
    message names the column and the allowed range."""

    exit_code = 3


def empty_bucket() -> pa.Table:
    """A zero-row frontier table."""
    return schemas.empty("frontier")


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
    next_fetch_time: dt.datetime | float | None = None,
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
    next_fetch_time : datetime, epoch seconds or None
        When the new URLs become due: the discovering step's ``now`` (the due-time column; NULL
        only for URLs that are never due by time).
    """
    n = len(url_key)

    def col(value: object, typ: pa.DataType) -> pa.Array:
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
            "next_fetch_time": pa.array(
                np.full(n, 0 if next_fetch_time is None else epoch_ms(next_fetch_time)),
                pa.int64(),
                mask=np.full(n, next_fetch_time is None),
            ).cast(pa.timestamp("ms")),
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
