"""CDXJ lines of WARC capture records: the pywb / OpenWayback "CDXJ" format, as cdxj-indexer writes it.

One line per capture record (``response``, ``revisit``, ``resource``)::

    com,example)/page 20231114221320 {"url": "http://example.com/page", "mime": "text/html", ...}

that is, the SURT form of the URL (:func:`batchcrawl.urls.surt`, the same key as the index table's
``url_surtkey``), a 14-digit timestamp from WARC-Date, and a JSON object with ``url``, ``mime``
(``warc/revisit`` for revisits, otherwise the Content-Type up to the first ``;`` or blank, case
kept), ``status`` (HTTP status), ``digest`` (``WARC-Payload-Digest`` as written, ``sha1:BASE32``;
absent when the record has none, e.g. a server-not-modified revisit), ``length`` and ``offset``
(bytes of the record's gzip member in the file) and ``filename`` (the bare WARC file name, which a
pywb collection resolves in its ``archive/`` folder). Values are strings. This is exactly what
cdxj-indexer 1.5 (webrecorder's reference indexer, used by pywb's ``wb-manager``) writes, field for
field, so both kinds of line can be mixed in one collection (``tests/test_archive_tools.py``).
``request``, ``warcinfo`` and ``application/warc-fields`` ``metadata`` records are not indexed.

The fields of a record come from one function, :func:`capture_fields`, used both when reading a
WARC file (:func:`scan`) and when the fetch worker writes one (``fetch.warc_cdxj``: the CDXJ at crawl
time), so the two cannot differ.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import IO, Any

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from batchcrawl.errors import WarcError
from batchcrawl.urls import surt

INDEXED_TYPES = ("response", "revisit", "resource")


@dataclass(frozen=True, slots=True)
class Capture:
    """One indexed record: its record type, ``WARC-Date`` (full precision), CDXJ ``fields``
    (without ``length``, ``offset``, ``filename``) and where it is (bytes)."""

    rec_type: str
    warc_date: str
    fields: dict[str, str]
    offset: int
    length: int

    def line(self, filename: str) -> str:
        """The CDXJ line of this capture in the WARC file named ``filename`` (bare name)."""
        return line_tail(line_head(self.warc_date, self.fields), self.offset, self.length, filename)


def line_head(warc_date: str, fields: dict[str, str]) -> str:
    """The part of a capture's CDXJ line known before the record is placed in a file: the SURT
    key, the timestamp and the JSON object of ``fields`` (:func:`capture_fields`, at least
    ``url``) without its closing brace. :func:`line_tail` completes it."""
    return f"{_surt(fields['url'])} {timestamp14(warc_date)} {json.dumps(fields)[:-1]}"


def line_tail(head: str, offset: int, length: int, filename: str) -> str:
    """The whole CDXJ line (no newline) from :func:`line_head`'s ``head`` and where the record
    is: ``length`` and ``offset`` in bytes, ``filename`` the bare WARC file name. The same text
    as ``json.dumps`` of the fields with ``length``, ``offset`` and ``filename`` added last (its
    default separators), which cdxj-indexer writes."""
    return (f'{head}, "length": "{length}", "offset": "{offset}", '
            f'"filename": {json.dumps(filename)}}}')  # fmt: skip


def capture_fields(rec_type: str, rec_headers: Any, http_headers: Any) -> dict[str, str] | None:
    """The CDXJ fields ``url``, ``mime``, ``status``, ``digest`` of one WARC record, or None when
    the record is not a capture that replay tools index.

    Parameters
    ----------
    rec_type
        ``WARC-Type``.
    rec_headers, http_headers
        warcio ``StatusAndHeaders`` of the WARC header and the HTTP header block (None if the
        record has none), as a warcio reader or record builder holds them.
    """
    if rec_type not in INDEXED_TYPES:
        return None
    url = rec_headers.get_header("WARC-Target-URI")
    if not url:
        return None
    fields: dict[str, str] = {"url": url}
    if rec_type == "revisit":
        fields["mime"] = "warc/revisit"
    else:
        if rec_type == "response":
            ctype = http_headers.get_header("Content-Type") if http_headers is not None else None
        else:
            ctype = rec_headers.get_header("Content-Type")
        mime = _mime(ctype)
        if mime:
            fields["mime"] = mime
    if http_headers is not None and rec_type in ("response", "revisit"):
        status = http_headers.get_statuscode()
        if status:
            fields["status"] = status
    digest = rec_headers.get_header("WARC-Payload-Digest")
    if digest:
        fields["digest"] = digest
    return fields


def scan(fh: IO[bytes], filename: str, *, arc: bool = False) -> list[Capture]:
    """The captures of the WARC stream ``fh``, in file order (``filename`` names it in errors).

    ``arc=True`` reads a legacy ARC file instead (records converted by warcio). It must be asked
    for: any text line with five fields parses as an ARC header, so junk would index as ARC.

    Raises
    ------
    WarcError
        The stream is not a readable WARC/ARC file (the message names ``filename``).
    """
    out: list[Capture] = []
    it = ArchiveIterator(fh, arc2warc=arc)
    try:
        for record in it:
            if record.format != "warc" and not arc:
                raise WarcError(f"{filename}: not a WARC file (found a {record.format} record)")
            fields = capture_fields(record.rec_type, record.rec_headers, record.http_headers)
            if fields is None:
                continue
            it.read_to_end(record)
            out.append(
                Capture(
                    rec_type=record.rec_type,
                    warc_date=record.rec_headers.get_header("WARC-Date") or "",
                    fields=fields,
                    offset=it.get_record_offset(),
                    length=it.get_record_length(),
                )
            )
    except ArchiveLoadFailed as exc:
        raise WarcError(
            f"{filename}: not a readable WARC/ARC file after {len(out)} indexed records: "
            f"{str(exc).strip()}"
        ) from exc
    return out


def cdxj_lines(fh: IO[bytes], filename: str, *, arc: bool = False) -> list[str]:
    """Unsorted CDXJ lines for the WARC stream ``fh``; ``filename`` goes into each line."""
    return [c.line(filename) for c in scan(fh, filename, arc=arc)]


def timestamp14(warc_date: str) -> str:
    """``2023-11-14T22:13:20.250000Z`` -> ``20231114221320`` (14 digits, as pywb)."""
    digits = "".join(ch for ch in warc_date[:19] if ch.isdigit())
    return digits.ljust(14, "0")[:14]


def _mime(ctype: str | None) -> str | None:
    """Content-Type up to the first ``;`` or whitespace (cdxj-indexer's rule, case kept)."""
    if not ctype:
        return None
    head = ctype.strip()
    for i, ch in enumerate(head):
        if ch == ";" or ch.isspace():
            head = head[:i]
            break
    return head.strip() or None


def _surt(url: str) -> str:
    try:
        return surt(url)
    except ValueError:  # not a URL surt can take apart: index it as it is
        return url
