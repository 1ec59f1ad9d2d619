"""The batch driver: one crawl round, or ``batchcrawl crawl``'s run of rounds, over the engine's
stages (docs/design.md §7, §7a; Nutch's crawl cycle):

* **select** -- :func:`batchcrawl.engine.select.select` picks the round's URLs (one task per DRUM
  bucket, folded under the caps, refiltered, traps throttled) and writes one fetch list per shard.
  Leases live in the fetch lists, committed with the round;
* **fetch** -- one long-lived :class:`~batchcrawl.engine.shard.ShardActor` per shard, pinned to a
  Dask worker, fetches its list and writes its ``fetched``/``links``/``edges`` files partitioned by
  bucket, its WARC files and its ``hosts`` run, and returns a
  :class:`~batchcrawl.engine.report.ShardReport`;
* **merge and commit** -- :func:`batchcrawl.engine.merge.merge_and_commit`: update (one task per
  bucket), content and in-degree merges, compaction, the summary and the commit under the writer
  lock.

A round that dies anywhere before the commit leaves only orphan files: the committed generation is
untouched, every URL it would have fetched is still due, and a rerun does the round again, first
giving every host it may have contacted a full politeness delay (the one crash-rerun rule,
:func:`batchcrawl.engine.rerun.crash_rerun`). Pipelined rounds (:mod:`batchcrawl.pipeline`) use the
same steps of :class:`Crawler`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from batchcrawl import procmem
from batchcrawl.config import Config
from batchcrawl.console.nothing_due import nothing_due
from batchcrawl.console.signals import stopping
from batchcrawl.engine.cluster import cluster_url, dask_client, dask_mapper
from batchcrawl.engine.duecheck import nothing_due_now
from batchcrawl.engine.merge import Work, merge_and_commit
from batchcrawl.engine.reload import ConfigReload, politeness_reloaded
from batchcrawl.engine.report import ShardReport
from batchcrawl.engine.rerun import crash_rerun
from batchcrawl.engine.select import select
from batchcrawl.engine.shard import ShardActor
from batchcrawl.engine.summary import fetch_by_shard, fetch_idle
from batchcrawl.errors import NothingDue, WorkerLost
from batchcrawl.frontier import runs
from batchcrawl.frontier import table as frontier_mod
from batchcrawl.pipeline import Deadline, Planned, plan_round, run_pipelined
from batchcrawl.store import views
from batchcrawl.store.crawldir import CrawlDir, Manifest
from batchcrawl.store.lock import WriterLock

log = logging.getLogger(__name__)

#: Seconds :meth:`Crawler.close_actors` waits for one shard actor to start or close.
ACTOR_CLOSE_TIMEOUT_S = 10.0


# -- the driver -------------------------------------------------------------------------------------
@dataclass
class Crawler:
    """A Dask client and the long-lived shard actors of one crawl (reused across rounds).

    Parameters
    ----------
    crawl_url
        The crawl directory.
    client
        A ``distributed.Client`` (to a LocalCluster or an existing scheduler).
    deadline
        The end of this run of rounds (``crawl --max-seconds``; :func:`run_rounds` and
        :func:`~batchcrawl.pipeline.run_pipelined` set it) or None. With one, each shard's fetch
        run also ends by it, however long the round's generate step and the shard's start-up
        took (``fetch.time_limit_s``, which :meth:`Deadline.round_cfg` lowers to the time left
        when the round starts, counts from the run's own start).
    """

    crawl_url: str
    client: Any
    deadline: Deadline | None = None
    actors: dict[int, Any] = field(default_factory=dict)
    _shards: tuple[int, type] | None = None
    _starting: dict[int, Any] = field(default_factory=dict)  # actor futures (start_actors)
    _seeds: tuple[int, set[str], set[str]] | None = None  # (generation read, hosts, domains)
    t0: float = field(default_factory=time.monotonic)  # summaries' step_spans_s count from here
    #: fetch-list URLs done per second by the last round, if it left some unfetched (time_fit)
    fetch_rate: float | None = None

    def mapper(self, cfg: Config) -> runs.Mapper:
        """The :func:`dask_mapper` of this crawl's client, its tasks at ``round.task_nice``."""
        return dask_mapper(self.client, cfg.round.task_nice)

    def start_actors(self, cfg: Config, actor_class: type = ShardActor) -> None:
        """Start creating the shard actors :meth:`shard_actors` will return, without waiting
        (a round starts them before its generate step, so the first round's fetch step does
        not begin with idle threads waiting for worker start-up)."""
        if self._shards == (cfg.fetch.shards, actor_class) and (self.actors or self._starting):
            return
        self.close_actors()
        workers = sorted(self.client.scheduler_info()["workers"])
        if not workers:  # a worker restarted by its nanny, or a cluster still registering them
            try:
                self.client.wait_for_workers(1, timeout=cfg.round.connect_timeout_s)
            except TimeoutError as exc:
                raise WorkerLost(
                    f"the Dask cluster has no worker after {cfg.round.connect_timeout_s:g} s "
                    "(round.connect_timeout_s); nothing was committed, rerun the round"
                ) from exc
            workers = sorted(self.client.scheduler_info()["workers"])
        self._starting = {
            s: self.client.submit(actor_class, self.crawl_url, cfg, s, actor=True,
                                  workers=[workers[s % len(workers)]], pure=False)
            for s in range(cfg.fetch.shards)
        }  # fmt: skip
        self._shards = (cfg.fetch.shards, actor_class)

    def shard_actors(self, cfg: Config, actor_class: type = ShardActor) -> dict[int, Any]:
        """One ``actor_class`` actor per shard, spread over the workers (created once; re-created
        when ``fetch.shards`` or the class changes)."""
        self.start_actors(cfg, actor_class)
        if self._starting:
            self.actors = {s: f.result() for s, f in self._starting.items()}
            self._starting = {}
        return self.actors

    def seed_scope(self, crawl: CrawlDir, manifest) -> tuple[set[str], set[str]]:
        """The seeds' hosts and domains (a scan of every bucket), read again only when an ``inject``
        was committed since the last read: rounds never add seeds."""
        if self._seeds is not None:
            seen, hosts, domains = self._seeds
            injected = any(
                crawl.manifest(g).summary.get("step") == "inject"
                for g in range(seen + 1, manifest.generation + 1)
            )
            if not injected:
                self._seeds = (manifest.generation, hosts, domains)
                return hosts, domains
        hosts, domains = frontier_mod.seed_scope(crawl, manifest)
        self._seeds = (manifest.generation, hosts, domains)
        return hosts, domains

    def close_actors(self) -> None:
        """Close the shard workers' connections and drop the actors, waiting at most
        :data:`ACTOR_CLOSE_TIMEOUT_S` seconds for each (a worker that died never answers: a
        ``round`` whose workers a group-wide SIGTERM killed waited here forever, issue 34)."""
        if self._starting:  # started, never used: wait for them, so they can be closed
            with contextlib.suppress(Exception):
                self.actors = {
                    s: f.result(timeout=ACTOR_CLOSE_TIMEOUT_S) for s, f in self._starting.items()
                }  # fmt: skip
            self._starting = {}
        for actor in self.actors.values():
            with contextlib.suppress(Exception):
                actor.close().result(timeout=ACTOR_CLOSE_TIMEOUT_S)
        self.actors = {}
        self._shards = None

    def run_round(
        self,
        cfg: Config,
        *,
        now: Callable[[], float] = time.time,
        progress: Callable[[dict[str, Any]], None] | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> dict[str, Any]:
        """Run one round under the writer lock and commit it; return its summary.

        ``progress`` receives a snapshot ``{"round", "planned": {shard: URLs}, "shards": {shard:
        live counters}, "over": [shards whose fetch ended]}`` about twice a second while fetching;
        ``on_step`` is called with ``"generate"``, ``"fetch"``, ``"update"``, ``"compact"``, ``"commit"`` as each
        step starts (tests use it to crash a round at a known point).

        Raises
        ------
        NothingDue
            The frontier has no due URL (nothing is committed).
        LockedError
            Another writer holds the crawl.
        """
        crawl = CrawlDir.open(self.crawl_url)
        with WriterLock(crawl, owner="batchcrawl round") as lock:
            return self._round(crawl, lock, cfg, now, progress, on_step or (lambda step: None))

    def _round(self, crawl, lock, cfg, now, progress, on_step) -> dict[str, Any]:
        t_start = time.monotonic()
        manifest = crawl.manifest()
        rerun = crash_rerun(crawl, manifest.round + 1, "batchcrawl round")
        self.start_actors(cfg)  # created while generate runs
        on_step("generate")
        sel = select(crawl, manifest, manifest.round + 1, cfg, now(), mapper=self.mapper(cfg),
                     fit=self.time_fit(cfg))  # fmt: skip
        if sel.selected.num_rows == 0:  # write nothing: no fetch lists, no commit
            raise nothing_due(crawl, manifest, sel.started_at)
        plan = plan_round(crawl, manifest, manifest.generation + 1, sel)
        del sel  # on the fetch lists now: not held while the round fetches and commits
        plan.cold = rerun.cold
        on_step("fetch")
        pending = self.start_fetch(crawl, plan, cfg, cold=rerun.cold, cool_hosts=rerun.cool_hosts)
        results = self.wait_fetch(plan, pending, cfg, progress, lock)
        return self.finish_round(crawl, lock, manifest, plan, results, cfg, on_step, t_start)

    def time_fit(self, cfg: Config) -> tuple[int, int] | None:
        """``(n, min_per_host)`` of this round's fit to its time limit
        (:attr:`~batchcrawl.config.GenerateSection.time_fit`,
        :func:`~batchcrawl.frontier.generate.fair_share`), or None: the last round fetched all its
        lists (its rate says nothing of what a round can fetch) or none of them (a stalled round
        must not make the next select nothing, which would read as nothing due), or
        ``generate.time_fit`` is 0."""
        if not cfg.generate.time_fit or not self.fetch_rate:
            return None
        limit_s = cfg.fetch.time_limit_s
        delay_s = cfg.politeness.host_delay_s
        per_host = math.ceil(limit_s / delay_s) + 1 if delay_s > 0 else 0
        return max(1, math.ceil(cfg.generate.time_fit * self.fetch_rate * limit_s)), per_host

    # -- the steps of a round, as the sequential and the pipelined driver run them -----------------
    def start_fetch(
        self, crawl: CrawlDir, plan: Planned, cfg: Config, *, cold: bool,
        cool_hosts: Mapping[int, list[str]] | None = None,
    ) -> dict[int, Any]:  # fmt: skip
        """Hand ``plan``'s fetch lists to the shard actors; returns each shard's future. ``cold``:
        a full politeness delay first for every host of the lists and of ``cool_hosts`` (by
        shard: the hosts of a dead run's uncommitted rounds, :func:`orphans.uncommitted_hosts`)."""
        plan.fetch_t0 = time.monotonic()
        procmem.trim()  # give back what generate freed before the fetch and update build on it
        base = plan.base
        seed_hosts, seed_domains = self.seed_scope(crawl, base)
        actors = self.shard_actors(cfg)
        host_files = base.files("hosts")
        cool_hosts = cool_hosts or {}
        ends_at = self.deadline.unix() if self.deadline is not None else None
        return {
            s: actors[s].fetch(
                cfg=cfg, round=plan.round, generation=plan.generation,
                fetchlist=plan.generated.fetchlists[s], host_files=host_files,
                seed_hosts=seed_hosts, seed_domains=seed_domains, buckets=base.buckets,
                cold=cold, content_files=base.files("content"),
                cool_hosts=cool_hosts.get(s, []), ends_at_unix=ends_at,
            )
            for s in sorted(actors)
        }  # fmt: skip

    def wait_fetch(self, plan: Planned, pending, cfg: Config, progress, lock) -> list[ShardReport]:
        """The shards' results of ``plan``'s fetch (:meth:`start_fetch`); records its seconds and
        idle share on ``plan``."""
        results = self._wait_fetch(plan, pending, progress, lock, cfg.fetch.time_limit_s)
        plan.fetch_t1 = time.monotonic()
        return results

    def finish_round(
        self, crawl: CrawlDir, lock: WriterLock, manifest: Manifest, plan: Planned,
        shard_results: list[ShardReport], cfg: Config, on_step: Callable[[str], None],
        t_start: float,
    ) -> dict[str, Any]:  # fmt: skip
        """Merge and commit ``plan``'s round on top of ``manifest`` (the last committed
        generation: ``plan.base``, or in a pipelined crawl the round before's;
        :func:`batchcrawl.engine.merge.merge_and_commit`); returns its summary. Commits only
        ``plan.generation`` (rounds commit in order)."""
        steps = {"generate": plan.generate_s, "fetch": plan.fetch_t1 - plan.fetch_t0}
        spans = {"generate": plan.generate_span, "fetch": (plan.fetch_t0, plan.fetch_t1)}
        idle = fetch_idle(shard_results, steps["fetch"])
        steps["fetch_startup"], steps["fetch_tail"] = idle["startup_s"], idle["tail_s"]
        generated = plan.generated
        work = Work(
            plan.round, plan.generation, shard_results, plan.started_at, generated.summary,
            refiltered=generated.refiltered, delayed=generated.delayed,
            fetchlists=list(generated.fetchlists.values()), rerun_after_crash=plan.cold,
            steps=steps, spans=spans,
        )  # fmt: skip

        def extra(summary: dict[str, Any]) -> dict[str, Any]:
            return {
                "fetch_idle_share": idle["share"],
                "fetch_by_shard": fetch_by_shard(shard_results),
                "pipelined": plan.base.generation != manifest.generation,
            }

        done = merge_and_commit(crawl, lock, manifest, work, cfg, mapper=self.mapper(cfg),
                                on_step=on_step, t_start=t_start, extra=extra)  # fmt: skip
        summary = done.summary
        fetched = sum(t.rows for t in generated.fetchlists.values()) - summary["not_fetched"]
        limited = summary["not_fetched"] > 0 and steps["fetch"] > 0
        self.fetch_rate = fetched / steps["fetch"] if limited else None
        # when each step ran, seconds since the run began: steps of a pipelined crawl overlap
        summary["step_spans_s"] = {
            k: [round(a - self.t0, 3), round(b - self.t0, 3)] for k, (a, b) in spans.items()
        }
        procmem.trim()  # and what update freed, before the next round's generate
        return summary

    def _wait_fetch(self, plan: Planned, pending, progress, lock,
                    limit_s: float | None = None) -> list[ShardReport]:  # fmt: skip
        """The shards' fetch results, once every shard's fetch is over.

        A shard's fetch ends by its own work only (issue 30): its fetch list done, its time
        limit (``fetch.time_limit_s``, the crawl's deadline), or its own slow tail
        (``fetch.tail_*``, :class:`batchcrawl.fetch.tail.TailDetector`); never because another
        shard finished. (Until issue 30, ``fetch.shard_grace_s`` ended every other shard's fetch
        one second after the first shard's run: a site whose hosts all route to one shard
        fetched a second's worth of pages per round.) A shard in its tail is held, not ended
        (counter ``tail_held``, :func:`batchcrawl.fetch.monitor.run_batch`), while another shard
        still fetches outside its tail: the round waits for that one anyway, and the held
        shard's hosts fetch meanwhile (at D = 1 s, a shard cut 11 s before the other left its
        hosts idle for those 11 s). Each shard is released (:meth:`ShardActor.end_tail
        <batchcrawl.engine.shard.ShardActor.end_tail>`) once every other running shard is held:
        the last shard outside its tail, released ahead, ends at its own tail, and the held ones
        right after it."""
        actors, rnd = self.actors, plan.round
        planned = {s: plan.generated.fetchlists[s].rows for s in actors}
        results: dict[int, ShardReport] = {}
        held: set[int] = set()
        released: set[int] = set()
        while len(results) < len(pending):
            for s, fut in pending.items():
                if s not in results and fut.done():
                    results[s] = fut.result()
            running = [s for s in pending if s not in results]
            if not running:
                break
            live = _answers({s: actors[s].progress() for s in running})  # asked at once
            held.update(s for s in running if live.get(s, {}).get("tail_held"))
            release = [
                s
                for s in running
                if s not in released and all(o in held for o in running if o != s)
            ]
            released.update(release)
            _answers({s: actors[s].end_tail() for s in release})
            if progress is not None:  # snapshot: batchcrawl.console.progress's module docstring
                shards = {s: results[s].counters if s in results else live.get(s, {})
                          for s in actors}  # fmt: skip
                spent = time.monotonic() - plan.fetch_t0  # the fetch's time limit, if any
                if limit_s is not None and self.deadline is not None:
                    limit_s = min(limit_s, spent + self.deadline.left())
                progress({"round": rnd, "planned": planned, "shards": shards,
                          "over": sorted(results), "time_limit_s": limit_s,
                          "fetch_elapsed_s": spent})  # fmt: skip
            # wake when a shard is done (not at the next half second), at least twice a
            # second for the progress display and the held tails
            wait_any_done([pending[s] for s in running], 0.5)
        return [results[s] for s in sorted(results)]


def _answers(calls: Mapping[int, Any], timeout_s: float = 5.0) -> dict[int, Any]:
    """The results of actor calls already sent (``{shard: actor future}``), by shard; a shard
    whose call failed or did not answer within ``timeout_s`` seconds is left out (its worker
    may have died: the round learns it from its fetch future)."""
    out = {}
    for s, fut in calls.items():
        with contextlib.suppress(Exception):
            out[s] = fut.result(timeout=timeout_s)
    return out


def wait_any_done(futures: list[Any], timeout_s: float, poll_s: float = 0.02) -> None:
    """Return once one of ``futures`` (Dask futures or actor futures: anything with ``done()``)
    is done, or after ``timeout_s`` seconds; their results and errors are left to the caller.

    It checks ``done()`` every ``poll_s`` seconds in the calling thread with a plain sleep, so a
    shard's end wakes the round driver within ``poll_s`` (a 0.5 s poll left fetch threads idle up
    to 0.5 s per round) and a SIGINT/SIGTERM interrupts it like any sleep. Waiting on the client's
    event loop instead (``client.sync``) left distributed's cancel callback failing with a
    NameError on stderr when the signal arrived inside it (tests/test_signals.py).
    """
    deadline = time.monotonic() + timeout_s
    while not any(f.done() for f in futures):
        left = deadline - time.monotonic()
        if left <= 0:
            return
        time.sleep(min(poll_s, left))


def run_rounds(
    crawl_url: str,
    cfg: Config,
    rounds: int = 1,
    *,
    scheduler: str | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    on_round: Callable[[dict[str, Any]], None] | None = None,
    on_step: Callable[[str], None] | None = None,
    pipeline: bool | None = None,
    max_seconds: float | None = None,
    reload: ConfigReload | None = None,
    due_checked: bool = False,
) -> list[dict[str, Any]]:
    """Run up to ``rounds`` rounds on one cluster, reusing the shard actors (``batchcrawl crawl``).

    Stops early when nothing is due (after at least one round). Raises :class:`NothingDue` if the
    very first round has nothing due. ``pipeline`` (default ``round.pipeline``): fetch each round
    while the one before is committed (:func:`batchcrawl.pipeline.run_pipelined`). ``max_seconds``:
    start no round after this many seconds, and end each round's fetch by then. ``reload``:
    reads the configuration again before each round after the first; its ``[politeness]``
    section is taken up (:mod:`batchcrawl.engine.reload`; sequential rounds). ``due_checked``:
    the caller has just found URLs due (:func:`~batchcrawl.engine.duecheck.nothing_due_now`,
    which reads every bucket's due-time index), so it is not read again.
    """
    summaries = []
    crawl_url = cluster_url(crawl_url)
    if not due_checked:
        idle = nothing_due_now(CrawlDir.open(crawl_url), time.time())  # before a cluster starts
        if idle is not None:
            raise idle
    pipelined = cfg.round.pipeline if pipeline is None else pipeline
    deadline = Deadline.after(max_seconds)  # the cluster's start-up counts
    # crawl.duckdb is written by child processes while the rounds run: the driver never loads
    # DuckDB; leaving waits for the last one, after the cluster is closed (the last commit's
    # refresh runs while the cluster closes, not before: a round process's exit, issue 30), and
    # after a stop signal at most views.STOP_WAIT_S (the child finishes alone: issue 34)
    with views.background_refresh(stopping), dask_client(cfg, scheduler) as client:
        crawler = Crawler(crawl_url, client, deadline=deadline)
        try:
            if pipelined:
                return run_pipelined(crawler, cfg, rounds, progress=progress, on_round=on_round,
                                     on_step=on_step, max_seconds=deadline.left(),
                                     reload=reload)  # fmt: skip
            for i in range(rounds):
                if i > 0 and not deadline.allows_a_round():
                    break
                if i > 0:
                    cfg = politeness_reloaded(cfg, reload)
                try:
                    summary = crawler.run_round(deadline.round_cfg(cfg), progress=progress,
                                                on_step=on_step)  # fmt: skip
                except NothingDue:
                    if i == 0:
                        raise
                    break
                summaries.append(summary)
                if on_round is not None:
                    on_round(summary)
        finally:
            crawler.close_actors()
    return summaries
