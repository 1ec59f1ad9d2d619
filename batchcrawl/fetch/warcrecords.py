"""The records of one fetch as WARC 1.1 gzip members (ISO 28500:2017): field order, digests,
HTTP header blocks, compression. :class:`~batchcrawl.fetch.warc.WarcWriter` puts them into files;
the format decisions (transfer encoding, truncation, revisit profiles, one gzip member per record,
ISA-L levels) are described in :mod:`batchcrawl.fetch.warc`'s docstring (warcio's own split of
``recordbuilder`` and ``warcwriter``)."""

from __future__ import annotations

import base64
import hashlib
import io
import threading
import uuid
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast
from urllib.parse import urlsplit

try:  # optional (batchcrawl[fast]): ISA-L deflate, same gzip format, far less CPU
    from isal import isal_zlib
except ImportError:  # pragma: no cover - the dev install has it; zlib writes the same format
    isal_zlib = None  # type: ignore[assignment]
from warcio.recordbuilder import RecordBuilder
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from batchcrawl.cdxj import capture_fields
from batchcrawl.records import FetchResult

WARC_VERSION = "WARC/1.1"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
#: WARC 1.1 §6.7.3: the server answered 304 Not Modified to a conditional request.
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
CONFORMS_TO = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
_TRUNCATED_BY_ERROR = {"reset": "disconnect", "body_short": "disconnect", "timeout": "time"}


#: ``fetch.warc_compress_level`` values compressed with ISA-L, and the ISA-L level each uses
#: (ISA-L has levels 0-3; its 1-3 give smaller output than zlib's 1, beyond that zlib is smaller).
ISAL_LEVELS = {1: 1, 2: 2, 3: 3}


def gzip_member(data: bytes | memoryview, level: int, *, isal: bool = True) -> bytes:
    """One gzip member (RFC 1952) holding ``data``, at zlib-style ``level`` (0 stored .. 9 smallest).

    Levels in :data:`ISAL_LEVELS` use python-isal's ``isal_zlib`` when it is installed and ``isal``
    is true (``isal=False`` forces zlib, for comparisons and tests); every other level, and a
    machine without python-isal, uses ``zlib``. Any gzip reader (warcio, ``gzip``) reads both.
    """
    if isal and isal_zlib is not None and level in ISAL_LEVELS:
        return isal_zlib.compress(data, ISAL_LEVELS[level], 31)
    return zlib.compress(data, level, 31)


def payload_digest(raw_body: bytes) -> str:
    """``"sha1:" + BASE32(SHA-1(raw_body))``: the WARC-Payload-Digest of a body (WARC 1.1 §5.9).

    Used as ``content_digest`` in the frontier and the ``fetched`` table, and to spot duplicates
    that become ``revisit`` records.
    """
    return _sha1_label(hashlib.sha1(raw_body).digest())


def _sha1_label(digest: bytes) -> str:
    return "sha1:" + base64.b32encode(digest).decode("ascii")


#: The payload digest of an empty payload (a GET request record's).
EMPTY_DIGEST = payload_digest(b"")


def make_record_id() -> str:
    """A new ``<urn:uuid:...>`` WARC-Record-ID (WARC 1.1 §5.2)."""
    return f"<urn:uuid:{uuid.uuid4()}>"


def warc_date(epoch_s: float) -> str:
    """WARC-Date for a time in seconds since the epoch, UTC with microseconds (WARC 1.1 §5.4)."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Latin1Headers(StatusAndHeaders):  # type: ignore[misc]  # warcio has no types
    """HTTP headers serialized by warcio (``to_str``) as Latin-1, the bytes http.client decoded,
    falling back to warcio's RFC 8187 percent-encoding for characters outside Latin-1."""

    headers_buff: bytes | None

    def header_bytes(self) -> bytes:
        """The serialized header block, ending with its empty line (computed once)."""
        self.compute_headers_buffer()
        return cast(bytes, self.headers_buff)  # set by either branch below

    def compute_headers_buffer(self, header_filter: Any = None) -> None:
        if self.headers_buff is not None:  # computed once (for the block digest), written as is
            return
        try:
            self.headers_buff = self.to_str(header_filter).encode("latin-1") + b"\r\n"
        except UnicodeEncodeError:
            super().compute_headers_buffer(header_filter)


def stored_response_headers(result: FetchResult) -> list[tuple[str, str]]:
    """Response header lines as written to the WARC record, consistent with the stored body.

    ``Transfer-Encoding`` becomes ``X-Crawler-Transfer-Encoding``; a ``Content-Length`` that differs
    from ``len(result.raw_body)`` (chunked, truncated) becomes ``X-Crawler-Content-Length`` and the
    stored length is appended (Common Crawl's practice; see the module docstring).
    """
    stored = str(len(result.raw_body))
    out: list[tuple[str, str]] = []
    have_length = False
    for name, value in result.response_headers:
        lname = name.lower()
        if lname == "transfer-encoding":
            out.append(("X-Crawler-Transfer-Encoding", value))
        elif lname == "content-length":
            if value.strip() == stored and not have_length:
                have_length = True
                out.append((name, value))
            else:
                out.append(("X-Crawler-Content-Length", value))
        else:
            out.append((name, value))
    if not have_length:
        out.append(("Content-Length", stored))
    return out


