"""Extraction at fetch time (``extract.at_fetch``, issue 32 item 2): the fetch worker's page
processor hands each capture it archived to a :class:`TextsAtFetch`, which makes its ``text`` row
and WET record as :mod:`batchcrawl.extract.warcfile` would from the stored record, and writes, per
WARC file of the run, the same WET file and ``text`` file ``batchcrawl extract`` writes for it.
The round (or stream micro-batch) commits them with its other files; ``batchcrawl extract`` then
finds them listed and skips those WARC files.

Same rows, by construction: the row comes from :func:`~batchcrawl.extract.capture.capture_row`
given the ``fetched`` row, the WARC header block of the record just written and the payload
decoded from the stored body and headers (:func:`~batchcrawl.extract.payload.decode_body`); the
WET file gets the WARC file's ``warcinfo`` date and its captures in file order (pages are
archived one at a time, under the fetch loop's processing lock). StormCrawler and Nutch parse in
the fetch topology the same way; the CPU it costs per page is measured by
``scripts/bench_extract.py --at-fetch-pairs``.

Files: a WET file is written in place as its WARC file is (readers find both only through the
rows of a committed round, :mod:`batchcrawl.fetch.warc`). The ``text`` file is written whole or not
at all (:func:`batchcrawl.store.atomic.open_whole`), one row group per :data:`ROWS_PER_GROUP`
rows, and published when its WARC file is done (the next page goes to another file, or the run
ends): a worker holds at most that many rows, whatever ``fetch.warc_rotate_bytes``. Its rows are
those ``batchcrawl extract`` writes in one row group.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections import Counter
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from batchcrawl.errors import first_line
from batchcrawl.extract.payload import PayloadError, decode_body
from batchcrawl.extract.rows import base_row, wants_text
from batchcrawl.extract.wet import WetWriter, warcinfo_fields
from batchcrawl.records import FetchResult
from batchcrawl.store import atomic, paths, schemas
from batchcrawl.store.crawldir import TABLE_PARQUET_OPTIONS, FileEntry

log = logging.getLogger(__name__)

#: Text rows a worker holds before it writes them as a row group of their text file (~5 KB each).
ROWS_PER_GROUP = 1000


@dataclass
class _TextFile:
    """The WET file and ``text`` file of one WARC file, while its pages come: ``rows`` not
    written yet, ``out`` holding the text file's whole-or-nothing handle once one was opened."""

    warc: str
    handle: IO[bytes]
    wet: WetWriter
    rows: list[dict[str, Any]] = field(default_factory=list)
    out: ExitStack = field(default_factory=ExitStack)
    parquet: pq.ParquetWriter | None = None
    written: int = 0

    @property
    def text_rel(self) -> str:
        """The text file's path: ``text/round=R/<WARC name>.parquet``, as extract names it."""
        round_ = paths.parse_round(self.warc)
        return paths.text_file(round_ if round_ is not None else 0, self.warc)


class TextsAtFetch:
    """The ``text`` rows and WET files of one fetch run's WARC files (one per run, like its
    :class:`~batchcrawl.fetch.warc.WarcWriter`).

    Parameters
    ----------
    fs
        The crawl directory's filesystem, rooted at the crawl (the WARC writer's).

    Not thread-safe: :meth:`add` is called under the fetch loop's processing lock, :meth:`close`
    once the run's fetch threads stopped (or, in a stream, under the processing lock).
    ``files`` lists the ``text`` files written, ``counts`` the captures by reason (as
    ``batchcrawl extract`` counts them).
    """

    def __init__(self, fs: Any) -> None:
        self.fs = fs
        self.files: list[FileEntry] = []
        self.counts: Counter[str] = Counter()
        self._file: _TextFile | None = None

    def add(
        self, fetched: dict[str, Any], result: FetchResult, location: Any, warcinfo_date: str
    ) -> float:
        """Make the text row of the capture just archived at ``location`` (a
        :class:`~batchcrawl.fetch.warc.WarcLocation` with its record's headers) for the
        ``fetched`` row of ``result``; ``warcinfo_date`` is the WARC-Date of that WARC file's
        ``warcinfo`` record. Returns the thread CPU seconds spent.

        Raises ``OSError`` when the WET or text file cannot be written (full or read-only
        storage: the fetch loop stops the run). Any other error extracting the page gives a row
        with the reason ``extract_failed: ...`` (logged): extraction never fails a fetch."""
        t0 = time.thread_time()
        f = self._file
        if f is None or f.warc != location.filename:
            self._finish()
            f = self._open(location.filename, warcinfo_date)
        headers = location.headers
        payload: bytes | Exception = b""
        if headers.get_header("WARC-Type") == "response" and wants_text(fetched) is None:
            try:
                payload = decode_body(result.raw_body, "",
                                      result.header("Content-Encoding") or "")  # fmt: skip
            except PayloadError as exc:
                payload = exc
        # imported on first use: resiliparse and pycld2 (~15 MB per process) stay out of every
        # Dask worker and driver that imports this module while extract.at_fetch is off (issue 33)
        from batchcrawl.extract.capture import capture_row

        try:
            row = capture_row(fetched, headers, payload, f.wet, self.counts)
        except OSError:
            raise
        except Exception as exc:  # a bug in a library must not fail the fetch: a reasoned row
            log.exception("extracting the text of %s failed", fetched["url"])
            self.counts["extract_failed"] += 1
            kind, digest = (
                headers.get_header("WARC-Type"),
                headers.get_header("WARC-Payload-Digest"),
            )
            row = {
                **base_row(fetched, kind, digest),
                "reason": f"extract_failed: {first_line(exc)}",
            }
        if row is not None:
            f.rows.append(row)
            if len(f.rows) >= ROWS_PER_GROUP:
                self._write_rows(f)
        return time.thread_time() - t0

    def close(self) -> list[FileEntry]:
        """Finish the current WARC file's WET and ``text`` files; return every ``text`` file
        written by this run."""
        self._finish()
        return list(self.files)

    def _open(self, warc_rel: str, warcinfo_date: str) -> _TextFile:
        wet_rel = paths.wet_file(warc_rel)
        handle = self.fs.open(wet_rel, "wb")
        wet = WetWriter(handle, posixpath.basename(wet_rel))
        wet.write_warcinfo(warcinfo_date, warcinfo_fields(warc_rel))
        self._file = _TextFile(warc_rel, handle, wet)
        return self._file

    def _write_rows(self, f: _TextFile) -> None:
        """Write ``f``'s held rows as a row group of its text file (opened on first use)."""
        wet_rel = paths.wet_file(f.warc)
        for row in f.rows:
            if row.get("wet_record_offset") is not None:
                row["wet_filename"] = wet_rel
        table = schemas.conform("text", pa.Table.from_pylist(f.rows, schema=schemas.schema("text")))
        if f.parquet is None:
            fh = f.out.enter_context(atomic.open_whole(self.fs, f.text_rel))
            f.parquet = pq.ParquetWriter(fh, table.schema, **TABLE_PARQUET_OPTIONS)
        f.parquet.write_table(table)
        f.written += table.num_rows
        f.rows = []

    def _finish(self) -> None:
        """Close the current WET file and publish its text file (even without rows)."""
        f, self._file = self._file, None
        if f is None:
            return
        f.handle.close()
        self._write_rows(f)
        f.parquet.close()
        f.out.close()  # the text file appears whole at its name
        self.files.append(FileEntry(f.text_rel, f.written))
