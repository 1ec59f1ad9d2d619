"""The due-time index of the frontier (docs/design.md §4, §5): generate reads what can be due.

When a URL may be fetched is decided by one function, :func:`due_time`: a row in a due status
(``queued``, ``error``) is due from its ``next_fetch_time``; a ``fetched`` or ``gone`` row
(:data:`REFETCH_STATUSES`) is due from its ``next_fetch_time`` when the ``[recrawl]`` schedule set
one (:func:`batchcrawl.frontier.update.next_fetch_time`, docs/design.md §8a) and never otherwise;
any other row is never due by time.

Every frontier file (a bucket's base or a delta run, :mod:`batchcrawl.frontier.runs`) is written
with a **side file** ``....due.parquet`` (:func:`batchcrawl.store.paths.due_index`), named by the
file's manifest entry (``FileEntry.due``): the file's rows that can ever be due, with the columns
generate reads (:data:`SELECT_COLUMNS`), sorted by due time, in small row groups. A reader asks for
``next_fetch_time <= now`` and Parquet's row-group statistics skip everything due later, so generate
reads about as many rows as are due, not the frontier. Like its data file, the side file is only
ever created, never changed; the manifest publishes both, ``gc`` removes both.

Newest wins (an LSM tree's tombstones, O'Neil et al. 1996): a due row of an older file is only a
candidate if no newer file of its bucket holds the key, checked against the newer files' ``url_key``
columns (delta runs: small), so a row a run changed (fetched, filtered, backed off) is never
selected from a stale index entry.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchcrawl.records import UrlStatus
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry, read_parquet, reading

KEY = "url_key"
TIME = "next_fetch_time"
#: Statuses a URL may be fetched in (when not leased and its due time has passed).
DUE_STATUSES = (UrlStatus.QUEUED.value, UrlStatus.ERROR.value)
#: Statuses due again only by time: when the ``[recrawl]`` schedule set ``next_fetch_time``.
REFETCH_STATUSES = (UrlStatus.FETCHED.value, UrlStatus.GONE.value)
#: Frontier columns generate reads, and so the columns of a due-time index.
SELECT_COLUMNS = [
    "url_key",
    "url",
    "host",
    "domain",
    "depth",
    "hops_out",
    "status",
    "discovered_round",
    "discovered_seq",
    "retries",
    "next_fetch_time",
    "lease_round",
    "etag",  # conditional GET and revisits of a refetch (fetch item columns)
    "last_modified",
    "content_fetch_time",
    "content_digest",
]
#: Rows per row group of an index file: the granularity at which a read skips rows due later.
INDEX_ROW_GROUP_ROWS = 8192


def due_time(rows: pa.Table) -> pa.Array:
    """When each row becomes due, as ``timestamp[ms]`` (UTC); null: never due by time.

    Rows in a :data:`DUE_STATUSES` status are due from ``next_fetch_time``; such a row without
    one (written before every due-able row had a time) has been due since the epoch. Rows in a
    :data:`REFETCH_STATUSES` status are due from ``next_fetch_time`` (the ``[recrawl]`` schedule),
    never when it is null.
    """
    status = rows.column("status")
    due_status = pc.is_in(status, pa.array(DUE_STATUSES))
    refetch = pc.is_in(status, pa.array(REFETCH_STATUSES))
    nft = rows.column(TIME).cast(pa.timestamp("ms"))
    epoch = pa.scalar(0, pa.timestamp("ms"))
    null = pa.scalar(None, pa.timestamp("ms"))
    out = pc.if_else(due_status, pc.coalesce(nft, epoch), pc.if_else(refetch, nft, null))
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def index_rows(rows: pa.Table) -> pa.Table:
    """The rows of a frontier table that can ever be due, :data:`SELECT_COLUMNS` with
    ``next_fetch_time`` set to their :func:`due_time`, sorted by ``(due time, url_key)``."""
    t = rows.select(SELECT_COLUMNS)
    when = due_time(t)
    t = t.set_column(t.schema.get_field_index(TIME), TIME, when).filter(pc.is_valid(when))
    return t.sort_by([(TIME, "ascending"), (KEY, "ascending")])


def write_index(crawl: CrawlDir, rel: str, rows: pa.Table) -> str:
    """Write ``rows`` (already :func:`index_rows`) as the index file ``rel``, whole or absent
    (:meth:`CrawlDir.open_output`), in row groups of :data:`INDEX_ROW_GROUP_ROWS` rows with
    statistics. Returns ``rel``."""
    with crawl.open_output(rel) as fh:
        pq.write_table(
            rows, fh, compression="zstd", row_group_size=INDEX_ROW_GROUP_ROWS,
            use_dictionary=["host", "domain", "status"], write_statistics=True,
        )  # fmt: skip
    return rel


def due_in(
    crawl: CrawlDir,
    entry: FileEntry,
    now_ms: int,
    columns: list[str] | None = None,
    *,
    threads: bool = True,
) -> pa.Table:
    """Rows of one frontier file due at ``now_ms`` (epoch ms), from its index (or, for a file
    written before indexes existed, from the file itself): ``columns`` of :data:`SELECT_COLUMNS`
    (None: all; :data:`TIME` must be among them). ``threads=False`` reads without Arrow's thread
    pools and pre-buffering (:mod:`batchcrawl.engine.duecheck` says why)."""
    cut = pa.scalar(now_ms, pa.timestamp("ms"))
    if entry.due is None:
        with reading(crawl.fs, crawl.path(entry.path)) as fh:
            t = index_rows(read_parquet(fh, SELECT_COLUMNS, threads=threads))
        t = t if columns is None else t.select(columns)
    else:
        with reading(crawl.fs, crawl.path(entry.due)) as fh:
            pf = pq.ParquetFile(fh, pre_buffer=threads)
            t = pf.read_row_groups(_groups_due(pf, now_ms), columns=columns, use_threads=threads)
    return t.filter(pc.less_equal(t.column(TIME), cut))


def _groups_due(pf: pq.ParquetFile, now_ms: int) -> list[int]:
    """The row groups of an index file (sorted by due time) whose first due time is ``<= now_ms``:
    read from the footer's statistics alone (a prefix of the file)."""
    col = pf.schema_arrow.get_field_index(TIME)
    out = []
    for i in range(pf.metadata.num_row_groups):
        st = pf.metadata.row_group(i).column(col).statistics
        if st is not None and st.has_min_max and _ms(st.min) > now_ms:
            break  # sorted by due time: every later group is due later
        out.append(i)
    return out


