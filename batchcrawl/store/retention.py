"""Automatic retention: expire the generations outside the time-travel window after a commit
(docs/design.md §3, "Retention"; Iceberg's ``expire_snapshots``, Delta's log retention).

Kept are the newest ``keep_generations`` generations and every generation committed less than
``keep_seconds`` ago. An expired generation loses its manifest first (nobody reads it after
that), then the files that only it and older ones named: its table files and file lists that
the oldest kept generation does not name, and its link graph. The cost is O(what changed between
the expired generation and the oldest kept one), never a walk of the crawl directory: one listing
of ``_commits/`` (as many manifests as the window holds) and the manifests involved, whose file
lists shared with the kept generation are not even compared. WARC files are left alone (a
committed ``fetched`` row names them in every later generation, compacted or not).

:func:`remove_orphans` deletes, after a round's (or micro-batch's) commit, what a killed attempt
at the same round left: a SIGKILLed round (or stream) is rerun under the same round and
generation numbers, so its orphans -- WARC files and CDXJ of its fetch (unique names), fact files
of shards, frontier, content and in-degree runs of buckets the rerun did not write, temp files of
interrupted writes -- lie in exactly the folders of the round and generation just committed
(``fetched/round=R``, ``warc/round=R``, ``frontier/gen=G``, ...). Those few folders are listed,
nothing else. A file there is deleted when the new generation does not name it (older kept
generations cannot: they predate the round) -- nor name it as a WARC file its ``fetched`` rows of
the round point into (with its CDXJ and WET files) or as the stream's open WARC file (its
``warc_open``) -- **and** it was last written before the writer lock was taken: by a writer that
is gone. Files written since belong to this crawl process, whose writers may still be at work (the
fetch threads rewrite the open WARC file's CDXJ after the take; a WARC file holding only
robots.txt captures is named by no row): they are never deleted here. Other crawl processes are
kept out by the lock, and a pipelined round or the stream's next micro-batch writes the folders of
the next round and generation. On an object store, whose clock may differ from ours, a file counts
as older than the lock only :data:`CLOCK_SKEW_S` before it. Orphans of a crash between a commit and
this step, ``compact`` leftovers, old temp files elsewhere and the folders they leave empty
stay for ``batchcrawl gc``, which walks the whole directory. :func:`expire` removes the folders its
own deletions left empty (a local crawl directory; :func:`batchcrawl.store.gc.remove_emptied_folders`).

A file never comes back into a listing once it left it (every write has a new name), so a file
that the oldest kept generation does not name is named by no kept generation.
"""

from __future__ import annotations

import datetime as dt
import logging
import posixpath
import time
from collections.abc import Callable
from typing import Any

from batchcrawl.errors import ConfigError
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir, Manifest, warcs_left_open
from batchcrawl.store.gc import (
    graph_files,
    is_layout_path,
    listing_mtime,
    manifest_files,
    remove_emptied_folders,
    warc_companions,
)

log = logging.getLogger(__name__)


def expire(
    crawl: CrawlDir,
    keep_generations: int,
    keep_seconds: float,
    *,
    clock: Callable[[], float] = time.time,
) -> dict[str, Any]:
    """Expire the generations of ``crawl`` outside the window; call holding the writer lock,
    right after a commit.

    Parameters
    ----------
    crawl
        The crawl directory.
    keep_generations
        Newest generations always kept (config ``crawl.keep_generations``), at least 1.
    keep_seconds
        Generations created less than this many seconds before ``clock()`` are kept too
        (config ``gc.keep_seconds``; 0: the count alone).
    clock
        Wall clock, seconds since the epoch, compared with the manifests' ``created``.

    Returns
    -------
    dict
        ``expired`` (generation numbers), ``deleted_files``.

    Raises
    ------
    ConfigError
        ``keep_generations`` < 1 or ``keep_seconds`` < 0.
    """
    if keep_generations < 1 or keep_seconds < 0:
        raise ConfigError(
            f"retention: keep_generations must be at least 1 and keep_seconds at least 0, got "
            f"{keep_generations} and {keep_seconds}"
        )
    gens = crawl.generations()
    candidates = gens[:-keep_generations]
    if not candidates:
        return {"expired": [], "deleted_files": 0}
    expired: list[Manifest] = []
    for gen in candidates:
        manifest = crawl.manifest(gen)
        if keep_seconds and _created_s(manifest) > clock() - keep_seconds:
            break  # created times grow with generations: the rest are younger still
        expired.append(manifest)
    if not expired:
        return {"expired": [], "deleted_files": 0}
    oldest_kept = crawl.manifest(gens[len(expired)])
    doomed: set[str] = set()
    for manifest in expired:
        doomed |= only_in(manifest, oldest_kept)
        doomed.update(graph_files(crawl, manifest.generation))
    for manifest in expired:  # manifests first: once gone, nobody reads their files
        crawl.fs.rm_file(crawl.path(paths.commit_file(manifest.generation)))
    deleted = 0
    for rel in sorted(doomed):
        try:
            crawl.fs.rm_file(crawl.path(rel))
        except FileNotFoundError:
            continue
        deleted += 1
    folders = remove_emptied_folders(crawl, doomed)  # a graph's gen=G/{nodes,out,in}, gen=G
    numbers = [m.generation for m in expired]
    log.debug("retention %s: expired generations %s, %d files, %d empty folders", crawl.url,
              numbers, deleted, folders)  # fmt: skip
    return {"expired": numbers, "deleted_files": deleted}


