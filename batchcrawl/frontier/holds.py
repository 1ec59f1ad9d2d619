"""Generate's view of held hosts (:mod:`batchcrawl.fetch.holds`): no fetch-list slot for a held host.

A host is held while its robots.txt is unavailable (RFC 9309 §2.3.1.4: complete disallow),
after it answered 429/503 (a rate-limit back-off) or after fetches it did not answer at all. Its URLs stay due; generate leaves them out before the caps, so they take no slot of
a fetch list, and counts them ``held:<reason>``. Once the hold's ``held_until`` has passed while
a robots.txt or network outage is not over (``held_reason`` still set), the host is *probed*: it
gets one URL on a fetch list (counted ``held_probe`` for the others), which makes its shard fetch
robots.txt (or that URL) again; a good answer ends the hold and the next round crawls the host
normally, another failure holds it again with a doubled back-off.
"""

from __future__ import annotations

import datetime as dt
import threading

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.frontier import hosts as host_runs
from batchcrawl.frontier.table import epoch_ms
from batchcrawl.store.crawldir import CrawlDir, Manifest

__all__ = ["PROBED", "host_holds", "in_force", "leave_out_held"]

#: Hold reasons whose host gets a single probe URL once the hold is over, until a fetch ends the
#: hold (a robots.txt outage; a host that did not answer); a ``rate_limit`` host is crawled at its
#: pace again when its hold is over (its back-off is remembered by the fetch worker until a quiet
#: period passes).
PROBED = frozenset({"robots_unavailable", "unreachable"})


#: the last generation's holds read by this process: a selection asks twice (its buckets' hold
#: filter and the probe of hosts whose hold ended), and a committed generation never changes
_last: dict[tuple[str, int], dict[str, tuple[str, int]]] = {}
_last_lock = threading.Lock()


def host_holds(crawl: CrawlDir, manifest: Manifest) -> dict[str, tuple[str, int]]:
    """``{host: (held_reason, held_until in epoch ms)}`` of the held hosts in ``manifest``'s
    ``hosts`` table (hold in force or not), read once per generation and process (do not mutate
    the result). Rows written before holds existed are not held."""
    key = (crawl.url, manifest.generation)
    with _last_lock:
        if key in _last:
            return _last[key]
    holds = _read_holds(crawl, manifest)
    with _last_lock:
        _last.clear()
        _last[key] = holds
    return holds


def _read_holds(crawl: CrawlDir, manifest: Manifest) -> dict[str, tuple[str, int]]:
    entries = manifest.tables.get("hosts")
    if not entries:
        return {}
    t = host_runs.read_hosts(crawl, entries, columns=["host", "held_reason", "held_until"])
    t = t.filter(pc.and_(pc.is_valid(t.column("held_reason")), pc.is_valid(t.column("held_until"))))
    until = t.column("held_until").cast(pa.timestamp("ms")).cast(pa.int64()).to_pylist()
    return {
        h: (r, u)
        for h, r, u in zip(
            t.column("host").to_pylist(), t.column("held_reason").to_pylist(), until, strict=True
        )
    }


def in_force(holds: dict[str, tuple[str, int]], now: dt.datetime | float) -> dict[str, str]:
    """``{host: reason}`` of the ``holds`` still in force at ``now`` (UTC datetime or epoch s)."""
    now_ms = epoch_ms(now)
    return {h: r for h, (r, until) in holds.items() if until > now_ms}


def leave_out_held(
    candidates: pa.Table, held: dict[str, str] | None
) -> tuple[pa.Table, dict[str, int]]:
    """``candidates`` (rows with ``host``) without the rows of the ``held`` hosts (``{host:
    reason}``, :func:`in_force`), and the number left out per ``held:<reason>``."""
    if not held or candidates.num_rows == 0:
        return candidates, {}
    hosts = candidates.column("host")
    out = pc.is_in(hosts, pa.array(sorted(held), pa.string()))
    mask = np.asarray(pc.fill_null(out, False).to_numpy(zero_copy_only=False), dtype=bool)
    if not mask.any():
        return candidates, {}
    counts: dict[str, int] = {}
    for h in np.asarray(hosts.to_numpy(zero_copy_only=False), dtype=object)[mask]:
        key = f"held:{held[h]}"
        counts[key] = counts.get(key, 0) + 1
    return candidates.filter(pa.array(~mask)), counts
