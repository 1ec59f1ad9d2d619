"""One crawl round as a Dask graph: generate -> fetch (one task per shard) -> update (one task per
bucket) -> commit (docs/design.md §7; Nutch's crawl cycle).

* **generate** — one task per DRUM bucket selects its due URLs (pre-capped); the driver folds the
  small candidate tables, applies the caps exactly, re-applies the filters and writes one fetch list
  per shard (:mod:`batchcrawl.frontier.generate`). Leases live in the fetch lists, committed with the round.
* **fetch** — one long-lived :class:`ShardActor` per shard, pinned to a Dask worker, owns that
  shard's hosts: its :class:`~batchcrawl.worker.FetchWorker` keeps the workbench, the robots.txt
  cache and the URL cache in memory across the rounds of one ``batchcrawl crawl``, and reloads them
  from the ``hosts`` table in a fresh process. Each shard writes its ``fetched`` and ``links`` files
  partitioned by bucket (:mod:`batchcrawl.store.shuffle`), its WARC files and its ``hosts`` file.
* **update** — one task per bucket merges the bucket with its slice of every shard's facts
  (IRLbot's DRUM, :mod:`batchcrawl.frontier.update`) and writes only the changed and new rows as the
  bucket's next delta run.
* **compact** — one task per bucket whose delta runs passed the size ratio or count merges them
  into a new base (:mod:`batchcrawl.frontier.runs`).
* **commit** — the driver publishes the next manifest (:meth:`CrawlDir.commit`) under the writer lock.

A round that dies anywhere before the commit leaves only orphan files: the committed generation is
untouched, every URL it would have fetched is still due, and a rerun does the round again. Because
the dead round's last requests were never persisted, a rerun first gives every host of its fetch
lists a full politeness delay (:meth:`FetchWorker.cool_down`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from fsspec.implementations.dirfs import DirFileSystem

from batchcrawl import procmem, workersetup
from batchcrawl.config import Config
from batchcrawl.console.nothing_due import nothing_due
from batchcrawl.console.signals import ignoring_sigint
from batchcrawl.errors import ClusterUnreachable, NothingDue, first_line
from batchcrawl.fetch.spill import FactFiles
from batchcrawl.fetch.worker import FetchWorker, ShardRun
from batchcrawl.frontier import content as content_mod
from batchcrawl.frontier import generate as gen_mod
from batchcrawl.frontier import hosts as host_runs
from batchcrawl.frontier import runs
from batchcrawl.frontier import table as frontier_mod
from batchcrawl.frontier.runs import BucketFiles
from batchcrawl.frontier.update import UpdateResult
from batchcrawl.frontier.updatedb import updatedb
from batchcrawl.pipeline import Deadline, Planned, plan_round, run_pipelined
from batchcrawl.records import FetchItem
from batchcrawl.ring import HashRing, route_name
from batchcrawl.store import orphans, schemas, views
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest
from batchcrawl.store.lock import WriterLock
from batchcrawl.store.shuffle import Partitioned
from batchcrawl.urls import domain_of

log = logging.getLogger(__name__)


def host_shard(host: str, ip: str | None, cfg: Config, ring: HashRing) -> int:
    """The shard owning ``host`` under ``generate.partition_by`` (:func:`batchcrawl.ring.route_name`,
    the routing generate uses)."""
    return ring.shard_for(route_name(host, domain_of(host), ip, cfg.generate.partition_by))


class ShardActor:
    """A Dask actor holding one shard's fetch worker across rounds (docs/design.md §6, §7).

    Parameters
    ----------
    crawl_url
        The crawl directory (fsspec URL) every Dask worker can reach.
    cfg
        The round's configuration.
    shard
        The shard this actor owns.
    """

    def __init__(self, crawl_url: str, cfg: Config, shard: int) -> None:
        self.crawl_url = crawl_url
        self.cfg = cfg
        self.shard = shard
        self.worker: FetchWorker | None = None
        # the last hosts rows this shard wrote (bounded), for its worker's forgotten hosts
        self.known_hosts = host_runs.RecentHostRows(cfg.fetch.max_kept_host_rows)
        # the crawl and its committed hosts listing the worker was last opened with
        self.opened: tuple[CrawlDir, list[str]] | None = None
        self.counters: Counter = Counter()
        self.content_files: tuple[str, ...] = ()
        # per fetch (the driver's token): set once its run is over (run_over), created on first
        # use by whichever of fetch and run_over comes first (Dask may deliver them in any order)
        self._run_over: dict[str, asyncio.Event] = {}

    def end_fetch(self) -> bool:
        """End the running fetch phase early (:meth:`FetchWorker.end_run`); False if none runs."""
        return self.worker is not None and self.worker.end_run()

    def progress(self) -> dict[str, float]:
        """Live counters of the running fetch (for the progress display)."""
        return dict(self.counters)

    async def fetch(self, *, run_token: str, **kwargs: Any) -> dict[str, Any]:
        """Run :meth:`fetch_sync` off the event loop, so :meth:`progress` and :meth:`run_over`
        stay answerable. ``run_token`` names this fetch for :meth:`run_over` (any string unique
        to it; the round driver's :attr:`~batchcrawl.pipeline.Planned.fetch_token`)."""
        self.counters = Counter()  # progress() never reports the previous round's counters
        loop = asyncio.get_running_loop()
        for old in [t for t, e in self._run_over.items() if e.is_set()]:  # earlier fetches'
            del self._run_over[old]  # (dropped first: a reused token must not find its old event)
        over = self._run_over_event(run_token)

        def signal() -> None:
            loop.call_soon_threadsafe(over.set)

        def run() -> dict[str, Any]:
            try:
                return self.fetch_sync(on_run_over=signal, **kwargs)
            finally:
                signal()  # also when the fetch failed before or during its run

        return await loop.run_in_executor(None, run)

    async def run_over(self, run_token: str) -> bool:
        """Return (True) once the run of the fetch named ``run_token`` (:meth:`fetch`) is over:
        its fetch threads stopped, before the shard writes its facts (~0.1-0.6 s per round). The
        round driver counts ``fetch.shard_grace_s`` from the first shard's run end, not from its
        result."""
        await self._run_over_event(run_token).wait()
        return True

    def _run_over_event(self, token: str) -> asyncio.Event:
        return self._run_over.setdefault(token, asyncio.Event())

    def fetch_sync(
        self,
        *,
        cfg: Config,
        round: int,
        generation: int,
        fetchlist: FileEntry,
        host_files: list[str],
        seed_hosts: set[str],
        seed_domains: set[str],
        buckets: int,
        cold: bool,
        content_files: tuple[str, ...] | list[str] = (),
        cool_hosts: list[str] | tuple[str, ...] = (),
        ends_at_unix: float | None = None,
        on_run_over: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """Fetch this shard's fetch list of ``round`` and write its outputs (uncommitted).
        ``cold``: every host of the list and of ``cool_hosts`` waits a full delay first.
        ``ends_at_unix``: the run also ends by this wall-clock time (epoch seconds; the driver's
        :class:`~batchcrawl.pipeline.Deadline`), besides ``fetch.time_limit_s`` from its start.
        ``on_run_over`` is called (in this thread) once the fetch run ends, before the outputs
        are written."""
        started = time.monotonic()
        crawl = CrawlDir.open(self.crawl_url)
        self.open_worker(crawl, cfg, host_files, seed_hosts, seed_domains)
        table = crawl.read_table(
            "fetchlists", [fetchlist], columns=list(schemas.fetch_item_columns())
        )
        items = fetch_items(table)
        del table
        rows_read = self.restore_returning(items)
        if cold:
            self.worker.cool_down({i.host for i in items} | set(cool_hosts))
        if tuple(content_files) != self.content_files:  # content seen in earlier rounds
            self.worker.know_content({})  # the old map goes before the new one is built
            seen = content_mod.load_seen(crawl, list(content_files), cfg.dedup.max_seen_digests)
            self.worker.know_content(seen)
            self.content_files = tuple(content_files)
        startup_s = time.monotonic() - started
        limit = cfg.fetch.time_limit_s
        if ends_at_unix is not None:
            limit = max(0.0, min(limit, ends_at_unix - time.time()))
        with FactFiles(crawl, round, self.shard, buckets) as facts:
            run = self.worker.run(items, round, time_limit_s=limit, progress=self._on_progress,
                                  spill=facts.spill)  # fmt: skip
            if on_run_over is not None:
                on_run_over()
            fetched, links, edges = facts.finish(run)  # the spills and the rows since the last
        hosts = self.write_hosts(crawl, generation, {i.host for i in items})
        result = {
            "shard": self.shard,
            "fetched": fetched,
            "links": links,
            "edges": edges,
            "hosts": hosts,
            "counters": dict(run.counters),
            "outcomes": dict(facts.outcomes),
            "spills": facts.spills,
            "spill_s": facts.seconds,
            "host_rows": {"kept": len(self.known_hosts), "read_back": rows_read},
            "unfetched": len(run.unfetched),
            "seconds": time.monotonic() - started,
            "fetch_seconds": run.seconds,
            "startup_s": startup_s,
            "idle_s": run.idle_s,
            "tail_s": run.tail_s,
        }
        del run, items  # the round's rows: give their memory back before the next round
        procmem.trim()
        return result

    # -- helpers shared with the streaming actor (batchcrawl.stream) ------------------------------
    def open_worker(
        self,
        crawl: CrawlDir,
        cfg: Config,
        host_files: list[str],
        seed_hosts: set[str],
        seed_domains: set[str],
    ) -> FetchWorker:
        """The shard's fetch worker: created on first use (its hosts' state reloaded from the
        ``hosts`` table files ``host_files``), else reconfigured with ``cfg``."""  # fmt: skip
        self.cfg = cfg
        self.opened = (crawl, list(host_files))
        self.known_hosts.limit = cfg.fetch.max_kept_host_rows
        if self.worker is None:
            fs = DirFileSystem(crawl.root, crawl.fs)
            self.worker = FetchWorker(cfg, self.shard, fs, seed_hosts=seed_hosts,
                                      seed_domains=seed_domains)  # fmt: skip
            rows = self._own_host_rows(crawl, host_files)
            self.known_hosts.load(rows)
            self.worker.restore_hosts(rows)
        else:
            self.worker.reconfigure(cfg, seed_hosts=seed_hosts, seed_domains=seed_domains)
        return self.worker

    def restore_returning(self, items: list[FetchItem]) -> int:
        """Bring back the hosts of ``items`` that the long-lived worker forgot
        (:meth:`FetchWorker.forget_idle_hosts`) from their last ``hosts`` rows: kept in memory
        (:class:`~batchcrawl.frontier.hosts.RecentHostRows`), else read back from the committed
        listing the worker was last opened with. Returns the rows read back."""
        returning = {i.host for i in items if not self.worker.knows(i.host)}
        if not returning:
            return 0
        rows, read = self.known_hosts.rows_for(returning, *self.opened)
        self.worker.restore_hosts(rows)
        return read

    def write_facts(
        self, crawl: CrawlDir, run: ShardRun, round: int, buckets: int
    ) -> tuple[Partitioned, Partitioned, Partitioned]:
        """Write ``run``'s ``fetched``, ``links`` and ``edges`` rows as round ``round``'s files of
        this shard, partitioned by DRUM bucket (:class:`FactFiles`, no spill); uncommitted.
        ``run``'s rows are emptied once written (no caller reads them after this)."""
        with FactFiles(crawl, round, self.shard, buckets) as facts:
            return facts.finish(run)

    def write_hosts(self, crawl: CrawlDir, generation: int, touched: set[str]) -> FileEntry | None:
        """Refresh the rows of the ``touched`` hosts from the worker and write them as this shard's
        ``hosts`` run of ``generation`` (:mod:`batchcrawl.frontier.hosts`; None when no host was
        touched); uncommitted."""
        rows = self.worker.host_rows(touched)
        self.known_hosts.wrote(rows)
        return host_runs.write_run(crawl, generation, self.shard, rows)

    def _on_progress(self, counters: Counter) -> None:
        self.counters = counters

    def _own_host_rows(self, crawl: CrawlDir, host_files: list[str]) -> list[dict[str, Any]]:
        if not host_files:
            return []
        ring = HashRing(self.cfg.fetch.shards, self.cfg.fetch.ring_vnodes)
        rows = host_runs.read_hosts(crawl, host_files).to_pylist()  # newest wins by host
        return [r for r in rows if host_shard(r["host"], r["ip"], self.cfg, ring) == self.shard]

    def close(self) -> None:
        """Close the fetch worker's connections."""
        if self.worker is not None:
            self.worker.close()


def fetch_items(table: pa.Table) -> list[FetchItem]:
    """The rows of a fetch list read with :func:`schemas.fetch_item_columns` as
    :class:`FetchItem` objects, in order: built from whole columns, positionally (the fields are
    those columns in that order), about twice as fast as one dict per row (a round's fetch list is
    read before its fetch threads start)."""
    columns = [table.column(c).to_pylist() for c in schemas.fetch_item_columns()]
    return list(map(FetchItem, *columns))


# -- Dask tasks (plain functions: they run on any worker) -------------------------------------------
def dask_mapper(client: Any) -> runs.Mapper:
    """A :data:`~batchcrawl.frontier.runs.Mapper` that runs one Dask task per item: the round's
    generate and update are the library's own drivers, mapped on the cluster."""
    return lambda fn, items: client.gather(client.map(fn, list(items), pure=False))


def compact_task(crawl_url: str, files: BucketFiles, generation: int, cfg: Config) -> BucketFiles:
    """Compaction, one bucket: merge its runs into a new base (:func:`runs.compact_bucket`)."""
    return runs.compact_bucket(CrawlDir.open(crawl_url), files, generation, cfg)


def compact_buckets(
    client: Any, crawl_url: str, buckets: list[BucketFiles], generation: int, cfg: Config
) -> list[BucketFiles]:
    """Compact, as Dask tasks, the buckets whose runs passed ``frontier.max_runs`` or
    ``frontier.compact_run_ratio`` (:func:`runs.needs_compaction`); the others are returned as
    they are. New bases are written for ``generation``; nothing is committed."""
    todo = [i for i, bf in enumerate(buckets) if runs.needs_compaction(bf, cfg)]
    done = client.gather(client.map(
        compact_task, [crawl_url] * len(todo), [buckets[i] for i in todo],
        [generation] * len(todo), [cfg] * len(todo), pure=False,
    ))  # fmt: skip
    out = list(buckets)
    for i, bf in zip(todo, done, strict=True):
        out[i] = bf
    return out


def compacted_count(updated: UpdateResult, compacted: list[BucketFiles]) -> int:
    """Buckets given a new base this round: inside the update tasks
    (``UpdateSummary.buckets_compacted``) plus by the compact step (``compacted``, its output for
    ``updated.buckets``: a bucket it did not compact is the same object)."""
    by_step = sum(1 for a, u in zip(compacted, updated.buckets, strict=True) if a is not u)
    return updated.summary.buckets_compacted + by_step


def started_before(crawl: CrawlDir, rnd: int) -> bool:
    """True if round ``rnd`` (the next, uncommitted one) or a later one left files of a fetch that
    died before its commit (:func:`batchcrawl.store.orphans.uncommitted_rounds`). Those requests
    were never persisted in the ``hosts`` table, so the rerun cools every host down first
    (:meth:`FetchWorker.cool_down`)."""
    return bool(orphans.uncommitted_rounds(crawl, rnd))


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

    def mapper(self) -> runs.Mapper:
        """The :func:`dask_mapper` of this crawl's client."""
        return dask_mapper(self.client)

    def start_actors(self, cfg: Config, actor_class: type = ShardActor) -> None:
        """Start creating the shard actors :meth:`shard_actors` will return, without waiting
        (a round starts them before its generate step, so the first round's fetch step does
        not begin with idle threads waiting for worker start-up)."""
        if self._shards == (cfg.fetch.shards, actor_class) and (self.actors or self._starting):
            return
        self.close_actors()
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
        """Close the shard workers' connections and drop the actors."""
        if self._starting:  # started, never used: wait for them, so they can be closed
            with contextlib.suppress(Exception):
                self.actors = {s: f.result() for s, f in self._starting.items()}
            self._starting = {}
        for actor in self.actors.values():
            with contextlib.suppress(Exception):
                actor.close().result()
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
        live counters}}`` about twice a second while fetching;
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
        rnd = manifest.round + 1
        cold = started_before(crawl, rnd)
        if cold:
            log.warning("round %d was started before (a round or a stream) and did not commit: "
                        "rerunning it, with a full politeness delay for every host first",
                        rnd)  # fmt: skip
        self.start_actors(cfg)  # created while generate runs
        on_step("generate")
        t0 = time.monotonic()
        started_at = now()
        selection = gen_mod.select(
            crawl, manifest, rnd, cfg, started_at, mapper=dask_mapper(self.client),
            fit=self.time_fit(cfg),
        )  # fmt: skip
        if selection[0].num_rows == 0:  # write nothing: no fetch lists, no commit
            raise nothing_due(crawl, manifest, started_at)
        plan = plan_round(crawl, manifest, rnd, manifest.generation + 1, cfg, selection,
                          started_at, t0)  # fmt: skip
        del selection  # on the fetch lists now: not held while the round fetches and commits
        plan.cold = cold
        on_step("fetch")
        pending = self.start_fetch(crawl, plan, cfg, cold=cold)
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
        plan.fetch_token = uuid.uuid4().hex
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
                run_token=plan.fetch_token,
            )
            for s in sorted(actors)
        }  # fmt: skip

    def wait_fetch(self, plan: Planned, pending, cfg: Config, progress, lock) -> list[dict]:
        """The shards' results of ``plan``'s fetch (:meth:`start_fetch`); records its seconds and
        idle share on ``plan``."""
        results = self._wait_fetch(plan, pending, progress, lock)
        plan.fetch_t1 = time.monotonic()
        return results

    def finish_round(
        self, crawl: CrawlDir, lock: WriterLock, manifest: Manifest, plan: Planned,
        shard_results: list[dict[str, Any]], cfg: Config, on_step: Callable[[str], None],
        t_start: float,
    ) -> dict[str, Any]:  # fmt: skip
        """Update, compact and commit ``plan``'s round on top of ``manifest`` (the last committed
        generation: ``plan.base``, or in a pipelined crawl the round before's); returns its
        summary. Commits only ``plan.generation`` (rounds commit in order)."""
        client = self.client
        rnd, gen = plan.round, plan.generation
        if manifest.generation + 1 != gen:
            raise AssertionError(f"round {rnd} commits generation {gen}, not after "
                                 f"{manifest.generation}")  # fmt: skip
        steps = {"generate": plan.generate_s, "fetch": plan.fetch_t1 - plan.fetch_t0}
        spans = {"generate": plan.generate_span, "fetch": (plan.fetch_t0, plan.fetch_t1)}
        idle = fetch_idle(shard_results, steps["fetch"])
        steps["fetch_startup"], steps["fetch_tail"] = idle["startup_s"], idle["tail_s"]
        refiltered, delayed = plan.generated.refiltered, plan.generated.delayed
        # -- update -----------------------------------------------------------------------------
        on_step("update")
        t0 = time.monotonic()
        fparts = [r["fetched"] for r in shard_results]
        lparts = [r["links"] for r in shard_results]
        merged = updatedb(
            crawl, manifest, rnd, fparts, lparts, [r["edges"] for r in shard_results], cfg,
            plan.started_at, mapper=dask_mapper(client),
            refiltered=refiltered if refiltered.num_rows else None,
            delayed=delayed if delayed.num_rows else None,
        )  # fmt: skip
        updated, content, indegree = merged.frontier, merged.content, merged.indegree
        update_summary = updated.summary.to_json()
        steps["update"] = time.monotonic() - t0
        spans["update"] = (t0, t0 + steps["update"])
        # -- compact ----------------------------------------------------------------------------
        on_step("compact")
        t0 = time.monotonic()
        buckets = compact_buckets(client, self.crawl_url, updated.buckets, gen, cfg)
        steps["compact"] = time.monotonic() - t0
        spans["compact"] = (t0, t0 + steps["compact"])
        # -- commit -----------------------------------------------------------------------------
        on_step("commit")
        t0 = time.monotonic()
        summary = round_summary(
            rnd, gen, shard_results, update_summary, plan.generated.summary,
            compacted=compacted_count(updated, buckets),
            rerun_after_crash=plan.cold, steps=steps, elapsed_s=time.monotonic() - t_start,
        )  # fmt: skip
        summary["content"] = content.to_json()
        summary["indegree"] = indegree.to_json()
        summary["updatedb_s_by_merge"] = merged.seconds
        summary["fetch_idle_share"] = idle["share"]
        summary["fetch_by_shard"] = fetch_by_shard(shard_results)
        summary["pipelined"] = plan.base.generation != manifest.generation
        done = sum(t.rows for t in plan.generated.fetchlists.values()) - summary["not_fetched"]
        limited = summary["not_fetched"] > 0 and steps["fetch"] > 0
        self.fetch_rate = done / steps["fetch"] if limited else None
        fetchlists = plan.generated.fetchlists
        lock.check()
        committed = crawl.commit(
            manifest,
            {
                "frontier": runs.frontier_listing(buckets),
                "hosts": host_runs.next_listing(
                    crawl,
                    manifest.tables.get("hosts", ()),
                    [r["hosts"] for r in shard_results],
                    gen,
                    cfg,
                ),  # fmt: skip
                "fetchlists": list(manifest.tables.get("fetchlists", ()))
                + list(fetchlists.values()),
                "fetched": list(manifest.tables.get("fetched", ())) + [p.entry for p in fparts],
                "links": list(manifest.tables.get("links", ())) + [p.entry for p in lparts],
                "edges": list(manifest.tables.get("edges", ()))
                + [r["edges"].entry for r in shard_results],
                "content": content.listing,
                "domainlinks": indegree.domainlinks,
                "indegree": indegree.indegree,
            },
            summary,
            round=rnd,
        )
        steps["commit"] = time.monotonic() - t0
        spans["commit"] = (t0, t0 + steps["commit"])
        summary["generation"] = committed.generation
        summary["seconds_by_step"] = {k: round(v, 3) for k, v in steps.items()}
        # when each step ran, seconds since the run began: steps of a pipelined crawl overlap
        summary["step_spans_s"] = {
            k: [round(a - self.t0, 3), round(b - self.t0, 3)] for k, (a, b) in spans.items()
        }
        summary["elapsed_s"] = round(time.monotonic() - t_start, 3)
        procmem.trim()  # and what update freed, before the next round's generate
        return summary

    def _wait_fetch(self, plan: Planned, pending, progress, lock) -> list[dict[str, Any]]:
        """The shards' fetch results, once every shard's fetch is over.

        A shard's fetch ends by its own work only (issue 30): its fetch list done, its time
        limit (``fetch.time_limit_s``, the crawl's deadline), or its own slow tail
        (``fetch.tail_*``, :class:`batchcrawl.fetch.worker.TailDetector`); never because another
        shard finished. A shard with nothing to do is over at once and shortens nothing. (Until
        issue 30, ``fetch.shard_grace_s`` ended every other shard's fetch one second after the
        first shard's run: a site whose hosts all route to one shard fetched a second's worth
        of pages per round.)"""
        actors, rnd = self.actors, plan.round
        planned = {s: plan.generated.fetchlists[s].rows for s in actors}
        results: dict[int, dict[str, Any]] = {}
        while len(results) < len(pending):
            for s, fut in pending.items():
                if s not in results and fut.done():
                    results[s] = fut.result()
            if len(results) < len(pending):
                if progress is not None:  # snapshot: batchcrawl.console.progress's module docstring
                    shards: dict[int, dict[str, float]] = {}
                    for s, actor in actors.items():
                        shards[s] = results[s]["counters"] if s in results else {}
                        if s not in results:
                            with contextlib.suppress(Exception):
                                shards[s] = actor.progress().result(timeout=5)
                    progress({"round": rnd, "planned": planned, "shards": shards})
                # wake when a shard is done (not at the next half second), at least twice a
                # second for the progress display
                wait_any_done([fut for s, fut in pending.items() if s not in results], 0.5)
        return [results[s] for s in sorted(results)]


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


