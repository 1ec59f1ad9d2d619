"""A stream's host gaps (batchcrawl.engine.hostgaps): the seconds between a host's consecutive
fetches beyond its host delay, from shard reports, whatever the order within a micro-batch."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.engine.hostgaps import HostGaps
from batchcrawl.engine.report import ShardReport


def _report(fetches: list[tuple[str, float]]) -> ShardReport:
    return ShardReport(
        0, fetched_keys=np.arange(len(fetches), dtype=np.uint64),
        fetched_at=np.array([t for _, t in fetches], dtype=np.float64),
        fetched_hosts=[h for h, _ in fetches],
    )  # fmt: skip


def test_gaps_beyond_the_host_delay_are_counted_per_host_across_micro_batches():
    gaps = HostGaps(lambda host: 1.0 if host == "a.test" else 0.5)
    gaps.observe([_report([("a.test", 3.0), ("a.test", 0.0), ("b.test", 0.0)])])  # 0 -> 3: 2 s
    gaps.observe([_report([("a.test", 4.0), ("b.test", 0.5), ("a.test", 7.5)])])  # 4 -> 7.5: 2.5
    gaps.observe([_report([("a.test", 7.0)])])  # in flight across a take: no gap, clock stays
    assert gaps.gap_s["a.test"] == pytest.approx(4.5) and gaps.gap_s["b.test"] == 0.0
    got = gaps.to_json()
    assert got["hosts"] == 2 and got["gap_s"] == 4.5
    assert got["busiest"] == {"host": "a.test", "fetches": 5, "span_s": 7.5, "gap_s": 4.5}
    assert HostGaps(lambda host: 1.0).to_json() == {"hosts": 0, "gap_s": 0, "busiest": None}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 100), min_size=1, max_size=30), st.integers(1, 4))
def test_span_is_the_delays_plus_the_gaps_for_fetches_in_order(times, batches):
    # a host fetched at sorted times, at least the delay apart, in any split into micro-batches
    delay = 0.25
    at = np.cumsum(np.asarray(times) + delay).tolist()
    gaps = HostGaps(lambda host: delay)
    for part in np.array_split(np.asarray(at), batches):
        gaps.observe([_report([("h.test", t) for t in part[::-1].tolist()])])
    got = gaps.to_json()["busiest"]
    assert got["span_s"] == pytest.approx(delay * (len(at) - 1) + got["gap_s"], abs=0.01)
