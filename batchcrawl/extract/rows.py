"""The ``text`` row of one capture (``storage/schema.sql``), made from its ``fetched`` row, its
WARC record and what :mod:`batchcrawl.extract.page` found in it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # types only: importing this module loads neither resiliparse nor pycld2
    from batchcrawl.extract.language import Languages
    from batchcrawl.extract.page import PageText

#: MIME types whose captures get a text row (HTML; Common Crawl's WET covers the same).
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


def base_row(fetched: dict[str, Any], record_type: str, digest: str | None) -> dict[str, Any]:
    """The columns every row has, from the capture's ``fetched`` row (a dict of its columns)."""
    return {
        "url_key": fetched["url_key"],
        "url": fetched["url"],
        "url_host_name": fetched["url_host_name"],
        "fetch_time": fetched["fetch_time"],
        "round": fetched["round"],
        "shard": fetched["shard"],
        "record_type": record_type,
        "content_digest": digest or fetched.get("content_digest"),
        "warc_filename": fetched["warc_filename"],
        "warc_record_offset": fetched["warc_record_offset"],
    }


def page_columns(page: PageText, languages: Languages) -> dict[str, Any]:
    """The text, language and metadata columns of a page."""
    return {
        "content_languages": languages.content_languages,
        "language_shares": list(languages.shares) or None,
        "language_reliable": languages.reliable if languages.codes else None,
        "title": page.title,
        "main_text": page.main_text,
        "main_text_length": len(page.main_text),
        "visible_text_length": page.visible_text_length,
        "meta_description": page.meta_description,
        "meta_keywords": page.meta_keywords,
        "structured_types": page.structured_types,
        "outlinks": page.outlinks,
        "charset": page.charset,
    }


def wants_text(fetched: dict[str, Any]) -> str | None:
    """None when the capture of this ``fetched`` row gets a text row with its text; else the
    counted reason it gets none: ``not_200`` or ``not_html``."""
    if fetched.get("fetch_status") != 200:
        return "not_200"
    if (fetched.get("content_mime_type") or "").lower() not in HTML_TYPES:
        return "not_html"
    return None
