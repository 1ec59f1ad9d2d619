"""``batchcrawl export``: copy committed rounds to a data lake on any fsspec filesystem (docs/design.md §1, §9).

Layout under ``DEST`` (a local path or an fsspec URL such as ``s3://bucket/lake``)::

    DEST/fetched/crawl=NAME/round=7/part-03.parquet       one part per fetch shard
    DEST/links/crawl=NAME/round=7/part-03.parquet
    DEST/fetchlists/crawl=NAME/round=7/part-03.parquet
    DEST/index/crawl=NAME/round=7/part-03.parquet         Common Crawl-compatible (batchcrawl.export.ccindex)
    DEST/warc/crawl=NAME/round=7/shard=03-00000.warc.gz   the WARC files, byte for byte (their folder
                                                           in the crawl: the round that opened them)
    DEST/warc/crawl=NAME/round=7/shard=03-00000.cdxj      CDXJ index of the WARC file beside it
    DEST/text/crawl=NAME/round=7/part-00.parquet          text table (batchcrawl extract), one part per WARC file
    DEST/wet/crawl=NAME/round=7/shard=03-00000.warc.wet.gz  its WET files, byte for byte
    DEST/_batchcrawl_export/crawl=NAME/round=7.json       export manifest: the round's completion marker

The Parquet tables are Hive-partitioned (``crawl=NAME/round=N``), so DuckDB's
``read_parquet('DEST/index/*/*/*.parquet', hive_partitioning = true)``, Spark, Athena and
``pyarrow.dataset(..., partitioning="hive")`` read them as one table. As in Hive and in Common
Crawl's index, the partition columns are stored in the path only: the ``round`` column of
``fetched``, ``links`` and ``fetchlists`` and the ``crawl`` column of ``index`` are not in the files.
``warc_filename`` in the exported ``fetched`` and ``index`` tables is a path relative to ``DEST``
(Common Crawl's are relative to its bucket); it resolves when ``warc`` is exported too. ``filename``
in the CDXJ lines is the bare WARC file name, as cdxj-indexer writes it and a pywb collection
resolves it (WARC names are unique across crawls, rounds and shards: ``store.paths.warc_prefix``).

What is read. Only the crawl's current committed manifest (:meth:`CrawlDir.manifest`): a round's
Parquet files are the manifest's entries under ``TABLE/round=N/``, and its WARC files are those that
the round's committed ``fetched`` rows point into. No folder of the crawl is listed, so files of
rounds that died before their commit are never exported. ``frontier`` and ``hosts`` are
per-generation snapshots, not per-round tables, and are not exported.

Atomicity and increments. Every file is written whole (locally to a temporary name renamed into
place; on object stores by one upload that becomes visible only when complete). Output names are
fixed by the source (shard number, WARC name), so rerunning a round overwrites its own partial
output and never duplicates it. A round is complete only once its export manifest exists: it is
written *last*, after every file of the round. A run skips rounds whose manifest already lists every
requested table and exports only the missing tables of the others; a round whose manifest names
other source files or row counts than the crawl's (the round was committed again, after a return
to an older generation) loses its manifest and old files and is exported anew (``replaced``); a
run that dies leaves its round without a manifest and the next run does the round again. Readers
that want only complete rounds read the manifests (:func:`exported_rounds`) rather than globbing
the folders.

WARC files shared by rounds. A stream keeps one WARC file per shard open across its checkpoints
(:mod:`batchcrawl.engine.warcopen`), so the rows of many rounds point into one file. Each file is
copied once, to the folder of the round whose folder holds it in the crawl (``warc/round=H/``, the
round that opened it), by the first exported round whose rows point into it; a later round (or
run) finds the copy in DEST and copies nothing, and its ``warc`` manifest entry says so
(``copied: false``). Only committed bytes are copied: a closed file whole, a file the exported
generation still has open (its newest crawl commit's ``warc_open``: :meth:`CrawlDir.open_warcs`) up to its committed end --
never a record of an uncommitted micro-batch, and no lock is needed. A copy shorter than the
file's committed end (made while the file was open) is replaced, whole, by the next export whose
rows point past it: bytes already in DEST never change, so index rows written before stay valid,
but the object is rewritten; the summary's ``warc_open`` lists the copies made of open files (a
lake that wants immutable objects exports a stream's rounds after its files closed). Robots.txt
captures have no ``fetched`` row and no round: each round's manifest records in ``warc_spans``
(``{file: [start, end]}``) the bytes of each file whose robots.txt captures its index holds, and a
round exported later starts where the other rounds' spans end, so each capture is indexed once.

Content signals. The ``index`` table carries each host's robots.txt ``Content-Signal``
(``content_signal``, e.g. ``search=yes,ai-train=no``; :mod:`batchcrawl.export.signals`), and
``--exclude-signal ai-train=no`` (``exclude_signals``) leaves out every row of the hosts whose signal
holds that pair: from ``fetched``, ``fetchlists``, ``text`` and ``index`` by host, from ``links``
the links found on their pages; the summary counts the hosts and the rows left out. WARC and WET
files hold many hosts' records and are copied byte for byte, so an exclusion refuses them. Each
round's manifest records its filter, and a run with another filter refuses rounds exported
before (a round's tables never mix two filters). Signals never change what is fetched.

Repeats. A round's manifest records, per file, the rows written and the rows the filter left out
(``excluded``); their sum is the rows read from the crawl, which a later run compares with the
crawl's files of the round (after a merge of fact files, with the round's rows in the merged
files), so a repeated export -- filtered or not -- skips every round whose data did not change.
A round's ``wet`` files and its ``index`` (``content_languages``) come from its ``text`` rows,
which ``batchcrawl extract`` may write after the round was exported: the manifest records the
text files each was made from (``text_basis``), and a run exports them again when those changed.

Bad destinations. Before anything is read, ``DEST`` and its manifest folder are created (local
destinations): a ``DEST`` that is a file or cannot be created or written (``/dev/null/x``, a path
under ``/proc`` or ``/sys``) is bad input (:class:`ExportSettingError`, exit code 2), one line.

Credentials. ``DEST`` is opened with fsspec's usual configuration: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` and the other botocore settings for ``s3://``, or
``FSSPEC_S3_*`` variables and fsspec config files. The command line never takes secrets.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import posixpath
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import IO, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from batchcrawl import __version__
from batchcrawl.cdxj import scan
from batchcrawl.errors import BatchcrawlError
from batchcrawl.export import ccindex, signals
from batchcrawl.store import atomic, factcompact, paths
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest, utcnow_iso

log = logging.getLogger(__name__)

#: Per-round tables copied from the crawl directory (``text``: written by ``batchcrawl extract``).
ROUND_TABLES = ("fetched", "links", "fetchlists", "text")
#: Everything ``--tables`` accepts: the round tables, the derived ``index``, ``warc`` (the WARC
#: files with their CDXJ indexes) and ``wet`` (the WET files of ``batchcrawl extract``).
TABLES = (*ROUND_TABLES, "index", "warc", "wet")
DEFAULT_TABLES = ("fetched", "links", "index", "warc")
#: Folder of the export manifests under DEST.
MANIFEST_DIR = "_batchcrawl_export"
FORMAT_VERSION = 1
PARTITION_COLUMNS = ("crawl", "round")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MARKER_RE = re.compile(r"^round=(\d+)\.json$")
_COPY_CHUNK = 8 << 20


class ExportError(BatchcrawlError):
    """An export failed: a file could not be read from the crawl or written to the destination
    (the message names it). Rerunning the export redoes the unfinished rounds."""


class ExportSettingError(ExportError, ValueError):
    """A bad export argument: unknown table, bad crawl name, bad round range (exit code 2)."""

    exit_code = 2


# -- paths --------------------------------------------------------------------------------------
def check_crawl_name(name: str) -> str:
    """Return ``name`` if it can be a Hive partition value (``crawl=NAME``).

    Raises
    ------
    ExportSettingError
        ``name`` is empty or has characters other than letters, digits, ``.``, ``_``, ``-``.
    """
    if not _NAME_RE.match(name or ""):
        raise ExportSettingError(
            f"crawl name {name!r} cannot be a partition folder: use letters, digits, '.', '_' "
            "and '-' (set crawl.name in crawl.toml or with --set crawl.name=NAME)"
        )
    return name


def crawl_name_of(crawl: CrawlDir, configured: str = "") -> str:
    """The crawl's export name: ``configured`` (``crawl.name``) or the crawl directory's base name."""
    return check_crawl_name(configured or posixpath.basename(crawl.root.rstrip("/")))


def table_part(table: str, crawl: str, round: int, part: int) -> str:
    """``TABLE/crawl=NAME/round=N/part-SS.parquet`` (relative to DEST)."""
    return f"{table}/crawl={crawl}/round={round}/part-{part:02d}.parquet"


def warc_dest(crawl: str, round: int, source: str) -> str:
    """Where the crawl's WARC file ``source`` goes: ``warc/crawl=NAME/round=H/BASENAME``, ``H``
    being the round whose folder holds it in the crawl (``warc/round=H/``: the round that opened
    it; a stream file holds records of later rounds too), or ``round`` when its path names none."""
    home = paths.parse_round(source)
    return (
        f"warc/crawl={crawl}/round={round if home is None else home}/{posixpath.basename(source)}"
    )


#: The CDXJ file beside a WARC file (``X.warc.gz`` -> ``X.cdxj``), named as in the crawl directory.
cdxj_name = paths.warc_cdxj


def wet_dest(crawl: str, round: int, source: str) -> str:
    """Where the crawl's WET file ``source`` goes: ``wet/crawl=NAME/round=N/BASENAME``."""
    return f"wet/crawl={crawl}/round={round}/{posixpath.basename(source)}"


