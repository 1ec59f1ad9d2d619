"""Update: merge a round's fetch results and discovered links into the frontier (Nutch's
``updatedb``; IRLbot's DRUM check+update, §5.1; docs/design.md §4).

Each bucket is merged with its share of the round's facts in one sequential pass
(:mod:`batchcrawl.frontier.drum`), independently of the other buckets, so the round graph runs one task per
bucket: :func:`partition_by_bucket` the ``fetched`` and ``links`` rows, then :func:`update_bucket`
each bucket, which writes only the changed and new rows as a delta run, or a new base when that
run would pass the compaction rule (:mod:`batchcrawl.frontier.runs`). :func:`update` maps it over
the buckets: on Dask in a round, on threads in tests and benchmarks (one driver).

Status transitions
------------------
:func:`next_status` is the whole state machine, a small pure function tested over every
(status, outcome) pair; :func:`apply_outcomes` applies it vectorized (once per distinct input).
The outcome of the attempt decides; the previous status matters only through ``retries``:

==================  ==========================  ==============================  ===============
outcome             new status                  reason                          retries
==================  ==========================  ==============================  ===============
ok                  fetched                     None                            0
truncated           fetched                     ``truncated``                   0
not_modified        fetched                     ``not_modified``                0
redirect            redirect                    HTTP status (``301``)           0
redirect_loop       gone                        ``redirect_loop:`` + status     0
gone (404, 410)     gone                        HTTP status (``404``)           0
http_error (4xx)    gone                        HTTP status (``403``)           0
server_error        error, or gone after        detail (``503``, ``timeout``,   +1
network_error       ``max_retries``             ``dns``); ``max_retries:``
dns_error                                       prefix when gone
robots_unavailable  queued                      ``robots_unavailable``          unchanged
host_unreachable    queued                      ``host_unreachable``            unchanged
rate_limited        queued                      ``rate_limited``                unchanged
robots_denied       robots_denied               None                            unchanged
refused             refused                     detail                          unchanged
not_fetched         queued                      None                            unchanged
==================  ==========================  ==============================  ===============

``detail`` is the HTTP status when there was a response, else the ``error`` kind, else the outcome.
:func:`next_fetch_time` is the one place that says when a known URL is due again (the ``[recrawl]``
schedule, :mod:`batchcrawl.frontier.schedule`): a ``fetched`` URL after its fetch interval (adaptive:
shrunk when the content changed, grown on a 304 or the same digest), a ``gone`` one after
``recrawl.gone_interval_s``, an ``error`` one after ``retry_backoff_s * 2**(retries-1)`` (or the
server's ``Retry-After``), a ``robots_unavailable`` one when its host's hold ends (the row's
``retry_after_s``: a robots.txt outage is a state of the host, RFC 9309 §2.3.1.4, not a failure of
the URL, so no retry is counted; ``robots.retry_after_s`` without one), a ``host_unreachable``
one likewise (its host did not answer and is held; ``politeness.unreachable_backoff_s`` without
one), a ``rate_limited`` one likewise (``politeness.rate_limit_backoff_s``), a ``not_fetched``
one from ``now``; a sitemap ``lastmod`` later than the last capture makes a fetched
URL due now. Other states are not due by time (:func:`batchcrawl.frontier.due.due_time` reads it).
New URLs are due from ``now``. The lease of every URL touched is cleared.

Conflicts, resolved deterministically
-------------------------------------
* Several fetch attempts of one URL in a round: the one with the latest ``fetch_time`` wins; on a
  tie, the later row in input order (shards in order). The others count as ``superseded``.
* A fetch result for a URL the frontier does not know applies to the row a link of the same batch
  inserts for it (a stream's shard fetches the links it finds to its own hosts before the merge);
  without such a link it is dropped and counted (``unknown``).
* Several links to one new URL: the smallest ``(round, discovered_seq)`` wins, where
  ``discovered_seq = shard << 40 | seq`` (``seq`` < 2**40 per shard and round): the order links
  were found in, shard by shard, which restores breadth-first order across rounds (docs/design.md §4).
* A link to a known URL changes nothing (a known URL keeps its depth and state; counted
  ``known``). A ``nofollow`` link is not crawled: dropped and counted (``nofollow``).
* A new URL from a link with ``filter_reason`` is stored as ``filtered`` with that reason; a
  redirect target (tag ``redirect``) is a new URL like any other, with ``source_url_key`` = the
  redirecting page (every new URL records the page that first linked to it).
* URLs re-filtered at generate (``refiltered``) become ``filtered`` with the given reason.
* URLs BEAST delayed at generate (``delayed``: over their domain's STAR budget,
  :mod:`batchcrawl.frontier.budget`) keep their state; their ``next_fetch_time`` becomes
  ``now + delay_s``, so the due-time index holds them back until then.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.config import Config
from batchcrawl.frontier import drum, runs
from batchcrawl.frontier.drum import partition_by_bucket
from batchcrawl.frontier.runs import BucketFiles, Mapper, thread_mapper
from batchcrawl.frontier.schedule import Change, FetchSchedule
from batchcrawl.frontier.summaries import UpdateSummary
from batchcrawl.frontier.table import FrontierError, epoch_ms, new_rows
from batchcrawl.records import GIVEN_BACK_OUTCOMES, Outcome, UrlStatus
from batchcrawl.store import schemas, shuffle
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest
from batchcrawl.store.shuffle import Partitioned, read_partition

__all__ = [
    "SEQ_BITS",
    "apply_outcomes",
    "discovered_seq",
    "next_fetch_time",
    "next_status",
    "partition_by_bucket",
    "update",
    "update_bucket",
]

#: ``discovered_seq = shard << SEQ_BITS | seq`` for links found by a fetch shard.
SEQ_BITS = 40

#: The ``fetched`` columns an update reads from the shards' fact files (the others are for SQL,
#: export and the WARC index): the url key, what :func:`next_status` and :func:`next_fetch_time`
#: decide from, and the validators kept for the next conditional request.
FETCH_FACT_COLUMNS = [
    "url_key", "fetch_time", "fetch_status", "outcome", "error", "content_digest", "etag",
    "last_modified", "retry_after_s",
]  # fmt: skip

_RETRIED = {Outcome.SERVER_ERROR, Outcome.NETWORK_ERROR, Outcome.DNS_ERROR}
#: Outcomes of a URL given back by a held host (fetch.holds): queued again, no retry counted.
_HELD = frozenset(GIVEN_BACK_OUTCOMES)
#: Outcomes whose payload is stored as the URL's capture (``content_digest``,
#: ``content_fetch_time``): a 200 (or a body cut at its limit), not a 304, an error or a 404 body.
_CAPTURED = [Outcome.OK.value, Outcome.TRUNCATED.value]


def next_status(
    status: str, outcome: str, retries: int, max_retries: int, *, detail: str | None = None
) -> tuple[str, str | None, int]:
    """The frontier state of a URL after one fetch attempt (table in the module docstring).

    Parameters
    ----------
    status : str
        Current :class:`~batchcrawl.records.UrlStatus` value.
    outcome : str
        :class:`~batchcrawl.records.Outcome` value of the attempt.
    retries : int
        Transient failures since the last success, before this attempt.
    max_retries : int
        ``frontier.max_retries``: failures tolerated before the URL becomes ``gone``.
    detail : str or None
        HTTP status or error kind of the attempt, used as the reason (``"404"``, ``"timeout"``).

    Returns
    -------
    (status, reason, retries) : (str, str or None, int)

    Raises
    ------
    ValueError
        ``status`` or ``outcome`` is not a known value.
    """
    UrlStatus(status)  # validates
    o = Outcome(outcome)
    if o in (Outcome.OK, Outcome.TRUNCATED, Outcome.NOT_MODIFIED):
        reason = None if o is Outcome.OK else o.value
        return UrlStatus.FETCHED.value, reason, 0
    if o is Outcome.REDIRECT:
        return UrlStatus.REDIRECT.value, detail, 0
    if o is Outcome.REDIRECT_LOOP:
        return UrlStatus.GONE.value, f"redirect_loop:{detail}" if detail else o.value, 0
    if o in (Outcome.GONE, Outcome.HTTP_ERROR):
        return UrlStatus.GONE.value, detail or o.value, 0
    if o in _HELD:  # the host is held; the URL did not fail
        return UrlStatus.QUEUED.value, o.value, retries
    if o in _RETRIED:
        why = detail or o.value
        retries += 1
        if retries > max_retries:
            return UrlStatus.GONE.value, f"max_retries:{why}", retries
        return UrlStatus.ERROR.value, why, retries
    if o is Outcome.ROBOTS_DENIED:
        return UrlStatus.ROBOTS_DENIED.value, None, retries
    if o is Outcome.REFUSED:
        return UrlStatus.REFUSED.value, detail or o.value, retries
    assert o is Outcome.NOT_FETCHED
    return UrlStatus.QUEUED.value, None, retries


def _codes(arr: pa.Array) -> tuple[np.ndarray, list[str]]:
    enc = (
        pc.dictionary_encode(pc.fill_null(arr, "")).combine_chunks()
        if isinstance(arr, pa.ChunkedArray)
        else pc.dictionary_encode(pc.fill_null(arr, ""))
    )
    return np.asarray(enc.indices.to_numpy(), dtype=np.int64), enc.dictionary.to_pylist()


def apply_outcomes(
    status: pa.Array, outcome: pa.Array, retries: pa.Array, detail: pa.Array, max_retries: int
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """:func:`next_status` over arrays of equal length n, calling it once per distinct input.

    Returns
    -------
    (status, reason, retries) : (string, string, int32) Arrow arrays of length n
    """
    n = len(status)
    if n == 0:
        return pa.array([], pa.string()), pa.array([], pa.string()), pa.array([], pa.int32())
    s_idx, s_vals = _codes(status)
    o_idx, o_vals = _codes(outcome)
    d_idx, d_vals = _codes(detail)
    r = np.asarray(pc.fill_null(retries, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    code = ((s_idx * len(o_vals) + o_idx) * len(d_vals) + d_idx) * (int(r.max()) + 1) + r
    uniq, first, inv = np.unique(code, return_index=True, return_inverse=True)
    out_s, out_r, out_n = [], [], []
    for i in first:
        st, why, nr = next_status(
            s_vals[s_idx[i]],
            o_vals[o_idx[i]],
            int(r[i]),
            max_retries,
            detail=d_vals[d_idx[i]] or None,
        )
        out_s.append(st)
        out_r.append(why)
        out_n.append(nr)
    take = pa.array(inv.reshape(-1))
    return (
        pa.array(out_s, pa.string()).take(take),
        pa.array(out_r, pa.string()).take(take),
        pa.array(out_n, pa.int32()).take(take),
    )


def discovered_seq(shard: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """``shard << 40 | seq`` as int64 (breadth-first order of links across shards).

    Raises
    ------
    FrontierError
        A ``seq`` is negative or >= 2**40, or a shard is negative or >= 2**23.
    """
    shard = np.asarray(shard, dtype=np.int64)
    seq = np.asarray(seq, dtype=np.int64)
    if len(seq) and (seq.min() < 0 or seq.max() >= 1 << SEQ_BITS):
        raise FrontierError(
            f"links.seq must be in [0, 2**{SEQ_BITS}); got {seq.min()}..{seq.max()}"
        )
    if len(shard) and (shard.min() < 0 or shard.max() >= 1 << (63 - SEQ_BITS)):
        raise FrontierError(f"links.shard must be in [0, 2**23); got {shard.min()}..{shard.max()}")
    keys: np.ndarray = (shard << SEQ_BITS) | seq
    return keys


def _np(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(col.to_numpy() if isinstance(col, pa.ChunkedArray) else col.to_numpy())


def _fetch_batch(fetched: pa.Table) -> drum.SortedBatch:
    """Fetch facts with the winner of each URL first (latest fetch_time, then later row)."""
    ft = _np(fetched.column("fetch_time").cast(pa.int64()))
    idx = np.arange(fetched.num_rows)
    order = np.lexsort((-idx, -ft))  # latest time first; on a tie the later row first
    return drum.SortedBatch(fetched.take(pa.array(order)))


def _link_batch(links: pa.Table, counts: UpdateSummary) -> drum.SortedBatch:
    """New-URL candidates from links: nofollow dropped, smallest (round, seq) first per URL.

    The batch keeps the links' columns (``dst_url_key`` renamed ``url_key``, plus
    ``discovered_seq``); :func:`_link_rows` turns the ones inserted into frontier rows.
    """
    counts.links["in"] += links.num_rows
    follow = pc.invert(links.column("nofollow"))
    counts.links["nofollow"] += links.num_rows - (pc.sum(follow).as_py() or 0)
    links = links.filter(follow)
    dseq = discovered_seq(_np(links.column("shard")), _np(links.column("seq")))
    rnd = _np(links.column("round")).astype(np.int64)
    order = np.lexsort((dseq, rnd))
    links = links.take(pa.array(order)).append_column("discovered_seq", pa.array(dseq[order]))
    sb = drum.SortedBatch(
        links.rename_columns(["url_key" if n == "dst_url_key" else n for n in links.column_names])
    )
    counts.links["duplicate"] += sb.n - len(sb.keys)
    return sb


def _lastmod_batch(lb: drum.SortedBatch, keys: list[np.ndarray]) -> drum.SortedBatch | None:
    """``(url_key, lastmod)`` of links to known URLs (``keys``: :func:`runs.file_keys`) that carry
    a sitemap ``lastmod``."""
    t = lb.table
    if "lastmod" not in t.column_names or t.column("lastmod").null_count == t.num_rows:
        return None
    mask = np.asarray(pc.is_valid(t.column("lastmod")).to_numpy(zero_copy_only=False))
    mask &= runs.known_in(keys, lb.keys)
    if not mask.any():
        return None
    return drum.SortedBatch(t.filter(pa.array(mask)).select(["url_key", "lastmod"]))


def _link_rows(t: pa.Table, now: dt.datetime | float) -> pa.Table:
    """Frontier rows of new URLs from (renamed) links rows, due from ``now``; ``filter_reason`` ->
    filtered."""
    fr = pc.fill_null(t.column("filter_reason"), "")
    filtered = pc.not_equal(fr, "")
    return new_rows(
        url_key=t.column("url_key"),
        url=t.column("dst_url"),
        host=t.column("dst_host"),
        domain=t.column("dst_domain"),
        depth=t.column("depth"),
        hops_out=t.column("hops_out"),
        discovered_round=t.column("round"),
        discovered_seq=t.column("discovered_seq"),
        status=pc.if_else(filtered, UrlStatus.FILTERED.value, UrlStatus.QUEUED.value),
        reason=pc.if_else(filtered, fr, pa.scalar(None, pa.string())),
        source_url_key=t.column("src_url_key"),
        next_fetch_time=now,
    )


def _ms_col(values_ms: np.ndarray, mask: np.ndarray) -> pa.Array:
    return pa.array(values_ms, pa.int64(), mask=~mask).cast(pa.timestamp("ms"))


def schedule_of(cfg: Config) -> FetchSchedule:
    """The :class:`~batchcrawl.frontier.schedule.FetchSchedule` of ``[recrawl]`` (error back-off
    from ``frontier.retry_backoff_s``)."""
    r = cfg.recrawl
    return FetchSchedule(
        policy=r.policy, interval_s=r.interval_s, min_interval_s=r.min_interval_s,
        max_interval_s=r.max_interval_s, inc_rate=r.inc_rate, dec_rate=r.dec_rate,
        retry_backoff_s=cfg.frontier.retry_backoff_s, gone_interval_s=r.gone_interval_s,
    )  # fmt: skip


def _ms(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A timestamp column as float ms (or any numeric column as float) with NaN for nulls.

    Timestamps go through their int64 storage; integer and floating columns are cast to float64
    directly (a float column such as ``retry_after_s`` holds fractional seconds: an int64 cast
    refused them, and one HTTP-date ``Retry-After`` failed the whole update, issue 31)."""
    if pa.types.is_timestamp(col.type) or pa.types.is_date(col.type):
        col = pc.cast(col, pa.int64())
    return np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)


