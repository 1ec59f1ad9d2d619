"""The workbench: which host a fetch thread may visit next, without ever breaking politeness.

Structure (BUbiNG, Boldi et al., §4.2 "The workbench", "visit states"): a priority queue of **IP
entries** ordered by the time each may next be contacted; each entry is a priority queue of host
**visit states** ordered by their next allowed time; each visit state is a FIFO of items (URLs, in
fetch-list order, i.e. breadth-first). An entry's key is ``max(ip next-allowed, its first host's
next-allowed)``, so the top entry is ready exactly when its first URL can be fetched without breaking
the host delay or the IP delay. Choosing the next host is O(log n) and never scans; adding items,
taking a ready visit state and giving it back are O(log n) too (indexed binary heaps with
decrease/increase-key).

Choices documented here once:

* **Delays count from the end of the previous fetch** (the release time), as in BUbiNG and Heritrix:
  when a fetch thread hands a visit state back at clock time ``now``, the host may be fetched again at
  ``now + host_delay(...)`` and any host on the same IP at ``now + ip_delay_s``.
* **One fetch per host; at most ``ip_concurrency`` per IP at a time.** A visit state handed to a
  fetch thread is *acquired*: it leaves the queues until :meth:`Workbench.release`, so no other
  thread can fetch from that host meanwhile. Its IP entry stays in the workbench heap while fewer
  than ``ip_concurrency`` of its visit states are acquired, and leaves it when that many are. With
  the default ``ip_concurrency=1`` this is BUbiNG's one connection per IP (its "workbench entry" is
  held with its visit state); a larger value suits shared hosting, where many hosts sit on one
  address (and tests, where every ``*.test`` host is 127.0.0.1).
* **The IP delay with concurrency k.** Each IP entry keeps one next-allowed time. Every release
  that made a request (at clock time ``now``) sets it to ``now + ip_delay_s`` (it never moves
  earlier), and an acquire from that IP needs ``now >= next-allowed``. So the IP delay is the
  least time between the end of *any* fetch from the address and the start of the next one; fetches
  already in flight are not affected, and up to k fetches may start at the same instant while no
  fetch from the address has ended within the last ``ip_delay_s``. For k = 1 this is exactly
  BUbiNG's rule.
* **Politeness groups.** An entry is an IP address or a politeness group
  (:class:`~batchcrawl.politeness.Slot`, from the policy's ``[[politeness.groups]]``): a grouped
  host sits in its group's entry, whose delay and concurrency stand for ``ip_delay_s`` and
  ``ip_concurrency`` above; a host's own floor may come from a ``[[politeness.hosts]]`` rule.
  :meth:`Workbench.set_policy` moves hosts between entries when the rules change, keeping every
  delay: an entry's next start is at least the end of its last fetch plus its current delay, and a
  host moving in brings the end of its own last fetch.
* **Hosts keep their IP.** The IP given when a host is first added stays with it; later ``ip``
  arguments for that host are ignored. To move a host: :meth:`Workbench.remove_host`, then
  :meth:`Workbench.prune_idle` once its delay has passed, then add it again with the new IP.
* **Idle hosts are kept.** A visit state whose FIFO runs empty stays known (``host_count``,
  :meth:`Workbench.snapshot`) so its next-allowed time holds for items added later and can be
  persisted at round end; :meth:`Workbench.prune_idle` forgets those whose delay has passed.
* **Persistence carries host times only.** :meth:`Workbench.snapshot` returns one
  :class:`HostState` per host (the ``hosts`` table's politeness columns); IP next-allowed times are
  not persisted (the ``hosts`` table has no column for them), so after a restore the IP delay counts
  again from the first fetch.
* **Clocks.** All times are on the injected ``clock`` (seconds, ``time.monotonic`` by default).
  Converting to wall-clock time for the ``hosts`` table is the caller's job:
  ``offset = time.time() - clock()`` at save time, ``state.shifted(offset)`` to store,
  ``state.shifted(clock() - time.time())`` after loading.

Thread safety: every public method of :class:`Workbench` and the mutators of :class:`VisitState`
take the workbench's one lock. :meth:`Workbench.acquire_wait` blocks on a condition of that lock and
wakes when items are added, a visit state is released, or :meth:`Workbench.wakeup` is called.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from batchcrawl.config import PolitenessSection
from batchcrawl.errors import BatchcrawlError
from batchcrawl.politeness import PolitenessPolicy, Slot

T = TypeVar("T")

__all__ = ["HostState", "VisitState", "Workbench", "WorkbenchError", "host_delay"]


class WorkbenchError(BatchcrawlError, ValueError):
    """A workbench call got a bad argument: a negative or NaN delay, an unknown host without an IP,
    a visit state that is not held by the caller, or one from another workbench."""


def _check_seconds(name: str, value: float | None, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        raise WorkbenchError(f"{name}: expected a number of seconds, got {value!r}")
    if value < 0:
        raise WorkbenchError(f"{name}: expected seconds >= 0, got {value!r}")


def host_delay(
    *,
    host_delay_s: float,
    crawl_delay_s: float | None = None,
    max_crawl_delay_s: float = 30.0,
    adaptive_delay_factor: float = 0.0,
    last_download_s: float | None = None,
    cap_crawl_delay: bool = True,
) -> float:
    """Seconds to wait after one fetch from a host ends before the next may start.

    ``max(host_delay_s, min(crawl_delay_s, max_crawl_delay_s), adaptive_delay_factor *
    last_download_s)``: politeness as a pure function with bounds, after Heritrix's
    ``DispositionProcessor`` (``minDelayMs``, ``respectCrawlDelayUpToSeconds``, ``delayFactor``) and
    BUbiNG's per-host delay. robots.txt ``Crawl-delay`` may raise the delay (up to
    ``max_crawl_delay_s``, or without bound when ``cap_crawl_delay`` is False:
    ``politeness.long_crawl_delay`` ``slow`` and ``skip``) but never lowers it below the floor
    ``host_delay_s``.

    Parameters
    ----------
    host_delay_s
        Our floor, seconds (config ``politeness.host_delay_s``).
    crawl_delay_s
        The host's robots.txt ``Crawl-delay`` for our agent, seconds; None when it gives none.
    max_crawl_delay_s
        ``Crawl-delay`` is honoured up to this many seconds.
    adaptive_delay_factor
        The delay is at least this factor times ``last_download_s`` (0 disables).
    last_download_s
        Duration of the host's last download, seconds; None when nothing was downloaded yet.
    cap_crawl_delay
        Cap ``crawl_delay_s`` at ``max_crawl_delay_s`` (``politeness.long_crawl_delay = "cap"``).

    Returns
    -------
    float
        The delay, seconds, ``>= host_delay_s``.

    Raises
    ------
    WorkbenchError
        An argument is negative or NaN.
    """
    _check_seconds("host_delay_s", host_delay_s)
    _check_seconds("crawl_delay_s", crawl_delay_s, optional=True)
    _check_seconds("max_crawl_delay_s", max_crawl_delay_s)
    _check_seconds("adaptive_delay_factor", adaptive_delay_factor)
    _check_seconds("last_download_s", last_download_s, optional=True)
    delay = host_delay_s
    if crawl_delay_s is not None:
        delay = max(
            delay, min(crawl_delay_s, max_crawl_delay_s) if cap_crawl_delay else crawl_delay_s
        )
    if last_download_s is not None and adaptive_delay_factor > 0:
        delay = max(delay, adaptive_delay_factor * last_download_s)
    return delay


class _Heap:
    """Binary min-heap of nodes with ``key`` (unique, comparable) and ``pos`` (index or None)
    attributes, so a node can be removed or re-keyed in O(log n)."""

    __slots__ = ("a",)

    def __init__(self) -> None:
        self.a: list[Any] = []

    def push(self, node: Any) -> None:
        node.pos = len(self.a)
        self.a.append(node)
        self._up(node.pos)

    def pop(self) -> Any:
        a = self.a
        top = a[0]
        last = a.pop()
        if last is not top:
            a[0] = last
            last.pos = 0
            self._down(0)
        top.pos = None
        return top

    def remove(self, node: Any) -> None:
        a = self.a
        i = node.pos
        last = a.pop()
        if last is not node:
            a[i] = last
            last.pos = i
            self._up(i)
            self._down(last.pos)
        node.pos = None

    def update(self, node: Any) -> None:
        """Restore heap order after ``node.key`` changed."""
        self._up(node.pos)
        self._down(node.pos)

    def _up(self, i: int) -> None:
        a = self.a
        node = a[i]
        key = node.key
        while i > 0:
            p = (i - 1) >> 1
            parent = a[p]
            if parent.key <= key:
                break
            a[i] = parent
            parent.pos = i
            i = p
        a[i] = node
        node.pos = i

    def _down(self, i: int) -> None:
        a = self.a
        n = len(a)
        node = a[i]
        key = node.key
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            if c + 1 < n and a[c + 1].key < a[c].key:
                c += 1
            child = a[c]
            if key <= child.key:
                break
            a[i] = child
            child.pos = i
            i = c
        a[i] = node
        node.pos = i


def _count_ready(a: list[Any], now: float, cap: int) -> int:
    """Nodes of heap array ``a`` whose time ``key[0]`` is ``<= now``, counting at most ``cap``."""
    count = 0
    stack = [0] if a else []
    while stack and count < cap:
        i = stack.pop()
        if a[i].key[0] <= now:
            count += 1
            stack.extend(j for j in (2 * i + 1, 2 * i + 2) if j < len(a))
    return count


class _IPEntry:
    """BUbiNG's workbench entry: one IP address -- or one politeness group (:class:`Slot`) --,
    its delay and concurrency, its next-allowed time, the end of its last fetch and its hosts'
    heap."""

    __slots__ = ("ip", "delay_s", "concurrency", "next_allowed", "last_end", "heap", "active",
                 "hosts", "key", "pos")  # fmt: skip

    def __init__(self, slot: Slot, next_allowed: float) -> None:
        self.ip = slot.key  # the slot key: ip:ADDRESS or group:NAME[:DOMAIN|:ADDRESS]
        self.delay_s = slot.delay_s
        self.concurrency = slot.concurrency
        self.next_allowed = next_allowed
        self.last_end: float | None = None  # clock time the last fetch of the entry ended
        self.heap = _Heap()
        self.active = 0  # visit states of this IP that are acquired (fetches in flight)
        self.hosts = 0  # visit states that belong to this entry
        self.key: tuple[float, int] = (next_allowed, 0)
        self.pos: int | None = None


class VisitState(Generic[T]):
    """One host's politeness state and FIFO of items (BUbiNG §4.2 "visit state").

    Attributes
    ----------
    host
        Host name (lower-case, as in the frontier's ``host`` column).
    ip
        The address its fetches go to (one IP entry per address).
    queue
        Its items in fetch order (a ``deque``). Read it freely; change it only through
        :meth:`pop` and :meth:`push_front` (they keep the workbench's item count).
    next_allowed
        Clock time (seconds) before which the host must not be fetched.
    crawl_delay_s
        robots.txt ``Crawl-delay`` in seconds, or None; see :meth:`set_crawl_delay`.
    last_download_s
        Duration of the last download in seconds, or None before the first.
    acquired
        True while a fetch thread holds it (between ``acquire`` and ``release``).
    """

    __slots__ = (
        "host",
        "ip",
        "queue",
        "next_allowed",
        "crawl_delay_s",
        "last_download_s",
        "last_end",
        "acquired",
        "_wb",
        "_entry",
        "key",
        "pos",
    )

    def __init__(
        self, wb: Workbench[T], entry: _IPEntry, host: str, ip: str, next_allowed: float
    ) -> None:
        self.host = host
        self.ip = ip
        self.queue: deque[T] = deque()
        self.next_allowed = next_allowed
        self.crawl_delay_s: float | None = None
        self.last_download_s: float | None = None
        self.last_end: float | None = None  # clock time its last fetch ended
        self.acquired = False
        self._wb = wb
        self._entry = entry
        self.key: tuple[float, int] = (next_allowed, 0)
        self.pos: int | None = None

    def __len__(self) -> int:
        return len(self.queue)

    def __repr__(self) -> str:
        return (
            f"VisitState(host={self.host!r}, ip={self.ip!r}, items={len(self.queue)}, "
            f"next_allowed={self.next_allowed!r}, acquired={self.acquired})"
        )

    def _check_held(self, what: str) -> None:
        if not self.acquired:
            raise WorkbenchError(
                f"VisitState.{what}() on {self.host!r}: only the fetch thread that acquired the "
                "visit state may change its queue; use Workbench.add() to append items"
            )

    def pop(self) -> T:
        """Remove and return the next item. Only while acquired.

        Raises
        ------
        IndexError
            The queue is empty.
        WorkbenchError
            The visit state is not acquired.
        """
        with self._wb._lock:
            self._check_held("pop")
            item = self.queue.popleft()
            self._wb._items -= 1
            return item

    def push_front(self, item: T) -> None:
        """Put ``item`` first (a robots.txt fetch, or an item to retry). Only while acquired.

        Raises
        ------
        WorkbenchError
            The visit state is not acquired.
        """
        with self._wb._lock:
            self._check_held("push_front")
            self.queue.appendleft(item)
            self._wb._items += 1

    def set_crawl_delay(self, seconds: float | None) -> None:
        """Set the robots.txt ``Crawl-delay`` (seconds, or None for none); it takes effect when the
        visit state is next released (:func:`host_delay` caps and floors it).

        Raises
        ------
        WorkbenchError
            ``seconds`` is negative or NaN.
        """
        _check_seconds("crawl_delay_s", seconds, optional=True)
        with self._wb._lock:
            self.crawl_delay_s = seconds

    @property
    def delay_s(self) -> float:
        """The host delay (seconds) the next release will apply, from the current fields."""
        return self._wb._delay(self)


@dataclass(frozen=True, slots=True)
class HostState(Generic[T]):
    """A host's persisted workbench state (politeness columns of the ``hosts`` table plus its queued
    items, in order).

    ``next_allowed`` is on the clock of the workbench that made it (see the module docstring for the
    wall-clock conversion); ``delay_s`` is the effective host delay (``hosts.host_delay_s``).
    """

    host: str
    ip: str
    next_allowed: float
    crawl_delay_s: float | None
    last_download_s: float | None
    delay_s: float
    items: tuple[T, ...]

    def shifted(self, offset_s: float) -> HostState[T]:
        """A copy with ``next_allowed`` moved by ``offset_s`` seconds (clock conversion)."""
        return replace(self, next_allowed=self.next_allowed + offset_s)


class Workbench(Generic[T]):
    """BUbiNG's workbench (§4.2): IP entries -> host visit states -> FIFOs of items.

    Parameters
    ----------
    clock
        Returns the current time in seconds; ``time.monotonic`` by default. Tests pass a fake one.
    host_delay_s
        Floor of the delay between the end of one fetch from a host and the start of the next.
    ip_delay_s
        Delay between the end of any fetch from an IP address and the start of the next one (any
        host), seconds; see the module docstring for its meaning when ``ip_concurrency > 1``.
    ip_concurrency
        Most visit states of one IP address acquired at once (fetches in flight to it), ``>= 1``;
        1 is BUbiNG's one-connection-per-IP rule.
    max_crawl_delay_s
        robots.txt ``Crawl-delay`` is honoured up to this many seconds.
    adaptive_delay_factor
        The host delay is at least this factor times the host's last download time (0 disables).
    policy
        Per-host floors and politeness groups (:class:`~batchcrawl.politeness.PolitenessPolicy`);
        default: none, every host at ``host_delay_s`` in its IP address's entry. When given, its
        ``host_delay_s``, ``ip_delay_s`` and ``ip_concurrency`` are the ones in force.
    cap_crawl_delay
        Cap a ``Crawl-delay`` at ``max_crawl_delay_s`` (``politeness.long_crawl_delay = "cap"``);
        False honours any ``Crawl-delay`` in full.

    A host in a politeness group (:meth:`PolitenessPolicy.slot
    <batchcrawl.politeness.PolitenessPolicy.slot>`) sits in its group's entry instead of its IP
    address's: the group's ``delay_s`` and ``concurrency`` play the IP delay's and
    ``ip_concurrency``'s part for all its hosts. :meth:`set_policy` moves hosts between entries
    without breaking a delay.

    Raises
    ------
    WorkbenchError
        A delay or factor is negative or NaN, or ``ip_concurrency`` is not an integer >= 1.
    """

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
        _check_seconds("host_delay_s", host_delay_s)
        _check_seconds("ip_delay_s", ip_delay_s)
        _check_seconds("max_crawl_delay_s", max_crawl_delay_s)
        _check_seconds("adaptive_delay_factor", adaptive_delay_factor)
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
        self._ips: dict[str, _IPEntry] = {}
        # IP entries that have a queued visit state and fewer than ip_concurrency acquired
        self._entries = _Heap()
        self._items = 0
        self._seq = 0  # tie-breaker: first in, first served among equal times

    @classmethod
    def from_config(
        cls, politeness: PolitenessSection, clock: Callable[[], float] = time.monotonic
    ) -> Workbench[T]:
        """A workbench with the delays, the per-IP concurrency, the per-host rules and the
        politeness groups of the ``[politeness]`` config section."""
        return cls(
            clock,
            max_crawl_delay_s=politeness.max_crawl_delay_s,
            adaptive_delay_factor=politeness.adaptive_delay_factor,
            policy=PolitenessPolicy.from_config(politeness),
            cap_crawl_delay=politeness.long_crawl_delay == "cap",
        )

    def configure(self, politeness: PolitenessSection) -> None:
        """Apply a changed ``[politeness]`` section to this workbench, keeping every host's
        queue and times (:meth:`set_policy` for the rules and groups)."""
        _check_seconds("max_crawl_delay_s", politeness.max_crawl_delay_s)
        _check_seconds("adaptive_delay_factor", politeness.adaptive_delay_factor)
        with self._cond:
            self.max_crawl_delay_s = float(politeness.max_crawl_delay_s)
            self.adaptive_delay_factor = float(politeness.adaptive_delay_factor)
            self.cap_crawl_delay = politeness.long_crawl_delay == "cap"
        self.set_policy(PolitenessPolicy.from_config(politeness))

    def set_policy(self, policy: PolitenessPolicy) -> None:
        """Use ``policy`` from now on (a changed config between rounds or micro-batches).

        Every host is put into the entry its new :class:`~batchcrawl.politeness.Slot` names (a
        new entry is created as needed) and every entry takes its slot's delay and concurrency.
        No delay is broken: an entry whose delay changed may next start ``last fetch end + new
        delay``; a host moved into an entry brings the end of its last fetch with it (the entry
        may not start before ``that end + its delay``); an acquired host's fetch counts towards
        its new entry's concurrency. Queues, order and host times are kept.
        """
        with self._cond:
            self.policy = policy
            self.host_delay_s = policy.host_delay_s
            self.ip_delay_s = policy.ip_delay_s
            self.ip_concurrency = policy.ip_concurrency
            touched: dict[int, _IPEntry] = {}
            for vs in self._hosts.values():
                slot = policy.slot(vs.host, vs.ip)
                old = vs._entry
                new = self._entry_for(slot, self._clock())
                if new is not old:
                    if vs.pos is not None:
                        old.heap.remove(vs)
                    old.hosts -= 1
                    new.hosts += 1
                    if vs.acquired:
                        old.active -= 1
                        new.active += 1
                    vs._entry = new
                    if vs.last_end is not None:
                        new.next_allowed = max(new.next_allowed, vs.last_end + new.delay_s)
                        new.last_end = max(new.last_end or vs.last_end, vs.last_end)
                    if vs.queue and not vs.acquired:
                        new.heap.push(vs)
                touched[id(old)], touched[id(new)] = old, new
            for entry in self._ips.values():
                touched[id(entry)] = entry
            for entry in touched.values():
                self._reposition(entry)
            self._cond.notify_all()

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

    def _entry_for(self, slot: Slot, now: float) -> _IPEntry:
        """The entry of ``slot``, created (ready at ``now``) if new; an existing one takes the
        slot's delay and concurrency (its next start: the end of its last fetch + the delay)."""
        entry = self._ips.get(slot.key)
        if entry is None:
            entry = self._ips[slot.key] = _IPEntry(slot, now)
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

    def _reposition(self, entry: _IPEntry) -> None:
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
        seconds, ``time.monotonic``) passes, or ``stop_event`` is set (call :meth:`wakeup` after
        setting it to stop waiting threads at once). The wait until the next ready time is computed
        on the workbench clock and slept in real seconds (the same thing for the default clock).

        Returns
        -------
        VisitState or None
            The acquired visit state, or None on timeout or stop.

        Raises
        ------
        WorkbenchError
            ``timeout_s`` is negative or NaN.
        """
        _check_seconds("timeout_s", timeout_s)
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                if stop_event is not None and stop_event.is_set():
                    return None
                vs, wait = self._acquire(self._clock())
                if vs is not None:
                    return vs
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                wait = min(wait, remaining)
                self._cond.wait(None if math.isinf(wait) else wait)

    def wakeup(self) -> None:
        """Wake every thread in :meth:`acquire_wait` so it rechecks its stop event and the queues."""
        with self._cond:
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
        _check_seconds("download_s", download_s, optional=True)
        _check_seconds("retry_after_s", retry_after_s, optional=True)
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
                entry.heap = _Heap()
                entry.pos = None
            self._entries = _Heap()
            self._items = 0
            return out

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
                _check_seconds("crawl_delay_s", st.crawl_delay_s, optional=True)
                _check_seconds("last_download_s", st.last_download_s, optional=True)
                vs, created = self._add(st.host, st.ip, st.items, st.next_allowed, now)
                if created:
                    vs.crawl_delay_s = st.crawl_delay_s
                    vs.last_download_s = st.last_download_s
            self._cond.notify_all()

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
                    count += _count_ready(entry.heap.a, now, entry.concurrency - entry.active)
                    stack.extend(j for j in (2 * i + 1, 2 * i + 2) if j < len(a))
            return count
