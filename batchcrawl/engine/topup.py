"""Which due URLs a stream gives a shard that has room for only some of them.

A stream tops each shard up to ``fetch.max_queued_urls`` URLs (BUbiNG's virtualizer: the rest
waits in the frontier). When the selection holds more than a shard's room, taking the oldest
discoveries first fills the room with the hosts that already hold the most (the web's early,
large hosts), while a host that ran dry waits with its new links until the room outgrows the
backlog. :func:`fair_top_up` fills the room host-fairly instead (water-filling): a URL's rank is
how many URLs its host holds already plus its place among that host's selected URLs in discovery
order, and the room goes to the lowest ranks. So a dry host gets its first URLs before a busy
host its hundredth, and within a host breadth-first order holds (BUbiNG §4.1, the workbench's
per-host queues; Heritrix's queue budgeting).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: A hand-out selects only when a shard has room for at least this share of
#: ``fetch.max_queued_urls``: a selection reads every dirty bucket of the frontier (seconds on a
#: large one) and would otherwise run each micro-batch to hand out the few URLs fetched since
#: the last (docs/benchmarks.md, issue 33: 1.9 s of selection for ~1,200 URLs).
MIN_ROOM_SHARE = 0.1

_DISCOVERY = [("discovered_round", "ascending"), ("discovered_seq", "ascending")]


def worth_selecting(room: Mapping[int, int], max_queued: int) -> bool:
    """Whether some shard's ``room`` (shard -> URLs it can take) is at least
    :data:`MIN_ROOM_SHARE` of ``max_queued`` (``fetch.max_queued_urls``), and at least one URL:
    under a cap of 10 or fewer, any room is worth a selection."""
    return max(room.values(), default=0) >= max(1, int(max_queued * MIN_ROOM_SHARE))


def fair_top_up(table: pa.Table, room: int, held: Mapping[str, int]) -> pa.Table:
    """The at most ``room`` rows of ``table`` (one shard's selected URLs: columns ``host``,
    ``discovered_round``, ``discovered_seq``) to give the shard: ``table`` itself when it fits,
    else the chosen rows ordered by host, then discovery.

    ``held``: URLs each host holds already (handed out, not finished). A row's rank is its host's
    ``held`` plus its 0-based place in that host's rows by discovery; the lowest ranks win, ties
    going to the earlier discovery. Raises ``KeyError`` if a column is missing."""
    if table.num_rows <= room:
        return table
    table = table.sort_by([("host", "ascending"), *_DISCOVERY])
    encoded = pc.dictionary_encode(table.column("host").combine_chunks())
    codes = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    names = encoded.dictionary.to_pylist()
    first = np.zeros(len(names), dtype=np.int64)  # each host's first row (rows are by host)
    starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
    first[codes[starts]] = starts
    already = np.fromiter((held.get(h, 0) for h in names), np.int64, len(names))
    rank = already[codes] + np.arange(len(codes)) - first[codes]
    order = np.lexsort((_ints(table, "discovered_seq"), _ints(table, "discovered_round"), rank))
    return table.take(np.sort(order[:room]))  # still by host, then discovery


def _ints(table: pa.Table, name: str) -> np.ndarray:
    """Column ``name`` as int64, nulls last (as ``sort_by`` places them)."""
    column = pc.fill_null(table.column(name).cast(pa.int64()), np.iinfo(np.int64).max)
    return np.asarray(column.to_numpy(), dtype=np.int64)