def _request_line(result: FetchResult) -> str:
    if result.request_line:
        return result.request_line
    parts = urlsplit(result.url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return f"GET {target} {result.http_version or 'HTTP/1.1'}"


def _truncated(result: FetchResult) -> str | None:
    if result.truncated:
        return result.truncated
    return _TRUNCATED_BY_ERROR.get(result.error or "")


class _Writer(WARCWriter):  # type: ignore[misc]  # warcio has no types
    """warcio's writer for the complete records :class:`Records` hands it.

    No ``WARC-Payload-Digest`` on ``metadata`` records: WARC 1.1 §5.9 defines the payload digest
    for records whose block has a well-defined payload (an HTTP message's entity); a ``metadata``
    block (``application/warc-fields``) has none, and FastWARC's payload check (``fastwarc check
    -p``) rejects a digest there. ``warcinfo`` and ``revisit`` are already left out by warcio.
    Every record arrives with its digests, so warcio's digest pass (:meth:`ensure_digest`: look the
    fields up, read the payload through a digester) has nothing to do and is skipped.
    """

    NO_PAYLOAD_DIGEST_TYPES = (*WARCWriter.NO_PAYLOAD_DIGEST_TYPES, "metadata")

    def ensure_digest(self, record: Any, block: bool = True, payload: bool = True) -> None:
        """Nothing to do: :meth:`Records.add` wrote both digests into ``record``."""


class _WarcFields(StatusAndHeaders):  # type: ignore[misc]  # warcio has no types
    """A WARC header block whose ``(name, value)`` fields are ``str`` already (warcio's
    constructor would convert each pair again)."""

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self.statusline = ""
        self.headers = fields
        self.protocol = WARC_VERSION
        self.total_len = 0
        self.headers_buff = None


_THREAD_WRITER = threading.local()


class Records:
    """The records of one fetch (or one ``warcinfo``), serialized by warcio's ``WARCWriter``
    (``gzip=False``, :class:`_Writer`) into one buffer, then compressed one gzip member per record (WARC 1.1 Annex
    D.2).

    Each record reaches warcio's writer complete: WARC header fields in their final order with
    ``WARC-Payload-Digest`` (given by the caller; none on ``warcinfo``, ``metadata`` and
    ``revisit`` records) and ``WARC-Block-Digest`` (SHA-1 of the HTTP header block and the
    payload, hashed here in one pass over bytes in hand), so warcio's writer only appends
    ``Content-Type`` and ``Content-Length`` and serializes: warcio's record builder would look
    every field up and replace it in turn, and re-read the payload through a digesting stream.
    """

    __slots__ = ("buf", "writer", "ends")

    def __init__(self) -> None:
        # one buffer and writer per thread, emptied for each fetch (a warcio writer looks up the
        # host name and builds a header parser when made)
        mine = _THREAD_WRITER.__dict__
        if "writer" not in mine:
            mine["buf"] = io.BytesIO()
            mine["writer"] = _Writer(mine["buf"], gzip=False, warc_version=WARC_VERSION)
        self.buf, self.writer = mine["buf"], mine["writer"]
        self.buf.seek(0)
        self.buf.truncate()
        self.ends: list[int] = []

    def add(
        self,
        rec_type: str,
        fields: list[tuple[str, str]],
        *,
        http: _Latin1Headers | None = None,
        payload: bytes = b"",
    ) -> ArcWarcRecord:
        """Serialize one record of type ``rec_type``: WARC header ``fields`` (without the block
        digest, ``Content-Type`` and ``Content-Length``), the HTTP header block ``http`` if any,
        then ``payload`` (bytes). Returns the warcio record written."""
        block = hashlib.sha1(payload)
        if http is not None:
            head = http.header_bytes()
            block = hashlib.sha1(head)
            block.update(payload)
        content_type = RecordBuilder.WARC_RECORDS[rec_type]
        length = len(payload) if rec_type != "revisit" else 0  # a revisit: HTTP headers only
        if http is not None:
            length += len(head)
        # last, in warcio's order: its writer replaces Content-Type and -Length from the end
        fields += [("WARC-Block-Digest", _sha1_label(block.digest())),
                   ("Content-Type", content_type), ("Content-Length", str(length))]  # fmt: skip
        record = ArcWarcRecord(
            "warc", rec_type, _WarcFields(fields), io.BytesIO(payload), http, content_type,
            len(payload),
        )  # fmt: skip
        record.payload_length = len(payload)
        self.writer.write_record(record)
        self.ends.append(self.buf.tell())
        return record

    def compress(self, level: int) -> list[bytes]:
        """One gzip member (:func:`gzip_member`) of each record's bytes, at ``level``.

        The records are compressed from a copy of the thread's buffer (~0.003 ms for a 25 KB
        fetch): a view of the buffer itself would keep it exported, and its next truncation
        failing, for as long as anything held a slice (a profiler, ``gc.get_objects()``)."""
        data = memoryview(self.buf.getvalue())
        starts = [0, *self.ends[:-1]]
        return [gzip_member(data[a:b], level) for a, b in zip(starts, self.ends, strict=True)]


def fetch_records(
    result: FetchResult,
    outlinks: list[str] | None,
    revisit_of: tuple[str, str | None] | None,
    digest: str | None,
    warcinfo_id: str,
    *,
    clock: Callable[[], float],
    new_id: Callable[[], str],
    level: int,
) -> tuple[list[bytes], tuple[str, str, dict[str, str]] | None, Any]:
    """The gzip members of one fetch's records (request, response or revisit, [metadata]), the
    CDXJ capture of its response or revisit (type, WARC-Date, fields; None if the record is not
    indexed) and that record's WARC header block (a warcio ``StatusAndHeaders``: what a reader of
    the record finds in ``rec_headers``). ``revisit_of``: the ``(WARC-Refers-To-Target-URI, -Date)`` of a revisit, with
    ``digest`` ``""`` for a 304 (server-not-modified, WARC 1.1 §6.7.3) and the payload digest
    otherwise (identical-payload-digest, §6.7.2); ``digest`` None: computed here. ``clock``
    (epoch seconds) dates a fetch without a start time; ``new_id`` makes record ids; ``level``
    is the gzip level (:func:`gzip_member`)."""
    date = warc_date(result.started if result.started > 0 else clock())
    req_id, resp_id = new_id(), new_id()
    body = result.raw_body
    if digest is None:
        digest = payload_digest(body)  # "" (a 304): no payload digest
    uri = result.url
    common = [("WARC-Date", date), ("WARC-Target-URI", uri)]
    if warcinfo_id:
        common.append(("WARC-Warcinfo-ID", warcinfo_id))
    if result.ip:
        common.append(("WARC-IP-Address", result.ip))
    records = Records()
    records.add(
        "request",
        [("WARC-Type", "request"), ("WARC-Record-ID", req_id), *common,
         ("WARC-Concurrent-To", resp_id), ("WARC-Payload-Digest", EMPTY_DIGEST)],
        http=_Latin1Headers(
            _request_line(result), list(result.request_headers), is_http_request=True
        ),
    )  # fmt: skip

    statusline = f"{result.status} {result.reason or ''}".rstrip()
    http = _Latin1Headers(
        statusline, stored_response_headers(result), protocol=result.http_version or "HTTP/1.1"
    )
    fields = [("WARC-Type", "response"), ("WARC-Record-ID", resp_id), *common,
              ("WARC-Concurrent-To", req_id)]  # fmt: skip
    if revisit_of is not None:
        refers_uri, refers_date = revisit_of
        fields[0] = ("WARC-Type", "revisit")
        if digest:  # identical payload (WARC 1.1 §6.7.2)
            fields += [("WARC-Profile", REVISIT_PROFILE),
                       ("WARC-Refers-To-Target-URI", refers_uri),
                       ("WARC-Refers-To-Date", refers_date or ""),
                       ("WARC-Payload-Digest", digest)]  # fmt: skip
        else:  # server-not-modified (WARC 1.1 §6.7.3): no payload digest
            fields += [("WARC-Profile", NOT_MODIFIED_PROFILE),
                       ("WARC-Refers-To-Target-URI", refers_uri)]  # fmt: skip
            if refers_date:
                fields.append(("WARC-Refers-To-Date", refers_date))
        response = records.add("revisit", fields, http=http)
    else:
        truncated = _truncated(result)
        if truncated:
            fields.append(("WARC-Truncated", truncated))
        fields.append(("WARC-Payload-Digest", digest))  # given: the body is not hashed again
        response = records.add("response", fields, http=http, payload=body)
    indexed = capture_fields(response.rec_type, response.rec_headers, response.http_headers)
    capture = None if indexed is None else (response.rec_type, date, indexed)

    if outlinks is not None:
        lines = [f"fetchTimeMs: {round(result.download_s * 1000)}"]
        lines += [f"outlink: {link}" for link in outlinks]
        meta = ("\r\n".join(lines) + "\r\n").encode("utf-8")
        records.add(
            "metadata",
            [("WARC-Type", "metadata"), ("WARC-Record-ID", new_id()), *common,
             ("WARC-Concurrent-To", resp_id)],
            payload=meta,
        )  # fmt: skip

    return records.compress(level), capture, response.rec_headers
