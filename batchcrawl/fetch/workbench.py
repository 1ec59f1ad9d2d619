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

import time
from collections.abc import Callable
from typing import TypeVar

from batchcrawl.config import PolitenessSection
from batchcrawl.fetch.hoststats import HostStats
from batchcrawl.fetch.policyreload import PolicyReload
from batchcrawl.politeness import PolitenessPolicy

T = TypeVar("T")

__all__ = ["Workbench"]


class Workbench(PolicyReload[T], HostStats[T]):
    """BUbiNG's workbench (§4.2): IP entries -> host visit states -> FIFOs of items.

    The parts, one job each: the entries and visit states with their clocks
    (:mod:`batchcrawl.fetch.visitstate`), the delay rule (:mod:`batchcrawl.fetch.hostdelay`), the
    ready queue (:mod:`batchcrawl.fetch.readyqueue`), the rules reload
    (:mod:`batchcrawl.fetch.policyreload`) and the hosts-table state and statistics
    (:mod:`batchcrawl.fetch.hoststats`).

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
