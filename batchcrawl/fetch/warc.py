"""WARC 1.1 output of the fetch workers (ISO 28500:2017), records built and serialized by warcio.

One :class:`WarcWriter` per fetch worker writes ``{prefix}-{serial:05d}.warc.gz`` files into a
directory of an fsspec filesystem (``warc/round=7/shard=03-00000.warc.gz``, docs/design.md §3). Each file
starts with a ``warcinfo`` record; each fetch that got an HTTP response adds

* a ``request`` record (the request line and header lines as sent),
* a ``response`` record -- or, for a known duplicate, a ``revisit`` record with the WARC 1.1
  ``identical-payload-digest`` profile (HTTP headers only; WARC 1.1 §6.7.2), or, for a 304 answer
  to a conditional refetch, a ``revisit`` record with the ``server-not-modified`` profile (WARC 1.1
  §6.7.3: ``WARC-Refers-To-Target-URI`` and ``-Date`` of the capture confirmed, no payload digest),
* optionally a ``metadata`` record (``application/warc-fields``) with ``fetchTimeMs`` and one
  ``outlink:`` line per outlink (a block digest, no payload digest: it has no HTTP payload).

The records of one fetch share ``WARC-Date`` (the request start, with microseconds: WARC 1.1 §5.4
allows fractional seconds) and ``WARC-IP-Address``, and point at each other with
``WARC-Concurrent-To``. Every record is its own gzip member (WARC 1.1 Annex D.2), so the ``(filename,
offset, length)`` returned for the response record -- Common Crawl's ``warc_filename``,
``warc_record_offset`` and ``warc_record_length`` -- can be read alone with a range request.

Transfer encoding. :attr:`~batchcrawl.records.FetchResult.raw_body` is already de-chunked
(content-encoding kept), and WARC-Payload-Digest is computed over exactly that (WARC 1.1 §5.9:
"payload ... with any transfer-encoding removed"). The HTTP header block written must then not claim
``Transfer-Encoding: chunked``, or readers would try to de-chunk the stored bytes. We follow Common
Crawl's practice: ``Transfer-Encoding`` is renamed ``X-Crawler-Transfer-Encoding``, a
``Content-Length`` that does not match the stored body is renamed ``X-Crawler-Content-Length``, and a
``Content-Length`` of the stored body is appended. Headers that already agree are written unchanged.
Header values are written back as Latin-1, which reproduces the bytes ``http.client``/urllib3
decoded.

Truncation (WARC 1.1 §5.13): ``WARC-Truncated`` is ``length`` or ``time`` from
``FetchResult.truncated``; a response whose body read failed part-way (``error`` ``reset`` or
``body_short``) is stored with ``disconnect`` (``timeout`` with ``time``).

Records are written by warcio: a ``WARCWriter(..., gzip=False)`` serializes a fetch's records
(warcio ``ArcWarcRecord``s) into a ``BytesIO``; HTTP header blocks are warcio's
``StatusAndHeaders`` text encoded as Latin-1. The fields of each record are put together here, in
the order warcio's ``RecordBuilder`` gives them (the output is byte for byte what the builder
made), with ``WARC-Block-Digest``, ``Content-Type`` and ``Content-Length`` computed from bytes in
hand: the builder's field look-ups and its digest pass cost more CPU than the rest of a record.
The payload digest the fetch worker has already computed is passed in as ``WARC-Payload-Digest``
(the body is hashed once for it, once for the block digest), and each record's serialized bytes are compressed here with one call into one
gzip member (:func:`gzip_member`), outside the writer's lock. Writing is on the fetch workers' hot
path; the cost per compression level (CPU per page, bytes per page) is measured in
``docs/benchmarks.md`` ("WARC compression level"), which is why ``fetch.warc_compress_level``
defaults to 1. Levels 1-3 use Intel ISA-L's deflate (python-isal's ``isal_zlib``, the optional
``batchcrawl[fast]`` dependency) when it is installed: about 3x less CPU than zlib's level 1 and
smaller members; the output is ordinary gzip (RFC 1952) either way. Recompressing a file offline must keep one gzip
member per record, or the offsets in ``fetched`` break.

Files are written in place, not under a temporary name: a rename is a copy on object stores. This is
safe because readers find WARC files only through the ``fetched`` rows of a committed round; the
file of a round that died is an orphan that ``gc`` removes (docs/design.md §3). Since records are separate
gzip members, a partial file is still readable up to its last complete record.
"""

