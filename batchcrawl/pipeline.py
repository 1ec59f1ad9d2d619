"""Pipelined rounds for ``batchcrawl crawl`` (``round.pipeline = true``; docs/design.md §8): the
fetch of round N+1 overlaps the update, compaction and commit of round N, as Nutch fetches one
generated segment while the CrawlDb is updated with another (``generate.update.crawldb``,
``-maxNumSegments``)::

    fetch N ───────────────┐ fetch N+1 ─────────────────────┐ fetch N+2 ...
      pre-select N+1 ┘      update, compact, commit N;  pre-select N+2

* **pre-select** -- right after round N's fetch lists are handed to the shard actors, round N+1 is
  selected from the last committed generation (round N-1's), leaving out every URL round N leases
  (its fetch lists, refiltered and BEAST-delayed URLs: ``leased`` of
  :func:`batchcrawl.frontier.generate.select`, the same lease filter a stream uses), and its fetch
  lists are written (uncommitted).
* **hand-out** -- as soon as round N's fetch step returns, round N+1's lists go to the actors
  (futures); the driver then updates, compacts and commits round N while they fetch. Round N+1's
  update runs after commit N: it merges into generation N. Links found in round N become due in
  generation N and are fetched in round N+2 (one round of lag).
* **fallback** -- a pre-selection whose hosts could keep fewer than ``round.pipeline_min_busy_share``
  of the fetch threads busy (``fetch.threads`` x ``fetch.shards``; one host keeps one thread) is
  dropped before anything is written: the driver waits for commit N and generates round N+1 from
  it (the sequential path). The round after the seed round always falls back (generation 0 minus
  the seeds is empty).
* **split** -- a round generated on the sequential path keeps for itself the first half of each
  host's URLs in breadth-first order when the other halves pass the same rule; they stay due, and
  are the next round's pre-selection, so the pipeline (re)starts (Nutch's ``-maxNumSegments 2``).

Safety (docs/design.md §3): the writer lock is held for the whole run; rounds commit in order, each
the next generation. A crash leaves the last committed generation whole and at most two rounds of
orphan files (N and the pre-selected N+1): the rerun finds both
(the one crash-rerun rule, :func:`batchcrawl.engine.rerun.crash_rerun`), redoes round N with a full
politeness delay for the hosts of both, overwrites what it writes again (the same paths), and
``gc`` deletes the rest (``paths.LAYOUT``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.config import Config
from batchcrawl.console.nothing_due import nothing_due
from batchcrawl.engine.reload import ConfigReload, politeness_reloaded
from batchcrawl.engine.rerun import crash_rerun
from batchcrawl.engine.select import Selection, select, write_fetchlists
from batchcrawl.frontier import generate as gen_mod
from batchcrawl.store.crawldir import CrawlDir, Manifest
from batchcrawl.store.lock import WriterLock

log = logging.getLogger(__name__)

#: ``generate`` summary counter of the URLs a split left for the next round.
DEFERRED = "pipeline_next"


@dataclass(frozen=True)
class Deadline:
    """The end of a run of rounds (``crawl --max-seconds``), seconds on the monotonic clock
    (``inf`` without one): no round starts in its last second, and each round's fetch ends by it."""

    at: float

    @classmethod
    def after(cls, seconds: float | None) -> Deadline:
        """``seconds`` from now; None: never."""
        return cls(time.monotonic() + (seconds if seconds is not None else math.inf))

    def left(self) -> float:
        """Seconds to the deadline (``inf`` without one)."""
        return self.at - time.monotonic()

    def unix(self) -> float | None:
        """The deadline as wall-clock epoch seconds (what another process on any host of the
        cluster can compare with ``time.time()``), or None without one."""
        left = self.left()
        return None if math.isinf(left) else time.time() + left

    def allows_a_round(self) -> bool:
        """More than a second is left."""
        return self.left() > 1.0

    def round_cfg(self, cfg: Config) -> Config:
        """``cfg`` with ``fetch.time_limit_s`` lowered to the time left (at least 1 s)."""
        left = self.left()
        return cfg if left >= cfg.fetch.time_limit_s else cfg.replace(
            fetch={"time_limit_s": max(1.0, left)})  # fmt: skip