def marker_path(crawl: str, round: int) -> str:
    """``_batchcrawl_export/crawl=NAME/round=N.json`` (relative to DEST)."""
    return f"{MANIFEST_DIR}/crawl={crawl}/round={round}.json"


def parse_tables(text: str | Iterable[str]) -> tuple[str, ...]:
    """``"fetched,index"`` -> ``("fetched", "index")``, checked against :data:`TABLES`.

    Raises
    ------
    ExportSettingError
        An unknown or empty table list.
    """
    names = [t.strip() for t in (text.split(",") if isinstance(text, str) else text)]
    names = [t for t in names if t]
    bad = [t for t in names if t not in TABLES]
    if bad or not names:
        raise ExportSettingError(
            f"--tables {','.join(names)!r}: unknown table {bad[0]!r}; choose from {','.join(TABLES)}"
            if bad
            else f"--tables: name at least one of {','.join(TABLES)}"
        )
    return tuple(dict.fromkeys(names))


# -- the destination ----------------------------------------------------------------------------
class Destination(atomic.Location):
    """A DEST folder on an fsspec filesystem, written file by file, each file whole.

    Parameters
    ----------
    url
        Local path or fsspec URL.
    storage_options
        For programmatic use (tests, notebooks); the CLI passes none, so credentials come from the
        environment and fsspec's config.
    """

    @contextlib.contextmanager
    def open_write(self, rel: str) -> Iterator[IO[bytes]]:
        """A binary file at ``rel`` that appears only when the block ends without error
        (:func:`batchcrawl.store.atomic.open_whole`).

        Raises
        ------
        ExportError
            The file cannot be created or written (the filesystem's error is its cause).
        """
        final = self.path(rel)
        in_block = False  # errors of the caller's block pass through unchanged
        try:
            with atomic.open_whole(self.fs, final) as fh:
                in_block = True
                yield fh
                in_block = False
        except OSError as exc:
            if in_block:
                raise
            raise ExportError(f"{final}: cannot write: {exc}") from exc

    def prepare(self) -> None:
        """Create the destination folder and its manifest folder (:data:`MANIFEST_DIR`), before
        anything is read or written, so an unusable destination fails at once, in one line.

        Raises
        ------
        ExportSettingError
            ``DEST`` is a file, or its folder cannot be created (a path under a file such as
            ``/dev/null/x``, a read-only or virtual filesystem such as ``/proc`` or ``/sys``, no
            permission): bad input, exit code 2.
        """
        try:
            if self.fs.isfile(self.root):
                raise ExportSettingError(
                    f"export destination {self.url!r} is a file, not a folder: choose a folder"
                )
            if self.local:  # object stores have no folders: their first upload says more
                self.fs.makedirs(self.path(MANIFEST_DIR), exist_ok=True)
        except OSError as exc:
            reason = exc.strerror or str(exc) or type(exc).__name__
            where = f" ({exc.filename})" if exc.filename else ""
            raise ExportSettingError(
                f"export destination {self.url!r} cannot be created or written: {reason}{where}; "
                "choose a folder you can write"
            ) from None

    def put(self, rel: str, data: bytes) -> None:
        """Write ``data`` at ``rel`` whole."""
        with self.open_write(rel) as fh:
            fh.write(data)

    def read_json(self, rel: str) -> dict[str, Any] | None:
        """The JSON object at ``rel``, or None if there is no file."""
        try:
            raw = self.fs.cat_file(self.path(rel))
        except FileNotFoundError:
            return None
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ExportError(
                f"{self.path(rel)}: not valid JSON ({exc}); delete it to redo"
            ) from None


