"""Selection, the one stage that picks the URLs to fetch for every mode (Nutch's ``Generator``;
IRLbot's budgets; BUbiNG's virtualizer for streams; docs/design.md §5, §7a).

:func:`select` reads the due URLs of the buckets asked for (all of them for a round, the changed
ones for a stream), leaves out the URLs **leased** (in flight: a pipelined round's fetch lists, a
stream's handed-out URLs), applies the per-host/domain/round caps (STAR budgets and BEAST delays
with ``generate.budget = "star"``), the round's fit to its time limit, the re-filter and the trap
throttle, and counts every URL not selected by reason. A round writes the result as fetch lists
(:func:`write_fetchlists`); a stream hands it to its shard actors in memory
(:func:`batchcrawl.frontier.generate.assign_fetchlists`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from batchcrawl.config import Config
from batchcrawl.frontier import generate as gen_mod
from batchcrawl.frontier.budget import DomainBudgets
from batchcrawl.frontier.runs import Mapper
from batchcrawl.store.crawldir import CrawlDir, Manifest


@dataclass
class Selection:
    """The URLs a round or a stream top-up fetches, and what was left out.

    Attributes
    ----------
    round
        The round (or micro-batch) selected for.
    selected
        Fetch-item rows (:func:`batchcrawl.store.schemas.fetch_item_columns` and more) in
        breadth-first order.
    counts
        URLs not selected, by reason (the summary's ``not_selected``).
    rows
        Frontier rows of the buckets read.
    delayed
        BEAST's ``(url_key, delay_s)`` of URLs over their domain's STAR budget.
    refiltered
        ``(url_key, reason)`` of URLs the filters reject now.
    refilter_urls
        Whether the filters were re-applied.
    started_at
        Wall-clock epoch seconds of the selection (``now`` of the update that follows).
    span
        Monotonic start and end of the selection.
    cfg
        The configuration it was selected under.
    """

    round: int
    selected: pa.Table = field(repr=False)
    counts: Counter
    rows: int
    delayed: pa.Table = field(repr=False)
    refiltered: pa.Table = field(repr=False)
    refilter_urls: bool
    started_at: float
    span: tuple[float, float]
    cfg: Config = field(repr=False)

    @property
    def keys(self) -> np.ndarray:
        """uint64 url keys this selection leases while in flight: selected or BEAST-delayed
        (refiltered URLs leave the selection and are merged with its round)."""
        return np.concatenate([
            np.asarray(self.selected.column("url_key").to_numpy(), dtype=np.uint64),
            np.asarray(self.delayed.column("url_key").to_numpy(), dtype=np.uint64),
        ])  # fmt: skip

    def summary(self) -> dict:
        """The ``generate`` summary (:func:`batchcrawl.frontier.generate.selection_summary`)."""
        return gen_mod.selection_summary(self.round, self.cfg, self.selected.num_rows,
                                         self.counts, self.rows, self.refilter_urls,
                                         self.delayed)  # fmt: skip


def select(
    crawl: CrawlDir,
    manifest: Manifest,
    rnd: int,
    cfg: Config,
    now: float,
    *,
    mapper: Mapper,
    leased: np.ndarray | None = None,
    buckets: Iterable[int] | None = None,
    fit: tuple[int, int] | None = None,
    held: Mapping[str, int] | None = None,
    refilter_urls: bool | None = None,
    budgets: DomainBudgets | None = None,
) -> Selection:
    """Select round ``rnd``'s URLs from the committed generation ``manifest`` (see the module doc).

    Parameters
    ----------
    crawl, manifest
        The crawl and the generation read.
    rnd
        The round or micro-batch selected for.
    cfg
        ``[generate]``, ``[dedup]`` (trap throttle), ``[filters]``, ``[fetch]``.
    now
        Wall clock, epoch seconds (what is due).
    mapper
        Runs the per-bucket selections (Dask tasks, or threads in tests).
    leased
        uint64 url keys in flight, left out before the caps (counted ``leased``).
    buckets
        Bucket ids to read (a stream's changed buckets); None: all.
    fit
        ``(n, min_per_host)`` of :func:`~batchcrawl.frontier.generate.fair_share` (counted
        ``capped_time``).
    held
        URLs per host in flight, counted against the trap throttle's cap (a stream's leases).
    refilter_urls
        Re-apply the filters; None: when the ``[filters]`` fingerprint differs from the one
        ``manifest`` recorded.
    budgets
        :func:`~batchcrawl.frontier.generate.domain_budgets` of ``manifest``, if already read.

    Returns
    -------
    Selection
        Nothing is written.
    """
    t0 = time.monotonic()
    selected, counts, rows, delayed = gen_mod.select(
        crawl, manifest, rnd, cfg, now, mapper=mapper, leased=leased, fit=fit, buckets=buckets,
        budgets=budgets,
    )  # fmt: skip
    selected, refiltered, refiltered_now = gen_mod.narrow(
        crawl, manifest, cfg, selected, counts, refilter_urls=refilter_urls, held=held
    )
    return Selection(rnd, selected, counts, rows, delayed, refiltered, refiltered_now, now,
                     (t0, time.monotonic()), cfg)  # fmt: skip


def write_fetchlists(crawl: CrawlDir, manifest: Manifest, sel: Selection) -> gen_mod.GenerateResult:
    """Write ``sel`` as one fetch list per shard (uncommitted; a round commits them with its
    update, which is how a round's leases are recorded)."""
    return gen_mod.write_fetchlists(
        crawl, manifest, sel.round, sel.cfg, sel.selected, sel.counts, sel.rows,
        refiltered=sel.refiltered, refilter_urls=sel.refilter_urls, delayed=sel.delayed,
    )  # fmt: skip
