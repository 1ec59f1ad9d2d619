"""What a shard actor hands back after a fetch (a round) or a take (a stream micro-batch): one typed
report, read by the merge-and-commit stage (:mod:`batchcrawl.engine.merge`) and the summaries
(:mod:`batchcrawl.engine.summary`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from batchcrawl.store.crawldir import FileEntry
from batchcrawl.store.shuffle import Partitioned


@dataclass
class ShardReport:
    """One shard's part of a round or a micro-batch (files written, uncommitted).

    Attributes
    ----------
    shard
        The shard.
    fetched, links, edges
        Its partitioned fact files (None: a micro-batch that wrote none).
    text
        Its ``text`` files, one per WARC file, written at fetch time (``extract.at_fetch``).
    hosts
        Its ``hosts`` run of the generation being committed (None: no host touched).
    counters
        The fetch worker's named counters (``tail_cut``, ``robots_*``,
        ``links_*``, ``cpu_*_s`` ...).
    outcomes
        Fetch attempts by outcome.
    unfetched
        URLs handed to it and not fetched (they stay due).
    spills, spill_s
        Spills of its rows during the fetch (``round.spill_pages``) and their seconds.
    host_rows
        ``kept``: hosts rows it keeps for its forgotten hosts; ``read_back``: rows read back.
    seconds, fetch_seconds, startup_s, idle_s, tail_s
        Its whole call, its fetch run, the run's start-up, idle and tail seconds (a round).
    done_keys
        uint64 url keys finished (a stream: their leases end).
    direct
        ``(url key, host)`` it queued itself since the last take (a stream's found links,
        :mod:`batchcrawl.fetch.directlinks`): the driver leases them.
    held
        URLs it still holds (a stream).
    found_keys, found_at
        In-scope link targets it found and when (epoch seconds of the source page's fetch, the
        earliest per target): a stream's discovery times.
    fetched_keys, fetched_at
        URLs it fetched and when (epoch seconds): a stream's fetch times.
    fetched_hosts
        The host of each of ``fetched_keys`` (a stream's host gaps, :mod:`batchcrawl.engine.hostgaps`).
    warcs_without_rows
        WARC files it wrote (relative paths) that none of its ``fetched`` rows names: their
        records are robots.txt captures only (:attr:`batchcrawl.store.crawldir.Manifest.warcs_without_rows`).
    warc_open
        A stream: the WARC file it keeps open across the checkpoint and the end (bytes) of the
        records committed in it (:class:`~batchcrawl.fetch.warc.WarcCheckpoint`); None when it
        keeps none open (every round, a stream's last take, an object store).
    """

    shard: int
    fetched: Partitioned | None = None
    links: Partitioned | None = None
    edges: Partitioned | None = None
    hosts: FileEntry | None = None
    text: list[FileEntry] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)
    unfetched: int = 0
    spills: int = 0
    spill_s: float = 0.0
    host_rows: dict[str, int] = field(default_factory=lambda: {"kept": 0, "read_back": 0})
    seconds: float = 0.0
    fetch_seconds: float = 0.0
    startup_s: float = 0.0
    idle_s: float = 0.0
    tail_s: float = 0.0
    done_keys: list[int] = field(default_factory=list, repr=False)
    direct: list[tuple[int, str]] = field(default_factory=list, repr=False)
    held: int = 0
    found_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64), repr=False)
    found_at: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    fetched_keys: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64), repr=False)
    fetched_at: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    fetched_hosts: list[str] = field(default_factory=list, repr=False)
    warcs_without_rows: list[str] = field(default_factory=list)
    warc_open: tuple[str, int] | None = None
