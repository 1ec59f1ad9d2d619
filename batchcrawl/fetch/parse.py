"""Parsing fetched pages: character encoding, outlinks, ``<base href>``, robots meta, title.

The fetch worker calls :func:`parse_page` once per fetched body. It is on the hot path (the worker's
budget is about 1 ms of CPU per 20 KB page with 60 links for fetch + parse + WARC), so the document is
parsed once by libxml2 (``lxml.etree.HTMLParser``) and walked once with ``iter(<tag list>)``; no XPath
per link. Relative references are resolved with ada-url (a WHATWG URL parser), which also rejects
unparsable hrefs.

Policy (what counts as an outlink)
----------------------------------
* ``<a href>``, ``<area href>`` -> tags ``a``, ``area``; anchor text is kept for ``a`` and ``area``
  (whitespace-collapsed; ``<img alt>`` is not used as anchor text).
* ``<link href>`` only when its ``rel`` names a crawlable page: ``alternate``, ``canonical``,
  ``next``, ``prev``/``previous``, ``first``, ``last``, ``up``, ``index``, ``home``, ``start``,
  ``contents``; dropped (counted as ``link_rel``) when ``rel`` also says ``stylesheet``, ``icon``,
  ``preload``, ``prefetch``, ``modulepreload``, ``manifest`` ..., or when ``type`` is given and is not
  HTML (an RSS ``alternate`` is a feed, not a page).
* ``<frame src>``, ``<iframe src>`` -> ``frame``, ``iframe``.
* ``<meta http-equiv="refresh" content="N; url=...">`` -> ``meta_refresh`` (WHATWG "shared
  declarative refresh steps"; ``content="0; http://x/"`` without ``url=`` is accepted too).
* Not links: ``img``/``script``/``source`` ``src``, form actions, ``@style`` URLs (Nutch emits
  some of these; we crawl pages, not their resources).
* The first ``<base href>`` sets the base URL (a relative base resolves against the page URL;
  an invalid or non-http(s) base is ignored) -- HTML Standard, "document base URL".
* ``rel=nofollow`` (any token of a multi-valued ``rel``) marks that link ``nofollow``; ``<meta
  name="robots">`` (or ``name=<our robots agent>``) with ``nofollow``/``noindex``/``none`` sets
  :attr:`ParsedPage.robots_nofollow`/``robots_noindex``, and robots ``nofollow`` marks every link
  ``nofollow``. Nofollow links are *kept* and flagged (Scrapy's policy); the ``links`` table stores
  the flag and the frontier does not crawl them.
* Dropped and counted in :attr:`ParsedPage.dropped`: empty hrefs (``empty``), schemes other than
  http/https -- ``javascript:``, ``mailto:``, ``data:``, ``tel:``, ``ftp:`` ... (``scheme``),
  references the WHATWG parser rejects, e.g. ``http://example.org:non-port`` (``invalid``),
  ``<link>`` that is not a page (``link_rel``).
* Links are de-duplicated by resolved URL, keeping the first occurrence (a later followable duplicate
  clears ``nofollow``). URLs are absolute, *not* canonicalized: the fragment is kept and the caller
  applies ``batchcrawl.urls.canonicalize`` (one job per module).

How this policy compares with Scrapy's and Nutch's extractors (and the shared test suites) is in
``docs/benchmarks.md``, "Comparisons with other crawlers".

Visible text
------------
With ``visible_text=True`` the same walk also empties ``<script>``, ``<style>``, ``<noscript>`` and
``<template>`` (:data:`INVISIBLE_TAGS`; comments and processing instructions are not kept by the
parser), and the tree's text is serialized by libxml2 (``tostring(method="text")``) as UTF-8:
:attr:`ParsedPage.visible_text`, what the SimHash reads. Text nodes are concatenated as the
document has them, character references decoded: blocks written without whitespace between them
join their words, as lxml's ``text_content()`` does. With the SimHash, parse and fingerprint of a
page of the Python documentation (96 KB) went from 4.9 to 4.1 ms against regular expressions over
the markup, and of aptitude's manuals (10 KB) from 0.61 to 0.54 ms (docs/benchmarks.md).

Encoding: :func:`~batchcrawl.fetch.encoding.detect_encoding` (HTML Standard §13.2.3); decoding
uses ``errors="replace"``. Malformed HTML never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import ada_url
from lxml import etree

from batchcrawl.fetch.encoding import (
    BOMS,
    DEFAULT_ENCODING,
    PRESCAN_BYTES,
    detect_encoding,
    encoding_for_label,
    prescan,
)

#: Content types (without parameters) whose bodies are parsed for links.
HTML_CONTENT_TYPES = frozenset(
    {"text/html", "application/xhtml+xml", "application/vnd.wap.xhtml+xml"}
)
#: ``<link rel>`` tokens that name a crawlable page.
LINK_REL_KEEP = frozenset(
    "alternate canonical next prev previous first last up index home start contents".split()
)
#: ``<link rel>`` tokens that name a resource, never a page (they win over LINK_REL_KEEP).
LINK_REL_DROP = frozenset(
    "stylesheet icon shortcut apple-touch-icon apple-touch-icon-precomposed mask-icon preload "
    "prefetch modulepreload preconnect dns-prefetch prerender manifest pingback search edituri "
    "wlwmanifest".split()
)

_LINK_TAGS = ("a", "area", "link", "frame", "iframe", "meta", "base", "title")
#: Elements whose content a reader does not see: left out of :attr:`ParsedPage.visible_text`.
INVISIBLE_TAGS = ("script", "style", "noscript", "template")
_WALKED_TAGS = _LINK_TAGS + INVISIBLE_TAGS
_HTML_LINK_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_SPLIT_TOKENS = re.compile(r"[\s,]+")
_REFRESH = re.compile(r"\s*[0-9.]+\s*(?:[;,]\s*)?(?:url\s*=\s*)?(.*)", re.IGNORECASE | re.DOTALL)
_PARSER = etree.HTMLParser(
    encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True, recover=True
)


@dataclass(slots=True)
class Link:
    """One outlink found on a page.

    Attributes
    ----------
    url
        Absolute URL (WHATWG-resolved against the base URL), fragment kept, not canonicalized.
    tag
        Where it was found: ``a``, ``area``, ``link``, ``frame``, ``iframe`` or ``meta_refresh``.
    nofollow
        ``rel=nofollow`` on the element, or robots meta ``nofollow`` on the page.
    text
        Whitespace-collapsed anchor text for ``a``/``area`` (may be empty); None for other tags,
        and for every link when :func:`parse_page` is called with ``anchor_text=False``.
    """

    url: str
    tag: str
    nofollow: bool = False
    text: str | None = None


@dataclass(slots=True)
class ParsedPage:
    """What :func:`parse_page` found in one body.

    Attributes
    ----------
    links
        Outlinks in document order, de-duplicated by URL (see the module docstring for the policy).
    charset
        Python codec name used to decode the body (``"utf-8"``, ``"cp1252"``...); None if not parsed.
    charset_source
        ``bom``, ``http``, ``meta`` or ``default``; None if not parsed.
    robots_noindex, robots_nofollow
        From ``<meta name="robots">`` or ``<meta name="<robots agent>">``.
    canonical
        Absolute target of the first ``<link rel="canonical" href>`` (RFC 6596), or None.
    base_url
        URL relative links were resolved against (the page URL unless ``<base href>`` overrides).
    title
        Whitespace-collapsed text of the first ``<title>``, or None.
    is_html
        Whether the body was parsed at all (HTML content type, or markup sniffed when unknown).
    visible_text
        What a reader sees of the page, UTF-8 (module docstring, "Visible text"), when
        :func:`parse_page` was asked for it and the body parsed; else None.
    dropped
        Reason -> count of hrefs not turned into links (``empty``, ``scheme``, ``invalid``,
        ``link_rel``).
    """

    links: list[Link] = field(default_factory=list)
    charset: str | None = None
    charset_source: str | None = None
    robots_noindex: bool = False
    robots_nofollow: bool = False
    canonical: str | None = None
    base_url: str = ""
    title: str | None = None
    is_html: bool = False
    visible_text: bytes | None = None
    dropped: dict[str, int] = field(default_factory=dict)


def parse_page(
    body: bytes,
    url: str,
    content_type: str | None,
    *,
    robots_agent: str = "batchcrawl",
    anchor_text: bool = True,
    visible_text: bool = False,
) -> ParsedPage:
    """Extract outlinks and page metadata from a fetched body.

    Parameters
    ----------
    body
        Decoded entity body (content-encoding removed), bytes.
    url
        Canonical URL of the page (after redirects: the URL the body came from).
    content_type
        The HTTP ``Content-Type`` header value (with parameters), or None when absent; then the body
        is parsed only if it starts with ``<`` (after whitespace and a BOM).
    robots_agent
        Our robots product token; ``<meta name="<token>">`` counts like ``<meta name="robots">``.
    anchor_text
        Collect each link's anchor text (:attr:`Link.text`); False leaves it None for every link
        and saves a walk over each anchor's text (the fetch worker does not store it).
    visible_text
        Also give :attr:`ParsedPage.visible_text` (the same walk; one serialization by libxml2).

    Returns
    -------
    ParsedPage
        Never raises for malformed HTML, binary junk or undecodable bytes; non-HTML content types
        give an empty page (``is_html`` False).
    """
    page = ParsedPage(base_url=url)
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    if mime:
        if mime not in HTML_CONTENT_TYPES:
            return page
    elif not _looks_like_markup(body):
        return page
    page.is_html = True
    charset, source, bom_len = detect_encoding(body, content_type)
    page.charset, page.charset_source = charset, source
    root = _parse(_to_utf8(body, charset, bom_len))
    if root is None:
        return page
    invisible = _extract(root, url, page, robots_agent.lower(), anchor_text)
    if visible_text:
        page.visible_text = _visible_text(root, invisible)
    return page


def visible_text(markup: str) -> str:
    """What a reader sees of ``markup`` (HTML as ``str``): :attr:`ParsedPage.visible_text` of it,
    decoded; ``""`` when nothing parses."""
    root = _parse(markup.encode("utf-8", "surrogatepass"))
    if root is None:
        return ""
    invisible = list(root.iter(INVISIBLE_TAGS))
    return _visible_text(root, invisible).decode("utf-8", "surrogatepass")


def _parse(data: bytes) -> etree._Element | None:
    """``data`` (UTF-8) parsed by libxml2's HTML parser; None when nothing parses."""
    try:
        root: etree._Element | None = etree.fromstring(data, _PARSER)
    except (etree.ParserError, etree.XMLSyntaxError, ValueError):
        return None
    return root


