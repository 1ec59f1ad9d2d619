"""The ``text`` row and WET record of one capture: the one decision both ``batchcrawl extract``
(:mod:`batchcrawl.extract.warcfile`, reading a stored record) and extraction at fetch time
(:mod:`batchcrawl.extract.atfetch`, holding the record just written) make, so that both give the
same rows and the same WET bytes for the same page (issue 32)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from batchcrawl.errors import first_line
from batchcrawl.extract.language import identify
from batchcrawl.extract.page import PageSkipped, extract_page
from batchcrawl.extract.rows import base_row, page_columns, wants_text
from batchcrawl.extract.wet import WetWriter


def capture_row(
    fetched: dict[str, Any],
    headers: Any,
    payload: bytes | Exception,
    wet: WetWriter,
    counts: Counter,
) -> dict[str, Any] | None:
    """The text row of one ``response`` or ``revisit`` record, or None (counted by reason).

    Parameters
    ----------
    fetched
        The capture's ``fetched`` row (a dict of its columns).
    headers
        The record's WARC header block (warcio ``StatusAndHeaders``: ``WARC-Type``,
        ``-Payload-Digest``, ``-Truncated``, ``-Target-URI``, ``-Record-ID``, ``-Date``).
    payload
        The decoded payload (:func:`~batchcrawl.extract.payload.decode_body`), or the error
        decoding it raised (the row then says ``undecodable: ...``).
    wet
        Where the page's ``conversion`` record goes (when it has text).
    counts
        Captures by reason (``text``, ``no_text``, ``truncated``, ``revisit``, ``not_200``,
        ``not_html``, ``binary``, ``undecodable``), incremented here.
    """
    kind = headers.get_header("WARC-Type")
    digest = headers.get_header("WARC-Payload-Digest")
    if kind == "revisit":
        counts["revisit"] += 1
        return {**base_row(fetched, kind, digest), "reason": "revisit"}
    skip = wants_text(fetched)
    if skip is not None:
        counts[skip] += 1
        return None
    row = base_row(fetched, kind, digest)
    if isinstance(payload, Exception):
        counts["undecodable"] += 1
        return {**row, "reason": f"undecodable: {first_line(payload)}"}
    try:
        page = extract_page(payload, fetched.get("content_charset"))
    except PageSkipped as exc:
        counts[exc.reason] += 1
        return {**row, "reason": exc.reason}
    languages = identify(page.main_text or "")
    row.update(page_columns(page, languages))
    if not page.main_text:
        counts["no_text"] += 1
        row["reason"] = "no_text"
        return row
    if headers.get_header("WARC-Truncated"):
        counts["truncated"] += 1
        row["reason"] = "truncated"
    else:
        counts["text"] += 1
    offset_len = wet.write_conversion(
        page.main_text,
        target_uri=headers.get_header("WARC-Target-URI"),
        refers_to=headers.get_header("WARC-Record-ID"),
        date=headers.get_header("WARC-Date"),
        languages=languages.content_languages,
    )
    row["wet_record_offset"], row["wet_record_length"] = offset_len
    return row
