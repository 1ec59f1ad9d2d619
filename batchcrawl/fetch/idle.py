"""How long a fetch phase left its fetch threads without work (issue 16, "no idle fetch phase").

A fetch thread *has work* when some host with queued URLs (or one it is fetching from) is there for
it: with one connection per host, a shard whose fetch list is down to ``k`` hosts can keep at most
``k`` threads busy, however many it runs. Counting the threads actually inside a request would call
every polite round idle (at a 1 s host delay a thread spends most of its time waiting for the next
host's turn, which is the politeness bound, not idleness); counting the hosts with work measures
what the round's shape costs: the start-up before the threads get their fetch list and the slow
tail of a few Crawl-delay hosts (Nutch's fetcher "throughput threshold" problem).

:class:`IdleMeter` turns samples ``(time, hosts with work)``, taken about twice a second by the
worker's run loop, into seconds spent below half the threads, and the trailing part of it (the
tail). Each interval between two samples is charged to the state seen at its start.
"""

from __future__ import annotations

import math


class IdleMeter:
    """Seconds in which fewer than half of ``threads`` fetch threads had work.

    Parameters
    ----------
    threads
        Fetch threads of the worker (>= 1); the phase is idle while fewer than ``threads / 2``
        hosts have work.
    start_s
        Time the phase started, seconds on any monotonic clock; the phase counts as idle until
        the first sample (the fetch list is not queued yet).
    """

    def __init__(self, threads: int, start_s: float) -> None:
        self.threads = threads
        #: hosts with work needed for the phase to count as busy (``ceil(threads / 2)``)
        self.need = (threads + 1) // 2
        self.start_s = start_s
        self._last_s = start_s
        self._last_busy = False
        self.idle_s = 0.0
        self._busy_until_s = start_s  # end of the last busy interval
        #: True once a sample saw at least half the threads with work
        self.was_busy = False

    def observe(self, now_s: float, hosts_with_work: int) -> None:
        """Record that ``hosts_with_work`` hosts had work at ``now_s`` (non-decreasing times)."""
        dt = max(0.0, now_s - self._last_s)
        if self._last_busy:
            self._busy_until_s = now_s
        else:
            self.idle_s += dt
        self._last_s = now_s
        self._last_busy = hosts_with_work >= self.need
        self.was_busy = self.was_busy or self._last_busy

    def in_tail_for(self, now_s: float) -> float:
        """Seconds the phase has been idle since it was last busy, at ``now_s``; 0 while busy and
        before it was ever busy (a fetch list of fewer hosts than half the threads has no tail)."""
        return self.tail_s(now_s) if self.was_busy and not self._last_busy else 0.0

    def tail_s(self, end_s: float) -> float:
        """Seconds from the end of the last busy interval to ``end_s`` (the phase's idle tail;
        the whole phase when it was never busy)."""
        busy_until = self._last_s if self._last_busy else self._busy_until_s
        return max(0.0, end_s - busy_until)

    def finish(self, end_s: float) -> float:
        """Close the phase at ``end_s`` (charging the last interval); returns :attr:`idle_s`."""
        self.observe(end_s, 0)
        return self.idle_s


def tail_cut_pays(waiting_capacity: float) -> bool:
    """Whether ending a fetch phase at its tail lets the next round do more than this one could:
    only when a host of this shard ran dry and was given new links (issue 30).

    Ending a round at its tail (``fetch.tail_rate_ratio``, ``fetch.tail_idle_s``) pays because
    the hosts that ran dry get the links found this round one round boundary sooner. When every
    host given new links still has work (a one-host site, a mirror pair with both hosts busy, one
    large host beside small ones that ran dry with nothing new), the next round would fetch from
    the same hosts at the same politeness bound: the cut only adds a round's overhead (a new
    generation, and for ``batchcrawl round`` a new process and cluster).

    Parameters
    ----------
    waiting_capacity
        Pages/s politeness allows the hosts of the shard's workbench that have no work left and
        were given new links (after the URL cache and the scope filters) during the phase
        (:meth:`~batchcrawl.fetch.workbench.Workbench.polite_capacity`'s ``waiting``): more than 0
        when one of them ran dry. Hosts new to the shard are not counted: a link found here may
        route to another shard, whose fetch this cut does not start sooner.
    """
    return waiting_capacity > 0


#: How much faster, by politeness alone, the next round must be able to fetch than this one's
#: hosts with work for :func:`overlap_pays` (the dry hosts given new links add at least half)
OVERLAP_GAIN = 1.5


def overlap_pays(
    working: float, waiting: float, working_left_s: float, waiting_left_s: float, min_s: float
) -> bool:
    """Whether to end a fetch phase so that the next round fetches the dry hosts' new links beside
    what the working hosts have left (``fetch.tail_overlap_s``; issue 30).

    A host discovered one level later than another (a mirror linked from a site's home page) has
    its large level one round after the other's: a round runs the first host's level while the
    mirror, dry after its few pages, waits with hundreds of new links, and the next round runs the
    mirror's level alone. Ending the phase once both sides have at least ``min_s`` seconds of
    politeness-bound work left runs them side by side in the next round (one round's overhead
    for up to ``min(working_left_s, waiting_left_s)`` seconds). Unlike the capacity rule
    (:class:`~batchcrawl.fetch.tail.TailDetector`), it weighs how long each side's work lasts,
    so a few links found for a dry host never cut a long level.

    Parameters
    ----------
    working, waiting
        Pages/s politeness allows the hosts with work and the dry hosts given new links
        (:meth:`~batchcrawl.fetch.workbench.Workbench.polite_capacity`).
    working_left_s, waiting_left_s
        Seconds of politeness-bound work of each side
        (:meth:`~batchcrawl.fetch.workbench.Workbench.politeness_left_s`).
    min_s
        ``fetch.tail_overlap_s``; 0 turns the rule off.
    """
    if min_s <= 0:
        return False
    return next_faster(working, waiting) and min(working_left_s, waiting_left_s) >= min_s


def next_faster(working: float, waiting: float) -> bool:
    """Whether the dry hosts given new links (``waiting``, pages/s by politeness alone) would
    make the next round or micro-batch at least :data:`OVERLAP_GAIN` times as fast as the hosts
    with work (``working``) alone. Never when a host with work has no fixed delay (``working``
    infinite: the threads bound it, not politeness)."""
    return math.isfinite(working) and waiting > 0 and working + waiting >= OVERLAP_GAIN * working
