"""The page processor: one fetch in, one ``fetched`` row and its WARC records out (Heritrix's
disposition chain, StormCrawler's parser bolt).

:meth:`PageProcessor.process` turns ``(fetch item, response)`` into a :class:`PageRecord`: it
classifies the response (:func:`~batchcrawl.fetch.outcome.classify`), types and validates its header
fields (:func:`~batchcrawl.fetch.fields.response_fields`: ``X-Robots-Tag``, validators, ``Link``
canonical, ``Retry-After``; a malformed value NULL, named in ``header_errors``), parses HTML
(:func:`~batchcrawl.fetch.parse.parse_page`), fingerprints the text
(:func:`~batchcrawl.fetch.simhash.text_simhash` of the parse's visible text), checks exact and near duplicates
(:class:`~batchcrawl.fetch.dedup.ShardDedup`) and archives the fetch (a WARC ``response``, or a
``revisit`` of the first capture of the same payload, plus the outlinks' ``metadata`` record).

It takes no lock and holds no run state: the fetch loop calls it one page at a time (its
processing lock) and hands the record's links to the link sink. Tests feed it canned
:class:`~batchcrawl.records.FetchResult` objects (``tests/test_pages.py``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from batchcrawl.config import Config
from batchcrawl.fetch.dedup import ShardDedup
from batchcrawl.fetch.fields import response_fields
from batchcrawl.fetch.outcome import classify, location_target
from batchcrawl.fetch.parse import parse_page
from batchcrawl.fetch.simhash import VERSION as SIMHASH_VERSION
from batchcrawl.fetch.simhash import text_simhash
from batchcrawl.fetch.warc import WarcLocation, WarcWriter, payload_digest, warc_date
from batchcrawl.records import FetchItem, FetchResult, Outcome

#: an outlink as found on a page: ``(absolute URL, tag, nofollow)``
FoundLink = tuple[str, str, bool]


class TextSink(Protocol):
    """Text extraction at fetch time (``extract.at_fetch``): what the page processor hands each
    archived capture to. The engine provides it (:class:`batchcrawl.extract.atfetch.
    TextsAtFetch`), one per run; fetch does not import extract (which imports fetch's decoder).
    ``counts``: captures by reason."""

    counts: Counter[str]

    def add(
        self,
        fetched: dict[str, Any],
        result: FetchResult,
        location: WarcLocation,
        warcinfo_date: str,
    ) -> float:
        """Extract the capture of ``fetched`` archived at ``location``; returns CPU seconds."""
        ...

    def close(self) -> list[Any]:
        """Finish the run's files; returns the ``text`` file entries written."""
        ...


def utc(epoch_s: float) -> datetime:
    """``epoch_s`` (seconds) as a naive UTC datetime (the tables' ``TIMESTAMP`` columns)."""
    return datetime.fromtimestamp(epoch_s, UTC).replace(tzinfo=None)


def base_row(item: FetchItem, round_no: int, shard: int, when_s: float) -> dict[str, Any]:
    """The columns of a ``fetched`` row every outcome has: the item's URL, host, domain and
    depth, ``fetch_time`` (``when_s``, epoch seconds), the round and the shard."""
    return {
        "url_key": item.url_key,
        "url": item.url,
        "url_host_name": item.host,
        "url_host_registered_domain": item.domain,
        "fetch_time": utc(when_s),
        "depth": item.depth,
        "round": round_no,
        "shard": shard,
    }


@dataclass
class PageRecord:
    """What processing one fetch produced.

    ``row`` is the ``fetched`` row; ``found`` the outlinks to canonicalize (a redirect's target
    tagged ``redirect``, a page's links); ``follow`` False when they go to the link graph only
    (a duplicate under ``dedup.skip_duplicate_links``); ``invalid`` the unusable redirect
    targets; ``counts`` the run counters to add (the outcome, ``revisits``, and always the CPU
    seconds ``cpu_parse_s``, ``cpu_simhash_s``, ``cpu_warc_s``).
    """

    row: dict[str, Any]
    outcome: Outcome
    found: list[FoundLink] = field(default_factory=list)
    follow: bool = True
    invalid: int = 0
    counts: dict[str, float] = field(default_factory=dict)


class PageProcessor:
    """Classify, parse, fingerprint, dedup and archive one fetch at a time.

    Parameters
    ----------
    cfg
        The crawl's configuration (``crawl.robots_agent``, ``dedup``, ``politeness.
        max_retry_after_s``); assign :attr:`cfg` to follow a reconfigured worker.
    shard
        Shard number written into the rows.
    dedup
        The shard's duplicate memory (kept across runs).
    wall
        Wall clock, epoch seconds (a row's time when the fetch has none).
    """

    def __init__(
        self, cfg: Config, shard: int, dedup: ShardDedup, wall: Callable[[], float]
    ) -> None:
        self.cfg = cfg
        self.shard = shard
        self.dedup = dedup
        self.wall = wall

    def process(
        self,
        item: FetchItem,
        result: FetchResult,
        round_no: int,
        warc: WarcWriter,
        *,
        self_hops: int = 0,
        texts: TextSink | None = None,
    ) -> PageRecord:
        """Process ``result``, the fetch of ``item`` in round ``round_no``, and archive it in
        ``warc``. ``self_hops``: redirects of the item to its own URL already followed (a
        redirect to itself now ends the chain as ``redirect_loop``). ``texts``: extract the
        archived capture's text at fetch time (``extract.at_fetch``; counter ``cpu_extract_s``).
        Raises what the WARC writer raises (``OSError`` on full or read-only storage)."""
        outcome = classify(result)
        # whole milliseconds: fetched.fetch_time (TIMESTAMP_MS) then equals the WARC-Date, so a
        # later 304's WARC-Refers-To-Date (from the frontier) names this capture exactly
        result.started = round(result.started * 1000) / 1000
        row = base_row(item, round_no, self.shard, result.started or self.wall())
        row.update(fetch_status=result.status, outcome=outcome.value, error=result.error,
                   fetch_ip=result.ip, download_s=result.download_s)  # fmt: skip
        rec = PageRecord(row, outcome)
        rec.counts.update(cpu_parse_s=0.0, cpu_simhash_s=0.0, cpu_warc_s=0.0)
        if result.status is None:
            rec.counts[outcome.value] = 1
            return rec
        digest = self._response(rec, item, result, self_hops)
        t0 = time.thread_time()
        loc = self._archive(rec, item, result, warc, digest)
        rec.counts["cpu_warc_s"] = time.thread_time() - t0
        if texts is not None and loc is not None:
            rec.counts["cpu_extract_s"] = texts.add(rec.row, result, loc, warc.dates[loc.filename])
        rec.counts[rec.outcome.value] = 1
        return rec

    def _response(
        self, rec: PageRecord, item: FetchItem, result: FetchResult, self_hops: int
    ) -> str | None:
        """Fill the row from a response's headers and body; returns its payload digest (None
        for a 304, which confirms the stored capture and keeps its digest)."""
        row, outcome = rec.row, rec.outcome
        ctype = result.header("Content-Type")
        agent = self.cfg.crawl.robots_agent
        fields = response_fields(  # every header value typed and validated (issue 31)
            result.response_headers, status=result.status, url=item.url, agent=agent,
            received=result.finished or self.wall(),
            max_retry_after_s=self.cfg.politeness.max_retry_after_s,
        )  # fmt: skip
        row["header_errors"] = ",".join(fields.rejected) or None
        for name in fields.rejected:
            key = f"header_rejected:{name}"
            rec.counts[key] = rec.counts.get(key, 0) + 1
        row["content_mime_type"] = fields.content_mime_type
        row["content_length"] = len(result.raw_body)
        row["content_truncated"] = result.truncated
        digest = None if outcome is Outcome.NOT_MODIFIED else payload_digest(result.raw_body)
        row["content_digest"] = digest
        row["retry_after_s"] = fields.retry_after_s
        directives = fields.robots
        if outcome in (Outcome.OK, Outcome.TRUNCATED, Outcome.NOT_MODIFIED):
            kept = outcome is Outcome.NOT_MODIFIED
            row["etag"] = fields.etag or (item.etag if kept else None)
            row["last_modified"] = fields.last_modified or (item.last_modified if kept else None)
            row["robots_noindex"] = directives.noindex
            row["robots_nofollow"] = directives.nofollow
        if outcome is Outcome.REDIRECT:
            target = location_target(result, item.url)
            rec.invalid += target is None
            row["fetch_redirect"] = target
            if target == item.url:  # the fetch loop followed max_self_redirects hops already
                rec.outcome = Outcome.REDIRECT_LOOP
                row.update(outcome=rec.outcome.value, error=f"redirect_loop:{self_hops + 1}")
            elif target is not None:
                rec.found.append((target, "redirect", False))
        elif outcome in (Outcome.OK, Outcome.TRUNCATED):
            t0 = time.thread_time()
            page = parse_page(
                result.body,
                item.url,
                ctype,
                robots_agent=agent,
                anchor_text=False,
                visible_text=True,
            )
            rec.counts["cpu_parse_s"] = time.thread_time() - t0
            row["content_charset"] = page.charset
            row["robots_noindex"] = page.robots_noindex or directives.noindex
            row["robots_nofollow"] = page.robots_nofollow or directives.nofollow
            row["canonical_url"] = page.canonical or fields.canonical_url
            rec.found.extend(
                (link.url, link.tag, link.nofollow or directives.nofollow) for link in page.links
            )
            if page.visible_text is not None:  # HTML that parsed
                row["simhash"] = text_simhash(page.visible_text)
                row["simhash_version"] = SIMHASH_VERSION
                rec.counts["cpu_simhash_s"] = time.thread_time() - t0 - rec.counts["cpu_parse_s"]
        return digest

    def _archive(
        self,
        rec: PageRecord,
        item: FetchItem,
        result: FetchResult,
        warc: WarcWriter,
        digest: str | None,
    ) -> WarcLocation | None:
        """Dedup the payload, write the fetch's WARC records and remember a first capture;
        returns where its response (or revisit) record is."""
        row, outcome, dedup = rec.row, rec.outcome, self.dedup
        revisit = None
        if outcome is Outcome.OK and row["content_length"] and digest is not None:
            duplicate_of, revisit = dedup.first_capture(digest, item.url_key)
            if duplicate_of is not None:
                row["duplicate_of"] = duplicate_of
                rec.follow = not self.cfg.dedup.skip_duplicate_links
            if revisit is None and digest == item.content_digest and item.content_fetch_time:
                when = item.content_fetch_time.replace(tzinfo=UTC).timestamp()
                revisit = (item.url, warc_date(when))  # unchanged since the last capture
        not_modified = None
        if outcome is Outcome.NOT_MODIFIED:
            refers = item.content_fetch_time
            not_modified = (item.url, warc_date(refers.replace(tzinfo=UTC).timestamp())
                            if refers is not None else None)  # fmt: skip
        loc = warc.write_fetch(
            result,
            outlinks=[u for u, _, _ in rec.found] if rec.found else None,
            revisit_of=revisit,
            digest=digest,
            not_modified_of=not_modified,
        )
        if loc is not None:
            row["warc_filename"] = loc.filename
            row["warc_record_offset"] = loc.offset
            row["warc_record_length"] = loc.length
        if row.get("simhash") is not None or outcome is Outcome.OK:
            dedup.near_duplicate(row, item)
        if revisit is None and outcome is Outcome.OK and row["content_length"] and digest:
            limit = self.cfg.dedup.max_shard_digests
            dedup.remember(digest, result.url, result.started, item.url_key, limit)
        else:
            rec.counts["revisits"] = int(revisit is not None)
        return loc
