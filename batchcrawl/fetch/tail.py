"""When a fetch phase has reached its slow tail (:class:`TailDetector`): the rule the batch fetch
run (:mod:`batchcrawl.fetch.monitor`) uses to end a round's fetch before its time limit."""

from __future__ import annotations

import math
from collections import deque


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
