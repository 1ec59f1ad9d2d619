"""How long a stream left its hosts without a fetch beyond their politeness delay (issue 30 item 4:
where a deep site's stream time goes).

A host's fetches can be at most one host delay apart; every second between two of its consecutive
fetches beyond that delay is a second the host waited for work (dry, its next URLs waiting for a
micro-batch's merge and hand-out) or for a fetch thread. On a site of a few hosts the busiest
host's gaps are what a stream loses against the politeness bound (the busiest host's requests times
the delay), cluster start-up aside. The driver feeds :class:`HostGaps` each micro-batch's shard
reports (:class:`~batchcrawl.engine.report.ShardReport` ``fetched_at`` and ``fetched_hosts``);
it keeps one clock per host, so its memory grows with the hosts, not the fetches.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np

from batchcrawl.engine.report import ShardReport


class HostGaps:
    """Per host: fetches, the span from its first to its last fetch, and the seconds between
    consecutive fetches beyond its host delay (``gap_s``), over one stream.

    Parameters
    ----------
    delay_s
        The configured host delay of a host, seconds (the politeness floor: a ``Crawl-delay``
        above it shows as gap).
    """

    def __init__(self, delay_s: Callable[[str], float]) -> None:
        self.delay_s = delay_s
        self._first: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self.fetches: Counter[str] = Counter()
        self.gap_s: Counter[str] = Counter()

    def observe(self, reports: list[ShardReport]) -> None:
        """Take one micro-batch's fetches (epoch seconds per host), in time order per host.
        A fetch recorded earlier than the host's last one (a fetch in flight across a take)
        counts no gap."""
        for r in reports:
            order = np.argsort(r.fetched_at, kind="stable")
            for i in order.tolist():
                host, at = r.fetched_hosts[i], float(r.fetched_at[i])
                last = self._last.get(host)
                if last is None:
                    self._first[host] = at
                else:
                    self.gap_s[host] += max(0.0, at - last - self.delay_s(host))
                self._last[host] = max(at, last if last is not None else at)
                self.fetches[host] += 1

    def to_json(self) -> dict[str, object]:
        """``{"hosts": n, "gap_s": s, "busiest": {"host", "fetches", "span_s", "gap_s"}}``: the
        gap seconds summed over all hosts, and the host with most fetches (None without one);
        seconds rounded to ms."""
        busiest = None
        if self.fetches:
            host, n = max(self.fetches.items(), key=lambda kv: (kv[1], kv[0]))
            busiest = {"host": host, "fetches": n,
                       "span_s": round(self._last[host] - self._first[host], 3),
                       "gap_s": round(self.gap_s[host], 3)}  # fmt: skip
        return {"hosts": len(self.fetches), "gap_s": round(sum(self.gap_s.values()), 3),
                "busiest": busiest}  # fmt: skip