# -- reading the crawl --------------------------------------------------------------------------
def round_entries(manifest: Manifest, table: str) -> dict[int, list[FileEntry]]:
    """``{round: entries}`` of a per-round table in a manifest (paths ``TABLE/round=N/...``, or a
    merged fact file under every round it spans: :mod:`batchcrawl.store.factcompact`)."""
    out: dict[int, list[FileEntry]] = {}
    for entry in manifest.tables.get(table, ()):
        if paths.fact_rounds(entry.path) is None:
            raise ExportError(f"{table}: manifest entry {entry.path!r} is not under round=N/")
    for rnd, es in factcompact.round_entries(manifest.tables.get(table, ())).items():
        out[rnd] = sorted(es, key=lambda e: e.path)
    return out


#: Part numbers of a round's rows taken from merged fact files start here (a round's own files
#: are numbered by their shard).
MERGED_PART_BASE = 1000


def _part_number(entry: FileEntry, position: int) -> int:
    if factcompact.is_merged(entry):
        return MERGED_PART_BASE + position
    shard = paths.parse_shard(posixpath.basename(entry.path))
    return position if shard is None else shard


class _TeeReader(io.RawIOBase):
    """Reads the first ``limit`` bytes of ``src`` (a WARC file's committed prefix: bytes past it
    are records not committed yet) and writes every byte read to ``sink``: one pass copies and
    indexes a WARC file."""

    def __init__(self, src: IO[bytes], sink: IO[bytes] | None, limit: int) -> None:
        self.src, self.sink, self.count, self.limit = src, sink, 0, limit

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        data = self.src.read(min(len(buf), self.limit - self.count))
        n = len(data)
        buf[:n] = data
        self.count += n
        if self.sink is not None and n:
            self.sink.write(data)
        return n


# -- the export ---------------------------------------------------------------------------------
@dataclass
class _RoundJob:
    round: int
    tables: tuple[str, ...]
    previous: dict[str, Any] | None
    host_signals: Mapping[str, str]  # content_signal by host (the index column)
    excluded: frozenset[str]  # hosts left out (--exclude-signal)


