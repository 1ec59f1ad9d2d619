"""The fetch watchdog's timer heap (batchcrawl.fetch.fetcher._Watchdog): disarmed timers do not
pile up for a whole ``fetch.total_timeout_s``, and armed ones keep firing."""

from __future__ import annotations

import socket
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.fetch.fetcher import WATCHDOG_SLACK, _Watchdog


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 10**6)), min_size=300, max_size=600))
def test_the_heap_holds_at_most_twice_the_armed_timers_plus_the_slack(ops):
    """Any order of arming (True) and disarming (False, the timer at that index of those still
    armed) keeps every armed timer in the heap and the heap within ``2 x armed + slack``; a
    disarmed timer holds no socket."""
    dog = _Watchdog()
    armed = []
    far = time.monotonic() + 10**6  # never fires during the test
    try:
        for arm, pick in ops:
            if arm or not armed:
                timer = dog.arm(far + pick)
                timer.sock = object()  # type: ignore[assignment]  # what attach() would set
                armed.append(timer)
            else:
                timer = armed.pop(pick % len(armed))
                dog.disarm(timer)
                assert timer.sock is None and timer.done
            assert dog.heap_size() <= 2 * len(armed) + WATCHDOG_SLACK + 1
            assert all(t in dog._heap for t in armed[-3:])
    finally:
        dog.close()


def test_a_timer_armed_among_many_disarmed_ones_still_fires():
    """After thousands of fetches came and went (the heap rebuilt many times), a fetch past its
    deadline still has its socket shut down."""
    dog = _Watchdog()
    a, b = socket.socketpair()
    try:
        soon = time.monotonic() + 0.3
        late = dog.arm(soon)
        dog.attach(late, a)
        for _ in range(5000):
            dog.disarm(dog.arm(soon + 3600))
        assert dog.heap_size() <= 2 + WATCHDOG_SLACK
        a.settimeout(5)
        assert a.recv(1) == b""  # shut down by the watchdog: end of stream, not a timeout
        assert late.fired
        dog.disarm(late)
    finally:
        dog.close()
        a.close()
        b.close()
