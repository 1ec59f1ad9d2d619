"""Admission throttling of probable spider traps (MRS §20.2.1; Heritrix's and BUbiNG's budgets).

The fetch workers flag a host in the ``hosts`` table (``trap``: ``near`` when most of its recent
pages are near-duplicates, ``path`` when its paths repeat segments, :mod:`batchcrawl.fetch.neardup`).
Generate then gives such a host at most ``dedup.trap_max_urls_per_host`` URLs per round instead of
``generate.max_urls_per_host``: its URLs are not dropped, they stay queued (counted
``trap_throttled``), so a false alarm only slows a host down.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.store.crawldir import CrawlDir, Manifest


def trap_hosts(crawl: CrawlDir, manifest: Manifest) -> dict[str, str]:
    """``{host: reason}`` of the hosts flagged as probable traps in ``manifest``'s ``hosts`` table."""
    files = manifest.files("hosts")
    if not files:
        return {}
    t = crawl.read_table("hosts", files, columns=["host", "trap"])
    t = t.filter(pc.is_valid(t.column("trap")))
    return dict(zip(t.column("host").to_pylist(), t.column("trap").to_pylist(), strict=True))


def throttle(
    selected: pa.Table,
    traps: set[str] | dict[str, str],
    cap: int,
    held: Mapping[str, int] | None = None,
) -> tuple[pa.Table, int]:
    """Keep at most ``cap`` rows per trap host of ``selected`` (fetch-list candidates with
    ``host``, ``discovered_round``, ``discovered_seq``), the first in breadth-first order; other
    hosts' rows are untouched, the order of ``selected`` is kept. ``held``: URLs per host already
    handed out and not reported (a stream's leases), which count against the cap. Returns the
    kept rows and the number held back."""
    if not traps or selected.num_rows == 0:
        return selected, 0
    hosts = selected.column("host")
    is_trap = np.asarray(pc.is_in(hosts, pa.array(sorted(traps))).to_numpy(zero_copy_only=False))
    idx = np.flatnonzero(is_trap)
    if len(idx) == 0:
        return selected, 0
    order = idx[np.lexsort((
        np.asarray(selected.column("discovered_seq").to_numpy())[idx],
        np.asarray(selected.column("discovered_round").to_numpy())[idx],
    ))]  # fmt: skip
    names = np.asarray(hosts.to_numpy(zero_copy_only=False), dtype=object)[order]
    rank = np.zeros(len(order), dtype=np.int64)
    seen: dict[str, int] = {}
    for i, h in enumerate(names):
        rank[i] = seen.get(h, 0)
        seen[h] = rank[i] + 1
    caps = np.full(len(order), cap, dtype=np.int64)
    if held:
        caps -= np.array([held.get(h, 0) for h in names], dtype=np.int64)
    keep = np.ones(selected.num_rows, dtype=bool)
    keep[order[rank >= caps]] = False
    return selected.filter(pa.array(keep)), int((~keep).sum())
