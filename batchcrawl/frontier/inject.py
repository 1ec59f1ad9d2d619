"""Inject: add seed URLs to the frontier (Nutch's ``inject``; docs/design.md §4).

Seeds are read one per line; blank lines and lines starting with ``#`` are skipped. Each seed is
canonicalized (:func:`batchcrawl.urls.canonicalize`); a line that is not a URL is reported with its
number and reason, counted, and never stops the rest. Duplicates collapse to their first line.
Seeds get depth 0, ``hops_out`` 0, ``discovered_round`` 0 and ``discovered_seq`` = the line number
plus the highest seed sequence already in the crawl (so a later inject file sorts after the
earlier ones), which is breadth-first order by line. Seeds the filter chain rejects are stored as
``filtered`` with the reason, so they are counted and queryable.

Injecting into an existing crawl only adds new URLs (DRUM check+update, IRLbot §5.1): a known URL
keeps its state. The step commits one generation. The caller (the CLI) holds the writer lock.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Any, TypedDict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl import urls
from batchcrawl.config import Config
from batchcrawl.errors import InvalidURL
from batchcrawl.frontier import drum, runs
from batchcrawl.frontier.generate import filters_fingerprint
from batchcrawl.frontier.requeue import queue_again, release_hosts
from batchcrawl.frontier.runs import iter_buckets
from batchcrawl.frontier.table import new_rows, seed_scope
from batchcrawl.records import UrlStatus
from batchcrawl.scope.filters import FilterChain
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir, Manifest

__all__ = ["MAX_BAD_LINES_LISTED", "filtered_text", "inject", "parse_seed_lines"]

#: At most this many bad lines are listed (with number and reason) in the summary.
MAX_BAD_LINES_LISTED = 100
#: Longest seed line taken as a URL (characters); longer lines are bad lines, so that neither
#: the frontier nor the summary holds megabytes of one line (``filters.max_url_length`` then
#: decides which of the shorter ones are crawled).
MAX_SEED_CHARS = 65_536


class BadLine(TypedDict):
    """A seed file's line that is not a seed URL: its number (from 1) and why."""

    line: int
    reason: str


def parse_seed_lines(
    lines: Iterable[str],
) -> tuple[list[tuple[int, str]], list[BadLine], Counter[str]]:
    """Canonical seeds of a seed file, in line order, duplicates removed.

    Returns
    -------
    (seeds, bad, counts)
        ``seeds``: ``(line_number, canonical_url)`` of the first line of each URL; ``bad``: every
        bad line as ``{"line": n, "reason": str}``; ``counts``: ``lines``, ``skipped`` (blank or
        comment), ``duplicates``.
    """
    seeds: list[tuple[int, str]] = []
    seen: set[str] = set()
    bad: list[BadLine] = []
    counts: Counter[str] = Counter()
    for lineno, raw in enumerate(lines, 1):
        counts["lines"] += 1
        text = raw.strip()
        if not text or text.startswith("#"):
            counts["skipped"] += 1
            continue
        if len(text) > MAX_SEED_CHARS:  # no URL is this long: a binary or a joined file
            bad.append({"line": lineno, "reason": f"{len(text):,} characters long; a seed URL "
                        f"has at most {MAX_SEED_CHARS:,} (one URL per line)"})  # fmt: skip
            continue
        if any("\udc80" <= ch <= "\udcff" for ch in text):
            bad.append({"line": lineno, "reason": "not valid UTF-8; seed files are UTF-8 text"})
            continue
        if any(ch.isspace() for ch in text):
            bad.append({"line": lineno, "reason": "contains whitespace; put one URL per line"})
            continue
        try:
            canonical = urls.canonicalize(text)
        except InvalidURL as exc:
            bad.append({"line": lineno, "reason": str(exc)})
            continue
        if canonical in seen:
            counts["duplicates"] += 1
            continue
        seen.add(canonical)
        seeds.append((lineno, canonical))
    return seeds, bad, counts


