"""The workbench's entries and their delay clocks (BUbiNG, Boldi et al., §4.2): an IP entry (an
address or a politeness group) with its next-allowed time, a host's visit state with its FIFO of
items and its times, and the state of a host persisted in the ``hosts`` table. The workbench that
orders them is :class:`batchcrawl.fetch.workbench.Workbench`."""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from batchcrawl.fetch.benchheap import IndexedHeap
from batchcrawl.fetch.hostdelay import WorkbenchError, check_seconds
from batchcrawl.politeness import Slot

T = TypeVar("T")

__all__ = ["HostState", "IPEntry", "VisitState", "WorkbenchOwner"]


class WorkbenchOwner(Protocol):
    """What a :class:`VisitState` needs of the workbench that made it: its one lock, its count of
    queued items (changed under that lock) and the host delay it applies at a release."""

    _lock: threading.Lock
    _items: int

    def _delay(self, vs: VisitState[Any]) -> float: ...


class IPEntry:
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
        self.heap = IndexedHeap()
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
        self, wb: WorkbenchOwner, entry: IPEntry, host: str, ip: str, next_allowed: float
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
        visit state is next released (:func:`~batchcrawl.fetch.hostdelay.host_delay` caps and
        floors it).

        Raises
        ------
        WorkbenchError
            ``seconds`` is negative or NaN.
        """
        check_seconds("crawl_delay_s", seconds, optional=True)
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

    ``next_allowed`` is on the clock of the workbench that made it (see
    :mod:`batchcrawl.fetch.workbench` for the wall-clock conversion); ``delay_s`` is the effective
    host delay (``hosts.host_delay_s``).
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