def _visible_text(root: etree._Element, invisible: list[etree._Element]) -> bytes:
    """The text of ``root`` as UTF-8 once the ``invisible`` elements are emptied (their tails,
    which follow them in the document, are kept)."""
    for el in invisible:
        el.clear(keep_tail=True)
    text: bytes = etree.tostring(root, method="text", encoding="utf-8")
    return text


def _looks_like_markup(body: bytes) -> bool:
    head = body[:512]
    for bom, _ in BOMS:
        if head.startswith(bom):
            return True
    return head.lstrip().startswith(b"<")


def _to_utf8(body: bytes, charset: str, bom_len: int) -> bytes:
    """The body as valid UTF-8 for libxml2 (which is told the encoding, so it never guesses):
    invalid sequences replaced by U+FFFD."""
    if charset == "utf-8" and bom_len == 0:
        if body.isascii():  # valid UTF-8 without building a string to throw away
            return body
        try:
            body.decode("utf-8")
            return body
        except UnicodeDecodeError:
            pass
    return body[bom_len:].decode(charset, errors="replace").encode("utf-8", errors="replace")


def _extract(
    root: etree._Element, page_url: str, page: ParsedPage, agent: str, anchor_text: bool = True
) -> list[etree._Element]:
    """One walk over the link-bearing elements, then resolution against the base URL; returns
    the invisible elements met on the way (:data:`INVISIBLE_TAGS`), in document order."""
    raw: list[tuple[str, str, bool, str | None]] = []  # (tag, href, nofollow, text)
    base_href: str | None = None
    canonical_href: str | None = None
    dropped = page.dropped
    invisible: list[etree._Element] = []
    for el in root.iter(_WALKED_TAGS):
        tag = el.tag
        if tag in INVISIBLE_TAGS:
            invisible.append(el)
        elif tag == "a" or tag == "area":
            href = el.get("href")
            if href is None:
                continue
            rel = el.get("rel")
            nofollow = rel is not None and "nofollow" in rel.lower().split()
            if not anchor_text:
                text = None
            elif len(el):
                text = " ".join(_anchor_text(el, []).split())
            else:
                text = " ".join(el.text.split()) if el.text else ""
            raw.append((tag, href, nofollow, text))
        elif tag == "link":
            href = el.get("href")
            if href is None:
                continue
            rels = set((el.get("rel") or "").lower().split())
            ltype = (el.get("type") or "").split(";", 1)[0].strip().lower()
            if (
                rels.isdisjoint(LINK_REL_KEEP)
                or not rels.isdisjoint(LINK_REL_DROP)
                or (ltype and ltype not in _HTML_LINK_TYPES)
            ):
                dropped["link_rel"] = dropped.get("link_rel", 0) + 1
                continue
            raw.append(("link", href, "nofollow" in rels, None))
            if "canonical" in rels and canonical_href is None:
                canonical_href = href
        elif tag == "frame" or tag == "iframe":
            src = el.get("src")
            if src is not None:
                raw.append((tag, src, False, None))
        elif tag == "meta":
            _meta(el, raw, page, agent)
        elif tag == "base":
            if base_href is None and el.get("href") is not None:
                base_href = el.get("href")
        elif tag == "title":
            if page.title is None:
                page.title = " ".join("".join(el.itertext()).split())
    base = page_url
    if base_href is not None:
        try:
            candidate = ada_url.join_url(page_url, base_href)
        except ValueError:
            candidate = None
        if candidate and candidate.startswith(("http:", "https:")):
            base = candidate
    page.base_url = base
    if canonical_href is not None and canonical_href.strip():
        try:
            canonical = ada_url.join_url(base, canonical_href.strip())
        except ValueError:
            canonical = None
        if canonical and canonical.startswith(("http:", "https:")):
            page.canonical = canonical
    seen: dict[str, Link] = {}
    links = page.links
    all_nofollow = page.robots_nofollow
    origin: str | None = ""  # "" = not computed yet; None = base unusable for the memo
    for tag, href, nofollow, text in raw:
        if not href.strip():
            dropped["empty"] = dropped.get("empty", 0) + 1
            continue
        # The memo holds path-absolute and absolute http(s) references, whose resolution depends
        # only on the base's origin (or not on the base at all): see _JoinMemo.
        key = None
        path_absolute = href[:1] == "/" and href[1:2] not in _NOT_PATH_ABSOLUTE
        if path_absolute or href.startswith(("http://", "https://")):
            if origin == "":
                try:
                    origin = ada_url.join_url(base, "/")
                except ValueError:  # an invalid base: join_url raises for every reference
                    origin = None
            if origin is not None:
                key = "\x00" + origin + href if path_absolute else href
        try:
            absolute = _JOINS.join(key, base, href) if key else ada_url.join_url(base, href)
        except ValueError:
            dropped["invalid"] = dropped.get("invalid", 0) + 1
            continue
        if not absolute.startswith(("http:", "https:")):
            dropped["scheme"] = dropped.get("scheme", 0) + 1
            continue
        nofollow = nofollow or all_nofollow
        known = seen.get(absolute)
        if known is not None:
            if known.nofollow and not nofollow:
                known.nofollow = False
            continue
        link = Link(absolute, tag, nofollow, text)
        seen[absolute] = link
        links.append(link)
    return invisible


