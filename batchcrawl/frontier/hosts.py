"""The ``hosts`` table as delta runs: each round writes only the hosts it touched (docs/design.md §4).

Like a frontier bucket (:mod:`batchcrawl.frontier.runs`, an LSM tree: O'Neil et al. 1996), the
``hosts`` listing of a manifest is a few **base** files followed by **runs** in commit order: every
shard writes one run per round, ``hosts/gen=G/shard=SS.run.parquet``, holding the rows of the hosts
its fetch touched (a manifest entry with ``bucket`` = the shard and ``run`` set). Readers merge
newest-wins by ``host``: the row of the file listed last. Listings written before runs existed
(one full snapshot per shard, no ``run``) read as bases. Once the listing holds
``frontier.max_runs`` runs per shard, :func:`compact` merges everything into one new base,
``hosts/gen=G/hosts.parquet``; like every write it only creates a file, and ``gc`` drops the
superseded ones once no kept manifest names them.

Readers: the shard actors' restore (:func:`read_hosts`, :class:`RecentHostRows`), generate's
``partition_by = "ip"``, and the SQL ``hosts`` view (:func:`batchcrawl.store.views.view_body`,
newest wins by ``host``), from which ``status`` and ``report`` read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.config import Config
from batchcrawl.store import paths, schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry

KEY = "host"


def newest_by_host(tables: Sequence[pa.Table]) -> pa.Table:
    """Merge ``hosts`` tables, oldest first: one row per ``host``, from the newest table (and,
    within a table, the last row) holding it, sorted by host."""
    tables = [t for t in tables if t.num_rows] or list(tables[:1])
    if not tables:
        return schemas.empty("hosts")
    both = pa.concat_tables(tables, promote_options="default")
    if both.num_rows == 0:
        return both
    enc = pc.dictionary_encode(both.column(KEY)).combine_chunks()
    codes = np.asarray(enc.indices.to_numpy(), dtype=np.int64)
    _, first_rev = np.unique(codes[::-1], return_index=True)
    last = len(codes) - 1 - first_rev
    return both.take(pa.array(np.sort(last))).sort_by([(KEY, "ascending")])


def read_hosts(
    crawl: CrawlDir, entries: Iterable[FileEntry | str], columns: list[str] | None = None
) -> pa.Table:
    """The merged ``hosts`` rows of a listing (entries or paths in manifest order: newest wins by
    ``host``), sorted by host. ``columns`` projects (``host`` is always read)."""
    cols = None if columns is None else list(dict.fromkeys([KEY, *columns]))
    parts = [crawl.read_table("hosts", [e], cols) for e in entries]
    merged = newest_by_host(parts) if parts else crawl.read_table("hosts", [], cols)
    return merged if columns is None else merged.select(columns)


def read_hosts_of(
    crawl: CrawlDir, entries: Iterable[FileEntry | str], hosts: Collection[str]
) -> list[dict[str, Any]]:
    """The merged rows (as :func:`read_hosts`: newest wins) of ``hosts`` only, read one Parquet
    row group at a time: memory holds the wanted rows and one row group, not the table."""
    wanted = pa.array(sorted(hosts), pa.string())
    parts = []
    for group in crawl.iter_row_groups("hosts", entries):
        parts.append(group.filter(pc.is_in(group.column(KEY), value_set=wanted)))
        del group
    return newest_by_host(parts).to_pylist() if parts else []


class RecentHostRows:
    """The last ``hosts`` row of the hosts a shard actor wrote most recently, at most ``limit``
    of them (least recently written dropped first), for its worker's forgotten hosts that return.

    A row holds the host's robots.txt text, so keeping every host's row for the actor's life grows
    with the crawl. A returning host whose row was dropped is read back from the committed
    ``hosts`` listing (:func:`read_hosts_of`), which holds it: the rows of the latest
    :meth:`wrote` are never dropped, however many, and a row written before them was committed
    before the round that needs it started (a pipelined round is selected from the generation
    committed before the round just fetched, docs/design.md §7).

    Parameters
    ----------
    limit
        Rows kept (``fetch.max_kept_host_rows``), at least 1.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.dropped = 0  # rows dropped so far: until then a host not held has no row anywhere
        self._rows: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rows)

    def load(self, rows: Iterable[dict[str, Any]]) -> None:
        """Hold committed ``rows`` (an actor's start: its hosts of the ``hosts`` table)."""
        for row in rows:
            self._put(row)
        self._trim(self.limit)

    def wrote(self, rows: Sequence[dict[str, Any]]) -> None:
        """Hold the ``rows`` a round just wrote (maybe uncommitted: all are kept)."""
        for row in rows:
            self._put(row)
        self._trim(max(self.limit, len(rows)))

    def rows_for(
        self, hosts: Collection[str], crawl: CrawlDir, entries: Sequence[FileEntry | str]
    ) -> tuple[list[dict[str, Any]], int]:
        """The last rows of those of ``hosts`` that have one, and how many of them were read back
        from the committed ``hosts`` listing ``entries`` (only once rows have been dropped)."""
        found = [self._rows[h] for h in hosts if h in self._rows]
        missing = [h for h in hosts if h not in self._rows]
        if not missing or not self.dropped:
            return found, 0
        read = read_hosts_of(crawl, entries, missing)
        return found + read, len(read)

    def _put(self, row: dict[str, Any]) -> None:
        self._rows[row[KEY]] = row
        self._rows.move_to_end(row[KEY])

    def _trim(self, keep: int) -> None:
        while len(self._rows) > keep:
            self._rows.popitem(last=False)
            self.dropped += 1


def write_run(
    crawl: CrawlDir, generation: int, shard: int, rows: pa.Table | list[Mapping[str, Any]]
) -> FileEntry | None:
    """Write one shard's run of ``generation``: the rows of the hosts its round touched (any
    order). No rows: nothing is written (None)."""
    table = schemas.conform("hosts", rows)
    if table.num_rows == 0:
        return None
    table = table.sort_by([(KEY, "ascending")])
    entry = crawl.write_table("hosts", paths.hosts_run(generation, shard), table)
    return FileEntry(entry.path, entry.rows, bucket=shard, run=True)


def listing(old: Iterable[FileEntry], new_runs: Iterable[FileEntry | None]) -> list[FileEntry]:
    """The next ``hosts`` listing: the parent's entries, then this round's runs (newest last)."""
    return [*old, *(e for e in new_runs if e is not None)]


def needs_compaction(entries: Sequence[FileEntry], cfg: Config) -> bool:
    """Whether a listing holds ``frontier.max_runs`` runs per shard (``fetch.shards``) or more."""
    runs = sum(1 for e in entries if e.run)
    return runs > 0 and runs >= cfg.frontier.max_runs * max(1, cfg.fetch.shards)


def compact(crawl: CrawlDir, entries: Sequence[FileEntry], generation: int) -> list[FileEntry]:
    """Merge a whole listing into one base ``hosts/gen=G/hosts.parquet`` (uncommitted): the new
    listing. Memory: the hosts table (one row per host, far smaller than the frontier)."""
    merged = read_hosts(crawl, entries)
    return [crawl.write_table("hosts", paths.hosts_base(generation), merged)]


def next_listing(
    crawl: CrawlDir,
    old: Sequence[FileEntry],
    new_runs: Iterable[FileEntry | None],
    generation: int,
    cfg: Config,
) -> list[FileEntry]:
    """The ``hosts`` listing a round commits: :func:`listing`, compacted (:func:`compact`) when
    :func:`needs_compaction`."""
    out = listing(old, new_runs)
    return compact(crawl, out, generation) if needs_compaction(out, cfg) else out
