"""Updatedb: merge one round's (or micro-batch's) facts into every table keyed by them, at once.

A round's fetch shards leave three partitioned fact files each (:mod:`batchcrawl.store.shuffle`):
``fetched``, ``links`` and ``edges``. Three independent DRUM merges take them in (Nutch's
``updatedb``, which also updates the LinkDb, IRLbot §5.1; docs/design.md §4, §8b):

* the **frontier** (:func:`batchcrawl.frontier.update.update`), bucketed by ``url_key``;
* the **content-seen** set (:func:`batchcrawl.frontier.content.update_content`), by digest;
* the **domain in-degree** (:func:`batchcrawl.frontier.indegree.update_indegree`), by domain pair.

They read different columns, write different tables and share nothing but the parent manifest, so
:func:`updatedb` runs them side by side: each on its own driver thread, each mapping its
per-bucket tasks through the same ``mapper``. On a Dask cluster their tasks then queue together
and the workers go from one merge's tasks to the next without a barrier between them, while the
driver reduces the round's digests and domain pairs (its part of the content and in-degree merges)
as the frontier's tasks run. Run one after another, a round boundary paid three scheduling
barriers of 64 short tasks each (docs/benchmarks.md, "Session 6: the round boundary's update").
Nothing is committed here: the caller commits the three listings with the rest of the round.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa

from batchcrawl.config import Config
from batchcrawl.frontier import content as content_mod
from batchcrawl.frontier import indegree as indegree_mod
from batchcrawl.frontier import update as update_mod
from batchcrawl.frontier.runs import Mapper
from batchcrawl.store.crawldir import CrawlDir, Manifest
from batchcrawl.store.shuffle import Partitioned

log = logging.getLogger(__name__)

R = TypeVar("R")


@dataclass
class UpdatedbResult:
    """What :func:`updatedb` produced (uncommitted).

    Attributes
    ----------
    frontier : batchcrawl.frontier.update.UpdateResult
        The updated buckets' files and the frontier summary.
    content : batchcrawl.frontier.content.ContentUpdate
        The ``content`` listing and counts.
    indegree : batchcrawl.frontier.indegree.IndegreeUpdate
        The ``domainlinks`` and ``indegree`` listings and counts.
    seconds : dict of str to float
        Wall seconds of each merge, from the common start to its end (``frontier``,
        ``content``, ``indegree``; they overlap, so they do not add up to the step's time).
    """

    frontier: update_mod.UpdateResult
    content: content_mod.ContentUpdate
    indegree: indegree_mod.IndegreeUpdate
    seconds: dict[str, float] = field(default_factory=dict)


def updatedb(
    crawl: CrawlDir,
    manifest: Manifest,
    round: int,
    fetched: list[Partitioned],
    links: list[Partitioned],
    edges: list[Partitioned],
    cfg: Config,
    now: dt.datetime | float,
    *,
    mapper: Mapper,
    refiltered: pa.Table | None = None,
    delayed: pa.Table | None = None,
    buckets: set[int] | None = None,
    parallel: bool = True,
) -> UpdatedbResult:
    """Merge the shards' fact files into the frontier, content-seen and in-degree tables of the
    generation after ``manifest`` (see the module doc); nothing is committed.

    Parameters
    ----------
    crawl, manifest
        The crawl and the generation the facts are merged into (the new files are written for
        ``manifest.generation + 1``).
    round : int
        The round (or stream micro-batch number) whose facts these are.
    fetched, links, edges : list of Partitioned
        The shards' partitioned fact files, in shard order.
    cfg : Config
        As :func:`batchcrawl.frontier.update.update_bucket` and the key sets use it.
    now : datetime or float
        Wall clock (UTC) of the update (:func:`batchcrawl.frontier.update.update`).
    mapper : Mapper
        Runs each merge's per-bucket tasks; it is called from three threads at once, so it must
        be thread-safe (a Dask client's ``map``/``gather`` and :func:`runs.thread_mapper` are).
    refiltered, delayed : pyarrow.Table or None
        URLs re-filtered and BEAST-delayed at generate (:func:`batchcrawl.frontier.update.update`).
    buckets : set of int or None
        Frontier buckets to update (a micro-batch's touched buckets); None: all.
    parallel : bool
        False: the merges one after another, on one thread (as rounds ran them before; for
        comparisons, ``scripts/bench_update.py --serial``).

    Returns
    -------
    UpdatedbResult

    Raises
    ------
    Exception
        What the first failed merge (in the order frontier, content, in-degree) raised
        (:class:`~batchcrawl.errors.SchemaError`, ``OSError``, ...), once the others have
        finished, with a note naming any other failed merge (each also logged). Nothing was
        committed, so the round can be rerun.
    """
    t0 = time.monotonic()
    seconds: dict[str, float] = {}

    def timed(name: str, fn: Callable[[], R]) -> R:
        try:
            return fn()
        finally:
            seconds[name] = _ms(time.monotonic() - t0)

    gen = manifest.generation + 1
    merges: dict[str, Callable[[], Any]] = {  # in this order: the first failure is raised
        "frontier": lambda: update_mod.update(
            crawl, manifest, round, fetched, links, cfg, now, refiltered=refiltered,
            mapper=mapper, buckets=buckets, delayed=delayed,
        ),
        "content": lambda: content_mod.update_content(
            crawl, manifest, gen,
            crawl.iter_row_groups("fetched", [p.entry for p in fetched],
                                  columns=content_mod.FETCHED_COLUMNS),
            mapper, cfg,
        ),
        "indegree": lambda: indegree_mod.update_indegree(
            crawl, manifest, gen, round,
            crawl.iter_row_groups("edges", [p.entry for p in edges],
                                  columns=indegree_mod.EDGE_COLUMNS),
            cfg, mapper,
        ),
    }  # fmt: skip
    with ThreadPoolExecutor(3 if parallel else 1, thread_name_prefix="updatedb") as pool:
        done = {name: pool.submit(timed, name, fn) for name, fn in merges.items()}
    failed = [(name, exc) for name, f in done.items() if (exc := f.exception()) is not None]
    if failed:
        first = failed[0][1]
        for name, exc in failed[1:]:  # not lost: named on the error raised, and logged
            first.add_note(f"updatedb: the {name} merge failed too: {exc!r}")
            if not isinstance(exc, KeyboardInterrupt):  # a stop (Ctrl-C, SIGTERM) ends every
                # merge at once and is said by the CLI in one line: no traceback per merge
                log.error("updatedb: the %s merge failed too", name, exc_info=exc)
        raise first
    return UpdatedbResult(
        done["frontier"].result(), done["content"].result(), done["indegree"].result(), seconds
    )


def _ms(seconds: float) -> float:
    """``seconds`` rounded to milliseconds, as round summaries print them (a module function:
    :func:`updatedb`'s ``round`` argument hides the builtin)."""
    return round(seconds, 3)
