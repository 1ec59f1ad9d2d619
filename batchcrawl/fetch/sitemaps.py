"""Sitemaps (sitemaps.org protocol 0.9): URL sets, sitemap indexes, plain-text lists, RSS and Atom.

:func:`parse_sitemap` turns the bytes of one fetched sitemap into its page URLs (with ``lastmod``,
``changefreq``, ``priority``) and the child sitemaps of an index. Real sitemaps are messy, so it is
lenient where well-kept parsers are: a BOM or whitespace before the XML declaration, namespace
prefixes or no namespace at all, a sitemap served as ``text/html`` or ``application/octet-stream``,
unclosed tags (lxml's recover mode keeps what parsed). It is strict where the protocol is:

* at most ``max_urls`` entries (50,000) and ``max_bytes`` uncompressed bytes (50 MiB) per file; the
  rest is dropped and ``truncated`` says so. A gzip body is inflated with the same cap, so a small
  compressed file cannot grow without bound.
* only a ``<loc>`` that is a direct child of ``<url>`` (or ``<sitemap>``) is a page: the
  ``<image:loc>``, ``<video:content_loc>``, ``<news:...>`` and ``xhtml:link`` extension elements are
  never taken for pages.
* external entities and DTDs are not loaded (no XXE, no entity expansion bombs).

Fetching, politeness and scope are the caller's (the fetch worker's workbench): this module only reads
bytes. Sources: https://www.sitemaps.org/protocol.html; W3C Datetime for ``lastmod``.
"""

from __future__ import annotations

import datetime as dt
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urljoin

from lxml import etree

#: Limits of one sitemap file (sitemaps.org: 50,000 URLs and 50 MiB uncompressed).
MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024

CHANGEFREQS = frozenset(("always", "hourly", "daily", "weekly", "monthly", "yearly", "never"))

Kind = Literal["urlset", "index", "text", "rss", "atom", "unknown"]


@dataclass(frozen=True)
class SitemapEntry:
    """One ``<url>`` (or ``<sitemap>``) of a sitemap.

    ``loc`` is absolute (resolved against the sitemap's URL when written relative) but not
    canonicalized; ``lastmod`` is epoch seconds (UTC) or None; ``priority`` is in [0, 1] or None.
    """

    loc: str
    lastmod: float | None = None
    changefreq: str | None = None
    priority: float | None = None


@dataclass
class Sitemap:
    """What one sitemap file holds: page ``urls``, child ``sitemaps`` (of an index), whether limits
    cut it (``truncated``), and ``error`` when nothing could be read (the reason, for the counters)."""

    kind: Kind
    urls: list[SitemapEntry] = field(default_factory=list)
    sitemaps: list[SitemapEntry] = field(default_factory=list)
    truncated: bool = False
    error: str | None = None


def parse_lastmod(text: str | None) -> float | None:
    """A W3C Datetime (``2024``, ``2024-05``, ``2024-05-17``, ``2024-05-17T10:00+02:00``,
    ``...T10:00:00.5Z``) as epoch seconds; times without a zone are taken as UTC. None when absent
    or malformed (a bad ``lastmod`` never drops its URL)."""
    if not text:
        return None
    text = text.strip()
    try:
        if len(text) == 4 and text.isdigit():
            when = dt.datetime(int(text), 1, 1)
        elif len(text) == 7 and text[4] == "-":
            when = dt.datetime(int(text[:4]), int(text[5:]), 1)
        else:
            when = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def _inflate(body: bytes, max_bytes: int) -> tuple[bytes, bool]:
    """Inflate a gzip body (every member) to at most ``max_bytes``; ``(data, cut)``."""
    out = bytearray()
    data = body
    cut = False
    while data:
        d = zlib.decompressobj(wbits=47)
        out += d.decompress(data, max_bytes - len(out) + 1)
        if len(out) > max_bytes or d.unconsumed_tail:
            cut = True
            break
        if not d.eof:
            break
        data = d.unused_data
    return bytes(out[:max_bytes]), cut


def _local(tag: object) -> str:
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].split(":")[-1].lower()


def _text(el: Any) -> str | None:
    text = "".join(el.itertext()).strip() if el is not None else ""
    return text or None