class _JoinMemo:
    """Memo of ``ada_url.join_url`` for references whose result does not depend on the base's path.

    Menu links repeat on every page of a site, and resolving a reference (a WHATWG parse through
    cffi) costs more than the rest of a link's extraction. Two kinds of reference are memoized:

    * absolute ``http://``/``https://`` references: the "special authority slashes" state of the
      URL Standard's basic URL parser never reads the base, so the key is the reference itself;
    * path-absolute references (``/a/b?q``, second character not ``/``, ``\\``, tab or newline):
      "relative slash state" takes only the base's scheme, credentials, host and port, so the key
      is ``join_url(base, "/")`` (exactly that serialization) and the reference.

    Path-absolute keys start with NUL and absolute ones with ``http``, so the kinds never share a
    key; in the first kind the origin ends at the first ``/`` after ``://`` (WHATWG
    percent-encodes ``/`` in credentials), so a key names one (origin, reference) pair. Invalid
    references raise ``ValueError`` each time (not memoized).
    Bounded by two generations of ``size // 2`` entries; no lock (single dict operations are
    atomic under the GIL; a lost update only costs a recomputation).
    """

    __slots__ = ("_new", "_old", "_half")

    def __init__(self, size: int) -> None:
        self._new: dict[str, str] = {}
        self._old: dict[str, str] = {}
        self._half = max(1, size // 2)

    def join(self, key: str, base: str, href: str) -> str:
        """``ada_url.join_url(base, href)``, memoized under ``key``; raises ``ValueError`` as it."""
        new = self._new
        hit = new.get(key)
        if hit is not None:
            return hit
        hit = self._old.get(key)
        if hit is None:
            hit = ada_url.join_url(base, href)
        if len(new) >= self._half:
            self._old, self._new = new, {}
            new = self._new
        new[key] = hit
        return hit


_NOT_PATH_ABSOLUTE = frozenset({"/", "\\", "\t", "\n", "\r", ""})
_JOINS = _JoinMemo(1 << 16)


def _anchor_text(el: etree._Element, parts: list[str]) -> str:
    """Text inside ``el`` without the text of nested ``<a>`` elements (libxml2 nests an unclosed
    ``<a>`` inside the next one; a browser and NekoHTML would not)."""
    if el.text:
        parts.append(el.text)
    for child in el:
        if child.tag != "a" and child.tag not in ("script", "style"):
            _anchor_text(child, parts)
        if child.tail:
            parts.append(child.tail)
    return "".join(parts)


def _meta(
    el: etree._Element, raw: list[tuple[str, str, bool, str | None]], page: ParsedPage, agent: str
) -> None:
    """Robots meta (``name=robots`` or our agent) and ``http-equiv=refresh``."""
    name = el.get("name")
    if name is not None:
        name = name.strip().lower()
        if name == "robots" or name == agent:
            tokens = set(_SPLIT_TOKENS.split((el.get("content") or "").lower()))
            if "none" in tokens:
                page.robots_noindex = page.robots_nofollow = True
            if "noindex" in tokens:
                page.robots_noindex = True
            if "nofollow" in tokens:
                page.robots_nofollow = True
        return
    equiv = el.get("http-equiv")
    if equiv is not None and equiv.strip().lower() == "refresh":
        target = refresh_url(el.get("content") or "")
        if target is not None:
            raw.append(("meta_refresh", target, False, None))


def refresh_url(content: str) -> str | None:
    """The URL of a ``<meta http-equiv="refresh">`` ``content`` value, or None.

    Follows the HTML Standard's "shared declarative refresh steps": a time (digits and dots), then an
    optional ``;``/``,``, an optional ``url=``, and the URL, optionally quoted. ``"5"`` alone (a
    reload of the same page) gives None.
    """
    m = _REFRESH.match(content)
    if m is None:
        return None
    target = m.group(1).strip()
    if target[:1] in ("'", '"'):
        quote = target[0]
        end = target.find(quote, 1)
        target = target[1:end] if end != -1 else target[1:]
    return target.strip() or None


__all__ = [
    "DEFAULT_ENCODING", "HTML_CONTENT_TYPES", "INVISIBLE_TAGS", "PRESCAN_BYTES", "Link",
    "ParsedPage", "detect_encoding", "encoding_for_label", "parse_page", "prescan",
    "refresh_url", "visible_text",
]  # fmt: skip
