"""Automatic retention: expire the generations outside the time-travel window after a commit
(docs/design.md §3, "Retention"; Iceberg's ``expire_snapshots``, Delta's log retention).

Kept are the newest ``keep_generations`` generations and every generation committed less than
``keep_seconds`` ago. An expired generation loses its manifest first (nobody reads it after
that), then the files that only it and older ones named: its table files and file lists that
the oldest kept generation does not name, and its link graph. The cost is O(what changed between
the expired generation and the oldest kept one), never a walk of the crawl directory: one listing
of ``_commits/`` (as many manifests as the window holds) and the manifests involved, whose file
lists shared with the kept generation are not even compared. WARC files are left alone (a
committed ``fetched`` row names them in every later generation, compacted or not), and so are temp
files and the orphans of killed rounds: ``batchcrawl gc`` walks the directory for those.

A file never comes back into a listing once it left it (every write has a new name), so a file
that the oldest kept generation does not name is named by no kept generation.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from typing import Any

from batchcrawl.errors import ConfigError
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir, Manifest
from batchcrawl.store.gc import graph_files

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
    numbers = [m.generation for m in expired]
    log.debug("retention %s: expired generations %s, %d files", crawl.url, numbers, deleted)
    return {"expired": numbers, "deleted_files": deleted}


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