def min_hosts(cfg: Config) -> int:
    """Fewest hosts a pipelined round's fetch list needs: ``round.pipeline_min_busy_share`` of the
    fetch threads (``fetch.threads`` x ``fetch.shards``), at least 1."""
    threads = cfg.fetch.threads * cfg.fetch.shards
    return max(1, math.ceil(cfg.round.pipeline_min_busy_share * threads))


def host_count(selected: pa.Table) -> int:
    """Distinct hosts of a selection."""
    return int(pc.count_distinct(selected.column("host")).as_py()) if selected.num_rows else 0


@dataclass
class Planned:
    """A generated round not yet committed: its fetch lists (written, uncommitted) and what its
    update needs.

    Attributes
    ----------
    round, generation
        The round, and the generation its commit publishes.
    base
        The committed generation it was selected from (in a pipelined crawl, the one before the
        generation its update merges into).
    started_at
        Wall-clock epoch seconds of its selection (``now`` of its update).
    generated
        Generate's result (fetch lists, summary, refiltered and delayed URLs).
    keys
        uint64 url keys it leases while in flight: selected, refiltered or BEAST-delayed (the
        next round selected from ``base`` leaves them out).
    generate_span
        Monotonic start and end of its selection.
    cold
        Its fetch cools every host down first (a rerun after a crash).
    fetch_t0, fetch_t1
        Monotonic start and end of its fetch step (set by the round driver).
    """

    round: int
    generation: int
    base: Manifest
    started_at: float
    generated: gen_mod.GenerateResult
    keys: np.ndarray = field(repr=False)
    generate_span: tuple[float, float]
    cold: bool = False
    fetch_t0: float = 0.0
    fetch_t1: float = 0.0

    @property
    def generate_s(self) -> float:
        """Seconds its selection and fetch-list writing took."""
        return self.generate_span[1] - self.generate_span[0]


def plan_round(crawl: CrawlDir, base: Manifest, generation: int, sel: Selection) -> Planned:
    """Write ``sel``'s fetch lists (:func:`batchcrawl.engine.select.write_fetchlists`; ``sel``
    selected from ``base``) as the round committing ``generation``; nothing is committed."""
    generated = write_fetchlists(crawl, base, sel)
    return Planned(sel.round, generation, base, sel.started_at, generated, sel.keys,
                   (sel.span[0], time.monotonic()))  # fmt: skip