class Exporter:
    """Exports the committed rounds of one crawl to one destination.

    Parameters
    ----------
    crawl
        The source crawl directory.
    dest
        The destination.
    crawl_name
        Name of the crawl in the partition paths (:func:`check_crawl_name`).
    threads
        Files written at once (uploads to object stores are latency-bound).
    on_file
        Called with each DEST-relative path once that file is complete (progress display; tests
        use it to kill an export at a known point). Called from worker threads.
    exclude_signals
        ``NAME=yes|no`` pairs (:func:`batchcrawl.export.signals.parse_signal_filter`): the rows
        of hosts whose robots.txt ``Content-Signal`` holds one of them are left out of every
        table (module docstring, "Content signals").
    """

    def __init__(
        self,
        crawl: CrawlDir,
        dest: Destination,
        crawl_name: str,
        *,
        threads: int = 8,
        on_file: Callable[[str], None] | None = None,
        exclude_signals: Iterable[str] = (),
    ) -> None:
        if threads < 1:
            raise ExportSettingError(f"threads={threads!r}: expected at least 1")
        self.crawl = crawl
        self.dest = dest
        self.name = check_crawl_name(crawl_name)
        self.threads = threads
        self.on_file = on_file or (lambda rel: None)
        self.exclude_signals = signals.parse_signal_filter(exclude_signals)
        self._lock = threading.Lock()

    def run(
        self, rounds: tuple[int, int] | None = None, tables: Sequence[str] = DEFAULT_TABLES
    ) -> dict[str, Any]:
        """Export the committed rounds in ``rounds`` (inclusive; default all) not yet exported.

        Returns
        -------
        dict
            JSON-serializable summary: ``exported`` and ``skipped`` round numbers, ``replaced``
            (rounds exported before from files the crawl no longer has -- the round was committed
            again after a return to an older generation -- removed and exported anew, all the
            tables exported before), ``missing`` (requested but not committed), ``rows`` per
            table, ``warc_files`` (WARC files copied by this run: a file shared by rounds once),
            ``warc_open`` (DEST paths of the files copied as the committed prefix of a file the
            crawl still has open: module docstring), ``cdxj_lines``, ``bytes`` (WARC bytes
            copied), ``seconds``;
            ``exclude_signal`` (the filter) and ``excluded``: ``hosts`` (how many hosts of the
            crawl have a signal the filter matches) and ``rows`` left out per table.

        Raises
        ------
        ExportSettingError
            Bad ``tables`` or ``rounds``; an exclusion with ``warc`` or ``wet`` (files that hold
            many hosts' records, copied byte for byte); a round exported before with another
            exclusion (nothing is written then).
        ExportError
            A file could not be read or written; the rounds finished before it keep their manifest.
        """
        started = time.monotonic()
        tables = parse_tables(tables)
        manifest = self.crawl.manifest()
        if rounds is None:
            lo, hi = 1, manifest.round  # no round committed yet: nothing to do
        else:
            lo, hi = rounds
            if lo < 0 or hi < lo:
                raise ExportSettingError(f"rounds {lo}..{hi}: expected 0 <= A <= B")
        committed = [r for r in range(max(lo, 1), hi + 1) if r <= manifest.round]
        if self.exclude_signals and {"warc", "wet"} & set(tables):
            raise ExportSettingError(
                f"--exclude-signal {','.join(self.exclude_signals)} leaves hosts out of the "
                "tables, but WARC and WET files hold many hosts' records and are copied byte for "
                "byte: export without warc and wet (e.g. --tables fetched,links,index)"
            )
        self.dest.prepare()
        markers = {r: self.dest.read_json(marker_path(self.name, r)) for r in committed}
        self._check_same_exclusion(markers)
        # WARC files still open in the exported generation: copied up to their committed end
        self._open_warcs = self.crawl.open_warcs(manifest.generation)
        self._scans: dict[str, dict[str, Any]] = {}  # src -> one scan per run (_warc_file)
        self._locations: pa.Table | None = None  # fetched (file, offset) of all rounds
        # src -> {round: end}: the bytes of each WARC file whose robots.txt captures a round's
        # index holds (the manifests' warc_spans), so each capture is indexed once
        self._claimed: dict[str, dict[int, int]] = {}
        for rnd, m in _read_markers(self.dest, self.name).items():
            for src, (_, end) in (m or {}).get("warc_spans", {}).items():
                self._claimed.setdefault(src, {})[rnd] = int(end)
        host_signals = (
            signals.host_signals(self.crawl, manifest)
            if "index" in tables or self.exclude_signals
            else {}
        )
        excluded = signals.excluded_hosts(host_signals, self.exclude_signals)
        summary: dict[str, Any] = {
            "step": "export",
            "crawl": self.name,
            "dest": self.dest.url,
            "generation": manifest.generation,
            "tables": list(tables),
            "exported": [],
            "skipped": [],
            "replaced": [],
            "missing": [r for r in range(max(lo, 1), hi + 1) if r > manifest.round],
            "rows": {t: 0 for t in tables if t not in ("warc", "wet")},
            "warc_files": 0,
            "warc_open": [],
            "wet_files": 0,
            "cdxj_lines": 0,
            "bytes": 0,
            "exclude_signal": list(self.exclude_signals),
            "excluded": {"hosts": len(excluded), "rows": {}},
        }
        entries = {t: round_entries(manifest, t) for t in ROUND_TABLES}
        for r in committed:
            previous = markers[r]
            if previous and not self._matches(previous, r, entries):
                log.warning("round %d of %s in %s was exported from files the crawl no longer "
                            "has (the round was committed again): exporting it again",
                            r, self.name, self.dest.url)  # fmt: skip
                summary["replaced"].append(r)
                tables_again = tuple(dict.fromkeys([*previous.get("tables", {}), *tables]))
                self._drop_round(r, previous)
                for claims in self._claimed.values():
                    claims.pop(r, None)
                previous = None
                todo = tuple(t for t in TABLES if t in tables_again)
            else:
                done = set(previous.get("tables", {})) if previous else set()
                done -= self._stale_on_text(previous or {}, entries["text"].get(r, []))
                todo = tuple(t for t in tables if t not in done)
            if not todo:
                summary["skipped"].append(r)
                continue
            job = _RoundJob(r, todo, previous, host_signals, excluded)
            stats = self._export_round(job, manifest, entries)
            summary["exported"].append(r)
            for t, n in stats["rows"].items():
                summary["rows"][t] = summary["rows"].get(t, 0) + n
            for t, n in stats["excluded"].items():
                summary["excluded"]["rows"][t] = summary["excluded"]["rows"].get(t, 0) + n
            for k in ("warc_files", "warc_open", "wet_files", "cdxj_lines", "bytes"):
                summary[k] += stats[k]
        summary["seconds"] = round(time.monotonic() - started, 3)
        return summary

    def _check_same_exclusion(self, markers: Mapping[int, dict[str, Any] | None]) -> None:
        """Refuse to add to rounds exported with another ``--exclude-signal`` (a round's tables
        would mix two filters); nothing is written before this check."""
        other = {
            r: m.get("exclude_signal", [])
            for r, m in markers.items()
            if m and m.get("exclude_signal", []) != list(self.exclude_signals)
        }
        if other:
            r, then = min(other.items())
            raise ExportSettingError(
                f"round {r} of {self.name} was exported to {self.dest.url} with --exclude-signal "
                f"{','.join(then) or '(none)'}, not {','.join(self.exclude_signals) or '(none)'} "
                f"({len(other)} such rounds): repeat that filter, or export to another DEST"
            )

    def _matches(self, previous: dict[str, Any], r: int, entries) -> bool:
        """Whether the round's earlier export (its manifest ``previous``) was made from the
        crawl's current files of round ``r``: the same source file and row count for every
        Parquet table it lists (a round committed again has new rows in files of the same name).
        A file's source rows are the rows written plus those an ``--exclude-signal`` left out
        (:func:`_source_rows`), so a filtered export matches its own crawl files too."""
        for table, files in previous.get("tables", {}).items():
            if table not in ROUND_TABLES:
                continue
            then = sorted((f.get("source"), _source_rows(f)) for f in files)
            current = entries[table].get(r, [])
            if any(factcompact.is_merged(e) for e in current):
                # merged since: the same rows of the round, now inside larger files
                if sum(_source_rows(f) for f in files) != self._round_rows(table, current, r):
                    return False
                continue
            now = sorted((e.path, e.rows) for e in current)
            if then != now:
                return False
        return True

    @staticmethod
    def _stale_on_text(previous: dict[str, Any], text_entries: list[FileEntry]) -> set[str]:
        """The tables of a round's earlier export (its manifest ``previous``) made from other
        ``text`` rows than the crawl's now: ``wet`` (the WET files) and ``index`` (its
        ``content_languages``) read them, and ``batchcrawl extract`` may run after the export
        (a fresh-user trial: the round counted as done, and its WET files and languages never
        reached the lake). Each records the text files it read (``text_basis``); a manifest
        from before that record counts as made without text."""
        now = _text_basis(text_entries)
        basis = previous.get("text_basis") or {}
        return {t for t in ("wet", "index")
                if t in previous.get("tables", {}) and basis.get(t, []) != now}  # fmt: skip

    def _round_rows(self, table: str, entries: list[FileEntry], r: int) -> int:
        """Rows of round ``r`` in ``entries`` (merged files counted by their ``round`` column)."""
        return self._read_round(table, entries, r, columns=["round"]).num_rows

    def _drop_round(self, r: int, previous: dict[str, Any]) -> None:
        """Remove round ``r``'s manifest first (the round is incomplete from then on), then every
        file it lists."""
        marker = self.dest.path(marker_path(self.name, r))
        with contextlib.suppress(FileNotFoundError):
            self.dest.fs.rm_file(marker)
        for files in previous.get("tables", {}).values():
            for f in files:  # a WARC file's entry names its CDXJ too
                for rel in (f.get("path"), f.get("cdxj")):
                    # a WARC file in another round's folder is shared with that round's rows
                    if rel and paths.parse_round(rel) in (r, None):
                        with contextlib.suppress(FileNotFoundError):
                            self.dest.fs.rm_file(self.dest.path(rel))

    # -- one round ------------------------------------------------------------------------------
    def _export_round(self, job: _RoundJob, manifest: Manifest, entries) -> dict[str, Any]:
        r, todo = job.round, job.tables
        fetched = self._read_round("fetched", entries["fetched"].get(r, []), r)
        warc_files = self._warc_files(fetched, r, manifest)
        record: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "crawl": self.name,
            "round": r,
            "source": self.crawl.root if self.crawl.local else self.crawl.full_url(""),
            "generation": manifest.generation,
            "batchcrawl": __version__,
            "exclude_signal": list(self.exclude_signals),
            "tables": dict((job.previous or {}).get("tables", {})),
        }
        if (job.previous or {}).get("warc_spans") is not None:  # the index exported before
            record["warc_spans"] = job.previous["warc_spans"]
        text_entries = entries["text"].get(r, [])
        record["text_basis"] = {
            **(job.previous or {}).get("text_basis", {}),
            **{t: _text_basis(text_entries) for t in ("wet", "index") if t in todo},
        }
        stats: dict[str, Any] = {
            "rows": {}, "warc_files": 0, "warc_open": [], "wet_files": 0, "cdxj_lines": 0,
            "bytes": 0, "excluded": {},
        }  # fmt: skip
        leave_out = _LeaveOut.of(job.excluded, fetched)
        with ThreadPoolExecutor(self.threads, thread_name_prefix="export") as pool:
            futures = []
            for table in (t for t in todo if t in ROUND_TABLES):
                for i, entry in enumerate(entries[table].get(r, [])):
                    futures.append(
                        (table, pool.submit(self._copy_table, table, r, entry, i, leave_out))
                    )
            warc_futures = []
            if "warc" in todo or "index" in todo:
                for src in warc_files:
                    copy = "warc" in todo
                    warc_futures.append((src, pool.submit(self._warc_file, r, src, copy)))
            wet_futures = []
            if "wet" in todo:
                for src in self._wet_files(entries["text"].get(r, [])):
                    wet_futures.append(pool.submit(self._wet_file, r, src))
            for table, fut in futures:
                record["tables"].setdefault(table, []).append(fut.result())
            if "wet" in todo:
                record["tables"]["wet"] = [f.result() for f in wet_futures]
            scanned = {src: fut.result() for src, fut in warc_futures}
            if "warc" in todo:
                record["tables"]["warc"] = [s["file"] for s in scanned.values()]
            if "index" in todo:
                languages = self._languages(entries["text"].get(r, []))
                spans = self._robots_spans(r, scanned, (job.previous or {}).get("warc_spans", {}))
                record["warc_spans"] = spans
                parts = self._index_parts(
                    fetched,
                    r,
                    scanned,
                    entries["fetched"].get(r, []),
                    languages,
                    job.host_signals,
                    spans,
                    self._row_offsets(manifest, warc_files),
                )
                record["tables"]["index"] = [
                    f.result()
                    for f in [pool.submit(self._write_index, p, t, leave_out) for p, t in parts]
                ]
        for table in todo:
            files = record["tables"].get(table, [])
            if table == "wet":
                stats["wet_files"] = len(files)
            elif table == "warc":
                copied = [f for f in files if f.get("copied", True)]
                stats["warc_files"] = len(copied)
                stats["warc_open"] = [f["path"] for f in copied if f.get("open")]
                stats["bytes"] = sum(f["bytes"] for f in copied)
                stats["cdxj_lines"] = sum(f.get("cdxj_lines", 0) for f in copied)
            else:
                stats["rows"][table] = sum(f["rows"] for f in files)
                stats["excluded"][table] = sum(f.get("excluded", 0) for f in files)
        record["created"] = utcnow_iso()
        record["tables"] = {t: record["tables"][t] for t in sorted(record["tables"])}
        self.dest.put(
            marker_path(self.name, r),
            (json.dumps(record, indent=1, sort_keys=True) + "\n").encode("utf-8"),
        )  # last: the round is now complete
        log.info("exported round %d of %s: %s", r, self.name, stats)
        return stats

    def _read_round(
        self, table: str, entries: list[FileEntry], r: int, columns: list[str] | None = None
    ) -> pa.Table:
        """Round ``r``'s rows of ``table`` in ``entries`` (merged files filtered by round)."""
        try:
            return factcompact.read_round(self.crawl, table, entries, r, columns)
        except OSError as exc:
            raise ExportError(f"{self.crawl.url}: cannot read {table}: {exc}") from exc

    def _warc_files(self, fetched: pa.Table, r: int, manifest: Manifest) -> list[str]:
        """Round ``r``'s WARC files: those its ``fetched`` rows name, and those the round wrote
        with robots.txt captures only (no row names them: ``Manifest.warcs_without_rows``, kept
        by the file's ``round=N`` folder). Raises :class:`ExportError` when two would go to one
        destination path."""
        names = set(pc.unique(fetched.column("warc_filename").drop_null()).to_pylist())
        names.update(w for w in manifest.warcs_without_rows if paths.parse_round(w) == r)
        names = sorted(names)
        seen: dict[str, str] = {}
        for name in names:
            dest = warc_dest(self.name, r, name)
            if dest in seen:
                raise ExportError(
                    f"round {r}: WARC files {seen[dest]!r} and {name!r} would both be exported "
                    f"as {dest!r}"
                )
            seen[dest] = name
        return names

    def _wet_files(self, text_entries: list[FileEntry]) -> list[str]:
        """The WET files the round's committed ``text`` rows point into."""
        data = self.crawl.read_table("text", text_entries)
        return sorted(pc.unique(data.column("wet_filename").drop_null()).to_pylist())

    def _wet_file(self, r: int, src: str) -> dict[str, Any]:
        """Copy one WET file byte for byte."""
        rel = wet_dest(self.name, r, src)
        try:
            with self.crawl.fs.open(self.crawl.path(src), "rb", block_size=_COPY_CHUNK) as fh:
                with self.dest.open_write(rel) as out:
                    size = 0
                    while chunk := fh.read(_COPY_CHUNK):
                        out.write(chunk)
                        size += len(chunk)
        except FileNotFoundError:
            raise ExportError(
                f"{self.crawl.path(src)}: WET file named by committed text rows is missing"
            ) from None
        except OSError as exc:
            raise ExportError(f"{self.crawl.path(src)}: cannot copy WET file: {exc}") from exc
        self._done(rel)
        return {"path": rel, "bytes": size, "source": src}

    def _languages(self, text_entries: list[FileEntry]) -> dict[tuple[str, int], str]:
        """``content_languages`` of the round's extracted captures by (WARC file, offset)."""
        cols = ["warc_filename", "warc_record_offset", "content_languages"]
        data = self.crawl.read_table("text", text_entries, columns=cols) if text_entries else None
        if data is None:
            return {}
        return {
            (w, o): lang
            for w, o, lang in zip(*(data.column(c).to_pylist() for c in cols), strict=True)
            if lang is not None
        }

    def _done(self, rel: str) -> None:
        self.on_file(rel)

    def _copy_table(
        self, table: str, r: int, entry: FileEntry, position: int, leave_out: _LeaveOut
    ) -> dict[str, Any]:
        data = self._read_round(table, [entry], r)
        data, dropped = leave_out(table, data)
        if "round" in data.column_names:
            bad = pc.sum(pc.not_equal(data.column("round"), r)).as_py()
            if bad:
                raise ExportError(f"{entry.path}: {bad} rows are not of round {r}")
        if table in ("fetched", "text"):
            data = _rename_warc_paths(data, lambda name: warc_dest(self.name, r, name))
        if table == "text":
            data = _rename_warc_paths(
                data, lambda name: wet_dest(self.name, r, name), column="wet_filename"
            )
        data = data.drop_columns([c for c in PARTITION_COLUMNS if c in data.column_names])
        rel = table_part(table, self.name, r, _part_number(entry, position))
        self._write_parquet(rel, data)
        out = {"path": rel, "rows": data.num_rows, "source": entry.path}
        if leave_out.hosts:
            out["excluded"] = dropped
        return out

    def _write_parquet(self, rel: str, data: pa.Table) -> None:
        with self.dest.open_write(rel) as fh:
            pq.write_table(data, fh, compression="zstd")
        self._done(rel)

    def _committed_end(self, src: str) -> tuple[int, bool]:
        """``(end, open)``: the bytes of ``src`` the exported generation commits -- its last
        ``warc_open`` end while a stream keeps it open (bytes past it are records of micro-batches
        not committed yet), else its size (a closed file never changes)."""
        if src in self._open_warcs:
            return self._open_warcs[src], True
        return self.crawl.fs.size(self.crawl.path(src)), False

    def _dest_size(self, rel: str) -> int:
        try:
            return int(self.dest.fs.size(self.dest.path(rel)))
        except FileNotFoundError:
            return 0

    def _warc_file(self, r: int, src: str, copy: bool) -> dict[str, Any]:
        """Copy (if ``copy``) and index one WARC file's committed prefix in one read, once per run;
        write its CDXJ if copied. A copy in DEST that already holds the committed prefix (exported
        with an earlier round, or by an earlier run) is kept; a shorter one (the file was still
        open then and has grown) is replaced by the longer prefix: the bytes already there never
        change, so every index row written before still points at its record."""
        rel = warc_dest(self.name, r, src)
        try:
            end, still_open = self._committed_end(src)
            have = self._dest_size(rel) if copy else 0
            do_copy = copy and have < end
            cached = self._scans.get(src)
            if cached is not None and not do_copy:
                captures, read = cached["captures"], end
            else:
                with self.crawl.fs.open(self.crawl.path(src), "rb", block_size=_COPY_CHUNK) as fh:
                    if do_copy:
                        with self.dest.open_write(rel) as out:
                            captures, read = self._index_stream(fh, out, end, src)
                            if read != end:
                                raise ExportError(f"{src}: {read} bytes, but its committed "
                                                  f"records end at byte {end}")  # fmt: skip
                    else:
                        captures, read = self._index_stream(fh, None, end, src)
                self._scans[src] = {"captures": captures}
        except FileNotFoundError:
            raise ExportError(
                f"{self.crawl.path(src)}: WARC file named by committed fetched rows is missing"
            ) from None
        except OSError as exc:
            raise ExportError(f"{self.crawl.path(src)}: cannot copy WARC file: {exc}") from exc
        if read != end:
            raise ExportError(f"{src}: {read} bytes, but its committed records end at byte {end}")
        file_info: dict[str, Any] = {"path": rel, "source": src, "end": end, "copied": do_copy,
                                     "bytes": end if do_copy else 0, "open": still_open}  # fmt: skip
        if do_copy:
            self._done(rel)
            name = posixpath.basename(rel)
            sorted_lines = sorted(c.line(name) for c in captures)
            cdxj_rel = cdxj_name(rel)
            self.dest.put(cdxj_rel, "".join(line + "\n" for line in sorted_lines).encode("utf-8"))
            self._done(cdxj_rel)
            file_info.update(cdxj=cdxj_rel, cdxj_lines=len(sorted_lines))
        return {"file": file_info, "captures": captures, "end": end}

    def _robots_spans(
        self, r: int, scanned: Mapping[str, dict], previous: Mapping[str, list[int]]
    ) -> dict[str, list[int]]:
        """``{src: [start, end]}``: the bytes of each WARC file whose robots.txt captures (no
        ``fetched`` row) go into round ``r``'s index -- those not claimed by another exported
        round, up to the committed end; the round's earlier spans are kept (a rerun adds the same
        rows). Robots.txt captures have no round of their own: each is indexed with the first
        exported round whose span covers it, once."""
        out: dict[str, list[int]] = {}
        for src, info in sorted(scanned.items()):
            if src in previous:
                out[src] = [int(x) for x in previous[src]]
                continue
            claims = self._claimed.setdefault(src, {})
            start = max((e for rnd, e in claims.items() if rnd != r), default=0)
            out[src] = [start, max(start, info["end"])]
            claims[r] = out[src][1]
        return out

    def _row_offsets(self, manifest: Manifest, files: Sequence[str]) -> dict[str, set[int]]:
        """Offsets of the records of ``files`` that have a committed ``fetched`` row, of any round
        (a stream's file holds the records of many rounds)."""
        if not files:
            return {}
        cols = ["warc_filename", "warc_record_offset"]
        if self._locations is None:  # once per run
            try:
                self._locations = self.crawl.read_table(
                    "fetched", manifest.files("fetched"), columns=cols
                )
            except OSError as exc:
                raise ExportError(f"{self.crawl.url}: cannot read fetched: {exc}") from exc
        data = self._locations
        data = data.filter(pc.is_in(data.column(cols[0]), value_set=pa.array(list(files))))
        out: dict[str, set[int]] = {}
        for name, off in zip(*(data.column(c).to_pylist() for c in cols), strict=True):
            out.setdefault(name, set()).add(off)
        return out

    @staticmethod
    def _index_stream(fh, out, end: int, name: str) -> tuple[list, int]:
        """Scan (and copy to ``out``) the first ``end`` bytes of ``fh``; returns the captures and
        the bytes read."""
        tee = _TeeReader(fh, out, end)
        reader = io.BufferedReader(tee, buffer_size=1 << 20)
        captures = scan(reader, name)
        # the iterator stops at the end of the last record: copy whatever follows, byte for byte
        while reader.read(_COPY_CHUNK):
            pass
        return captures, tee.count

    def _index_parts(
        self,
        fetched: pa.Table,
        r: int,
        scanned: dict[str, dict],
        fetched_entries: list[FileEntry],
        languages: Mapping[tuple[str, int], str] | None = None,
        host_signals: Mapping[str, str] | None = None,
        spans: Mapping[str, list[int]] | None = None,
        known: Mapping[str, set[int]] | None = None,
    ) -> list[tuple[str, pa.Table]]:
        """One index part per fetch shard: its captures, plus the robots.txt captures (records
        with no ``fetched`` row of any round: ``known``) of its WARC files within the round's
        ``spans`` (:meth:`_robots_spans`)."""
        known = known or {}
        spans = spans or {}
        revisits = {
            (src, c.offset)
            for src, info in scanned.items()
            for c in info["captures"]
            if c.rec_type == "revisit"
        }
        shard_of_warc: dict[str, int] = {}
        for name, shard in zip(
            fetched.column("warc_filename").to_pylist(),
            fetched.column("shard").to_pylist(),
            strict=True,
        ):
            if name is not None:
                shard_of_warc.setdefault(name, shard)
        for src in scanned:  # robots.txt captures only: the shard its file name gives
            shard = paths.parse_warc_shard(src)
            if src not in shard_of_warc and shard is not None:
                shard_of_warc[src] = shard
        shards = sorted(
            {_part_number(e, i) for i, e in enumerate(fetched_entries)}
            | set(shard_of_warc.values())
        )
        parts = []
        for shard in shards:
            rows = fetched.filter(pc.equal(fetched.column("shard"), shard))
            extra = []
            for src, info in scanned.items():
                if shard_of_warc.get(src) == shard:
                    lo, hi = spans.get(src, (0, info["end"]))
                    mine = [c for c in info["captures"] if lo <= c.offset < hi]
                    extra.extend(
                        ccindex.robots_rows(mine, warc_dest(self.name, r, src), known.get(src, ()))
                    )
            table = ccindex.index_table(
                rows,
                crawl=self.name,
                segment=str(r),
                warc_name=lambda name: warc_dest(self.name, r, name),
                extra_rows=extra,
                revisits=revisits,
                languages=languages,
                content_signals=host_signals,
            )
            parts.append((table_part("index", self.name, r, shard), table))
        return parts

    def _write_index(self, rel: str, table: pa.Table, leave_out: _LeaveOut) -> dict[str, Any]:
        data, dropped = leave_out("index", table)
        data = data.drop_columns([c for c in PARTITION_COLUMNS if c in data.column_names])
        self._write_parquet(rel, data)
        out = {"path": rel, "rows": data.num_rows}
        if leave_out.hosts:
            out["excluded"] = dropped
        return out


