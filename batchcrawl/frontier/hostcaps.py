"""Selection's per-host politeness decisions (issue 31, items 3 and 5): how many URLs of a host one
round may take, and which hosts are not selected at all.

* ``urls_per_round`` of the host's ``[[politeness.hosts]]`` rule replaces
  ``generate.max_urls_per_host`` (:class:`batchcrawl.politeness.PolitenessPolicy`); over it a URL
  stays due, counted ``capped_host``;
* a host whose rule says ``enabled = false`` is left out before the caps, counted ``disabled``;
* a host whose robots.txt ``Crawl-delay`` (the ``hosts`` table's ``crawl_delay_s``) is above
  ``politeness.max_crawl_delay_s`` is, with ``politeness.long_crawl_delay = "slow"``, given as many
  URLs as fit ``fetch.time_limit_s`` at that delay (at least one; the fetch worker honours the
  delay in full), or with ``"skip"`` left out, counted ``long_crawl_delay``; ``"cap"`` treats it
  as ``max_crawl_delay_s`` (stormcrawler#1979: never capped silently).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.config import Config
from batchcrawl.frontier import hosts as host_runs
from batchcrawl.politeness import policy_of
from batchcrawl.store.crawldir import CrawlDir, Manifest

__all__ = ["HostCaps", "long_crawl_delays"]


def long_crawl_delays(crawl: CrawlDir, manifest: Manifest, cfg: Config) -> dict[str, float]:
    """``{host: Crawl-delay seconds}`` of ``manifest``'s hosts whose robots.txt Crawl-delay is above
    ``politeness.max_crawl_delay_s`` (empty with ``long_crawl_delay = "cap"``)."""
    entries = manifest.tables.get("hosts")
    if not entries or cfg.politeness.long_crawl_delay == "cap":
        return {}
    t = host_runs.read_hosts(crawl, entries, columns=["host", "crawl_delay_s"])
    t = t.filter(pc.fill_null(pc.greater(t.column("crawl_delay_s"),
                                         cfg.politeness.max_crawl_delay_s), False))  # fmt: skip
    return dict(zip(t.column("host").to_pylist(), t.column("crawl_delay_s").to_pylist(),
                    strict=True))  # fmt: skip


class HostCaps:
    """Per-host URLs per round and exclusions of one selection (see the module docstring).

    Parameters
    ----------
    cfg
        ``[politeness]`` (rules, ``long_crawl_delay``), ``generate.max_urls_per_host``,
        ``fetch.time_limit_s``.
    long_delays
        :func:`long_crawl_delays`: ``{host: Crawl-delay seconds}`` above the threshold.
    """

    def __init__(self, cfg: Config, long_delays: Mapping[str, float] | None = None) -> None:
        pol = cfg.politeness
        self.policy = policy_of(pol, cfg.generate.max_urls_per_host)
        self.mode = pol.long_crawl_delay
        self.time_limit_s = cfg.fetch.time_limit_s
        self.long_delays = dict(long_delays or {})

    def limit(self, host: str) -> int:
        """Most URLs of ``host`` on this round's fetch lists."""
        n = self.policy.urls_per_round(host)
        delay = self.long_delays.get(host)
        if delay is not None and self.mode == "slow":
            n = min(n, max(1, math.floor(self.time_limit_s / delay)))
        return n

    def excluded(self, host: str) -> str | None:
        """Why ``host`` gets no URL this round (``disabled``, ``long_crawl_delay``), or None."""
        if not self.policy.enabled(host):
            return "disabled"
        if self.mode == "skip" and host in self.long_delays:
            return "long_crawl_delay"
        return None

    def limits(self, hosts: pa.ChunkedArray | pa.Array) -> np.ndarray:
        """Per row of ``hosts``, its host's :meth:`limit` (int64)."""
        if not (self.long_delays or self.policy.host_rules):  # the common case: one cap for all
            return np.full(len(hosts), self.policy.max_urls_per_host, dtype=np.int64)
        enc = pc.dictionary_encode(hosts)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        per = np.array([self.limit(h) for h in enc.dictionary.to_pylist()], dtype=np.int64)
        return per[np.asarray(enc.indices.to_numpy(), dtype=np.int64)] if len(per) else per

    def leave_out(self, table: pa.Table) -> tuple[pa.Table, Counter[str]]:
        """``table`` (rows with ``host``) without the excluded hosts' rows, and their count by
        reason."""
        counts: Counter[str] = Counter()
        if table.num_rows == 0 or not (self.long_delays or self.policy.host_rules):
            return table, counts
        hosts = pc.unique(table.column("host")).to_pylist()
        out = {h: why for h in hosts if (why := self.excluded(h)) is not None}
        if not out:
            return table, counts
        col = table.column("host")
        for why in set(out.values()):
            names = pa.array([h for h, w in out.items() if w == why], pa.string())
            counts[why] += int(pc.sum(pc.is_in(col, value_set=names)).as_py() or 0)
        keep = pc.invert(pc.is_in(col, value_set=pa.array(list(out), pa.string())))
        return table.filter(keep), counts
