"""The crawl directory and its committed generations (docs/design.md §3).

A crawl directory is any fsspec URL (a local path by default, ``s3://bucket/crawl`` the same way)::

    CRAWL/crawl.toml                       config written at init
    CRAWL/_commits/000007.json             manifest of generation 7; the highest is current
    CRAWL/frontier/gen=7/bucket=042.parquet ...

A step writes only *new* files, then commits by publishing the next manifest, which lists every file
of every table with its row count. Publishing is atomic and exclusive: a hard link from a temp file
locally, an ``If-None-Match: *`` put on object stores (Delta Lake's commit protocol, simplified).
Readers only ever read files named by a committed manifest, so a step that dies leaves orphans that
nobody reads, and rerunning it is safe. A manifest may point at files written by older generations
(an unchanged DRUM bucket is not rewritten).

After publishing, a local crawl's ``crawl.duckdb`` is rewritten (temp file + rename) with views over
the new generation (:mod:`batchcrawl.store.views`; from a child process while a crawl runs); remote
crawls have none. This module does not import the views: they register their refresh in
:data:`AFTER_COMMIT` when :mod:`batchcrawl.store` is imported (the package imports them). Writers hold the crawl's :class:`~batchcrawl.store.lock.WriterLock`; old generations are
removed by :func:`batchcrawl.store.gc.gc`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import posixpath
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from batchcrawl.errors import CommitConflict, CrawlDirError, first_line
from batchcrawl.store import atomic, paths, schemas
from batchcrawl.store.paths import COMMITS_DIR, CONFIG_FILE
from batchcrawl.store.publish import publish_manifest

#: The summary ``step`` of a generation committed by a round, and by a stream (a checkpoint of
#: micro-batches, :mod:`batchcrawl.stream`).
ROUND_STEP, STREAM_STEP = "round", "stream"
#: The summary steps of a crawl commit: a round's and a stream checkpoint's.
CRAWL_STEPS = (ROUND_STEP, STREAM_STEP)

#: Manifest format written: 2 lists the append-only tables through immutable file lists
#: (:class:`FileList`); format 1 (every file inline) still reads, and its next commit moves its
#: files into lists.
FORMAT_VERSION = 2
READABLE_FORMATS = (1, 2)
#: Tables whose listing grows by appending (each round's or micro-batch's files): their files
#: beyond the parent's lists go into the manifest inline until more than :data:`INLINE_MAX`, then
#: into a new immutable file list (Iceberg's manifest list, Delta's log checkpoint).
APPENDED_TABLES = ("fetchlists", "fetched", "links", "edges", "text")
#: Most file entries of an appended table kept inline in a manifest before they go to a file list.
INLINE_MAX = 32
#: A new file list absorbs the lists before it that are smaller than this many times its size,
#: so the lists of a table shrink geometrically and there are O(log files) of them (a log-
#: structured merge of the lists, as Iceberg merges small manifests).
LIST_FANOUT = 4
#: A file list with this many entries is never merged again (Iceberg's target manifest size):
#: no commit rewrites more than this many entries of history.
LIST_MAX_FILES = 8192
#: File lists parsed, by full path (they never change once written): the newest few hundred.
_LIST_CACHE: dict[str, tuple[FileEntry, ...]] = {}
_LIST_CACHE_MAX = 512

#: Parquet options of :meth:`CrawlDir.write_table` (fetch lists, hosts runs, the content-seen and
#: domain-link key sets, in-degree, graph nodes): zstd without dictionary pages. These tables'
#: columns are mostly distinct values (url keys, URLs, digests), and a dictionary page costs a setup
#: per column chunk: on a 3-round crawl's files, per file, without dictionaries: fetch lists written
#: in 3.1 instead of 7.9 ms and 118 instead of 161 KB, key sets 0.29-0.42 instead of 0.41-0.70 ms,
#: hosts 0.93 instead of 1.54 ms, each file also 10-25 % smaller and read faster (docs/benchmarks.md,
#: "Session 9"). The frontier's bucket files and due indexes keep their own options.
TABLE_PARQUET_OPTIONS = {"compression": "zstd", "use_dictionary": False}


@dataclass(frozen=True)
class FileEntry:
    """One data file of a table: ``path`` relative to the crawl root, ``rows`` its row count.

    Frontier files also name their DRUM ``bucket``, whether they are a delta ``run`` (else the
    bucket's base), their due-time index ``due`` (a side file, path relative to the crawl root;
    None for files written before the index existed) and, on a bucket's newest file,
    ``bucket_rows``: the bucket's row count after merging it (docs/design.md §4). Other tables
    leave them at their defaults.
    """

    path: str
    rows: int
    bucket: int | None = None
    run: bool = False
    due: str | None = None
    bucket_rows: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "rows": self.rows}
        if self.bucket is not None:
            out.update(bucket=self.bucket, run=self.run)
        if self.due is not None:
            out["due"] = self.due
        if self.bucket_rows is not None:
            out["bucket_rows"] = self.bucket_rows
        return out

    @classmethod
    def from_json(cls, e: Mapping[str, Any]) -> FileEntry:
        bucket = e.get("bucket")
        due = e.get("due")
        bucket_rows = e.get("bucket_rows")
        return cls(
            str(e["path"]),
            int(e["rows"]),
            None if bucket is None else int(bucket),
            bool(e.get("run", False)),
            None if due is None else str(due),
            None if bucket_rows is None else int(bucket_rows),
        )


@dataclass(frozen=True)
class FileList:
    """An immutable file list (``_commits/lists/TABLE-GGGGGG-TOKEN.json``, written once by the
    commit of generation G): ``files`` consecutive entries of one table's listing, ``rows`` their
    row count. A manifest names its lists in order, then its inline entries (docs/design.md §3)."""

    path: str
    files: int
    rows: int

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "files": self.files, "rows": self.rows}

    @classmethod
    def from_json(cls, e: Mapping[str, Any]) -> FileList:
        return cls(str(e["path"]), int(e["files"]), int(e["rows"]))


@dataclass(frozen=True)
class Manifest:
    """One committed generation.

    Attributes
    ----------
    generation
        Number of this generation (0 is written by ``init``).
    round
        Number of the last crawl round committed at or before this generation (0: none yet).
    buckets
        DRUM bucket count K, fixed at init.
    tables
        Table name -> its files. ``frontier`` has one entry per bucket, in bucket order; ``hosts`` one
        per shard; ``fetchlists``, ``fetched``, ``links`` and ``edges`` accumulate the files of
        every round (small ones merged by :mod:`batchcrawl.store.factcompact`).
    summary
        What made this generation (``{"step": "round", ...}``): the round's JSON summary.
    created
        ISO 8601 UTC time of the commit.
    parent
        The generation this one was committed on (None for generation 0).
    lists
        Table name -> the :class:`FileList` files its entries start with (format 2; the rest of
        its entries are inline in the manifest). Not part of equality: two manifests with the
        same files are equal however they are stored.
    warcs_without_rows
        WARC files of committed rounds that no ``fetched`` row names, sorted (paths relative to
        the crawl root): files holding only robots.txt captures, which have no ``fetched`` row.
        Carried from each generation to the next by :meth:`CrawlDir.commit`, so that ``gc``
        keeps them (:func:`batchcrawl.store.gc.referenced_files`); it found WARC files only
        through ``fetched.warc_filename`` and deleted these, robots.txt captures and all.
    """

    generation: int
    round: int
    buckets: int
    tables: Mapping[str, tuple[FileEntry, ...]]
    summary: Mapping[str, Any] = field(default_factory=dict)
    created: str = ""
    parent: int | None = None
    lists: Mapping[str, tuple[FileList, ...]] = field(default_factory=dict, compare=False)
    warcs_without_rows: tuple[str, ...] = ()

    def files(self, table: str) -> list[str]:
        """Paths (relative to the crawl root) of ``table``'s files."""
        return [e.path for e in self.tables.get(table, ())]

    def side_files(self, table: str) -> list[str]:
        """Paths of the side files of ``table``'s files (the frontier's due-time indexes)."""
        return [e.due for e in self.tables.get(table, ()) if e.due is not None]

    def rows(self, table: str) -> int:
        """Total rows of ``table`` in this generation."""
        return sum(e.rows for e in self.tables.get(table, ()))

    def list_files(self) -> list[str]:
        """Paths of the file lists this manifest names (``gc`` keeps them with the manifest)."""
        return [ref.path for refs in self.lists.values() for ref in refs]

    def inline(self, table: str) -> tuple[FileEntry, ...]:
        """``table``'s entries after those of its file lists: the ones written in the manifest."""
        listed = sum(ref.files for ref in self.lists.get(table, ()))
        return tuple(self.tables.get(table, ()))[listed:]

    def to_json(self) -> dict[str, Any]:
        """The manifest's JSON (format 2): each table's file lists and inline entries."""
        return {
            "format": FORMAT_VERSION,
            "generation": self.generation,
            "parent": self.parent,
            "round": self.round,
            "buckets": self.buckets,
            "created": self.created,
            "summary": dict(self.summary),
            "tables": {
                t: {
                    "lists": [ref.to_json() for ref in self.lists.get(t, ())],
                    "files": [e.to_json() for e in self.inline(t)],
                }
                for t in self.tables
            },
            **(
                {"warcs_without_rows": list(self.warcs_without_rows)}
                if self.warcs_without_rows
                else {}
            ),  # fmt: skip
        }

    @classmethod
    def from_json(
        cls,
        data: Mapping[str, Any],
        origin: str,
        load_list: Callable[[FileList], tuple[FileEntry, ...]] | None = None,
    ) -> Manifest:
        """Parse a manifest of format 1 (every entry inline) or 2 (file lists, then inline
        entries; ``load_list`` reads a list's entries). Raises :class:`CrawlDirError` naming
        ``origin`` if it is malformed, or if a list it names is missing or does not match."""
        try:
            fmt = data.get("format")
            if fmt not in READABLE_FORMATS:
                raise ValueError(f"unsupported manifest format {fmt!r}")
            tables: dict[str, tuple[FileEntry, ...]] = {}
            lists: dict[str, tuple[FileList, ...]] = {}
            for t, listing in data["tables"].items():
                if fmt == 1:
                    tables[str(t)] = tuple(FileEntry.from_json(e) for e in listing)
                    continue
                refs = tuple(FileList.from_json(r) for r in listing["lists"])
                entries: list[FileEntry] = []
                for ref in refs:
                    if load_list is None:
                        raise ValueError(f"{t}: names file lists and no reader was given")
                    entries.extend(load_list(ref))
                entries.extend(FileEntry.from_json(e) for e in listing["files"])
                tables[str(t)], lists[str(t)] = tuple(entries), refs
            return cls(
                generation=int(data["generation"]),
                round=int(data["round"]),
                buckets=int(data["buckets"]),
                tables=tables,
                summary=dict(data.get("summary") or {}),
                created=str(data.get("created", "")),
                parent=None if data.get("parent") is None else int(data["parent"]),
                lists=lists,
                warcs_without_rows=tuple(str(p) for p in data.get("warcs_without_rows") or ()),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CrawlDirError(f"{origin}: malformed manifest ({exc})") from None


def utcnow_iso() -> str:
    """Current UTC time as ISO 8601 with milliseconds and ``Z``."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def warcs_left_open(summary: Mapping[str, Any]) -> dict[str, int] | None:
    """The WARC files a commit's ``summary`` says it left open (file relative to the crawl root ->
    committed end in bytes), ``{}`` for a crawl step that left none, or None for a commit that is
    not a crawl step (``extract``, ``compact`` ...): an earlier commit decides."""
    if "warc_open" in summary:
        return {str(name): int(end) for name, end in summary["warc_open"].values()}
    if summary.get("step") in CRAWL_STEPS or summary.get("mode") == "stream":
        return {}
    return None


#: The crawl :meth:`CrawlDir.create` began to write in this process (after its checks that the
#: folder is new or empty), or None.
_creating: CrawlDir | None = None


def created_in_this_process() -> CrawlDir | None:
    """The crawl this process began to create (:meth:`CrawlDir.create` passed its checks: every
    file in the folder is its own), or None. ``init`` stopped before generation 0 was committed
    removes that partial crawl (it would refuse a rerun: "a crawl already exists here")."""
    return _creating


class CrawlDir(atomic.Location):
    """A crawl directory on any fsspec filesystem.

    Parameters
    ----------
    url
        Local path or fsspec URL (``s3://bucket/crawls/news``).
    storage_options
        Passed to fsspec (credentials come from the usual fsspec/boto settings, not from here).

    Use :meth:`create` for a new crawl and :meth:`open` for an existing one.
    """

    # -- paths -------------------------------------------------------------------------------
    def full_url(self, rel: str) -> str:
        """``rel`` as a URL other tools can open (``s3://...`` or an absolute local path)."""
        return self.fs.unstrip_protocol(self.path(rel)) if not self.local else self.path(rel)

    # -- creation ----------------------------------------------------------------------------
    @classmethod
    def create(
        cls,
        url: str,
        config_text: str,
        buckets: int,
        storage_options: Mapping[str, Any] | None = None,
    ) -> CrawlDir:
        """Create a new crawl: write ``crawl.toml`` and commit generation 0 (empty frontier).

        Raises
        ------
        CrawlDirError
            ``url`` already holds a crawl (never overwritten), is a file, or is a directory that
            is not empty (its content is named: a crawl never shares its folder).
        """
        crawl = cls(url, storage_options)
        if crawl.fs.exists(crawl.path(CONFIG_FILE)) or crawl.fs.exists(crawl.path(COMMITS_DIR)):
            raise CrawlDirError(f"{url}: a crawl already exists here; choose another directory")
        if crawl.fs.exists(crawl.root) and crawl.fs.isfile(crawl.root):
            raise CrawlDirError(f"{url}: is a file, not a directory")
        _refuse_foreign_content(crawl, url)
        global _creating
        _creating = crawl  # from here on, what is in the folder was written by this process
        try:
            crawl.fs.makedirs(crawl.path(COMMITS_DIR), exist_ok=True)
            crawl.fs.pipe_file(crawl.path(CONFIG_FILE), config_text.encode("utf-8"))
        except OSError as exc:
            raise CrawlDirError(
                f"{url}: cannot create a crawl here ({exc.strerror or exc}); choose a writable path"
            ) from None
        genesis = Manifest(
            generation=0,
            round=0,
            buckets=buckets,
            tables={t: () for t in schemas.TABLES},
            summary={"step": "init"},
            created=utcnow_iso(),
            parent=None,
        )
        crawl._publish(genesis)
        crawl._after_publish(genesis)
        return crawl

    def remove_partial_creation(self) -> None:
        """Undo a :meth:`create` of this crawl that stopped before generation 0 was committed:
        remove ``crawl.toml``, the temp files in ``_commits/`` (no manifest was published), the
        then empty ``_commits/`` and the crawl's folder if empty. Only for the crawl this
        process began to create (:func:`created_in_this_process`: the folder was new or empty),
        so every file removed is its own. Errors are ignored (best effort; ``init`` reports)."""
        with contextlib.suppress(OSError):
            commits = self.path(COMMITS_DIR)
            for path in self.fs.ls(commits, detail=False) if self.fs.exists(commits) else ():
                if paths.TMP_MARKER in path.rsplit("/", 1)[-1]:
                    self.fs.rm_file(path)
            if self.fs.exists(self.path(CONFIG_FILE)):
                self.fs.rm_file(self.path(CONFIG_FILE))
            if self.local:
                for folder in (commits, self.root):
                    with contextlib.suppress(OSError):
                        os.rmdir(folder)

    @classmethod
    def open(cls, url: str, storage_options: Mapping[str, Any] | None = None) -> CrawlDir:
        """Open an existing crawl.

        Raises
        ------
        CrawlDirError
            No crawl at ``url`` (no ``crawl.toml`` or no committed generation).
        """
        crawl = cls(url, storage_options)
        if not crawl.fs.exists(crawl.path(CONFIG_FILE)):
            if crawl.fs.exists(crawl.root) and crawl.fs.isfile(crawl.root):
                raise CrawlDirError(f"{url}: is a file, not a crawl directory")
            try:
                holds = bool(crawl.fs.ls(crawl.root, detail=False))
            except (FileNotFoundError, NotADirectoryError):
                holds = False
            where = "in a new or empty directory" if holds else f"with `batchcrawl init {url}`"
            raise CrawlDirError(
                f"{url}: not a crawl directory (no {CONFIG_FILE}); check the path, or create "
                f"a crawl {where}"
            )
        if not crawl.generations():
            raise CrawlDirError(f"{url}: no committed generation in {COMMITS_DIR}/")
        return crawl

    def contains(self, url: str) -> bool:
        """True if ``url`` (a path or fsspec URL) names the crawl directory or anything in it,
        where a command's output would overwrite the crawl's files or be deleted by ``gc``.

        Local crawls compare real paths (symlinks resolved, ``file://`` and ``local://`` URLs
        reduced to their paths); others compare the path on the same protocol."""
        path: str
        try:
            fs, path = fsspec.core.url_to_fs(url)
        except (ValueError, ImportError):  # an unknown protocol: its writer will say so
            return False
        if self.local:
            if not atomic.is_local(fs):
                return False
            root = os.path.realpath(self.root)
            return os.path.commonpath([os.path.realpath(path), root]) == root
        if set(atomic.protocols(fs)) != set(atomic.protocols(self.fs)):
            return False
        root = self.root.rstrip("/")
        return posixpath.normpath(path).rstrip("/") == root or path.startswith(root + "/")

    def config_text(self) -> str:
        """Text of ``crawl.toml``."""
        raw: bytes = self.fs.cat_file(self.path(CONFIG_FILE))
        return raw.decode("utf-8")

    # -- generations -------------------------------------------------------------------------
    def generations(self) -> list[int]:
        """Committed generation numbers, ascending."""
        try:
            names = self.fs.ls(self.path(COMMITS_DIR), detail=False)
        except FileNotFoundError:
            return []
        gens = []
        for name in names:
            m = paths.COMMIT_RE.match(posixpath.basename(name.rstrip("/")))
            if m:
                gens.append(int(m.group(1)))
        return sorted(gens)

    def open_warcs(self, generation: int | None = None) -> dict[str, int]:
        """The WARC files the newest crawl commit (a round or a stream micro-batch) up to
        ``generation`` (default: the current) left open: file (relative to the crawl root) ->
        committed end in bytes (its summary's ``warc_open``; :mod:`batchcrawl.engine.warcopen`).
        Empty after a clean stop, a round, or a crawl written before issue 35. Commits that are
        not a crawl step (``extract``, ``compact`` ...) carry no ``warc_open`` and are looked past.
        """
        for gen in reversed(self.generations()):
            if generation is not None and gen > generation:
                continue
            left = warcs_left_open(self.manifest(gen).summary)
            if left is not None:
                return left
        return {}

    def manifest(self, generation: int | None = None) -> Manifest:
        """The manifest of ``generation`` (default: the current, i.e. highest, generation).

        Raises
        ------
        CrawlDirError
            The generation does not exist or its manifest is malformed.
        """
        if generation is None:
            gens = self.generations()
            if not gens:
                raise CrawlDirError(f"{self.url}: no committed generation")
            generation = gens[-1]
        rel = paths.commit_file(generation)
        try:
            raw = self.fs.cat_file(self.path(rel))
        except FileNotFoundError:
            raise CrawlDirError(
                f"{self.url}: generation {generation} does not exist ({_generations_text(self.generations())})"
            ) from None
        try:
            data = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise CrawlDirError(
                f"{self.path(rel)}: not valid JSON ({exc}). If this is the newest generation, "
                f"rename the file (e.g. to {posixpath.basename(rel)}.damaged) to return to the "
                "previous one"
            ) from None
        return Manifest.from_json(data, self.path(rel), self.read_file_list)

    def read_file_list(self, ref: FileList) -> tuple[FileEntry, ...]:
        """The entries of a file list (cached: lists never change once written).

        Raises
        ------
        CrawlDirError
            The list is missing, not valid JSON, or does not hold ``ref.files`` entries.
        """
        full = self.path(ref.path)
        cached = _LIST_CACHE.get(full)
        if cached is not None:
            return cached
        try:
            data = json.loads(self.fs.cat_file(full))
            entries = tuple(FileEntry.from_json(e) for e in data["files"])
        except FileNotFoundError:
            raise CrawlDirError(f"{full}: file list is missing; {DAMAGED_FILE_REMEDY}") from None
        except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
            raise CrawlDirError(
                f"{full}: damaged file list ({exc}); {DAMAGED_FILE_REMEDY}"
            ) from None
        if len(entries) != ref.files:
            raise CrawlDirError(
                f"{full}: file list holds {len(entries)} entries, its manifest says {ref.files}; "
                + DAMAGED_FILE_REMEDY
            )
        _remember_list(full, entries)
        return entries

    def commit(
        self,
        parent: Manifest,
        tables: Mapping[str, Iterable[FileEntry]],
        summary: Mapping[str, Any],
        *,
        round: int | None = None,
        warcs_without_rows: Iterable[str] = (),
    ) -> Manifest:
        """Publish generation ``parent.generation + 1``.

        Parameters
        ----------
        parent
            The generation this step read; the commit fails if another was published since.
        tables
            The *complete* file listing of each table that changed; tables not named keep the
            parent's files.
        summary
            JSON-serializable description of the step (the round summary).
        round
            Round number committed by this generation (default: the parent's).
        warcs_without_rows
            WARC files this step wrote that no ``fetched`` row names (relative paths); added to
            the parent's (:attr:`Manifest.warcs_without_rows`).

        Raises
        ------
        CommitConflict
            The generation was already published (another writer got there first).
        """
        merged = dict(parent.tables)
        for name, entries in tables.items():
            if name not in schemas.TABLES:
                raise CrawlDirError(f"commit: unknown table {name!r}")
            merged[name] = tuple(entries)
        generation = parent.generation + 1
        lists = {
            name: self._file_lists(name, entries, parent, generation)
            for name, entries in merged.items()
        }
        manifest = Manifest(
            generation=generation,
            round=parent.round if round is None else round,
            buckets=parent.buckets,
            tables=merged,
            summary=dict(summary),
            created=utcnow_iso(),
            parent=parent.generation,
            lists=lists,
            warcs_without_rows=tuple(sorted({*parent.warcs_without_rows, *warcs_without_rows})),
        )
        self._publish(manifest)
        self._after_publish(manifest)
        return manifest

    def _file_lists(
        self, table: str, entries: tuple[FileEntry, ...], parent: Manifest, generation: int
    ) -> tuple[FileList, ...]:
        """The file lists of ``table``'s listing ``entries`` in the next generation: the parent's
        lists that still hold the same entries at the same places, and, for an appended table
        whose inline entries passed :data:`INLINE_MAX`, one new list written now with them (and
        the smaller lists before them, :data:`LIST_FANOUT`). Costs O(entries changed) bytes
        written; comparing entries the parent shares is a pointer comparison."""
        old = parent.tables.get(table, ())
        refs = parent.lists.get(table, ())
        if entries is old:
            return refs
        kept: list[FileList] = []
        start = 0
        for ref in refs:
            end = start + ref.files
            if end > len(entries) or entries[start:end] != old[start:end]:
                break
            kept.append(ref)
            start = end
        if table not in APPENDED_TABLES or len(entries) - start <= INLINE_MAX:
            return tuple(kept)
        while (
            kept
            and kept[-1].files < LIST_MAX_FILES
            and (kept[-1].files < LIST_FANOUT * (len(entries) - start))
        ):
            start -= kept.pop().files
        chunk = entries[start:]
        rel = paths.file_list(table, generation, uuid.uuid4().hex[:16])
        body = {"format": FORMAT_VERSION, "table": table, "files": [e.to_json() for e in chunk]}
        with self.open_output(rel) as fh:
            fh.write((json.dumps(body, separators=(",", ":")) + "\n").encode("utf-8"))
        _remember_list(self.path(rel), chunk)
        return (*kept, FileList(rel, len(chunk), sum(e.rows for e in chunk)))

    def _after_publish(self, manifest: Manifest) -> None:
        """Run every :data:`AFTER_COMMIT` hook (the ``crawl.duckdb`` refresh,
        :func:`batchcrawl.store.views.after_commit`: now, or in the background while a crawl
        runs). The manifest is the truth: the hooks log their failures, never raise them."""
        for hook in AFTER_COMMIT:
            hook(self, manifest)

    def _publish(self, manifest: Manifest) -> None:
        rel = paths.commit_file(manifest.generation)
        data = (json.dumps(manifest.to_json(), indent=1, sort_keys=True) + "\n").encode("utf-8")
        if not publish_manifest(self, rel, data, manifest.generation):  # a stop cannot cut it
            raise CommitConflict(
                f"{self.path(rel)}: generation {manifest.generation} was committed by another writer"
            )

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Create file ``rel`` with ``data`` atomically and only if it does not exist yet.

        Locally: write and fsync a temp file, then hard-link it to the final name (``link`` fails
        if the name exists) and fsync the directory. On object stores: a create-only put
        (``If-None-Match: *``, fsspec ``mode="create"``). Returns False if ``rel`` already existed;
        a reader never sees a partly written file.
        """
        final = self.path(rel)
        if not self.local:
            try:
                self.fs.pipe_file(final, data, mode="create")
            except FileExistsError:
                return False
            return True
        os.makedirs(os.path.dirname(final), exist_ok=True)
        tmp = atomic.temp_name(final)
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, final)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        _fsync_dir(os.path.dirname(final))
        return True

    # -- table files -------------------------------------------------------------------------
    def open_output(self, rel: str) -> contextlib.AbstractContextManager[IO[bytes]]:
        """A binary file handle for a *new* data file ``rel``, whole or absent once the block ends.

        Through :func:`batchcrawl.store.atomic.open_whole`: a temp file renamed into place locally,
        an upload completed only on success on object stores; on error nothing appears at ``rel``.
        """
        return atomic.open_whole(self.fs, self.path(rel))

    def write_table(self, table: str, rel: str, data: schemas.TableData) -> FileEntry:
        """Validate ``data`` against ``table``'s schema and write it as Parquet at ``rel``
        (through :meth:`open_output`, so a file at ``rel`` is always whole).

        Raises :class:`~batchcrawl.errors.SchemaError` on a schema mismatch.
        """
        arrow = schemas.conform(table, data)
        with self.open_output(rel) as fh:
            pq.write_table(arrow, fh, **TABLE_PARQUET_OPTIONS)
        return FileEntry(rel, arrow.num_rows)

    def read_table(
        self, table: str, entries: Iterable[FileEntry | str], columns: list[str] | None = None
    ) -> pa.Table:
        """Read and concatenate the given files of ``table`` (empty table if none)."""
        parts = []
        for entry in entries:
            rel = entry.path if isinstance(entry, FileEntry) else entry
            with reading(self.fs, self.path(rel)) as fh:
                parts.append(read_columns(table, pq.ParquetFile(fh), columns))
        if not parts:
            target = schemas.schema(table)
            return (
                target.empty_table()
                if columns is None
                else pa.schema([target.field(c) for c in columns]).empty_table()
            )
        return pa.concat_tables(parts, promote_options="default")

    def iter_row_groups(
        self, table: str, entries: Iterable[FileEntry | str], columns: list[str] | None = None
    ) -> Iterator[pa.Table]:
        """The given files of ``table`` one Parquet row group at a time, in file and row order
        (``columns`` as in :meth:`read_table`): the rows of :meth:`read_table`, with memory
        bounded by a row group (a partitioned fact file has one per DRUM bucket,
        :mod:`batchcrawl.store.shuffle`) instead of by all the files."""
        for entry in entries:
            rel = entry.path if isinstance(entry, FileEntry) else entry
            with reading(self.fs, self.path(rel)) as fh:
                pf = pq.ParquetFile(fh)
                for i in range(pf.num_row_groups):
                    yield read_columns(table, pf, columns, [i])

    def read_current(
        self, table: str, columns: list[str] | None = None, generation: int | None = None
    ) -> pa.Table:
        """All rows of ``table`` in ``generation`` (default current)."""
        return self.read_table(table, self.manifest(generation).tables.get(table, ()), columns)


#: What a reader of a crawl's Parquet files says when one cannot be read: the remedy.
DAMAGED_FILE_REMEDY = (
    "restore it from a copy of the crawl (sql, status and report read an older generation with "
    "--generation N)"
)


@contextlib.contextmanager
def reading(fs: Any, path: str) -> Iterator[IO[bytes]]:
    """Open ``path`` on ``fs`` (an fsspec filesystem) for reading a data file a generation names:
    a missing, truncated or garbled file raises :class:`CrawlDirError` naming it (exit code 3),
    never a pyarrow or thrift error. Errors of the system (an ``errno``: no access, a file where
    a folder should be, an I/O error) keep their type, and so, on an object store, do errors
    other than pyarrow's (a connection's may pass on retry).

    Raises
    ------
    CrawlDirError
        The file is missing, or is not a readable Parquet (or Arrow) file.
    """
    try:
        with fs.open(path, "rb") as fh:
            yield fh
    except FileNotFoundError:
        raise CrawlDirError(f"{path}: the file is missing; {DAMAGED_FILE_REMEDY}") from None
    except (OSError, pa.ArrowException) as exc:
        if not isinstance(exc, pa.ArrowException) and (
            exc.errno is not None or not atomic.is_local(fs)
        ):
            raise  # the system's error (no access, a file where a folder should be, EIO)
        raise CrawlDirError(
            f"{path}: cannot be read ({first_line(exc)}): the file is damaged; "
            + DAMAGED_FILE_REMEDY
        ) from None


def read_parquet(fh: IO[bytes], columns: list[str] | None, *, threads: bool = True) -> pa.Table:
    """``columns`` (None: all) of the one Parquet file open as ``fh``, read by ``pq.ParquetFile``.

    Not ``pq.read_table``: for a single file it builds a ``ParquetDataset``, which imports
    ``pyarrow.dataset`` (15 MB of RSS in every process that reads, each fetch worker among them,
    docs/benchmarks.md "Issue 33, 2026-12-06"). ``threads`` (Arrow's thread pools and coalesced
    pre-buffered reads, as ``read_table`` has them) False: see :mod:`batchcrawl.engine.duecheck`.
    A missing column raises pyarrow's error, as ``read_table`` does.
    """
    return pq.ParquetFile(fh, pre_buffer=threads).read(columns=columns, use_threads=threads)


def read_columns(
    table: str, pf: pq.ParquetFile, columns: list[str] | None, row_groups: list[int] | None = None
) -> pa.Table:
    """``columns`` (None: all, as stored) of one open file of ``table``, of its ``row_groups``
    only if given (indexes, in this order); a column added to the schema after the file was
    written reads as nulls of its schema type."""

    def read(cols: list[str] | None) -> pa.Table:
        return pf.read(columns=cols) if row_groups is None else pf.read_row_groups(row_groups, cols)

    if columns is None:
        return read(None)
    have = set(pf.schema_arrow.names)
    got = read([c for c in columns if c in have])
    for c in columns:
        if c not in have:
            field_ = schemas.schema(table).field(c)
            got = got.append_column(field_, pa.nulls(got.num_rows, field_.type))
    return got.select(columns)


def _refuse_foreign_content(crawl: CrawlDir, url: str) -> None:
    """Raise :class:`CrawlDirError` if ``crawl.root`` is a directory with anything in it: ``gc``
    must never meet files the crawl did not write (an export, a user's files)."""
    try:
        names = sorted(
            posixpath.basename(n.rstrip("/")) for n in crawl.fs.ls(crawl.root, detail=False)
        )
    except (FileNotFoundError, NotADirectoryError):
        return
    names = [n for n in names if n]
    if names:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise CrawlDirError(
            f"{url}: not empty and not a crawl (holds {shown}); init needs a new or empty "
            "directory: choose another path"
        )


def _remember_list(full: str, entries: tuple[FileEntry, ...]) -> None:
    """Cache a file list's entries by full path, dropping the oldest past :data:`_LIST_CACHE_MAX`."""
    _LIST_CACHE[full] = entries
    while len(_LIST_CACHE) > _LIST_CACHE_MAX:
        del _LIST_CACHE[next(iter(_LIST_CACHE))]


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: Called with ``(crawl, manifest)`` after each generation is published, in order (by
#: :meth:`CrawlDir.commit` and :meth:`CrawlDir.create`). :mod:`batchcrawl.store.views` registers the
#: ``crawl.duckdb`` refresh here when imported, which :mod:`batchcrawl.store` always does: the
#: dependency points from the views to the crawl directory, never back (tests/test_layout.py).
#: A hook must not raise (it logs): the manifest is already the truth.
AFTER_COMMIT: list[Callable[[CrawlDir, Manifest], None]] = []


def _generations_text(generations: list[int]) -> str:
    """The committed ``generations`` (ascending) as an error message names them: ``the
    committed generations are 0-8`` (a run without gaps), ``... are 3, 5, 9`` (after gc), or
    ``no generation is committed``."""
    if not generations:
        return "no generation is committed"
    if generations == list(range(generations[0], generations[-1] + 1)) and len(generations) > 2:
        return f"the committed generations are {generations[0]}-{generations[-1]}"
    return f"the committed generations are {', '.join(map(str, generations))}"
