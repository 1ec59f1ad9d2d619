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

Checkpoints (a stream, docs/design.md §8c). :meth:`WarcWriter.checkpoint` commits what was written so
far without closing the file: the file is flushed and fsynced, and the caller gets a :class:`WarcCheckpoint` -- the files closed since the last
checkpoint and the open file's size, always the end of a whole gzip member (a fetch's records are
appended under the writer's lock with one ``write``). That size goes into the commit; after a crash the
open file is cut back to it (:mod:`batchcrawl.engine.warcopen`), which leaves whole members only. So a
stream writes one file per shard per ``fetch.warc_max_bytes`` (Common Crawl's ~1 GB files), not one per
micro-batch. Only a local filesystem can be read while it grows and be cut back (``os.truncate``): on
an object store an object exists only once its upload is complete, so there a checkpoint closes the file
(one file per shard per checkpoint, as before) -- :attr:`WarcWriter.appends_in_place` says which. The
CDXJ of an open file is rewritten (whole, sorted, never past the last checkpoint's end) at a
checkpoint once its captures grew by a quarter since it was last written (:meth:`WarcWriter.index_open`:
rewriting a 1 GB file's ~32 MB index at every checkpoint would cost more than the records), and
whole when the file closes.
"""

from __future__ import annotations

import io
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fsspec.implementations.dirfs import DirFileSystem
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.cdxj import cdxj_lines, line_head, line_tail
from batchcrawl.errors import WarcError
from batchcrawl.fetch.warcrecords import (
    CONFORMS_TO,
    EMPTY_DIGEST,
    ISAL_LEVELS,
    NOT_MODIFIED_PROFILE,
    REVISIT_PROFILE,
    WARC_VERSION,
    Records,
    fetch_records,
    gzip_member,
    make_record_id,
    payload_digest,
    stored_response_headers,
    warc_date,
)
from batchcrawl.records import FetchResult
from batchcrawl.store import atomic

__all__ = [
    "CONFORMS_TO", "EMPTY_DIGEST", "ISAL_LEVELS", "NOT_MODIFIED_PROFILE", "REVISIT_PROFILE",
    "WARC_VERSION", "StoredRecord", "WarcCheckpoint", "WarcLocation", "WarcSettingError",
    "WarcWriter", "appends_in_place", "reindex",
    "gzip_member", "make_record_id", "payload_digest", "read_record", "stored_response_headers",
    "warc_date",
]  # fmt: skip


#: An open file's CDXJ is rewritten at a checkpoint once its committed captures are more than this
#: many times those of its last CDXJ (:meth:`WarcWriter.index_open`).
CDXJ_GROWTH = 1.25


class WarcSettingError(WarcError, ValueError):
    """A :class:`WarcWriter` argument is out of range (the message names it)."""


@dataclass(frozen=True, slots=True)
class WarcLocation:
    """Where a record is: ``filename`` (directory/name as given to the filesystem), ``offset`` and
    ``length`` in bytes of its gzip member (cc-index ``warc_record_offset``/``_length``)."""

    filename: str
    offset: int
    length: int
    #: the record's WARC header block (warcio ``StatusAndHeaders``), for extraction at fetch time
    headers: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class WarcCheckpoint:
    """What :meth:`WarcWriter.checkpoint` commits.

    Attributes
    ----------
    closed
        Files closed (complete, with their CDXJ) since the previous checkpoint, in order.
    open_file
        The file still open (its records so far flushed, fsynced and indexed), or None.
    open_end
        ``open_file``'s size in bytes: the end of its last whole record (0 without an open file).
        A crash cuts the file back to it.
    """

    closed: tuple[str, ...] = ()
    open_file: str | None = None
    open_end: int = 0


@dataclass
class _OpenFile:
    name: str
    handle: Any
    size: int = 0
    records: int = 0
    warcinfo_id: str = ""
    date: str = ""
    #: the CDXJ line of each capture written to the file, UTF-8 with its newline, in file order:
    #: one bytes object each (~360 bytes) instead of a capture's fields (~680 bytes in 8 objects),
    #: since an open file's lines stay in memory until it closes (a ~1 GB file: ~200,000 lines)
    captures: list[bytes] = field(default_factory=list)
    committed: int = 0  # captures[:committed] are before the last checkpoint's end
    indexed: int = 0  # captures in the CDXJ written last (guarded by the writer's index lock)

    def __post_init__(self) -> None:
        self.basename = self.name.rsplit("/", 1)[-1]  # the CDXJ lines' ``filename``


def appends_in_place(fs: Any) -> bool:
    """True if files of ``fs`` (an fsspec filesystem, possibly a ``DirFileSystem`` over one) can
    be read while they grow and cut back (``os.truncate``): the local filesystem."""
    while isinstance(fs, DirFileSystem):
        fs = fs.fs
    return atomic.is_local(fs)


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
        when the file is closed and at each :meth:`checkpoint` it stays open across: one line per response or revisit record, made from the records
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
        _check_prefix(prefix)
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
        self._index_lock = threading.Lock()  # orders CDXJ writes of one file (close, checkpoint)
        self.compress_level = compress_level
        self.cdxj_name = cdxj_name
        self.files: list[str] = []
        """Paths of the files opened so far, in order."""
        self._closed: list[str] = []  # closed since the last checkpoint
        self.appends_in_place = appends_in_place(fs)
        """Whether a checkpoint keeps the file open (:func:`appends_in_place`)."""
        self.records_written = 0
        """Number of WARC records written (all types, all files)."""
        self.dates: dict[str, str] = {}
        """``WARC-Date`` of the ``warcinfo`` record of each file opened so far, by path."""

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
                self._write_cdxj(f, self.cdxj_name, f.captures)
            self._closed.append(f.name)

    def checkpoint(
        self, directory: str | None = None, prefix: str | None = None, *, index: bool = True
    ) -> WarcCheckpoint:
        """Commit the records written so far (see the module doc, "Checkpoints").

        The open file is flushed and fsynced; it stays open when :attr:`appends_in_place`, else it
        is closed (and indexed). Files opened from now on go to ``directory`` with ``prefix``
        when given (the next micro-batch's folder and name), the serial going on. ``index``: also
        call :meth:`index_open` (a caller holding a lock that fetch threads wait on passes False
        and calls it after releasing that lock).

        Raises
        ------
        WarcError
            The file cannot be flushed or its CDXJ written (the message names it).
        WarcSettingError
            ``prefix`` is empty or holds ``/``.
        """
        with self._lock:
            f = self._file
            if f is not None and not self.appends_in_place:
                self._close()
                f = None
            if f is not None:
                try:
                    f.handle.flush()
                    os.fsync(f.handle.fileno())
                except OSError as exc:
                    raise WarcError(f"{f.name}: cannot flush WARC records: {exc}") from exc
                f.committed = len(f.captures)
            if prefix is not None:
                _check_prefix(prefix)
                self.prefix = prefix
            if directory is not None:
                self.directory = directory.rstrip("/")
            closed, self._closed = tuple(self._closed), []
            point = WarcCheckpoint(closed) if f is None else WarcCheckpoint(closed, f.name, f.size)
        if index:
            self.index_open()
        return point

    def index_open(self) -> bool:
        """Rewrite the open file's CDXJ (whole, sorted) with the captures before its last
        checkpoint, if they grew by :data:`CDXJ_GROWTH` since it was last written (so the
        rewrites of one file cost a few times its index, not its index per checkpoint; the
        newest captures of an open file may wait for a later rewrite or the close). Returns
        whether it wrote. Runs outside the writer's lock: fetch threads go on writing."""
        with self._lock:
            f = self._file
            if f is None or self.cdxj_name is None or f.committed <= f.indexed * CDXJ_GROWTH:
                return False
            captures = f.captures[: f.committed]
        self._write_cdxj(f, self.cdxj_name, captures)
        return True

    def _write_cdxj(
        self, f: _OpenFile, cdxj_name: Callable[[str], str], captures: list[bytes]
    ) -> None:
        """The sorted CDXJ index of ``captures`` of ``f`` beside it (``cdxj_name``), written whole
        (a reader sees the old or the new index), unless one of more captures was written since
        they were taken (the close's, racing a checkpoint's)."""
        path = cdxj_name(f.name)
        text = b"".join(sorted(captures))  # UTF-8 bytes sort as their code points do
        with self._index_lock:
            if len(captures) <= f.indexed and f.indexed:
                return
            try:
                with atomic.open_whole(self.fs, path) as out:
                    out.write(text)
            except OSError as exc:
                raise WarcError(f"{path}: cannot write the CDXJ index of {f.name}: {exc}") from exc
            f.indexed = len(captures)

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
            f = self._file or self._open_next()
        refers: tuple[str, str | None] | None = revisit_of
        if not_modified_of is not None:
            refers, digest = not_modified_of, ""
        parts, head, headers = self._records(result, outlinks, refers, digest, f.warcinfo_id)
        with self._lock:
            if self._file is not f:  # rotated (or closed) meanwhile: rebuild for the new file
                f = self._file or self._open_next()
                parts, head, headers = self._records(
                    result, outlinks, refers, digest, f.warcinfo_id
                )
            location = WarcLocation(f.name, f.size + len(parts[0]), len(parts[1]), headers)
            if head is not None:
                line = line_tail(head, location.offset, location.length, f.basename) + "\n"
                f.captures.append(line.encode("utf-8"))
            self._append(f, b"".join(parts), len(parts))
            if f.size >= self.rotate_bytes:
                self._close()
            return location

    def _records(
        self,
        result: FetchResult,
        outlinks: list[str] | None,
        revisit_of: tuple[str, str | None] | None,
        digest: str | None,
        warcinfo_id: str,
    ) -> tuple[list[bytes], str | None, Any]:
        """The fetch's gzip members, the head of its CDXJ line (:func:`batchcrawl.cdxj.line_head`;
        None when no CDXJ is written or the record is not indexed) and the response's WARC
        headers; built outside the writer's lock."""
        parts, capture, headers = fetch_records(
            result, outlinks, revisit_of, digest, warcinfo_id, clock=self.clock,
            new_id=self.record_id_maker, level=self.compress_level,
        )  # fmt: skip
        if self.cdxj_name is None or capture is None:
            return parts, None, headers
        _, date, fields = capture
        return parts, line_head(date, fields), headers

    # -- internals ----------------------------------------------------------------------------
    def _append(self, f: _OpenFile, data: bytes, n_records: int) -> None:
        try:
            f.handle.write(data)
        except OSError as exc:
            raise WarcError(f"{f.name}: cannot write WARC records: {exc}") from exc
        f.size += len(data)
        f.records += n_records
        self.records_written += n_records

    def _open_next(self) -> _OpenFile:
        """Open the next serial's file, write its ``warcinfo`` record, and return it."""
        name = f"{self.prefix}-{self._serial:05d}.warc.gz"
        path = f"{self.directory}/{name}" if self.directory else name
        self._serial += 1
        try:
            if self.directory:
                self.fs.makedirs(self.directory, exist_ok=True)
            handle = self.fs.open(path, "wb")
        except OSError as exc:
            raise WarcError(f"{path}: cannot create WARC file: {exc}") from exc
        f = self._file = _OpenFile(path, handle)
        self.files.append(path)
        info_id = self.record_id_maker()
        fields = {
            "software": self.software,
            "format": "WARC File Format 1.1",
            "conformsTo": CONFORMS_TO,
            **self.warcinfo_fields,
        }
        body = "".join(f"{k}: {v}\r\n" for k, v in fields.items() if v).encode("utf-8")
        f.date = self.dates[path] = warc_date(self.clock())
        records = Records()
        records.add(
            "warcinfo",
            [("WARC-Type", "warcinfo"), ("WARC-Record-ID", info_id), ("WARC-Filename", name),
             ("WARC-Date", f.date)],
            payload=body,
        )  # fmt: skip
        self._append(f, records.compress(self.compress_level)[0], 1)
        f.warcinfo_id = info_id
        return f


def reindex(fs: Any, warc_path: str, cdxj_path: str) -> int:
    """Write the sorted CDXJ index of the WARC file ``warc_path`` of ``fs`` at ``cdxj_path``,
    whole, from its records read back (:func:`batchcrawl.cdxj.scan`: the lines the writer
    makes); returns the lines written. For a file cut back after a crash
    (:mod:`batchcrawl.engine.warcopen`).

    Raises
    ------
    WarcError
        The file cannot be read as WARC, or the index cannot be written.
    """
    try:
        with fs.open(warc_path, "rb") as fh:
            lines = sorted(cdxj_lines(fh, warc_path.rsplit("/", 1)[-1]))
        with atomic.open_whole(fs, cdxj_path) as out:
            out.write("".join(line + "\n" for line in lines).encode("utf-8"))
    except OSError as exc:
        raise WarcError(f"{cdxj_path}: cannot index {warc_path}: {exc}") from exc
    return len(lines)


def _check_prefix(prefix: str) -> None:
    if not prefix or "/" in prefix:
        raise WarcSettingError(
            f"prefix={prefix!r}: expected a non-empty file name prefix without '/'"
        )


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
