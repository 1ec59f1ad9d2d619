"""Garbage collection of a crawl directory: keep the last N generations, delete the rest (docs/design.md §3).

A file is kept exactly when a kept manifest references it: directly (a table file or one of the
file lists under ``_commits/lists/`` that its listing goes through) or, for WARC
files, through the ``warc_filename`` column of a kept generation's ``fetched`` table or its list of
WARC files without such rows (robots.txt captures only: ``Manifest.warcs_without_rows``). What goes:
files of generations no longer kept, orphans of rounds that died before committing, and ``*.tmp-*``
leftovers of interrupted writes once older than a safety age (a write in progress has a young temp
file). Like Nutch's ``current``/``old`` CrawlDb swap, but N deep.

On a local crawl directory ``gc`` then removes the folders the layout names that are left empty
(``frontier/gen=7``, ``graph/gen=7/nodes`` ...; object stores have no folders), never one that
still holds a file or a folder of someone else's.

``gc`` only ever deletes a file whose path the crawl's own layout produces (:data:`batchcrawl.store.paths.LAYOUT`, e.g.
``frontier/gen=7/bucket=042.parquet``, ``warc/round=7/...warc.gz``, their ``.tmp-*`` temp files,
old manifests, ``crawl.duckdb.tmp-*``): a file someone else put into the crawl directory, even
inside a table folder, is never touched, and neither is a folder the layout does not name.

Call it while holding the :class:`~batchcrawl.store.lock.WriterLock`: an uncommitted round's files are
orphans until its commit, and ``gc`` would delete them.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import time
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow.compute as pc

from batchcrawl.errors import ConfigError
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir, Manifest
from batchcrawl.store.paths import COMMITS_DIR, DATA_DIRS, LAYOUT_RE, PARTITION_DIR_RE, TMP_MARKER

log = logging.getLogger(__name__)

#: Folders the layout puts inside a table's partition folders (``graph/gen=G/nodes``, ``.../out``,
#: ``.../in``); the other tables keep their files directly in ``gen=G`` / ``round=R``.
PARTITION_SUBDIRS: dict[str, tuple[str, ...]] = {"graph": ("nodes", *paths.GRAPH_DIRECTIONS)}


def referenced_files(crawl: CrawlDir, generations: list[int]) -> set[str]:
    """Paths (relative to the crawl root) referenced by the manifests of ``generations``: their
    file lists (``_commits/lists/``), every table file, every WARC file named in their ``fetched``
    tables or listed without rows (with its companions, :func:`warc_companions`), and the link graph built from each of
    them (its ``graph.json`` and the files that lists under ``"files"``)."""
    keep: set[str] = set()
    fetched: set[str] = set()
    for gen in generations:
        manifest = crawl.manifest(gen)
        keep.update(manifest.list_files())
        keep.update(manifest_files(manifest))
        fetched.update(manifest.files("fetched"))
        keep.update(graph_files(crawl, gen))
        keep.update(warc_companions(manifest.warcs_without_rows))  # robots.txt captures only
    for rel in sorted(fetched):
        column = crawl.read_table("fetched", [rel], columns=["warc_filename"]).column(0)
        keep.update(warc_companions(pc.unique(column.drop_null()).to_pylist()))
    return keep


def manifest_files(manifest: Manifest) -> set[str]:
    """Every table file and side file ``manifest`` names (paths relative to the crawl root)."""
    named: set[str] = set()
    for table in manifest.tables:
        named.update(manifest.files(table))
        named.update(manifest.side_files(table))
    return named


def warc_companions(names: Iterable[str]) -> set[str]:
    """The WARC files ``names`` (paths relative to the crawl root, as ``fetched.warc_filename``
    holds them) normalized, each with the CDXJ index beside it and, for a ``.warc.gz``, its WET
    file: what is kept or deleted together, whether or not the companions were written."""
    out: set[str] = set()
    for name in names:
        name = posixpath.normpath(name)
        out.update((name, posixpath.normpath(paths.warc_cdxj(name))))
        if name.endswith(".warc.gz"):
            out.add(posixpath.normpath(paths.wet_file(name)))
    return out


def graph_files(crawl: CrawlDir, generation: int) -> list[str]:
    """The files of the link graph of ``generation`` (none if it was never built)."""
    rel = paths.graph_manifest(generation)
    try:
        data = json.loads(crawl.fs.cat_file(crawl.path(rel)))
    except FileNotFoundError:
        return []
    return [rel, *(str(f) for f in data["files"])]


def gc(
    crawl: CrawlDir,
    keep: int,
    *,
    tmp_min_age_s: float = 3600.0,
    clock: Callable[[], float] = time.time,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Keep the last ``keep`` generations of ``crawl`` and delete everything they do not reference.

    Parameters
    ----------
    crawl
        The crawl directory; the caller holds its writer lock.
    keep
        Generations kept, at least 1 (config ``crawl.keep_generations``).
    tmp_min_age_s
        ``*.tmp-*`` files younger than this many seconds are left alone (a write may be running).
    clock
        Wall clock, seconds since the epoch, compared with file modification times.
    dry_run
        Count what would be deleted without deleting.

    Returns
    -------
    dict
        ``kept_generations`` (list), ``deleted_manifests``, ``deleted_files``, ``deleted_bytes``,
        ``kept_files``, ``dry_run``.

    Raises
    ------
    ConfigError
        ``keep`` < 1.
    """
    if keep < 1:
        raise ConfigError(f"gc: keep must be at least 1 generation, got {keep}")
    gens = crawl.generations()
    kept, dropped = gens[-keep:], gens[:-keep]
    referenced = referenced_files(crawl, kept)
    now = clock()
    stats = {"deleted_manifests": 0, "deleted_files": 0, "deleted_bytes": 0, "kept_files": 0}

    def delete(path: str, size: int) -> None:
        if not dry_run:
            try:
                crawl.fs.rm_file(path)
            except FileNotFoundError:
                return
        stats["deleted_files"] += 1
        stats["deleted_bytes"] += int(size or 0)

    # Manifests first: once a generation's manifest is gone nobody reads its files.
    dropped_manifests = {paths.commit_file(gen) for gen in dropped}
    for gen in dropped:
        if not dry_run:
            crawl.fs.rm_file(crawl.path(paths.commit_file(gen)))
        stats["deleted_manifests"] += 1
    for folder in (*DATA_DIRS, COMMITS_DIR, ""):
        for path, info in _walk(crawl, folder):
            rel = posixpath.relpath(path, crawl.root)
            if not is_layout_path(folder, rel) or rel in dropped_manifests:
                continue  # not ours: never touched, never counted; or counted above
            if TMP_MARKER in posixpath.basename(rel) or ".stale-" in posixpath.basename(rel):
                if now - listing_mtime(info) >= tmp_min_age_s:
                    delete(path, info.get("size", 0))
            elif _collectable(folder, rel) and rel not in referenced:
                delete(path, info.get("size", 0))
            else:
                stats["kept_files"] += 1
    if crawl.local and not dry_run:
        for folder in DATA_DIRS:
            _remove_empty_partition_dirs(crawl.path(folder), PARTITION_SUBDIRS.get(folder, ()))
    log.info("gc %s: kept generations %s, %s", crawl.url, kept, stats)
    return {"kept_generations": kept, **stats, "dry_run": dry_run}