def inject(
    crawl: CrawlDir,
    cfg: Config,
    lines: Iterable[str],
    *,
    source: str = "seeds",
    clock: Callable[[], float] = time.time,
    refetch: bool = False,
) -> dict[str, Any]:
    """Add the seeds in ``lines`` to the crawl's frontier and commit a generation (none when no
    seed is new and none is refetched: a seed file of known, bad or no URLs changes nothing).

    Parameters
    ----------
    crawl : CrawlDir
        An existing crawl (its current generation is the parent).
    cfg : Config
        Uses ``[filters]`` (seed filtering) and ``frontier.drum_batch_bytes``.
    lines : iterable of str
        The seed file's lines (one URL per line; ``#`` comments and blank lines allowed).
    source : str
        Name of the seed source, recorded in the summary (a file name).
    clock : callable
        Wall clock, epoch seconds: new seeds are due from ``clock()`` (``next_fetch_time``).
    refetch : bool
        Also make the seeds already known due now (``next_fetch_time = clock()``) when their status
        can be fetched again (``fetched``, ``gone``, ``error``, ``queued``), or queue them again
        when the address policy or robots.txt kept them from being fetched (``refused``,
        ``robots_denied``: the policy may have been widened since, and the fetch checks again):
        counted ``refetch``.

    Returns
    -------
    dict
        The committed summary: ``lines`` = ``skipped + bad_lines + duplicates + seeds_known +
        seeds_new``; ``seeds_new`` = ``queued + sum(filtered.values())``; ``bad_line_list`` lists
        the first :data:`MAX_BAD_LINES_LISTED` bad lines ``{line, reason}``;
        ``filtered_line_list`` the first :data:`MAX_BAD_LINES_LISTED` new seeds the URL filters
        dropped, ``{line, reason}`` (the filter's reason, as in ``filtered``); ``generation``
        (the new one, or the current one when ``committed`` is False).

    Raises
    ------
    CommitConflict
        Another writer committed meanwhile (take the lock first).
    """
    manifest = crawl.manifest()
    seeds, bad, counts = parse_seed_lines(lines)
    hosts = [urls.host_of(u) for _, u in seeds]
    domains = [urls.domain_of(h) for h in hosts]
    seed_hosts, seed_domains = seed_scope(crawl, manifest)
    chain = FilterChain.from_config(
        cfg.filters, seed_hosts | set(hosts), seed_domains | set(domains)
    )
    reasons = [
        chain.check(u, h, d, 0, 0) for (_, u), h, d in zip(seeds, hosts, domains, strict=True)
    ]
    offset = _max_seed_seq(crawl, manifest) + 1
    now = clock()
    rows = new_rows(
        url_key=urls.url_keys(u for _, u in seeds),
        url=[u for _, u in seeds],
        host=hosts,
        domain=domains,
        depth=0,
        hops_out=0,
        discovered_round=0,
        discovered_seq=np.array([offset + n for n, _ in seeds], dtype=np.int64),
        status=[UrlStatus.QUEUED.value if r is None else UrlStatus.FILTERED.value for r in reasons],
        reason=reasons,
        source_url_key=None,
        next_fetch_time=now,
    )
    gen = manifest.generation + 1
    robots_hosts: set[str] = set()  # hosts of refetched robots_denied seeds
    new_count: Counter[str] = Counter()
    filtered_lines: list[BadLine] = []  # the new seeds the filters dropped: line and reason
    out: list[runs.BucketFiles] = []
    rows_after = 0
    parts = drum.partition_by_bucket(rows, manifest.buckets)
    for files in runs.bucket_files(manifest):
        part = parts.get(files.bucket)
        if part is None:
            out.append(files)
            continue
        keys = runs.bucket_keys(crawl, files)
        batch = drum.SortedBatch(part)
        added = batch.table.filter(pa.array(~runs.is_known(keys, batch.keys)))
        seqs = added.column("discovered_seq").to_pylist()
        for seq, why in zip(seqs, added.column("reason").to_pylist(), strict=True):
            new_count["queued" if why is None else f"filtered:{why}"] += 1
            if why is not None:
                filtered_lines.append({"line": seq - offset, "reason": why})
        new_count["known"] += part.num_rows - added.num_rows
        n_after = len(keys) + added.num_rows  # refetched rows are known: not counted again
        rows_after += n_after
        if refetch:
            again, denied = _due_now(crawl, files, batch.keys[runs.is_known(keys, batch.keys)], now)
            robots_hosts |= denied
            new_count["refetch"] += again.num_rows
            added = pa.concat_tables([again, schemas.conform("frontier", added)]).sort_by("url_key")
        out.append(runs.add_run(crawl, files, gen, added, cfg, bucket_rows=n_after))
    seeds_new = sum(n for k, n in new_count.items() if k not in ("known", "refetch"))  # issue 34
    summary = {
        "step": "inject",
        "source": source,
        "lines": counts["lines"],
        "skipped": counts["skipped"],
        "bad_lines": len(bad),
        "bad_line_list": bad[:MAX_BAD_LINES_LISTED],
        "duplicates": counts["duplicates"],
        "seeds_known": new_count["known"],
        "refetch": new_count["refetch"],
        "seeds_new": seeds_new,
        "queued": new_count["queued"],
        "filtered": {
            k.split(":", 1)[1]: n for k, n in sorted(new_count.items()) if k.startswith("filtered:")
        },
        "frontier_rows": rows_after + _untouched_rows(crawl, out, parts),
        "filtered_line_list": sorted(filtered_lines, key=lambda b: b["line"])[
            :MAX_BAD_LINES_LISTED
        ],
        "filters_fingerprint": filters_fingerprint(cfg),
    }
    if not seeds_new and not new_count["refetch"]:  # the frontier is unchanged: no generation
        return {**summary, "generation": manifest.generation, "committed": False}
    listings = {"frontier": runs.frontier_listing(out)}
    hosts_listing, summary["robots_expired"], _ = release_hosts(
        crawl, cfg, manifest, gen, robots_hosts, set(), now
    )
    if hosts_listing is not None:
        listings["hosts"] = hosts_listing
    committed = crawl.commit(manifest, listings, summary)
    return {**summary, "generation": committed.generation, "committed": True}