#: Tables whose files a round's update writes into ``TABLE/gen=G`` (:func:`remove_orphans`).
GENERATION_TABLES = ("frontier", "hosts", "content", "domainlinks", "indegree")


#: Seconds an object store's file time must precede the lock's start for :func:`remove_orphans`
#: to count the file as a dead writer's (its clock is not ours); 0 on a local disk.
CLOCK_SKEW_S = 300.0


def remove_orphans(
    crawl: CrawlDir, parent: Manifest, manifest: Manifest, since: float | None
) -> dict[str, Any]:
    """Delete what killed attempts left in the folders of the rounds and generations that
    ``manifest`` committed after ``parent`` (module doc); call holding the writer lock, right
    after a round's or stream micro-batch's commit.

    Parameters
    ----------
    crawl
        The crawl directory.
    parent, manifest
        The generation the commit followed and the one it made (``manifest.round`` past
        ``parent.round``: a round or micro-batch; otherwise no round folder is looked at).
    since
        When the writer lock was taken (:attr:`WriterLock.started`, seconds since the epoch):
        only files last written before it are deleted. None: nothing is.

    Returns
    -------
    dict
        ``folders`` listed, ``deleted_files``, ``deleted_bytes``.

    Raises
    ------
    OSError
        A folder could not be listed or a file not deleted (a file already gone is not an error).
    """
    rounds = range(parent.round + 1, manifest.round + 1)
    generations = range(parent.generation + 1, manifest.generation + 1)
    folders = [
        *(f"{table}/gen={g}" for table in GENERATION_TABLES for g in generations),
        *(paths.round_dir(table, r) for table in paths.ROUND_TABLES for r in rounds),
        *(paths.warc_dir(r) for r in rounds),
    ]
    if since is None:
        return {"folders": 0, "deleted_files": 0, "deleted_bytes": 0}
    dead_before = since - (0.0 if crawl.local else CLOCK_SKEW_S)
    named = _named(crawl, manifest, rounds)
    deleted = deleted_bytes = 0
    for folder in folders:
        try:
            listing = crawl.fs.ls(crawl.path(folder), detail=True)
        except FileNotFoundError:
            continue
        table = folder.split("/", 1)[0]
        for info in listing:
            if info.get("type") != "file":
                continue
            rel = posixpath.relpath(info["name"], crawl.root)
            if rel in named or not is_layout_path(table, rel) or listing_mtime(info) >= dead_before:
                continue  # named, not ours, or written by this process (module doc)
            try:
                crawl.fs.rm_file(info["name"])
            except FileNotFoundError:
                continue
            deleted += 1
            deleted_bytes += int(info.get("size") or 0)
    if deleted:
        log.info("retention %s: %d orphans of killed rounds (%d bytes) in %s", crawl.url,
                 deleted, deleted_bytes, folders)  # fmt: skip
    return {"folders": len(folders), "deleted_files": deleted, "deleted_bytes": deleted_bytes}


def _named(crawl: CrawlDir, manifest: Manifest, rounds: range) -> set[str]:
    """What ``manifest`` names (table files, side files), plus the WARC files its ``fetched``
    rows of ``rounds`` point into and the WARC files left open across it, with their companions
    (:func:`batchcrawl.store.gc.warc_companions`)."""
    sources = []
    for rel in manifest.files("fetched"):
        span = paths.fact_rounds(rel)
        if span is not None and span[0] <= rounds.stop - 1 and span[1] >= rounds.start:
            sources.append(rel)
    warcs: set[str] = set()
    if len(rounds):  # the just-committed manifest in hand decides, without listing _commits/
        left = warcs_left_open(manifest.summary)
        warcs = set(crawl.open_warcs(manifest.generation) if left is None else left)
    if sources:
        column = crawl.read_table("fetched", sources, columns=["warc_filename"]).column(0)
        warcs.update(str(v) for v in column.unique().drop_null().to_pylist())
    return manifest_files(manifest) | warc_companions(warcs)


def only_in(old: Manifest, kept: Manifest) -> set[str]:
    """Paths (relative to the crawl root) that ``old`` names and ``kept`` does not: table files,
    their side files, file lists. The leading file lists the two share are skipped whole."""
    out = set(old.list_files()) - set(kept.list_files())
    for table, entries in old.tables.items():
        shared = 0
        for a, b in zip(old.lists.get(table, ()), kept.lists.get(table, ()), strict=False):
            if a.path != b.path:
                break
            shared += a.files
        alive: set[str] = set()
        for e in kept.tables.get(table, ())[shared:]:
            alive.add(e.path)
            if e.due is not None:
                alive.add(e.due)
        for e in entries[shared:]:
            for rel in (e.path, e.due):
                if rel is not None and rel not in alive:
                    out.add(rel)
    return out


def _created_s(manifest: Manifest) -> float:
    """A manifest's ``created`` as seconds since the epoch (an unreadable time counts as old)."""
    try:
        return dt.datetime.fromisoformat(manifest.created.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0