from __future__ import annotations

import base64
import hashlib
import io
import threading
import time
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

try:  # optional (batchcrawl[fast]): ISA-L deflate, same gzip format, far less CPU
    from isal import isal_zlib
except ImportError:  # pragma: no cover - the dev install has it; zlib writes the same format
    isal_zlib = None
from warcio.archiveiterator import ArchiveIterator
from warcio.recordbuilder import RecordBuilder
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from batchcrawl.cdxj import Capture, capture_fields
from batchcrawl.errors import WarcError
from batchcrawl.records import FetchResult
from batchcrawl.store import atomic

WARC_VERSION = "WARC/1.1"
REVISIT_PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
#: WARC 1.1 §6.7.3: the server answered 304 Not Modified to a conditional request.
NOT_MODIFIED_PROFILE = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
CONFORMS_TO = "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
_TRUNCATED_BY_ERROR = {"reset": "disconnect", "body_short": "disconnect", "timeout": "time"}


class WarcSettingError(WarcError, ValueError):
    """A :class:`WarcWriter` argument is out of range (the message names it)."""


@dataclass(frozen=True, slots=True)
class WarcLocation:
    """Where a record is: ``filename`` (directory/name as given to the filesystem), ``offset`` and
    ``length`` in bytes of its gzip member (cc-index ``warc_record_offset``/``_length``)."""

    filename: str
    offset: int
    length: int


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


class _Latin1Headers(StatusAndHeaders):
    """HTTP headers serialized by warcio (``to_str``) as Latin-1, the bytes http.client decoded,
    falling back to warcio's RFC 8187 percent-encoding for characters outside Latin-1."""

    def compute_headers_buffer(self, header_filter=None):
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


@dataclass
class _OpenFile:
    name: str
    handle: Any
    size: int = 0
    records: int = 0
    warcinfo_id: str = ""
    captures: list[Capture] = field(default_factory=list)


