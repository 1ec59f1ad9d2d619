"""The crawl's DuckDB views as SQL text, and the ``crawl.duckdb`` file that holds them.

:func:`view_body` gives the ``SELECT`` of one table's view over exactly the files a manifest names
(docs/design.md §9); it is plain text, so making it needs no DuckDB. :func:`refresh_file` writes
``CRAWL/crawl.duckdb`` with those views over crawl-relative paths (a temp file renamed into place:
readers see the old or the new views, never a half-written file), DuckDB doing the writing:

* in this process (the default: ``batchcrawl init``, ``inject``, tests), or
* while a crawl runs (:func:`background_refresh`, entered by ``batchcrawl crawl`` and ``round``), in
  a short-lived child process (``python -m batchcrawl.store.duckdbfile``, the job as JSON on
  stdin), one at a time in a background thread of the driver, the newest committed generation
  first. The
  driver of a crawl that runs for weeks then never loads DuckDB (its library and state are ~50 MB
  of a driver's ~200 MB; issue 16), and a commit does not wait for the file. At most one refresh
  starts per :data:`REFRESH_INTERVAL_S`, so during a crawl the file may name a generation up to
  that old; leaving the context writes the newest at once and waits for it, so ``crawl.duckdb``
  names the newest generation once the crawl returns. A failed refresh is logged, never raised:
  the manifest is the truth and the next commit writes the file again (``batchcrawl sql`` never
  reads the file).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from batchcrawl.errors import first_line
from batchcrawl.store import duckdbfile, schemas
from batchcrawl.store.child import run_module
from batchcrawl.store.crawldir import AFTER_COMMIT, CrawlDir, Manifest
from batchcrawl.store.duckdbfile import literal, publish_file
from batchcrawl.store.paths import COMMITS_DIR, DUCKDB_FILE

log = logging.getLogger(__name__)

#: Least seconds between the starts of two background refreshes (a stream commits every
#: ``stream.flush_interval_s``, and a child process costs ~0.3 s of CPU): during a crawl the file
#: may lag the newest generation by this much, never once the crawl has returned.
REFRESH_INTERVAL_S = 30.0
#: Seconds a child process may take to write ``crawl.duckdb`` before it is killed (it reads one
#: Parquet footer per file the views name).
CHILD_TIMEOUT_S = 600.0
#: Seconds a stopping command waits for the last refresh (:func:`background_refresh`).
STOP_WAIT_S = 0.5
#: Seconds between two looks at whether the last refresh's child has its job, once a stopping
#: command's wait is over (:meth:`_Background.wait`).
FED_POLL_S = 0.005

#: The key that delta runs of a table replace rows by (newest wins).
_RUN_KEYS = {"frontier": "url_key", "hosts": "host"}


def view_body(
    crawl: CrawlDir, manifest: Manifest, table: str, *, relative: bool = False
) -> str | None:
    """The ``SELECT`` of ``table``'s view over the files of ``manifest`` (absolute paths or URLs,
    or with ``relative`` paths relative to the crawl root passed through the ``crawl_files`` macro
    of ``crawl.duckdb``, so a copied or moved crawl reads its own files), or None when the
    generation lists no file for it (the view is then empty, typed by ``storage/schema.sql``:
    :func:`batchcrawl.store.duckdbfile.create_views`). A table with delta runs shows one row per
    key (the frontier's ``url_key``, the ``hosts`` table's ``host``), the newest."""
    rels = manifest.files(table)
    if not rels:
        return None
    listing = ", ".join(literal(rel if relative else crawl.full_url(rel)) for rel in rels)
    files = f"crawl_files([{listing}])" if relative else f"[{listing}]"
    if table == "text":
        return _text_sql(files)
    # content and domainlinks rows are unique across their runs (insert-only sets): no merge
    if table not in ("content", "domainlinks") and any(
        e.run for e in manifest.tables.get(table, ())
    ):
        return _newest_wins_sql(files, _RUN_KEYS[table])
    # by name: files written before a column was added read it as NULL
    return f"SELECT * FROM read_parquet({files}, union_by_name = true)"


#: Columns of a ``text`` row that describe the capture itself; the others describe its payload,
#: and a revisit row takes them from the row of the capture it repeats.
TEXT_CAPTURE_COLUMNS = (
    "url_key", "url", "url_host_name", "fetch_time", "round", "shard", "record_type",
    "content_digest", "reason", "warc_filename", "warc_record_offset",
)  # fmt: skip


def _text_sql(files: str) -> str:
    """The ``text`` view (issue 32): its rows, each revisit row's payload columns (text,
    languages, metadata, WET record) taken from the first response row with the same payload
    digest (by fetch time), NULL if none was extracted. Revisits reuse the original's row by
    digest, as a WARC revisit record refers to its original (WARC 1.1 §6.7)."""
    payload = [c for c in schemas.schema("text").names if c not in TEXT_CAPTURE_COLUMNS]
    replace = ", ".join(f"o.{c} AS {c}" for c in payload)
    return (
        f"WITH t AS (SELECT * FROM read_parquet({files}, union_by_name = true)), "
        "o AS (SELECT * FROM t WHERE record_type = 'response' AND content_digest IS NOT NULL "
        "QUALIFY row_number() OVER (PARTITION BY content_digest ORDER BY fetch_time, url_key) = 1) "
        "SELECT * FROM t WHERE record_type <> 'revisit' UNION ALL BY NAME "
        f"SELECT r.* REPLACE ({replace}) FROM t AS r LEFT JOIN o "
        "ON r.content_digest = o.content_digest WHERE r.record_type = 'revisit'"
    )


def _newest_wins_sql(files: str, key: str) -> str:
    """A table with delta runs (docs/design.md §4): one row per ``key``, from the file listed
    last (the manifest lists the bases, then the runs oldest first; within one file, the last
    row). ``files`` is a DuckDB list expression; a file's position in it is its age."""
    return (
        f"SELECT * EXCLUDE (filename, ord, file_row_number) FROM read_parquet({files}, "
        "filename = true, file_row_number = true) "
        f"JOIN (SELECT unnest(l) AS filename, unnest(range(len(l))) AS ord "
        f"FROM (SELECT {files} AS l)) AS o USING (filename) "
        f"QUALIFY row_number() OVER (PARTITION BY {key} "
        "ORDER BY ord DESC, file_row_number DESC) = 1"
    )


