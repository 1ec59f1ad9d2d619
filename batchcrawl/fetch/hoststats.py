"""The workbench's hosts-table side and its statistics: every host's politeness state for the
``hosts`` table (:meth:`HostStats.snapshot`, :meth:`HostStats.restore`), and the counts and
politeness capacity the fetch worker's tail rules read (:mod:`batchcrawl.fetch.idle`,
:mod:`batchcrawl.fetch.tail`)."""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping
from typing import TypeVar

from batchcrawl.fetch.benchheap import count_ready
from batchcrawl.fetch.hostdelay import check_seconds, host_delay
from batchcrawl.fetch.readyqueue import ReadyQueue
from batchcrawl.fetch.visitstate import HostState

T = TypeVar("T")

__all__ = ["HostStats"]


class HostStats(ReadyQueue[T]):
    """The workbench's persisted host states and its statistics."""

    def snapshot(self) -> list[HostState[T]]:
        """Every known host's state (idle ones too), hosts in the order they were first added, for
        persisting at round end. Times are on this workbench's clock; IP times are not included."""
        with self._lock:
            return [
                HostState(
                    host=vs.host,
                    ip=vs.ip,
                    next_allowed=vs.next_allowed,
                    crawl_delay_s=vs.crawl_delay_s,
                    last_download_s=vs.last_download_s,
                    delay_s=self._delay(vs),
                    items=tuple(vs.queue),
                )
                for vs in self._hosts.values()
            ]

    def restore(self, states: Iterable[HostState[T]]) -> None:
        """Load states from :meth:`snapshot` (already converted to this clock): items are appended,
        next-allowed times kept (the later one wins for a host already known), and
        ``crawl_delay_s``/``last_download_s`` set for hosts that were not known yet.

        Raises
        ------
        WorkbenchError
            A state has a negative or NaN ``crawl_delay_s`` or ``last_download_s``.
        """
        with self._cond:
            now = self._clock()
            for st in states:
                check_seconds("crawl_delay_s", st.crawl_delay_s, optional=True)
                check_seconds("last_download_s", st.last_download_s, optional=True)
                vs, created = self._add(st.host, st.ip, st.items, st.next_allowed, now)
                if created:
                    vs.crawl_delay_s = st.crawl_delay_s
                    vs.last_download_s = st.last_download_s
            self._cond.notify_all()

    def hosts_with_work(self, at_most: int) -> int:
        """Hosts that have queued items or are acquired (a fetch thread could work on each of
        them), counted up to ``at_most``. O(hosts) at worst, stopping at ``at_most``: the fetch
        worker's idle sampler calls it about twice a second."""
        n = 0
        with self._lock:
            for vs in self._hosts.values():
                if vs.queue or vs.acquired:
                    n += 1
                    if n >= at_most:
                        break
        return n

    def polite_capacity(self, waiting: Container[str] = frozenset()) -> tuple[float, float]:
        """Most fetches per second politeness alone allows ``(working, waiting)``: ``working``
        for the hosts with work (queued items, or acquired), ``waiting`` for the hosts in
        ``waiting`` that have none (host names as in the frontier's ``host`` column).

        A host gives at most ``1 / delay``, its fixed delay in seconds (``host_delay_s``, raised
        by its ``Crawl-delay`` up to ``max_crawl_delay_s``; not the adaptive part, which follows
        download times and so the crawler's own load); each IP address's share is capped at
        ``ip_concurrency / ip_delay_s`` when ``ip_delay_s`` > 0. A host with no fixed delay makes
        its sum ``math.inf``: politeness does not bound it (one connection per host and the
        adaptive delay do, but that is the threads' business, left to ``fetch.tail_idle_s``).
        O(hosts); the fetch worker's run loop calls it about twice a second for
        ``fetch.tail_capacity_ratio`` (:class:`batchcrawl.fetch.worker.TailDetector`).
        """
        sums: tuple[dict[str, float], dict[str, float]] = ({}, {})
        with self._lock:
            for vs in self._hosts.values():
                if vs.queue or vs.acquired:
                    per_ip = sums[0]
                elif vs.host in waiting:
                    per_ip = sums[1]
                else:
                    continue
                delay = host_delay(host_delay_s=self.policy.delay_floor_s(vs.host),
                                   crawl_delay_s=vs.crawl_delay_s,
                                   max_crawl_delay_s=self.max_crawl_delay_s,
                                   cap_crawl_delay=self.cap_crawl_delay)  # fmt: skip
                e = vs._entry
                per_ip[e.ip] = per_ip.get(e.ip, 0.0) + (1.0 / delay if delay > 0 else math.inf)
            caps = {k: e.concurrency / e.delay_s if e.delay_s > 0 else math.inf
                    for k, e in self._ips.items()}  # fmt: skip
        working, waiting_ = (sum(min(r, caps[k]) for k, r in per_ip.items()) for per_ip in sums)
        return working, waiting_

    def politeness_left_s(self, found: Mapping[str, int]) -> tuple[float, float]:
        """Seconds of politeness-bound work ``(working, waiting)``: ``working`` for the hosts with
        work, the longest of their queues (an acquired host counts one item more) times their
        fixed delay; ``waiting`` for the hosts without work that ``found`` gives new links (host
        name -> links), the longest of those counts times their fixed delay. Fixed delay as in
        :meth:`polite_capacity` (per-IP caps aside). O(hosts); for ``fetch.tail_overlap_s``
        (:func:`batchcrawl.fetch.idle.overlap_pays`)."""
        working = waiting = 0.0
        with self._lock:
            for vs in self._hosts.values():
                n = len(vs.queue) + int(vs.acquired)
                if not n and vs.host not in found:
                    continue
                delay = host_delay(host_delay_s=self.host_delay_s, crawl_delay_s=vs.crawl_delay_s,
                                   max_crawl_delay_s=self.max_crawl_delay_s)  # fmt: skip
                if n:
                    working = max(working, n * delay)
                else:
                    waiting = max(waiting, found[vs.host] * delay)
        return working, waiting

    @property
    def ready_count(self) -> int:
        """How many :meth:`acquire` calls would succeed now without a release or an add: for each
        ready IP entry, its ready hosts up to its free ``ip_concurrency`` slots. O(answer): only
        ready heap nodes are visited (at most ``ip_concurrency`` ready hosts per entry)."""
        with self._lock:
            now = self._clock()
            a = self._entries.a
            count = 0
            stack = [0] if a else []
            while stack:
                i = stack.pop()
                entry = a[i]
                if entry.key[0] <= now:
                    count += count_ready(entry.heap.a, now, entry.concurrency - entry.active)
                    stack.extend(j for j in (2 * i + 1, 2 * i + 2) if j < len(a))
            return count
