"""The fetch loop of one shard: its fetch threads, each running one visit path (Heritrix's
ToeThread, StormCrawler's FetcherBolt).

A thread takes a ready visit state from the BUbiNG workbench (docs/design.md §4.2), pops the
host's next entry and visits it: robots.txt when the host's origin has no live rules (RFC 9309),
else a page or a sitemap, both checked against the rules and fetched the same way. It hands the
visit state back as soon as the response is in (the release sets the host's and the IP's next
allowed time: politeness is the workbench's job), then processes what it fetched while other
threads fetch: a page goes through the page processor (:mod:`batchcrawl.fetch.pages`) and its
links to the link sink (:mod:`batchcrawl.fetch.linksink`); a sitemap's URLs go to the sink as
links tagged ``sitemap``.

CPU per page. Processing a page (parse, links, WARC) is CPU work, and only one fetch thread at a
time does it (the processing lock; the others keep fetching): interleaved processing turns every
GIL release inside libxml2, zlib or SHA-1 into a thread switch (docs/benchmarks.md, "Fetch worker
processing lock"). The per-phase thread CPU times are counted (``cpu_fetch_s``, ``cpu_parse_s``,
``cpu_simhash_s``, ``cpu_links_s``, ``cpu_warc_s``). The loop's lock guards the run's rows and
counters, the URL cache and the host counters; it is taken twice per page, never per link.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from batchcrawl.fetch.entries import ROBOTS, Entry, RobotsMarker, take_queue
from batchcrawl.fetch.holds import (
    due_at_hold_end,
    hold_host,
    hold_unresolved,
    rate_limit_wait,
    unreachable_wait,
)
from batchcrawl.fetch.hostbook import HostBook
from batchcrawl.fetch.linksink import LinkSink
from batchcrawl.fetch.outcome import HOST_OK, classify, location_target, retry_after
from batchcrawl.fetch.pages import PageProcessor, TextSink, base_row, utc
from batchcrawl.fetch.parts import ShardParts
from batchcrawl.fetch.resolver import DNSError
from batchcrawl.fetch.robots import RobotsRules, fetch_robots, robots_origin, rules_from_fetch
from batchcrawl.fetch.runstate import RunState, ShardRun, add_counts, close_texts, new_shard_run
from batchcrawl.fetch.sitemap_jobs import (
    SitemapJob,
    child_jobs,
    robots_sitemap_jobs,
    seed_sitemap_jobs,
)
from batchcrawl.fetch.sitemaps import parse_sitemap
from batchcrawl.fetch.visitstate import VisitState
from batchcrawl.fetch.warc import WarcWriter
from batchcrawl.records import FetchItem, FetchResult, Outcome
from batchcrawl.store import paths
from batchcrawl.store.faults import storage_fault
from batchcrawl.urls import domain_of, host_of, url_key

log = logging.getLogger(__name__)


class FetchLoop:
    """One shard's fetch threads and their visit path (see the module docstring).

    Parameters
    ----------
    parts
        The worker's parts (configuration, clocks, fetcher, workbench, robots.txt cache).
    processor
        The page processor (called under the processing lock).
    sink
        The link sink.
    book
        The host book (per-host counters, Crawl-delays).
    """

    def __init__(
        self, parts: ShardParts, processor: PageProcessor, sink: LinkSink, book: HostBook
    ) -> None:
        self.parts = parts
        self.processor = processor
        self.sink = sink
        self.book = book
        self.lock = threading.Lock()
        self.processing = threading.Lock()
        #: makes a run's text sink from the crawl filesystem (``extract.at_fetch``; None: off),
        #: set by :meth:`~batchcrawl.fetch.worker.FetchWorker.extract_at_fetch`
        self.new_texts: Callable[[Any], TextSink] | None = None

    # -- a run's threads and queue -----------------------------------------------------------
    def start(self, run: RunState, threads: int, name: str) -> list[threading.Thread]:
        """Start ``threads`` fetch threads on ``run`` (daemons named ``name-<shard>-<i>``)."""
        out = [
            threading.Thread(target=self.thread, args=(run,), daemon=True,
                             name=f"{name}-{self.parts.shard}-{i}")
            for i in range(threads)
        ]  # fmt: skip
        for t in out:
            t.start()
        return out

    def stop(self, run: RunState) -> None:
        """Ask ``run``'s threads to end after the fetch in flight."""
        run.stop.set()
        self.parts.workbench.wakeup()

    def warc_target(self, round_no: int) -> tuple[str, str]:
        """``(folder, file name prefix)`` of the WARC files opened during round (or micro-batch)
        ``round_no``: ``warc/round=R`` and :func:`~batchcrawl.store.paths.warc_prefix`."""
        p, cfg = self.parts, self.parts.cfg
        root = str(getattr(p.fs, "path", "")).rstrip("/")
        name = cfg.crawl.name or root.rsplit("/", 1)[-1] or "crawl"
        return paths.warc_dir(round_no), paths.warc_prefix(name, round_no, p.shard, p.wall())

    def warc_writer(self, round_no: int) -> WarcWriter:
        """A WARC writer for ``round_no`` (``warc/round=R/<warc_prefix>-NNNNN.warc.gz``), rotating
        at ``fetch.warc_max_bytes``."""
        p, cfg = self.parts, self.parts.cfg
        directory, prefix = self.warc_target(round_no)
        return WarcWriter(
            p.fs, directory, prefix, cfg.fetch.warc_max_bytes, cfg.crawl.user_agent, clock=p.wall,
            warcinfo_fields={"robots": "classic", "isPartOf": cfg.crawl.name or "batchcrawl"},
            compress_level=cfg.fetch.warc_compress_level,
            cdxj_name=paths.warc_cdxj if cfg.fetch.warc_cdxj else None,
        )  # fmt: skip

    def take(self, run: RunState, next_round: int) -> ShardRun:
        """A stream's take (:meth:`~batchcrawl.fetch.worker.FetchWorker.stream_take`): swap out
        ``run``'s output under the processing lock, checkpoint its WARC writer (the open file
        stays open, ``ShardRun.warc_open`` gives it and its committed end in bytes) and, with
        ``extract.at_fetch``, close the WARC file and its text sink (a text and WET file per WARC
        file). Rows from now on belong to micro-batch ``next_round``; WARC files opened from now
        on go to its folder. Taking waits only for the page being processed (the processing
        lock), so every row taken has its records before the checkpoint's end.

        Raises ``WarcError`` when the WARC file cannot be flushed."""
        directory, prefix = self.warc_target(next_round)
        old_texts = None
        with self.processing:
            with self.lock:
                out, run.out = run.out, new_shard_run()
                run.round, run.seq, run.found_hosts = next_round, 0, Counter()
                if run.direct is not None:  # the links queued at once, and which are done
                    out.direct = run.direct.take(row["url_key"] for row in out.fetched)
                if run.texts is not None:
                    # extract.at_fetch writes a text and a WET file per WARC file: the WARC file
                    # closes at each take, as the text rows are committed with it
                    run.warc.close()
                    old_texts, run.texts = run.texts, self.texts_at_fetch()
            point = run.warc.checkpoint(directory, prefix, index=False)
        run.warc.index_open()  # the fetch threads go on meanwhile
        close_texts(old_texts, out)
        out.warc_files = list(point.closed)
        if point.open_file is not None:
            out.warc_files.append(point.open_file)
            out.warc_open = (point.open_file, point.open_end)
        return out

    def new_run(self, round_no: int, deadline: float, **fields: Any) -> RunState:
        """The state of a new run (or stream micro-batch) ``round_no``: empty output, its WARC
        writer and text sink; ``deadline`` on the worker's monotonic clock; ``fields``: other
        :class:`RunState` fields."""
        return RunState(round=round_no, out=new_shard_run(), warc=self.warc_writer(round_no),
                        texts=self.texts_at_fetch(), deadline=deadline, **fields)  # fmt: skip

    def texts_at_fetch(self) -> TextSink | None:
        """A new run's text sink (``extract.at_fetch``): made by :attr:`new_texts` from the crawl
        directory's filesystem, or None when that is None (off)."""
        return self.new_texts(self.parts.fs) if self.new_texts is not None else None

    def enqueue(self, run: RunState, items: Iterable[FetchItem]) -> int:
        """Queue ``items`` (per-host breadth-first order) in the workbench: each host resolved
        once and checked by the address policy (failures are recorded at once), robots.txt first
        when the host's origin has no live rules, configured sitemaps after the pages in round 1.
        A host held ``unreachable`` or for a long rate limit (:meth:`_held_back`) gets its items
        back at once, unresolved and unqueued.
        Returns the entries queued (the run's pending count grows by that much)."""
        p = self.parts
        by_host: dict[str, list[FetchItem]] = {}
        for item in items:
            by_host.setdefault(item.host, []).append(item)
        pending = 0
        for host, host_items in by_host.items():
            if (held := self._held_back(host)) is not None:  # not queued: back at once
                self._give_back(run, host_items, *held, pending=False)
                continue
            try:
                ip = p.resolver.resolve(host)
            except DNSError as exc:
                self._unresolved(run, host, host_items, str(exc))
                continue
            refused = p.policy.check(ip)
            if refused is not None:
                for item in host_items:
                    self.record_failure(run, item, Outcome.REFUSED, refused, ip=ip)
                continue
            queue: list[Entry] = list(host_items)
            if p.robots.get(robots_origin(host_items[0].url)) is None:
                queue.insert(0, ROBOTS)
            jobs = self._new_sitemaps(run, seed_sitemap_jobs(p.cfg.sitemaps.seeds, host))
            if run.round == 1 and jobs:  # configured sitemaps: in the first round, after the pages
                queue.extend(jobs)
                run.out.counters["sitemaps_queued"] += len(jobs)
                pending += len(jobs)
            p.workbench.add(host, ip, queue)
            pending += len(host_items)
        return pending

    def drain(self) -> list[FetchItem]:
        """Empty the workbench: the URLs still queued, in order (robots.txt and sitemap jobs
        are redone when needed)."""
        return [
            entry
            for _host, rest in self.parts.workbench.drain()
            for entry in rest
            if isinstance(entry, FetchItem)
        ]

    # -- the thread --------------------------------------------------------------------------
    def thread(self, run: RunState) -> None:
        """One fetch thread: visit ready hosts until the run stops, its deadline passes or (a
        batch run) nothing is pending."""
        wb, clock = self.parts.workbench, self.parts.clock
        stop, deadline = run.stop, run.deadline
        while not stop.is_set():
            if run.pending <= 0 and not run.streaming:  # an int read without the lock is atomic
                return
            left = deadline - clock()
            if left <= 0:  # the time limit (or the crawl's deadline) passed: no new fetch
                return
            vs = wb.acquire_wait(min(1.0, left), stop)
            if vs is None:
                if clock() >= deadline:
                    return
                continue
            if not vs.queue:  # pragma: no cover - defensive: an empty visit state is never ready
                wb.release(vs, None)
                continue
            if not self.visit(run, vs, vs.pop()):
                return

    def visit(self, run: RunState, vs: VisitState[Any], entry: Entry) -> bool:
        """The one visit path: robots.txt, or a page or sitemap checked against the rules,
        fetched, released and processed. ``vs`` is held by this thread and released here.
        False when a storage fault stops the run."""
        p, wb = self.parts, self.parts.workbench
        if (held := self._held_back(vs.host)) is not None:  # URLs that reached a held host
            given = take_queue(vs, [entry])
            wb.release(vs, None)  # no request made
            self._give_back(run, given, *held)
            return True
        if isinstance(entry, RobotsMarker):
            self._fetch_robots(run, vs)  # never raises: any failure is robots_unavailable
            return True
        rules = p.robots.get(robots_origin(entry.url))
        if rules is None:  # another origin of the host, or expired: fetch robots.txt first
            vs.push_front(entry)
            vs.push_front(ROBOTS)
            wb.release(vs, None)
            return True
        if rules.unavailable or not rules.allowed(entry.url, p.agent):
            wb.release(vs, None)  # no request made, so no delay
            self._robots_refused(run, entry, rules)
            return True
        page = entry if isinstance(entry, FetchItem) else None
        t0 = time.thread_time()
        try:
            result = p.fetcher.fetch(
                entry.url, extra_headers=page.conditional_headers() if page is not None else None
            )
        except Exception:  # a bug below the fetcher must not kill the thread or leak the host
            log.exception("fetching %s failed", entry.url)
            wb.release(vs, p.cfg.politeness.host_delay_s)  # assume a request was made
            self._failed(run, entry)
            return True
        cpu_fetch_s = time.thread_time() - t0
        hop = page is not None and self._self_redirect_hop(run, page, result)
        if hop:  # fetched again after the host's delay: the workbench keeps politeness
            vs.push_front(entry)
        politeness = p.cfg.politeness
        limited_s = rate_limit_wait(  # a 429/503 holds the host (issue 31)
            p.holds, vs.host, result.status,
            retry_after(result, p.wall(), politeness.max_retry_after_s), politeness,
        )  # fmt: skip
        # fetches without an answer in a row hold the host too (fetch.holds); the queue of a host
        # so held, or long rate limited, goes back once this fetch is recorded: no round waits
        down_s = unreachable_wait(p.holds, vs.host, result.status, result.error, politeness)
        held = self._held_back(vs.host)
        given = take_queue(vs, []) if held is not None else []
        answered = result.status is not None or result.ip
        wb.release(vs, result.download_s if answered else None, retry_after_s=limited_s)
        try:
            if isinstance(entry, SitemapJob):
                self._sitemap(run, entry, result)
                self._done(run)
            elif hop:
                with self.processing:
                    run.warc.write_fetch(result)  # every request is archived
            else:
                with self.processing:
                    self._page(run, entry, result, cpu_fetch_s)
        except Exception as exc:  # a bug in one fetch's processing must not stop the shard
            if (fault := storage_fault(exc)) is not None:  # a full disk fails every page: stop
                run.storage_fault = run.storage_fault or fault
                self.stop(run)
                return False
            if hop:
                log.exception("archiving a redirect hop of %s failed", entry.url)
            else:
                log.exception("processing %s failed", entry.url)
                self._failed(run, entry)
        finally:
            if down_s is not None:  # its failures so far are due when the hold ends
                with self.lock:
                    due_at_hold_end(run.out.fetched, vs.host, down_s)
            if held is not None and given:
                self._give_back(run, given, *held)
        return True

    # -- pages -------------------------------------------------------------------------------
    def _page(
        self, run: RunState, item: FetchItem, result: FetchResult, cpu_fetch_s: float
    ) -> None:
        """Process a fetched page and hand its links to the sink, then record its row and mark it
        done (processing lock held)."""
        hops = 0
        if run.self_hops:  # a self-redirect chain may end here: its count goes with it
            with self.lock:
                hops = run.self_hops.pop(item.url_key, 0)
        rec = self.processor.process(item, result, run.round, run.warc, self_hops=hops,
                                     texts=run.texts)  # fmt: skip
        sink = self.sink
        t0 = time.thread_time()
        canonical, invalid = sink.canonical(rec.found)
        with self.lock:  # BUbiNG's URL cache: which outlinks were not seen recently
            sink.edges(run, item, canonical)  # the link graph: every link, before the cache
            new = sink.not_seen(canonical if rec.follow else [])
        links = sink.scope(item, new) if new else []
        cpu_links_s = time.thread_time() - t0
        with self.lock:
            counters = run.out.counters
            counters["links_cached"] += len(canonical) - len(new)
            invalid += rec.invalid
            if invalid:
                counters["links_invalid"] += invalid
            add_counts(counters, rec.counts)
            run.out.fetched.append(rec.row)
            self.book.count(item.host, error=rec.outcome not in HOST_OK)
            sink.emit(run, item, links)
            run.pending -= 1
            direct: list[FetchItem] = []
            if run.direct is not None:  # a stream: links to this host queued at once
                run.direct.finished(item)
                direct = run.direct.pick(item, links, run.pending) if links else []
            if run.pending <= 0 and not direct:
                self.parts.workbench.wakeup()
            add_counts(counters, {"cpu_fetch_s": cpu_fetch_s, "cpu_links_s": cpu_links_s})
        if direct:
            self.queue_direct(run, direct)

    def given(self, run: RunState, items: Iterable[FetchItem]) -> list[FetchItem]:
        """A stream's top-up ``items`` minus those its threads queued themselves and did not
        report by the last take (:meth:`DirectLinks.given
        <batchcrawl.fetch.directlinks.DirectLinks.given>`)."""
        if run.direct is None:
            return list(items)
        with self.lock:
            return run.direct.given(items)

    def queue_direct(self, run: RunState, items: list[FetchItem]) -> None:
        """Queue a stream's links found to a page's own host (:mod:`batchcrawl.fetch.directlinks`)
        at the end of that host's queue; the run's pending count grows by those queued."""
        n = self.enqueue(run, items)
        with self.lock:
            run.pending += n
            run.out.counters["links_direct"] += len(items)

    def _self_redirect_hop(self, run: RunState, item: FetchItem, result: FetchResult) -> bool:
        """True (and the hop counted) when ``result`` redirects ``item`` to its own URL and fewer
        than ``fetch.max_self_redirects`` such hops were followed in this chain: the caller puts
        the item back at the front of its host's queue. The hop count is per chain and per run; a
        chain still open when the run stops starts again at 0 (the URL stays queued, no row)."""
        if (
            classify(result) is not Outcome.REDIRECT
            or location_target(result, item.url) != item.url
        ):
            return False
        with self.lock:
            hops = run.self_hops.get(item.url_key, 0)
            if hops >= self.parts.cfg.fetch.max_self_redirects:
                return False
            run.self_hops[item.url_key] = hops + 1
            run.out.counters["self_redirect_hops"] += 1
            self.book.count(item.host, error=False)
        return True

    def record_failure(
        self,
        run: RunState,
        item: FetchItem,
        outcome: Outcome,
        error: str | None,
        detail: str | None = None,
        ip: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        """Record ``item`` as fetched with ``outcome`` and no response (``detail`` is for logs);
        ``retry_after_s``: seconds until it may be tried again (a held host's hold)."""
        row = base_row(item, run.round, self.parts.shard, self.parts.wall())
        row.update(outcome=outcome.value, error=error, fetch_ip=ip, retry_after_s=retry_after_s)
        with self.lock:
            run.out.fetched.append(row)
            run.out.counters[outcome.value] += 1
            if run.direct is not None:
                run.direct.finished(item)
            if outcome is not Outcome.ROBOTS_DENIED:
                self.book.count(item.host, error=True)

    def _robots_refused(
        self, run: RunState, entry: FetchItem | SitemapJob, rules: RobotsRules
    ) -> None:
        """A page or sitemap robots.txt does not let us fetch (unavailable rules: this URL's
        origin only), recorded and done."""
        if isinstance(entry, SitemapJob):
            with self.lock:
                run.out.counters["sitemaps_robots_denied"] += 1
        elif rules.unavailable:
            self.record_failure(
                run, entry, Outcome.ROBOTS_UNAVAILABLE, "robots_unavailable",
                retry_after_s=self.parts.holds.remaining_s(entry.host),
            )  # fmt: skip
        else:
            self.record_failure(run, entry, Outcome.ROBOTS_DENIED, "robots_denied")
        self._done(run)

    def _failed(self, run: RunState, entry: FetchItem | SitemapJob) -> None:
        """A fetch or its processing failed by a bug (logged): ``network_error``/``internal`` for
        a page, ``sitemaps_failed`` for a sitemap; done."""
        if isinstance(entry, SitemapJob):
            with self.lock:
                run.out.counters["sitemaps_failed"] += 1
        else:
            self.record_failure(run, entry, Outcome.NETWORK_ERROR, "internal")
        self._done(run)

    def _unresolved(self, run: RunState, host: str, items: list[FetchItem], why: str) -> None:
        """No address for ``host``: one lookup answers for all its ``items``, so the first is
        charged ``dns_error`` and, when more wait (or the host's last hold was ``unreachable``:
        this is its probe), the host is held ``unreachable`` and they go back uncharged as
        ``host_unreachable`` (:func:`~batchcrawl.fetch.holds.hold_unresolved`; with
        ``politeness.unreachable_failures`` 0 each is charged ``dns_error``)."""
        held_s = hold_unresolved(self.parts.holds, host, len(items), self.parts.cfg.politeness)
        for item in items if held_s is None else items[:1]:  # due when a hold ends, if one
            self.record_failure(run, item, Outcome.DNS_ERROR, "dns", why, retry_after_s=held_s)
        if held_s is not None:
            self._give_back(run, items[1:], Outcome.HOST_UNREACHABLE, held_s, pending=False)

    def _held_back(self, host: str) -> tuple[Outcome, float] | None:
        """``(outcome, seconds left)`` when ``host``'s URLs go back to the frontier rather than
        wait in the workbench (:mod:`batchcrawl.fetch.holds`): held ``unreachable``, or held for
        a rate limit longer than ``politeness.rate_limit_wait_in_round_s``; else None."""
        held = self.parts.holds.in_force(host)
        if held is None:
            return None
        reason, left = held
        if reason == "unreachable":
            return Outcome.HOST_UNREACHABLE, left
        if reason == "rate_limit" and left > self.parts.cfg.politeness.rate_limit_wait_in_round_s:
            return Outcome.RATE_LIMITED, left
        return None

    def _give_back(
        self, run: RunState, entries: Sequence[FetchItem | SitemapJob], outcome: Outcome,
        held_s: float | None, *, pending: bool = True,
    ) -> None:  # fmt: skip
        """Give back ``entries`` of a held host without a fetch: pages recorded with ``outcome``
        (no retry counted, due again in ``held_s`` seconds, the hold's end), sitemaps counted
        ``sitemaps_<outcome>``; done (``pending``: they were counted in the run's pending)."""
        for it in entries:
            if isinstance(it, SitemapJob):
                with self.lock:
                    run.out.counters[f"sitemaps_{outcome.value}"] += 1
            else:
                self.record_failure(run, it, outcome, outcome.value, retry_after_s=held_s)
        if entries and pending:
            self._done(run, len(entries))

    def _done(self, run: RunState, n: int = 1) -> None:
        with self.lock:
            run.pending -= n
            if run.pending <= 0:
                self.parts.workbench.wakeup()

    # -- robots.txt --------------------------------------------------------------------------
    def _fetch_robots(self, run: RunState, vs: VisitState[Any]) -> None:
        """Fetch robots.txt for ``vs.host`` (held by this thread), following redirects (RFC 9309
        §2.3.1.2), archive every hop, cache the rules and set the host's Crawl-delay. If robots.txt
        is unavailable (5xx, network failure), every queued URL of that origin is given back as
        ``robots_unavailable`` at once: it is treated as fully disallowed until it is retried."""
        p = self.parts
        first = vs.queue[0] if vs.queue else None
        origin = (
            robots_origin(first.url)
            if isinstance(first, FetchItem | SitemapJob)
            else f"http://{vs.host}"
        )
        try:
            chain = fetch_robots(p.fetcher, origin, max_redirects=p.cfg.robots.max_redirects)
        except Exception:  # a bug below must not kill the thread: robots.txt is unavailable
            log.exception("fetching robots.txt of %s failed", origin)
            chain = [FetchResult(url=origin + "/robots.txt", error="internal")]
        entry = p.robots.put(origin, rules_from_fetch(chain[-1], p.cfg.robots.max_bytes))
        rules = entry.rules  # the last good copy while robots.txt is unreachable (RFC 9309 §2.4)
        held = hold_host(p.holds, p.robots, vs.host, origin, rules, p.cfg.robots)
        vs.set_crawl_delay(rules.crawl_delay(p.agent))
        dropped = take_queue(vs, [], origin=origin) if rules.unavailable else []
        contacted = any(r.ip for r in chain)
        p.workbench.release(vs, sum(r.download_s for r in chain) if contacted else None)
        with self.lock:
            run.out.counters["robots_fetches"] += len(chain)
            run.out.counters[f"robots_state_{rules.state}"] += 1
            if entry.stale:
                run.out.counters["robots_stale_kept"] += 1
            for r in chain:
                if r.status is not None:
                    run.warc.write_fetch(r)
        if p.cfg.sitemaps.enabled and not rules.unavailable and not entry.stale:
            jobs, counts = robots_sitemap_jobs(rules.sitemaps, chain[-1].url, vs.host)
            with self.lock:
                run.out.counters.update(counts)
            self._queue_sitemaps(run, vs.host, jobs)  # before dropped items finish: run goes on
        self._give_back(run, dropped, Outcome.ROBOTS_UNAVAILABLE, held)

    # -- sitemaps ----------------------------------------------------------------------------
    def _new_sitemaps(self, run: RunState, jobs: list[SitemapJob]) -> list[SitemapJob]:
        """The jobs whose sitemap was not queued yet in this run (and marks them queued)."""
        with self.lock:
            out = [j for j in jobs if j.url not in run.sitemaps]
            run.sitemaps.update(j.url for j in out)
        return out

    def _queue_sitemaps(self, run: RunState, host: str, jobs: list[SitemapJob]) -> None:
        """Append new sitemap jobs to ``host``'s visit state (politeness applies) and count them
        pending; call while an item of the run is still pending."""
        named = len(jobs)
        jobs = self._new_sitemaps(run, jobs)
        if named > len(jobs):  # named twice (robots.txt, an index, a seed): fetched once
            with self.lock:
                run.out.counters["sitemaps_repeated"] += named - len(jobs)
        if not jobs:
            return
        with self.lock:
            run.pending += len(jobs)
            run.out.counters["sitemaps_queued"] += len(jobs)
        self.parts.workbench.add(host, None, jobs)

    def _sitemap(self, run: RunState, job: SitemapJob, result: FetchResult) -> None:
        """Archive a fetched sitemap, queue the children of an index (:func:`child_jobs`) and emit
        its page URLs as links tagged ``sitemap`` with their ``lastmod`` (scope filters applied at
        depth 1, like a seed's outlinks). A URL with a ``lastmod`` is emitted even if recently
        seen, so update can make a known URL due when it changed (docs/design.md §8a)."""
        sm_cfg = self.parts.cfg.sitemaps
        with self.processing:
            if result.status is not None:
                run.warc.write_fetch(result)
        if result.status != 200:
            with self.lock:
                run.out.counters["sitemaps_failed"] += 1
            return
        sm = parse_sitemap(
            result.body, job.url, max_urls=sm_cfg.max_urls, max_bytes=sm_cfg.max_bytes
        )
        children, counts = child_jobs(job, sm.sitemaps, sm_cfg.max_depth)
        self._queue_sitemaps(run, job.host, children)  # before this job is done: the run goes on
        host = host_of(job.url)
        src = FetchItem(url_key(job.url), job.url, host, domain_of(host), depth=0)
        memo = self.sink.memo.canonical
        hits = [(hit, e.lastmod) for e in sm.urls if (hit := memo(e.loc, False)) is not None]
        found = [(hit, lm) for hit, lm in hits if job.may_list(hit[1])]  # sitemaps.org location
        with self.lock:
            seen = self.sink.url_cache.seen
            new = [(hit, lm) for hit, lm in found if not seen(hit[0]) or lm is not None]
        links = self.sink.scope(src, [(*hit, "sitemap", False) for hit, _ in new])
        with self.lock:
            c = run.out.counters
            c.update(counts)
            c["sitemaps_fetched"] += 1
            c[f"sitemaps_kind_{sm.kind}"] += 1
            c["sitemap_urls"] += len(sm.urls)
            for name, n in (
                ("sitemaps_truncated", int(sm.truncated)),
                ("sitemaps_unreadable", int(sm.error is not None)),
                ("links_invalid", len(sm.urls) - len(hits)),
                ("sitemap_urls_out_of_scope", len(hits) - len(found)),
                ("links_cached", len(found) - len(new)),
            ):
                if n:
                    c[name] += n
            self.sink.emit(run, src, links, [utc(lm) if lm else None for _, lm in new])
