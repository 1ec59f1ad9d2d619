"""What one fetch run of a shard produces (:class:`ShardRun`) and the state its fetch threads
share while it goes on (:class:`RunState`): the run's output, WARC writer, deadline, pending count
and stop flag. Nothing here outlives a run (a long-lived worker carries nothing from one run into
the next); per-host state is the host book's (:mod:`batchcrawl.fetch.hostbook`)."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from batchcrawl.fetch.directlinks import DirectLinks
from batchcrawl.fetch.pages import TextSink
from batchcrawl.fetch.warc import WarcWriter
from batchcrawl.records import FetchItem
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import FileEntry


@dataclass
class ShardRun:
    """What one round of a shard produced: rows for ``fetched``, ``links`` and ``edges`` (column
    lists), the URLs still queued when it stopped (in order), and named counters."""

    fetched: list[dict[str, Any]] = field(default_factory=list)
    links: dict[str, list[Any]] = field(default_factory=dict)
    edges: dict[str, list[Any]] = field(default_factory=dict)
    unfetched: list[FetchItem] = field(default_factory=list)
    counters: Counter[str] = field(default_factory=Counter)
    warc_files: list[str] = field(default_factory=list)
    #: ``text`` files written at fetch time (``extract.at_fetch``), one per WARC file
    text_files: list[FileEntry] = field(default_factory=list)
    #: a stream's take: the WARC file left open across the checkpoint and its committed end
    #: (bytes), or None (:class:`~batchcrawl.fetch.warc.WarcCheckpoint`)
    warc_open: tuple[str, int] | None = None
    #: a stream's take: ``(url key, host)`` its threads queued themselves since the last take
    #: (:mod:`batchcrawl.fetch.directlinks`; the driver leases them)
    direct: list[tuple[int, str]] = field(default_factory=list)
    seconds: float = 0.0
    #: seconds of the run in which fewer than half the fetch threads had work
    #: (:class:`~batchcrawl.fetch.idle.IdleMeter`), and the trailing part of them (the tail)
    idle_s: float = 0.0
    tail_s: float = 0.0


def new_shard_run() -> ShardRun:
    """An empty :class:`ShardRun` with the ``links`` and ``edges`` columns ready to extend."""
    return ShardRun(
        links={c: [] for c in schemas.schema("links").names},
        edges={c: [] for c in schemas.schema("edges").names},
    )


def close_texts(texts: TextSink | None, out: ShardRun) -> None:
    """Finish the text files of a run's last WARC file (``extract.at_fetch``; ``texts`` None:
    off): their entries and the captures by reason (counters ``extract:<reason>``) go into
    ``out``. Call once the run's WARC writer is closed, with no page being processed."""
    if texts is None:
        return
    out.text_files = texts.close()
    add_counts(out.counters, {f"extract:{k}": n for k, n in texts.counts.items()})


def close_files(warc: WarcWriter, texts: TextSink | None, out: ShardRun) -> None:
    """Close a run's WARC writer and text sink (:func:`close_texts`); their files go into
    ``out``. Call with no page being processed."""
    warc.close()
    close_texts(texts, out)
    out.warc_files = list(warc.files)


def add_counts(counters: Counter[str], counts: Mapping[str, float]) -> None:
    """Add ``counts`` to a run's counters. They are a ``Counter`` but also carry float seconds
    (``cpu_*_s``), which its type does not say."""
    floats = cast("dict[str, float]", counters)
    for name, n in counts.items():
        floats[name] = floats.get(name, 0) + n


@dataclass
class RunState:
    """The state of one run (a batch :meth:`~batchcrawl.fetch.worker.FetchWorker.run` or a
    stream), handed to its fetch threads. Fields marked "lock" are guarded by the fetch loop's
    lock."""

    round: int
    out: ShardRun  # lock
    warc: WarcWriter
    texts: TextSink | None  # extract.at_fetch: its text rows and WET files, else None
    deadline: float  # on the worker's monotonic clock, seconds
    pending: int = 0  # items not finished yet (lock)
    seq: int = 0  # discovery order of the links of this run (lock)
    self_hops: dict[int, int] = field(default_factory=dict)  # url_key -> self-redirects (lock)
    sitemaps: set[str] = field(default_factory=set)  # sitemap URLs queued in this run (lock)
    stop: threading.Event = field(default_factory=threading.Event)
    streaming: bool = False  # threads wait for more items instead of ending (a stream)
    storage_fault: OSError | None = None  # the first full / read-only storage error: ends the run
    # hosts given a link in scope this run (past the URL cache), with how many: they have URLs
    # for the next round; for the tail rules (fetch.tail_capacity_ratio, fetch.tail_overlap_s,
    # idle.tail_cut_pays); None in a stream
    found_hosts: Counter[str] | None = None
    # a stream's links queued at once (stream.direct_links, lock); None: every link waits
    direct: DirectLinks | None = None
    # a batch run whose tail is held (fetch.monitor.run_batch): once the tail rule fires, the
    # run goes on fetching until this is set (by the round's driver, when no other shard of
    # the round still fetches outside its tail); None: the tail ends the run at once
    tail_release: threading.Event | None = None
