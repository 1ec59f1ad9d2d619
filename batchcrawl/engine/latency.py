"""Discovery-to-fetch latency of a URL in a stream: from the moment its link was found (the fetch
time of the first page of the stream that links to it) to the start of its first fetch
(issue 30 item 4; BUbiNG measures the same lag between its distributor and its fetchers).

The driver feeds :class:`DiscoveryLatency` each micro-batch's shard reports
(:class:`~batchcrawl.engine.report.ShardReport` ``found_*`` and ``fetched_*``): found keys wait in
a dict until a shard reports their fetch, wherever it happened. The dict is bounded
(:attr:`DiscoveryLatency.max_tracked`): past it, newly found URLs are not tracked (counted
``untracked``), so a stream of millions of URLs keeps its memory.
"""

from __future__ import annotations

import numpy as np

from batchcrawl.engine.report import ShardReport


class DiscoveryLatency:
    """Seconds from discovery to fetch of the URLs found and fetched during one stream.

    Parameters
    ----------
    max_tracked
        Most found, not yet fetched URLs held (about 100 bytes each).
    """

    def __init__(self, max_tracked: int = 500_000) -> None:
        self.max_tracked = max_tracked
        self._found: dict[int, float] = {}
        self._fetched: set[int] = set()  # fetched in this stream: found again later is no discovery
        self.samples: list[float] = []
        self.untracked = 0

    def observe(self, reports: list[ShardReport]) -> None:
        """Take one micro-batch's reports: record the fetches of tracked URLs and of URLs found
        earlier in the same micro-batch (``stream.direct_links``: a latency each), then track the
        URLs found (first discovery only; not those already fetched)."""
        batch: dict[int, float] = {}  # found in this micro-batch, the earliest
        for r in reports:
            for key, at in zip(r.found_keys.tolist(), r.found_at.tolist(), strict=True):
                if key not in self._fetched and at < batch.get(key, float("inf")):
                    batch[key] = at
        for r in reports:
            for key, at in zip(r.fetched_keys.tolist(), r.fetched_at.tolist(), strict=True):
                found = self._found.pop(key, None)
                if found is None and batch.get(key, float("inf")) <= at:
                    found = batch.pop(key)
                if found is not None:
                    self.samples.append(max(0.0, at - found))
                self._fetched.add(key)
        for key, at in batch.items():
            if key in self._fetched:
                continue
            old = self._found.get(key)
            if old is not None:
                self._found[key] = min(old, at)
            elif len(self._found) < self.max_tracked:
                self._found[key] = at
            else:
                self.untracked += 1
        if len(self._fetched) > 4 * self.max_tracked:  # fetched keys only stop re-discoveries
            self._fetched.clear()

    def to_json(self) -> dict[str, float | int | None]:
        """``{"urls": n, "p50": s, "p95": s, "max": s, "untracked": n}`` (seconds, rounded to ms;
        None without a sample)."""
        if not self.samples:
            return {"urls": 0, "p50": None, "p95": None, "max": None, "untracked": self.untracked}
        a = np.asarray(self.samples)
        p50, p95 = np.percentile(a, [50, 95])
        return {"urls": len(a), "p50": round(float(p50), 3), "p95": round(float(p95), 3),
                "max": round(float(a.max()), 3), "untracked": self.untracked}  # fmt: skip
