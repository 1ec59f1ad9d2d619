"""A shard's ``fetched``, ``links`` and ``edges`` files of one round, spilled while it fetches.

A round's rows held as Python objects until the round ends make a fetch worker's memory grow with
the size of the round (issue 16: ~380 MB PSS per worker for ~21,000 pages per shard). So the
worker hands the rows gathered so far to :meth:`FactFiles.spill` each time they pass
``round.spill_pages`` pages (:meth:`batchcrawl.fetch.worker.FetchWorker.run`) and drops them, as a
Hadoop map task spills its sorted output buffer when it fills: each spill is appended, sorted by
DRUM bucket, to one spill file per table (:class:`batchcrawl.store.shuffle.SpillFile`, a temp
name). :meth:`FactFiles.finish` then merges each spill file into the table's file, one row group
per bucket, exactly as a round that never spilled writes it (readers see no difference), and
removes the spill files. A worker killed between two spills leaves only temp files that no reader
or rerun opens and ``gc`` removes.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from batchcrawl.fetch.runstate import ShardRun
from batchcrawl.store import paths, schemas
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.shuffle import Partitioned, SpillFile, write_partitioned
from batchcrawl.urls import bucket_ids

#: Each fact table and the url key its rows are bucketed by (edges by their source's bucket).
FACT_KEYS = {"fetched": "url_key", "links": "dst_url_key", "edges": "src_url_key"}


def _empty_columns(columns: dict[str, list[Any]]) -> dict[str, list[Any]]:
    return {c: [] for c in columns}


#: How a :class:`ShardRun` holds each fact table's rows, in :data:`FACT_KEYS` order: the Arrow
#: constructor for them (``fetched`` is a list of row dicts, ``links`` and ``edges`` are column
#: lists) and the empty holder that replaces them.
_HELD_AS: dict[str, tuple[Callable[..., pa.Table], Callable[[Any], Any]]] = {
    "fetched": (pa.Table.from_pylist, lambda rows: []),
    "links": (pa.table, _empty_columns),
    "edges": (pa.table, _empty_columns),
}


class FactFiles:
    """The ``fetched``, ``links`` and ``edges`` files of one shard's round, and their spills.

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

    Use as a context manager (leaving it removes the spill files, after an error too);
    :meth:`finish` writes the files. ``outcomes`` counts the written ``fetched`` rows by outcome,
    ``warc_names`` holds the WARC files they name (``warc_filename``), ``spills`` counts the spills
    made, ``seconds`` the time spent spilling and writing.
    """

    def __init__(self, crawl: CrawlDir, round: int, shard: int, buckets: int) -> None:
        self.crawl = crawl
        self.round = round
        self.shard = shard
        self.buckets = buckets
        self.outcomes: Counter[str] = Counter()
        self.warc_names: set[str | None] = set()
        self.spills = 0
        self.seconds = 0.0
        self._spill_files: dict[str, SpillFile] = {}
        self._token = uuid.uuid4().hex

    def __enter__(self) -> FactFiles:
        return self

    def __exit__(self, *exc: Any) -> None:
        files, self._spill_files = self._spill_files, {}
        for f in files.values():
            f.discard()

    def spill(self, rows: ShardRun) -> None:
        """Append ``rows``' ``fetched``, ``links`` and ``edges`` rows to the spill files and empty
        their lists. Call from one thread at a time."""
        started = time.monotonic()
        for name, table in self._tables(rows):
            spill = self._spill_files.get(name)
            if spill is None:
                rel = paths.spill_file(name, self.round, self.shard, self._token)
                spill = self._spill_files[name] = SpillFile(self.crawl, name, rel)
            ids = self._bucket_ids(name, table)
            spill.append(table.pop(), ids)
        self.spills += 1
        self.seconds += time.monotonic() - started

    def finish(self, rows: ShardRun) -> tuple[Partitioned, Partitioned, Partitioned]:
        """Write the round's files from the spills and the last ``rows`` (emptied): one row group
        per non-empty bucket (:mod:`batchcrawl.store.shuffle`); uncommitted. Returns their
        :class:`Partitioned` indexes, ``fetched``, ``links``, ``edges``."""
        if self._spill_files:
            self.spill(rows)
        started = time.monotonic()
        out = {}
        if self._spill_files:
            for name in FACT_KEYS:
                rel = paths.round_file(name, self.round, self.shard)
                out[name] = self._spill_files[name].merge_into(rel)
        else:
            for name, table in self._tables(rows):
                rel = paths.round_file(name, self.round, self.shard)
                ids = self._bucket_ids(name, table)
                out[name] = write_partitioned(self.crawl, name, rel, table.pop(), ids)
        self.seconds += time.monotonic() - started
        return out["fetched"], out["links"], out["edges"]

    def _tables(self, rows: ShardRun) -> Iterator[tuple[str, list[pa.Table]]]:
        """``(name, [table])`` for each fact table, one at a time, each built from ``rows`` just
        before it is yielded and its Python rows dropped (the Python rows, their Arrow table and
        its bucket-sorted copy of one table are the peak); the consumer pops the table out of the
        list, so that the sorted copy replaces it instead of joining it. No local name holds a
        table's Python rows across the ``yield``."""
        self.outcomes.update(row["outcome"] for row in rows.fetched)
        self.warc_names.update(row.get("warc_filename") for row in rows.fetched)
        for name, (to_arrow, emptied) in _HELD_AS.items():
            table = [to_arrow(getattr(rows, name), schema=schemas.schema(name))]
            setattr(rows, name, emptied(getattr(rows, name)))
            yield name, table

    def _bucket_ids(self, name: str, table: list[pa.Table]) -> Any:
        return bucket_ids(table[0].column(FACT_KEYS[name]).to_numpy(), self.buckets)
