"""The shard actor: one long-lived Dask actor per shard holding that shard's fetch worker across
rounds or a whole stream (docs/design.md §6, §7, §8). A round calls :meth:`ShardActor.fetch` once
per fetch list; a stream starts :class:`StreamShardActor`'s worker once, tops it up and takes its
micro-batches. Both hand back a :class:`~batchcrawl.engine.report.ShardReport`."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
from fsspec.implementations.dirfs import DirFileSystem

from batchcrawl import procmem
from batchcrawl.config import Config, PolitenessSection
from batchcrawl.engine.report import ShardReport
from batchcrawl.extract.atfetch import TextsAtFetch
from batchcrawl.fetch.directlinks import DirectLinks
from batchcrawl.fetch.spill import FactFiles
from batchcrawl.fetch.worker import FetchWorker, ShardRun
from batchcrawl.frontier import content as content_mod
from batchcrawl.frontier import hosts as host_runs
from batchcrawl.politeness import policy_of
from batchcrawl.records import FetchItem
from batchcrawl.ring import HashRing, route_name
from batchcrawl.store import schemas, shuffle
from batchcrawl.store.crawldir import CrawlDir, FileEntry
from batchcrawl.store.shuffle import Partitioned
from batchcrawl.urls import domain_of


def host_shard(host: str, ip: str | None, cfg: Config, ring: HashRing) -> int:
    """The shard owning ``host`` under ``generate.partition_by`` and the politeness groups
    (:func:`batchcrawl.ring.route_name`, the routing generate uses)."""
    domain = domain_of(host)
    group = policy_of(cfg.politeness).route(host, domain, ip)
    return ring.shard_for(route_name(host, domain, ip, cfg.generate.partition_by, group))


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
        self.tail_release = threading.Event()  # the running fetch's (fetch)

    def progress(self) -> dict[str, float]:
        """Live counters of the running fetch (for the progress display)."""
        return dict(self.counters)

    async def fetch(self, **kwargs: Any) -> ShardReport:
        """Run :meth:`fetch_sync` off the event loop, so :meth:`progress` and :meth:`end_tail`
        stay answerable. The run's tail is held until :meth:`end_tail`
        (:meth:`batchcrawl.round.Crawler.wait_fetch` releases it)."""
        self.counters = Counter()  # progress() never reports the previous round's counters
        self.tail_release = release = threading.Event()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            None, lambda: self.fetch_sync(**kwargs, tail_release=release)
        )

    def end_tail(self) -> None:
        """Let the running fetch end once its tail rule fires (at once if it has: its progress
        counters then hold ``tail_held``); the driver calls it when no other shard of the round
        still fetches outside its tail."""
        self.tail_release.set()

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
        tail_release: threading.Event | None = None,
    ) -> ShardReport:
        """Fetch this shard's fetch list of ``round`` and write its outputs (uncommitted).
        ``cold``: every host of the list and of ``cool_hosts`` waits a full delay first.
        ``ends_at_unix``: the run also ends by this wall-clock time (epoch seconds; the driver's
        :class:`~batchcrawl.pipeline.Deadline`), besides ``fetch.time_limit_s`` from its start.
        ``tail_release``: the run's tail is held until it is set (None: not held;
        :meth:`FetchWorker.run <batchcrawl.fetch.worker.FetchWorker.run>`)."""
        started = time.monotonic()
        shuffle.FOOTERS.clear()  # the last update's fact files: not read again
        crawl = CrawlDir.open(self.crawl_url)
        self.open_worker(crawl, cfg, host_files, seed_hosts, seed_domains)
        table = crawl.read_table(
            "fetchlists", [fetchlist], columns=list(schemas.fetch_item_columns())
        )
        items = fetch_items(table)
        del table
        touched = {i.host for i in items}
        rows_read = self.restore_returning(items)
        if cold:
            self.worker.cool_down(touched | set(cool_hosts))
        if tuple(content_files) != self.content_files:  # content seen in earlier rounds
            self.worker.know_content({})  # the old map goes before the new one is built
            seen = content_mod.load_seen(crawl, list(content_files), cfg.dedup.max_seen_digests)
            self.worker.know_content(seen)
            self.content_files = tuple(content_files)
        startup_s = time.monotonic() - started
        limit = cfg.fetch.time_limit_s
        if ends_at_unix is not None:
            limit = max(0.0, min(limit, ends_at_unix - time.time()))
        handed = [items]  # handed over, not kept: a fetched item is freed during the run
        del items
        with FactFiles(crawl, round, self.shard, buckets) as facts:
            run = self.worker.run(handed.pop(), round, time_limit_s=limit,
                                  progress=self._on_progress, spill=trimmed(facts.spill),
                                  tail_release=tail_release)  # fmt: skip
            fetched, links, edges = facts.finish(run)  # the spills and the rows since the last
        hosts = self.write_hosts(crawl, generation, touched)
        result = ShardReport(
            shard=self.shard, fetched=fetched, links=links, edges=edges, hosts=hosts,
            text=run.text_files, counters=dict(run.counters), outcomes=dict(facts.outcomes),
            unfetched=len(run.unfetched), spills=facts.spills, spill_s=facts.seconds,
            host_rows={"kept": len(self.known_hosts), "read_back": rows_read},
            seconds=time.monotonic() - started, fetch_seconds=run.seconds, startup_s=startup_s,
            idle_s=run.idle_s, tail_s=run.tail_s,
            warcs_without_rows=[f for f in run.warc_files if f not in facts.warc_names],
        )  # fmt: skip
        del run  # the round's rows: give their memory back before the next round
        procmem.trim()
        return result

    # -- helpers shared with the streaming actor ------------------------------------------------
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
        self.worker.extract_at_fetch(TextsAtFetch if cfg.extract.at_fetch else None)
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
    columns = [_column_values(table, c) for c in schemas.fetch_item_columns()]
    return list(map(FetchItem, *columns))


#: Fetch-list columns whose values repeat from item to item: a host's URLs share one host and
#: domain string instead of one copy each (~130 bytes an item with 20-character names).
SHARED_VALUES = ("host", "domain")


def _column_values(table: pa.Table, name: str) -> list[Any]:
    values = table.column(name).to_pylist()
    return _shared(values) if name in SHARED_VALUES else values


def _shared(values: list[Any]) -> list[Any]:
    """``values`` with each distinct value one object."""
    one: dict[Any, Any] = {}
    return [one.setdefault(v, v) for v in values]


def trimmed(spill: Callable[[ShardRun], None]) -> Callable[[ShardRun], None]:
    """``spill`` followed by :func:`batchcrawl.procmem.trim`: the rows a spill wrote were freed
    among the fetch threads' live buffers, and glibc keeps those pages in its arenas until
    trimmed, so a worker's peak built on every spill of the round (its share of the tree's peak
    on ``bench_peers.py``: ~510 -> ~464 MB, docs/benchmarks.md, issue 33)."""

    def spill_and_trim(rows: ShardRun) -> None:
        spill(rows)  # empties rows' lists (FactFiles.spill): their objects are freed here
        procmem.trim()

    return spill_and_trim


def stream_items(rows: list[dict[str, Any]]) -> list[FetchItem]:
    """A stream's top-up rows (``fetchlists`` columns, one dict each) as :class:`FetchItem`
    objects, in order, sharing their :data:`SHARED_VALUES` as :func:`fetch_items` does (a
    stream holds up to ``fetch.max_queued_urls`` of them for many micro-batches)."""
    one: dict[Any, Any] = {}
    return [FetchItem(**{**row, **{n: one.setdefault(row[n], row[n]) for n in SHARED_VALUES}})
            for row in rows]  # fmt: skip


class StreamShardActor(ShardActor):
    """A :class:`ShardActor` in streaming mode: its fetch worker runs without stopping; the
    driver (:mod:`batchcrawl.stream`) tops it up and takes its micro-batches."""

    def start(
        self,
        *,
        cfg: Config,
        round: int,
        host_files: list[str],
        seed_hosts: set[str],
        seed_domains: set[str],
        content_files: list[str],
        cold: bool = True,
    ) -> None:
        """Open the worker (hosts' state from ``host_files``, content seen from the ``content``
        files ``content_files``) and start its fetch threads, the rows recorded as micro-batch
        ``round``. ``cold``: the last writer died, so every host waits a full politeness delay
        before its first fetch in this stream (its last requests were never persisted)."""
        crawl = CrawlDir.open(self.crawl_url)
        self.open_worker(crawl, cfg, host_files, seed_hosts, seed_domains)
        self.worker.know_content(
            content_mod.load_seen(crawl, content_files, cfg.dedup.max_seen_digests)
        )
        self._cold = cold
        self._cooled: set[str] = set()
        # hosts whose state may have changed since their last hosts row was written: those
        # topped up (robots.txt, Crawl-delay, politeness clock) and those fetched
        self._touched: set[str] = set()
        self.worker.stream_start(round, self._direct_links(crawl, cfg, host_files))

    def _direct_links(
        self, crawl: CrawlDir, cfg: Config, host_files: list[str]
    ) -> DirectLinks | None:
        """Which found links this shard queues at once (``stream.direct_links``), None when off:
        never for a host with a committed ``hosts`` row (:mod:`batchcrawl.fetch.directlinks`)."""
        if not cfg.stream.direct_links or cfg.generate.budget == "star":
            return None
        old = crawl.read_table("hosts", host_files, columns=["host"]) if host_files else None
        policy, worker = policy_of(cfg.politeness), self.worker
        return DirectLinks(
            old.column("host").to_pylist() if old is not None else [],
            host_cap=policy.urls_per_round, shard_cap=cfg.fetch.max_queued_urls,
            blocked=lambda host: (worker.book.near.trap(host) is not None
                                  or worker.parts.holds.get(host) is not None),
        )  # fmt: skip

    def set_politeness(self, politeness: PolitenessSection) -> None:
        """Use a changed ``[politeness]`` section from now on (a stream's next micro-batch,
        :mod:`batchcrawl.engine.reload`): the workbench takes it in place, without breaking a
        delay (:meth:`~batchcrawl.fetch.workbench.Workbench.configure`)."""
        self.cfg = dataclasses.replace(self.cfg, politeness=politeness)
        self.worker.set_politeness(politeness)

    def top_up(self, rows: list[dict[str, Any]]) -> int:
        """Queue fetch items (``fetchlists`` columns, per-host breadth-first order). After a
        writer that died (``cold`` at :meth:`start`), a host seen for the first time in this
        stream waits a full politeness delay first. Returns the URLs now held."""
        items = stream_items(rows)
        self.restore_returning(items)
        hosts = {i.host for i in items}
        if self._cold:
            new_hosts = hosts - self._cooled
            self.worker.cool_down(new_hosts)
            self._cooled |= new_hosts
        self._touched |= hosts
        self.worker.stream_add(items)
        return self.worker.stream_held

    def hosts_wait(self) -> str | None:
        """``"finished"`` (every URL given is done, rows wait), ``"dry"`` (dry hosts given new
        links would make the next micro-batch faster) or None
        (:meth:`FetchWorker.stream_hosts_wait`): the driver may start the micro-batch early."""
        return self.worker.stream_hosts_wait()

    def take_batch(
        self,
        *,
        round: int,
        next_round: int,
        generation: int,
        buckets: int,
        final: bool,
        force: bool,
    ) -> ShardReport:
        """Micro-batch ``round``: the rows and links since the last take, written as round
        ``round``'s files of this shard (uncommitted), and the ``hosts`` file for ``generation``
        (the hosts topped up or fetched since the last one). Nothing is written when the
        micro-batch is empty and no host was touched, unless ``force``. ``final`` stops the
        fetch threads (the URLs still queued are dropped: they stay due in the frontier)."""
        shuffle.FOOTERS.clear()  # the last micro-batch's fact files: merged, not read again
        out = self.worker.stream_stop() if final else self.worker.stream_take(next_round)
        for row in out.fetched:  # a failure row may have been stamped just before the take
            row["round"] = round
        out.links["round"] = [round] * len(out.links["round"])
        out.edges["round"] = [round] * len(out.edges["round"])
        done = [row["url_key"] for row in out.fetched]
        report = ShardReport(
            shard=self.shard, counters=dict(out.counters), outcomes=outcome_counts(out),
            text=out.text_files, unfetched=len(out.unfetched), done_keys=done,
            direct=out.direct,
            held=0 if final else self.worker.stream_held, warc_open=out.warc_open,
        )  # fmt: skip
        named = {row.get("warc_filename") for row in out.fetched}  # a stream's open file: once
        report.warcs_without_rows = [f for f in out.warc_files if f not in named]  # it has pages
        # too, it stays listed, which only keeps it
        (report.found_keys, report.found_at, report.fetched_keys,
         report.fetched_at) = discoveries(out)  # fmt: skip
        hosts = {row["url_key"]: row["url_host_name"] for row in out.fetched}
        report.fetched_hosts = [hosts[k] for k in report.fetched_keys.tolist()]
        # taken before write_facts, which empties the rows
        self._touched |= {row["url_host_name"] for row in out.fetched}
        if out.fetched or out.links["round"] or force or self._touched:
            crawl = CrawlDir.open(self.crawl_url)
            report.fetched, report.links, report.edges = self.write_facts(
                crawl, out, round, buckets
            )
            report.hosts = self.write_hosts(crawl, generation, self._touched)
            self._touched = set()
        del out  # the micro-batch's rows: back to the system, as after a round's spill
        procmem.trim()
        return report


def outcome_counts(run: ShardRun) -> dict[str, int]:
    """Fetch attempts of ``run`` by outcome, from the rows themselves: the worker's counters also
    hold robots.txt states whose names can equal an outcome's (``robots_unavailable``)."""
    return dict(Counter(row["outcome"] for row in run.fetched))


def discoveries(run: ShardRun) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """When ``run``'s URLs were found and fetched, epoch seconds (a stream's discovery-to-fetch
    latency): ``(found keys, found at, fetched keys, fetched at)``. A link target is found at the
    fetch time of the page it is on (the earliest, for a target on several pages of ``run``);
    only links in scope and followed count (``filter_reason`` null, not ``nofollow``)."""
    at = {row["url_key"]: row["fetch_time"].timestamp() for row in run.fetched}
    found: dict[int, float] = {}
    cols = run.links
    for src, dst, why, nofollow in zip(cols["src_url_key"], cols["dst_url_key"],
                                       cols["filter_reason"], cols["nofollow"], strict=True):  # fmt: skip
        t = at.get(src)
        if t is None or why is not None or nofollow:
            continue
        if dst not in found or t < found[dst]:
            found[dst] = t
    return (
        np.fromiter(found.keys(), np.uint64, len(found)),
        np.fromiter(found.values(), np.float64, len(found)),
        np.fromiter(at.keys(), np.uint64, len(at)),
        np.fromiter(at.values(), np.float64, len(at)),
    )
