"""Generate: build a round's fetch lists from the frontier (Nutch's ``Generator``; IRLbot's
per-domain budgets; docs/design.md §5).

Shaped for a Dask graph:

1. :func:`select_bucket` — one task per bucket: the URLs that are **due**, pre-capped inside the
   bucket (per host, per domain, per round), in breadth-first order, plus a count of every row not
   taken, by reason.
2. :func:`merge_candidates` — the global step, a fold over the buckets' candidates: applies the
   caps exactly over everything seen so far. It only ever holds at most ``max_urls_per_round``
   rows plus one bucket's candidates. The caps are monotone (adding rows can only push a row's rank
   within its host, domain and round up, never down), so pre-capping per bucket and pruning after
   each merge select exactly what one global pass would.
3. :func:`refilter` — the filter chain is re-applied (the config may have changed since the URLs
   were found) to the selected URLs only; a rejected URL becomes ``filtered`` with the reason (via
   ``refiltered``, applied by :func:`batchcrawl.frontier.update.update`) and leaves the fetch list. Its slot
   is not refilled in this round (the next round fills it); the caps are never exceeded.
4. :func:`assign_fetchlists` — route each URL to its shard by consistent hashing
   (:class:`~batchcrawl.ring.HashRing`) of its host, pay-level domain or IP
   (``generate.partition_by``); each shard's list is ordered per host in breadth-first order
   ``(discovered_round, discovered_seq)``.

Due, precisely: :func:`batchcrawl.frontier.due.due_time` (``status`` is ``queued`` or ``error``,
``next_fetch_time`` is ``<= now``, or null for rows written before every due-able row had one; or
``fetched`` / ``gone`` with ``next_fetch_time`` set by the ``[recrawl]`` schedule in update) is
``<= now``, and the URL holds no **live lease**. Each bucket is read through its due-time index
(:mod:`batchcrawl.frontier.due`): only rows due by ``now`` are read, not the bucket. A lease is live only if ``lease_round`` equals the round being
generated (a streaming top-up of a running round); a lease of any other round belongs to a round
that ended or died and has expired (counted ``lease_expired``).

Leases (design choice)
----------------------
A batch round records its leases in its fetch lists (``fetchlists/round=R/shard=SS.parquet``), not
in the frontier: :func:`generate` writes the fetch lists and commits nothing. The round commits the
fetch lists together with the updated frontier (:func:`batchcrawl.frontier.update.update`), in one
generation. A round that crashes after generate and before its commit leaves only orphan files: the
committed frontier still has every URL due, so the rerun selects them again and nothing is lost.
The single writer lock guarantees no other generate runs meanwhile. (Rows with ``lease_round`` set
come from older crawls or a future streaming mode; update clears the lease of every URL it touches.)

Counters (``summary["not_selected"]``): ``not_due`` (due later, or in a status that is never due:
the index does not read these rows), ``leased``, ``capped_host``, ``capped_domain``,
``capped_round``, ``capped_time`` (the round's fit to its time limit, :func:`fair_share`),
``filtered:<reason>`` (rejected now), ``held:<reason>`` (a held host's URLs, left out before the
caps, :mod:`batchcrawl.frontier.holds`), ``held_probe`` (a host whose hold is over gets one URL
while its outage lasts), ``disabled`` (a host a ``[[politeness.hosts]]`` rule disables) and
``long_crawl_delay`` (a host whose Crawl-delay is above ``politeness.max_crawl_delay_s``, with
``long_crawl_delay = "skip"``; :mod:`batchcrawl.frontier.hostcaps`). ``frontier_rows = selected + sum(not_selected)``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.config import Config, GenerateSection
from batchcrawl.frontier import due, holds, indegree, traps
from batchcrawl.frontier import hosts as host_runs
from batchcrawl.frontier.budget import DomainBudgets, beast_delay_s
from batchcrawl.frontier.hostcaps import HostCaps, long_crawl_delays
from batchcrawl.frontier.runs import BucketFiles, Mapper, bucket_files, bucket_rows, thread_mapper
from batchcrawl.frontier.table import epoch_ms
from batchcrawl.politeness import policy_of
from batchcrawl.ring import HashRing, ring_keys, route_name
from batchcrawl.scope.filters import FilterChain
from batchcrawl.store import paths, schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest
from batchcrawl.urls import bucket_ids

__all__ = [
    "GenerateResult",
    "assign_fetchlists",
    "filters_fingerprint",
    "generate",
    "merge_candidates",
    "refilter",
    "select_bucket",
]

SELECT_COLUMNS = due.SELECT_COLUMNS
_CAP_REASONS = ("capped_host", "capped_domain", "capped_round")
#: BEAST's delays (``generate.budget = "star"``): URLs over their domain's budget and how long
#: they wait, seconds; :func:`batchcrawl.frontier.update.update` (``delayed=``) moves their
#: ``next_fetch_time`` to ``now + delay_s``.
DELAYED_SCHEMA = pa.schema([("url_key", pa.uint64()), ("delay_s", pa.float64())])
#: One bucket's selection (:func:`select_files`): ``(bucket rows, candidates, counts by reason,
#: delayed)``.
Selection: TypeAlias = tuple[int, pa.Table, Counter[str], pa.Table]


def _codes(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    enc = pc.dictionary_encode(col)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    return np.asarray(enc.indices.to_numpy(), dtype=np.int64)


def _ranks(codes: np.ndarray) -> np.ndarray:
    """Rank of each row among the earlier rows with the same code (rows already in order)."""
    if len(codes) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(codes, kind="stable")
    sc = codes[order]
    starts = np.flatnonzero(np.r_[True, sc[1:] != sc[:-1]])
    run = np.repeat(starts, np.diff(np.r_[starts, len(sc)]))
    ranks = np.empty(len(codes), dtype=np.int64)
    ranks[order] = np.arange(len(sc)) - run
    return ranks


def _np(col: pa.ChunkedArray | pa.Array, idx: np.ndarray | None = None) -> np.ndarray:
    a = np.asarray(col.to_numpy())
    return a if idx is None else a[idx]


def _cap(
    t: pa.Table,
    idx: np.ndarray,
    cfg: Config,
    budgets: DomainBudgets,
    host_caps: HostCaps | None = None,
) -> tuple[np.ndarray, pa.Table]:
    """For rows ``idx`` of ``t`` in breadth-first order: 0 taken, else 1 + index in
    :data:`_CAP_REASONS` (the first cap the row exceeds: host, then domain -- its
    :class:`~batchcrawl.frontier.budget.DomainBudgets` cap -- then round); and the rows BEAST
    delays (:func:`_delays`). A host's cap is its :meth:`HostCaps.limit
    <batchcrawl.frontier.hostcaps.HostCaps.limit>` (``generate.max_urls_per_host`` unless a
    ``[[politeness.hosts]]`` rule or a long Crawl-delay says less or more)."""
    g = cfg.generate
    why = np.zeros(len(idx), dtype=np.int8)
    hosts = t.column("host").take(pa.array(idx)) if len(idx) else t.column("host").slice(0, 0)
    limit = (host_caps or HostCaps(cfg)).limits(hosts)
    host_ok = _ranks(_codes(t.column("host"))[idx]) < limit
    why[~host_ok] = 1
    ok = np.flatnonzero(host_ok)
    rank = _ranks(_codes(t.column("domain"))[idx[ok]])
    cap = budgets.caps(t.column("domain").take(pa.array(idx[ok])))
    dom_ok = rank < cap
    why[ok[~dom_ok]] = 2
    over = ~dom_ok if budgets.star else np.zeros(len(ok), dtype=bool)
    delayed = _delays(t.column("url_key").take(pa.array(idx[ok[over]])), rank[over] - cap[over],
                      cap[over], g)  # fmt: skip
    ok = ok[dom_ok]
    why[ok[g.max_urls_per_round :]] = 3
    return why, delayed


def _delays(keys: pa.Array, excess: np.ndarray, cap: np.ndarray, g: GenerateSection) -> pa.Table:
    """BEAST's ``(url_key, delay_s)`` rows (:data:`DELAYED_SCHEMA`) of URLs over their domain's
    budget (:func:`batchcrawl.frontier.budget.beast_delay_s`)."""
    keys = keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
    return pa.table([keys, pa.array(beast_delay_s(excess, cap, g), pa.float64())],
                    schema=DELAYED_SCHEMA)  # fmt: skip


def _bfs_argsort(t: pa.Table, idx: np.ndarray) -> np.ndarray:
    """Order of rows ``idx`` of ``t`` by ``(discovered_round, discovered_seq, url_key)``."""
    return np.lexsort(
        (
            _np(t.column("url_key"), idx).astype(np.uint64),
            _np(t.column("discovered_seq"), idx),
            _np(t.column("discovered_round"), idx),
        )
    )


def select_bucket(
    bucket: pa.Table,
    round: int,
    cfg: Config,
    now: dt.datetime | float,
    budgets: DomainBudgets | None = None,
    host_caps: HostCaps | None = None,
) -> tuple[pa.Table, Counter[str], pa.Table]:
    """The due URLs of one bucket, pre-capped within the bucket (one Dask task per bucket).

    Parameters
    ----------
    bucket : pyarrow.Table
        Frontier rows (at least :data:`SELECT_COLUMNS`), any order.
    round : int
        The round being generated (a lease of this round is live).
    cfg : Config
        Uses ``generate.max_urls_per_host``, ``max_urls_per_domain``, ``max_urls_per_round``.
    now : datetime or float
        Wall clock (UTC); a URL whose ``next_fetch_time`` is later is not due.
    budgets : DomainBudgets or None
        Each domain's cap (default: ``DomainBudgets.of(cfg)``, i.e. without in-degrees).

    Returns
    -------
    (candidates, counts, delayed)
        Candidates (``schemas.fetch_item_columns()``) in breadth-first order, a counter of every row
        not taken, by reason (module docstring), plus ``lease_expired`` (informational);
        ``bucket.num_rows == len(candidates) + sum(counts without lease_expired)``. ``delayed``:
        BEAST's delays (:data:`DELAYED_SCHEMA`) of the rows over their domain's STAR budget
        (each is also counted ``capped_domain``; none with ``generate.budget = "fixed"``).
    """
    counts: Counter[str] = Counter()
    budgets = budgets or DomainBudgets.of(cfg)
    n = bucket.num_rows
    if n == 0:
        return (
            schemas.empty("fetchlists").select(schemas.fetch_item_columns()),
            counts,
            DELAYED_SCHEMA.empty_table(),
        )
    when = due.due_time(bucket)
    due_status = np.asarray(pc.is_valid(when).to_numpy(zero_copy_only=False))
    waiting = np.asarray(
        pc.fill_null(pc.greater(when.cast(pa.int64()), epoch_ms(now)), False).to_numpy(
            zero_copy_only=False
        )
    )
    lr = bucket.column("lease_round")
    live = np.asarray(pc.fill_null(pc.equal(lr, round), False).to_numpy(zero_copy_only=False))
    has_lease = np.asarray(pc.is_valid(lr).to_numpy(zero_copy_only=False))
    counts["lease_expired"] += int((has_lease & ~live).sum())
    if not due_status.all():
        vc = pc.value_counts(bucket.column("status").filter(pa.array(~due_status)))
        for s, k in zip(
            vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True
        ):
            counts[f"status:{s}"] += k
    counts["not_due"] += int((due_status & waiting).sum())
    counts["leased"] += int((due_status & ~waiting & live).sum())
    idx = np.flatnonzero(due_status & ~waiting & ~live)
    idx = idx[_bfs_argsort(bucket, idx)]
    why, delayed = _cap(bucket, idx, cfg, budgets, host_caps)
    for i, name in enumerate(_CAP_REASONS, 1):
        counts[name] += int((why == i).sum())
    return (
        bucket.select(schemas.fetch_item_columns()).take(pa.array(idx[why == 0])),
        counts,
        delayed,
    )


def drop_leased(table: pa.Table, leased: pa.Array | np.ndarray | None) -> tuple[pa.Table, int]:
    """The rows of ``table`` whose ``url_key`` is not in ``leased`` (uint64 keys handed out and
    not yet reported: a stream's in-memory lease set, or the fetch list of a pipelined round still
    in flight), and how many were left out."""
    if leased is None or len(leased) == 0 or table.num_rows == 0:
        return table, 0
    keys = leased if isinstance(leased, pa.Array) else pa.array(leased, pa.uint64())
    kept = table.filter(pc.invert(pc.is_in(table.column("url_key"), keys)))
    return kept, table.num_rows - kept.num_rows


def leases_by_bucket(leased: np.ndarray, buckets: int) -> dict[int, np.ndarray]:
    """``leased`` url keys (uint64) split by DRUM bucket (:func:`batchcrawl.urls.bucket_ids`), so
    each bucket's selection task gets only its own."""
    leased = np.asarray(leased, dtype=np.uint64)
    ids = bucket_ids(leased, buckets)
    return {int(b): leased[ids == b] for b in np.unique(ids)}


def select_files(
    crawl: CrawlDir,
    files: BucketFiles,
    round: int,
    cfg: Config,
    now: dt.datetime | float,
    budgets: DomainBudgets | None = None,
    leased: np.ndarray | None = None,
    held: dict[str, str] | None = None,
    host_caps: HostCaps | None = None,
) -> Selection:
    """Generate, one bucket (one Dask task): read its rows due at ``now`` through the due-time
    index (:func:`batchcrawl.frontier.due.due_rows`: about as many rows as are due, newest run
    wins), leave out the ``leased`` url keys (counted ``leased``, before the caps: a pipelined
    round's selection, :mod:`batchcrawl.pipeline`) and the rows of ``held`` hosts (``{host:
    reason}``, :func:`batchcrawl.frontier.holds.in_force`; counted ``held:<reason>``, before the
    caps: they take no slot) and :func:`select_bucket` them. The rows not read count as
    ``not_due`` (not due yet, or in a status that is never due). Returns ``(bucket rows,
    candidates, counts, delayed)``."""
    table, n_leased = drop_leased(due.due_rows(crawl, files.files, epoch_ms(now)), leased)
    table, n_held = holds.leave_out_held(table, held)
    host_caps = host_caps or HostCaps(cfg)
    table, n_out = host_caps.leave_out(table)  # disabled hosts, skipped long Crawl-delays
    n_held.update(n_out)
    candidates, counts, delayed = select_bucket(table, round, cfg, now, budgets, host_caps)
    counts["leased"] += n_leased
    counts.update(n_held)
    rows = bucket_rows(crawl, files)
    counts["not_due"] += rows - table.num_rows - n_leased - sum(n_held.values())
    return rows, candidates, counts, delayed


def merge_candidates(
    acc: pa.Table | None,
    candidates: pa.Table,
    cfg: Config,
    budgets: DomainBudgets | None = None,
    host_caps: HostCaps | None = None,
) -> tuple[pa.Table, Counter[str], pa.Table]:
    """Global step (a fold): the candidates of ``acc`` and ``candidates`` that pass the caps taken
    over both, in breadth-first order, the count of those dropped by cap, and BEAST's delays of
    those over their domain's budget (as :func:`select_bucket`)."""
    both = candidates if acc is None else pa.concat_tables([acc, candidates])
    idx = np.arange(both.num_rows)
    idx = idx[_bfs_argsort(both, idx)]
    why, delayed = _cap(both, idx, cfg, budgets or DomainBudgets.of(cfg), host_caps)
    counts: Counter[str] = Counter()
    for i, name in enumerate(_CAP_REASONS, 1):
        counts[name] += int((why == i).sum())
    return both.take(pa.array(idx[why == 0])), counts, delayed


def split_per_host(selected: pa.Table) -> tuple[pa.Table, pa.Table]:
    """``selected`` (breadth-first order) as the first half of each host's rows (rounded up) and
    the rest, both in the same order: two rounds' worth from one selection (Nutch's
    ``-maxNumSegments``; :mod:`batchcrawl.pipeline`)."""
    codes = _codes(selected.column("host"))
    first = _ranks(codes) * 2 < np.bincount(codes, minlength=1)[codes]
    return selected.filter(pa.array(first)), selected.filter(pa.array(~first))


def fair_share(selected: pa.Table, n: int, min_per_host: int = 0) -> pa.Table:
    """At most ``n`` rows of ``selected`` (breadth-first order), shared fairly among its hosts
    (max-min fairness, "water-filling"): each host keeps its first ``c`` rows, ``c`` the largest
    level with ``sum over hosts of min(rows of the host, c) <= n``; the rows left to ``n`` go one
    each to hosts with more, in breadth-first order of their next row. Each host keeps at least
    its first ``min_per_host`` rows (its politeness bound; the total may then pass ``n``). The
    result keeps ``selected``'s order; a host's rows dropped are its last ones (Nutch's
    ``generate -topN``, here sized to a round: :attr:`GenerateSection.time_fit`)."""
    if selected.num_rows <= n:
        return selected
    codes = _codes(selected.column("host"))
    ranks = _ranks(codes)
    counts = np.sort(np.bincount(codes))
    # S(c) = sum(min(counts, c)) = prefix of the counts below c + c x the hosts at or above it
    below = np.concatenate([[0], np.cumsum(counts)])

    def s(c: int) -> int:
        i = int(np.searchsorted(counts, c))
        return int(below[i]) + c * (len(counts) - i)

    lo, hi = 0, int(counts[-1])  # s(lo) <= n < s(hi): the table has more than n rows
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if s(mid) <= n else (lo, mid)
    keep = ranks < lo
    keep[np.flatnonzero(ranks == lo)[: n - s(lo)]] = True
    if min_per_host:
        keep |= ranks < min_per_host
    return selected.filter(pa.array(keep))


def refilter(selected: pa.Table, chain: FilterChain) -> tuple[pa.Table, pa.Table]:
    """Re-apply the filter chain to selected URLs.

    Returns
    -------
    (kept, refiltered)
        The selected rows still in scope, and ``(url_key, reason)`` of the rejected ones.
    """
    cols = [selected.column(c).to_pylist() for c in ("url", "host", "domain", "depth", "hops_out")]
    check = chain.check
    reasons = [check(u, h, d, dp, ho) for u, h, d, dp, ho in zip(*cols, strict=True)]
    rejected = np.array([r is not None for r in reasons], dtype=bool)
    refiltered = pa.table(
        {
            "url_key": selected.column("url_key").filter(pa.array(rejected)),
            "reason": pa.array([r for r in reasons if r is not None], pa.string()),
        }
    )
    return selected.filter(pa.array(~rejected)), refiltered


def route_names(
    selected: pa.Table, cfg: Config, ip_of: Mapping[str, str] | None = None
) -> list[str]:
    """What the ring hashes for each row: its host, its pay-level domain, or its host's IP
    (``generate.partition_by = "ip"``; a host without a known IP in the ``hosts`` table is routed
    by its host name, so its URLs stay together until its IP is known)."""
    rows, names = route_codes(selected, cfg, ip_of)
    return [names[i] for i in rows.tolist()]


def route_codes(
    selected: pa.Table, cfg: Config, ip_of: Mapping[str, str] | None = None
) -> tuple[np.ndarray, list[str]]:
    """:func:`route_names` as ``(rows, names)``: each row's index (int64, shape ``(n,)``) into
    ``names``, the route name of each distinct ``(host, domain)`` of ``selected``. Only the
    distinct pairs become Python strings (a round's selection may hold a million URLs)."""
    mode = cfg.generate.partition_by
    ip_of = ip_of or {}
    if selected.num_rows == 0:
        return np.zeros(0, dtype=np.int64), []
    h = pc.dictionary_encode(selected.column("host").combine_chunks(), null_encoding="encode")
    d = pc.dictionary_encode(selected.column("domain").combine_chunks(), null_encoding="encode")
    nd = len(d.dictionary)
    pair = h.indices.to_numpy().astype(np.int64) * nd + d.indices.to_numpy().astype(np.int64)
    uniq, rows = np.unique(pair, return_inverse=True)
    hosts = h.dictionary.take(pa.array(uniq // nd)).to_pylist()
    domains = d.dictionary.take(pa.array(uniq % nd)).to_pylist()
    policy = policy_of(cfg.politeness)
    names = [route_name(hn, dn, ip_of.get(hn), mode, policy.route(hn, dn, ip_of.get(hn)))
             for hn, dn in zip(hosts, domains, strict=True)]  # fmt: skip
    return rows.reshape(-1).astype(np.int64), names


def assign_fetchlists(
    selected: pa.Table, round: int, cfg: Config, ip_of: Mapping[str, str] | None = None
) -> dict[int, pa.Table]:
    """Split selected URLs into one fetch list per shard (``fetchlists`` schema), each ordered by
    host, then breadth-first ``(discovered_round, discovered_seq)``.

    Every shard of the ring (``fetch.shards``) gets a table, possibly empty.
    """
    ring = HashRing(cfg.fetch.shards, cfg.fetch.ring_vnodes)
    selected = selected.select(schemas.fetch_item_columns())
    rows, names = route_codes(selected, cfg, ip_of)
    shard = np.asarray(ring.assign_keys(ring_keys(names)), dtype=np.int64)[rows] if names else rows
    out = {}
    for s in ring.shards:
        part = selected.filter(pa.array(shard == s)).sort_by(
            [
                ("host", "ascending"),
                ("discovered_round", "ascending"),
                ("discovered_seq", "ascending"),
                ("url_key", "ascending"),
            ]
        )
        n = part.num_rows
        part = part.append_column("round", pa.array(np.full(n, round), pa.int32()))
        part = part.append_column("shard", pa.array(np.full(n, s), pa.int32()))
        out[s] = schemas.conform("fetchlists", part)
    return out


def filters_fingerprint(cfg: Config) -> str:
    """SHA-1 of the ``[filters]`` section (canonical JSON): equal fingerprints, equal chains."""
    data = json.dumps(dataclasses.asdict(cfg.filters), sort_keys=True).encode("utf-8")
    return hashlib.sha1(data).hexdigest()


def recorded_fingerprint(summary: Mapping[str, Any]) -> str | None:
    """The ``filters_fingerprint`` a commit's ``summary`` recorded (top level, as a round or a
    stream micro-batch records it, or under ``"generate"``/``"inject"``), or None: the
    ``[filters]`` the committed URLs were last checked against (:func:`filters_fingerprint`)."""
    for where in (summary, summary.get("generate"), summary.get("inject")):
        if isinstance(where, Mapping) and where.get("filters_fingerprint"):
            return str(where["filters_fingerprint"])
    return None


def select_task(
    crawl_url: str,
    files: BucketFiles,
    *,
    round: int,
    cfg: Config,
    now: dt.datetime | float,
    budgets: DomainBudgets | None = None,
    leased: np.ndarray | None = None,
    held: dict[str, str] | None = None,
    host_caps: HostCaps | None = None,
) -> Selection:
    """:func:`select_files` as a task for any worker (opens the crawl at ``crawl_url``): what
    :func:`select` maps over the buckets, and a stream over the buckets it re-selects.
    ``budgets``: :func:`domain_budgets` of the generation (default: read here, in STAR mode);
    ``leased``: url keys of this bucket to leave out; ``held``: hosts held at ``now`` (default:
    read here from the current generation's ``hosts`` table)."""
    crawl = CrawlDir.open(crawl_url)
    if budgets is None and cfg.generate.budget == "star":
        budgets = domain_budgets(crawl, crawl.manifest(), cfg)
    if held is None:
        held = holds.in_force(holds.host_holds(crawl, crawl.manifest()), now)
    return select_files(crawl, files, round, cfg, now, budgets, leased, held, host_caps)


def _select_leased_task(
    select: Callable[..., Selection], item: tuple[BucketFiles, np.ndarray | None]
) -> Selection:
    """``select`` (:func:`select_task` with its other arguments bound) over ``(bucket files,
    that bucket's leased keys)``."""
    files, leased = item
    return select(files, leased=leased)


def domain_budgets(crawl: CrawlDir, manifest: Manifest, cfg: Config) -> DomainBudgets:
    """The per-domain caps of a round generated from ``manifest``: STAR budgets from its
    ``indegree`` table (:mod:`batchcrawl.frontier.indegree`) when ``generate.budget = "star"``,
    else the fixed ``max_urls_per_domain``."""
    if cfg.generate.budget != "star":
        return DomainBudgets.of(cfg)
    return DomainBudgets.of(cfg, indegree.linking_domains(crawl, manifest))


@dataclass
class GenerateResult:
    """What :func:`generate` produced. Unpacks as ``fetchlists, summary = generate(...)``.

    Attributes
    ----------
    fetchlists : dict of int to FileEntry
        The fetch list file of each shard (uncommitted; commit with the round).
    summary : dict
        ``selected``, ``per_shard``, ``not_selected`` by reason, ``frontier_rows``,
        ``lease_expired``.
    refiltered : pyarrow.Table
        ``(url_key, reason)`` of URLs the filters rejected now: pass to
        :func:`batchcrawl.frontier.update.update` (``refiltered=``) so they become ``filtered``.
    delayed : pyarrow.Table
        BEAST's ``(url_key, delay_s)`` (:data:`DELAYED_SCHEMA`) of URLs over their domain's STAR
        budget: pass to :func:`batchcrawl.frontier.update.update` (``delayed=``).
    """

    fetchlists: dict[int, FileEntry]
    summary: dict[str, Any]
    refiltered: pa.Table = field(repr=False)
    delayed: pa.Table = field(repr=False, default_factory=DELAYED_SCHEMA.empty_table)

    def __iter__(self) -> Iterator[dict[int, FileEntry] | dict[str, Any]]:
        yield self.fetchlists
        yield self.summary


def generate(
    crawl: CrawlDir,
    manifest: Manifest,
    round: int,
    cfg: Config,
    now: dt.datetime | float,
    *,
    chain: FilterChain | None = None,
    mapper: Mapper | None = None,
    refilter_urls: bool | None = None,
) -> GenerateResult:
    """Generate a round's fetch lists: select every bucket (:func:`select_files`, one task each
    through ``mapper``: Dask tasks in a round, threads in tests and benchmarks), fold the
    candidates, refilter, assign to shards, write the fetch lists.

    Parameters
    ----------
    crawl, manifest
        The crawl and the committed generation to generate from.
    round : int
        The round being generated (usually ``manifest.round + 1``).
    cfg : Config
        ``[generate]``, ``[fetch]`` (shards, ring_vnodes) and ``[filters]``.
    now : datetime or float
        Wall clock (UTC), for ``next_fetch_time``.
    chain : FilterChain or None
        The filter chain (default: built from ``cfg.filters``; ``check`` needs no seeds).
    mapper : Mapper or None
        Runs the per-bucket selections (default: this thread, in order).
    refilter_urls : bool or None
        Re-apply the filter chain to the selected URLs. None (default): only when the
        ``[filters]`` config differs from the one recorded in ``manifest.summary`` as
        ``filters_fingerprint`` (top level, or under ``"generate"``/``"inject"``), i.e. when the
        config may have changed since the URLs were checked. The summary of this call records the
        current ``filters_fingerprint``; a round that commits it lets the next generate skip the
        (per-URL, Python-speed) re-check.

    Returns
    -------
    GenerateResult
        Nothing is committed.
    """
    selected, counts, rows, delayed = select(crawl, manifest, round, cfg, now, mapper=mapper)
    return finish(
        crawl, manifest, round, cfg, selected, counts, rows,
        chain=chain, refilter_urls=refilter_urls, delayed=delayed,
    )  # fmt: skip


def select(
    crawl: CrawlDir,
    manifest: Manifest,
    round: int,
    cfg: Config,
    now: dt.datetime | float,
    *,
    mapper: Mapper | None = None,
    leased: np.ndarray | None = None,
    fit: tuple[int, int] | None = None,
    buckets: Iterable[int] | None = None,
    budgets: DomainBudgets | None = None,
) -> tuple[pa.Table, Counter[str], int, pa.Table]:
    """The selection step of :func:`generate` alone: every bucket's due candidates (one task each
    through ``mapper``), folded under the caps (:func:`domain_budgets` read once here). Returns
    ``(selected, counts, frontier rows, delayed)``; nothing is written, so a round with nothing
    selected can stop here and leave no trace.

    ``leased``: url keys (uint64) left out before the caps, counted ``leased`` -- the URLs of a
    round still in flight when the next one is selected from the generation it was selected from
    (pipelined rounds, :mod:`batchcrawl.pipeline`). ``fit``: ``(n, min_per_host)`` of
    :func:`fair_share`, the round's fit to its time limit (the URLs left out stay due, counted
    ``capped_time``). ``buckets``: select only these bucket ids (a stream's changed buckets);
    ``budgets``: :func:`domain_budgets` of ``manifest`` if already read. Hosts held by a
    robots.txt outage or a rate-limit back-off (:mod:`batchcrawl.frontier.holds`) are left out
    before the caps, counted ``held:<reason>``."""
    budgets = budgets or domain_budgets(crawl, manifest, cfg)
    held = holds.in_force(holds.host_holds(crawl, manifest), now)  # read once
    host_caps = HostCaps(cfg, long_crawl_delays(crawl, manifest, cfg))
    select_one = functools.partial(select_task, crawl.url, round=round, cfg=cfg, now=now,
                                   budgets=budgets, held=held, host_caps=host_caps)  # fmt: skip
    files = bucket_files(manifest)
    if buckets is not None:
        files = [files[b] for b in sorted(set(buckets))]
    run = mapper or thread_mapper(1)
    if leased is None:
        selections = run(select_one, files)
    else:
        by_bucket = leases_by_bucket(leased, manifest.buckets)
        items = [(bf, by_bucket.get(bf.bucket)) for bf in files]
        selections = run(functools.partial(_select_leased_task, select_one), items)
    selected, counts, rows, delayed = fold_candidates(selections, cfg, budgets, host_caps)
    if fit is not None:
        n = selected.num_rows
        selected = fair_share(selected, *fit)
        counts["capped_time"] += n - selected.num_rows
    return selected, counts, rows, delayed


def fold_candidates(
    selections: Iterable[Selection],
    cfg: Config,
    budgets: DomainBudgets | None = None,
    host_caps: HostCaps | None = None,
) -> tuple[pa.Table, Counter[str], int, pa.Table]:
    """Fold the per-bucket results of :func:`select_files` (``(bucket rows, candidates, counts,
    delayed)``, in any order) into the round's selection with :func:`merge_candidates`.

    Pruning is lazy (the caps are monotone, so pruning late is as exact as pruning each time): the
    fold holds at most about ``1.5 * max_urls_per_round`` candidate rows plus one bucket's.
    BEAST's delay of a URL over its domain's budget follows its position among the URLs over
    budget in the step that dropped it (its bucket's pre-cap, or a merge): a lower bound of its
    position in the whole round, so waits are never longer than a single global pass would give.

    Returns ``(selected, counts, frontier rows scanned, delayed)``.
    """
    budgets = budgets or DomainBudgets.of(cfg)
    counts: Counter[str] = Counter()
    acc = None
    pending: list[pa.Table] = []
    delayed: list[pa.Table] = [DELAYED_SCHEMA.empty_table()]
    pending_rows = 0
    limit = max(cfg.generate.max_urls_per_round * 3 // 2, 100_000)
    rows = 0
    for n, cands, c, late in selections:
        rows += n
        counts.update(c)
        delayed.append(late)
        pending.append(cands)
        pending_rows += cands.num_rows
        if pending_rows + (0 if acc is None else acc.num_rows) > limit:
            acc, c, late = merge_candidates(acc, pa.concat_tables(pending), cfg, budgets,
                                            host_caps)  # fmt: skip
            counts.update(c)
            delayed.append(late)
            pending, pending_rows = [], 0
    if pending or acc is None:
        empty = schemas.empty("fetchlists").select(schemas.fetch_item_columns())
        acc, c, late = merge_candidates(
            acc, pa.concat_tables(pending) if pending else empty, cfg, budgets, host_caps
        )
        counts.update(c)
        delayed.append(late)
    return acc, counts, rows, pa.concat_tables(delayed)


def host_ips(crawl: CrawlDir, manifest: Manifest, cfg: Config) -> dict[str, str] | None:
    """Each host's IP from ``manifest``'s ``hosts`` table when ``generate.partition_by = "ip"``
    (the routing :func:`assign_fetchlists` needs), else None."""
    if cfg.generate.partition_by != "ip" or not manifest.tables.get("hosts"):
        return None
    hosts = host_runs.read_hosts(crawl, manifest.tables["hosts"], columns=["host", "ip"])
    return dict(zip(hosts.column("host").to_pylist(), hosts.column("ip").to_pylist(), strict=True))


def narrow(
    crawl: CrawlDir,
    manifest: Manifest,
    cfg: Config,
    selected: pa.Table,
    counts: Counter[str],
    *,
    chain: FilterChain | None = None,
    refilter_urls: bool | None = None,
    held: Mapping[str, int] | None = None,
) -> tuple[pa.Table, pa.Table, bool]:
    """The global checks after the caps: re-filter the selection (see :func:`generate` for
    ``refilter_urls``) and throttle the probable traps of ``manifest``'s ``hosts`` table
    (:func:`batchcrawl.frontier.traps.throttle`; ``held``: URLs per host already in flight).
    Counts ``filtered:<reason>`` and ``trap_throttled`` into ``counts``. Returns ``(selected,
    refiltered, refilter_urls)``: the kept rows, ``(url_key, reason)`` of the rejected ones and
    whether the filters were applied."""
    if refilter_urls is None:
        refilter_urls = recorded_fingerprint(manifest.summary) != filters_fingerprint(cfg)
    if refilter_urls:
        selected, refiltered = refilter(selected, chain or FilterChain.from_config(cfg.filters))
    else:
        refiltered = pa.table(
            {"url_key": pa.array([], pa.uint64()), "reason": pa.array([], pa.string())}
        )
    for r in refiltered.column("reason").to_pylist():
        counts[f"filtered:{r}"] += 1
    selected, throttled = traps.throttle(
        selected, traps.trap_hosts(crawl, manifest), cfg.dedup.trap_max_urls_per_host, held
    )
    counts["trap_throttled"] += throttled
    # a host whose robots.txt or network hold is over but whose outage is not (held_reason still
    # set; the held ones were left out by select) gets one URL: its shard fetches robots.txt (or
    # that URL) again first
    probing = {
        h for h, (why, _) in holds.host_holds(crawl, manifest).items() if why in holds.PROBED
    }
    selected, probed = traps.throttle(selected, probing, 1)
    counts["held_probe"] += probed
    return selected, refiltered, bool(refilter_urls)


def finish(
    crawl: CrawlDir,
    manifest: Manifest,
    round: int,
    cfg: Config,
    selected: pa.Table,
    counts: Counter[str],
    rows: int,
    *,
    chain: FilterChain | None = None,
    refilter_urls: bool | None = None,
    delayed: pa.Table | None = None,
) -> GenerateResult:
    """The global tail of generate: :func:`narrow` the selection, route it to shards and write
    one fetch list per shard (:func:`write_fetchlists`, uncommitted). ``delayed``: BEAST's
    delays from :func:`select`, passed on in the result."""
    counts = Counter(counts)
    selected, refiltered, refilter_urls = narrow(
        crawl, manifest, cfg, selected, counts, chain=chain, refilter_urls=refilter_urls
    )
    return write_fetchlists(crawl, manifest, round, cfg, selected, counts, rows,
                            refiltered=refiltered, refilter_urls=refilter_urls,
                            delayed=delayed)  # fmt: skip


def write_fetchlists(
    crawl: CrawlDir,
    manifest: Manifest,
    round: int,
    cfg: Config,
    selected: pa.Table,
    counts: Counter[str],
    rows: int,
    *,
    refiltered: pa.Table,
    refilter_urls: bool,
    delayed: pa.Table | None = None,
) -> GenerateResult:
    """Route a narrowed selection (:func:`narrow`) to shards and write one fetch list per shard
    (uncommitted); the summary counts ``counts`` as ``not_selected``."""
    counts = Counter(counts)
    lists = assign_fetchlists(selected, round, cfg, host_ips(crawl, manifest, cfg))
    entries = {
        s: crawl.write_table("fetchlists", paths.round_file("fetchlists", round, s), t)
        for s, t in lists.items()
    }
    summary = selection_summary(round, cfg, selected.num_rows, counts, rows, refilter_urls,
                                delayed)  # fmt: skip
    summary["per_shard"] = {str(s): t.num_rows for s, t in lists.items()}
    if delayed is None:
        delayed = DELAYED_SCHEMA.empty_table()
    return GenerateResult(entries, summary, refiltered, delayed)


def selection_summary(
    round: int,
    cfg: Config,
    selected: int,
    counts: Counter[str],
    rows: int,
    refilter_urls: bool,
    delayed: pa.Table | None,
) -> dict[str, Any]:
    """The ``generate`` summary of a selection: ``selected`` URLs, ``frontier_rows`` scanned,
    ``not_selected`` by reason, ``lease_expired``, whether it was ``refiltered``, the
    ``filters_fingerprint``, the ``budget`` mode and ``beast_delayed`` URLs."""
    counts = Counter(counts)
    lease_expired = counts.pop("lease_expired", 0)
    return {
        "step": "generate",
        "round": round,
        "frontier_rows": rows,
        "selected": selected,
        "per_shard": {},
        "not_selected": dict(sorted((k, v) for k, v in counts.items() if v)),
        "lease_expired": lease_expired,
        "refiltered": bool(refilter_urls),
        "filters_fingerprint": filters_fingerprint(cfg),
        "budget": cfg.generate.budget,
        "beast_delayed": 0 if delayed is None else delayed.num_rows,
    }