def filtered_text(summary: Mapping[str, Any]) -> str:
    """The new seeds of an inject ``summary`` that the URL filters (``[filters]``) dropped, how
    many and why, as a part of the one-line stderr summary: ``"1 dropped by the URL filters
    (url_length 1)"``; ``""`` when the filters dropped none. Such a seed is in the frontier with
    ``status = 'filtered'`` and is never fetched; the JSON summary's ``filtered`` has the same
    counts."""
    filtered: Mapping[str, int] = summary.get("filtered") or {}
    total = sum(filtered.values())
    if not total:
        return ""
    reasons = ", ".join(f"{why} {n:,}" for why, n in sorted(filtered.items()))
    return f"{total:,} dropped by the URL filters ({reasons})"


_REFETCHABLE = ("fetched", "gone", "error", "queued")
#: Statuses a refetch puts back to ``queued`` (reason cleared): what refused them may have been
#: changed since (``network.allow_networks``, the site's robots.txt); the fetch checks again.
_REQUEUED = (UrlStatus.REFUSED.value, UrlStatus.ROBOTS_DENIED.value)


def _due_now(
    crawl: CrawlDir, files: runs.BucketFiles, keys: np.ndarray, now: float
) -> tuple[pa.Table, set[str]]:
    """The frontier rows of the known ``keys`` whose status can be fetched again, due ``now``,
    a ``refused`` or ``robots_denied`` row queued again
    (:func:`~batchcrawl.frontier.requeue.queue_again`); and the hosts of the ``robots_denied``
    ones, whose cached robots.txt is to expire (:func:`~batchcrawl.frontier.requeue.release_hosts`)."""
    rows = schemas.conform("frontier", runs.lookup(crawl, files, keys))
    rows = rows.filter(pc.is_in(rows.column("status"), pa.array(_REFETCHABLE + _REQUEUED)))
    denied = rows.filter(pc.equal(rows.column("status"), UrlStatus.ROBOTS_DENIED.value))
    again = queue_again(rows, pc.is_in(rows.column("status"), pa.array(_REQUEUED)), now)
    return again, set(denied.column("host").to_pylist())


def _untouched_rows(
    crawl: CrawlDir, buckets: list[runs.BucketFiles], touched: Container[int]
) -> int:
    """Rows of the buckets ``touched`` does not name (key columns only when they have runs)."""
    total = 0
    for bf in buckets:
        if bf.bucket in touched:
            continue
        total += runs.bucket_rows(crawl, bf)
    return total


def _max_seed_seq(crawl: CrawlDir, manifest: Manifest) -> int:
    """Highest ``discovered_seq`` of round 0 in the crawl, or 0."""
    best = 0
    for _, t in iter_buckets(crawl, manifest, ["discovered_round", "discovered_seq"]):
        if t.num_rows:
            mask = t.column("discovered_round").to_numpy() == 0
            if mask.any():
                best = max(best, int(t.column("discovered_seq").to_numpy()[mask].max()))
    return best
