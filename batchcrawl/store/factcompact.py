"""Fact-file compaction: the small per-round files of ``fetchlists``, ``fetched``, ``links`` and
``edges`` merged into larger ones as part of a commit (docs/design.md §3, "Fact compaction";
Nutch's ``mergesegs``, Iceberg's and Delta's small-file compaction).

A round writes one file per table per shard (a stream, per checkpoint; fetch lists per round), so without merging the number of
files (and of entries a generation names, and of files a SQL view opens) grows with the
checkpoints. Here, size-tiered (as LSM trees compact, and Cassandra's size-tiered strategy): a
file is *due* when it holds fewer than ``store.compact_facts_target_rows`` rows and its newest
round is at least ``store.compact_facts_min_age_rounds`` rounds old. Once
``store.compact_facts_min_files`` due files share a tier (a round's own file is tier 0, a merge
of tier-``t`` files is tier ``t + 1``), they are merged, in listing order, into files of at most
the target rows (:func:`batchcrawl.store.paths.compacted_file`, named by their first and last
round). Rows keep their ``round`` column, so a reader of one round filters by it
(:func:`read_round`). Each row is rewritten once per tier: O(log) times.

Crash safety is the commit's: the merged files get new names and are written (whole or absent,
:func:`batchcrawl.store.atomic.open_whole`) before the commit that lists them instead of their
sources; a crash before it leaves orphans for ``gc``, and the sources stay in the committed
generation, which is never touched. The sources are deleted by retention once no kept generation
names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchcrawl.store import paths, schemas
from batchcrawl.store.crawldir import TABLE_PARQUET_OPTIONS, CrawlDir, FileEntry

#: Rows buffered before a merged file's next row group is written (bounds the memory of a merge).
ROW_GROUP_ROWS = 65_536


@dataclass(frozen=True)
class FactCompaction:
    """When fact files are merged (config ``[store]``): at least ``min_files`` due files of one
    tier, each with fewer than ``target_rows`` rows and rounds ``min_age_rounds`` old or older."""

    min_files: int = 64
    target_rows: int = 1_000_000
    min_age_rounds: int = 4


def due_groups(
    entries: Sequence[FileEntry], current_round: int, policy: FactCompaction
) -> list[list[int]]:
    """Positions in ``entries`` (a fact table's listing) of the files to merge, one list per
    tier with at least ``policy.min_files`` due files, each in listing order."""
    by_tier: dict[int, list[int]] = {}
    for i, e in enumerate(entries):
        rounds = paths.fact_rounds(e.path)
        if rounds is None or e.rows >= policy.target_rows:
            continue
        if current_round - rounds[1] < policy.min_age_rounds:
            continue
        by_tier.setdefault(rounds[2], []).append(i)
    return [ix for _, ix in sorted(by_tier.items()) if len(ix) >= policy.min_files]


def compact_listing(
    crawl: CrawlDir,
    table: str,
    entries: Sequence[FileEntry],
    current_round: int,
    generation: int,
    policy: FactCompaction,
) -> tuple[list[FileEntry], int]:
    """The listing of ``table`` after merging its due files (written now, under new names,
    for the commit of ``generation``), and the number of files merged (0: ``entries`` as is).
    The merged files take the place of the first file of their group, so the listing's head
    stays as it was (its file lists are shared with the parent's).

    Raises
    ------
    CrawlDirError
        A source file is missing or damaged (nothing is committed).
    OSError
        A merged file could not be written.
    """
    if table not in paths.COMPACTED_TABLES:
        raise ValueError(f"{table!r} is not a compacted fact table")
    groups = due_groups(entries, current_round, policy)
    if not groups:
        return list(entries), 0
    replaced: dict[int, list[FileEntry]] = {}
    dropped: set[int] = set()
    part = 0
    for group in groups:
        outputs: list[FileEntry] = []
        for chunk in _chunks([entries[i] for i in group], policy.target_rows):
            outputs.append(_merge(crawl, table, chunk, generation, part))
            part += 1
        replaced[group[0]] = outputs
        dropped.update(group)
    out: list[FileEntry] = []
    for i, e in enumerate(entries):
        if i in replaced:
            out.extend(replaced[i])
        elif i not in dropped:
            out.append(e)
    return out, len(dropped)


def _chunks(files: list[FileEntry], target_rows: int) -> list[list[FileEntry]]:
    """``files`` cut, in order, into runs of at most ``target_rows`` rows (a larger file alone)."""
    out: list[list[FileEntry]] = [[]]
    rows = 0
    for e in files:
        if out[-1] and rows + e.rows > target_rows:
            out.append([])
            rows = 0
        out[-1].append(e)
        rows += e.rows
    return out


def _merge(
    crawl: CrawlDir, table: str, files: list[FileEntry], generation: int, part: int
) -> FileEntry:
    """Write the rows of ``files`` (in order) as one merged file; returns its entry."""
    spans = [paths.fact_rounds(e.path) for e in files]
    first = min(s[0] for s in spans if s is not None)
    last = max(s[1] for s in spans if s is not None)
    tier = 1 + max(s[2] for s in spans if s is not None)
    rel = paths.compacted_file(table, first, last, tier, generation, part)
    schema = schemas.schema(table)
    rows = 0
    with crawl.open_output(rel) as fh:
        writer = pq.ParquetWriter(fh, schema, **TABLE_PARQUET_OPTIONS)
        try:
            buffered: list[pa.Table] = []
            held = 0
            for batch in crawl.iter_row_groups(table, files, columns=schema.names):
                buffered.append(batch)
                held += batch.num_rows
                if held >= ROW_GROUP_ROWS:
                    writer.write_table(schemas.conform(table, pa.concat_tables(buffered)))
                    rows, buffered, held = rows + held, [], 0
            if buffered or rows == 0:
                data = pa.concat_tables(buffered) if buffered else schema.empty_table()
                writer.write_table(schemas.conform(table, data))
                rows += held
        finally:
            writer.close()
    return FileEntry(rel, rows)


def round_entries(entries: Sequence[FileEntry]) -> dict[int, list[FileEntry]]:
    """``{round: entries}`` of a fact table's listing: a round's own files under their round, a
    merged file under every round it spans (read it with :func:`read_round`). Entries that are
    no fact file of a round are left out."""
    out: dict[int, list[FileEntry]] = {}
    for e in entries:
        rounds = paths.fact_rounds(e.path)
        if rounds is None:
            continue
        for r in range(rounds[0], rounds[1] + 1):
            out.setdefault(r, []).append(e)
    return out


def is_merged(entry: FileEntry) -> bool:
    """True for a merged fact file (rows of several rounds)."""
    return paths.COMPACTED_RE.match(entry.path) is not None


def read_round(
    crawl: CrawlDir, table: str, entries: Sequence[FileEntry], rnd: int,
    columns: list[str] | None = None,
) -> pa.Table:  # fmt: skip
    """The rows of round ``rnd`` in ``entries`` (its own files, or merged files spanning it:
    filtered by their ``round`` column), ``columns`` as in :meth:`CrawlDir.read_table`."""
    parts = []
    for e in entries:
        if not is_merged(e):
            parts.append(crawl.read_table(table, [e], columns))
            continue
        cols = None if columns is None else list(dict.fromkeys([*columns, "round"]))
        data = crawl.read_table(table, [e], cols)
        data = data.filter(pc.equal(data.column("round"), rnd))
        parts.append(data if columns is None else data.select(columns))
    if not parts:
        return crawl.read_table(table, [], columns)
    return pa.concat_tables(parts, promote_options="default")