def _children(el: Any, name: str) -> list[Any]:
    return [c for c in el if _local(c.tag) == name]


def _first(el: Any, name: str) -> Any:
    found = _children(el, name)
    return found[0] if found else None


def _priority(text: str | None) -> float | None:
    try:
        value = float(text) if text else None
    except ValueError:
        return None
    return value if value is not None and 0.0 <= value <= 1.0 else None


def _entry(el: Any, base: str, loc_name: str = "loc") -> SitemapEntry | None:
    loc = _text(_first(el, loc_name))
    if not loc:
        return None
    freq = (_text(_first(el, "changefreq")) or "").lower() or None
    return SitemapEntry(
        loc=urljoin(base, loc),
        lastmod=parse_lastmod(_text(_first(el, "lastmod"))),
        changefreq=freq if freq in CHANGEFREQS else None,
        priority=_priority(_text(_first(el, "priority"))),
    )


def _parse_xml(data: bytes, url: str, max_urls: int) -> Sitemap:
    parser = etree.XMLParser(
        recover=True, resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
    )
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        return Sitemap("unknown", error=f"xml: {exc}")
    if root is None:
        return Sitemap("unknown", error="xml: nothing parsed")
    kind = _local(root.tag)
    if kind == "urlset":
        out = Sitemap("urlset")
        items, target, loc_name = _children(root, "url"), out.urls, "loc"
    elif kind == "sitemapindex":
        out = Sitemap("index")
        items, target, loc_name = _children(root, "sitemap"), out.sitemaps, "loc"
    elif kind == "rss":
        out = Sitemap("rss")
        channel = _first(root, "channel")
        items = _children(channel, "item") if channel is not None else []
        target, loc_name = out.urls, "link"
    elif kind == "feed":
        out = Sitemap("atom")
        for entry in _children(root, "entry"):
            for link in _children(entry, "link"):
                href = link.get("href")
                if href and link.get("rel", "alternate") == "alternate":
                    if len(out.urls) >= max_urls:
                        out.truncated = True
                        return out
                    updated = _text(_first(entry, "updated"))
                    out.urls.append(
                        SitemapEntry(urljoin(url, href.strip()), parse_lastmod(updated))
                    )
        return out
    else:
        return Sitemap("unknown", error=f"not a sitemap (root element {kind or '?'})")
    for item in items:
        entry = _entry(item, url, loc_name)
        if entry is None:
            continue
        if len(target) >= max_urls:
            out.truncated = True
            break
        target.append(entry)
    return out


def _parse_text(data: bytes, url: str, max_urls: int) -> Sitemap:
    out = Sitemap("text")
    for line in data.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line.lower().startswith(("http://", "https://")):
            continue
        if len(out.urls) >= max_urls:
            out.truncated = True
            break
        out.urls.append(SitemapEntry(line))
    return out


def parse_sitemap(
    body: bytes, url: str, *, max_urls: int = MAX_URLS, max_bytes: int = MAX_BYTES
) -> Sitemap:
    """Read one sitemap file.

    Parameters
    ----------
    body
        The response payload as received (gzip is recognised by its magic bytes, whatever the
        ``Content-Type``).
    url
        The sitemap's URL (relative ``loc`` values resolve against it).
    max_urls, max_bytes
        Limits of one file (entries; uncompressed bytes).

    Returns
    -------
    Sitemap
        Never raises for bad input: an unreadable file has ``kind="unknown"`` and ``error`` set.
    """
    cut = False
    if body[:2] == b"\x1f\x8b":
        try:
            body, cut = _inflate(body, max_bytes)
        except zlib.error as exc:
            return Sitemap("unknown", error=f"gzip: {exc}")
    elif len(body) > max_bytes:
        body, cut = body[:max_bytes], True
    data = body.lstrip(b"\xef\xbb\xbf \t\r\n")
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:].lstrip()
    if data.startswith(b"<"):
        out = _parse_xml(data, url, max_urls)
    elif data:
        out = _parse_text(data, url, max_urls)
    else:
        out = Sitemap("unknown", error="empty")
    out.truncated = out.truncated or cut
    return out