def fetch_idle(shard_results: list[dict[str, Any]], step_s: float) -> dict[str, float]:
    """How much of a batch fetch step of ``step_s`` seconds left fetch threads without work
    (issue 16), from the shards' ``startup_s``, ``fetch_seconds``, ``idle_s``, ``tail_s``.

    A shard is idle (fewer than half its threads have work, :mod:`batchcrawl.fetch.idle`) before
    its worker starts (``startup_s``: fetch list read, hosts restored), during its run's
    ``idle_s``, and after its run until the step ends (writing its facts, waiting for the other
    shards). Returns ``share``: idle shard-seconds / (shards x ``step_s``), in [0, 1];
    ``startup_s``: the slowest shard's start-up; ``tail_s``: from the moment the last shard to
    stay busy dropped below half its threads until the step ended (shard clocks are taken to
    start with the step).
    """
    if not shard_results or step_s <= 0:
        return {"share": 0.0, "startup_s": 0.0, "tail_s": 0.0}
    busy = [r["fetch_seconds"] - r["idle_s"] for r in shard_results]
    idle = sum(step_s - b for b in busy)
    busy_end = max(r["startup_s"] + r["fetch_seconds"] - r["tail_s"] for r in shard_results)
    return {
        "share": round(min(1.0, max(0.0, idle / (len(shard_results) * step_s))), 4),
        "startup_s": max(r["startup_s"] for r in shard_results),
        "tail_s": max(0.0, step_s - busy_end),
    }