def _text_basis(text_entries: Sequence[FileEntry]) -> list[list[Any]]:
    """``[[path, rows], ...]`` (sorted) of a round's ``text`` files: what its exported ``wet``
    and ``index`` were made from (JSON-comparable, as a manifest holds it)."""
    return sorted([e.path, e.rows] for e in text_entries)


def _source_rows(file_info: Mapping[str, Any]) -> int:
    """Rows of the round read from the crawl for one exported file (its export manifest entry):
    those written plus those the ``--exclude-signal`` filter left out."""
    return int(file_info.get("rows") or 0) + int(file_info.get("excluded") or 0)


#: The column naming each exported row's host (``links``: its source page, by url key).
_HOST_COLUMN = {"fetched": "url_host_name", "text": "url_host_name", "index": "url_host_name",
                "fetchlists": "host"}  # fmt: skip


@dataclass(frozen=True)
class _LeaveOut:
    """Drops the rows of excluded hosts from a round's table: by host column, and for ``links``
    the links found on the excluded hosts' pages (``src_url_key`` among the round's ``fetched``
    url keys of those hosts). Returns the table kept and the rows dropped."""

    hosts: frozenset[str]
    page_keys: pa.Array  # url keys of the round's fetched rows of the excluded hosts

    @classmethod
    def of(cls, hosts: frozenset[str], fetched: pa.Table) -> _LeaveOut:
        if not hosts:
            return cls(hosts, pa.array([], pa.uint64()))
        mine = pc.is_in(fetched.column("url_host_name"), value_set=pa.array(sorted(hosts)))
        return cls(hosts, pc.unique(fetched.filter(mine).column("url_key")))

    def __call__(self, table: str, data: pa.Table) -> tuple[pa.Table, int]:
        if not self.hosts or data.num_rows == 0:
            return data, 0
        if table == "links":
            out = pc.is_in(data.column("src_url_key"), value_set=self.page_keys)
        else:
            values = pa.array(sorted(self.hosts))
            out = pc.is_in(data.column(_HOST_COLUMN[table]), value_set=values)
        kept = data.filter(pc.invert(out))
        return kept, data.num_rows - kept.num_rows