def file_job(crawl: CrawlDir, manifest: Manifest, tmp: str) -> dict[str, Any]:
    """What :func:`~batchcrawl.store.duckdbfile.publish_file` needs to write ``crawl.duckdb`` for
    ``manifest`` to the path ``tmp`` and rename it into place, as JSON-serializable values (no
    DuckDB needed to make it)."""
    return {
        "tmp": tmp,
        "final": crawl.path(DUCKDB_FILE),
        "commits_dir": crawl.path(COMMITS_DIR),
        "generation": manifest.generation,
        "search_path": crawl.root,
        "ddl": schemas.schema_sql(),
        "views": {t: view_body(crawl, manifest, t, relative=True) for t in schemas.TABLES},
    }


def refresh_file(
    crawl: CrawlDir, manifest: Manifest, *, child: bool = False, fed: threading.Event | None = None
) -> str | None:
    """Write ``CRAWL/crawl.duckdb`` with views over ``manifest``'s files (a temp file, then a
    rename): with DuckDB in this process, or with ``child`` in a child process. Remote crawls are
    skipped (a DuckDB file cannot be updated in place on an object store), and so is a generation
    that a newer one superseded while its file was written: the file always names the newest
    generation once its refresh is done, whichever refresh (another thread's, another process's)
    finishes last.

    With ``child``, ``fed`` is set once the child has its job: it then finishes the file on its
    own, also if this process exits (:func:`background_refresh`).

    A refresh that fails once a newer generation exists is not an error either (automatic
    retention may have expired its generation and deleted the files its views name meanwhile:
    a fast stream with ``gc.keep_seconds = 0``).

    Returns
    -------
    str or None
        Path of the file written; None for a remote crawl or a superseded generation.

    Raises
    ------
    duckdb.Error, OSError
        In this process: a view did not bind, or the file could not be written.
    batchcrawl.store.child.ChildFailed
        With ``child``: the child process failed (its message is in the exception).
    """
    if not crawl.local:
        return None
    final = crawl.path(DUCKDB_FILE)
    job = file_job(crawl, manifest, f"{final}.tmp-{uuid.uuid4().hex}")
    try:
        if child:  # the child renames the file too (duckdbfile.publish_file)
            run_module(duckdbfile.__name__, json.dumps(job).encode("utf-8"), CHILD_TIMEOUT_S, fed)
            published = not _superseded(crawl, manifest)
        else:
            published = publish_file(job)
    except Exception as exc:
        if _superseded(crawl, manifest):
            # retention may have expired the generation (and deleted its files) while its
            # views were written: the newer generation's refresh writes the file instead
            # (and reports a failure of its own; this one is logged, not lost)
            log.info("%s: crawl.duckdb for generation %d not written, a newer generation "
                     "superseded it: %s", crawl.url, manifest.generation, first_line(exc))  # fmt: skip
            return None
        raise
    return final if published else None


def _superseded(crawl: CrawlDir, manifest: Manifest) -> bool:
    """True when a generation newer than ``manifest``'s has been published (its own refresh
    follows, or has written the file already)."""
    generations = crawl.generations()
    return bool(generations) and generations[-1] > manifest.generation


