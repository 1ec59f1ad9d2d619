"""Merge-and-commit, the one stage that publishes a round's or a stream micro-batch's work
(Nutch's ``updatedb`` + the commit of docs/design.md §3, §7, §8): the shards' fact files merged
into the frontier, content-seen and in-degree tables (:func:`batchcrawl.frontier.updatedb.updatedb`),
compaction of the buckets whose runs grew, the typed summary, and the commit of the next
generation's listing under the writer lock (the crawl directory runs its after-commit hooks:
``crawl.duckdb``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from batchcrawl.config import Config
from batchcrawl.engine.cluster import compact_buckets
from batchcrawl.engine.report import ShardReport
from batchcrawl.engine.summary import compacted_count, round_summary
from batchcrawl.frontier import hosts as host_runs
from batchcrawl.frontier import runs
from batchcrawl.frontier.runs import BucketFiles
from batchcrawl.frontier.updatedb import UpdatedbResult, updatedb
from batchcrawl.store import retention
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest
from batchcrawl.store.factcompact import FactCompaction, compact_listing
from batchcrawl.store.lock import WriterLock
from batchcrawl.store.paths import COMPACTED_TABLES


@dataclass
class Work:
    """What one round or micro-batch hands to :func:`merge_and_commit`.

    Attributes
    ----------
    round, generation
        The round (or micro-batch) and the generation its commit publishes.
    reports
        The shards' reports (their files written, uncommitted), in shard order.
    started_at
        Wall-clock epoch seconds the update treats as ``now``.
    gen_summary
        The selection's summary (the round summary's ``generate``).
    refiltered, delayed
        URLs re-filtered and BEAST-delayed by the selection (None: none).
    buckets
        Buckets to update (a stream's touched ones); None: all.
    fetchlists
        The round's fetch lists (its leases), committed with it; a stream writes none.
    rerun_after_crash
        It reran a round that died before its commit.
    steps, spans
        Seconds of the steps before the merge, and their monotonic spans (added to).
    """

    round: int
    generation: int
    reports: list[ShardReport]
    started_at: float
    gen_summary: dict
    refiltered: pa.Table | None = None
    delayed: pa.Table | None = None
    buckets: set[int] | None = None
    fetchlists: list[FileEntry] = field(default_factory=list)
    rerun_after_crash: bool = False
    steps: dict[str, float] = field(default_factory=dict)
    spans: dict[str, tuple[float, float]] = field(default_factory=dict)


@dataclass
class Committed:
    """What :func:`merge_and_commit` published: the new ``manifest``, its ``summary`` (also in the
    manifest), the frontier's bucket files (after compaction) and the merge's result."""

    manifest: Manifest
    summary: dict[str, Any]
    buckets: list[BucketFiles]
    merged: UpdatedbResult


def _nonempty(table: pa.Table | None) -> pa.Table | None:
    return table if table is not None and table.num_rows else None


def merge_and_commit(
    crawl: CrawlDir,
    lock: WriterLock,
    parent: Manifest,
    work: Work,
    cfg: Config,
    *,
    mapper: runs.Mapper,
    on_step: Callable[[str], None],
    t_start: float,
    extra: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
) -> Committed:
    """Merge ``work`` into the generation after ``parent`` (the last committed one) and commit it.

    Parameters
    ----------
    crawl, lock
        The crawl and its writer lock (checked just before the commit).
    parent
        The last committed generation: ``work.generation`` must follow it (rounds commit in order).
    work
        The round's or micro-batch's shard reports and selection results.
    cfg
        The configuration.
    mapper
        Runs the per-bucket update and compaction tasks (Dask, or threads in tests).
    on_step
        Called with ``"update"``, ``"compact"``, ``"commit"`` as each starts (tests crash there).
    t_start
        Monotonic start of the round (its ``elapsed_s``).
    extra
        Called with the summary before the commit; its keys are added to the summary (a driver's
        own fields: a round's idle share, a stream's mode).

    Returns
    -------
    Committed

    Raises
    ------
    AssertionError
        ``work.generation`` does not follow ``parent``.
    LockLost
        The writer lock was lost (nothing is committed).
    """
    rnd, gen = work.round, work.generation
    if parent.generation + 1 != gen:
        raise AssertionError(f"round {rnd} commits generation {gen}, not after "
                             f"{parent.generation}")  # fmt: skip
    steps, spans = work.steps, work.spans
    fparts = [r.fetched for r in work.reports if r.fetched is not None]
    lparts = [r.links for r in work.reports if r.links is not None]
    eparts = [r.edges for r in work.reports if r.edges is not None]
    on_step("update")
    t0 = time.monotonic()
    merged = updatedb(
        crawl, parent, rnd, fparts, lparts, eparts, cfg, work.started_at, mapper=mapper,
        refiltered=_nonempty(work.refiltered), delayed=_nonempty(work.delayed),
        buckets=work.buckets,
    )  # fmt: skip
    updated = merged.frontier
    _timed(steps, spans, "update", t0)
    on_step("compact")
    t0 = time.monotonic()
    compacted = compact_buckets(mapper, crawl.url, updated.buckets, gen, cfg)
    _timed(steps, spans, "compact", t0)
    on_step("commit")
    t0 = time.monotonic()
    summary = round_summary(
        rnd, gen, work.reports, updated.summary.to_json(), work.gen_summary,
        compacted=compacted_count(updated, compacted), rerun_after_crash=work.rerun_after_crash,
        steps=steps, elapsed_s=time.monotonic() - t_start,
    )  # fmt: skip
    summary["content"] = merged.content.to_json()
    summary["indegree"] = merged.indegree.to_json()
    summary["updatedb_s_by_merge"] = merged.seconds
    if extra is not None:
        summary.update(extra(summary))
    buckets = runs.bucket_files(parent)
    for bf in compacted:
        buckets[bf.bucket] = bf
    lock.check()
    manifest = crawl.commit(parent, _listing(crawl, parent, work, merged, buckets, fparts,
                                             lparts, eparts, cfg), summary, round=rnd,
                            warcs_without_rows=[f for r in work.reports
                                                for f in r.warcs_without_rows])  # fmt: skip
    if cfg.gc.auto:  # under the lock, before the next commit: the window's routine expiry
        retention.expire(crawl, cfg.crawl.keep_generations, cfg.gc.keep_seconds)
        retention.remove_orphans(crawl, parent, manifest, lock.started)  # a dead writer's
    _timed(steps, spans, "commit", t0)
    summary["generation"] = manifest.generation
    summary["seconds_by_step"] = {k: round(v, 3) for k, v in steps.items()}
    summary["elapsed_s"] = round(time.monotonic() - t_start, 3)
    return Committed(manifest, summary, buckets, merged)


def _timed(steps: dict[str, float], spans: dict[str, tuple[float, float]], name: str,
           t0: float) -> None:  # fmt: skip
    t1 = time.monotonic()
    steps[name] = t1 - t0
    spans[name] = (t0, t1)


def _listing(
    crawl: CrawlDir, parent: Manifest, work: Work, merged: UpdatedbResult,
    buckets: list[BucketFiles], fparts: Iterable, lparts: Iterable, eparts: Iterable, cfg: Config,
) -> dict[str, list[FileEntry]]:  # fmt: skip
    """The next generation's listing: the frontier's buckets, the hosts runs (compacted when
    due), the fact files (their due small files merged, :mod:`batchcrawl.store.factcompact`)
    and fetch lists appended to the parent's, the content and in-degree listings of the merge."""
    policy = FactCompaction(cfg.store.compact_facts_min_files, cfg.store.compact_facts_target_rows,
                            cfg.store.compact_facts_min_age_rounds)  # fmt: skip

    def appended(table: str, entries: Iterable[FileEntry]) -> list[FileEntry]:
        listing = list(parent.tables.get(table, ())) + list(entries)
        if table not in COMPACTED_TABLES:
            return listing
        return compact_listing(crawl, table, listing, work.round, work.generation, policy)[0]

    text = [entry for r in work.reports for entry in r.text]  # extract.at_fetch
    return {
        **({"text": appended("text", text)} if text else {}),
        "frontier": runs.frontier_listing(buckets),
        "hosts": host_runs.next_listing(crawl, parent.tables.get("hosts", ()),
                                        [r.hosts for r in work.reports], work.generation, cfg),
        "fetchlists": appended("fetchlists", work.fetchlists),
        "fetched": appended("fetched", [p.entry for p in fparts]),
        "links": appended("links", [p.entry for p in lparts]),
        "edges": appended("edges", [p.entry for p in eparts]),
        "content": merged.content.listing,
        "domainlinks": merged.indegree.domainlinks,
        "indegree": merged.indegree.indegree,
    }  # fmt: skip
