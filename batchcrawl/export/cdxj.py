"""CDXJ index of a WARC file: the pywb / OpenWayback "CDXJ" format.

One line per capture record (``response``, ``revisit``, ``resource``)::

    com,example)/page 20231114221320 {"url": "http://example.com/page", "mime": "text/html", ...}

that is, the SURT form of the URL (:func:`batchcrawl.urls.surt`, the same key as the index table's
``url_surtkey``), a 14-digit timestamp from
WARC-Date, and a JSON object with ``url``, ``mime`` (``warc/revisit`` for revisits, Content-Type
without parameters otherwise), ``status`` (HTTP status), ``digest`` (payload digest, base32 without the
``sha1:`` prefix), ``length`` and ``offset`` (bytes of the record's gzip member in the file) and
``filename``. Values are strings, as pywb writes them. Lines are sorted (byte order), so replay tools
can binary-search them. ``request``, ``metadata`` and ``warcinfo`` records are not indexed.
"""

from __future__ import annotations

import json
import posixpath
from typing import IO, Any

import fsspec
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from batchcrawl.errors import WarcError
from batchcrawl.urls import surt

INDEXED_TYPES = ("response", "revisit", "resource")


def cdxj_lines(fh: IO[bytes], filename: str, *, arc: bool = False) -> list[str]:
    """Unsorted CDXJ lines for the WARC stream ``fh``; ``filename`` goes into each line.

    ``arc=True`` reads a legacy ARC file instead (records converted by warcio). It must be asked
    for: any text line with five fields parses as an ARC header, so junk would index as ARC.

    Raises
    ------
    WarcError
        The stream is not a readable WARC/ARC file (the message names ``filename`` and the offset).
    """
    lines: list[str] = []
    it = ArchiveIterator(fh, arc2warc=arc)
    try:
        for record in it:
            if record.format != "warc" and not arc:
                raise WarcError(f"{filename}: not a WARC file (found a {record.format} record)")
            if record.rec_type not in INDEXED_TYPES:
                continue
            url = record.rec_headers.get_header("WARC-Target-URI")
            date = record.rec_headers.get_header("WARC-Date") or ""
            if not url:
                continue
            fields: dict[str, str] = {"url": url}
            if record.rec_type == "revisit":
                fields["mime"] = "warc/revisit"
            else:
                ctype = None
                if record.http_headers is not None and record.rec_type == "response":
                    ctype = record.http_headers.get_header("Content-Type")
                else:
                    ctype = record.rec_headers.get_header("Content-Type")
                if ctype:
                    fields["mime"] = ctype.split(";", 1)[0].strip().lower()
            if record.http_headers is not None and record.rec_type in ("response", "revisit"):
                status = record.http_headers.get_statuscode()
                if status:
                    fields["status"] = status
            digest = record.rec_headers.get_header("WARC-Payload-Digest")
            if digest:
                fields["digest"] = digest.split(":", 1)[-1]
            it.read_to_end(record)
            fields["length"] = str(it.get_record_length())
            fields["offset"] = str(it.get_record_offset())
            fields["filename"] = filename
            lines.append(f"{_surt(url)} {_timestamp(date)} {json.dumps(fields)}")
    except ArchiveLoadFailed as exc:
        raise WarcError(
            f"{filename}: not a readable WARC/ARC file after {len(lines)} indexed records: "
            f"{str(exc).strip()}"
        ) from exc
    return lines


def write_cdxj(
    warc_path: str,
    out: IO[str],
    fs: Any = None,
    *,
    filename: str | None = None,
    arc: bool | None = None,
) -> int:
    """Write the sorted CDXJ index of one WARC file to the text stream ``out``.

    Parameters
    ----------
    warc_path
        Path of the WARC file in ``fs`` (or an fsspec URL such as ``memory://x.warc.gz`` when ``fs``
        is None).
    out
        Text stream the lines are written to, each ending in ``\\n``.
    fs
        fsspec filesystem holding ``warc_path``; None infers it from the URL.
    filename
        Value of the ``filename`` field; default the base name of ``warc_path`` (pywb's choice).
        Pass the crawl-relative path to index many directories into one file.
    arc
        Read a legacy ARC file; None (default) decides by the name (``.arc``, ``.arc.gz``).

    Returns
    -------
    int
        Number of lines written.

    Raises
    ------
    WarcError
        The file cannot be opened or is not a WARC/ARC file.
    """
    if fs is None:
        fs, warc_path = fsspec.core.url_to_fs(warc_path)
    name = filename if filename is not None else posixpath.basename(warc_path)
    if arc is None:
        arc = warc_path.endswith((".arc", ".arc.gz"))
    try:
        with fs.open(warc_path, "rb") as fh:
            lines = cdxj_lines(fh, name, arc=arc)
    except OSError as exc:
        raise WarcError(f"{warc_path}: cannot read WARC file: {exc}") from exc
    lines.sort()
    for line in lines:
        out.write(line + "\n")
    return len(lines)


def _surt(url: str) -> str:
    try:
        return surt(url)
    except ValueError:  # not a URL surt can take apart: index it as it is
        return url


def _timestamp(warc_date: str) -> str:
    """``2023-11-14T22:13:20.250000Z`` -> ``20231114221320`` (14 digits, as pywb)."""
    digits = "".join(ch for ch in warc_date[:19] if ch.isdigit())
    return digits.ljust(14, "0")[:14]