def _ms(value: int | datetime) -> int:
    """A Parquet ``timestamp[ms]`` statistic (datetime or int) as epoch milliseconds."""
    if isinstance(value, int):
        return value
    return int(pa.scalar(value, pa.timestamp("ms")).value)


def _keys(crawl: CrawlDir, entry: FileEntry) -> np.ndarray:
    with reading(crawl.fs, crawl.path(entry.path)) as fh:
        return np.asarray(read_parquet(fh, [KEY]).column(KEY).to_numpy(), np.uint64)


def due_rows(crawl: CrawlDir, files: list[FileEntry], now_ms: int) -> pa.Table:
    """The merged rows of one bucket that are due at ``now_ms`` (epoch milliseconds, UTC).

    ``files`` are the bucket's base and runs, oldest first (newest wins). Reads each file's index
    for rows due by ``now_ms`` and the ``url_key`` column of every file newer than one with due
    rows; never the whole bucket.

    Returns
    -------
    pyarrow.Table
        :data:`SELECT_COLUMNS`, ``next_fetch_time`` holding the due time; any order.
    """
    parts: list[pa.Table] = []
    newer = np.empty(0, np.uint64)  # sorted keys of the files newer than the current one
    for i in range(len(files) - 1, -1, -1):
        t = due_in(crawl, files[i], now_ms)
        if t.num_rows and len(newer):
            k = np.asarray(t.column(KEY).to_numpy(), np.uint64)
            pos = np.minimum(np.searchsorted(newer, k), len(newer) - 1)
            t = t.filter(pa.array(newer[pos] != k))
        parts.append(t)
        if i > 0:
            newer = np.union1d(newer, _keys(crawl, files[i]))
    if not parts:
        return schemas.empty("frontier").select(SELECT_COLUMNS)
    return pa.concat_tables(parts[::-1], promote_options="default")