def fetch_by_shard(shard_results: list[dict[str, Any]]) -> list[dict[str, float]]:
    """Each shard's part of a batch fetch step (the round summary's ``fetch_by_shard``; issue 16:
    where its idle seconds went): ``shard``, its start-up (fetch list read, hosts restored), its
    run's length, idle and tail seconds, and its whole call (what follows the run is writing its
    facts and hosts rows); seconds, rounded to milliseconds."""
    times = ("startup_s", "fetch_seconds", "idle_s", "tail_s", "seconds")
    return [{"shard": r["shard"], **{k: round(r[k], 3) for k in times}} for r in shard_results]


def _ended_early(shard_result: Mapping[str, Any]) -> bool:
    """Whether a shard's fetch ended before its time limit: cut at its own slow tail."""
    return bool(shard_result["counters"].get("tail_cut"))


def round_summary(
    rnd: int,
    generation: int,
    shard_results: list[dict[str, Any]],
    update_summary: dict,
    gen_summary: dict,
    *,
    compacted: int,
    rerun_after_crash: bool,
    steps: dict[str, float],
    elapsed_s: float,
) -> dict[str, Any]:
    """The JSON summary of round (or stream micro-batch) ``rnd`` committed as ``generation``,
    from the shards' results (``counters``, ``outcomes``, ``unfetched``) and the step summaries."""
    counters: Counter = Counter()
    by_outcome: Counter = Counter()
    for r in shard_results:
        counters.update(r["counters"])
        by_outcome.update(r["outcomes"])
    outcomes = {k: int(v) for k, v in sorted(by_outcome.items()) if v}
    return {
        "step": "round",
        "round": rnd,
        "generation": generation,
        # what each counts (README): every attempt (robots-denied too), those answered by a
        # server, those whose content was stored (the frontier's ``fetched`` status)
        "attempts": sum(outcomes.values()),
        "responses": sum(v for k, v in outcomes.items() if k in _RESPONSE_OUTCOMES),
        "stored": sum(v for k, v in outcomes.items() if k in _STORED_OUTCOMES),
        "new_urls": update_summary["links"].get("new_queued", 0),
        "errors": {k: v for k, v in outcomes.items() if k not in ("ok", "redirect",
                                                                 "not_modified")},
        "outcomes": outcomes,
        "not_fetched": sum(r["unfetched"] for r in shard_results),
        # spills of a shard's rows during its fetch (round.spill_pages, batchcrawl.fetch.spill;
        # the last one at its end); 0 when every shard stayed under the bound
        "spills": sum(r.get("spills", 0) for r in shard_results),
        "spill_s": round(sum(r.get("spill_s", 0.0) for r in shard_results), 3),
        # hosts rows the shard actors keep for their forgotten hosts (fetch.max_kept_host_rows,
        # after the round), and those of returning hosts read back from the hosts table instead
        "host_rows": {k: sum(r.get("host_rows", {}).get(k, 0) for r in shard_results)
                      for k in ("kept", "read_back")},
        # a shard left URLs because its fetch reached fetch.time_limit_s (or the crawl's
        # --max-seconds), not because it was cut at its own tail
        "time_limit_hit": any(r["unfetched"] and not _ended_early(r) for r in shard_results),
        # shards whose fetch ended at its slow tail (fetch.tail_rate_ratio, fetch.tail_idle_s)
        "shards_tail_cut": sum(int(r["counters"].get("tail_cut", 0)) for r in shard_results),
        "robots": {
            k: int(v) for k, v in counters.items() if k.startswith(("robots_state_", "robots_fetches"))
        },
        "links": {k: int(v) for k, v in counters.items() if k.startswith("links_")},
        # the fetch threads' CPU seconds by phase, all shards (time.thread_time; the worker's
        # other threads -- event loop, actor executor, Dask tasks -- are not in them)
        "fetch_cpu_s": {k[4:-2]: round(float(v), 3) for k, v in counters.items()
                        if k.startswith("cpu_") and k.endswith("_s")},
        "generate": gen_summary,
        "update": update_summary,
        "compacted": compacted,
        "rerun_after_crash": rerun_after_crash,
        "seconds_by_step": {k: round(v, 3) for k, v in steps.items()},
        "elapsed_s": round(elapsed_s, 3),
    }  # fmt: skip