def _rename_warc_paths(
    data: pa.Table, rename: Callable[[str], str], column: str = "warc_filename"
) -> pa.Table:
    i = data.schema.get_field_index(column)
    names = [None if n is None else rename(n) for n in data.column(i).to_pylist()]
    return data.set_column(i, data.schema.field(i), pa.array(names, pa.string()))


# -- entry points -------------------------------------------------------------------------------
def export_crawl(
    crawl: CrawlDir,
    dest: str,
    *,
    crawl_name: str = "",
    rounds: tuple[int, int] | None = None,
    tables: Sequence[str] | str = DEFAULT_TABLES,
    storage_options: Mapping[str, Any] | None = None,
    threads: int = 8,
    on_file: Callable[[str], None] | None = None,
    exclude_signals: Iterable[str] = (),
) -> dict[str, Any]:
    """Export the committed rounds of ``crawl`` to ``dest`` (see the module docstring).

    Parameters
    ----------
    crawl
        Source crawl directory (only its committed manifest and the files it names are read).
    dest
        Destination folder: local path or fsspec URL (``s3://bucket/lake``).
    crawl_name
        Partition name of the crawl; default the crawl directory's base name.
    rounds
        ``(first, last)`` rounds, inclusive; default every committed round.
    tables
        Names from :data:`TABLES` (or a comma-separated string); default :data:`DEFAULT_TABLES`.
    storage_options
        fsspec options for ``dest`` (programmatic use; the CLI relies on the environment).
    threads
        Files written concurrently.
    on_file
        Called with each completed DEST-relative file path.
    exclude_signals
        ``NAME=yes|no`` pairs: leave out the hosts whose ``Content-Signal`` holds one
        (:class:`Exporter`).

    Returns
    -------
    dict
        The summary of :meth:`Exporter.run`.

    Raises
    ------
    ExportSettingError, ExportError
        ``ExportSettingError`` also when ``dest`` lies inside the crawl directory, where
        ``batchcrawl gc`` would delete it.
    """
    if crawl.contains(dest):
        raise ExportSettingError(
            f"export destination {dest!r} is inside the crawl directory {crawl.url!r}, where "
            "`batchcrawl gc` would delete it; choose a folder outside the crawl"
        )
    name = crawl_name_of(crawl, crawl_name)
    exporter = Exporter(crawl, Destination(dest, storage_options), name, threads=threads,
                        on_file=on_file, exclude_signals=exclude_signals)  # fmt: skip
    return exporter.run(rounds, parse_tables(tables))


def exported_rounds(
    dest: str, crawl_name: str, storage_options: Mapping[str, Any] | None = None
) -> dict[int, dict[str, Any]]:
    """``{round: export manifest}`` of the rounds of ``crawl_name`` completely exported to ``dest``.

    Lists only the export manifest folder (``_batchcrawl_export/crawl=NAME/``), never the data.
    """
    return _read_markers(Destination(dest, storage_options), check_crawl_name(crawl_name))


def _read_markers(d: Destination, crawl_name: str) -> dict[int, dict[str, Any]]:
    """``{round: export manifest}`` of the rounds of ``crawl_name`` complete in ``d``."""
    folder = d.path(f"{MANIFEST_DIR}/crawl={crawl_name}")
    try:
        names = d.fs.ls(folder, detail=False)
    except FileNotFoundError:
        return {}
    out = {}
    for name in names:
        m = _MARKER_RE.match(posixpath.basename(name.rstrip("/")))
        if m:
            r = int(m.group(1))
            out[r] = d.read_json(marker_path(crawl_name, r))
    return dict(sorted(out.items()))
