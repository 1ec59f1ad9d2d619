"""The fetch worker of one shard: workbench + robots.txt + DNS/address policy + HTTP + parsing + WARC.

A :class:`FetchWorker` owns every host of its shard (docs/design.md §6). For one round it takes the shard's
fetch list (breadth-first per host), resolves each host once and checks the address policy, puts the
URLs into its BUbiNG workbench (§4.2) and runs ``fetch.threads`` fetch threads (blocking I/O, as
BUbiNG argues). A thread takes a ready visit state, fetches robots.txt first when the host has no
live rules, then the host's next URL, hands the visit state back (which sets the host's and the IP's
next allowed time: politeness is the workbench's job), and then archives, parses and extracts links
while other threads fetch.

CPU per page. Processing a page (parse, links, WARC) is CPU work, and only one fetch thread at a
time does it (a processing lock; the others keep fetching): interleaved processing turns every GIL
release inside libxml2, zlib or SHA-1 into a thread switch (measured in ``docs/benchmarks.md``,
"Fetch worker processing lock"). A worker that needs more than about one core for processing is
split into more shards (docs/design.md §6), not given more threads. The per-phase thread CPU times
are counted (``cpu_fetch_s``, ``cpu_parse_s``, ``cpu_simhash_s``, ``cpu_links_s``, ``cpu_warc_s``).

Outlinks are canonicalized, keyed, checked by the scope filters and de-duplicated by a bounded cache
of recent url keys (BUbiNG's URL cache) before they leave the worker, so the menu links repeated on
every page of a host are sent to the frontier once. The ``links`` rows are therefore the worker's
*discoveries*, in discovery order; every page's full outlink list is in its WARC ``metadata`` record.

The worker is a plain library object (tested without Dask); :func:`batchcrawl.round` runs one per
shard on a Dask worker. Its state that must survive the round (each host's next allowed time, its
robots.txt rules, counters) comes back from :meth:`FetchWorker.host_rows` for the ``hosts`` table and
is restored by :meth:`FetchWorker.restore_hosts` in the next round; if the same object is kept alive
(a long-lived Dask actor), it simply keeps them in memory.
"""

from __future__ import annotations

import logging
import math
import sys
import threading
import time
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from random import Random
from typing import Any

from batchcrawl.config import Config
from batchcrawl.errors import InvalidURL
from batchcrawl.fetch.directives import retry_after_s
from batchcrawl.fetch.fetcher import Fetcher, http_settings
from batchcrawl.fetch.fields import ResponseFields, response_fields
from batchcrawl.fetch.holds import HostHolds, hold_host, rate_limit_wait
from batchcrawl.fetch.idle import IdleMeter
from batchcrawl.fetch.neardup import NearDuplicates
from batchcrawl.fetch.parse import parse_page
from batchcrawl.fetch.resolver import AddressPolicy, DNSError, Resolver
from batchcrawl.fetch.robots import RobotsCache, fetch_robots, robots_origin, rules_from_fetch
from batchcrawl.fetch.simhash import VERSION as SIMHASH_VERSION
from batchcrawl.fetch.simhash import page_simhash
from batchcrawl.fetch.sitemap_jobs import (
    SitemapJob,
    child_jobs,
    robots_sitemap_jobs,
    seed_sitemap_jobs,
)
from batchcrawl.fetch.sitemaps import parse_sitemap
from batchcrawl.fetch.warc import WarcWriter, payload_digest, warc_date
from batchcrawl.fetch.workbench import Workbench
from batchcrawl.records import FetchItem, FetchResult, Outcome
from batchcrawl.scope.filters import FilterChain
from batchcrawl.store import paths, schemas
from batchcrawl.store.faults import storage_fault
from batchcrawl.urls import canonicalize, domain_of, host_of, redirect_target, url_key

log = logging.getLogger(__name__)

#: Placeholder item put at the front of a host's FIFO: "fetch robots.txt now".
ROBOTS = object()

_RETRY_STATUSES = frozenset({408, 425, 429})
#: Outcomes that do not count as a host error (the host answered).
_HOST_OK = frozenset(
    {Outcome.OK, Outcome.TRUNCATED, Outcome.REDIRECT, Outcome.REDIRECT_LOOP, Outcome.NOT_MODIFIED,
     Outcome.GONE, Outcome.HTTP_ERROR}
)  # fmt: skip


def classify(result: FetchResult) -> Outcome:
    """The :class:`~batchcrawl.records.Outcome` of one HTTP fetch.

    Network errors (``result.error``) win; then the status: 2xx is ``ok`` (``truncated`` when the body
    was cut at the size or time limit), 304 ``not_modified``, other 3xx ``redirect`` if a Location is
    given, 404/410 ``gone``, 408/425/429 and 5xx ``server_error`` (transient), other 4xx and odd
    statuses ``http_error`` (permanent for this URL).
    """
    if result.error == "refused":
        return Outcome.REFUSED
    if result.error == "dns":
        return Outcome.DNS_ERROR
    if result.error is not None or result.status is None:
        return Outcome.NETWORK_ERROR
    status = result.status
    if 200 <= status < 300:
        return Outcome.TRUNCATED if result.truncated else Outcome.OK
    if status == 304:
        return Outcome.NOT_MODIFIED
    if 300 <= status < 400:
        return Outcome.REDIRECT if result.header("Location") else Outcome.HTTP_ERROR
    if status in (404, 410):
        return Outcome.GONE
    if status >= 500 or status in _RETRY_STATUSES:
        return Outcome.SERVER_ERROR
    return Outcome.HTTP_ERROR


def _redirect_target(result: FetchResult, base: str) -> str | None:
    """Canonical target of a 3xx's ``Location`` (:func:`~batchcrawl.urls.redirect_target`), or
    None when it is missing or unusable."""
    try:
        return redirect_target(result.header("Location") or "", base)
    except InvalidURL:
        return None


def _near_duplicates(cfg: Config) -> NearDuplicates:
    d = cfg.dedup
    return NearDuplicates(
        d.near_window, d.near_hamming, trap_min_pages=d.trap_min_pages,
        trap_near_share=d.trap_near_share, trap_repeat_segments=d.trap_repeat_segments,
    )  # fmt: skip


def _utc(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC).replace(tzinfo=None)


class _TwoGenerations:
    """A bound in two generations, an LRU approximation with O(1) work and no lock: entries go
    into the current container, which is retired when it holds ``size // 2``; an entry found in
    the retired one is copied forward. So the last ``size // 2`` distinct entries are always held
    and at most ``size`` are; a size below 2 holds nothing. Subclasses name the container
    (``_EMPTY``: ``set`` or ``dict``)."""

    __slots__ = ("_new", "_old", "_half")
    _EMPTY: type = dict

    def __init__(self, size: int) -> None:
        self._new = self._EMPTY()
        self._old = self._EMPTY()
        self._half = size // 2

    def _current(self):
        """The container a new entry goes into, after retiring a full one; None if the size
        holds nothing."""
        if not self._half:
            return None
        if len(self._new) >= self._half:
            self._old, self._new = self._new, self._EMPTY()
        return self._new

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def generations(self) -> tuple:
        """The current and the retired container (for memory probes)."""
        return self._new, self._old


