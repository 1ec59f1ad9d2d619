"""Requeue: make URLs that ended in a final status due again, after what ended them was fixed.

A URL the address policy refused (``refused``), robots.txt disallowed (``robots_denied``), that
was ``gone`` (404/410, other 4xx, ``frontier.max_retries`` transient failures) or is waiting in
``error`` is not fetched again by itself, or not soon. Once the cause is fixed -- a network added to
``network.allow_networks``, a site's robots.txt or server repaired -- ``batchcrawl requeue``
puts those URLs back to ``queued``, due now, with their reason and retry count cleared; the next
round's fetch checks again (the address policy, robots.txt: for the hosts of requeued
``robots_denied`` URLs, the cached robots.txt in the ``hosts`` table expires now, so the fetch reads
the site's current robots.txt before their URLs instead of denying them again from a copy that
stays in force for ``robots.cache_ttl_s``; a host held for an outage or a rate limit,
:mod:`batchcrawl.fetch.holds`, is released: the user says its cause was fixed, and the URLs of a
host named with ``--host`` that its hold gave back are due now too). ``--reason`` narrows it to
reasons that start with a prefix, so an outage's ``gone`` (``max_retries:connect``) can be told
from a 404. Heritrix's "recover" and Nutch's
``updatedb`` after a CrawlDb edit answer the same need; here it is one DRUM-style pass over the
frontier's buckets (one bucket in memory at a time), written as delta runs and committed as one
generation. ``filtered`` URLs are not requeued: the ``[filters]`` decide them, and a change of the
filters already re-checks the frontier (:func:`batchcrawl.frontier.generate.narrow`).

The caller (the CLI) holds the writer lock, so no round holds a URL on a fetch list meanwhile;
a URL still leased (``lease_round`` set: a round that stopped before its update, rerun next) is
left to that round.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.config import Config
from batchcrawl.errors import ConfigError
from batchcrawl.frontier import hosts as hosts_mod
from batchcrawl.frontier import runs
from batchcrawl.frontier.generate import recorded_fingerprint
from batchcrawl.frontier.table import epoch_ms
from batchcrawl.records import GIVEN_BACK, HOLD_COLUMNS, REQUEUABLE_STATUSES, UrlStatus
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest

__all__ = ["queue_again", "release_hosts", "requeue"]


def queue_again(rows: pa.Table, which: pa.Array | pa.ChunkedArray, now: float) -> pa.Table:
    """``rows`` (frontier rows) due at ``now`` (epoch seconds), and those where ``which`` (bool,
    one per row) is true back to ``queued`` with ``reason`` null and ``retries`` 0, so a URL that
    failed ``frontier.max_retries`` times gets them all again."""
    for name, value in (("status", UrlStatus.QUEUED.value), ("reason", None), ("retries", 0)):
        i = rows.schema.get_field_index(name)
        field = rows.schema.field(i)
        rows = rows.set_column(
            i, field, pc.if_else(which, pa.scalar(value, field.type), rows.column(i))
        )
    nft = pa.array(np.full(rows.num_rows, epoch_ms(now), np.int64)).cast(pa.timestamp("ms"))
    i = rows.schema.get_field_index("next_fetch_time")
    return rows.set_column(i, rows.schema.field(i), nft)


def requeue(
    crawl: CrawlDir,
    cfg: Config,
    statuses: Iterable[str],
    *,
    hosts: Iterable[str] = (),
    reasons: Iterable[str] = (),
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Put the frontier's URLs in ``statuses`` (of ``hosts``, when given; with a reason that
    starts with one of ``reasons``, when given) back to ``queued``, due now, and commit a
    generation (none when no URL matched).

    Named ``hosts`` are released: their holds end (:func:`release_hosts`), and the URLs their
    holds gave back (``queued`` with reason ``robots_unavailable``, ``host_unreachable`` or
    ``rate_limited``, due when the hold they were given back under ends, up to
    ``politeness.max_unreachable_backoff_s`` away) are due now with them: the user says the
    host's outage is over.

    Parameters
    ----------
    crawl : CrawlDir
        An existing crawl (its current generation is the parent).
    cfg : Config
        Uses ``frontier.drum_batch_bytes`` and the compaction settings (``frontier.max_runs``).
    statuses : iterable of str
        :data:`REQUEUABLE_STATUSES` values, e.g. ``["refused"]``.
    hosts : iterable of str
        Lower-case host names (punycode, no port) as the frontier's ``host`` column holds them;
        empty: every host (and no given-back URL).
    reasons : iterable of str
        Prefixes of the frontier's ``reason`` column (``"404"``, ``"max_retries:connect"``,
        ``"max_retries:"``); empty: any reason. A URL without a reason matches none.
    clock : callable
        Wall clock, epoch seconds: the URLs are due from ``clock()``.

    Returns
    -------
    dict
        The summary (committed when ``requeued`` > 0): ``step`` ``"requeue"``, ``statuses``,
        ``hosts``, ``reasons``, ``requeued`` (URLs), ``by_status`` (URLs per former status),
        ``given_back`` (of them, URLs the named hosts' holds had given back), ``leased_kept``
        (matching URLs left to the round that holds them), ``robots_expired``,
        ``holds_released``, ``generation`` and ``committed``.

    Raises
    ------
    ConfigError
        No status, or one that is not in :data:`REQUEUABLE_STATUSES`.
    CommitConflict
        Another writer committed meanwhile (take the lock first).
    """
    wanted = tuple(dict.fromkeys(statuses))
    bad = [s for s in wanted if s not in REQUEUABLE_STATUSES]
    if not wanted or bad:
        raise ConfigError(
            f"cannot requeue status {', '.join(map(repr, bad))}; give one or more of "
            f"{', '.join(REQUEUABLE_STATUSES)}"
            if bad
            else f"no status to requeue; give one or more of {', '.join(REQUEUABLE_STATUSES)}"
        )
    only_hosts = sorted({h.strip().lower() for h in hosts if h.strip()})
    prefixes = tuple(dict.fromkeys(r for r in reasons if r))
    manifest = crawl.manifest()
    gen = manifest.generation + 1
    now = clock()
    by_status: Counter[str] = Counter()
    given_back = 0
    robots_hosts: set[str] = set()  # hosts of requeued robots_denied URLs
    requeued_hosts: set[str] = set(only_hosts)  # their holds end
    leased_kept = 0
    out: list[runs.BucketFiles] = []
    columns = ["url_key", "status", "host", "lease_round", "reason"]
    for files in runs.bucket_files(manifest):
        state = runs.read_bucket(crawl, files, columns)
        n_rows = state.num_rows
        match, held = _matches(state, wanted, only_hosts, prefixes)
        leased = pc.and_(match, pc.is_valid(state.column("lease_round")))
        leased_kept += pc.sum(leased).as_py() or 0
        state = state.filter(pc.and_not(match, leased))
        if not state.num_rows:
            out.append(files)
            continue
        was_held = held.filter(pc.and_not(match, leased))
        given_back += pc.sum(was_held).as_py() or 0
        by_status.update(state.filter(pc.invert(was_held)).column("status").to_pylist())
        denied = pc.equal(state.column("status"), UrlStatus.ROBOTS_DENIED.value)
        robots_hosts.update(state.filter(denied).column("host").to_pylist())
        requeued_hosts.update(state.column("host").to_pylist())
        keys = np.asarray(state.column("url_key").to_numpy(), dtype=np.uint64)
        rows = schemas.conform("frontier", runs.lookup(crawl, files, keys))
        again = queue_again(rows, pa.array(np.ones(rows.num_rows, bool)), now)
        out.append(runs.add_run(crawl, files, gen, again, cfg, bucket_rows=n_rows, compact=True))
    listings: dict[str, list[FileEntry]] = {"frontier": runs.frontier_listing(out)}
    requeued = sum(by_status.values()) + given_back
    hosts_listing, expired, released = release_hosts(
        crawl, cfg, manifest, gen, robots_hosts, requeued_hosts if requeued else set(), now
    )
    if hosts_listing is not None:
        listings["hosts"] = hosts_listing
    summary: dict[str, Any] = {
        "step": "requeue",
        "statuses": list(wanted),
        "hosts": only_hosts,
        "reasons": list(prefixes),
        "requeued": requeued,
        "by_status": dict(sorted(by_status.items())),
        "given_back": given_back,
        "leased_kept": leased_kept,
        "robots_expired": expired,
        "holds_released": released,
    }
    fingerprint = recorded_fingerprint(manifest.summary)  # the URLs were not refiltered
    if fingerprint is not None:
        summary["filters_fingerprint"] = fingerprint
    if not summary["requeued"]:
        return {**summary, "generation": manifest.generation, "committed": False}
    committed = crawl.commit(manifest, listings, summary)
    return {**summary, "generation": committed.generation, "committed": True}


