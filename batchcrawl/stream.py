"""``batchcrawl crawl --stream``: fetch workers that never stop, the frontier updated in
micro-batches (docs/design.md §8; BUbiNG's distributor and virtualizer over IRLbot's DRUM).

The batch driver (:mod:`batchcrawl.round`) waits for every shard at the end of each round. Here the
shard actors keep fetching (:meth:`FetchWorker.stream_start`: the fetch threads never join), and
every ``stream.flush_interval_s`` seconds the driver runs one **micro-batch**, numbered as a round:

1. **take** — each shard hands over the rows and links fetched since the last take, written as the
   same partitioned ``fetched``/``links``/``edges`` files a round writes
   (:meth:`~batchcrawl.engine.shard.StreamShardActor.take_batch`), with the url keys it finished
   and how many URLs it still holds;
2. **merge and commit** — the engine's one merge-and-commit
   (:func:`batchcrawl.engine.merge.merge_and_commit`, as a round): only the buckets the
   micro-batch touches get a delta run (cost ∝ micro-batch); a generation (a checkpoint) when the
   micro-batch holds anything;
3. **select** — the engine's one selection (:func:`batchcrawl.engine.select.select`: caps,
   STAR/BEAST, refilter, trap throttle, counted drops), over the buckets that changed or still
   hold due URLs not handed out, excluding the URLs **leased** (handed out, not yet reported; a
   trap host's leases count against its throttle); each shard is topped up to at most
   ``fetch.max_queued_urls`` URLs (BUbiNG's virtualizer: the rest waits in the frontier). With
   ``generate.budget = "star"``, a checkpoint that adds linking domains makes every bucket
   selected again (the budgets grew).

Each micro-batch's summary holds its selections' ``generate`` counts (``not_selected`` by reason,
``beast_delayed``) since the last one; the stream's summary sums them, and gives the
discovery-to-fetch latency of the URLs found and fetched during the stream (``latency_s``: p50,
p95; :mod:`batchcrawl.engine.latency`).

Every checkpoint also holds the ``hosts`` rows of the hosts topped up or fetched since the last one
(politeness clocks, Crawl-delays, robots.txt, trap flags, counters), as a round's commit does: a
restart reloads them and fetches no robots.txt again while its copy is live.

Leases live only in the driver's memory and are never persisted: a crash leaves the leased URLs
queued in the committed frontier, and the next run fetches them again. Requests made after the
last checkpoint were never persisted either, so after a writer that died (it left uncommitted
files or its writer lock: :attr:`WriterLock.took_over`) every host gets a full politeness delay
before its first fetch in the stream (:meth:`FetchWorker.cool_down`, as a batch round does after
a crash). After a clean stop the hosts rows hold every request, and a host's first fetch waits
only for its committed politeness clock.

Every micro-batch with rows is committed (a checkpoint every ``flush_interval_s``): a commit is a
manifest and the DuckDB views (measured in docs/benchmarks.md), and it keeps every file name unique
(delta runs are named by generation). The stream ends when nothing is due and nothing is leased,
after ``max_seconds``, or on SIGINT/SIGTERM; all of them take a last micro-batch, commit it,
release the lock and return the summary.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from batchcrawl.config import Config
from batchcrawl.console.signals import StopRequest, stopping
from batchcrawl.engine import topup
from batchcrawl.engine.cluster import cluster_url, dask_client
from batchcrawl.engine.hostgaps import HostGaps
from batchcrawl.engine.latency import DiscoveryLatency
from batchcrawl.engine.merge import Work, merge_and_commit
from batchcrawl.engine.reload import ConfigReload, politeness_reloaded
from batchcrawl.engine.report import ShardReport
from batchcrawl.engine.rerun import crash_rerun
from batchcrawl.engine.select import select
from batchcrawl.engine.shard import StreamShardActor
from batchcrawl.engine.summary import attempt_counts
from batchcrawl.frontier import generate as gen_mod
from batchcrawl.politeness import policy_of
from batchcrawl.round import Crawler
from batchcrawl.store import schemas, views
from batchcrawl.store.crawldir import STREAM_STEP, CrawlDir
from batchcrawl.store.lock import WriterLock
from batchcrawl.urls import bucket_ids

log = logging.getLogger(__name__)

#: Seconds between two asks whether a shard waits for a micro-batch (``stream.early_flush_s``)
EARLY_POLL_S = 0.25

#: ``not_selected`` reasons after which a selected bucket still holds due URLs not handed out.
_LEFT_DUE = ("capped_host", "capped_domain", "capped_round", "trap_throttled")


class Stream:
    """One streaming crawl: the driver's state between micro-batches (see the module doc).

    Parameters
    ----------
    crawler
        The Dask client and shard actors.
    crawl, lock
        The crawl directory and its held writer lock.
    cfg
        The configuration (``stream``, ``fetch.max_queued_urls``, ``generate`` caps ...).
    stop
        Set by a signal: stop at the next micro-batch.
    clock, now
        Monotonic seconds (intervals) and wall-clock epoch seconds (``next_fetch_time``).
    progress
        Called after each micro-batch with :meth:`snapshot` (the progress display).
    on_step
        Called with ``"take"``, ``"update"``, ``"compact"``, ``"commit"`` as each step of a
        micro-batch with rows starts (tests use it to crash a stream at a known point, as
        ``run_rounds`` does).
    """

    def __init__(self, crawler: Crawler, crawl: CrawlDir, lock: WriterLock, cfg: Config,
                 stop: StopRequest, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], float] = time.time,
                 progress: Callable[[dict[str, Any]], None] | None = None,
                 on_step: Callable[[str], None] | None = None,
                 reload: ConfigReload | None = None) -> None:  # fmt: skip
        self.crawler, self.crawl, self.lock, self.cfg = crawler, crawl, lock, cfg
        self.reload = reload
        self.stop, self.clock, self.now = stop, clock, now
        self.progress = progress or (lambda snap: None)
        self.on_step = on_step or (lambda step: None)
        self.held_max = 0  # most URLs one shard held right after a top-up (the peak)
        self.early = False  # the last flush was early: dry hosts wait with new links
        self._starting: list[Any] = []  # the shard actors' start futures, until awaited
        self.manifest = crawl.manifest()
        self.round = self.manifest.round + 1  # the micro-batch being fetched
        self.rerun = crash_rerun(crawl, self.round, "batchcrawl crawl --stream")
        # requests made since the last commit were never persisted if the last writer died (it
        # left uncommitted files, or its lock): then every host waits a full delay first
        self.cold = self.rerun.cold or lock.took_over is not None
        self.leased: dict[int, str] = {}  # url key -> host, handed out and not reported
        self.held = {s: 0 for s in range(cfg.fetch.shards)}
        self.dirty: set[int] = set(range(self.manifest.buckets))
        self.refiltered: pa.Table | None = None
        self.delayed: list[pa.Table] = []  # BEAST's delays since the last micro-batch
        self.refilter_next = gen_mod.recorded_fingerprint(
            self.manifest.summary
        ) != gen_mod.filters_fingerprint(cfg)
        self.not_selected: Counter = Counter()  # since the last micro-batch
        self.totals: Counter = Counter()
        self.outcomes: Counter = Counter()
        self.seconds: Counter = Counter()
        self.dropped: Counter = Counter()  # not selected, by reason, the whole stream
        self.latency = DiscoveryLatency()
        policy = policy_of(cfg.politeness)
        self.gaps = HostGaps(policy.delay_floor_s)
        self.batch_s: list[float] = []  # each micro-batch's take, merge and commit, seconds
        self.first_round = self.round
        self.commits = 0
        self.content: Counter = Counter()
        self.t_start = clock()
        self._budgets: tuple[int, Any] | None = None  # (generation, DomainBudgets)

    def snapshot(self) -> dict[str, Any]:
        """The stream so far, for :class:`batchcrawl.console.progress.StreamProgress`: ``elapsed_s``,
        ``micro_batch`` (the one being fetched), ``generation``, ``checkpoints``, ``attempts``,
        ``stored``, ``new_urls``, ``outcomes`` (committed micro-batches), ``held`` (URLs queued
        per shard) and ``leased`` (handed out, not reported)."""
        return {
            "elapsed_s": self.clock() - self.t_start,
            "micro_batch": self.round,
            "generation": self.manifest.generation,
            "checkpoints": self.commits,
            **{k: self.totals[k] for k in ("attempts", "stored", "new_urls")},
            "outcomes": dict(self.outcomes),
            "held": dict(self.held),
            "leased": len(self.leased),
        }

    # -- the loop -------------------------------------------------------------------------------
    def run(self, max_seconds: float | None = None) -> dict[str, Any]:
        """Stream until nothing is due and nothing is leased, ``max_seconds`` or a stop signal;
        returns the JSON summary of the whole stream."""
        t_start = self.t_start = self.clock()
        deadline = t_start + max_seconds if max_seconds is not None else float("inf")
        self.crawler.start_actors(self.cfg, StreamShardActor)  # made while the seeds are read
        seeds = self.crawler.seed_scope(self.crawl, self.manifest)
        self.actors = self.crawler.shard_actors(self.cfg, StreamShardActor)
        host_files = self.manifest.files("hosts")
        # the shards load their hosts while the first selection runs (the first top-up waits)
        self._starting = [a.start(cfg=self.cfg, round=self.round, host_files=host_files,
                                  seed_hosts=seeds[0], seed_domains=seeds[1],
                                  content_files=self.manifest.files("content"), cold=self.cold)
                          for a in self.actors.values()]  # fmt: skip
        idle = self.hand_out() == 0 and not self.leased and not self.delayed
        self._started()
        # micro-batches start every flush_interval_s (from one start to the next), not that long
        # after the previous one ended: a URL found waits for one interval, not for the interval
        # plus the merge, commit and selection of the micro-batch before
        started = self.clock()
        cost = 0.0  # seconds the last micro-batch and hand-out took (stream.max_batch_share)
        while not idle:
            if self.wait_for_flush(started, deadline, cost):
                reason = self.stop.signal_name
                break
            if self.clock() >= deadline:
                reason = "max_seconds"
                break
            started = self.clock()
            self.micro_batch(final=False)
            if self.stop.is_set():  # a signal during the micro-batch: no new hand-out, the
                reason = self.stop.signal_name  # final take commits what is still in flight
                break  # (issue 34: a stop took two more checkpoints, 13-26 s on a large crawl)
            self.reload_politeness()
            handed = self.hand_out(full=not self.leased, dry_hosts=self.early)
            cost = self.clock() - started
            self.progress(self.snapshot())
            if handed == 0 and not self.leased:
                reason = "nothing_due"
                break
        else:  # nothing due at the start: the last take at once, not after an empty interval
            reason = "nothing_due"
        self.micro_batch(final=True)
        return {
            "step": STREAM_STEP,
            "stopped_by": reason,
            "rounds": [self.first_round, self.round - 1],
            "generation": self.manifest.generation,
            "checkpoints": self.commits,
            "rerun_after_crash": self.rerun.cold,
            **attempt_counts(dict(sorted(self.outcomes.items()))),
            "stored": self.totals["stored"],
            "new_urls": self.totals["new_urls"],
            "outcomes": dict(sorted(self.outcomes.items())),
            "not_fetched": self.totals["not_fetched"],
            "not_selected": dict(sorted((k, v) for k, v in self.dropped.items() if v)),
            "beast_delayed": self.totals["beast_delayed"],
            "content": dict(self.content),
            "latency_s": self.latency.to_json(),
            "host_gaps_s": self.gaps.to_json(),
            "micro_batch_s": _spread(self.batch_s),
            "held_max": self.held_max,
            "early_flushes": self.totals["early_flushes"],  # stream.early_flush_s
            "direct_links": self.totals["direct"],  # stream.direct_links
            "seconds_by_step": {k: round(v, 3) for k, v in sorted(self.seconds.items())},
            "elapsed_s": round(self.clock() - t_start, 3),
        }

    def reload_politeness(self) -> None:
        """Take up a ``[politeness]`` section changed in ``crawl.toml`` since the last micro-batch
        (:func:`batchcrawl.engine.reload.politeness_reloaded`): the shard actors' workbenches apply
        it at once, the next selection routes and caps with it (every bucket: a host enabled or
        given more URLs per round may have due URLs anywhere)."""
        cfg = politeness_reloaded(self.cfg, self.reload)
        if cfg is self.cfg:
            return
        self.cfg = cfg
        self.gaps.delay_s = policy_of(cfg.politeness).delay_floor_s
        self.dirty = set(range(self.manifest.buckets))
        for f in [a.set_politeness(cfg.politeness) for a in self.actors.values()]:
            f.result()

    def wait_for_flush(self, started: float, deadline: float, cost: float = 0.0) -> bool:
        """Wait until the next micro-batch is due: ``stream.flush_interval_s`` after ``started``
        (the last one's start, monotonic seconds), or later when the last micro-batch and
        hand-out took ``cost`` seconds, more than ``stream.max_batch_share`` of that interval
        (``cost / max_batch_share`` after ``started``), ``deadline``, or early (unless
        ``stream.early_flush_s`` is 0): at once when a shard finished every URL it was given and
        its rows wait (it has nothing to fetch until the merge), and from ``early_flush_s`` after
        ``started`` once a shard's dry hosts wait with new links
        (:meth:`StreamShardActor.hosts_wait`, asked every :data:`EARLY_POLL_S`). True when a stop
        signal came."""
        s = self.cfg.stream
        self.early = False
        end = min(started + max(s.flush_interval_s, cost / s.max_batch_share), deadline)
        polls = 0 < s.early_flush_s < s.flush_interval_s
        early = started + s.early_flush_s if polls else end
        while (now := self.clock()) < end:
            if self.stop.is_set():  # before an early flush: on a loaded machine one fires each time
                return True
            if polls:
                wants = {f.result() for f in [a.hosts_wait() for a in self.actors.values()]}
                if "finished" in wants or (now >= early and any(wants)):
                    self.totals["early_flushes"] += 1
                    self.early = True
                    return False
            if self.stop.wait(min(EARLY_POLL_S, end - now) if polls else end - now):
                return True
        return self.stop.is_set()

    # -- one micro-batch ------------------------------------------------------------------------
    def micro_batch(self, final: bool) -> None:
        """Take every shard's micro-batch, merge the touched buckets and commit if anything
        came (:func:`batchcrawl.engine.merge.merge_and_commit`)."""
        t0 = self.clock()
        rnd, gen = self.round, self.manifest.generation + 1
        # an empty take writes nothing (a shard writes its files when it fetched, found links or
        # touched a host, and then the micro-batch commits), so a start after a clean stop that
        # committed nothing does not take the stream's round for a crashed one (engine.rerun):
        # a take forced to write its empty files while nothing was committed yet left them
        # uncommitted under round=R/. Forced only when the last crawl commit left WARC files
        # open: the last take closes them (or the start cut back those of a crash) and commits
        # below, or every later start would cut them back as a crash's again (engine.warcopen).
        # The last crawl commit, not the last commit: an extract, inject or graph build after it
        # names no open file.
        closes_warcs = final and bool(self.crawl.open_warcs(self.manifest.generation))
        force = closes_warcs
        self.on_step("take")
        reports: list[ShardReport] = [f.result() for f in [
            a.take_batch(round=rnd, next_round=rnd + 1, generation=gen,
                         buckets=self.manifest.buckets, final=final, force=force)
            for a in self.actors.values()
        ]]  # fmt: skip
        self.round += 1
        for r in reports:  # queued by the shard itself: leased, unless finished already
            self.leased.update(r.direct)
            self.totals["direct"] += len(r.direct)
            for key in r.done_keys:
                self.leased.pop(key, None)
            self.held[r.shard] = r.held
        self.latency.observe(reports)
        self.gaps.observe(reports)
        t1 = self.clock()
        parts = [p for r in reports for p in (r.fetched, r.links) if p is not None]
        delayed = pa.concat_tables(self.delayed) if self.delayed else None
        if (not any(p.entry.rows for p in parts) and self.refiltered is None and not closes_warcs
                and delayed is None and not any(r.hosts for r in reports)):  # fmt: skip
            return  # nothing to merge: no generation for an empty micro-batch
        touched = {b for p in parts for b in p.row_groups}
        for moved in (self.refiltered, delayed):
            if moved is not None:
                touched |= set(bucket_ids(moved.column("url_key").to_numpy(),
                                          self.manifest.buckets).tolist())  # fmt: skip
        gen_summary = gen_mod.selection_summary(rnd, self.cfg, 0, self.not_selected, 0,
                                                self.refiltered is not None, delayed)  # fmt: skip
        gen_summary["step"] = STREAM_STEP
        work = Work(rnd, gen, reports, self.now(), gen_summary, refiltered=self.refiltered,
                    delayed=delayed, buckets=touched,
                    rerun_after_crash=self.rerun.cold and self.commits == 0,
                    steps={"take": t1 - t0})  # fmt: skip

        def extra(summary: dict[str, Any]) -> dict[str, Any]:
            return {"step": STREAM_STEP, "mode": "stream", "time_limit_hit": False,
                    "filters_fingerprint": gen_mod.filters_fingerprint(self.cfg)}  # fmt: skip

        done = merge_and_commit(self.crawl, self.lock, self.manifest, work, self.cfg,
                                mapper=self.crawler.mapper(self.cfg), on_step=self.on_step,
                                t_start=t0, extra=extra)  # fmt: skip
        self.manifest, summary = done.manifest, done.summary
        self.dirty |= touched
        if self.cfg.generate.budget == "star" and summary["indegree"].get("new_domain_pairs"):
            self.dirty = set(range(self.manifest.buckets))  # STAR budgets grew: select all again
        self.refiltered, self.delayed = None, []
        self.not_selected = Counter()
        self.commits += 1
        self.batch_s.append(self.clock() - t0)
        for k in ("take", "update", "compact", "commit"):
            self.seconds[k] += work.steps.get(k, 0.0)
        for k in ("attempts", "responses", "stored", "new_urls", "not_fetched"):
            self.totals[k] += summary[k]
        self.outcomes.update(summary["outcomes"])
        self.content.update(summary["content"])

    # -- hand out newly due URLs ----------------------------------------------------------------
    def hand_out(self, full: bool = False, dry_hosts: bool = False) -> int:
        """Select the due, unleased URLs of the dirty buckets (every bucket if ``full``) with the
        engine's selection and top each shard up to ``fetch.max_queued_urls``. Returns the URLs
        handed out; buckets with due URLs left over stay dirty. Unless ``full`` or ``dry_hosts``
        (an early flush: a shard's dry hosts wait with new links), nothing is selected while no
        shard has room worth a selection (:func:`batchcrawl.engine.topup.worth_selecting`)."""
        t0 = self.clock()
        todo = set(range(self.manifest.buckets)) if full else self.dirty
        max_queued = self.cfg.fetch.max_queued_urls
        if not (full or dry_hosts) and not topup.worth_selecting(self._room(), max_queued):
            return 0  # the shards are (nearly) full: the buckets stay dirty for a later hand-out
        self.dirty = set()
        if not todo:
            return 0
        m = self.manifest
        if self._budgets is None or self._budgets[0] != m.generation:  # read once a generation
            self._budgets = (m.generation, gen_mod.domain_budgets(self.crawl, m, self.cfg))
        leased = np.fromiter(self.leased, np.uint64, len(self.leased))
        held = Counter(self.leased.values())  # URLs per host handed out and not finished
        sel = select(self.crawl, m, self.round, self.cfg, self.now(),
                     mapper=self.crawler.mapper(self.cfg), leased=leased, buckets=todo,
                     held=held, refilter_urls=self.refilter_next,
                     budgets=self._budgets[1])  # fmt: skip
        sel.counts.pop("leased", None)  # in flight, not dropped
        self.not_selected.update(sel.counts)
        self.dropped.update(sel.counts)
        self.totals["beast_delayed"] += sel.delayed.num_rows
        if any(sel.counts.get(c) for c in _LEFT_DUE):
            self.dirty |= todo
        if sel.delayed.num_rows:  # BEAST: over-budget URLs wait; the next micro-batch moves them
            self.delayed.append(sel.delayed)
        if sel.refilter_urls and sel.selected.num_rows + sel.refiltered.num_rows:
            if sel.refiltered.num_rows:
                self.refiltered = sel.refiltered
            self.refilter_next = False
        handed = self._top_up(sel.selected, held)
        self.seconds["select"] += self.clock() - t0
        return handed

    def _started(self) -> None:
        """Wait for the shard actors' start (raises what a start raised)."""
        starting, self._starting = self._starting, []
        for f in starting:
            f.result()

    def _room(self) -> dict[int, int]:
        """URLs each shard can take before it holds ``fetch.max_queued_urls``."""
        cap = self.cfg.fetch.max_queued_urls
        return {s: max(0, cap - self.held.get(s, 0)) for s in self.actors}

    def _top_up(self, selected: pa.Table, held: Counter[str]) -> int:
        """Route ``selected`` to the shards and give each at most what it has room for
        (``fetch.max_queued_urls``), host-fairly by ``held`` (URLs per host handed out and not
        finished; :func:`batchcrawl.engine.topup.fair_top_up`); the rest stays due and its
        buckets dirty. Returns the URLs handed out."""
        lists = gen_mod.assign_fetchlists(
            selected, self.round, self.cfg,
            gen_mod.host_ips(self.crawl, self.manifest, self.cfg),
        )  # fmt: skip
        handed, pending = 0, []
        given: list[np.ndarray] = []
        self._started()
        room = self._room()
        for s, table in lists.items():
            # the rest waits in the frontier (BUbiNG's virtualizer)
            table = topup.fair_top_up(table, room.get(s, 0), held)
            if table.num_rows == 0:
                continue
            keys = np.asarray(table.column("url_key").to_numpy(), dtype=np.uint64)
            given.append(keys)
            self.leased.update(zip(keys.tolist(), table.column("host").to_pylist(), strict=True))
            handed += table.num_rows
            pending.append(
                (s, self.actors[s].top_up(table.select(schemas.fetch_item_columns()).to_pylist()))
            )
        for s, f in pending:
            self.held[s] = f.result()
            self.held_max = max(self.held_max, self.held[s])
        if selected.num_rows > handed:  # due URLs not handed out: selected again next time
            out = np.concatenate(given) if given else np.zeros(0, np.uint64)
            rest = np.asarray(selected.column("url_key").to_numpy(), dtype=np.uint64)
            rest = rest[~np.isin(rest, out)]
            self.dirty |= set(np.unique(bucket_ids(rest, self.manifest.buckets)).tolist())
        return handed


def _spread(seconds: list[float]) -> dict[str, float | int | None]:
    """``{"n", "p50", "max", "sum"}`` of ``seconds`` (rounded to ms; None without any)."""
    if not seconds:
        return {"n": 0, "p50": None, "max": None, "sum": 0.0}
    a = np.asarray(seconds)
    return {"n": len(a), "p50": round(float(np.median(a)), 3), "max": round(float(a.max()), 3),
            "sum": round(float(a.sum()), 3)}  # fmt: skip


def run_stream(
    crawl_url: str,
    cfg: Config,
    stop: StopRequest,
    *,
    max_seconds: float | None = None,
    scheduler: str | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    reload: ConfigReload | None = None,
) -> dict[str, Any]:
    """Stream a crawl under its writer lock on one Dask cluster (``batchcrawl crawl --stream``).

    Parameters
    ----------
    crawl_url
        The crawl directory.
    cfg
        Its configuration.
    stop
        Checked between micro-batches: once set (a signal), the stream checkpoints and returns.
    max_seconds
        Stop after about this many seconds (the last micro-batch is taken and committed).
    scheduler
        Address of an existing Dask scheduler (default: ``round.scheduler`` or a LocalCluster).
    progress, on_step
        Called with a snapshot after each micro-batch, and with each step's name as it starts
        (see :class:`Stream`).
    reload
        Reads the configuration again: its ``[politeness]`` section is taken up after each
        micro-batch (:mod:`batchcrawl.engine.reload`); None: the politeness of ``cfg`` throughout.

    Returns
    -------
    dict
        The summary: ``stopped_by`` (``nothing_due``, ``max_seconds``, ``SIGINT``, ``SIGTERM``),
        ``rounds`` (first and last micro-batch), ``generation``, ``checkpoints``, ``attempts``,
        ``responses``, ``stored``, ``errors`` (by outcome), ``content`` (dedup counts),
        ``held_max`` (the most URLs a shard held: at most ``fetch.max_queued_urls``) ...
    """
    crawl_url = cluster_url(crawl_url)
    # the last checkpoint's crawl.duckdb is written while the cluster closes (see run_rounds)
    with views.background_refresh(stopping), dask_client(cfg, scheduler) as client:
        crawler = Crawler(crawl_url, client)
        crawl = CrawlDir.open(crawl_url)
        try:
            with WriterLock(crawl, owner="batchcrawl crawl --stream") as lock:
                stream = Stream(crawler, crawl, lock, cfg, stop, progress=progress,
                                on_step=on_step, reload=reload)  # fmt: skip
                return stream.run(max_seconds)
        finally:
            crawler.close_actors()