class _KeyCache(_TwoGenerations):
    """Bounded set of recently seen url keys (BUbiNG's URL cache), in two generations
    (:class:`_TwoGenerations`): each key costs a set slot (~45 bytes with the table's slack) where
    an ``OrderedDict`` LRU took ~105 and a ``move_to_end`` per hit. Not thread-safe by itself."""

    __slots__ = ()
    _EMPTY = set

    def seen(self, key: int) -> bool:
        """True if ``key`` was seen recently; records it either way."""
        if key in self._new:
            return True
        hit = key in self._old
        current = self._current()
        if current is not None:
            current.add(key)
        return hit


class _CanonicalMemo(_TwoGenerations):
    """Memo of :func:`~batchcrawl.urls.canonicalize` for raw absolute outlink URLs: raw string ->
    ``(url_key, canonical URL, host, domain)``, or None when the URL is invalid.

    A page's menu links repeat on every page of its host, so most outlinks were canonicalized
    moments ago; a dict lookup replaces the WHATWG parse, the percent-encoding pass, the hash and
    the host and pay-level domain lookups (each link's ``edges`` row needs its domain). Bounded by
    two generations (:class:`_TwoGenerations`) of at most ``fetch.canonical_memo_size`` entries
    in all; no lock: single dict reads and writes are atomic under the GIL and a lost update only
    costs a recomputation, since canonicalization is a pure function.
    """

    __slots__ = ()

    def canonical(self, raw: str) -> tuple[int, str, str, str] | None:
        """``(url_key(c), c, host_of(c), domain_of(host_of(c)))`` with ``c = canonicalize(raw)``,
        or None if ``raw`` is invalid."""
        hit = self._new.get(raw, _MISS)
        if hit is not _MISS:
            return hit
        hit = self._old.get(raw, _MISS)
        if hit is _MISS:
            try:
                url = canonicalize(raw)
                host = sys.intern(host_of(url))  # one string per host for all its entries
                hit = (url_key(url), url, host, domain_of(host))
            except InvalidURL:
                hit = None
        current = self._current()
        if current is not None:
            current[raw] = hit
        return hit


_MISS = object()


@dataclass
class ShardRun:
    """What one round of a shard produced: rows for ``fetched``, ``links`` and ``edges`` (column
    lists), the URLs still queued when it stopped (in order), and named counters."""

    fetched: list[dict[str, Any]] = field(default_factory=list)
    links: dict[str, list] = field(default_factory=dict)
    edges: dict[str, list] = field(default_factory=dict)
    unfetched: list[FetchItem] = field(default_factory=list)
    counters: Counter = field(default_factory=Counter)
    warc_files: list[str] = field(default_factory=list)
    seconds: float = 0.0
    #: seconds of the run in which fewer than half the fetch threads had work
    #: (:class:`~batchcrawl.fetch.idle.IdleMeter`), and the trailing part of them (the tail)
    idle_s: float = 0.0
    tail_s: float = 0.0


def _new_shard_run() -> ShardRun:
    """An empty :class:`ShardRun` with the ``links`` and ``edges`` columns ready to extend."""
    return ShardRun(
        links={c: [] for c in schemas.schema("links").names},
        edges={c: [] for c in schemas.schema("edges").names},
    )


@dataclass
class _Run:
    """The state of one :meth:`FetchWorker.run`, handed to its fetch threads (never kept on the
    worker, so a long-lived worker carries nothing from one run into the next)."""

    round: int
    out: ShardRun
    warc: WarcWriter
    deadline: float  # on the worker's monotonic clock
    pending: int = 0  # items not finished yet (guarded by the worker's lock)
    seq: int = 0  # discovery order of the links of this run
    self_hops: dict[int, int] = field(default_factory=dict)  # url_key -> self-redirects followed
    sitemaps: set[str] = field(default_factory=set)  # sitemap URLs queued in this run (once each)
    stop: threading.Event = field(default_factory=threading.Event)
    streaming: bool = False  # threads wait for more items instead of ending (stream_start)
    storage_fault: OSError | None = None  # the first full / read-only storage error: ends the run
    ended_early: bool = False  # FetchWorker.end_run was called
    # hosts given a link in scope this run (past the URL cache): they have URLs for the next
    # round; kept only for fetch.tail_capacity_ratio (None when it is off)
    found_hosts: set[str] | None = None


class TailDetector:
    """Decides when a fetch phase has reached its slow tail (Nutch's fetcher throughput threshold,
    made relative), by either of two rules, against the best rate seen over any earlier window of
    ``window_s`` seconds (pages per second):

    * **rate**: the rate over the last window is below ``ratio`` times the best;
    * **politeness capacity**: in a polite crawl a round's hosts run dry one by one while links
      found in the round give many of them URLs for the next. With ``working`` the most the
      hosts still with work can give by politeness alone and ``waiting`` the same for the dry
      hosts that were given new links (:meth:`Workbench.polite_capacity`, pages per second), the
      phase is in its tail once ``working < capacity_ratio * min(best, working + waiting)``: the
      round uses less than that share of what the next round could (``best`` caps it at what the
      threads and the CPU gave; for this rule, the best rate over any span of at least
      :attr:`MIN_SPAN_S` seconds, so a round that runs dry within its first window, such as the
      seed round, need not wait for a whole window). Ending it then starts the waiting hosts'
      URLs one round boundary later instead of when the last host is done (docs/benchmarks.md,
      "Politeness-bound rounds"). It does not react to a rate that falls for other reasons (a
      loaded CPU), nor while the hosts with work can keep the threads busy (no host delay), nor
      when the dry hosts were given nothing new.

    ``ratio`` or ``capacity_ratio`` 0 turns that rule off. Feed it ``observe(now_s, done_count,
    working, waiting)`` about twice a second; times on any monotonic clock.
    """

    #: shortest span (seconds) whose rate the capacity rule may use as ``best`` before a whole
    #: window has passed: a round whose hosts run dry within its first window (the seed round:
    #: robots.txt, then one page per host) need not wait for the window
    MIN_SPAN_S = 1.0

    def __init__(self, ratio: float, window_s: float, capacity_ratio: float = 0.0) -> None:
        self.ratio = ratio
        self.capacity_ratio = capacity_ratio
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque()
        self._best = 0.0  # best rate over a whole window (both rules)
        self._best_any = 0.0  # best rate over any span of MIN_SPAN_S or more (capacity rule)

    def observe(
        self, now: float, done: int, working: float = math.inf, waiting: float = 0.0
    ) -> bool:
        """Record ``done`` URLs finished by ``now`` and the politeness capacities (pages/s) of the
        hosts with work and of the dry hosts waiting with new links; True once the phase is in
        its tail."""
        if self.ratio <= 0 and self.capacity_ratio <= 0:
            return False
        samples = self._samples
        samples.append((now, done))
        while len(samples) > 1 and now - samples[1][0] >= self.window_s:
            samples.popleft()
        t0, d0 = samples[0]
        span = now - t0
        if span < min(self.window_s, self.MIN_SPAN_S):
            return False
        rate = (done - d0) / span
        if span >= self.window_s:  # a full window
            self._best = max(self._best, rate)
            if rate < self.ratio * self._best:
                return True
        self._best_any = max(self._best_any, rate)
        return working < self.capacity_ratio * min(self._best_any, working + waiting)