def _obj(col: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=object)


def next_fetch_time(
    cfg: Config,
    now_ms: int,
    old: pa.Table,
    got: pa.Table,
    status: np.ndarray | None = None,
    retries: np.ndarray | None = None,
) -> dict[str, pa.Array]:
    """When each URL of ``old`` is due again after this round's facts ``got`` about it (docs/design.md
    §8a): the one place that sets ``next_fetch_time``, ``fetch_interval_s`` and the conditional-GET
    validators of known URLs.

    Two kinds of facts, row-aligned with ``old`` (n rows):

    * fetch results (``fetched`` rows; ``status``/``retries`` are the new states from
      :func:`next_status`): ``fetched`` follows :meth:`FetchSchedule.after_fetch` from the fetch
      time, with change = ``not_modified`` or the same payload digest → unchanged, no previous
      interval → first; ``gone`` :meth:`~FetchSchedule.after_gone`; ``error``
      :meth:`~FetchSchedule.after_failure` from ``now``, or ``now + retry_after_s`` when the server
      sent a usable ``Retry-After`` (RFC 9110 §10.2.3); ``robots_unavailable`` ``now +
      retry_after_s`` (the end of the host's hold), or ``now + robots.retry_after_s`` without
      one; ``host_unreachable`` and ``rate_limited`` likewise (``politeness.unreachable_backoff_s``,
      ``rate_limit_backoff_s`` without one);
      ``queued`` after ``not_fetched`` ``now``; every other state NULL
      (not due by time).
    * sitemap facts (rows with a ``lastmod`` column, from links tagged ``sitemap``): a ``fetched``
      URL whose ``lastmod`` is later than its last capture is due ``now`` (sitemaps.org); others
      keep their time.

    Returns
    -------
    dict of column name -> Arrow array of length n
        ``next_fetch_time`` (and, for fetch results, ``fetch_interval_s``, ``etag``,
        ``last_modified``, ``content_digest``, ``content_fetch_time``).

    Raises
    ------
    TypeError
        Fetch results (no ``lastmod`` column) without ``status`` and ``retries``.
    """
    n = old.num_rows
    old_nft = _ms(old.column("next_fetch_time"))
    if "lastmod" in got.column_names:
        captured = _ms(pc.coalesce(old.column("content_fetch_time"), old.column("fetch_time")))
        lastmod = _ms(got.column("lastmod"))
        newer = (_obj(old.column("status")) == UrlStatus.FETCHED.value) & (lastmod > captured)
        nft = np.where(newer, np.minimum(np.nan_to_num(old_nft, nan=now_ms), now_ms), old_nft)
        return {"next_fetch_time": _ms_col(np.nan_to_num(nft).astype(np.int64), ~np.isnan(nft))}
    if status is None or retries is None:
        raise TypeError("next_fetch_time: fetch results need the new status and retries")
    sched = schedule_of(cfg)
    outcome = _obj(got.column("outcome"))
    fetch_ms = _ms(got.column("fetch_time"))
    interval = np.array(  # a writable copy
        pc.cast(old.column("fetch_interval_s"), pa.float64()).to_numpy(zero_copy_only=False),
        dtype=np.float64,
    )
    same = _obj(
        pc.fill_null(pc.equal(got.column("content_digest"), old.column("content_digest")), False)
    )
    after = _ms(got.column("retry_after_s")) * 1000.0  # ms (the column is seconds, fractional)
    nft = np.full(n, np.nan)
    held_default_s = {  # the wait of a held host's URL given back without the hold's end
        Outcome.ROBOTS_UNAVAILABLE.value: cfg.robots.retry_after_s,
        Outcome.HOST_UNREACHABLE.value: cfg.politeness.unreachable_backoff_s,
        Outcome.RATE_LIMITED.value: cfg.politeness.rate_limit_backoff_s,
    }
    for i in range(n):
        s = status[i]
        if s == UrlStatus.FETCHED.value:
            prev = None if np.isnan(interval[i]) else float(interval[i])
            unchanged = outcome[i] == Outcome.NOT_MODIFIED.value or bool(same[i])
            change: Change = "first" if prev is None else ("unchanged" if unchanged else "changed")
            t, interval[i] = sched.after_fetch(fetch_ms[i] / 1000.0, prev, change)
            nft[i] = t * 1000.0
        elif s == UrlStatus.GONE.value:
            nft[i] = sched.after_gone(fetch_ms[i] / 1000.0) * 1000.0
        elif s == UrlStatus.ERROR.value:
            if np.isnan(after[i]):
                nft[i] = sched.after_failure(now_ms / 1000.0, int(retries[i])) * 1000.0
            else:
                nft[i] = now_ms + after[i]
        elif s == UrlStatus.QUEUED.value and outcome[i] in held_default_s:
            held_ms = held_default_s[outcome[i]] * 1000.0 if np.isnan(after[i]) else after[i]
            nft[i] = now_ms + held_ms
        elif s == UrlStatus.QUEUED.value:  # not_fetched: never tried, due again now
            nft[i] = now_ms
    captured = np.isin(outcome, _CAPTURED)
    validated = captured | (outcome == Outcome.NOT_MODIFIED.value)
    keep = pa.array(~validated)
    # a capture of the payload already stored was written as a revisit of that capture
    # (fetch.pages): the capture its digest comes from stays the first one, so the next revisit
    # refers to the response record, not to a revisit (WARC 1.1 §6.7)
    repeated = np.asarray(same, dtype=bool) & np.asarray(
        pc.is_valid(old.column("content_fetch_time")).to_numpy(zero_copy_only=False), dtype=bool
    )
    return {
        "next_fetch_time": _ms_col(np.nan_to_num(nft).astype(np.int64), ~np.isnan(nft)),
        "fetch_interval_s": pa.array(interval, pa.float64(), mask=np.isnan(interval)),
        "etag": pc.if_else(keep, old.column("etag"), got.column("etag")),
        "last_modified": pc.if_else(keep, old.column("last_modified"), got.column("last_modified")),
        # the last stored response, what a revisit of the URL refers to: its digest and time
        # together (a 404's body or a 304 replaces neither)
        "content_digest": pc.if_else(
            pa.array(captured),
            pc.coalesce(got.column("content_digest"), old.column("content_digest")),
            old.column("content_digest"),
        ),
        "content_fetch_time": pc.if_else(
            pa.array(captured & ~repeated),
            got.column("fetch_time"),
            old.column("content_fetch_time"),
        ),  # fmt: skip
    }