def outcome_counts(run: ShardRun) -> dict[str, int]:
    """Fetch attempts of ``run`` by outcome, from the rows themselves: the worker's counters also
    hold robots.txt states whose names can equal an outcome's (``robots_unavailable``)."""
    return dict(Counter(row["outcome"] for row in run.fetched))


_RESPONSE_OUTCOMES = frozenset(
    ("ok", "truncated", "redirect", "redirect_loop", "not_modified", "gone", "http_error",
     "server_error")
)  # fmt: skip
#: Outcomes after which the URL's status is ``fetched`` (frontier/update.py's transition table).
_STORED_OUTCOMES = frozenset(("ok", "truncated", "not_modified"))


@contextlib.contextmanager
def dask_client(cfg: Config, scheduler: str | None = None) -> Iterator[Any]:
    """A ``distributed.Client``: to ``scheduler`` (an existing cluster; a warning names workers
    that lack the allocator settings, :func:`procmem.warn_unless_applied`) if given, else to an
    embedded ``LocalCluster`` of ``round.workers`` processes on 127.0.0.1 (closed on exit). Its
    workers are given the table schemas (:func:`workersetup.register`)."""
    from distributed import Client

    address = scheduler or cfg.round.scheduler
    if address:
        timeout = cfg.round.connect_timeout_s
        try:
            client = Client(address, timeout=timeout)
        except (OSError, TimeoutError) as exc:
            first = first_line(exc)
            raise ClusterUnreachable(
                f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({first}); "
                "check that it runs and the address, or raise round.connect_timeout_s"
            ) from None
        with client:
            procmem.warn_unless_applied(client, cfg.round)
            workersetup.register(client)
            yield client
        return
    with procmem.environ_kept():  # nannies write the workers' variables into os.environ
        with ignoring_sigint():  # Ctrl-C stops this process cleanly; the workers never see it
            cluster = _local_cluster(cfg)
        client = Client(cluster)
        timeout = None
        try:
            workersetup.register(client)
            yield client
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM (signals.Interrupted): do not wait for the workers to say goodbye;
            # nothing uncommitted matters (the round reruns whole).
            timeout = 2
            logging.getLogger("distributed").setLevel(logging.CRITICAL)
            raise
        finally:
            # the results are in: what closing makes the processes log (a worker's heartbeat to
            # the scheduler that just closed) is not an error of the crawl
            dist_log = logging.getLogger("distributed")
            level = dist_log.level
            with contextlib.suppress(Exception):
                if timeout is None:
                    client.run(_quiet_distributed, wait=True)
            dist_log.setLevel(logging.CRITICAL)
            with contextlib.suppress(Exception):
                client.close(timeout=timeout)
            with contextlib.suppress(Exception):
                cluster.close(timeout=timeout)
            dist_log.setLevel(level)


