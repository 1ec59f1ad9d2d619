"""The extract task of one committed WARC file (issue 32): its ``text`` rows and its WET file.

Reads the file once, record by record (warcio; StormCrawler's WARCSpout and Common Crawl's WET job
read their WARC files the same way), and joins each record to its ``fetched`` row by offset. Bad
input never fails the task: a record that cannot be decoded, a binary body labelled HTML, a page
without text or a truncated record gives a row with a ``reason``; a capture without a row is
counted by reason; a damaged file (a gzip member or WARC header that cannot be read) ends the read
there, keeps what came before and is named in one line of the result.

Outputs are written whole or not at all (:meth:`CrawlDir.open_output`), the WET file first and the
Parquet file last: a text file that exists is the mark of a finished task, which a rerun after a
crash reuses (:func:`extract_warc` returns it without reading the WARC again).
"""

from __future__ import annotations

import posixpath
import zlib
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from batchcrawl.errors import first_line
from batchcrawl.extract.capture import capture_row
from batchcrawl.extract.payload import PayloadError, read_payload
from batchcrawl.extract.wet import WetWriter, warcinfo_fields
from batchcrawl.store import paths, schemas
from batchcrawl.store.crawldir import CrawlDir

#: Columns of ``fetched`` a task reads.
FETCHED_COLUMNS = [
    "url_key", "url", "url_host_name", "fetch_time", "fetch_status", "content_digest",
    "content_mime_type", "content_charset", "round", "shard", "warc_filename",
    "warc_record_offset",
]  # fmt: skip
#: What reading a damaged WARC file raises (warcio's parse errors, gzip, a cut file).
DAMAGE = (ArchiveLoadFailed, zlib.error, EOFError, ValueError)


def extract_warc(crawl_url: str, warc_rel: str, fetched_rel: str) -> dict[str, Any]:
    """Extract one WARC file of ``crawl_url``: write its WET file and its ``text`` file.

    Parameters
    ----------
    crawl_url
        The crawl directory as the worker sees it.
    warc_rel
        The WARC file, relative to the crawl root (a ``fetched.warc_filename``).
    fetched_rel
        The committed ``fetched`` file whose rows name ``warc_rel``.

    Returns
    -------
    dict
        ``text`` (path; None when the WARC file is missing: nothing was written), ``rows``,
        ``wet`` (path or None), ``counts`` (captures by reason),
        ``damaged`` (one line naming the file and the error, or None), ``reused`` (True when a
        finished earlier run's file was returned).
    """
    crawl = CrawlDir(crawl_url)
    round_ = paths.parse_round(warc_rel)
    text_rel = paths.text_file(round_ if round_ is not None else 0, warc_rel)
    wet_rel = paths.wet_file(warc_rel)
    if crawl.fs.exists(crawl.path(text_rel)):  # finished by a run that died before its commit
        with crawl.fs.open(crawl.path(text_rel), "rb") as fh:
            n = pq.ParquetFile(fh).metadata.num_rows
        return {"text": text_rel, "rows": n, "wet": wet_rel, "counts": {}, "damaged": None,
                "reused": True}  # fmt: skip
    if not crawl.fs.exists(crawl.path(warc_rel)):  # nothing written: a rerun tries again
        return {"text": None, "rows": 0, "wet": None, "counts": {"missing_file": 1},
                "damaged": f"{warc_rel}: WARC file named by committed fetched rows is missing",
                "reused": False}  # fmt: skip
    fetched = crawl.read_table("fetched", [fetched_rel], columns=FETCHED_COLUMNS).to_pylist()
    by_offset = {r["warc_record_offset"]: r for r in fetched if r["warc_filename"] == warc_rel}
    counts: Counter = Counter()
    out: list[dict[str, Any]] = []
    with crawl.open_output(wet_rel) as wet_fh:
        wet = WetWriter(wet_fh, posixpath.basename(wet_rel))
        damaged = _read_warc(crawl, warc_rel, by_offset, wet, counts, out)
    for row in out:
        if row.get("wet_record_offset") is not None:
            row["wet_filename"] = wet_rel
    table = pa.Table.from_pylist(out, schema=schemas.schema("text"))
    crawl.write_table("text", text_rel, table)  # last, and even when empty: the task is done
    return {"text": text_rel, "rows": len(out), "wet": wet_rel, "counts": dict(counts),
            "damaged": damaged, "reused": False}  # fmt: skip


def _read_warc(
    crawl: CrawlDir, warc_rel: str, by_offset: dict, wet: WetWriter, counts: Counter, out: list
) -> str | None:
    """Append the rows of ``warc_rel``'s records to ``out`` and their WET records to ``wet``;
    return None, or the line naming the damage that ended the read."""
    try:
        with crawl.fs.open(crawl.path(warc_rel), "rb") as fh:
            it = ArchiveIterator(fh, no_record_parse=False, arc2warc=False)
            for record in it:
                if wet.records == 0:
                    wet.write_warcinfo(
                        record.rec_headers.get_header("WARC-Date") or "",
                        warcinfo_fields(warc_rel),
                    )
                if record.rec_type not in ("response", "revisit"):
                    continue
                payload = _read_payload(record)  # before the offset: warcio reads to the end
                row = _record_row(record, payload, it.get_record_offset(), by_offset, wet, counts)
                if row is not None:
                    out.append(row)
    except DAMAGE as exc:
        counts["damaged_file"] += 1
        return (
            f"{warc_rel}: damaged WARC file ({_printable(first_line(exc))}); kept the {len(out)} "
            "rows before the damage"
        )
    return None


def _read_payload(record) -> bytes | Exception:
    """The payload of a record (:func:`~batchcrawl.extract.payload.read_payload`), or the error
    that decoding it raised."""
    try:
        return read_payload(record)
    except PayloadError as exc:
        return exc


def _record_row(
    record,
    payload: bytes | Exception,
    offset: int,
    by_offset: dict,
    wet: WetWriter,
    counts: Counter,
) -> dict[str, Any] | None:
    """The text row of one response or revisit record, or None (counted by reason)."""
    fetched = by_offset.get(offset)
    if fetched is None:
        counts["not_in_fetched"] += 1
        return None
    return capture_row(fetched, record.rec_headers, payload, wet, counts)


def _printable(text: str, limit: int = 120) -> str:
    """``text`` cut to ``limit`` characters with non-printable ones escaped (a parse error may
    quote the damaged bytes)."""
    cut = text[:limit]
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in cut)