def _collectable(folder: str, rel: str) -> bool:
    """True for a file ``gc`` deletes when no kept generation references it: a table folder's
    data file or a file list; never a manifest (kept or already deleted) or a root file."""
    if folder == COMMITS_DIR:
        return paths.LIST_RE.fullmatch(rel) is not None
    return folder != ""


def is_layout_path(folder: str, rel: str) -> bool:
    """True if ``rel`` (relative to the crawl root) is a path the crawl's layout produces in
    ``folder`` (a table folder, ``_commits``, or ``""`` for the root's temp files)."""
    pattern = LAYOUT_RE.get(folder)
    return pattern is not None and pattern.fullmatch(rel) is not None


def _walk(crawl: CrawlDir, folder: str) -> list[tuple[str, dict[str, Any]]]:
    base = crawl.path(folder) if folder else crawl.root
    if folder:
        try:
            found = crawl.fs.find(base, detail=True)
        except FileNotFoundError:
            return []
        return sorted(found.items())
    try:
        listing = crawl.fs.ls(base, detail=True)
    except FileNotFoundError:
        return []
    return sorted((i["name"], i) for i in listing if i.get("type") == "file")


def listing_mtime(info: dict[str, Any]) -> float:
    """Modification time of a listing entry, seconds since the epoch (local ``mtime``, S3
    ``LastModified``); unknown times count as old."""
    for key in ("mtime", "LastModified", "last_modified", "created"):
        value = info.get(key)
        if value is None:
            continue
        if hasattr(value, "timestamp"):
            return float(value.timestamp())
        try:
            return float(value)
        except (TypeError, ValueError):
            continue
    return 0.0


def remove_emptied_folders(crawl: CrawlDir, deleted: Iterable[str]) -> int:
    """On a local crawl directory, remove the folders of the ``deleted`` files (paths relative to
    the crawl root) that are left empty and that the layout names (``TABLE/gen=G``,
    ``TABLE/round=R``, ``graph/gen=G/nodes`` ...), deepest first; returns how many went. A folder
    that still holds anything stays, and so does every other folder. Object stores have no
    folders: nothing to do there."""
    if not crawl.local:
        return 0
    folders: set[str] = set()
    for rel in deleted:
        parts = posixpath.normpath(rel).split("/")[:-1]
        while _is_layout_folder(parts):
            folders.add("/".join(parts))
            parts = parts[:-1]
    removed = 0
    for folder in sorted(folders, key=lambda f: (-f.count("/"), f)):
        removed += _rmdir_if_empty(crawl.path(folder))
    return removed


def _is_layout_folder(parts: list[str]) -> bool:
    """True if the folder ``"/".join(parts)`` is one the layout makes inside a table folder: a
    partition folder (``gen=G``, ``round=R``, ``rounds=A-B``) or one of its
    :data:`PARTITION_SUBDIRS`."""
    if len(parts) not in (2, 3) or parts[0] not in DATA_DIRS:
        return False
    if PARTITION_DIR_RE.fullmatch(parts[1]) is None:
        return False
    return len(parts) == 2 or parts[2] in PARTITION_SUBDIRS.get(parts[0], ())


def _rmdir_if_empty(path: str) -> bool:
    """Remove the folder ``path`` if it is empty (``os.rmdir`` refuses one that holds anything)."""
    try:
        os.rmdir(path)
    except OSError:  # not empty, already gone, or not a folder
        return False
    return True


def _remove_empty_partition_dirs(root: str, subdirs: tuple[str, ...] = ()) -> None:
    """Remove the empty ``gen=N`` / ``round=N`` folders directly under ``root`` (a table folder),
    after their empty ``subdirs`` (the folders the layout puts inside them); any other folder is
    not ours and stays, and so does a partition folder that holds one."""
    if not os.path.isdir(root):
        return
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if PARTITION_DIR_RE.fullmatch(name) and os.path.isdir(path):
            for sub in subdirs:
                _rmdir_if_empty(os.path.join(path, sub))
            _rmdir_if_empty(path)