def _quiet_distributed() -> None:
    """Silence ``distributed``'s loggers in this (worker) process: its cluster is closing."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


#: Dask settings of the embedded cluster's workers, over this process's: no statistical profiler.
#: It feeds the dashboard, which the embedded cluster does not serve, and it costs every worker's
#: event loop a walk of every thread's stack each 10 ms: 0.6 s of CPU per worker per 100 s at
#: D = 0 (its main thread 3.8 -> 3.3 s; docs/benchmarks.md, "Session 9"). An existing cluster
#: keeps its own.
EMBEDDED_WORKER_CONFIG = {"worker": {"profile": {"enabled": False}}}


def _embedded_worker_config() -> dict[str, Any]:
    """The ``config`` each Nanny of the embedded cluster gives the worker processes it starts and
    restarts: this process's ``distributed`` settings (a copy) with :data:`EMBEDDED_WORKER_CONFIG`
    over them. A Nanny merges its ``config`` over the global one key by key at the top level only,
    and keeps it for restarts, so the whole ``distributed`` section is passed."""
    import copy

    import dask

    return {
        "distributed": dask.config.update(
            copy.deepcopy(dask.config.get("distributed")), copy.deepcopy(EMBEDDED_WORKER_CONFIG)
        )
    }


def _local_cluster(cfg: Config) -> Any:
    """The embedded ``LocalCluster``: ``round.workers`` processes, everything on 127.0.0.1, with
    the allocator settings (``round.malloc_*``, ``round.arrow_pool``) in them and in this process
    (:mod:`batchcrawl.procmem`), and :data:`EMBEDDED_WORKER_CONFIG` in the workers."""
    from distributed import LocalCluster

    procmem.apply_here(cfg.round)
    with procmem.spawn_environ(cfg.round):
        # each Nanny reads the environment here, once: a restarted worker gets it too
        return LocalCluster(
            n_workers=cfg.round.workers,
            threads_per_worker=cfg.round.threads_per_worker,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            # no dashboard, but the scheduler's HTTP server still listens: on loopback, on an
            # ephemeral port (its default is the fixed :8787 on every interface)
            scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
            silence_logs=logging.WARNING,
            config=_embedded_worker_config(),
        )


def cluster_url(crawl_url: str) -> str:
    """``crawl_url`` as every Dask worker must see it: a local path made absolute (a worker's
    working directory is not ours), a remote URL unchanged."""
    crawl = CrawlDir(crawl_url)
    return os.path.abspath(crawl.root) if crawl.local else crawl_url


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
) -> list[dict[str, Any]]:
    """Run up to ``rounds`` rounds on one cluster, reusing the shard actors (``batchcrawl crawl``).

    Stops early when nothing is due (after at least one round). Raises :class:`NothingDue` if the
    very first round has nothing due. ``pipeline`` (default ``round.pipeline``): fetch each round
    while the one before is committed (:func:`batchcrawl.pipeline.run_pipelined`). ``max_seconds``:
    start no round after this many seconds, and end each round's fetch by then.
    """
    summaries = []
    crawl_url = cluster_url(crawl_url)
    pipelined = cfg.round.pipeline if pipeline is None else pipeline
    deadline = Deadline.after(max_seconds)  # the cluster's start-up counts
    # crawl.duckdb is written by child processes while the rounds run: the driver never loads
    # DuckDB; leaving waits for the last one
    with dask_client(cfg, scheduler) as client, views.background_refresh():
        crawler = Crawler(crawl_url, client, deadline=deadline)
        try:
            if pipelined:
                return run_pipelined(crawler, cfg, rounds, progress=progress, on_round=on_round,
                                     on_step=on_step, max_seconds=deadline.left())  # fmt: skip
            for i in range(rounds):
                if i > 0 and not deadline.allows_a_round():
                    break
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
