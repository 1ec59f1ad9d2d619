"""One HTML page's text and metadata (issue 32): main text with boilerplate removed, all visible
text, title, meta description and keywords, JSON-LD and microdata types, outlinks.

Resiliparse (Bevendorff et al., "Resiliparse", ChatNoir) parses and extracts: on hand-labelled
pages of the Python and aptitude manuals it kept more of the main text than trafilatura, jusText
and readability-lxml, dropped as much navigation, and cost ~13x less CPU than trafilatura
(docs/extract.md, ``scripts/bench_extract_libs.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from resiliparse.extract.html2text import extract_plain_text
from resiliparse.parse.encoding import bytes_to_str, detect_encoding
from resiliparse.parse.html import HTMLTree

#: Bytes of a payload's start looked at for signs of a binary body (NUL, other C0 controls).
SNIFF_BYTES = 4096
#: Share of C0 control bytes (tab, CR, LF excepted) above which a body is binary, not text.
BINARY_SHARE = 0.05
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13))
#: ``<a href>`` / ``<area href>`` that lead nowhere to crawl: empty, a fragment of this page, or a
#: ``javascript:``, ``mailto:``, ``tel:`` or ``data:`` URL (ASCII case-insensitive).
_NOT_LINKS_SELECTOR = ", ".join(
    f'{tag}[href=""], {tag}[href^="#"], '
    + ", ".join(f'{tag}[href^="{p}" i]' for p in ("javascript:", "mailto:", "tel:", "data:"))
    for tag in ("a", "area")
)


class PageSkipped(ValueError):
    """A payload that yields no text row's content; ``reason`` is the counted reason
    (``binary``, ``undecodable``)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclass(frozen=True)
class PageText:
    """What one HTML page holds. Lengths are in characters (code points).

    ``main_text`` is empty for a page without text (the row then says ``no_text``)."""

    title: str | None
    main_text: str
    visible_text_length: int
    meta_description: str | None
    meta_keywords: str | None
    structured_types: list[str]
    outlinks: int
    charset: str


def looks_binary(payload: bytes) -> bool:
    """True when the start of ``payload`` has a NUL byte or more than :data:`BINARY_SHARE` C0
    control bytes: an image or archive labelled ``text/html`` (the heuristic of ``file(1)`` and
    of WHATWG MIME sniffing's binary-data check)."""
    head = payload[:SNIFF_BYTES]
    if not head:
        return False
    if b"\0" in head:
        return True
    return sum(head.count(c) for c in _CONTROL) > BINARY_SHARE * len(head)


def decode(payload: bytes, charset: str | None) -> tuple[str, str]:
    """``payload`` as text and the charset used: the HTTP header's ``charset`` if it names a
    known codec, else Resiliparse's detection (BOM, meta, statistics).

    Raises
    ------
    PageSkipped
        ``binary``: the body is not text; ``undecodable``: no charset decodes it.
    """
    if looks_binary(payload):
        raise PageSkipped("binary", "control bytes in a body labelled HTML")
    encoding = charset or detect_encoding(payload)
    try:
        return bytes_to_str(payload, encoding, errors="strict"), encoding
    except (UnicodeError, LookupError) as exc:
        raise PageSkipped("undecodable", str(exc)) from None


def extract_page(payload: bytes, charset: str | None = None) -> PageText:
    """Text and metadata of one HTML payload (bytes, as stored in the WARC record).

    Raises
    ------
    PageSkipped
        The payload is binary or cannot be decoded (:func:`decode`).
    """
    text, used = decode(payload, charset)
    tree = HTMLTree.parse(text)
    main = extract_plain_text(tree, main_content=True, alt_texts=False, comments=False)
    visible = extract_plain_text(tree, main_content=False, alt_texts=False)
    description = keywords = None
    head = tree.head
    for meta in head.query_selector_all("meta") if head is not None else ():
        name = (meta.getattr("name") or "").strip().lower()
        if name == "description" and description is None:
            description = (meta.getattr("content") or "").strip() or None
        elif name == "keywords" and keywords is None:
            keywords = (meta.getattr("content") or "").strip() or None
    doc = tree.document
    links = len(doc.query_selector_all("a[href], area[href]")) - len(
        doc.query_selector_all(_NOT_LINKS_SELECTOR)
    )  # counted by the parser: no Python object per link
    return PageText(
        title=(tree.title or "").strip() or None,
        main_text=main.strip(),
        visible_text_length=len(visible.strip()),
        meta_description=description,
        meta_keywords=keywords,
        structured_types=structured_types(tree),
        outlinks=links,
        charset=used,
    )


def structured_types(tree: HTMLTree) -> list[str]:
    """Sorted distinct types of the page's structured data: ``@type`` of every JSON-LD object
    (``<script type="application/ld+json">``, nested objects and ``@graph`` included) and the
    ``itemtype`` URLs of microdata items (HTML Living Standard §5.2). A JSON-LD block that is
    not valid JSON is skipped (it names no type)."""
    found: set[str] = set()
    for script in tree.document.query_selector_all("script"):
        if (script.getattr("type") or "").strip().lower() != "application/ld+json":
            continue
        try:
            _json_ld_types(json.loads(script.text), found)
        except (ValueError, RecursionError):
            continue
    for item in tree.document.query_selector_all("[itemtype]"):
        found.update((item.getattr("itemtype") or "").split())
    return sorted(found)


def _json_ld_types(node: object, found: set[str]) -> None:
    if isinstance(node, list):
        for child in node:
            _json_ld_types(child, found)
    elif isinstance(node, dict):
        kind = node.get("@type")
        if isinstance(kind, str):
            found.add(kind)
        elif isinstance(kind, list):
            found.update(k for k in kind if isinstance(k, str))
        for value in node.values():
            if isinstance(value, dict | list):
                _json_ld_types(value, found)
