"""What to say when a round has nothing to fetch: when the next URL becomes due.

A round with nothing due writes nothing (no fetch lists, no commit) and raises
:class:`~batchcrawl.errors.NothingDue` (exit 75, not a failure) whose message is
``nothing due; next URL due at <time> (in <duration>)``, or ``nothing due`` alone when no URL will
ever be due again (every URL is fetched, gone, filtered ...). When URLs are due but their hosts are
held (:mod:`batchcrawl.frontier.holds`: robots.txt unavailable, rate limited, unreachable), it names
the holds and when the first one ends instead.
"""

from __future__ import annotations

import datetime as dt

import pyarrow.compute as pc

from batchcrawl.errors import NothingDue
from batchcrawl.frontier import due, holds
from batchcrawl.frontier.runs import iter_buckets
from batchcrawl.store.crawldir import CrawlDir, Manifest


def next_due_ms(crawl: CrawlDir, manifest: Manifest) -> int | None:
    """Earliest due time (epoch milliseconds, UTC; :func:`batchcrawl.frontier.due.due_time`, the
    rule generate uses) of a URL of ``manifest``'s frontier, or None when no URL will ever be due.
    Reads two columns of every bucket, one bucket at a time."""
    earliest = None
    for _, bucket in iter_buckets(crawl, manifest, ["status", due.TIME]):
        value = pc.min(due.due_time(bucket).cast("int64")).as_py()
        if value is not None and (earliest is None or value < earliest):
            earliest = value
    return earliest


def format_duration(seconds: float) -> str:
    """``42 s``, ``3 min 20 s``, ``2 h 5 min``, ``3 d 4 h``: two units at most, rounded down."""
    s = max(0, int(seconds))
    for unit, size, sub, sub_size in (("d", 86400, "h", 3600), ("h", 3600, "min", 60),
                                      ("min", 60, "s", 1)):  # fmt: skip
        if s >= size:
            rest = (s % size) // sub_size
            return f"{s // size} {unit}" + (f" {rest} {sub}" if rest else "")
    return f"{s} s"


def nothing_due(crawl: CrawlDir, manifest: Manifest, now_s: float) -> NothingDue:
    """The :class:`NothingDue` for ``manifest`` at wall clock ``now_s`` (epoch seconds): a
    selection found nothing to fetch. Hosts held now (:mod:`batchcrawl.frontier.holds`) are
    named, with when the first hold ends: when URLs due by ``now_s`` were left out for them, as
    the reason (a fresh-user trial read "next URL due ... in 0 s"), else after the next due
    time (a trial's site was down and rounds said only when the next URL was due)."""
    if not manifest.rows("frontier"):
        return nothing_due_at(manifest, None, now_s)
    return nothing_due_held(crawl, manifest, next_due_ms(crawl, manifest), now_s)


def nothing_due_held(
    crawl: CrawlDir, manifest: Manifest, at_ms: int | None, now_s: float
) -> NothingDue:
    """:func:`nothing_due` with the frontier's next due time ``at_ms`` (epoch ms; None: never)
    computed by the caller."""
    all_holds = holds.host_holds(crawl, manifest)
    held = holds.in_force(all_holds, now_s)
    if not held:
        return nothing_due_at(manifest, at_ms, now_s)
    until_ms = min(all_holds[h][1] for h in held)
    ends = (
        f"the first hold ends at {_iso(until_ms)} (in {format_duration(until_ms / 1000 - now_s)}); "
        f"see batchcrawl sql {crawl.url} --query held-hosts"
    )
    if at_ms is not None and at_ms <= now_s * 1000:
        return NothingDue(f"nothing due; the due URLs wait for {held_hosts(held)}; {ends}")
    return NothingDue(f"{nothing_due_at(manifest, at_ms, now_s)}; {held_hosts(held)}; {ends}")


def held_hosts(held: dict[str, str]) -> str:
    """``held`` (``{host: reason}``) in a few words: ``2 held hosts (unreachable: a.test, b.test)``,
    at most three hosts named per reason."""
    reasons: dict[str, list[str]] = {}
    for host, reason in sorted(held.items()):
        reasons.setdefault(reason, []).append(host)
    named = "; ".join(
        f"{reason}: {', '.join(hosts[:3])}"
        + (f" and {len(hosts) - 3:,} more" if len(hosts) > 3 else "")
        for reason, hosts in sorted(reasons.items())
    )
    n = len(held)
    return f"{n:,} held host{'s' * (n != 1)} ({named})"


def _iso(at_ms: int) -> str:
    at = dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC)
    return at.isoformat(timespec="seconds").replace("+00:00", "Z")


def nothing_due_at(manifest: Manifest, at_ms: int | None, now_s: float) -> NothingDue:
    """The :class:`NothingDue` for ``manifest`` at wall clock ``now_s`` (epoch seconds) whose
    frontier's next URL is due at ``at_ms`` (epoch ms; None: never again), as
    :func:`next_due_ms` or a caller that computed it another way says."""
    if not manifest.rows("frontier"):
        return NothingDue("nothing due; the frontier is empty: inject seeds (batchcrawl inject)")
    if at_ms is None:
        return NothingDue("nothing due")
    return NothingDue(
        f"nothing due; next URL due at {_iso(at_ms)} (in {format_duration(at_ms / 1000 - now_s)})"
    )