class WarcWriter:
    """Writes fetches as WARC 1.1 records, one gzip member per record, rotating files by size.

    Parameters
    ----------
    fs
        An fsspec filesystem (local, ``memory://``, s3 ...). Pass a ``DirFileSystem`` rooted at the
        crawl directory to get file names relative to it.
    directory
        Directory inside ``fs`` (e.g. ``"warc/round=7"``); created if missing.
    prefix
        File name prefix; files are ``{prefix}-{serial:05d}.warc.gz`` with serial 0, 1, 2 ...
    rotate_bytes
        A file is closed, and the next fetch starts a new one, once it holds at least this many
        bytes (compressed). The records of one fetch always stay in one file.
    software
        Value of the ``software`` field of each ``warcinfo`` record, e.g. ``"batchcrawl/0.1"``.
    clock
        Seconds since the epoch, for the ``warcinfo`` WARC-Date and for fetches without a start
        time. Default ``time.time``.
    record_id_maker
        Returns a new WARC-Record-ID including the angle brackets. Default random UUID URNs.
    warcinfo_fields
        Extra ``warcinfo`` fields (``operator``, ``isPartOf``, ``robots`` ...), written in order.
    first_serial
        Serial of the first file (to continue a sequence after a restart).
    compress_level
        Level of each record's gzip member (0 stored, 1 fastest .. 9 smallest; default 6, as
        gzip; 1-3 with ISA-L when installed, :func:`gzip_member`). The fetch worker passes
        ``fetch.warc_compress_level``.
    cdxj_name
        If given, maps a WARC file's path to the path of its CDXJ index, written (whole, sorted)
        when the file is closed: one line per response or revisit record, made from the records
        as they are written (:func:`batchcrawl.cdxj.capture_fields`, the same fields a reader
        finds), ``filename`` the WARC file's bare name. The fetch worker passes
        ``store.paths.warc_cdxj`` when ``fetch.warc_cdxj`` is on, so each closed WARC file of a
        crawl directory can be replayed by pywb without an export.

    Notes
    -----
    Thread-safe: fetch threads may share one writer. The records of a fetch are built and
    compressed without holding the writer's lock (zlib releases the GIL, so threads compress in
    parallel) and appended under it with one ``write``, so they stay contiguous and in one file.

    Raises
    ------
    WarcSettingError
        ``rotate_bytes`` < 1, ``compress_level`` outside 0..9, an empty ``prefix`` or one with ``/``.
    """

    def __init__(
        self,
        fs: Any,
        directory: str,
        prefix: str,
        rotate_bytes: int,
        software: str,
        *,
        clock: Callable[[], float] = time.time,
        record_id_maker: Callable[[], str] = make_record_id,
        warcinfo_fields: dict[str, str] | None = None,
        first_serial: int = 0,
        compress_level: int = 6,
        cdxj_name: Callable[[str], str] | None = None,
    ) -> None:
        if rotate_bytes < 1:
            raise WarcSettingError(
                f"rotate_bytes={rotate_bytes!r}: expected a positive number of bytes"
            )
        if not 0 <= compress_level <= 9:
            raise WarcSettingError(
                f"compress_level={compress_level!r}: expected 0 (none) to 9 (smallest)"
            )
        if not prefix or "/" in prefix:
            raise WarcSettingError(
                f"prefix={prefix!r}: expected a non-empty file name prefix without '/'"
            )
        self.fs = fs
        self.directory = directory.rstrip("/")
        self.prefix = prefix
        self.rotate_bytes = rotate_bytes
        self.software = software
        self.clock = clock
        self.record_id_maker = record_id_maker
        self.warcinfo_fields = dict(warcinfo_fields or {})
        self._serial = first_serial
        self._file: _OpenFile | None = None
        self._lock = threading.Lock()
        self.compress_level = compress_level
        self.cdxj_name = cdxj_name
        self.files: list[str] = []
        """Paths of the files opened so far, in order."""
        self.records_written = 0
        """Number of WARC records written (all types, all files)."""

    # -- context manager ----------------------------------------------------------------------
    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the current file (if any). Further writes open the next serial."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._file is not None:
            f, self._file = self._file, None
            try:
                f.handle.close()
            except OSError as exc:
                raise WarcError(f"{f.name}: cannot close WARC file: {exc}") from exc
            if self.cdxj_name is not None:
                self._write_cdxj(f)

    def _write_cdxj(self, f: _OpenFile) -> None:
        """The sorted CDXJ index of the closed file ``f`` beside it (``cdxj_name``)."""
        path = self.cdxj_name(f.name)
        name = f.name.rsplit("/", 1)[-1]
        text = "".join(sorted(c.line(name) + "\n" for c in f.captures))
        try:
            with atomic.open_whole(self.fs, path) as out:
                out.write(text.encode("utf-8"))
        except OSError as exc:
            raise WarcError(f"{path}: cannot write the CDXJ index of {f.name}: {exc}") from exc

    # -- writing ------------------------------------------------------------------------------
    def write_fetch(
        self,
        result: FetchResult,
        *,
        outlinks: list[str] | None = None,
        revisit_of: tuple[str, str] | None = None,
        digest: str | None = None,
        not_modified_of: tuple[str, str | None] | None = None,
    ) -> WarcLocation | None:
        """Write the records of one fetch and return where its response (or revisit) record is.

        Parameters
        ----------
        result
            The fetch; ``result.url`` (canonical) becomes WARC-Target-URI, ``result.started`` the
            WARC-Date.
        outlinks
            If given (even empty), a ``metadata`` record lists them, one ``outlink:`` field each.
        revisit_of
            ``(target_uri, warc_date)`` of the earlier capture with the same payload digest: a
            ``revisit`` record (identical-payload-digest profile, HTTP headers only) is written
            instead of a ``response``.
        digest
            ``payload_digest(result.raw_body)`` when the caller has computed it already (the fetch
            worker needs it for ``content_digest``), so the body is hashed once less; computed
            here when None. Not checked: pass the digest of exactly ``result.raw_body``.
        not_modified_of
            ``(target_uri, warc_date or None)`` of the capture a 304 confirmed: a ``revisit``
            record with the server-not-modified profile (WARC 1.1 §6.7.3: HTTP headers only, no
            payload digest) is written instead of a ``response``.

        Returns
        -------
        WarcLocation or None
            None, and nothing written, when the fetch got no HTTP response (``status`` is None:
            network error, DNS failure, refused address, robots).
        """
        if result.status is None:
            return None
        with self._lock:
            if self._file is None:
                self._open_next()
            f = self._file
        if not_modified_of is not None:
            revisit_of, digest = not_modified_of, ""  # type: ignore[assignment]
        parts, capture = self._build(result, outlinks, revisit_of, digest, f.warcinfo_id)
        with self._lock:
            if self._file is not f:  # rotated (or closed) meanwhile: rebuild for the new file
                if self._file is None:
                    self._open_next()
                f = self._file
                parts, capture = self._build(result, outlinks, revisit_of, digest, f.warcinfo_id)
            location = WarcLocation(f.name, f.size + len(parts[0]), len(parts[1]))
            if self.cdxj_name is not None and capture is not None:
                rec_type, date, fields = capture
                f.captures.append(Capture(rec_type, date, fields, location.offset, location.length))
            self._append(b"".join(parts), len(parts))
            if f.size >= self.rotate_bytes:
                self._close()
            return location

    def _build(
        self,
        result: FetchResult,
        outlinks: list[str] | None,
        revisit_of: tuple[str, str] | None,
        digest: str | None,
        warcinfo_id: str,
    ) -> tuple[list[bytes], tuple[str, str, dict[str, str]] | None]:
        """The gzip members of one fetch's records (request, response or revisit, [metadata]) and
        the CDXJ capture of its response or revisit (type, WARC-Date, fields; None if the
        record is not indexed)."""
        date = warc_date(result.started if result.started > 0 else self.clock())
        req_id, resp_id = self.record_id_maker(), self.record_id_maker()
        body = result.raw_body
        if digest is None:
            digest = payload_digest(body)  # "" (a 304): no payload digest
        uri = result.url
        common = [("WARC-Date", date), ("WARC-Target-URI", uri)]
        if warcinfo_id:
            common.append(("WARC-Warcinfo-ID", warcinfo_id))
        if result.ip:
            common.append(("WARC-IP-Address", result.ip))
        records = _Records()
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
                           ("WARC-Refers-To-Date", refers_date), ("WARC-Payload-Digest", digest)]  # fmt: skip
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
        fields = capture_fields(response.rec_type, response.rec_headers, response.http_headers)
        capture = None if fields is None else (response.rec_type, date, fields)

        if outlinks is not None:
            lines = [f"fetchTimeMs: {round(result.download_s * 1000)}"]
            lines += [f"outlink: {link}" for link in outlinks]
            meta = ("\r\n".join(lines) + "\r\n").encode("utf-8")
            records.add(
                "metadata",
                [("WARC-Type", "metadata"), ("WARC-Record-ID", self.record_id_maker()), *common,
                 ("WARC-Concurrent-To", resp_id)],
                payload=meta,
            )  # fmt: skip

        return records.compress(self.compress_level), capture

    # -- internals ----------------------------------------------------------------------------
    def _append(self, data: bytes, n_records: int) -> None:
        f = self._file
        try:
            f.handle.write(data)
        except OSError as exc:
            raise WarcError(f"{f.name}: cannot write WARC records: {exc}") from exc
        f.size += len(data)
        f.records += n_records
        self.records_written += n_records

    def _open_next(self) -> None:
        name = f"{self.prefix}-{self._serial:05d}.warc.gz"
        path = f"{self.directory}/{name}" if self.directory else name
        self._serial += 1
        try:
            if self.directory:
                self.fs.makedirs(self.directory, exist_ok=True)
            handle = self.fs.open(path, "wb")
        except OSError as exc:
            raise WarcError(f"{path}: cannot create WARC file: {exc}") from exc
        self._file = _OpenFile(path, handle)
        self.files.append(path)
        info_id = self.record_id_maker()
        fields = {
            "software": self.software,
            "format": "WARC File Format 1.1",
            "conformsTo": CONFORMS_TO,
            **self.warcinfo_fields,
        }
        body = "".join(f"{k}: {v}\r\n" for k, v in fields.items() if v).encode("utf-8")
        records = _Records()
        records.add(
            "warcinfo",
            [("WARC-Type", "warcinfo"), ("WARC-Record-ID", info_id), ("WARC-Filename", name),
             ("WARC-Date", warc_date(self.clock()))],
            payload=body,
        )  # fmt: skip
        self._append(records.compress(self.compress_level)[0], 1)
        self._file.warcinfo_id = info_id


