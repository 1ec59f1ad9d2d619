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

Readers: the shard actors' restore (:func:`read_hosts`), generate's ``partition_by = "ip"``,
and the SQL ``hosts`` view (:func:`batchcrawl.store.sql.view_sql`, newest wins by ``host``), from
which ``status`` and ``report`` read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
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