def _fetch_combine(cfg: Config, now_ms: int, counts: UpdateSummary) -> drum.Combine:
    def combine(old: pa.Table, got: pa.Table) -> pa.Table:
        detail = pc.coalesce(
            pc.cast(got.column("fetch_status"), pa.string()),
            got.column("error"),
            got.column("outcome"),
        )
        status, reason, retries = apply_outcomes(
            old.column("status"),
            got.column("outcome"),
            old.column("retries"),
            detail,
            cfg.frontier.max_retries,
        )
        st = np.asarray(status.to_numpy(zero_copy_only=False), dtype=object)
        times = next_fetch_time(cfg, now_ms, old, got, st, _np(retries).astype(np.int64))
        for s, n in Counter(st.tolist()).items():
            counts.status[s] += n
        n = old.num_rows
        values = {
            "status": status,
            "reason": reason,
            "retries": retries,
            "fetch_time": got.column("fetch_time"),
            "fetch_status": got.column("fetch_status"),
            "lease_round": pa.nulls(n, pa.int32()),
            "lease_shard": pa.nulls(n, pa.int32()),
            **times,
        }
        return _with(old, values)

    return combine


def _with(old: pa.Table, values: Mapping[str, pa.Array]) -> pa.Table:
    cols = [
        values[f.name].cast(f.type) if f.name in values else old.column(f.name) for f in old.schema
    ]
    return pa.Table.from_arrays(cols, schema=old.schema)


