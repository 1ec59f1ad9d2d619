"""Nothing due, decided before a cluster starts (issue 30: a ``batchcrawl round`` process's fixed
cost).

The last ``batchcrawl round`` of a crawl (exit 75, which Airflow maps to a skip) used to start the
embedded Dask cluster, run a select that selected nothing and close the cluster again: 3-6 s of
its own per crawl, more on a loaded machine. :func:`nothing_due_now` answers from the due-time
index (:mod:`batchcrawl.frontier.due`: every frontier file's side file is sorted by due time), in
two steps: the index files' footers (the first row group's minimum is the file's earliest due
time: when every file's is later than now, nothing is due), then, only when a footer says a row
may be due, the due keys of each file checked against the newer files of its bucket (newest wins,
the rule :func:`~batchcrawl.frontier.due.due_rows` applies: a base's stale queued row that a run
fetched is not due). It returns "nothing due" only when no URL's newest row is due; anything else
(a URL due, a file without an index) is left to :func:`~batchcrawl.engine.select.select`, which
alone decides what a round fetches (caps, re-filter, leases). ``batchcrawl round`` and ``crawl``
ask it before they import the round driver and Dask (a nothing-due process: 4.0-4.5 s of CPU ->
0.7 s, measured on a shared machine).

Every read here is single-threaded (``ParquetFile`` without pre-buffering, ``use_threads=False``):
a process that reads Parquet through Arrow's thread pools and exits right after could abort at
interpreter exit with ``terminate called without an active exception`` (exit 134; a joinable pool
thread destroyed at exit, apache/arrow#34314): 1 of 40 such processes aborted when this check
read the buckets with ``pyarrow.parquet.read_table`` (its default ``use_threads=True``), 0 of 40
with the reads here.
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchcrawl.console.nothing_due import nothing_due_at, nothing_due_held
from batchcrawl.errors import NothingDue
from batchcrawl.frontier import due
from batchcrawl.frontier.runs import KEY, bucket_files, newest_wins, read_file
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest, reading

__all__ = ["any_due", "earliest_indexed_due_ms", "next_due_ms", "nothing_due_now"]


def earliest_indexed_due_ms(crawl: CrawlDir, manifest: Manifest) -> tuple[bool, int | None]:
    """``(known, earliest)``: the earliest due time (epoch ms) any frontier file's due-time index
    holds, from the index files' footers alone (None: no index holds a row, nothing will ever be
    due). ``known`` is False when a file has no index (written before indexes existed) or its
    first row group has no statistics. A lower bound of the true next due time (an older file's
    index may hold a row a newer file replaced)."""
    earliest: int | None = None
    for entry in manifest.tables.get("frontier", ()):
        if entry.due is None:
            return False, None
        with reading(crawl.fs, crawl.path(entry.due)) as fh:
            meta = pq.ParquetFile(fh).metadata
            if meta.num_rows == 0:
                continue
            col = meta.schema.to_arrow_schema().get_field_index(due.TIME)
            first = next((i for i in range(meta.num_row_groups)
                          if meta.row_group(i).num_rows), None)  # fmt: skip
            st = meta.row_group(first).column(col).statistics if first is not None else None
            if st is None or not st.has_min_max:
                return False, None
            at = due._ms(st.min)
        earliest = at if earliest is None else min(earliest, at)
    return True, earliest


def _due_keys(crawl: CrawlDir, entry: FileEntry, now_ms: int) -> np.ndarray | None:
    """The ``url_key`` of the rows of one frontier file due by ``now_ms``, from its index (the
    row groups whose first due time is not later; :func:`batchcrawl.frontier.due.due_rows`'s
    read, single-threaded); None: the file has no index."""
    if entry.due is None:
        return None
    t = due.due_in(crawl, entry, now_ms, [KEY, due.TIME], threads=False)
    return np.asarray(t.column(KEY).to_numpy(), np.uint64)


def any_due(crawl: CrawlDir, manifest: Manifest, now_ms: int) -> bool:
    """Whether a URL of ``manifest``'s frontier is due at ``now_ms`` (epoch ms), newest row per
    URL: each file's due-time index, a due key counting only if no newer file of its bucket holds
    it (:func:`batchcrawl.frontier.due.due_rows`'s rule). Stops at the first due URL; a file
    without an index counts as due (the cluster's select decides)."""
    for bf in bucket_files(manifest):
        files = bf.files
        newer = np.empty(0, np.uint64)
        for i in range(len(files) - 1, -1, -1):
            keys = _due_keys(crawl, files[i], now_ms)
            if keys is None:
                return True
            if len(keys) and not np.isin(keys, newer).all():
                return True
            if i:
                own = read_file(crawl, files[i], [KEY], threads=False).column(KEY).to_numpy()
                newer = np.union1d(newer, np.asarray(own, np.uint64))
    return False


def next_due_ms(crawl: CrawlDir, manifest: Manifest) -> int | None:
    """The exact earliest due time (epoch ms) of ``manifest``'s frontier, newest row per URL
    (:func:`batchcrawl.console.nothing_due.next_due_ms`'s answer), read one bucket at a time
    without Arrow's thread pools; None when no URL will ever be due."""
    cols = [KEY, "status", due.TIME]
    earliest = None
    for bf in bucket_files(manifest):
        if not bf.files:
            continue
        merged = newest_wins([read_file(crawl, e, cols, threads=False) for e in bf.files])
        value = pc.min(due.due_time(merged).cast("int64")).as_py()
        if value is not None and (earliest is None or value < earliest):
            earliest = value
    return earliest


def nothing_due_now(crawl: CrawlDir, now_s: float) -> NothingDue | None:
    """The :class:`NothingDue` of the committed generation at wall clock ``now_s`` (epoch s) when
    the due-time index shows no URL due by then, else None (a round may have work: the cluster
    starts and :func:`~batchcrawl.engine.select.select` decides). Reads footers, and the
    buckets' three due columns only when nothing is due (for the message's next due time).

    Raises
    ------
    CrawlDirError
        A file the generation names is missing or unreadable.
    """
    manifest = crawl.manifest()
    if not manifest.rows("frontier"):
        return nothing_due_at(manifest, None, now_s)
    now_ms = int(now_s * 1000)
    known, at = earliest_indexed_due_ms(crawl, manifest)
    if not known or (at is not None and at <= now_ms and any_due(crawl, manifest, now_ms)):
        return None
    return nothing_due_held(crawl, manifest, next_due_ms(crawl, manifest), now_s)
