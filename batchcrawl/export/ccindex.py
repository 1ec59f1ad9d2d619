"""The ``index`` table: a Common Crawl-compatible columnar index of the WARC captures of a round.

Common Crawl publishes, for every crawl, a Parquet table with one row per WARC capture (the
"cc-index-table", ``commoncrawl/cc-index-table``, schema ``cc-index-schema-flat.json``) that users
query with Athena, Spark or DuckDB to find pages and cut their records out of the WARC files by
``(warc_filename, warc_record_offset, warc_record_length)``. This module builds the same table for a
batchcrawl round, with the same column names, types and meanings as far as we have the data, so
queries written for Common Crawl's index run on ours. The table's schema is defined in
``storage/export.sql`` and read through :func:`batchcrawl.store.schemas.schema` (``"index"``).

Rows come from two sources:

* the round's ``fetched`` rows that have a WARC record (a response or revisit record), joined with
  what the row already carries (status, digest, MIME type, charset, truncation, redirect target);
* WARC captures with no ``fetched`` row: robots.txt fetches and sitemaps (the fetch worker
  archives them but does not list them in ``fetched``), found by scanning the WARC files the
  round's rows point into (:func:`batchcrawl.cdxj.scan`); robots.txt captures form the
  ``robotstxt`` subset, sitemaps go by their status as pages do. A stream's WARC
  file holds the records of many rounds, so the export gives each round only the captures in its
  byte range of the file (``warc_spans``, :mod:`batchcrawl.export.lake`) and ``known`` holds the
  rows of every round: each robots.txt capture is in one round's index.

Revisit records (a duplicate payload, or a 304 to a conditional refetch) are rows like the others,
with ``content_mime_type`` ``warc/revisit`` (Common Crawl's convention, and the CDXJ ``mime``): the
byte range holds the HTTP headers only, and the body is in the capture the revisit refers to.

Columns left out, because batchcrawl has no data for them: ``content_mime_detected`` (no content
sniffing) and ``warc_record_id`` (added by Common Crawl in 2026; not carried in ``fetched``).
``content_languages`` comes from the crawl's ``text`` table (``batchcrawl extract``; NULL for a
capture not extracted). ``content_signal``, the one column Common Crawl's table does not have
(last, so queries written for Common Crawl's columns run unchanged), is the host's robots.txt
``Content-Signal`` (:mod:`batchcrawl.export.signals`). ``warc_segment`` is the round number (a round plays the
role of a Common Crawl segment); ``subset`` is ``warc`` for 2xx captures, ``crawldiagnostics`` for
every other status, and ``robotstxt`` for robots.txt captures. ``crawl`` is the crawl name; the
export stores it as the Hive partition ``crawl=NAME`` rather than in the files, as Common Crawl does.
"""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc
from publicsuffixlist import PublicSuffixList

from batchcrawl.cdxj import Capture
from batchcrawl.errors import BatchcrawlError
from batchcrawl.store import schemas
from batchcrawl.urls import surt

SUBSETS = ("warc", "crawldiagnostics", "robotstxt")
#: ``content_mime_type`` of a revisit record's row (Common Crawl's, and CDXJ's ``mime``).
REVISIT_MIME = "warc/revisit"
_INT32_MAX = 2**31 - 1
_HOST_PARTS = ("url_host_tld", "url_host_2nd_last_part", "url_host_3rd_last_part",
               "url_host_4th_last_part", "url_host_5th_last_part")  # fmt: skip


class CCIndexError(BatchcrawlError):
    """The index cannot be built from a round's data (the message names the WARC file or URL)."""


@functools.cache
def _psl_icann() -> PublicSuffixList:
    return PublicSuffixList(only_icann=True)