def _refilter_combine(old: pa.Table, got: pa.Table) -> pa.Table:
    n = old.num_rows
    return _with(
        old,
        {
            "status": pa.array([UrlStatus.FILTERED.value] * n, pa.string()),
            "reason": got.column("reason"),
            "lease_round": pa.nulls(n, pa.int32()),
            "lease_shard": pa.nulls(n, pa.int32()),
        },
    )


def _delay_combine(now_ms: int) -> drum.Combine:
    def combine(old: pa.Table, got: pa.Table) -> pa.Table:
        wait_ms = np.asarray(got.column("delay_s").to_numpy(), dtype=np.float64) * 1000.0
        n = old.num_rows
        return _with(old, {
            "next_fetch_time": _ms_col((now_ms + wait_ms).astype(np.int64), np.ones(n, bool)),
            "lease_round": pa.nulls(n, pa.int32()),
            "lease_shard": pa.nulls(n, pa.int32()),
        })  # fmt: skip

    return combine


def update_bucket(
    crawl: CrawlDir,
    files: BucketFiles,
    generation: int,
    fetched: pa.Table | None,
    links: pa.Table | None,
    refiltered: pa.Table | None = None,
    delayed: pa.Table | None = None,
    *,
    round: int,
    cfg: Config,
    now: dt.datetime | float,
) -> tuple[BucketFiles, UpdateSummary]:
    """Update one bucket with its share of the round's facts (one Dask task): IRLbot's DRUM
    check+update (§5.1) written as a delta run (docs/design.md §4, :mod:`batchcrawl.frontier.runs`).

    Only the bucket's ``url_key`` columns are read to tell known from new links; whole rows are read
    only for the URLs fetched or re-filtered. The changed and new rows are written as the bucket's
    newest run, ``frontier/gen={generation}/bucket=BBB.run.parquet``; a bucket with no facts writes
    nothing. A bucket whose runs would pass the compaction rule with this one gets a new base
    instead (:func:`runs.add_run` with ``compact``: the round's compaction of the bucket, done in the
    same task without writing the run and reading it back).

    Parameters
    ----------
    crawl, files
        The crawl and the bucket's committed base and runs.
    generation : int
        The generation being written (the parent's + 1).
    fetched : pyarrow.Table or None
        This bucket's ``fetched`` rows (schema ``fetched``), any order.
    links : pyarrow.Table or None
        This bucket's ``links`` rows (by ``dst_url_key``), any order.
    refiltered : pyarrow.Table or None
        ``(url_key, reason)`` of URLs the filters rejected at generate.
    delayed : pyarrow.Table or None
        ``(url_key, delay_s)`` of URLs BEAST delayed at generate
        (:data:`batchcrawl.frontier.generate.DELAYED_SCHEMA`).
    round : int
        The round whose facts these are (new URLs get ``discovered_round`` from the links).
    cfg : Config
        Uses ``frontier.max_retries``, ``retry_backoff_s``, ``drum_batch_bytes`` and
        ``robots.retry_after_s``.
    now : datetime or float
        Wall clock (UTC): ``next_fetch_time`` of new URLs and the base of retry backoffs.

    Returns
    -------
    (files, summary)
        The bucket's new file list (uncommitted) and what was done to it.
    """
    counts = UpdateSummary(round=round)
    fb = _fetch_batch(fetched) if fetched is not None and fetched.num_rows else None
    lb = _link_batch(links, counts) if links is not None and links.num_rows else None
    rb = drum.SortedBatch(refiltered) if refiltered is not None and refiltered.num_rows else None
    db = drum.SortedBatch(delayed) if delayed is not None and delayed.num_rows else None
    if fb is None and lb is None and rb is None and db is None:
        n = runs.bucket_rows(crawl, files)
        return files, UpdateSummary(round, buckets_kept=1, frontier_rows_before=n,
                                    frontier_rows_after=n)  # fmt: skip
    keys = runs.file_keys(crawl, files)  # per file, sorted: no union to sort
    rows_before = runs.bucket_rows(crawl, files)  # recorded in the manifest
    counts.frontier_rows_before += rows_before
    mb = _lastmod_batch(lb, keys) if lb is not None else None
    want = [b.keys for b in (fb, rb, mb, db) if b is not None]
    need = np.unique(np.concatenate(want)) if want else np.empty(0, np.uint64)
    changed = runs.lookup(crawl, files, need[runs.known_in(keys, need)], keys)
    if db is not None:  # before the fetch results: a URL delayed was not fetched
        changed, known, _ = drum.merge_chunk(
            changed, db, 0, len(db.keys), combine=_delay_combine(epoch_ms(now)), insert=False
        )
        counts.delayed += int(known.sum())
    if rb is not None:
        changed, known, _ = drum.merge_chunk(
            changed, rb, 0, len(rb.keys), combine=_refilter_combine, insert=False
        )
        counts.refiltered += int(known.sum())
    unknown = 0
    if fb is not None:
        counts.fetched["in"] += fb.n
        counts.fetched["superseded"] += fb.n - len(fb.keys)
        combine = _fetch_combine(cfg, epoch_ms(now), counts)
        changed, known, _ = drum.merge_chunk(
            changed, fb, 0, len(fb.keys), combine=combine, insert=False
        )
        counts.fetched["applied"] += int(known.sum())
        unknown = int((~known).sum())
        counts.fetched["unknown"] += unknown
    if mb is not None:  # after the fetches: a capture of this round is newer than any lastmod
        now_ms = epoch_ms(now)
        before = _ms(changed.column("next_fetch_time"))
        changed, _, _ = drum.merge_chunk(
            changed, mb, 0, len(mb.keys), insert=False,
            combine=lambda old, got: _with(old, next_fetch_time(cfg, now_ms, old, got)),
        )  # fmt: skip
        after = _ms(changed.column("next_fetch_time"))
        counts.lastmod_due += int(np.sum((after == now_ms) & ~(before <= now_ms)))
    parts = [changed]
    if lb is not None:
        known = runs.known_in(keys, lb.keys)
        counts.links["known"] += int(known.sum())
        added = lb.table.filter(pa.array(~known))
        why = added.column("filter_reason")
        counts.links["new_queued"] += why.null_count
        if why.null_count < len(why):
            vc = pc.value_counts(why.drop_null())
            for r, n in zip(
                vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True
            ):
                counts.links[f"new_filtered:{r}"] += n
        new = _link_rows(added, now)
        if fb is not None and unknown and new.num_rows:
            # a URL first linked and fetched in the same micro-batch (a stream's shard queues
            # the links it finds to its own hosts at once, batchcrawl.fetch.directlinks): its
            # fetch applies to the row its link inserts
            new, hit, _ = drum.merge_chunk(schemas.conform("frontier", new), fb, 0, len(fb.keys),
                                           combine=combine, insert=False)  # fmt: skip
            counts.fetched["applied"] += int(hit.sum())
            counts.fetched["unknown"] -= int(hit.sum())
        parts.append(new)
        counts.frontier_rows_after += rows_before + added.num_rows
    else:
        counts.frontier_rows_after += rows_before
    run_rows = pa.concat_tables([schemas.conform("frontier", p) for p in parts])
    new_files = runs.add_run(
        crawl, files, generation, run_rows, cfg, bucket_rows=counts.frontier_rows_after,
        compact=True,
    )  # fmt: skip
    counts.buckets_compacted += int(run_rows.num_rows > 0 and not new_files.runs)
    counts.rows_written += run_rows.num_rows
    counts.buckets_rewritten += int(run_rows.num_rows > 0)
    counts.buckets_kept += int(run_rows.num_rows == 0)
    return new_files, counts