class FetchWorker:
    """The fetch worker of one shard.

    Parameters
    ----------
    cfg
        The crawl's configuration (``fetch``, ``politeness``, ``robots``, ``network``, ``filters``,
        ``crawl`` sections are used).
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
        self.shard = shard
        self.fs = fs
        self.clock = clock
        self.wall = wall
        self.cfg = cfg
        self.agent = cfg.crawl.robots_agent
        self.resolver = Resolver(cfg.network)
        self.policy = AddressPolicy(cfg.network)
        self.fetcher = Fetcher(cfg.fetch, cfg.crawl, self.resolver, self.policy)
        self.workbench: Workbench = Workbench.from_config(cfg.politeness, clock)
        self.robots = RobotsCache(cfg.robots, self.agent, clock=wall)
        self.holds = HostHolds(Random(), wall)  # robots.txt outages and rate limits
        self.filters = FilterChain.from_config(cfg.filters, seed_hosts, seed_domains)
        self.url_cache = _KeyCache(cfg.fetch.url_cache_size)
        self._canonical = _CanonicalMemo(cfg.fetch.canonical_memo_size)
        # digest -> (url, fetch start in epoch seconds, url_key) of its first capture in this
        # shard, the dedup.max_shard_digests most recent
        self._digests: OrderedDict[str, tuple[str, float, int]] = OrderedDict()
        # content seen in earlier rounds (batchcrawl.frontier.content): digest -> (url_key, url, time)
        self._seen: Mapping[str, tuple[int, str, datetime]] = {}
        self.near = _near_duplicates(cfg)
        self._host_counts: dict[str, list[int]] = {}  # host -> [pages_fetched, errors]
        self._lock = threading.Lock()
        # One fetch thread at a time parses, extracts links and archives (see _fetch_loop).
        self._processing = threading.Lock()
        self._stream: _Run | None = None  # the running stream (stream_start), if any
        self._batch: _Run | None = None  # the running batch fetch (run), if any
        self._stream_threads: list[threading.Thread] = []

    # -- configuration ---------------------------------------------------------------------------
    def reconfigure(
        self, cfg: Config, *, seed_hosts: Iterable[str] = (), seed_domains: Iterable[str] = ()
    ) -> None:
        """Use ``cfg`` and the seeds' scope from the next :meth:`run` on (call between runs).

        The filters are rebuilt from ``cfg.filters`` and the seeds; the HTTP stack (resolver,
        address policy, fetcher with its keep-alive connections and cookie jars) is rebuilt only
        if ``network``, ``crawl.user_agent`` or a ``[fetch]`` field other than the per-round ones
        (:func:`~batchcrawl.fetch.fetcher.http_settings`) changed. Per-host state is kept: a
        changed ``politeness`` section moves the hosts' visit states (next allowed times,
        Crawl-delays) into a new workbench, a changed ``robots`` section reloads the live
        robots.txt entries into a new cache.
        """
        old, self.cfg = self.cfg, cfg
        self.agent = cfg.crawl.robots_agent
        self.filters = FilterChain.from_config(cfg.filters, seed_hosts, seed_domains)
        # a round under a deadline gets a new fetch.time_limit_s: that must not drop every host's
        # connection, cookies and address (each round would start with a burst of new connections)
        if old.network != cfg.network or http_settings(old.fetch, old.crawl) != http_settings(
            cfg.fetch, cfg.crawl
        ):
            self.fetcher.close()
            self.resolver = Resolver(cfg.network)
            self.policy = AddressPolicy(cfg.network)
            self.fetcher = Fetcher(cfg.fetch, cfg.crawl, self.resolver, self.policy)
        if old.fetch.url_cache_size != cfg.fetch.url_cache_size:
            self.url_cache = _KeyCache(cfg.fetch.url_cache_size)
        if old.fetch.canonical_memo_size != cfg.fetch.canonical_memo_size:
            self._canonical = _CanonicalMemo(cfg.fetch.canonical_memo_size)
        if old.politeness != cfg.politeness:
            states = self.workbench.snapshot()
            self.workbench = Workbench.from_config(cfg.politeness, self.clock)
            self.workbench.restore(states)
        if old.robots != cfg.robots or old.crawl.robots_agent != cfg.crawl.robots_agent:
            hosts = [st.host for st in self.workbench.snapshot()]
            rows = {h: self.robots.to_row(h) for h in hosts}
            self.robots = RobotsCache(cfg.robots, self.agent, clock=self.wall)
            for host, row in rows.items():
                self.robots.load_row(host, row)

    def know_content(self, seen: Mapping[str, tuple[int, str, datetime]]) -> None:
        """Use ``seen`` (``{digest: (url_key, url, fetch_time)}``, the committed ``content``
        table, :func:`batchcrawl.frontier.content.load_seen`) from the next :meth:`run` on: a
        payload already in it is a duplicate (``duplicate_of``, a WARC revisit, links skipped
        with ``dedup.skip_duplicate_links``)."""
        self._seen = seen

    def forget_idle_hosts(self, keep: Iterable[str] = ()) -> list[str]:
        """Forget every idle host not in ``keep`` whose politeness delay has passed: its visit
        state (:meth:`Workbench.prune_idle`), robots.txt entry, cached address and counters.

        Their last state is what :meth:`host_rows` gave at the end of their last round (the
        ``hosts`` table); :meth:`restore_hosts` brings a host back if it returns. Returns the hosts
        forgotten.
        """
        gone = self.workbench.prune_idle(keep=frozenset(keep))
        for host in gone:
            self.robots.forget(host)
            self.holds.forget(host)
            self.resolver.forget(host)
            self.near.forget(host)
            self._host_counts.pop(host, None)
        return gone

    def knows(self, host: str) -> bool:
        """True if this worker holds state for ``host`` (it was restored or fetched and not
        forgotten since)."""
        return self.workbench.visit_state(host) is not None

    def state_sizes(self) -> dict[str, int]:
        """Entries of each per-host structure: ``hosts`` (visit states), ``robots`` (robots.txt
        cache), ``addresses`` (resolver cache), ``counters`` (per-host counts). Bounded caches
        (URL cache, digests) are not per host."""
        return {
            "hosts": self.workbench.host_count,
            "robots": len(self.robots),
            "addresses": self.resolver.cached_count,
            "counters": len(self._host_counts),
        }

    # -- state across rounds -------------------------------------------------------------------
    def restore_hosts(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Reload per-host state persisted by an earlier round (``hosts`` table rows).

        The politeness clock (``next_fetch_time``, wall-clock UTC) becomes the host's next allowed
        time on this worker's monotonic clock; live robots.txt rules go back into the cache.
        Returns the number of hosts restored.
        """
        n = 0
        offset = self.clock() - self.wall()
        for row in rows:
            host = row["host"]
            self.robots.load_row(host, row)
            self.holds.load_row(host, row)
            self.near.restore(host, row.get("trap"))
            self._host_counts[host] = [
                int(row.get("pages_fetched") or 0),
                int(row.get("errors") or 0),
            ]
            nxt = row.get("next_fetch_time")
            ip = row.get("ip")
            if nxt is not None and ip:
                when = nxt.replace(tzinfo=UTC).timestamp() if isinstance(nxt, datetime) else nxt
                self.workbench.add(host, ip, (), next_allowed=when + offset)
                entry = self.robots.latest(host)
                if entry is not None:
                    self._set_crawl_delay(host, entry.rules)
            n += 1
        return n

    def cool_down(self, hosts: Iterable[str]) -> None:
        """Make each host wait a full delay before its first fetch: used after a crashed round, whose
        last requests were never persisted (so the rerun cannot break politeness)."""
        now = self.clock()
        for host in hosts:
            vs = self.workbench.visit_state(host)
            delay = vs.delay_s if vs is not None else self.cfg.politeness.host_delay_s
            ip = vs.ip if vs is not None else None
            if ip is None:
                try:
                    ip = self.resolver.resolve(host)
                except DNSError:
                    continue
            self.workbench.add(host, ip, (), next_allowed=now + delay)

    def host_rows(self, hosts: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """``hosts`` table rows for the hosts this worker knows (all, or only ``hosts``): politeness
        clock as wall-clock UTC, effective delay, robots.txt cache entry, cumulative counters."""
        offset = self.wall() - self.clock()
        rows = []
        wanted = None if hosts is None else set(hosts)
        for state in self.workbench.snapshot():
            if wanted is not None and state.host not in wanted:
                continue
            pages, errors = self._host_counts.get(state.host, (0, 0))
            row = {
                "host": state.host,
                "shard": self.shard,
                "ip": state.ip,
                "next_fetch_time": _utc(state.next_allowed + offset),
                "host_delay_s": state.delay_s,
                "pages_fetched": pages,
                "errors": errors,
                "trap": self.near.trap(state.host),
            }
            row.update(self.robots.to_row(state.host))
            row.update(self.holds.to_row(state.host))
            rows.append(row)
        return rows

    # -- one round ------------------------------------------------------------------------------
    def run(
        self,
        items: Iterable[FetchItem],
        round: int,
        *,
        time_limit_s: float | None = None,
        progress: Callable[[Counter], None] | None = None,
        spill: Callable[[ShardRun], None] | None = None,
    ) -> ShardRun:
        """Fetch a fetch list (items in per-host breadth-first order) and return what was found.

        Stops when every item is done or after ``time_limit_s`` seconds (default
        ``fetch.time_limit_s``); items not fetched by then come back in ``ShardRun.unfetched``.
        ``spill``: called (from this thread, while the fetch threads go on) with the rows gathered
        so far each time they pass ``round.spill_pages`` ``fetched`` rows (0: never), which the
        run then no longer holds (:mod:`batchcrawl.fetch.spill`); the returned ``ShardRun`` holds
        the rows since the last spill.
        """
        started = self.clock()
        limit = self.cfg.fetch.time_limit_s if time_limit_s is None else time_limit_s
        items = list(items)
        self.forget_idle_hosts(keep={i.host for i in items})
        warc = self._warc_writer(round)
        out = _new_shard_run()
        run = _Run(round=round, out=out, warc=warc, deadline=started + limit,
                   found_hosts=set() if self.cfg.fetch.tail_capacity_ratio else None)  # fmt: skip
        pending = run.pending = self._enqueue(run, items)
        self._batch = run
        threads = [
            threading.Thread(target=self._fetch_loop, args=(run,), daemon=True,
                             name=f"fetch-{self.shard}-{i}")
            for i in range(max(1, min(self.cfg.fetch.threads, max(pending, 1))))
        ]  # fmt: skip
        for t in threads:
            t.start()
        fc = self.cfg.fetch
        tail = TailDetector(fc.tail_rate_ratio, fc.throughput_window_s, fc.tail_capacity_ratio)
        idle = IdleMeter(len(threads), started)
        try:
            while alive := [t for t in threads if t.is_alive()]:
                idle.observe(self.clock(), self.workbench.hosts_with_work(idle.need))
                alive[0].join(timeout=0.5)  # wakes about twice a second
                if progress is not None:
                    with self._lock:
                        progress(Counter(out.counters))
                if spill is not None and 0 < self.cfg.round.spill_pages <= len(out.fetched):
                    spill(self._take_rows(out))
                now = self.clock()
                with self._lock:
                    done = pending - run.pending
                working, waiting = (
                    (math.inf, 0.0)
                    if run.found_hosts is None
                    else self.workbench.polite_capacity(run.found_hosts)
                )
                in_tail = tail.observe(now, done, working, waiting) or (
                    0 < fc.tail_idle_s <= idle.in_tail_for(now)
                )
                if now >= run.deadline or (in_tail and not run.stop.is_set()):
                    if now < run.deadline:
                        out.counters["tail_cut"] = 1
                    run.stop.set()
                    self.workbench.wakeup()
        finally:
            self._batch = None
            run.stop.set()
            self.workbench.wakeup()
            for t in threads:
                t.join()
            warc.close()
        if run.storage_fault is not None:
            raise run.storage_fault
        if run.ended_early:
            out.counters["ended_early"] = 1
        for _host, rest in self.workbench.drain():
            for item in rest:  # robots.txt and sitemap jobs are redone when needed
                if isinstance(item, FetchItem):
                    out.unfetched.append(item)
        out.counters["not_fetched"] += len(out.unfetched)
        out.warc_files = list(warc.files)
        end = self.clock()
        out.seconds = end - started
        out.idle_s = idle.finish(end)
        out.tail_s = idle.tail_s(end)
        return out

    def _take_rows(self, out: ShardRun) -> ShardRun:
        """The ``fetched``, ``links`` and ``edges`` rows of ``out`` so far; ``out`` gets fresh
        lists (under the lock: fetch threads append to whatever ``out`` holds)."""
        fresh = _new_shard_run()
        with self._lock:
            rows = ShardRun(fetched=out.fetched, links=out.links, edges=out.edges)
            out.fetched, out.links, out.edges = fresh.fetched, fresh.links, fresh.edges
        return rows

    def end_run(self) -> bool:
        """End the running :meth:`run` early, from any thread: each fetch thread finishes the
        fetch in flight and the URLs still queued come back in ``ShardRun.unfetched`` (counter
        ``ended_early``). Returns False when no run is going on."""
        run = self._batch
        if run is None:
            return False
        run.ended_early = True
        run.stop.set()
        self.workbench.wakeup()
        return True

    def close(self) -> None:
        """Close connections and the fetcher's watchdog."""
        self.fetcher.close()

    # -- streaming (docs/design.md §8; BUbiNG's never-stopping fetch threads) ---------------------
    def stream_start(self, round: int) -> None:
        """Start ``fetch.threads`` fetch threads that run until :meth:`stream_stop`, taking items
        given by :meth:`stream_add` as they come (an empty workbench makes them wait, not end).
        Rows are recorded as micro-batch ``round`` until :meth:`stream_take` starts the next one."""
        if self._stream is not None:
            raise RuntimeError("stream_start: this worker is already streaming")
        run = _Run(round=round, out=_new_shard_run(), warc=self._warc_writer(round),
                   deadline=float("inf"), streaming=True)  # fmt: skip
        self._stream = run
        self._stream_threads = [
            threading.Thread(target=self._fetch_loop, args=(run,), daemon=True,
                             name=f"stream-{self.shard}-{i}")
            for i in range(self.cfg.fetch.threads)
        ]  # fmt: skip
        for t in self._stream_threads:
            t.start()

    def stream_add(self, items: Iterable[FetchItem]) -> int:
        """Queue ``items`` (per-host breadth-first order) on the running stream; returns how many
        were queued (the others are recorded at once, e.g. as ``dns_error``)."""
        run = self._stream
        n = self._enqueue(run, list(items))
        with self._lock:
            run.pending += n
        return n

    @property
    def stream_held(self) -> int:
        """URLs given to the running stream and not finished yet (queued or being fetched)."""
        return max(0, self._stream.pending)

    def stream_take(self, next_round: int) -> ShardRun:
        """What the stream produced since the last take (micro-batch ``run.round``), closing its
        WARC files; rows from now on belong to micro-batch ``next_round``. The fetch threads keep
        running; taking waits only for the page being processed (the processing lock).

        Raises the run's storage fault (``OSError``: full or read-only storage), if one stopped
        the threads: nothing since the last take is trustworthy (:mod:`batchcrawl.store.faults`)."""
        run = self._stream
        if run.storage_fault is not None:
            raise run.storage_fault
        new_warc = self._warc_writer(next_round)
        with self._processing, self._lock:
            out, run.out = run.out, _new_shard_run()
            old_warc, run.warc = run.warc, new_warc
            run.round, run.seq = next_round, 0
        old_warc.close()
        out.warc_files = list(old_warc.files)
        return out

    def stream_stop(self) -> ShardRun:
        """Stop the fetch threads (each finishes its fetch in flight) and return what was produced
        since the last take; the URLs still queued come back in ``ShardRun.unfetched``. Raises
        the run's storage fault, if any (as :meth:`stream_take`)."""
        run = self._stream
        run.stop.set()
        self.workbench.wakeup()
        for t in self._stream_threads:
            t.join()
        self._stream = None
        run.warc.close()
        if run.storage_fault is not None:
            raise run.storage_fault
        out = run.out
        for _host, rest in self.workbench.drain():
            out.unfetched.extend(item for item in rest if item is not ROBOTS)
        out.warc_files = list(run.warc.files)
        return out

    def _warc_writer(self, round: int) -> WarcWriter:
        """A WARC writer for ``round`` (files ``warc/round=R/<warc_prefix>-NNNNN.warc.gz``)."""
        return WarcWriter(
            self.fs, paths.warc_dir(round),
            paths.warc_prefix(self._crawl_name(), round, self.shard, self.wall()),
            self.cfg.fetch.warc_rotate_bytes, self.cfg.crawl.user_agent,
            warcinfo_fields={"robots": "classic", "isPartOf": self.cfg.crawl.name or "batchcrawl"},
            compress_level=self.cfg.fetch.warc_compress_level,
            cdxj_name=paths.warc_cdxj if self.cfg.fetch.warc_cdxj else None,
        )  # fmt: skip

    # -- internals ------------------------------------------------------------------------------
    def _enqueue(self, run: _Run, items: Iterable[FetchItem]) -> int:
        by_host: dict[str, list[FetchItem]] = {}
        for item in items:
            by_host.setdefault(item.host, []).append(item)
        pending = 0
        for host, host_items in by_host.items():
            try:
                ip = self.resolver.resolve(host)
            except DNSError as exc:
                for item in host_items:
                    self._record_failure(run, item, Outcome.DNS_ERROR, "dns", str(exc))
                continue
            refused = self.policy.check(ip)
            if refused is not None:
                for item in host_items:
                    self._record_failure(run, item, Outcome.REFUSED, refused, ip=ip)
                continue
            queue: list[Any] = list(host_items)
            if self.robots.get(robots_origin(host_items[0].url)) is None:
                queue.insert(0, ROBOTS)
            jobs = self._new_sitemaps(run, seed_sitemap_jobs(self.cfg.sitemaps.seeds, host))
            if run.round == 1 and jobs:  # configured sitemaps: in the first round, after the pages
                queue.extend(jobs)
                run.out.counters["sitemaps_queued"] += len(jobs)
                pending += len(jobs)
            self.workbench.add(host, ip, queue)
            pending += len(host_items)
        return pending

    def _new_sitemaps(self, run: _Run, jobs: list[SitemapJob]) -> list[SitemapJob]:
        """The jobs whose sitemap was not queued yet in this run (and marks them queued)."""
        with self._lock:
            out = [j for j in jobs if j.url not in run.sitemaps]
            run.sitemaps.update(j.url for j in out)
        return out

    def _queue_sitemaps(self, run: _Run, host: str, jobs: list[SitemapJob]) -> None:
        """Append new sitemap jobs to ``host``'s visit state (politeness applies) and count them
        pending; call while an item of the run is still pending."""
        named = len(jobs)
        jobs = self._new_sitemaps(run, jobs)
        if named > len(jobs):  # named twice (robots.txt, an index, a seed): fetched once
            with self._lock:
                run.out.counters["sitemaps_repeated"] += named - len(jobs)
        if not jobs:
            return
        with self._lock:
            run.pending += len(jobs)
            run.out.counters["sitemaps_queued"] += len(jobs)
        self.workbench.add(host, None, jobs)

    def _set_crawl_delay(self, host: str, rules) -> None:
        vs = self.workbench.visit_state(host)
        if vs is not None:
            vs.set_crawl_delay(rules.crawl_delay(self.agent))

    def _done(self, run: _Run, n: int = 1) -> None:
        with self._lock:
            run.pending -= n
            if run.pending <= 0:
                self.workbench.wakeup()

    def _fetch_loop(self, run: _Run) -> None:
        wb = self.workbench
        stop, deadline = run.stop, run.deadline
        while not stop.is_set():
            if run.pending <= 0 and not run.streaming:  # an int read without the lock is atomic
                return
            left = deadline - self.clock()
            if left <= 0:  # the time limit (or the crawl's deadline) passed: no new fetch
                return
            vs = wb.acquire_wait(min(1.0, left), stop)
            if vs is None:
                if self.clock() >= deadline:
                    return
                continue
            if not vs.queue:  # pragma: no cover - defensive: an empty visit state is never ready
                wb.release(vs, None)
                continue
            item = vs.pop()
            if item is ROBOTS:
                self._fetch_robots(run, vs)  # never raises: any failure is robots_unavailable
                continue
            if isinstance(item, SitemapJob):
                if not self._fetch_sitemap(run, vs, item):
                    return  # storage fault: the run stops
                continue
            rules = self.robots.get(robots_origin(item.url))
            if rules is None:  # another origin of the host, or expired: fetch it first
                vs.push_front(item)
                vs.push_front(ROBOTS)
                wb.release(vs, None)
                continue
            if rules.unavailable:  # this URL's origin only: no request made, so no delay
                wb.release(vs, None)
                self._record_failure(
                    run, item, Outcome.ROBOTS_UNAVAILABLE, "robots_unavailable",
                    retry_after_s=self.holds.remaining_s(item.host),
                )  # fmt: skip
                self._done(run)
                continue
            if not rules.allowed(item.url, self.agent):
                wb.release(vs, None)
                self._record_failure(run, item, Outcome.ROBOTS_DENIED, "robots_denied")
                self._done(run)
                continue
            t0 = time.thread_time()
            try:
                result = self.fetcher.fetch(item.url, extra_headers=item.conditional_headers())
            except Exception:  # a bug below the fetcher must not kill the thread or leak the host
                log.exception("fetching %s failed", item.url)
                wb.release(vs, self.cfg.politeness.host_delay_s)  # assume a request was made
                self._record_failure(run, item, Outcome.NETWORK_ERROR, "internal")
                self._done(run)
                continue
            cpu_fetch_s = time.thread_time() - t0
            hop = self._self_redirect_hop(run, item, result)
            if hop:  # fetched again after the host's delay: the workbench keeps politeness
                vs.push_front(item)
            wb.release(
                vs,
                result.download_s if result.status is not None or result.ip else None,
                retry_after_s=self._host_wait(vs.host, result),
            )
            if hop:
                self._archive_hop(run, item, result)
                continue
            try:
                with self._processing:
                    self._process(run, item, result, cpu_fetch_s)
            except Exception as exc:  # a bug in one page's processing must not stop the shard
                if (fault := storage_fault(exc)) is not None:  # a full disk fails every page: stop
                    run.storage_fault = run.storage_fault or fault
                    run.stop.set()
                    self.workbench.wakeup()
                    return
                log.exception("processing %s failed", item.url)
                self._record_failure(run, item, Outcome.NETWORK_ERROR, "internal")
                self._done(run)

    def _fetch_robots(self, run: _Run, vs) -> None:
        """Fetch robots.txt for ``vs.host`` (held by this thread), following redirects (RFC 9309
        §2.3.1.2), archive every hop, cache the rules and set the host's Crawl-delay. If robots.txt
        is unavailable (5xx, network failure), every queued URL of the host is given back as
        ``robots_unavailable`` at once: the host is treated as fully disallowed until it is retried."""
        first = vs.queue[0] if vs.queue else None
        origin = (
            robots_origin(first.url)
            if isinstance(first, FetchItem | SitemapJob)
            else f"http://{vs.host}"
        )
        try:
            chain = fetch_robots(self.fetcher, origin, max_redirects=self.cfg.robots.max_redirects)
        except Exception:  # a bug below must not kill the thread: robots.txt is unavailable
            log.exception("fetching robots.txt of %s failed", origin)
            chain = [FetchResult(url=origin + "/robots.txt", error="internal")]
        entry = self.robots.put(origin, rules_from_fetch(chain[-1], self.cfg.robots.max_bytes))
        rules = entry.rules  # the last good copy while robots.txt is unreachable (RFC 9309 §2.4)
        held = hold_host(self.holds, self.robots, vs.host, origin, rules, self.cfg.robots)
        vs.set_crawl_delay(rules.crawl_delay(self.agent))
        dropped: list[FetchItem] = []
        if rules.unavailable:  # this origin's URLs; the host's other origins keep their place
            kept: list[Any] = []
            while vs.queue:
                it = vs.pop()
                if it is ROBOTS or robots_origin(it.url) != origin:
                    kept.append(it)
                else:
                    dropped.append(it)
            for it in reversed(kept):
                vs.push_front(it)
        contacted = any(r.ip for r in chain)
        self.workbench.release(vs, sum(r.download_s for r in chain) if contacted else None)
        with self._lock:
            run.out.counters["robots_fetches"] += len(chain)
            run.out.counters[f"robots_state_{rules.state}"] += 1
            if entry.stale:
                run.out.counters["robots_stale_kept"] += 1
            for r in chain:
                if r.status is not None:
                    run.warc.write_fetch(r)
        if self.cfg.sitemaps.enabled and not rules.unavailable and not entry.stale:
            jobs, counts = robots_sitemap_jobs(rules.sitemaps, chain[-1].url, vs.host)
            with self._lock:
                run.out.counters.update(counts)
            self._queue_sitemaps(run, vs.host, jobs)  # before dropped items finish: run goes on
        for it in dropped:
            if isinstance(it, SitemapJob):
                with self._lock:
                    run.out.counters["sitemaps_robots_unavailable"] += 1
            else:
                self._record_failure(
                    run, it, Outcome.ROBOTS_UNAVAILABLE, "robots_unavailable", retry_after_s=held
                )
        if dropped:
            self._done(run, len(dropped))

    def _fetch_sitemap(self, run: _Run, vs, job: SitemapJob) -> bool:
        """Fetch one sitemap from ``vs`` (held by this thread) like a page: robots.txt first, its
        rules apply, the host's delay follows; then archive, parse and emit it
        (:meth:`_process_sitemap`). False when a storage fault stops the run."""
        wb = self.workbench
        rules = self.robots.get(robots_origin(job.url))
        if rules is None:  # another origin of the host, or expired: fetch robots.txt first
            vs.push_front(job)
            vs.push_front(ROBOTS)
            wb.release(vs, None)
            return True
        if rules.unavailable or not rules.allowed(job.url, self.agent):
            wb.release(vs, None)
            with self._lock:
                run.out.counters["sitemaps_robots_denied"] += 1
            self._done(run)
            return True
        try:
            result = self.fetcher.fetch(job.url)
        except Exception:  # a bug below the fetcher must not kill the thread or leak the host
            log.exception("fetching sitemap %s failed", job.url)
            wb.release(vs, self.cfg.politeness.host_delay_s)  # assume a request was made
            with self._lock:
                run.out.counters["sitemaps_failed"] += 1
            self._done(run)
            return True
        wb.release(
            vs,
            result.download_s if result.status is not None or result.ip else None,
            retry_after_s=self._host_wait(vs.host, result),
        )
        try:
            self._process_sitemap(run, job, result)
        except Exception as exc:  # one bad sitemap must not stop the shard
            if (fault := storage_fault(exc)) is not None:
                run.storage_fault = run.storage_fault or fault
                run.stop.set()
                wb.wakeup()
                return False
            log.exception("processing sitemap %s failed", job.url)
            with self._lock:
                run.out.counters["sitemaps_failed"] += 1
        self._done(run)
        return True

    def _process_sitemap(self, run: _Run, job: SitemapJob, result: FetchResult) -> None:
        """Archive a fetched sitemap, queue the children of an index (:func:`child_jobs`) and emit
        its page URLs as links tagged ``sitemap`` with their ``lastmod`` (scope filters applied at
        depth 1, like a seed's outlinks). A URL with a ``lastmod`` is emitted even if recently
        seen, so update can make a known URL due when it changed (docs/design.md §8a)."""
        sm_cfg = self.cfg.sitemaps
        with self._processing:
            if result.status is not None:
                run.warc.write_fetch(result)
        if result.status != 200:
            with self._lock:
                run.out.counters["sitemaps_failed"] += 1
            return
        sm = parse_sitemap(
            result.body, job.url, max_urls=sm_cfg.max_urls, max_bytes=sm_cfg.max_bytes
        )
        children, counts = child_jobs(job, sm.sitemaps, sm_cfg.max_depth)
        self._queue_sitemaps(run, job.host, children)  # before this job is done: the run goes on
        host = host_of(job.url)
        src = FetchItem(url_key(job.url), job.url, host, domain_of(host), depth=0)
        memo = self._canonical.canonical
        hits = [(hit, e.lastmod) for e in sm.urls if (hit := memo(e.loc)) is not None]
        found = [(hit, lm) for hit, lm in hits if job.may_list(hit[1])]  # sitemaps.org location
        with self._lock:
            seen = self.url_cache.seen
            new = [(hit, lm) for hit, lm in found if not seen(hit[0]) or lm is not None]
        links = self._scope_links(src, [(*hit, "sitemap", False) for hit, _ in new])
        with self._lock:
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
            self._emit_links(run, src, links, [_utc(lm) if lm else None for _, lm in new])

    def _self_redirect_hop(self, run: _Run, item: FetchItem, result: FetchResult) -> bool:
        """True (and the hop counted) when ``result`` redirects ``item`` to its own URL and fewer
        than ``fetch.max_self_redirects`` such hops were followed in this chain: the caller puts
        the item back at the front of its host's queue. The hop count is per chain and per run; a
        chain still open when the run stops starts again at 0 (the URL stays queued, no row)."""
        if (
            classify(result) is not Outcome.REDIRECT
            or _redirect_target(result, item.url) != item.url
        ):
            return False
        with self._lock:
            hops = run.self_hops.get(item.url_key, 0)
            if hops >= self.cfg.fetch.max_self_redirects:
                return False
            run.self_hops[item.url_key] = hops + 1
            run.out.counters["self_redirect_hops"] += 1
            self._count_host(item.host, error=False)
        return True

    def _archive_hop(self, run: _Run, item: FetchItem, result: FetchResult) -> None:
        """Write one followed self-redirect to the WARC (every request is archived)."""
        try:
            with self._processing:
                run.warc.write_fetch(result)
        except Exception:  # archiving one hop must not stop the shard
            log.exception("archiving a redirect hop of %s failed", item.url)

    def _record_failure(
        self,
        run: _Run,
        item: FetchItem,
        outcome: Outcome,
        error: str | None,
        detail: str | None = None,
        ip: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        row = self._base_row(run, item, self.wall())
        row.update(outcome=outcome.value, error=error, fetch_ip=ip, retry_after_s=retry_after_s)
        with self._lock:
            run.out.fetched.append(row)
            run.out.counters[outcome.value] += 1
            if outcome not in (Outcome.ROBOTS_DENIED,):
                self._count_host(item.host, error=True)

    def _count_host(self, host: str, error: bool) -> None:
        counts = self._host_counts.setdefault(host, [0, 0])
        counts[1 if error else 0] += 1

    def _base_row(self, run: _Run, item: FetchItem, when: float) -> dict[str, Any]:
        return {
            "url_key": item.url_key,
            "url": item.url,
            "url_host_name": item.host,
            "url_host_registered_domain": item.domain,
            "fetch_time": _utc(when),
            "depth": item.depth,
            "round": run.round,
            "shard": self.shard,
        }

    def _process(
        self, run: _Run, item: FetchItem, result: FetchResult, cpu_fetch_s: float = 0.0
    ) -> None:
        """Classify, archive, parse and extract the links of one fetch, then record it and mark it
        done. The worker's lock is taken twice per page (URL cache; rows and counters), never per
        link; parsing, canonicalization and the WARC write run unlocked."""
        outcome = classify(result)
        # whole milliseconds: fetched.fetch_time (TIMESTAMP_MS) then equals the WARC-Date, so a
        # later 304's WARC-Refers-To-Date (from the frontier) names this capture exactly
        result.started = round(result.started * 1000) / 1000
        row = self._base_row(run, item, result.started or self.wall())
        row.update(
            fetch_status=result.status,
            outcome=outcome.value,
            error=result.error,
            fetch_ip=result.ip,
            download_s=result.download_s,
        )
        found: list[tuple[str, str, bool]] = []  # (absolute url, tag, nofollow)
        cpu_parse_s = cpu_simhash_s = 0.0
        invalid = 0
        rejected: tuple[str, ...] = ()
        if result.status is not None:
            ctype = result.header("Content-Type")
            fields = self._fields(item, result)  # every header value typed and validated
            rejected = fields.rejected
            row["header_errors"] = ",".join(rejected) or None
            row["content_mime_type"] = fields.content_mime_type
            row["content_length"] = len(result.raw_body)
            row["content_truncated"] = result.truncated
            # a 304 confirms the stored capture: no payload of its own, the stored digest is kept
            digest = None if outcome is Outcome.NOT_MODIFIED else payload_digest(result.raw_body)
            row["content_digest"] = digest
            row["retry_after_s"] = fields.retry_after_s
            directives = fields.robots
            if outcome in (Outcome.OK, Outcome.TRUNCATED, Outcome.NOT_MODIFIED):
                row["etag"] = fields.etag or (
                    item.etag if outcome is Outcome.NOT_MODIFIED else None
                )
                row["last_modified"] = fields.last_modified or (
                    item.last_modified if outcome is Outcome.NOT_MODIFIED else None
                )
                row["robots_noindex"] = directives.noindex
                row["robots_nofollow"] = directives.nofollow
            if outcome is Outcome.REDIRECT:
                target = _redirect_target(result, item.url)
                invalid += target is None
                row["fetch_redirect"] = target
                if target == item.url:  # _fetch_loop followed max_self_redirects hops already
                    outcome = Outcome.REDIRECT_LOOP
                    with self._lock:
                        hops = run.self_hops.pop(item.url_key, 0)
                    row.update(outcome=outcome.value, error=f"redirect_loop:{hops + 1}")
                elif target is not None:
                    found.append((target, "redirect", False))
            elif outcome in (Outcome.OK, Outcome.TRUNCATED):
                t0 = time.thread_time()
                page = parse_page(
                    result.body, item.url, ctype, robots_agent=self.agent, anchor_text=False
                )
                cpu_parse_s = time.thread_time() - t0
                row["content_charset"] = page.charset
                row["robots_noindex"] = page.robots_noindex or directives.noindex
                row["robots_nofollow"] = page.robots_nofollow or directives.nofollow
                row["canonical_url"] = page.canonical or fields.canonical_url
                found.extend(
                    (link.url, link.tag, link.nofollow or directives.nofollow)
                    for link in page.links
                )
                if page.is_html:
                    row["simhash"] = page_simhash(page.text)
                    row["simhash_version"] = SIMHASH_VERSION
                    cpu_simhash_s = time.thread_time() - t0 - cpu_parse_s
        t0 = time.thread_time()
        canonical, invalid_links = self._canonical_links(found)
        invalid += invalid_links
        t1 = time.thread_time()
        revisit = None
        follow = canonical  # the links to hand to the frontier (the graph keeps every link)
        if result.status is not None:
            if outcome is Outcome.OK and row["content_length"]:
                revisit = self._duplicate(row, item.url_key, digest)
                if row.get("duplicate_of") is not None and self.cfg.dedup.skip_duplicate_links:
                    follow = []
                if revisit is None and digest == item.content_digest and item.content_fetch_time:
                    when = item.content_fetch_time.replace(tzinfo=UTC).timestamp()
                    revisit = (item.url, warc_date(when))  # unchanged since the last capture
            not_modified = None
            if outcome is Outcome.NOT_MODIFIED:
                refers = item.content_fetch_time
                not_modified = (item.url, warc_date(refers.replace(tzinfo=UTC).timestamp())
                                if refers is not None else None)  # fmt: skip
            loc = run.warc.write_fetch(
                result,
                outlinks=[u for u, _, _ in found] if found else None,
                revisit_of=revisit,
                digest=digest,
                not_modified_of=not_modified,
            )
            if loc is not None:
                row["warc_filename"] = loc.filename
                row["warc_record_offset"] = loc.offset
                row["warc_record_length"] = loc.length
        t2 = time.thread_time()
        with self._lock:  # BUbiNG's URL cache: which outlinks were not seen recently
            self._emit_edges(run, item, canonical)  # the link graph: every link, before the cache
            seen = self.url_cache.seen
            new = [link for link in follow if not seen(link[0])]
        links = self._scope_links(item, new) if new else []
        t3 = time.thread_time()
        with self._lock:
            counters = run.out.counters
            counters["links_cached"] += len(canonical) - len(new)
            for name in rejected:
                counters[f"header_rejected:{name}"] += 1
            if invalid:
                counters["links_invalid"] += invalid
            if result.status is not None:
                if row.get("simhash") is not None or outcome is Outcome.OK:
                    self._near_duplicate(row, item)
                if revisit is None and outcome is Outcome.OK and row["content_length"]:
                    self._remember_digest(digest, result, item.url_key)
                else:
                    counters["revisits"] += revisit is not None
            run.out.fetched.append(row)
            counters[outcome.value] += 1
            self._count_host(item.host, error=outcome not in _HOST_OK)
            self._emit_links(run, item, links)
            run.pending -= 1
            if run.pending <= 0:
                self.workbench.wakeup()
            counters["cpu_fetch_s"] += cpu_fetch_s
            counters["cpu_parse_s"] += cpu_parse_s
            counters["cpu_simhash_s"] += cpu_simhash_s
            counters["cpu_links_s"] += (t1 - t0) + (t3 - t2)
            counters["cpu_warc_s"] += t2 - t1

    def _fields(self, item: FetchItem, result: FetchResult) -> ResponseFields:
        """The validated header fields of ``result`` (:func:`~batchcrawl.fetch.fields.response_fields`)."""
        return response_fields(
            result.response_headers, status=result.status, url=item.url, agent=self.agent,
            received=result.finished or self.wall(),
            max_retry_after_s=self.cfg.politeness.max_retry_after_s,
        )  # fmt: skip

    def _host_wait(self, host: str, result: FetchResult) -> float | None:
        """Seconds ``host`` waits after ``result``: a 429/503 holds it (rate-limit back-off,
        :func:`~batchcrawl.fetch.holds.rate_limit_wait`); None otherwise."""
        return rate_limit_wait(
            self.holds, host, result.status, self._retry_after(result), self.cfg.politeness
        )

    def _retry_after(self, result: FetchResult) -> float | None:
        """Seconds a 429/503 asks us to wait (``Retry-After``, RFC 9110 §10.2.3), capped at
        ``politeness.max_retry_after_s``; None for other statuses and absent or bad values."""
        if result.status not in (429, 503):
            return None
        wait = retry_after_s(result.header("Retry-After"), result.finished or self.wall())
        return None if wait is None else min(wait, self.cfg.politeness.max_retry_after_s)

    def _remember_digest(self, digest: str, result: FetchResult, key: int) -> None:
        digests = self._digests
        digests[digest] = (result.url, result.started, key)  # WARC-Date made when needed
        while len(digests) > self.cfg.dedup.max_shard_digests:
            digests.popitem(last=False)

    def _duplicate(self, row: dict[str, Any], key: int, digest: str) -> tuple[str, str] | None:
        """Set ``duplicate_of`` when the payload was first seen at another URL (earlier round:
        ``content`` table; this shard: the digest LRU) and return the capture ``(url, WARC-Date)``
        a WARC revisit refers to (an unchanged refetch of the first URL too, without
        ``duplicate_of``), or None for a first capture."""

        earlier = self._seen.get(digest)
        if earlier is not None:
            first, url, when = earlier
            if first != key:
                row["duplicate_of"] = first
            return (url, warc_date(when.replace(tzinfo=UTC).timestamp()))
        # OrderedDict.get is one atomic step under the GIL; a duplicate fetched by two threads
        # at once is simply archived twice
        mine = self._digests.get(digest)
        if mine is None:
            return None
        url, started, first = mine
        if first != key:
            row["duplicate_of"] = first
        return (url, warc_date(started))

    def _near_duplicate(self, row: dict[str, Any], item: FetchItem) -> None:
        """Flag ``near_duplicate_of`` against the host's recent pages (lock held)."""
        path = item.url.split("/", 3)[3] if item.url.count("/") >= 3 else ""
        near = self.near.observe(item.host, item.url_key, "/" + path, row.get("simhash"))
        if near is not None:
            row["near_duplicate_of"] = near

    def _crawl_name(self) -> str:
        """``crawl.name``, or the crawl directory's base name (``fs`` is rooted at it)."""
        root = str(getattr(self.fs, "path", "")).rstrip("/")
        return self.cfg.crawl.name or root.rsplit("/", 1)[-1] or "crawl"

    def _canonical_links(
        self, found: list[tuple[str, str, bool]]
    ) -> tuple[list[tuple[int, str, str, str, str, bool]], int]:
        """Canonicalize outlinks through the memo: ``[(key, url, host, domain, tag, nofollow)]``
        and the number of invalid ones."""
        memo = self._canonical.canonical
        out = []
        invalid = 0
        for raw, tag, nofollow in found:
            hit = memo(raw)
            if hit is None:
                invalid += 1
            else:
                out.append((*hit, tag, nofollow))
        return out, invalid

    def _scope_links(self, item: FetchItem, new: list[tuple[int, str, str, str, str, bool]]):
        """Scope-check outlinks ``(key, url, host, domain, tag, nofollow)`` not in the URL cache:
        ``[(key, url, host, domain, tag, nofollow, reason, hops_out)]``."""
        out = []
        depth = item.depth + 1
        check = self.filters.check
        hops = self.filters.hops_out
        for key, url, host, domain, tag, nofollow in new:
            hops_out = hops(host, domain, item.hops_out)
            reason = "nofollow" if nofollow else check(url, host, domain, depth, hops_out)
            out.append((key, url, host, domain, tag, nofollow, reason, hops_out))
        return out

    def _emit_edges(self, run: _Run, item: FetchItem, canonical) -> None:
        """Append one ``edges`` row per canonical outlink ``(key, url, host, domain, tag,
        nofollow)`` (lock held)."""
        cols = run.out.edges
        n = len(canonical)
        cols["src_url_key"].extend([item.url_key] * n)
        cols["dst_url_key"].extend([link[0] for link in canonical])
        cols["round"].extend([run.round] * n)
        cols["tag"].extend([link[4] for link in canonical])
        cols["src_domain"].extend([item.domain] * n)  # STAR's domain in-degree (frontier.indegree)
        cols["dst_domain"].extend([link[3] for link in canonical])

    def _emit_links(
        self, run: _Run, item: FetchItem, links, lastmod: list[datetime | None] | None = None
    ) -> None:
        """Append link rows (lock held); ``lastmod`` (sitemap links) row-aligned with ``links``."""
        cols = run.out.links
        depth = item.depth + 1
        if run.found_hosts is not None:
            run.found_hosts.update(h for _, _, h, _, _, _, why, _ in links if why is None)
        for key, url, host, domain, tag, nofollow, reason, hops_out in links:
            run.seq += 1
            cols["round"].append(run.round)
            cols["shard"].append(self.shard)
            cols["seq"].append(run.seq)
            cols["src_url_key"].append(item.url_key)
            cols["dst_url_key"].append(key)
            cols["dst_url"].append(url)
            cols["dst_host"].append(host)
            cols["dst_domain"].append(domain)
            cols["depth"].append(depth)
            cols["hops_out"].append(hops_out)
            cols["tag"].append(tag)
            cols["nofollow"].append(nofollow)
            cols["filter_reason"].append(reason)
        cols["lastmod"].extend(lastmod if lastmod is not None else [None] * len(links))
        run.out.counters["links_new"] += len(links)