@functools.cache
def _psl_all() -> PublicSuffixList:
    return PublicSuffixList()


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=1 << 16)
def host_columns(host: str) -> dict[str, str | None]:
    """The ``url_host_*`` columns of one host, as Common Crawl defines them.

    Parameters
    ----------
    host : str
        Lower-case host name (punycode) without port, as in ``fetched.url_host_name``.

    Returns
    -------
    dict
        ``url_host_tld`` .. ``url_host_5th_last_part`` (labels from the right), the registry
        suffix and registered domain by the ICANN section of the Public Suffix List, the private
        suffix and private domain by the whole list (``blogspot.com`` is a private suffix), and the
        host in reverse domain order. An unknown top-level label (``h1.test``) is its own suffix
        (the PSL default rule ``*``). IP addresses get None everywhere (Common Crawl's
        ``url_host_name_reversed`` excludes them; labels of an address mean nothing).
    """
    out: dict[str, str | None] = dict.fromkeys(_HOST_PARTS)
    out.update(
        url_host_registry_suffix=None,
        url_host_registered_domain=None,
        url_host_private_suffix=None,
        url_host_private_domain=None,
        url_host_name_reversed=None,
    )
    if not host or _is_ip(host):
        return out
    labels = host.rstrip(".").split(".")
    for name, label in zip(_HOST_PARTS, reversed(labels), strict=False):
        out[name] = label
    out["url_host_registry_suffix"] = _psl_icann().publicsuffix(host)
    out["url_host_registered_domain"] = _psl_icann().privatesuffix(host)
    out["url_host_private_suffix"] = _psl_all().publicsuffix(host)
    out["url_host_private_domain"] = _psl_all().privatesuffix(host)
    out["url_host_name_reversed"] = ".".join(reversed(labels))
    return out