#: The round's facts of one kind: a whole table (split by bucket here), or the shards'
#: bucket-partitioned files (:mod:`batchcrawl.store.shuffle`, read by each bucket's task).
Facts: TypeAlias = pa.Table | list[Partitioned] | None


@dataclass(frozen=True)
class _BucketFacts:
    """One kind of fact, ready for per-bucket tasks: split tables, or partitioned files."""

    table: str
    split: dict[int, pa.Table] | None
    files: list[Partitioned] | None
    columns: list[str] | None = None  # read from files: only these (None: all)

    @classmethod
    def of(
        cls, table: str, facts: Facts, buckets: int, key: str, columns: list[str] | None = None
    ) -> _BucketFacts:
        if isinstance(facts, pa.Table):
            return cls(table, partition_by_bucket(facts, buckets, key), None)
        return cls(table, None, list(facts or []), columns)

    def get(self, crawl: CrawlDir, bucket: int) -> pa.Table | None:
        if self.split is not None:
            return self.split.get(bucket)
        return read_partition(crawl, self.table, self.files or [], bucket, self.columns)


def _update_task(
    crawl_url: str,
    generation: int,
    fetched: _BucketFacts,
    links: _BucketFacts,
    item: tuple[BucketFiles, pa.Table | None, pa.Table | None],
    *,
    round: int,
    cfg: Config,
    now: dt.datetime | float,
) -> tuple[BucketFiles, UpdateSummary]:
    crawl = CrawlDir.open(crawl_url)
    files, refiltered, delayed = item
    b = files.bucket
    # the fact files every bucket reads
    shuffle.FOOTERS.reserve(len(fetched.files or ()) + len(links.files or ()))
    return update_bucket(
        crawl, files, generation, fetched.get(crawl, b), links.get(crawl, b), refiltered,
        delayed, round=round, cfg=cfg, now=now,
    )  # fmt: skip


