"""A stream's discovery-to-fetch latency (batchcrawl.engine.latency) from shard reports: the first
discovery counts, wherever the URL is fetched, and the tracking is bounded."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.engine.latency import DiscoveryLatency
from batchcrawl.engine.report import ShardReport


def _report(shard: int, found: dict[int, float] = {}, fetched: dict[int, float] = {}):  # noqa: B006
    return ShardReport(
        shard,
        found_keys=np.array(list(found), np.uint64), found_at=np.array(list(found.values())),
        fetched_keys=np.array(list(fetched), np.uint64), fetched_at=np.array(list(fetched.values())),
    )  # fmt: skip


def test_latency_runs_from_the_first_discovery_to_the_fetch_on_any_shard():
    lat = DiscoveryLatency()
    lat.observe([_report(0, found={1: 10.0, 2: 10.0}), _report(1, found={1: 9.0})])
    lat.observe([_report(1, fetched={1: 12.0}), _report(0, found={2: 5.0})])  # 2 found earlier
    lat.observe([_report(0, fetched={2: 20.0}, found={1: 30.0})])  # 1 again: fetched already
    lat.observe([_report(0, fetched={1: 40.0})])  # a refetch is no discovery
    assert sorted(lat.samples) == [3.0, 15.0]
    got = lat.to_json()
    assert got["urls"] == 2 and got["p50"] == 9.0 and got["max"] == 15.0


def test_tracking_is_bounded_and_counts_what_it_leaves_out():
    lat = DiscoveryLatency(max_tracked=2)
    lat.observe([_report(0, found={1: 0.0, 2: 0.0, 3: 0.0})])
    assert lat.untracked == 1
    lat.observe([_report(0, fetched={1: 1.0, 2: 2.0, 3: 3.0})])
    assert sorted(lat.samples) == [1.0, 2.0]
    assert DiscoveryLatency().to_json()["p50"] is None


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 20), st.floats(0, 100), st.floats(0, 100)), max_size=30))
def test_every_sample_is_a_fetch_after_its_first_discovery(events):
    # (key, found at, fetched after) -> the sample is that gap, one per key
    lat = DiscoveryLatency()
    first: dict[int, tuple[float, float]] = {}
    for key, found, after in events:
        first.setdefault(key, (found, after))
    for key, (found, after) in first.items():
        lat.observe([_report(0, found={key: found})])
        lat.observe([_report(1, fetched={key: found + after})])
    assert sorted(lat.samples) == pytest.approx(sorted(after for _, after in first.values()))


def test_a_url_found_and_fetched_in_one_micro_batch_counts_once_when_fetched_after():
    # stream.direct_links: a shard fetches what it found before the take; a fetch before the
    # discovery (a refetch found again) is no sample
    lat = DiscoveryLatency()
    lat.observe([_report(0, found={1: 10.0, 2: 10.0}, fetched={1: 10.5}),
                 _report(1, found={1: 9.5}, fetched={2: 8.0})])  # fmt: skip
    assert lat.samples == [1.0]
    lat.observe([_report(0, fetched={2: 20.0})])  # 2 was fetched already: found again, no sample
    assert lat.samples == [1.0]
