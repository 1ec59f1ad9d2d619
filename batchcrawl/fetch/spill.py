"""A shard's ``fetched``, ``links`` and ``edges`` files of one round, written while it fetches.

A round's rows held as Python objects until the round ends make a fetch worker's memory grow with
the size of the round (issue 16: ~380 MB PSS per worker for ~21,000 pages per shard). So the
worker hands the rows gathered so far to :meth:`FactFiles.write` each time they pass
``round.spill_pages`` pages (:meth:`batchcrawl.fetch.worker.FetchWorker.run`) and drops them, as a
Hadoop map task spills its sorted output buffer when it fills. Each spill is appended, sorted by
DRUM bucket, to the one open file per table (:class:`batchcrawl.store.shuffle.PartitionedWriter`),
so readers see one file per shard and table as before, with one row group per bucket per spill.
The files appear only when :meth:`FactFiles.close` has run and the ``with`` block ends without an
error: a worker killed between two spills leaves temp files that no reader takes for the round's
facts and ``gc`` removes.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import pyarrow as pa

from batchcrawl.fetch.worker import ShardRun
from batchcrawl.store import paths, schemas
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.shuffle import Partitioned, PartitionedWriter, partitioned_writer
from batchcrawl.urls import bucket_ids

#: Each fact table and the url key its rows are bucketed by (edges by their source's bucket).
FACT_KEYS = (("fetched", "url_key"), ("links", "dst_url_key"), ("edges", "src_url_key"))


class FactFiles:
    """The ``fetched``, ``links`` and ``edges`` files of one shard's round, open for spills.

    Parameters
    ----------
    crawl
        The crawl directory.
    round
        The round (or stream micro-batch) the rows belong to.
    shard
        The shard writing them.
    buckets
        The crawl's DRUM bucket count K.

    Use as a context manager; :meth:`close` (the block's last step) returns the files' indexes.
    ``outcomes`` counts the written ``fetched`` rows by outcome, ``spills`` the writes that held rows.
    """

    def __init__(self, crawl: CrawlDir, round: int, shard: int, buckets: int) -> None:
        self.crawl = crawl
        self.round = round
        self.shard = shard
        self.buckets = buckets
        self.outcomes: Counter = Counter()
        self.spills = 0
        self._stack = contextlib.ExitStack()
        self._writers: dict[str, PartitionedWriter] = {}

    def __enter__(self) -> FactFiles:
        with contextlib.ExitStack() as stack:
            for name, _ in FACT_KEYS:
                rel = paths.round_file(name, self.round, self.shard)
                self._writers[name] = stack.enter_context(partitioned_writer(self.crawl, name, rel))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        return self._stack.__exit__(*exc)

    def write(self, rows: ShardRun) -> None:
        """Append ``rows``' ``fetched``, ``links`` and ``edges`` rows to the files and empty their
        lists, one table at a time (the Python rows, their Arrow table and its bucket-sorted copy
        of one table are the peak). Call from one thread at a time."""
        if rows.fetched or any(rows.links.values()) or any(rows.edges.values()):
            self.spills += 1
        self.outcomes.update(row["outcome"] for row in rows.fetched)
        table = [pa.Table.from_pylist(rows.fetched, schema=schemas.schema("fetched"))]
        rows.fetched = []
        self._append("fetched", table)
        table = [pa.table(rows.links, schema=schemas.schema("links"))]
        rows.links = {c: [] for c in rows.links}
        self._append("links", table)
        table = [pa.table(rows.edges, schema=schemas.schema("edges"))]
        rows.edges = {c: [] for c in rows.edges}
        self._append("edges", table)

    def close(self) -> tuple[Partitioned, Partitioned, Partitioned]:
        """Finish the files (written at their names when the ``with`` block ends): their
        :class:`Partitioned` indexes, ``fetched``, ``links``, ``edges``."""
        fetched, links, edges = (self._writers[name].close() for name, _ in FACT_KEYS)
        return fetched, links, edges

    def _append(self, name: str, table: list[pa.Table]) -> None:
        """Append the one table in ``table`` (taken out of the list, so that the sorted copy the
        writer makes replaces it instead of joining it)."""
        key = dict(FACT_KEYS)[name]
        ids = bucket_ids(table[0].column(key).to_numpy(), self.buckets)
        self._writers[name].append(table.pop(), ids)
