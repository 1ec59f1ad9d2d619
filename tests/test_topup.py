"""A stream's top-up when a shard has room for only part of the selection
(:mod:`batchcrawl.engine.topup`): host-fair water-filling, breadth-first within a host."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.engine.topup import MIN_ROOM_SHARE, fair_top_up, worth_selecting

HOSTS = ["a.test", "b.test", "c.test", "d.test"]


def _table(rows: list[tuple[str, int | None, int]]) -> pa.Table:
    hosts, rounds, seqs = zip(*rows, strict=True) if rows else ((), (), ())
    return pa.table({
        "url_key": pa.array(range(len(rows)), pa.uint64()),
        "host": pa.array(hosts, pa.string()),
        "discovered_round": pa.array(rounds, pa.int32()),
        "discovered_seq": pa.array(seqs, pa.int64()),
    })  # fmt: skip


rows_st = st.lists(
    st.tuples(
        st.sampled_from(HOSTS), st.one_of(st.none(), st.integers(0, 3)), st.integers(0, 10_000)
    ),  # fmt: skip
    max_size=60,
    unique_by=lambda r: r[2],  # discovery sequence numbers are unique in a crawl
)


def _discovery(row: dict) -> tuple:
    r = row["discovered_round"]
    return (r is None, r or 0, row["discovered_seq"])


@settings(max_examples=300, deadline=None)
@given(rows=rows_st, room=st.integers(0, 70),
       held=st.dictionaries(st.sampled_from(HOSTS), st.integers(0, 20)))  # fmt: skip
def test_the_room_goes_to_the_hosts_holding_least_breadth_first(rows, room, held):
    table = _table(rows)
    out = fair_top_up(table, room, held)
    chosen = out.to_pylist()
    if table.num_rows <= room:  # it fits: given as selected
        assert out.equals(table)
        return
    assert len(chosen) == room
    keys = {r["url_key"] for r in chosen}
    by_host: dict[str, list[dict]] = {}
    for r in sorted(table.to_pylist(), key=_discovery):
        by_host.setdefault(r["host"], []).append(r)
    rank = {}
    for host, host_rows in by_host.items():
        taken = [r["url_key"] in keys for r in host_rows]
        assert taken == sorted(taken, reverse=True), f"{host}: not a prefix in discovery order"
        for i, r in enumerate(host_rows):
            rank[r["url_key"]] = held.get(host, 0) + i
    left = [k for k in rank if k not in keys]
    if chosen and left:  # no row left out ranks below a chosen one
        assert max(rank[k] for k in keys) <= min(rank[k] for k in left)
    # handed to the shard by host, then discovery
    assert [(r["host"], *_discovery(r)) for r in chosen] == sorted(
        (r["host"], *_discovery(r)) for r in chosen
    )


def test_a_dry_host_gets_its_urls_before_a_busy_hosts_backlog():
    """The case the old top-up (oldest discoveries first) got wrong: a large host discovered
    early holds most of the shard and keeps getting its backlog; a host that ran dry with new
    links found later waited until the room outgrew that backlog."""
    rows = [("a.test", 1, i) for i in range(100)] + [("b.test", 3, 1000 + i) for i in range(5)]
    out = fair_top_up(_table(rows), 7, {"a.test": 400, "b.test": 1})
    assert Counter(out.column("host").to_pylist()) == {"b.test": 5, "a.test": 2}
    assert out.column("discovered_seq").to_pylist()[:2] == [0, 1]  # a.test's oldest


def test_a_hand_out_selects_only_when_a_shard_has_room_worth_it():
    cap = 20_000
    least = int(cap * MIN_ROOM_SHARE)
    assert not worth_selecting({0: least - 1, 1: 0}, cap)
    assert worth_selecting({0: 0, 1: least}, cap)
    assert not worth_selecting({}, cap)
    assert worth_selecting({0: 1}, 5)  # a small cap: any room is worth it
    assert not worth_selecting({0: 0}, 5)