class _Writer(WARCWriter):
    """warcio's writer for the complete records :class:`_Records` hands it.

    No ``WARC-Payload-Digest`` on ``metadata`` records: WARC 1.1 §5.9 defines the payload digest
    for records whose block has a well-defined payload (an HTTP message's entity); a ``metadata``
    block (``application/warc-fields``) has none, and FastWARC's payload check (``fastwarc check
    -p``) rejects a digest there. ``warcinfo`` and ``revisit`` are already left out by warcio.
    Every record arrives with its digests, so warcio's digest pass (:meth:`ensure_digest`: look the
    fields up, read the payload through a digester) has nothing to do and is skipped.
    """

    NO_PAYLOAD_DIGEST_TYPES = (*WARCWriter.NO_PAYLOAD_DIGEST_TYPES, "metadata")

    def ensure_digest(self, record, block=True, payload=True):
        """Nothing to do: :meth:`_Records.add` wrote both digests into ``record``."""


class _WarcFields(StatusAndHeaders):
    """A WARC header block whose ``(name, value)`` fields are ``str`` already (warcio's
    constructor would convert each pair again)."""

    def __init__(self, fields: list[tuple[str, str]]) -> None:
        self.statusline = ""
        self.headers = fields
        self.protocol = WARC_VERSION
        self.total_len = 0
        self.headers_buff = None