@dataclass
class UpdateResult:
    """What :func:`update` produced; unpacks as ``listing, summary_json = update(...)``.

    Attributes
    ----------
    buckets : list of BucketFiles
        Every updated bucket's new file list (uncommitted), in bucket order: every bucket of the
        crawl unless :func:`update` was given ``buckets`` (then :attr:`listing` is partial too).
    summary : UpdateSummary
        Summed over the buckets.
    """

    buckets: list[BucketFiles]
    summary: UpdateSummary

    @property
    def listing(self) -> list[FileEntry]:
        """The new ``frontier`` listing of the manifest."""
        return runs.frontier_listing(self.buckets)

    def __iter__(self) -> Iterator[list[FileEntry] | dict[str, Any]]:
        yield self.listing
        yield self.summary.to_json()


def update(
    crawl: CrawlDir,
    manifest: Manifest,
    round: int,
    fetched: Facts,
    links: Facts,
    cfg: Config,
    now: dt.datetime | float,
    *,
    refiltered: pa.Table | None = None,
    mapper: Mapper | None = None,
    buckets: Iterable[int] | None = None,
    delayed: pa.Table | None = None,
) -> UpdateResult:
    """Update every bucket (:func:`update_bucket`, one task each through ``mapper``) and sum the
    summaries; nothing is committed (the caller commits the listing with the rest of the round).
    A round passes a Dask mapper and the shards' partitioned files; tests and benchmarks call
    the same function with tables and threads; a stream's micro-batch passes the ``buckets`` it
    touched (docs/design.md §8).

    Parameters
    ----------
    fetched, links : Facts
        The round's ``fetched`` and ``links`` rows: tables, or the shards' partitioned files.
    refiltered : pyarrow.Table or None
        ``(url_key, reason)`` of URLs re-filtered at generate.
    delayed : pyarrow.Table or None
        ``(url_key, delay_s)`` of URLs BEAST delayed at generate (``GenerateResult.delayed``).
    mapper : Mapper or None
        Runs the per-bucket tasks (default: this thread, in order).
    buckets : iterable of int or None
        Update only these buckets (ids in ``[0, manifest.buckets)``; facts and ``refiltered`` rows
        of other buckets are ignored); the result lists only them, in bucket order. None (default):
        every bucket.

    Other arguments as in :func:`update_bucket`.
    """
    k = manifest.buckets
    rparts = partition_by_bucket(refiltered, k) if refiltered is not None else {}
    dparts = partition_by_bucket(delayed, k) if delayed is not None else {}
    task = functools.partial(
        _update_task, crawl.url, manifest.generation + 1,
        _BucketFacts.of("fetched", fetched, k, "url_key", FETCH_FACT_COLUMNS),
        _BucketFacts.of("links", links, k, "dst_url_key"),
        round=round, cfg=cfg, now=now,
    )  # fmt: skip
    files = runs.bucket_files(manifest)
    if buckets is not None:
        wanted = sorted(set(buckets))
        if wanted and not (0 <= wanted[0] and wanted[-1] < k):
            raise FrontierError(
                f"update: buckets {wanted[0]}..{wanted[-1]} outside [0, {k}); pass bucket ids of "
                "the manifest"
            )
        files = [files[b] for b in wanted]
    items = [(bf, rparts.get(bf.bucket), dparts.get(bf.bucket)) for bf in files]
    results = (mapper or thread_mapper(1))(task, items)
    total = UpdateSummary(round=round)
    for _, s in results:
        total = total + s
    return UpdateResult([r[0] for r in results], total)