def _matches(
    state: pa.Table, statuses: tuple[str, ...], hosts: list[str], prefixes: tuple[str, ...]
) -> tuple[pa.Array, pa.Array]:
    """``(match, given_back)`` of a bucket's rows (``status``, ``host``, ``reason`` columns),
    boolean and never null: the rows to requeue, and of them those a hold of one of ``hosts``
    gave back (``queued`` with a :data:`~batchcrawl.records.GIVEN_BACK` reason; only
    when ``hosts`` are named)."""
    status, reason = state.column("status"), state.column("reason")
    match = pc.is_in(status, pa.array(statuses))
    given_back = pa.array(np.zeros(state.num_rows, bool))
    if hosts:
        given_back = pc.and_(
            pc.equal(status, UrlStatus.QUEUED.value),
            pc.is_in(reason, pa.array(sorted(GIVEN_BACK))),
        )
        of_hosts = pc.is_in(state.column("host"), pa.array(hosts))
        match = pc.and_(pc.or_(match, given_back), of_hosts)
        given_back = pc.and_(given_back, of_hosts)
    if prefixes:
        why = pc.fill_null(reason, "\x00")  # no reason matches no prefix
        starts = [pc.starts_with(why, pattern=p) for p in prefixes]
        chosen = starts[0]
        for more in starts[1:]:
            chosen = pc.or_(chosen, more)
        match, given_back = pc.and_(match, chosen), pc.and_(given_back, chosen)
    return pc.fill_null(match, False), pc.fill_null(given_back, False)