def url_columns(url: str) -> dict[str, Any]:
    """``url_surtkey``, ``url``, the ``url_host_*`` columns and the URL parts of one URL.

    ``url_port`` is None unless the URL names a port; ``url_path`` is at least ``/``;
    ``url_query`` is None when the URL has no query. The SURT key comes from
    :func:`batchcrawl.urls.surt` (the ``surt`` package, as pywb and Common Crawl's CDX use).

    Raises
    ------
    CCIndexError
        ``url`` has no host (not an absolute http(s) URL).
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")  # www.example.com. is www.example.com
    if not host:
        raise CCIndexError(f"{url!r}: no host; the index takes absolute http(s) URLs only")
    try:
        port = parts.port
    except ValueError as exc:
        raise CCIndexError(f"{url!r}: bad port ({exc})") from None
    out: dict[str, Any] = {"url_surtkey": surt(url), "url": url, "url_host_name": host}
    out.update(host_columns(host))
    out["url_protocol"] = parts.scheme
    out["url_port"] = port
    out["url_path"] = parts.path or "/"
    out["url_query"] = parts.query or None
    return out


def subset_of(status: int, *, robots: bool = False) -> str:
    """Common Crawl's ``subset``: ``robotstxt`` for robots.txt captures, ``warc`` for a 2xx status,
    ``crawldiagnostics`` for redirects, 404s and every other status."""
    if robots:
        return "robotstxt"
    return "warc" if 200 <= status < 300 else "crawldiagnostics"


def _digest(value: str | None) -> str | None:
    """``sha1:BASE32`` -> ``BASE32`` (Common Crawl stores the digest without the algorithm)."""
    if value is None:
        return None
    return value.split(":", 1)[1] if ":" in value else value


def _warc_time(warc_date: str) -> dt.datetime:
    """``2023-11-14T22:13:20.250731Z`` -> that time, cut to milliseconds (the ``fetch_time``
    precision of every row)."""
    when = dt.datetime.fromisoformat(warc_date.replace("Z", "+00:00")).replace(tzinfo=None)
    return when.replace(microsecond=when.microsecond // 1000 * 1000)


def robots_rows(
    captures: Iterable[Capture], warc_filename: str, known: Collection[int]
) -> list[dict[str, Any]]:
    """Index rows (without ``warc_segment``/``crawl``) for the captures of one WARC file that have
    no ``fetched`` row: robots.txt fetches (subset ``robotstxt``) and sitemaps (``warc`` or
    ``crawldiagnostics`` by status, as a page; a fresh-user trial found them in ``robotstxt``).

    Parameters
    ----------
    captures
        The file's captures (:func:`batchcrawl.cdxj.scan`).
    warc_filename
        The ``warc_filename`` to write (the exported path).
    known
        Offsets (bytes) of the file's records that have a ``fetched`` row.

    Notes
    -----
    ``fetch_time`` is the record's WARC-Date cut to milliseconds, as for every other row. Charset,
    truncation and redirect target are not recorded for robots.txt: None.
    """
    rows = []
    for cap in captures:
        status = cap.fields.get("status")
        if cap.offset in known or not status or not status.isdigit():
            continue
        row = url_columns(cap.fields["url"])
        row.update(
            fetch_time=_warc_time(cap.warc_date),
            fetch_status=int(status),
            fetch_redirect=None,
            content_digest=_digest(cap.fields.get("digest")),
            content_mime_type=cap.fields.get("mime"),
            content_charset=None,
            content_truncated=None,
            warc_filename=warc_filename,
            warc_record_offset=cap.offset,
            warc_record_length=cap.length,
            # a sitemap fetched for its links has no fetched row either: a capture like a page's
            subset=subset_of(int(status), robots=row["url_path"] == "/robots.txt"),
        )
        rows.append(row)
    return rows


def index_table(
    fetched: pa.Table,
    *,
    crawl: str,
    segment: str,
    warc_name: Callable[[str], str] = lambda name: name,
    extra_rows: Iterable[Mapping[str, Any]] = (),
    revisits: Collection[tuple[str, int]] = (),
    languages: Mapping[tuple[str, int], str] | None = None,
    content_signals: Mapping[str, str] | None = None,
) -> pa.Table:
    """The index rows of a round's ``fetched`` rows (plus ``extra_rows``), sorted by SURT key.

    Parameters
    ----------
    fetched
        Rows of the ``fetched`` table (any subset of one round); rows without a WARC record
        (``warc_filename`` NULL: network errors, robots-denied URLs) are not captures and are left
        out, as Common Crawl's index lists only what its WARC files hold.
    crawl
        Crawl name (``crawl`` column).
    segment
        ``warc_segment`` value (the round number as a string).
    warc_name
        Maps a crawl-relative WARC path to the ``warc_filename`` written (the exported path).
    extra_rows
        Further rows, e.g. :func:`robots_rows`, already carrying exported WARC names.
    revisits
        ``(warc_filename, warc_record_offset)`` (crawl-relative names) of the rows whose record
        is a ``revisit``: their ``content_mime_type`` is ``warc/revisit`` and charset and
        truncation are None, as in Common Crawl's index, so a reader of that byte range knows
        it holds HTTP headers and no body.
    languages
        ``content_languages`` of captures by ``(warc_filename, warc_record_offset)`` of
        ``fetched`` (the crawl's ``text`` table); a capture not in it gets NULL.
    content_signals
        ``content_signal`` by host (``url_host_name``; :func:`batchcrawl.export.signals.host_signals`);
        a host not in it gets NULL.

    Returns
    -------
    pyarrow.Table
        Conforming to the ``index`` schema (``storage/export.sql``), sorted by ``url_surtkey``, ``fetch_time``.

    Raises
    ------
    CCIndexError
        A WARC offset or length does not fit Common Crawl's 32-bit integer columns (a WARC file of
        2 GiB or more: lower ``fetch.warc_max_bytes``), or a URL has no host.
    """
    captures = fetched.filter(pc.is_valid(fetched.column("warc_filename")))
    rows = []
    revisits = set(revisits)
    for r in captures.to_pylist():
        row = url_columns(r["url"])
        revisit = (r["warc_filename"], r["warc_record_offset"]) in revisits
        row.update(
            fetch_time=r["fetch_time"],
            fetch_status=r["fetch_status"],
            fetch_redirect=r["fetch_redirect"],
            content_digest=_digest(r["content_digest"]),
            content_mime_type=REVISIT_MIME if revisit else r["content_mime_type"],
            content_charset=None if revisit else r["content_charset"],
            content_languages=(languages or {}).get((r["warc_filename"], r["warc_record_offset"])),
            content_truncated=None if revisit else r["content_truncated"],
            warc_filename=warc_name(r["warc_filename"]),
            warc_record_offset=r["warc_record_offset"],
            warc_record_length=r["warc_record_length"],
            subset=subset_of(r["fetch_status"]),
        )
        rows.append(row)
    rows.extend(dict(r) for r in extra_rows)
    for row in rows:
        row["warc_segment"] = segment
        row["crawl"] = crawl
        row["content_signal"] = (content_signals or {}).get(row["url_host_name"])
        end = row["warc_record_offset"] + row["warc_record_length"]
        if end > _INT32_MAX:
            raise CCIndexError(
                f"{row['warc_filename']}: record at offset {row['warc_record_offset']} is past "
                f"2 GiB, beyond the index's 32-bit offsets; set fetch.warc_max_bytes below 2 GiB"
            )
    rows.sort(key=lambda r: (r["url_surtkey"], r["fetch_time"], r["warc_record_offset"]))
    return pa.Table.from_pylist(rows, schema=schemas.schema("index"))
