"""The fetch worker of one shard: a small facade over the fetch stages (docs/design.md §6).

A :class:`FetchWorker` owns every host of its shard. For one round it takes the shard's fetch list
(breadth-first per host) and runs ``fetch.threads`` fetch threads over a BUbiNG workbench; the work
is split by stage, as Heritrix's ToeThread and processor chains and StormCrawler's bolts split it:

* :mod:`batchcrawl.fetch.loop`: the fetch threads and their one visit path (workbench acquire and
  release, robots.txt, sitemap and page fetches);
* :mod:`batchcrawl.fetch.pages`: the page processor, ``(fetch item, response) -> record``
  (classify, X-Robots-Tag, parse, SimHash, dedup, WARC), with no lock and no run state;
* :mod:`batchcrawl.fetch.linksink`: the URL cache, the ``links`` and ``edges`` rows;
* :mod:`batchcrawl.fetch.hostbook`: per-host state and the ``hosts`` table mapping;
* :mod:`batchcrawl.fetch.monitor`: a batch run's monitor (progress, spill, tail, time limit).

A plain library object (tested without Dask), one per shard on a Dask worker. What must survive
the round (host next allowed times, robots.txt rules, counters) goes out by :meth:`host_rows` to the
``hosts`` table and back by :meth:`restore_hosts`; a long-lived actor keeps them in memory.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from threading import Event
from typing import Any

from batchcrawl.config import Config, PolitenessSection
from batchcrawl.fetch.dedup import ShardDedup
from batchcrawl.fetch.directlinks import DirectLinks
from batchcrawl.fetch.fetcher import Fetcher
from batchcrawl.fetch.hostbook import HostBook
from batchcrawl.fetch.idle import next_faster
from batchcrawl.fetch.linksink import LinkSink
from batchcrawl.fetch.loop import FetchLoop
from batchcrawl.fetch.monitor import run_batch
from batchcrawl.fetch.outcome import classify, mime_type
from batchcrawl.fetch.pages import PageProcessor, TextSink
from batchcrawl.fetch.parts import ShardParts
from batchcrawl.fetch.runstate import RunState, ShardRun, close_texts
from batchcrawl.fetch.tail import TailDetector
from batchcrawl.fetch.urlcache import KeyCache
from batchcrawl.fetch.workbench import Workbench
from batchcrawl.records import FetchItem

__all__ = ["FetchWorker", "ShardRun", "TailDetector", "classify", "mime_type"]


class FetchWorker:
    """The fetch worker of one shard.

    Parameters
    ----------
    cfg
        The crawl's configuration (``fetch``, ``politeness``, ``robots``, ``network``, ``filters``,
        ``dedup``, ``sitemaps``, ``crawl`` sections are used).
    shard
        Shard number this worker owns.
    fs
        fsspec filesystem rooted at the crawl directory (a ``DirFileSystem``), for the WARC files.
    seed_hosts, seed_domains
        The seeds' hosts and pay-level domains, for the scope filters (``filters.seed_scope``).
    clock
        Monotonic clock in seconds (politeness); ``wall`` the wall clock (timestamps).

    A worker may live for many rounds (a Dask actor): :meth:`reconfigure` gives it the next round's
    configuration, and each :meth:`run` first forgets the idle hosts it no longer serves
    (:meth:`forget_idle_hosts`), so its memory follows the hosts of the current round, not every host
    it has ever fetched.
    """

    def __init__(
        self,
        cfg: Config,
        shard: int,
        fs: Any,
        *,
        seed_hosts: Iterable[str] = (),
        seed_domains: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.parts = ShardParts(cfg, shard, fs, clock, wall, seed_hosts, seed_domains)
        self.dedup = ShardDedup(cfg.dedup)
        self.book = HostBook(self.parts, self.dedup.near)
        self.sink = LinkSink(shard, self.parts.filters, cfg.fetch.url_cache_size,
                             cfg.fetch.canonical_memo_size)  # fmt: skip
        self.processor = PageProcessor(cfg, shard, self.dedup, wall)
        self.loop = FetchLoop(self.parts, self.processor, self.sink, self.book)
        self._stream: RunState | None = None  # the running stream (stream_start), if any
        self._stream_threads: list[Any] = []

    # the parts other modules and tests read
    @property
    def cfg(self) -> Config:
        """The configuration in use."""
        return self.parts.cfg

    @property
    def shard(self) -> int:
        """The shard this worker owns."""
        return self.parts.shard

    @property
    def clock(self) -> Callable[[], float]:
        """The monotonic clock (seconds)."""
        return self.parts.clock

    @property
    def workbench(self) -> Workbench[Any]:
        """The politeness workbench (visit states)."""
        return self.parts.workbench

    @property
    def fetcher(self) -> Fetcher:
        """The HTTP fetcher (rebuilt by :meth:`reconfigure` when HTTP settings change)."""
        return self.parts.fetcher

    @property
    def url_cache(self) -> KeyCache:
        """BUbiNG's URL cache of recently emitted url keys."""
        return self.sink.url_cache

    # -- configuration ---------------------------------------------------------------------------
    def reconfigure(
        self, cfg: Config, *, seed_hosts: Iterable[str] = (), seed_domains: Iterable[str] = ()
    ) -> None:
        """Use ``cfg`` and the seeds' scope from the next :meth:`run` on (call between runs).

        The filters are rebuilt; the HTTP stack (resolver, address policy, fetcher with its
        keep-alive connections and cookie jars) only if its settings changed; per-host state is
        kept (:meth:`ShardParts.reconfigure <batchcrawl.fetch.parts.ShardParts.reconfigure>`).
        A changed URL cache or memo size starts that cache afresh.
        """
        self.parts.reconfigure(cfg, seed_hosts, seed_domains)
        self.sink.filters = self.parts.filters
        self.sink.resize(cfg.fetch.url_cache_size, cfg.fetch.canonical_memo_size)
        self.processor.cfg = cfg

    def set_politeness(self, politeness: PolitenessSection) -> None:
        """Use a changed ``[politeness]`` section at once, also while fetch threads run (a
        stream): per-host rules, groups and delays apply from the next fetch on, without breaking
        a delay (:meth:`Workbench.configure <batchcrawl.fetch.workbench.Workbench.configure>`)."""
        cfg = dataclasses.replace(self.parts.cfg, politeness=politeness)
        self.parts.cfg = self.processor.cfg = cfg
        self.parts.workbench.configure(politeness)

    def know_content(self, seen: Mapping[str, tuple[int, str, datetime]]) -> None:
        """Use ``seen`` (``{digest: (url_key, url, fetch_time)}``, the committed ``content``
        table, :func:`batchcrawl.frontier.content.load_seen`) from the next :meth:`run` on: a
        payload already in it is a duplicate (``duplicate_of``, a WARC revisit, links skipped
        with ``dedup.skip_duplicate_links``)."""
        self.dedup.seen = seen

    def forget_idle_hosts(self, keep: Iterable[str] = ()) -> list[str]:
        """Forget every idle host not in ``keep`` whose politeness delay has passed
        (:meth:`HostBook.forget_idle <batchcrawl.fetch.hostbook.HostBook.forget_idle>`; the
        ``hosts`` table keeps their state, :meth:`restore_hosts` brings one back); returns them."""
        return self.book.forget_idle(keep)

    def knows(self, host: str) -> bool:
        """True if this worker holds state for ``host`` (restored or fetched, not forgotten since)."""
        return self.parts.workbench.visit_state(host) is not None

    def state_sizes(self) -> dict[str, int]:
        """Entries of each per-host structure: ``hosts`` (visit states), ``robots`` (robots.txt
        cache), ``addresses`` (resolver cache), ``counters`` (per-host counts). Bounded caches
        (URL cache, digests) are not per host."""
        return self.book.sizes()

    # -- state across rounds -------------------------------------------------------------------
    def restore_hosts(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Reload per-host state persisted by an earlier round (``hosts`` table rows): the
        politeness clock, live robots.txt rules, trap flags and counters. Returns the number of
        hosts restored."""
        return self.book.restore(rows)

    def cool_down(self, hosts: Iterable[str]) -> None:
        """Make each host wait a full delay before its first fetch: used after a crashed round, whose
        last requests were never persisted (so the rerun cannot break politeness)."""
        self.book.cool_down(hosts)

    def host_rows(self, hosts: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """``hosts`` table rows for the hosts this worker knows (all, or only ``hosts``): politeness
        clock as wall-clock UTC, effective delay, robots.txt cache entry, cumulative counters."""
        return self.book.rows(hosts)

    def extract_at_fetch(self, new_texts: Callable[[Any], TextSink] | None) -> None:
        """Runs hand their captures to ``new_texts(fs)`` (``extract.at_fetch``); None: off."""
        self.loop.new_texts = new_texts

    # -- one round ------------------------------------------------------------------------------
    def run(
        self,
        items: Iterable[FetchItem],
        round: int,
        *,
        time_limit_s: float | None = None,
        progress: Callable[[Counter[str]], None] | None = None,
        spill: Callable[[ShardRun], None] | None = None,
        tail_release: Event | None = None,
    ) -> ShardRun:
        """Fetch a fetch list (items in per-host breadth-first order) and return what was found.
        Stops when every item is done, after ``time_limit_s`` seconds (default
        ``fetch.time_limit_s``) or in its tail (``fetch.tail_*``; with ``tail_release``, once that
        is set: :func:`~batchcrawl.fetch.monitor.run_batch`); what is left comes back in
        ``ShardRun.unfetched``.
        ``spill``: called from this thread with the rows so far (the run then drops them) each
        time they pass ``round.spill_pages`` ``fetched`` rows (0: never; :mod:`~.spill`); the
        result holds the rows since the last spill. Raises ``OSError`` when full or read-only
        storage stopped the run (:mod:`batchcrawl.store.faults`)."""
        cfg = self.parts.cfg
        started = self.parts.clock()
        limit = cfg.fetch.time_limit_s if time_limit_s is None else time_limit_s
        items = list(items)  # emptied once queued: a fetched item goes if the caller keeps none
        self.forget_idle_hosts(keep={i.host for i in items})
        run = self.loop.new_run(round, started + limit, found_hosts=Counter(),
                                tail_release=tail_release)  # fmt: skip
        return run_batch(self.loop, run, items, started, progress=progress, spill=spill)

    def close(self) -> None:
        """Close connections and the fetcher's watchdog."""
        self.parts.fetcher.close()

    # -- streaming (docs/design.md §8; BUbiNG's never-stopping fetch threads) ---------------------
    def stream_start(self, round: int, direct: DirectLinks | None = None) -> None:
        """Start ``fetch.threads`` fetch threads that run until :meth:`stream_stop`, taking items
        given by :meth:`stream_add` as they come (an empty workbench makes them wait, not end).
        Rows are recorded as micro-batch ``round`` until :meth:`stream_take` starts the next one;
        ``direct``: which found links the threads queue at once (None: none). Raises
        ``RuntimeError`` if a stream is running."""
        if self._stream is not None:
            raise RuntimeError("stream_start: this worker is already streaming")
        run = self.loop.new_run(round, float("inf"), streaming=True, found_hosts=Counter(),
                                direct=direct)  # fmt: skip
        self._stream = run
        self._stream_threads = self.loop.start(run, self.parts.cfg.fetch.threads, "stream")

    def _streaming(self, what: str) -> RunState:
        if self._stream is None:
            raise RuntimeError(f"{what}: no stream is running; call stream_start first")
        return self._stream

    def stream_add(self, items: Iterable[FetchItem]) -> int:
        """Queue ``items`` (per-host breadth-first order) on the running stream, but those its
        threads queued themselves (:meth:`FetchLoop.given`); returns how many were queued (the
        others are recorded at once, e.g. as ``dns_error``)."""
        run = self._streaming("stream_add")
        n = self.loop.enqueue(run, self.loop.given(run, items))
        with self.loop.lock:
            run.pending += n
        return n

    @property
    def stream_held(self) -> int:
        """URLs given to the running stream and not finished yet (queued or being fetched)."""
        return max(0, self._streaming("stream_held").pending)

    def stream_hosts_wait(self) -> str | None:
        """Why the stream's threads wait for a micro-batch: ``"finished"``, every URL given is
        done and rows wait for the merge; ``"dry"``, hosts ran dry and were given new links since
        the last :meth:`stream_take`, enough to make the next micro-batch faster
        (:func:`~batchcrawl.fetch.idle.next_faster`); else None."""
        run = self._streaming("stream_hosts_wait")
        with self.loop.lock:
            if run.pending <= 0 and run.out.fetched:
                return "finished"
            found = Counter(run.found_hosts)
        return "dry" if next_faster(*self.parts.workbench.polite_capacity(found)) else None

    def stream_take(self, next_round: int) -> ShardRun:
        """What the stream produced since the last take (micro-batch ``run.round``), with a WARC
        checkpoint (:meth:`~batchcrawl.fetch.loop.FetchLoop.take`; the fetch threads keep
        running). Raises the run's storage fault (``OSError``: full or read-only storage), if one
        stopped the threads: nothing since the last take is trustworthy (``store.faults``)."""
        run = self._streaming("stream_take")
        if run.storage_fault is not None:
            raise run.storage_fault
        return self.loop.take(run, next_round)

    def stream_stop(self) -> ShardRun:
        """Stop the fetch threads (each finishes its fetch in flight) and return what was produced
        since the last take; the URLs still queued come back in ``ShardRun.unfetched`` (queued
        robots.txt and sitemap fetches are dropped: they are redone when needed). Raises the
        run's storage fault, if any (as :meth:`stream_take`)."""
        run = self._streaming("stream_stop")
        self.loop.stop(run)
        for t in self._stream_threads:
            t.join()
        self._stream = None
        run.warc.close()
        if run.storage_fault is not None:
            raise run.storage_fault
        out = run.out
        close_texts(run.texts, out)
        out.unfetched.extend(self.loop.drain())
        out.warc_files = list(run.warc.checkpoint().closed)
        return out
