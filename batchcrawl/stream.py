"""``batchcrawl crawl --stream``: fetch workers that never stop, the frontier updated in
micro-batches (docs/design.md §8; BUbiNG's distributor and virtualizer over IRLbot's DRUM).

The batch driver (:mod:`batchcrawl.round`) waits for every shard at the end of each round. Here the
shard actors keep fetching (:meth:`FetchWorker.stream_start`: the fetch threads never join), and
every ``stream.flush_interval_s`` seconds the driver runs one **micro-batch**, numbered as a round:

1. **take** — each shard hands over the rows and links fetched since the last take, written as the
   same partitioned ``fetched``/``links``/``edges`` files a round writes
   (:meth:`StreamShardActor.take_batch`), with the url keys it finished and how many URLs it
   still holds;
2. **update** — only the buckets the micro-batch touches get a delta run (cost ∝ micro-batch);
3. **commit** — a generation (a checkpoint) when the micro-batch holds anything;
4. **select** — generate's per-bucket selection and caps, over the buckets that changed or still
   hold due URLs not handed out, excluding the URLs **leased** (handed out, not yet reported);
   each shard is topped up to at most ``fetch.max_queued_urls`` URLs (BUbiNG's virtualizer: the
   rest waits in the frontier).

Every checkpoint also holds the ``hosts`` rows of the hosts topped up or fetched since the last one
(politeness clocks, Crawl-delays, robots.txt, trap flags, counters), as a round's commit does: a
restart reloads them and fetches no robots.txt again while its copy is live.

Leases live only in the driver's memory and are never persisted: a crash leaves the leased URLs
queued in the committed frontier, and the next run fetches them again. Requests made after the
last checkpoint were never persisted either, so every host gets a full politeness delay before its
first fetch in a stream (:meth:`FetchWorker.cool_down`, as a batch round does after a crash).

Every micro-batch with rows is committed (a checkpoint every ``flush_interval_s``): a commit is a
manifest and the DuckDB views (measured in docs/benchmarks.md), and it keeps every file name unique
(delta runs are named by generation). The stream ends when nothing is due and nothing is leased,
after ``max_seconds``, or on SIGINT/SIGTERM; all of them take a last micro-batch, commit it,
release the lock and return the summary.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from batchcrawl.config import Config
from batchcrawl.console.signals import StopRequest
from batchcrawl.frontier import content as content_mod
from batchcrawl.frontier import generate as gen_mod
from batchcrawl.frontier import hosts as host_runs
from batchcrawl.frontier import runs
from batchcrawl.frontier.updatedb import updatedb
from batchcrawl.records import FetchItem
from batchcrawl.round import (
    Crawler,
    ShardActor,
    cluster_url,
    compact_buckets,
    compacted_count,
    dask_client,
    dask_mapper,
    outcome_counts,
    round_summary,
)
from batchcrawl.scope.filters import FilterChain
from batchcrawl.store import schemas, views
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.lock import WriterLock
from batchcrawl.urls import bucket_ids

log = logging.getLogger(__name__)


class StreamShardActor(ShardActor):
    """A :class:`~batchcrawl.round.ShardActor` in streaming mode: its fetch worker runs without
    stopping; the driver tops it up and takes its micro-batches."""

    def start(
        self,
        *,
        cfg: Config,
        round: int,
        host_files: list[str],
        seed_hosts: set[str],
        seed_domains: set[str],
        content_files: list[str],
    ) -> None:
        """Open the worker (hosts' state from ``host_files``, content seen from the ``content``
        files ``content_files``) and start its fetch threads, the rows recorded as micro-batch
        ``round``."""
        crawl = CrawlDir.open(self.crawl_url)
        self.open_worker(crawl, cfg, host_files, seed_hosts, seed_domains)
        self.worker.know_content(
            content_mod.load_seen(crawl, content_files, cfg.dedup.max_seen_digests)
        )
        self._cooled: set[str] = set()
        # hosts whose state may have changed since their last hosts row was written: those
        # topped up (robots.txt, Crawl-delay, politeness clock) and those fetched
        self._touched: set[str] = set()
        self.worker.stream_start(round)

    def top_up(self, rows: list[dict[str, Any]]) -> int:
        """Queue fetch items (``fetchlists`` columns, per-host breadth-first order). A host seen
        for the first time in this stream waits a full politeness delay first. Returns the URLs
        now held."""
        items = [FetchItem(**row) for row in rows]
        self.restore_returning(items)
        hosts = {i.host for i in items}
        new_hosts = hosts - self._cooled
        self.worker.cool_down(new_hosts)
        self._cooled |= new_hosts
        self._touched |= hosts
        self.worker.stream_add(items)
        return self.worker.stream_held

    def take_batch(
        self,
        *,
        round: int,
        next_round: int,
        generation: int,
        buckets: int,
        final: bool,
        force: bool,
    ) -> dict[str, Any]:
        """Micro-batch ``round``: the rows and links since the last take, written as round
        ``round``'s files of this shard (uncommitted), and the ``hosts`` file for ``generation``.
        Nothing is written when the micro-batch is empty unless ``force``. ``final`` stops the
        fetch threads (the URLs still queued are dropped: they stay due in the frontier).

        Returns ``fetched``/``links``/``edges`` (:class:`Partitioned` or None), ``hosts`` (entry
        or None),
        ``done_keys`` (url keys finished), ``held``, ``counters``, ``outcomes``, ``unfetched``."""
        out = self.worker.stream_stop() if final else self.worker.stream_take(next_round)
        for row in out.fetched:  # a failure row may have been stamped just before the take
            row["round"] = round
        out.links["round"] = [round] * len(out.links["round"])
        out.edges["round"] = [round] * len(out.edges["round"])
        result: dict[str, Any] = {
            "shard": self.shard,
            "fetched": None,
            "links": None,
            "edges": None,
            "hosts": None,
            "done_keys": [row["url_key"] for row in out.fetched],
            "held": 0 if final else self.worker.stream_held,
            "counters": dict(out.counters),
            "outcomes": outcome_counts(out),
            "unfetched": len(out.unfetched),
        }
        # taken before write_facts, which empties the rows
        self._touched |= {row["url_host_name"] for row in out.fetched}
        if out.fetched or out.links["round"] or force or self._touched:
            crawl = CrawlDir.open(self.crawl_url)
            facts = self.write_facts(crawl, out, round, buckets)
            result["fetched"], result["links"], result["edges"] = facts
            result["hosts"] = self.write_hosts(crawl, generation, self._touched)
            self._touched = set()
        return result


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
        Called with ``"take"``, ``"update"``, ``"commit"`` as each step of a micro-batch with
        rows starts (tests use it to crash a stream at a known point, as ``run_rounds`` does).
    """

    def __init__(self, crawler: Crawler, crawl: CrawlDir, lock: WriterLock, cfg: Config,
                 stop: StopRequest, clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], float] = time.time,
                 progress: Callable[[dict[str, Any]], None] | None = None,
                 on_step: Callable[[str], None] | None = None) -> None:  # fmt: skip
        self.crawler, self.crawl, self.lock, self.cfg = crawler, crawl, lock, cfg
        self.stop, self.clock, self.now = stop, clock, now
        self.progress = progress or (lambda snap: None)
        self.on_step = on_step or (lambda step: None)
        self.held_max = 0  # most URLs one shard held right after a top-up (the peak)
        self.manifest = crawl.manifest()
        self.buckets = runs.bucket_files(self.manifest)
        self.round = self.manifest.round + 1  # the micro-batch being fetched
        self.leased: set[int] = set()
        self.held = {s: 0 for s in range(cfg.fetch.shards)}
        self.dirty: set[int] = {bf.bucket for bf in self.buckets}
        self.refiltered: pa.Table | None = None
        self.delayed: list[pa.Table] = []  # BEAST's delays since the last micro-batch
        self.refilter_next = gen_mod.recorded_fingerprint(
            self.manifest.summary
        ) != gen_mod.filters_fingerprint(cfg)
        self.totals: Counter = Counter()
        self.outcomes: Counter = Counter()
        self.seconds: Counter = Counter()
        self.first_round = self.round
        self.commits = 0
        self.content: Counter = Counter()
        self.t_start = clock()

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
        seeds = self.crawler.seed_scope(self.crawl, self.manifest)
        self.actors = self.crawler.shard_actors(self.cfg, StreamShardActor)
        host_files = self.manifest.files("hosts")
        for f in [a.start(cfg=self.cfg, round=self.round, host_files=host_files,
                          seed_hosts=seeds[0], seed_domains=seeds[1],
                          content_files=self.manifest.files("content"))
                  for a in self.actors.values()]:  # fmt: skip
            f.result()
        self.hand_out()
        while True:
            wait = min(self.cfg.stream.flush_interval_s, deadline - self.clock())
            if self.stop.wait(wait):
                reason = self.stop.signal_name
                break
            if self.clock() >= deadline:
                reason = "max_seconds"
                break
            self.micro_batch(final=False)
            handed = self.hand_out(full=not self.leased)
            self.progress(self.snapshot())
            if handed == 0 and not self.leased:
                reason = "nothing_due"
                break
        self.micro_batch(final=True)
        return {
            "step": "stream",
            "stopped_by": reason,
            "rounds": [self.first_round, self.round - 1],
            "generation": self.manifest.generation,
            "checkpoints": self.commits,
            "attempts": self.totals["attempts"],
            "responses": self.totals["responses"],
            "stored": self.totals["stored"],
            "new_urls": self.totals["new_urls"],
            "outcomes": dict(sorted(self.outcomes.items())),
            "not_fetched": self.totals["not_fetched"],
            "errors": {
                k: v
                for k, v in sorted(self.outcomes.items())
                if k not in ("ok", "redirect", "not_modified")
            },
            "content": dict(self.content),
            "held_max": self.held_max,
            "seconds_by_step": {k: round(v, 3) for k, v in sorted(self.seconds.items())},
            "elapsed_s": round(self.clock() - t_start, 3),
        }

    # -- one micro-batch ------------------------------------------------------------------------
    def micro_batch(self, final: bool) -> None:
        """Take every shard's micro-batch, update the touched buckets, commit if anything came."""
        t0 = self.clock()
        rnd, gen = self.round, self.manifest.generation + 1
        # every shard's hosts file in the first commit; an empty last take writes nothing, so a
        # batch round after a clean stop does not take it for a crashed one (round.started_before)
        force = self.commits == 0
        self.on_step("take")
        results = [f.result() for f in [
            a.take_batch(round=rnd, next_round=rnd + 1, generation=gen,
                         buckets=self.manifest.buckets, final=final, force=force)
            for a in self.actors.values()
        ]]  # fmt: skip
        self.round += 1
        for r in results:
            self.leased.difference_update(r["done_keys"])
            self.held[r["shard"]] = r["held"]
        t1 = self.clock()
        fparts = [r["fetched"] for r in results if r["fetched"] is not None]
        lparts = [r["links"] for r in results if r["links"] is not None]
        eparts = [r["edges"] for r in results if r["edges"] is not None]
        delayed = pa.concat_tables(self.delayed) if self.delayed else None
        if (not any(p.entry.rows for p in fparts + lparts) and self.refiltered is None
                and delayed is None and not any(r["hosts"] for r in results)):  # fmt: skip
            return  # nothing to merge: no generation for an empty micro-batch
        touched = {b for p in fparts + lparts for b in p.row_groups}
        for moved in (self.refiltered, delayed):
            if moved is not None:
                touched |= set(bucket_ids(moved.column("url_key").to_numpy(),
                                          self.manifest.buckets).tolist())  # fmt: skip
        mapper = dask_mapper(self.crawler.client)
        self.on_step("update")
        merged = updatedb(
            self.crawl, self.manifest, rnd, fparts, lparts, eparts, self.cfg, self.now(),
            mapper=mapper, refiltered=self.refiltered, delayed=delayed, buckets=touched,
        )  # fmt: skip
        updated, content, indegree = merged.frontier, merged.content, merged.indegree
        compacted = compact_buckets(self.crawler.client, self.crawl.url, updated.buckets, gen,
                                    self.cfg)  # fmt: skip
        for bf in compacted:
            self.buckets[bf.bucket] = bf
        self.dirty |= touched
        self.refiltered = None
        self.delayed = []
        t2 = self.clock()
        summary = round_summary(
            rnd, gen, results, updated.summary.to_json(), {"step": "stream"},
            compacted=compacted_count(updated, compacted),
            rerun_after_crash=False, steps={"take": t1 - t0, "update": t2 - t1},
            elapsed_s=t2 - t0,
        )  # fmt: skip
        summary.update(mode="stream", time_limit_hit=False,
                       filters_fingerprint=gen_mod.filters_fingerprint(self.cfg),
                       content=content.to_json(), indegree=indegree.to_json())  # fmt: skip
        m = self.manifest
        self.on_step("commit")
        self.lock.check()
        self.manifest = self.crawl.commit(
            m,
            {
                "frontier": runs.frontier_listing(self.buckets),
                "hosts": host_runs.next_listing(
                    self.crawl,
                    m.tables.get("hosts", ()),
                    [r["hosts"] for r in results],
                    gen,
                    self.cfg,
                ),
                "fetched": list(m.tables.get("fetched", ())) + [p.entry for p in fparts],
                "links": list(m.tables.get("links", ())) + [p.entry for p in lparts],
                "edges": list(m.tables.get("edges", ())) + [p.entry for p in eparts],
                "content": content.listing,
                "domainlinks": indegree.domainlinks,
                "indegree": indegree.indegree,
            },
            summary,
            round=rnd,
        )
        self.commits += 1
        self.seconds["take"] += t1 - t0
        self.seconds["update"] += t2 - t1
        self.seconds["commit"] += self.clock() - t2
        for k in ("attempts", "responses", "stored", "new_urls", "not_fetched"):
            self.totals[k] += summary[k]
        self.outcomes.update(summary["outcomes"])
        self.content.update(summary["content"])

    # -- hand out newly due URLs ----------------------------------------------------------------
    def hand_out(self, full: bool = False) -> int:
        """Select the due, unleased URLs of the dirty buckets (every bucket if ``full``), cap
        them as generate does and top each shard up to ``fetch.max_queued_urls``. Returns the
        URLs handed out; buckets with due URLs left over stay dirty."""
        t0 = self.clock()
        todo = [self.buckets[b] for b in sorted(range(len(self.buckets)) if full else self.dirty)]
        self.dirty = set()
        if not todo:
            return 0
        k = self.manifest.buckets
        budgets = gen_mod.domain_budgets(self.crawl, self.manifest, self.cfg)  # read once
        task = functools.partial(gen_mod.select_task, self.crawl.url, round=self.round,
                                 cfg=self.cfg, now=self.now(), budgets=budgets)  # fmt: skip
        selections = dask_mapper(self.crawler.client)(task, todo)
        leased = pa.array(np.fromiter(self.leased, np.uint64, len(self.leased)), pa.uint64())
        unleased = []
        for (rows, cands, counts, late), bf in zip(selections, todo, strict=True):
            cands, _ = gen_mod.drop_leased(cands, leased)
            if any(counts.get(c) for c in ("capped_host", "capped_domain", "capped_round")):
                self.dirty.add(bf.bucket)
            unleased.append((rows, cands, counts, late))
        selected, _, _, late = gen_mod.fold_candidates(unleased, self.cfg, budgets)
        if late.num_rows:  # BEAST: over-budget URLs wait; the next micro-batch's update moves them
            self.delayed.append(late)
        if self.refilter_next and selected.num_rows:
            selected, refiltered = gen_mod.refilter(
                selected, FilterChain.from_config(self.cfg.filters)
            )
            self.refiltered = refiltered if refiltered.num_rows else None
            self.refilter_next = False
        lists = gen_mod.assign_fetchlists(
            selected, self.round, self.cfg, gen_mod.host_ips(self.crawl, self.manifest, self.cfg)
        )
        handed, pending = 0, []
        given: list[np.ndarray] = []
        for s, table in lists.items():
            room = max(0, self.cfg.fetch.max_queued_urls - self.held.get(s, 0))
            if table.num_rows > room:  # the rest waits in the frontier (BUbiNG's virtualizer)
                table = table.sort_by([("discovered_round", "ascending"),
                                       ("discovered_seq", "ascending")]).slice(0, room)  # fmt: skip
                table = table.sort_by([("host", "ascending"), ("discovered_round", "ascending"),
                                       ("discovered_seq", "ascending")])  # fmt: skip
            if table.num_rows == 0:
                continue
            keys = np.asarray(table.column("url_key").to_numpy(), dtype=np.uint64)
            given.append(keys)
            self.leased.update(keys.tolist())
            handed += table.num_rows
            pending.append(
                (s, self.actors[s].top_up(table.select(schemas.fetch_item_columns()).to_pylist()))
            )
        for s, f in pending:
            self.held[s] = f.result()
            self.held_max = max(self.held_max, self.held[s])
        left = selected.num_rows - handed
        if left > 0:  # due URLs not handed out: their buckets are selected again next time
            out = np.concatenate(given) if given else np.zeros(0, np.uint64)
            rest = np.asarray(selected.column("url_key").to_numpy(), dtype=np.uint64)
            rest = rest[~np.isin(rest, out)]
            self.dirty |= set(np.unique(bucket_ids(rest, k)).tolist())
        self.seconds["select"] += self.clock() - t0
        return handed


def run_stream(
    crawl_url: str,
    cfg: Config,
    stop: StopRequest,
    *,
    max_seconds: float | None = None,
    scheduler: str | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
    on_step: Callable[[str], None] | None = None,
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

    Returns
    -------
    dict
        The summary: ``stopped_by`` (``nothing_due``, ``max_seconds``, ``SIGINT``, ``SIGTERM``),
        ``rounds`` (first and last micro-batch), ``generation``, ``checkpoints``, ``attempts``,
        ``responses``, ``stored``, ``errors`` (by outcome), ``content`` (dedup counts),
        ``held_max`` (the most URLs a shard held: at most ``fetch.max_queued_urls``) ...
    """
    crawl_url = cluster_url(crawl_url)
    with dask_client(cfg, scheduler) as client, views.background_refresh():  # see run_rounds
        crawler = Crawler(crawl_url, client)
        crawl = CrawlDir.open(crawl_url)
        try:
            with WriterLock(crawl, owner="batchcrawl crawl --stream") as lock:
                stream = Stream(crawler, crawl, lock, cfg, stop, progress=progress,
                                on_step=on_step)  # fmt: skip
                return stream.run(max_seconds)
        finally:
            crawler.close_actors()