class _Background:
    """One thread that refreshes ``crawl.duckdb`` files in child processes, one at a time and at
    most one per :data:`REFRESH_INTERVAL_S`; per crawl root only the newest submitted generation
    is written (older pending ones are skipped). :meth:`wait` writes what is pending at once."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: dict[str, tuple[CrawlDir, Manifest]] = {}
        self._thread: threading.Thread | None = None
        self._last = -math.inf  # time.monotonic() of the last refresh's start
        self._flushing = 0
        self._fed = threading.Event()  # the running refresh's child has its job
        self._fed.set()

    def submit(self, crawl: CrawlDir, manifest: Manifest) -> None:
        with self._cond:
            older = self._pending.get(crawl.root)
            if older is None or older[1].generation < manifest.generation:
                self._pending[crawl.root] = (crawl, manifest)
            if self._thread is None:  # a daemon: a stop need not wait for it (wait's docstring)
                self._thread = threading.Thread(target=self._run, name="crawl.duckdb refresh",
                                                daemon=True)  # fmt: skip
                self._thread.start()

    def _next(self) -> tuple[CrawlDir, Manifest] | None:
        """The next refresh to run, once its time has come; None (and the thread ends) when
        nothing is pending."""
        with self._cond:
            while self._pending:
                delay = self._last + REFRESH_INTERVAL_S - time.monotonic()
                if self._flushing or delay <= 0:
                    self._last = time.monotonic()
                    self._fed = threading.Event()
                    return self._pending.popitem()[1]
                self._cond.wait(delay)
            self._thread = None
            self._cond.notify_all()
            return None

    def _run(self) -> None:
        while (job := self._next()) is not None:
            crawl, manifest = job
            try:
                refresh_file(crawl, manifest, child=True, fed=self._fed)
            except Exception as exc:  # any: this thread must go on, or wait() would never return
                _refresh_failed(crawl, manifest, exc)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Start every pending refresh now and return once they are written (or have failed),
        or after ``timeout_s`` seconds once the last one's child has its job: then False, and
        that child finishes the file on its own, also after this process has exited (it renames
        the file itself, :func:`~batchcrawl.store.duckdbfile.publish_file`, and runs in its own
        session)."""
        end = None if timeout_s is None else time.monotonic() + timeout_s
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
            try:
                while self._thread is not None:
                    if end is None:
                        self._cond.wait()
                    elif time.monotonic() < end:
                        self._cond.wait(end - time.monotonic())
                    elif not self._pending and self._fed.is_set():
                        return False
                    else:  # the job is still being made or sent (a few ms): not a cut
                        self._cond.wait(FED_POLL_S)
                return True
            finally:
                self._flushing -= 1


_background = _Background()
_background_depth = 0
_depth_lock = threading.Lock()


@contextlib.contextmanager
def background_refresh(stopping: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """While inside (any thread of this process), commits refresh ``crawl.duckdb`` in a child
    process, in the background (module docstring); leaving waits for the last refresh. Nests.

    When ``stopping()`` is true on leaving (a stop signal came: the command should end within 2
    s, issue 34), the wait lasts at most :data:`STOP_WAIT_S`: a refresh is a Python start-up,
    DuckDB's import and one Parquet footer per file the views name, over a second on a loaded
    machine or a large crawl; its child then finishes the file alone."""
    global _background_depth
    with _depth_lock:
        _background_depth += 1
    try:
        yield
    finally:
        with _depth_lock:
            _background_depth -= 1
        if not _background.wait(STOP_WAIT_S if stopping() else None):
            log.info("%s for the last generation is written by a child process after this one "
                     "exits", DUCKDB_FILE)  # fmt: skip


def after_commit(crawl: CrawlDir, manifest: Manifest) -> None:
    """Refresh ``crawl.duckdb`` for a generation just published: in the background inside
    :func:`background_refresh`, else now, in this process. Never raises (logged)."""
    if not crawl.local:
        return
    if _background_depth > 0:
        _background.submit(crawl, manifest)
        return
    import duckdb

    try:
        refresh_file(crawl, manifest)
    except (OSError, duckdb.Error) as exc:
        _refresh_failed(crawl, manifest, exc)


def _refresh_failed(crawl: CrawlDir, manifest: Manifest, exc: BaseException) -> None:
    """Log a failed refresh of ``crawl.duckdb`` in one line saying what it means and what to do:
    the commit stands, the file is stale (a full disk: a fresh-user trial saw DuckDB's "Failed to
    create checkpoint ... No space left on device" and nothing else)."""
    log.warning(
        "%s: could not refresh %s for generation %d (%s); the commit stands and `batchcrawl sql` "
        "reads it, but %s still shows an older generation until a later commit refreshes it: "
        "free space (or fix the error) and run the next round",
        crawl.url, DUCKDB_FILE, manifest.generation, first_line(exc), DUCKDB_FILE,
    )  # fmt: skip


AFTER_COMMIT.append(after_commit)  # every commit refreshes crawl.duckdb (CrawlDir._after_publish)