def release_hosts(
    crawl: CrawlDir, cfg: Config, manifest: Manifest, generation: int, robots: set[str],
    held: set[str], now: float,
) -> tuple[list[FileEntry] | None, int, int]:  # fmt: skip
    """Expire the cached robots.txt of the hosts ``robots`` and end the holds of the hosts
    ``held`` (host names as the ``hosts`` table has them) at ``now`` (epoch seconds), for a
    commit of ``generation`` over ``manifest``. A shard restoring an expired row fetches
    robots.txt again before its next URL (RFC 9309 §2.4 lets a crawler refresh it at any time;
    the expired copy is kept aside, as for any expiry); a released host
    (:mod:`batchcrawl.fetch.holds`: ``unreachable``, ``rate_limit``, ``robots_unavailable``, whose
    cached robots.txt expires with it) is no longer left out by generate and is fetched at its
    normal pace. Writes one ``hosts`` run per shard that holds such a row (uncommitted).

    Returns
    -------
    (listing, expired, released)
        The ``hosts`` listing to commit (None: nothing changed), how many hosts' robots.txt
        expired and how many holds ended (hosts without a row, whose copy expired already or
        that are not held need nothing).
    """
    old = list(manifest.tables.get("hosts", ()))
    wanted = robots | held
    rows = hosts_mod.read_hosts_of(crawl, old, wanted) if old and wanted else []
    at = datetime.fromtimestamp(now, UTC).replace(tzinfo=None)
    by_shard: dict[int, list[dict[str, Any]]] = {}
    expired = released = 0
    for row in rows:
        change: dict[str, Any] = {}
        release = row["host"] in held and row.get("held_reason") is not None
        if release:
            change.update(dict.fromkeys(HOLD_COLUMNS))
            released += 1
        if (row["host"] in robots or (release and row["held_reason"] == "robots_unavailable")) and (
            row.get("robots_expires") is not None and row["robots_expires"] > at
        ):
            change["robots_expires"] = at
            expired += 1
        if change:
            by_shard.setdefault(int(row["shard"]), []).append({**row, **change})
    written = [hosts_mod.write_run(crawl, generation, shard, shard_rows)
               for shard, shard_rows in sorted(by_shard.items())]  # fmt: skip
    if not by_shard:
        return None, 0, 0
    return hosts_mod.next_listing(crawl, old, written, generation, cfg), expired, released
