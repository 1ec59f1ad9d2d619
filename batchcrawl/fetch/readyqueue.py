"""The workbench's ready queue (BUbiNG, Boldi et al., §4.2): the heap of IP entries keyed by the time
each may next be contacted, adding items, handing a ready visit state to a fetch thread and taking it
back with the delays set. :class:`ReadyQueue` holds the workbench's state and lock; the rules reload
(:mod:`batchcrawl.fetch.policyreload`) and the hosts-table state and statistics
(:mod:`batchcrawl.fetch.hoststats`) extend it, and :class:`batchcrawl.fetch.workbench.Workbench`
joins them (its docstring and module docstring describe the rules)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Container, Iterable
from typing import Generic, TypeVar

from batchcrawl.fetch.benchheap import IndexedHeap
from batchcrawl.fetch.hostdelay import WorkbenchError, check_seconds, host_delay
from batchcrawl.fetch.visitstate import IPEntry, VisitState
from batchcrawl.politeness import PolitenessPolicy, Slot

T = TypeVar("T")

__all__ = ["ReadyQueue"]


class ReadyQueue(Generic[T]):
    """The workbench's state, its lock and its scheduling: IP entries -> host visit states ->
    FIFOs of items. Parameters and errors: :class:`batchcrawl.fetch.workbench.Workbench`."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        *,
        host_delay_s: float = 2.0,
        ip_delay_s: float = 1.0,
        max_crawl_delay_s: float = 30.0,
        adaptive_delay_factor: float = 0.0,
        ip_concurrency: int = 1,
        policy: PolitenessPolicy | None = None,
        cap_crawl_delay: bool = True,
    ) -> None:
        if policy is not None:
            host_delay_s, ip_delay_s = policy.host_delay_s, policy.ip_delay_s
            ip_concurrency = policy.ip_concurrency
        check_seconds("host_delay_s", host_delay_s)
        check_seconds("ip_delay_s", ip_delay_s)
        check_seconds("max_crawl_delay_s", max_crawl_delay_s)
        check_seconds("adaptive_delay_factor", adaptive_delay_factor)
        if (
            not isinstance(ip_concurrency, int)
            or isinstance(ip_concurrency, bool)
            or ip_concurrency < 1
        ):
            raise WorkbenchError(
                f"ip_concurrency: expected an integer >= 1 (fetches in flight per IP address), "
                f"got {ip_concurrency!r}"
            )
        self._clock = clock
        self.host_delay_s = float(host_delay_s)
        self.ip_delay_s = float(ip_delay_s)
        self.max_crawl_delay_s = float(max_crawl_delay_s)
        self.adaptive_delay_factor = float(adaptive_delay_factor)
        self.ip_concurrency = ip_concurrency
        self.cap_crawl_delay = cap_crawl_delay
        self.policy = policy or PolitenessPolicy(
            host_delay_s=self.host_delay_s,
            ip_delay_s=self.ip_delay_s,
            ip_concurrency=ip_concurrency,
        )
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._hosts: dict[str, VisitState[T]] = {}
        self._ips: dict[str, IPEntry] = {}
        # IP entries that have a queued visit state and fewer than ip_concurrency acquired
        self._entries = IndexedHeap()
        self._items = 0
        self._seq = 0  # tie-breaker: first in, first served among equal times
        self._wakeups = 0  # wakeup() calls: a waiter returns to its caller after one

    # ----------------------------------------------------------------- internals (lock held)

    def _delay(self, vs: VisitState[T]) -> float:
        return host_delay(
            host_delay_s=self.policy.delay_floor_s(vs.host),
            crawl_delay_s=vs.crawl_delay_s,
            max_crawl_delay_s=self.max_crawl_delay_s,
            adaptive_delay_factor=self.adaptive_delay_factor,
            last_download_s=vs.last_download_s,
            cap_crawl_delay=self.cap_crawl_delay,
        )

    def _entry_for(self, slot: Slot, now: float) -> IPEntry:
        """The entry of ``slot``, created (ready at ``now``) if new; an existing one takes the
        slot's delay and concurrency (its next start: the end of its last fetch + the delay)."""
        entry = self._ips.get(slot.key)
        if entry is None:
            entry = self._ips[slot.key] = IPEntry(slot, now)
        elif (entry.delay_s, entry.concurrency) != (slot.delay_s, slot.concurrency):
            entry.delay_s, entry.concurrency = slot.delay_s, slot.concurrency
            if entry.last_end is not None:
                entry.next_allowed = entry.last_end + entry.delay_s
        return entry

    def _enqueue(self, vs: VisitState[T]) -> None:
        """Put a non-empty, not acquired visit state into its entry's heap."""
        self._seq += 1
        vs.key = (vs.next_allowed, self._seq)
        vs._entry.heap.push(vs)
        self._reposition(vs._entry)

    def _reposition(self, entry: IPEntry) -> None:
        """Re-key ``entry`` in the workbench heap after its hosts, times or in-flight count
        changed; it is there exactly while it has a queued visit state and fewer than
        ``ip_concurrency`` acquired."""
        hosts = entry.heap.a
        if not hosts or entry.active >= entry.concurrency:
            if entry.pos is not None:
                self._entries.remove(entry)
            return
        top = hosts[0]
        key = (max(entry.next_allowed, top.next_allowed), top.key[1])
        if entry.pos is None:
            entry.key = key
            self._entries.push(entry)
        elif key != entry.key:
            entry.key = key
            self._entries.update(entry)

    def _add(
        self,
        host: str,
        ip: str | None,
        items: Iterable[T],
        next_allowed: float | None,
        now: float,
    ) -> tuple[VisitState[T], bool]:
        vs = self._hosts.get(host)
        created = vs is None
        if vs is None:
            if not ip:
                raise WorkbenchError(
                    f"add({host!r}): a host the workbench does not know needs its IP address "
                    "(resolve it first)"
                )
            entry = self._entry_for(self.policy.slot(host, ip), now)
            entry.hosts += 1
            vs = VisitState(self, entry, host, ip, now if next_allowed is None else next_allowed)
            self._hosts[host] = vs
        elif next_allowed is not None and next_allowed > vs.next_allowed:
            vs.next_allowed = next_allowed
            if vs.pos is not None:
                vs.key = (next_allowed, vs.key[1])
                vs._entry.heap.update(vs)
                self._reposition(vs._entry)
        was_empty = not vs.queue
        before = len(vs.queue)
        vs.queue.extend(items)
        self._items += len(vs.queue) - before
        if was_empty and vs.queue and not vs.acquired:
            self._enqueue(vs)
        return vs, created

    def _acquire(self, now: float) -> tuple[VisitState[T] | None, float]:
        if not self._entries.a:
            return None, math.inf
        entry = self._entries.a[0]
        ready_at = entry.key[0]
        if ready_at > now:
            return None, ready_at - now
        vs = entry.heap.pop()
        vs.acquired = True
        entry.active += 1
        self._reposition(entry)  # stays (re-keyed by its next host) while below ip_concurrency
        return vs, 0.0

    # ----------------------------------------------------------------- public API

    def add(
        self,
        host: str,
        ip: str | None,
        items: Iterable[T] = (),
        *,
        next_allowed: float | None = None,
    ) -> None:
        """Append ``items`` (in order) to ``host``'s FIFO, creating its visit state if new.

        Parameters
        ----------
        host
            Host name.
        ip
            Its resolved address; required for a new host, ignored for a known one (hosts keep
            their IP).
        items
            Items (URLs, fetch-list rows) in fetch order; may be empty (registers the host).
        next_allowed
            Clock time (seconds) before which the host must not be fetched, e.g. restored from a
            previous round. A new host without it may be fetched at once; for a known host the
            later of the two times holds.

        Raises
        ------
        WorkbenchError
            ``host`` is new and ``ip`` is empty.
        """
        with self._cond:
            self._add(host, ip, items, next_allowed, self._clock())
            self._cond.notify_all()

    def acquire(self) -> tuple[VisitState[T] | None, float]:
        """Take the next ready visit state, without blocking.

        Returns
        -------
        (VisitState, 0.0)
            A visit state whose first item may be fetched now; it is held by the caller (and counts
            towards its IP's ``ip_concurrency``) until :meth:`release`.
        (None, float)
            Nothing is ready: seconds (clock) until the next visit state will be, or ``math.inf``
            when none will be without an :meth:`add` or :meth:`release` (empty, or every IP with
            items has ``ip_concurrency`` visit states held).
        """
        with self._lock:
            return self._acquire(self._clock())

    def acquire_wait(
        self, timeout_s: float, stop_event: threading.Event | None = None
    ) -> VisitState[T] | None:
        """Blocking :meth:`acquire` for fetch threads.

        Waits on the workbench's condition until a visit state is ready, ``timeout_s`` (real
        seconds, ``time.monotonic``) passes, ``stop_event`` is set or :meth:`wakeup` is called (set
        the event, or change whatever else the caller checks, then call :meth:`wakeup` to end the
        waits at once). The wait until the next ready time is computed on the workbench clock and
        slept in real seconds (the same thing for the default clock).

        Returns
        -------
        VisitState or None
            The acquired visit state, or None on timeout, stop or :meth:`wakeup` (the caller
            rechecks its own state, e.g. a batch run's pending count, and calls again).

        Raises
        ------
        WorkbenchError
            ``timeout_s`` is negative or NaN.
        """
        check_seconds("timeout_s", timeout_s)
        deadline = time.monotonic() + timeout_s
        with self._cond:
            woken = self._wakeups
            while True:
                if stop_event is not None and stop_event.is_set():
                    return None
                vs, wait = self._acquire(self._clock())
                if vs is not None:
                    return vs
                if self._wakeups != woken:
                    return None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                wait = min(wait, remaining)
                self._cond.wait(None if math.isinf(wait) else wait)

    def wakeup(self) -> None:
        """Make every thread in :meth:`acquire_wait` take a ready visit state if there is one, else
        return None, so that it rechecks its own state (its stop event, a batch run's pending
        count). Without the return, a thread woken with nothing ready waited on until its timeout:
        a batch run went on up to a second after its last item (the fetch threads wait 1 s at a
        time), at every round."""
        with self._cond:
            self._wakeups += 1
            self._cond.notify_all()

    def release(
        self, vs: VisitState[T], download_s: float | None, *, retry_after_s: float | None = None
    ) -> None:
        """Give back an acquired visit state after fetching from it.

        At clock time ``now`` the host's next-allowed time becomes ``now + host_delay(...)`` (with
        ``download_s`` as its last download time and its current ``crawl_delay_s``) and the IP's
        becomes ``now + ip_delay_s`` (for every host of that IP, also with ``ip_concurrency > 1``);
        delays count from the end of the fetch. The visit state goes
        back into the queues if it has items, else it stays idle. Pass ``download_s=None`` when no
        request was made while it was held: the times then stay as they were. ``retry_after_s`` (a
        server's ``Retry-After`` on a 429/503, RFC 9110 §10.2.3, already capped by the caller) moves
        the host's next-allowed time to at least ``now + retry_after_s``.

        Raises
        ------
        WorkbenchError
            ``vs`` is not acquired, belongs to another workbench, or ``download_s`` is negative.
        """
        check_seconds("download_s", download_s, optional=True)
        check_seconds("retry_after_s", retry_after_s, optional=True)
        with self._cond:
            if self._hosts.get(vs.host) is not vs or not vs.acquired:
                raise WorkbenchError(
                    f"release({vs.host!r}): this visit state is not held from this workbench; "
                    "release each acquired visit state exactly once"
                )
            entry = vs._entry
            if download_s is not None:
                now = self._clock()
                vs.last_download_s = download_s
                vs.last_end = entry.last_end = now
                vs.next_allowed = max(vs.next_allowed, now + self._delay(vs))
                if retry_after_s is not None:
                    vs.next_allowed = max(vs.next_allowed, now + retry_after_s)
                entry.next_allowed = max(entry.next_allowed, now + entry.delay_s)
            vs.acquired = False
            entry.active -= 1
            if vs.queue:
                self._enqueue(vs)
            else:
                self._reposition(entry)
            self._cond.notify_all()

    def remove_host(self, host: str) -> list[T]:
        """Drop every queued item of ``host`` (e.g. its address was refused or robots.txt is
        unavailable) and return them in order, so the caller can record why they were dropped.

        The host's visit state stays (idle), so its next-allowed time still holds if it is added
        again; an acquired one stays held by its thread. An unknown host has nothing to drop.
        """
        with self._lock:
            vs = self._hosts.get(host)
            if vs is None:
                return []
            items = list(vs.queue)
            vs.queue.clear()
            self._items -= len(items)
            if vs.pos is not None:
                vs._entry.heap.remove(vs)
                self._reposition(vs._entry)
            return items

    def drain(self) -> list[tuple[str, list[T]]]:
        """Remove every queued item (round end). Returns ``(host, items in order)`` for each host
        that had items, hosts in the order they were first added. Visit states stay (idle) with
        their times; items of acquired visit states are taken too (stop fetch threads first)."""
        with self._lock:
            out: list[tuple[str, list[T]]] = []
            for host, vs in self._hosts.items():
                if vs.queue:
                    out.append((host, list(vs.queue)))
                    vs.queue.clear()
                vs.pos = None
            for entry in self._ips.values():
                entry.heap = IndexedHeap()
                entry.pos = None
            self._entries = IndexedHeap()
            self._items = 0
            return out

    def prune_idle(self, keep: Container[str] = frozenset()) -> list[str]:
        """Forget idle hosts (no items, not acquired) whose next-allowed time has passed, except
        those in ``keep``, and IP entries left without hosts whose next-allowed time has passed.
        Returns the hosts forgotten, in the order they were first added. O(hosts): call it now and
        then (e.g. at round start), not per fetch."""
        with self._lock:
            now = self._clock()
            gone = [
                h
                for h, vs in self._hosts.items()
                if not vs.queue and not vs.acquired and vs.next_allowed <= now and h not in keep
            ]
            for h in gone:
                self._hosts.pop(h)._entry.hosts -= 1
            for ip in [
                ip
                for ip, e in self._ips.items()
                if e.hosts == 0 and e.active == 0 and e.next_allowed <= now
            ]:
                del self._ips[ip]
            return gone

    def __len__(self) -> int:
        """Items queued in all visit states (acquired ones included)."""
        with self._lock:
            return self._items

    def visit_state(self, host: str) -> VisitState[T] | None:
        """The visit state of ``host`` (queued, acquired or idle), or None if unknown. Read its
        ``ip``, ``delay_s`` and times freely; change it only through its own methods."""
        with self._lock:
            return self._hosts.get(host)

    @property
    def host_count(self) -> int:
        """Hosts known: queued, acquired and idle."""
        with self._lock:
            return len(self._hosts)