def run_pipelined(
    crawler: Any,
    cfg: Config,
    rounds: int,
    *,
    progress: Callable[[dict[str, Any]], None] | None = None,
    on_round: Callable[[dict[str, Any]], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    now: Callable[[], float] = time.time,
    max_seconds: float | None = None,
    reload: ConfigReload | None = None,
) -> list[dict[str, Any]]:
    """Run up to ``rounds`` pipelined rounds under one writer lock (see the module doc).

    Parameters
    ----------
    crawler
        The :class:`batchcrawl.round.Crawler` (Dask client, shard actors, the round's steps).
    cfg
        The configuration (``round.pipeline_min_busy_share``; ``fetch.time_limit_s`` per round).
    rounds
        Most rounds to commit; no round beyond is selected.
    progress, on_round
        As :func:`batchcrawl.round.run_rounds`.
    on_step
        Called with ``"generate"`` (a round on the sequential path), ``"preselect"`` (round N+1
        while round N fetches), ``"fetch"`` (a round's lists handed out), ``"update"``,
        ``"compact"``, ``"commit"``; tests crash the run at these points.
    now
        Wall clock, epoch seconds.
    max_seconds
        Select no round after this many seconds; each round's fetch ends by then
        (``fetch.time_limit_s`` lowered to the time left, at least 1 s).
    reload
        Reads the configuration again; its ``[politeness]`` is taken up by each round selected
        after the first (:mod:`batchcrawl.engine.reload`).

    Returns
    -------
    list of dict
        The rounds' summaries, in commit order (``pipelined``: its update merged into a newer
        generation than it was selected from; ``step_spans_s``: when each step ran).

    Raises
    ------
    NothingDue
        The first round has nothing due (nothing is written).
    """
    on_step = on_step or (lambda step: None)
    on_round = on_round or (lambda summary: None)
    deadline = Deadline.after(max_seconds)
    crawler.deadline = deadline
    crawl = CrawlDir.open(crawler.crawl_url)
    summaries: list[dict[str, Any]] = []
    with WriterLock(crawl, owner="batchcrawl crawl") as lock:
        manifest = crawl.manifest()
        rerun = crash_rerun(crawl, manifest.round + 1, "batchcrawl crawl")
        crawler.start_actors(cfg)
        plan = _generate(crawler, crawl, manifest, cfg, now, on_step, split=rounds > 1, first=True)
        plan.cold = rerun.cold
        on_step("fetch")
        rcfg = deadline.round_cfg(cfg)
        pending = crawler.start_fetch(crawl, plan, rcfg, cold=rerun.cold,
                                      cool_hosts=rerun.cool_hosts)  # fmt: skip
        while True:
            cfg = politeness_reloaded(cfg, reload)
            nxt = None
            if len(summaries) + 2 <= rounds and deadline.allows_a_round():
                on_step("preselect")
                nxt = _preselect(crawler, crawl, manifest, plan, cfg, now)
            results = crawler.wait_fetch(plan, pending, rcfg, progress, lock)
            if nxt is not None:
                on_step("fetch")
                rcfg = deadline.round_cfg(cfg)
                next_pending = crawler.start_fetch(crawl, nxt, rcfg, cold=False)
            summary = crawler.finish_round(crawl, lock, manifest, plan, results, cfg, on_step,
                                           plan.generate_span[0])  # fmt: skip
            manifest = crawl.manifest()
            summaries.append(summary)
            on_round(summary)
            if nxt is not None:
                plan, pending = nxt, next_pending
                continue
            if len(summaries) >= rounds or not deadline.allows_a_round():
                break
            plan = _generate(crawler, crawl, manifest, cfg, now, on_step,
                             split=len(summaries) + 1 < rounds, first=False)  # fmt: skip
            if plan is None:
                break
            on_step("fetch")
            rcfg = deadline.round_cfg(cfg)
            pending = crawler.start_fetch(crawl, plan, rcfg, cold=False)
    return summaries


def _generate(
    crawler: Any, crawl: CrawlDir, manifest: Manifest, cfg: Config,
    now: Callable[[], float], on_step: Callable[[str], None], *, split: bool, first: bool,
) -> Planned | None:  # fmt: skip
    """The sequential path: round ``manifest.round + 1`` generated from ``manifest``; with
    ``split``, the first half of each host's URLs when the rest passes :func:`min_hosts`. None
    when nothing is due, or :class:`NothingDue` raised if this is the ``first`` round."""
    on_step("generate")
    sel = select(crawl, manifest, manifest.round + 1, cfg, now(), mapper=crawler.mapper(cfg))
    if sel.selected.num_rows == 0:  # write nothing: no fetch lists, no commit
        if first:
            raise nothing_due(crawl, manifest, sel.started_at)
        return None
    if split:
        head, rest = gen_mod.split_per_host(sel.selected)
        if host_count(rest) >= min_hosts(cfg):
            sel.selected = head
            sel.counts[DEFERRED] += rest.num_rows
    return plan_round(crawl, manifest, manifest.generation + 1, sel)


def _preselect(
    crawler: Any, crawl: CrawlDir, manifest: Manifest, plan: Planned, cfg: Config,
    now: Callable[[], float],
) -> Planned | None:  # fmt: skip
    """Round ``plan.round + 1`` selected from ``manifest`` (``plan``'s base) without ``plan``'s
    URLs, its fetch lists written; None (nothing written) when its hosts are fewer than
    :func:`min_hosts`."""
    rnd = plan.round + 1
    sel = select(crawl, manifest, rnd, cfg, now(), mapper=crawler.mapper(cfg), leased=plan.keys)
    hosts = host_count(sel.selected)
    if hosts < min_hosts(cfg):
        log.info("round %d: %d hosts pre-selected, fewer than %d: generated after round %d "
                 "commits", rnd, hosts, min_hosts(cfg), plan.round)  # fmt: skip
        return None
    return plan_round(crawl, manifest, plan.generation + 1, sel)
