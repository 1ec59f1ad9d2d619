"""WET files: the plain text of a WARC file's HTML captures as WARC ``conversion`` records.

The format Common Crawl publishes beside its WARC files (``...warc.wet.gz``): a ``warcinfo``
record, then one ``conversion`` record per HTML capture (WARC 1.1 §6.8) with
``Content-Type: text/plain``, ``WARC-Refers-To`` (the response record's id),
``WARC-Target-URI``, ``WARC-Date`` (the capture's), ``WARC-Block-Digest`` and
``WARC-Identified-Content-Language``; each record its own gzip member, written by warcio.

Record ids are derived from the response's id and the WET file's name (UUID version 5), and dates
are the captures', so the same WARC file always gives the same WET bytes: a rerun after a crash
writes an identical file (warcio's practice of passing the id maker in, made deterministic).
"""

from __future__ import annotations

import io
import uuid
from typing import IO

from warcio.warcwriter import WARCWriter

#: Namespace of the UUIDv5 record ids of WET records (any fixed UUID; this one is ours).
RECORD_NAMESPACE = uuid.UUID("5d1f1c8e-6b0e-4d43-9a51-3a8f0c2b7e10")


def record_id(*parts: str) -> str:
    """``<urn:uuid:...>``: the UUIDv5 of ``parts`` joined by spaces in :data:`RECORD_NAMESPACE`."""
    return f"<urn:uuid:{uuid.uuid5(RECORD_NAMESPACE, ' '.join(parts))}>"


def warcinfo_fields(warc_rel: str) -> dict[str, str]:
    """The fields of the ``warcinfo`` record of the WET file of ``warc_rel`` (the WARC file's
    path relative to the crawl root), the same whoever extracts it."""
    return {"software": "batchcrawl extract", "isPartOf": warc_rel}


class WetWriter:
    """Appends WET records to ``out`` (a binary file open for writing, at its start).

    Parameters
    ----------
    out
        Where the gzip members go.
    filename
        The WET file's name (its ``warcinfo`` record's ``WARC-Filename``).
    """

    def __init__(self, out: IO[bytes], filename: str) -> None:
        self._out = out
        self._filename = filename
        self.offset = 0
        self.records = 0
        self._warcinfo_id: str | None = None

    def _append(self, record) -> tuple[int, int]:
        buf = io.BytesIO()
        WARCWriter(buf, gzip=True, warc_version="WARC/1.1").write_record(record)
        data = buf.getvalue()
        self._out.write(data)
        start = self.offset
        self.offset += len(data)
        self.records += 1
        return start, len(data)

    def write_warcinfo(self, date: str, fields: dict[str, str]) -> None:
        """The file's first record: ``fields`` (e.g. ``isPartOf``, ``description``) as
        ``application/warc-fields``; ``date`` a WARC-Date (ISO 8601 UTC)."""
        writer = WARCWriter(io.BytesIO(), warc_version="WARC/1.1")
        record = writer.create_warcinfo_record(self._filename, fields)
        self._warcinfo_id = record_id(self._filename, "warcinfo")
        record.rec_headers.replace_header("WARC-Record-ID", self._warcinfo_id)
        record.rec_headers.replace_header("WARC-Date", date)
        self._append(record)

    def write_conversion(
        self, text: str, *, target_uri: str, refers_to: str, date: str, languages: str | None
    ) -> tuple[int, int]:
        """One ``conversion`` record holding ``text`` (UTF-8) for the capture ``refers_to`` (its
        response's ``WARC-Record-ID``) of ``target_uri`` made at ``date``; ``languages`` is the
        comma-separated ISO 639-1 list, or None. Returns the record's (offset, length) in bytes.
        """
        headers = {
            "WARC-Type": "conversion",
            "WARC-Record-ID": record_id(self._filename, refers_to),
            "WARC-Date": date,
            "WARC-Target-URI": target_uri,
            "WARC-Refers-To": refers_to,
        }
        if self._warcinfo_id is not None:
            headers["WARC-Warcinfo-ID"] = self._warcinfo_id
        if languages:
            headers["WARC-Identified-Content-Language"] = languages
        writer = WARCWriter(io.BytesIO(), warc_version="WARC/1.1")
        payload = text.encode("utf-8")
        record = writer.create_warc_record(
            target_uri,
            "conversion",
            payload=io.BytesIO(payload),
            length=len(payload),
            warc_content_type="text/plain",
            warc_headers_dict=headers,
        )
        return self._append(record)
