"""Which found links a stream shard queues itself (batchcrawl.fetch.directlinks): same host, in
scope, fresh hosts only, caps, and each url key once per stream, a hand-out of one it queued
skipped until the driver was told."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.fetch.directlinks import DirectLinks
from batchcrawl.records import FetchItem


def _item(key: int, host: str = "a.test", depth: int = 1) -> FetchItem:
    return FetchItem(url_key=key, url=f"http://{host}/{key}", host=host, domain=host, depth=depth)


def _link(key: int, host: str = "a.test", reason: str | None = None, nofollow: bool = False,
          hops_out: int = 0):  # fmt: skip
    return (key, f"http://{host}/{key}", host, host, "a", nofollow, reason, hops_out)


def _direct(**kw) -> DirectLinks:
    args = {"old_hosts": ["old.test"], "host_cap": lambda host: 100, "shard_cap": 1000,
            "blocked": lambda host: host == "trap.test"} | kw  # fmt: skip
    return DirectLinks(**args)


def test_only_new_in_scope_links_to_the_pages_own_fresh_unblocked_host_are_queued():
    d = _direct()
    links = [_link(2), _link(3, "b.test"), _link(4, reason="max_depth"), _link(5, nofollow=True),
             _link(6, hops_out=1), _link(2)]  # fmt: skip
    got = d.pick(_item(1, depth=3), links, pending=0)
    assert [(i.url_key, i.host, i.depth) for i in got] == [(2, "a.test", 4)]
    assert d.pick(_item(7), [_link(2), _link(8)], 0)[0].url_key == 8  # 2 is queued already
    assert d.pick(_item(1, "old.test"), [_link(9, "old.test")], 0) == []  # fetched before
    assert d.pick(_item(1, "trap.test"), [_link(9, "trap.test")], 0) == []
    assert d.take(done=[]) == [(2, "a.test"), (8, "a.test")] and d.take(done=[]) == []


def test_caps_of_the_host_the_shard_and_the_memory_bound_the_links_queued():
    d = _direct(host_cap=lambda host: 3, shard_cap=10)
    d.given([_item(100), _item(101)])  # a top-up: the host holds 2
    assert len(d.pick(_item(100), [_link(k) for k in range(5)], pending=2)) == 1
    d.finished(_item(100))
    assert len(d.pick(_item(101), [_link(k) for k in range(5, 10)], pending=2)) == 1
    assert d.pick(_item(1, "b.test"), [_link(k, "b.test") for k in range(20, 30)], 9) != []
    assert d.pick(_item(1, "b.test"), [_link(k, "b.test") for k in range(30, 40)], 10) == []
    small = _direct(max_keys=2)
    assert len(small.pick(_item(1), [_link(k) for k in range(2, 9)], 0)) == 2


def test_a_hand_out_of_a_url_queued_by_the_shard_is_skipped_until_its_fetch_was_taken():
    d = _direct()
    d.pick(_item(1), [_link(2), _link(3)], 0)
    assert [i.url_key for i in d.given([_item(2), _item(3), _item(4)])] == [4]
    d.take(done=[2])  # 2 fetched and reported: a later hand-out is a retry or revisit
    assert [i.url_key for i in d.given([_item(2), _item(3)])] == [2]
    assert d.pick(_item(5), [_link(4)], 0) == []  # given by a top-up: never queued again


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["pick", "give", "take"]),
                          st.lists(st.integers(0, 30), max_size=6)), max_size=40))  # fmt: skip
def test_no_url_key_is_queued_twice_while_the_first_is_outstanding(steps):
    # queued = picked by the shard or given by the driver; a key may be queued again only after
    # its fetch was taken (the driver's retry or revisit), never while one is outstanding
    d = _direct(host_cap=lambda host: 10**6)
    outstanding: set[int] = set()
    for op, keys in steps:
        if op == "pick":
            got = [i.url_key for i in d.pick(_item(999), [_link(k) for k in keys], 0)]
        elif op == "give":
            # the driver hands out unique keys, none it leased (picked keys it was told of)
            told = outstanding - d._claimed
            got = [i.url_key for i in d.given([_item(k) for k in dict.fromkeys(keys)
                                               if k not in told])]  # fmt: skip
        else:
            d.take(done=keys)
            outstanding -= set(keys)
            continue
        assert len(got) == len(set(got)) and not (set(got) & outstanding), (op, got)
        outstanding |= set(got)