_THREAD_WRITER = threading.local()


class _Records:
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
            http.compute_headers_buffer()
            block = hashlib.sha1(http.headers_buff)
            block.update(payload)
        content_type = RecordBuilder.WARC_RECORDS[rec_type]
        length = len(payload) if rec_type != "revisit" else 0  # a revisit: HTTP headers only
        if http is not None:
            length += len(http.headers_buff)
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


# --- reading ---------------------------------------------------------------------------------------


@dataclass
class StoredRecord:
    """One record read back from a WARC file (for tests, tools and ``batchcrawl export``).

    ``payload`` is the record's payload as stored (after the HTTP headers for HTTP records; content-
    and transfer-encoding *not* removed).
    """

    rec_type: str
    target_uri: str | None
    rec_headers: list[tuple[str, str]]
    http_status: int | None
    http_headers: list[tuple[str, str]] = field(default_factory=list)
    payload: bytes = b""
    digests_ok: bool | None = None


def read_record(
    fs: Any, filename: str, offset: int, length: int | None = None, *, arc: bool = False
) -> StoredRecord:
    """Read exactly one record at ``offset`` (bytes) of ``filename`` in ``fs``.

    ``length``, if given, limits the read to that many bytes (one gzip member, as a range request
    would); the record's block and payload digests are checked (``digests_ok``: True, False, or None
    when the record carries none or its block is cut short). ``arc=True`` also accepts a legacy ARC
    record (converted by warcio); otherwise only WARC records are accepted, so that junk is never
    mistaken for an ARC header line.

    Raises
    ------
    WarcError
        No complete, parsable WARC record at that location.
    """
    try:
        with fs.open(filename, "rb") as fh:
            fh.seek(offset)
            data = fh.read(length) if length is not None else fh.read()
    except OSError as exc:
        raise WarcError(f"{filename}: cannot read at offset {offset}: {exc}") from exc
    try:
        it = ArchiveIterator(io.BytesIO(data), check_digests=True, arc2warc=arc)
        record = next(iter(it))
        if record.format != "warc" and not (arc and record.format.startswith("arc")):
            raise WarcError(
                f"{filename}: no WARC record at offset {offset} (found {record.format})"
            )
        payload = record.raw_stream.read()
        status = record.http_headers.get_statuscode() if record.http_headers else None
        if record.rec_type == "request":
            status = None
        return StoredRecord(
            rec_type=record.rec_type,
            target_uri=record.rec_headers.get_header("WARC-Target-URI"),
            rec_headers=list(record.rec_headers.headers),
            http_status=int(status) if status and status.isdigit() else None,
            http_headers=list(record.http_headers.headers) if record.http_headers else [],
            payload=payload,
            digests_ok=record.digest_checker.passed,
        )
    except WarcError:
        raise
    except StopIteration:
        raise WarcError(f"{filename}: no WARC record at offset {offset}") from None
    except Exception as exc:  # warcio raises a variety of parse errors
        raise WarcError(f"{filename}: bad WARC record at offset {offset}: {exc}".strip()) from exc
