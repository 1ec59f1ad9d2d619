"""Tests of the BUbiNG workbench (batchcrawl.fetch.workbench) on a fake clock.

The core is a hypothesis state machine that drives a workbench with random adds, clock advances,
acquires, pops, requeues, crawl-delay changes, releases, host removals, drains, prunes and
snapshot/restore round trips, and checks every step against an independent model
(:class:`PolitenessModel`): host delay and IP delay between fetches, one fetch per host and at most
``ip_concurrency`` per IP at a time, per-host FIFO order, no item lost or duplicated, and no
starvation (if something is ready, ``acquire`` returns it; otherwise its wait is exact). The machine
runs with ``ip_concurrency`` 1, 2 and 3. Control tests run the same checker against deliberately
broken workbenches and require it to fail.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, deque

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import batchcrawl.fetch.readyqueue as readyqueue_mod
from batchcrawl.config import PolitenessSection, load_config
from batchcrawl.errors import BatchcrawlError, ConfigError
from batchcrawl.fetch.hostdelay import WorkbenchError, host_delay
from batchcrawl.fetch.visitstate import HostState
from batchcrawl.fetch.workbench import Workbench
from batchcrawl.politeness import (
    PolitenessPolicy,
    Slot,
    parse_group_rules,
    parse_host_rules,
)

# The checker keeps its own reference: control tests replace the function the ready queue calls
# at a release (readyqueue_mod.host_delay), not this one.
reference_delay = host_delay
reference_slot = PolitenessPolicy.slot


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# ----------------------------------------------------------------------------- host_delay


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"host_delay_s": 2.0}, 2.0),
        ({"host_delay_s": 2.0, "crawl_delay_s": 10.0}, 10.0),  # Crawl-delay raises the delay
        ({"host_delay_s": 2.0, "crawl_delay_s": 100.0, "max_crawl_delay_s": 30.0}, 30.0),  # capped
        ({"host_delay_s": 2.0, "crawl_delay_s": 0.5}, 2.0),  # never below our floor
        (
            {"host_delay_s": 2.0, "crawl_delay_s": 60.0, "max_crawl_delay_s": 1.0},
            2.0,
        ),  # cap < floor
        ({"host_delay_s": 1.0, "adaptive_delay_factor": 3.0, "last_download_s": 2.0}, 6.0),
        ({"host_delay_s": 1.0, "adaptive_delay_factor": 0.0, "last_download_s": 50.0}, 1.0),
        ({"host_delay_s": 1.0, "adaptive_delay_factor": 2.0, "last_download_s": None}, 1.0),
        (
            {
                "host_delay_s": 1.0,
                "crawl_delay_s": 4.0,
                "adaptive_delay_factor": 1.0,
                "last_download_s": 3.0,
            },
            4.0,
        ),
    ],
)
def test_host_delay_bounds(kwargs, expected):
    assert host_delay(**kwargs) == expected


@given(
    floor=st.floats(0, 100),
    crawl=st.none() | st.floats(0, 1000),
    cap=st.floats(0, 100),
    factor=st.floats(0, 10),
    last=st.none() | st.floats(0, 100),
)
def test_host_delay_properties(floor, crawl, cap, factor, last):
    d = host_delay(
        host_delay_s=floor,
        crawl_delay_s=crawl,
        max_crawl_delay_s=cap,
        adaptive_delay_factor=factor,
        last_download_s=last,
    )
    assert d >= floor
    assert d <= max(floor, cap, factor * (last or 0.0))
    if crawl is not None:
        assert d >= min(crawl, cap)
        # a larger Crawl-delay never lowers the delay
        bigger = host_delay(
            host_delay_s=floor,
            crawl_delay_s=crawl + 1.0,
            max_crawl_delay_s=cap,
            adaptive_delay_factor=factor,
            last_download_s=last,
        )
        assert bigger >= d


@pytest.mark.parametrize(
    "kwargs",
    [
        {"host_delay_s": -1.0},
        {"host_delay_s": float("nan")},
        {"host_delay_s": 1.0, "crawl_delay_s": -5.0},
        {"host_delay_s": 1.0, "last_download_s": -0.1},
        {"host_delay_s": 1.0, "adaptive_delay_factor": -1.0},
    ],
)
def test_host_delay_rejects_bad_input(kwargs):
    with pytest.raises(WorkbenchError) as err:
        host_delay(**kwargs)
    assert isinstance(err.value, ValueError) and isinstance(err.value, BatchcrawlError)


# ----------------------------------------------------------------------------- the model


class PolitenessModel:
    """What a correct workbench does, kept independently of its heaps.

    The IP delay as the workbench defines it for any ``ip_concurrency``: a fetch from an IP may start
    only ``ip_delay_s`` after the end of the latest fetch from that IP (releases without a request
    do not count). Every ``check_*`` method raises AssertionError on a violation.
    """

    def __init__(
        self,
        *,
        host_delay_s,
        ip_delay_s,
        max_crawl_delay_s,
        adaptive_delay_factor,
        ip_concurrency=1,
        policy=None,
    ):
        self.policy = policy or PolitenessPolicy(
            host_delay_s=host_delay_s, ip_delay_s=ip_delay_s, ip_concurrency=ip_concurrency
        )
        self.host_delay_s = host_delay_s
        self.ip_delay_s = ip_delay_s
        self.ip_concurrency = ip_concurrency
        self.max_crawl_delay_s = max_crawl_delay_s
        self.adaptive_delay_factor = adaptive_delay_factor
        self.items: dict[str, deque] = {}  # host -> expected FIFO
        self.ip_of: dict[str, str] = {}
        self.not_before: dict[str, float] = {}  # from add(next_allowed=...) / creation time
        self.last_release: dict[str, tuple[float, float]] = {}  # host -> (end time, its delay)
        self.ip_release: dict[str, float] = {}  # entry key -> end time of its last fetch
        self.crawl_delay: dict[str, float | None] = {}
        self.last_download: dict[str, float | None] = {}
        self.held: set[str] = set()
        self.held_per_ip: Counter[str] = Counter()  # entry key -> its hosts acquired now
        self.entry_delay: dict[str, float] = {}  # entry key -> the delay it last took

    def slot(self, host):
        """The host's workbench entry (its IP's, or its politeness group's) under the policy."""
        return reference_slot(self.policy, host, self.ip_of[host])

    def set_policy(self, policy, now):
        """A new policy: every host's last fetch end counts for the entry it is in now."""
        self.policy = policy
        for host in self.items:
            self.entry_delay[self.slot(host).key] = self.slot(host).delay_s
        for host, (end, _) in self.last_release.items():
            key = self.slot(host).key
            self.ip_release[key] = max(self.ip_release.get(key, -math.inf), end)
        self.held_per_ip = Counter(self.slot(h).key for h in self.held)

    # -- bookkeeping
    def add(self, host, ip, items, next_allowed, now):
        if host not in self.items:
            self.items[host] = deque()
            self.ip_of[host] = ip
            self.not_before[host] = now if next_allowed is None else next_allowed
            self.crawl_delay[host] = None
            self.last_download[host] = None
            self.entry_delay[self.slot(host).key] = self.slot(host).delay_s
        elif next_allowed is not None:
            self.not_before[host] = max(self.not_before[host], next_allowed)
        self.items[host].extend(items)

    def host_ready_at(self, host) -> float:
        t = self.not_before[host]
        if host in self.last_release:
            end, delay = self.last_release[host]
            t = max(t, end + delay)
        return t

    def ip_ready_at(self, host) -> float:
        slot = self.slot(host)
        end = self.ip_release.get(slot.key)
        return -math.inf if end is None else end + slot.delay_s

    def candidates(self):
        """Hosts with items, not held, whose entry has a free slot: (host, time it is ready)."""
        for host, q in self.items.items():
            slot = self.slot(host)
            if q and host not in self.held and self.held_per_ip[slot.key] < slot.concurrency:
                yield host, max(self.host_ready_at(host), self.ip_ready_at(host))

    def ready_hosts(self, now):
        return {h for h, t in self.candidates() if t <= now}

    def ready_count(self, now) -> int:
        """Acquires that would succeed now in a row: per IP, its ready hosts up to its free slots."""
        per_ip = Counter(self.slot(h).key for h in self.ready_hosts(now))
        conc = {self.slot(h).key: self.slot(h).concurrency for h in self.items}
        return sum(min(n, conc[k] - self.held_per_ip[k]) for k, n in per_ip.items())

    def wait(self, now) -> float:
        times = [t for _, t in self.candidates()]
        return max(0.0, min(times) - now) if times else math.inf

    def total(self) -> int:
        return sum(len(q) for q in self.items.values())

    # -- checks
    def check_acquire(self, result, now):
        vs, wait = result
        if vs is None:
            ready = self.ready_hosts(now)
            assert not ready, f"acquire() returned None (wait {wait}) while {ready} are ready"
            expected = self.wait(now)
            assert wait > 0, f"acquire() returned None with wait {wait}"
            assert wait == expected or math.isclose(wait, expected, rel_tol=1e-9), (
                f"acquire() said wait {wait}, the next host is ready in {expected}"
            )
            return
        host = vs.host
        slot = self.slot(host)
        ip = slot.key
        assert wait == 0.0
        assert vs.ip == self.ip_of[host], f"{host} moved from {self.ip_of[host]} to {vs.ip}"
        assert host not in self.held, f"{host} handed out while already held"
        assert self.held_per_ip[ip] < slot.concurrency, (
            f"IP {ip} handed out while {self.held_per_ip[ip]} of its hosts are held; "
            f"ip_concurrency is {slot.concurrency}"
        )
        assert self.items[host], f"{host} handed out with no items"
        assert now >= self.not_before[host], (
            f"{host} fetched at {now} before its restored next-allowed time {self.not_before[host]}"
        )
        if host in self.last_release:
            end, delay = self.last_release[host]
            assert now >= end + delay, (
                f"{host} fetched {now - end:.3f}s after its previous fetch ended; delay is {delay}"
            )
        if ip in self.ip_release:
            assert now >= self.ip_release[ip] + slot.delay_s, (
                f"IP {ip} fetched {now - self.ip_release[ip]:.3f}s after its previous fetch "
                f"ended; IP delay is {slot.delay_s}"
            )
        self.held.add(host)
        self.held_per_ip[ip] += 1

    def check_pop(self, host, item):
        expected = self.items[host].popleft()
        assert item == expected, f"{host}: popped {item!r}, FIFO order says {expected!r}"

    def push_front(self, host, item):
        self.items[host].appendleft(item)

    def release(self, host, download_s, now):
        self.held.remove(host)
        self.held_per_ip[self.slot(host).key] -= 1
        if download_s is None:
            return
        self.last_download[host] = download_s
        delay = reference_delay(
            host_delay_s=self.policy.delay_floor_s(host),
            crawl_delay_s=self.crawl_delay[host],
            max_crawl_delay_s=self.max_crawl_delay_s,
            adaptive_delay_factor=self.adaptive_delay_factor,
            last_download_s=download_s,
        )
        self.last_release[host] = (now, delay)
        self.ip_release[self.slot(host).key] = now

    def forget_idle(self, now) -> int:
        gone = [
            h
            for h, q in self.items.items()
            if not q and h not in self.held and self.host_ready_at(h) <= now
        ]
        for h in gone:
            for d in (self.items, self.ip_of, self.not_before, self.last_release):
                d.pop(h, None)
            self.crawl_delay.pop(h)
            self.last_download.pop(h)
        # entries left without hosts whose delay has passed are forgotten too
        # (with the delay they last had: no host tells them a newer one)
        used = {self.slot(h).key for h in self.items}
        for key in [k for k in self.ip_release if k not in used]:
            if self.ip_release[key] + self.entry_delay[key] <= now:
                del self.ip_release[key]
        return len(gone)


# ----------------------------------------------------------------------------- state machine

HOSTS = [f"h{i}.test" for i in range(7)]
IPS = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
CONFIG = {
    "host_delay_s": 2.0,
    "ip_delay_s": 1.0,
    "max_crawl_delay_s": 5.0,
    "adaptive_delay_factor": 1.5,
}
seconds = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0]) | st.floats(0, 8, allow_nan=False)


class WorkbenchMachine(RuleBasedStateMachine):
    """Random operation sequences against a workbench, each step checked by the model."""

    workbench_config = CONFIG  # what the workbench is built with
    model_config = CONFIG  # what the checker expects

    def __init__(self):
        super().__init__()
        self.clock = FakeClock()
        self.wb = self.make_workbench()
        self.model = PolitenessModel(**self.model_config)
        self.held: list = []  # acquired visit states
        self.popped: dict[str, list] = {}  # host -> items popped while held (for requeue)
        self.next_item = 0

    def make_workbench(self):
        return Workbench(self.clock, **self.workbench_config)

    @rule(
        host=st.sampled_from(HOSTS),
        ip=st.sampled_from(IPS),
        n=st.integers(0, 4),
        restored=st.none() | st.floats(-3, 8, allow_nan=False),
    )
    def add(self, host, ip, n, restored):
        items = [(host, self.next_item + i) for i in range(n)]
        self.next_item += n
        next_allowed = None if restored is None else self.clock.now + restored
        self.wb.add(host, ip, items, next_allowed=next_allowed)
        self.model.add(host, ip, items, next_allowed, self.clock.now)

    @rule(dt=seconds)
    def advance(self, dt):
        self.clock.now += dt

    @rule()
    def advance_to_next_ready(self):
        wait = self.model.wait(self.clock.now)
        if math.isfinite(wait):
            self.clock.now += wait

    @rule()
    def acquire(self):
        result = self.wb.acquire()
        self.model.check_acquire(result, self.clock.now)
        if result[0] is not None:
            self.held.append(result[0])
            self.popped[result[0].host] = []

    @precondition(lambda self: self.held)
    @rule(data=st.data(), k=st.integers(1, 3))
    def pop(self, data, k):
        vs = data.draw(st.sampled_from(self.held))
        for _ in range(k):
            if not vs.queue:
                with pytest.raises(IndexError):
                    vs.pop()
                break
            item = vs.pop()
            self.model.check_pop(vs.host, item)
            self.popped[vs.host].append(item)

    @precondition(lambda self: any(self.popped.get(vs.host) for vs in self.held))
    @rule(data=st.data())
    def requeue(self, data):
        vs = data.draw(st.sampled_from([vs for vs in self.held if self.popped[vs.host]]))
        item = self.popped[vs.host].pop()
        vs.push_front(item)
        self.model.push_front(vs.host, item)

    @precondition(lambda self: self.held)
    @rule(data=st.data(), delay=st.none() | st.floats(0, 8, allow_nan=False))
    def set_crawl_delay(self, data, delay):
        vs = data.draw(st.sampled_from(self.held))
        vs.set_crawl_delay(delay)
        self.model.crawl_delay[vs.host] = delay

    @precondition(lambda self: self.held)
    @rule(data=st.data(), download=st.none() | seconds)
    def release(self, data, download):
        vs = data.draw(st.sampled_from(self.held))
        self.held.remove(vs)
        self.wb.release(vs, download)
        self.model.release(vs.host, download, self.clock.now)

    @rule(host=st.sampled_from(HOSTS))
    def remove_host(self, host):
        dropped = self.wb.remove_host(host)
        expected = list(self.model.items.get(host, ()))
        assert dropped == expected
        if host in self.model.items:
            self.model.items[host].clear()

    @precondition(lambda self: self.model.total() > 12)
    @rule()
    def drain(self):
        drained = dict(self.wb.drain())
        expected = {h: list(q) for h, q in self.model.items.items() if q}
        assert drained == expected
        for q in self.model.items.values():
            q.clear()

    @rule()
    def prune_idle(self):
        forgot, expected = len(self.wb.prune_idle()), self.model.forget_idle(self.clock.now)
        assert forgot == expected, f"prune_idle forgot {forgot} hosts, the delays say {expected}"

    @precondition(lambda self: not self.held)
    @rule()
    def snapshot_restore(self):
        """Round end and restart: persist, convert to wall time and back, reload."""
        states = self.wb.snapshot()
        assert {s.host: list(s.items) for s in states} == {
            h: list(q) for h, q in self.model.items.items()
        }
        wall_offset = 1.7e9 - self.clock.now
        stored = [s.shifted(wall_offset) for s in states]
        restored = [s.shifted(-wall_offset) for s in stored]
        for s in restored:  # the conversion may round by an ulp of the wall time, no more
            expected = self.model.host_ready_at(s.host)
            assert abs(s.next_allowed - expected) <= 1e-6, (
                f"snapshot: {s.host} next-allowed {s.next_allowed}, the delays say {expected}"
            )
        fresh = self.make_workbench()
        fresh.restore(restored)
        self.wb = fresh
        # The restored times replace the history; IP next-allowed times are not persisted
        # (documented), host times are.
        for s in restored:
            self.model.not_before[s.host] = s.next_allowed
            self.model.last_release.pop(s.host, None)
        self.model.ip_release.clear()

    @invariant()
    def counts_agree(self):
        assert len(self.wb) == self.model.total(), "items lost or duplicated"
        assert self.wb.host_count == len(self.model.items)
        expected = self.model.ready_count(self.clock.now)
        assert self.wb.ready_count == expected, (
            f"ready_count is {self.wb.ready_count}, but the delays say {expected} acquires are "
            f"ready ({sorted(self.model.ready_hosts(self.clock.now))})"
        )

    @invariant()
    def in_flight_per_ip(self):
        per_ip = Counter(vs.ip for vs in self.held)
        assert all(n <= self.model.ip_concurrency for n in per_ip.values()), (
            f"more than ip_concurrency={self.model.ip_concurrency} hosts of one IP held: {per_ip}"
        )


def machine_with_concurrency(k: int) -> type[WorkbenchMachine]:
    """The state machine with workbench and checker both at ``ip_concurrency=k``."""
    config = {**CONFIG, "ip_concurrency": k}
    return type(
        f"WorkbenchMachineK{k}",
        (WorkbenchMachine,),
        {"workbench_config": config, "model_config": config},
    )


STATEFUL_SETTINGS = settings(max_examples=100, stateful_step_count=40, deadline=None)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_workbench_stateful(k):
    run_state_machine_as_test(machine_with_concurrency(k), settings=STATEFUL_SETTINGS)


# ----------------------------------------------------------------------------- control tests

# Any of the checker's politeness or starvation messages: a broken workbench may show first in its
# wait, its ready count or its snapshot rather than in a fetch.
CHECKER_MESSAGES = (
    "after its previous fetch ended|IP delay|the delays say|the next host is ready in|are ready"
    "|ip_concurrency"
)
# Derandomized: each control test searches the same examples every run, so it fails (as it must)
# in a stable number of steps.
CONTROL_SETTINGS = settings(
    max_examples=500,
    stateful_step_count=40,
    deadline=None,
    phases=[Phase.generate],
    database=None,
    derandomize=True,
)


def test_control_checker_catches_zero_host_delay(monkeypatch):
    """A workbench whose release sets no host delay must be caught by the same checker."""
    monkeypatch.setattr(readyqueue_mod, "host_delay", lambda **kwargs: 0.0)
    with pytest.raises(AssertionError, match=CHECKER_MESSAGES):
        run_state_machine_as_test(WorkbenchMachine, settings=CONTROL_SETTINGS)


@pytest.mark.parametrize("k", [1, 3])
def test_control_checker_catches_missing_ip_delay(k):
    """A workbench built without the IP delay the crawl asked for must be caught."""

    class NoIPDelay(machine_with_concurrency(k)):
        workbench_config = {**CONFIG, "ip_concurrency": k, "ip_delay_s": 0.0}

    with pytest.raises(AssertionError, match=CHECKER_MESSAGES):
        run_state_machine_as_test(NoIPDelay, settings=CONTROL_SETTINGS)


@pytest.mark.parametrize("k", [1, 2])
def test_control_checker_catches_exceeding_ip_concurrency(k):
    """A workbench that lets k + 1 fetches run on one IP when the crawl asked for k is caught."""

    class TooMany(machine_with_concurrency(k)):
        workbench_config = {**CONFIG, "ip_concurrency": k + 1}

    with pytest.raises(AssertionError, match=CHECKER_MESSAGES):
        run_state_machine_as_test(TooMany, settings=CONTROL_SETTINGS)


def test_control_checker_catches_unused_ip_concurrency():
    """A workbench that keeps one fetch per IP when the crawl allows 2 starves hosts: caught."""

    class TooFew(machine_with_concurrency(2)):
        workbench_config = {**CONFIG, "ip_concurrency": 1}

    with pytest.raises(AssertionError, match=CHECKER_MESSAGES):
        run_state_machine_as_test(TooFew, settings=CONTROL_SETTINGS)


def test_control_checker_catches_starvation():
    """A workbench that sometimes answers 'nothing ready' while something is must be caught."""

    class Starving(Workbench):
        calls = 0  # per instance once incremented: each example starts afresh

        def acquire(self):
            self.calls += 1
            vs, wait = super().acquire()
            if vs is not None and self.calls % 3 == 0:
                self.release(vs, None)
                return None, 1.0
            return vs, wait

    class StarvingMachine(WorkbenchMachine):
        def make_workbench(self):
            return Starving(self.clock, **self.workbench_config)

    with pytest.raises(AssertionError, match=CHECKER_MESSAGES):
        run_state_machine_as_test(StarvingMachine, settings=CONTROL_SETTINGS)


def test_control_checker_catches_broken_exclusivity():
    """Handing out a second host of a held IP (no IP exclusivity) is caught deterministically."""
    clock = FakeClock()
    wb = Workbench(clock, **CONFIG)
    model = PolitenessModel(**CONFIG)
    for host in ("a.test", "b.test"):
        wb.add(host, "10.0.0.9", [(host, 0)])
        model.add(host, "10.0.0.9", [(host, 0)], None, clock.now)
    first, _ = wb.acquire()
    model.check_acquire((first, 0.0), clock.now)
    other = wb._hosts["b.test"]  # what a broken workbench would hand out now
    with pytest.raises(AssertionError, match="while 1 of its hosts are held; ip_concurrency is 1"):
        model.check_acquire((other, 0.0), clock.now)
    assert wb.acquire() == (None, math.inf)  # the real one does not


def test_control_checker_catches_third_fetch_at_concurrency_two():
    """With ip_concurrency=2, handing out a third host of one IP is caught deterministically."""
    clock = FakeClock()
    config = {**CONFIG, "ip_concurrency": 2}
    wb = Workbench(clock, **config)
    model = PolitenessModel(**config)
    for host in ("a.test", "b.test", "c.test"):
        wb.add(host, "10.0.0.9", [(host, 0)])
        model.add(host, "10.0.0.9", [(host, 0)], None, clock.now)
    for _ in range(2):
        model.check_acquire(wb.acquire(), clock.now)
    other = wb._hosts["c.test"]  # what a broken workbench would hand out now
    with pytest.raises(AssertionError, match="while 2 of its hosts are held; ip_concurrency is 2"):
        model.check_acquire((other, 0.0), clock.now)
    assert wb.acquire() == (None, math.inf)  # the real one does not


# ----------------------------------------------------------------------------- unit tests


def make(clock=None, **kw):
    return Workbench(clock or FakeClock(), **{**CONFIG, **kw})


def test_order_by_next_allowed_then_first_in():
    clock = FakeClock(0.0)
    wb = make(clock, ip_delay_s=0.0)
    wb.add("late.test", "10.0.0.1", ["l"], next_allowed=5.0)
    wb.add("a.test", "10.0.0.2", ["a"])
    wb.add("b.test", "10.0.0.3", ["b"])
    got = []
    while True:
        vs, wait = wb.acquire()
        if vs is None:
            if math.isinf(wait):
                break
            clock.now += wait
            continue
        got.append(vs.pop())
        wb.release(vs, 0.0)
    assert got == ["a", "b", "l"]


def test_delay_counts_from_release_and_uses_crawl_delay():
    clock = FakeClock(0.0)
    wb = make(clock)
    wb.add("a.test", "10.0.0.1", [1, 2, 3])
    vs, _ = wb.acquire()
    vs.pop()
    vs.set_crawl_delay(4.0)
    clock.now = 10.0  # a long fetch: the delay counts from here, not from the acquire
    wb.release(vs, download_s=1.0)
    assert vs.next_allowed == 14.0 and vs.delay_s == 4.0
    assert wb.acquire() == (None, 4.0)
    clock.now = 14.0
    vs, wait = wb.acquire()
    assert vs is not None and wait == 0.0
    vs.set_crawl_delay(100.0)  # capped at max_crawl_delay_s
    wb.release(vs, download_s=0.0)
    assert vs.next_allowed == 14.0 + CONFIG["max_crawl_delay_s"]


def test_adaptive_delay_from_download_time():
    clock = FakeClock(0.0)
    wb = make(clock)
    wb.add("slow.test", "10.0.0.1", [1, 2])
    vs, _ = wb.acquire()
    vs.pop()
    wb.release(vs, download_s=4.0)
    assert vs.next_allowed == CONFIG["adaptive_delay_factor"] * 4.0


def test_release_without_request_keeps_times():
    clock = FakeClock(0.0)
    wb = make(clock)
    wb.add("a.test", "10.0.0.1", [1, 2])
    wb.add("b.test", "10.0.0.1", [3])
    vs, _ = wb.acquire()
    wb.release(vs, None)
    vs2, _ = wb.acquire()
    assert vs2 is not None  # the IP is free again at once
    wb.release(vs2, None)


def test_one_ip_one_fetch_and_release_rules():
    wb = make()
    wb.add("a.test", "10.0.0.1", [1])
    wb.add("b.test", "10.0.0.1", [2])
    vs, _ = wb.acquire()
    assert wb.acquire() == (None, math.inf)  # b's IP is held
    assert wb.ready_count == 0
    wb.release(vs, 0.1)
    with pytest.raises(WorkbenchError, match="not held"):
        wb.release(vs, 0.1)
    other = make()
    other.add("a.test", "10.0.0.1", [1])
    vs_other, _ = other.acquire()
    with pytest.raises(WorkbenchError, match="not held"):
        wb.release(vs_other, 0.1)
    with pytest.raises(WorkbenchError):
        wb.release(vs_other, -1.0)


def test_queue_changes_only_while_held():
    wb = make()
    wb.add("a.test", "10.0.0.1", [1, 2])
    vs, _ = wb.acquire()
    wb.release(vs, 0.0)
    with pytest.raises(WorkbenchError, match="acquired"):
        vs.pop()
    with pytest.raises(WorkbenchError, match="acquired"):
        vs.push_front(0)
    with pytest.raises(WorkbenchError):
        vs.set_crawl_delay(-1.0)


def test_add_needs_ip_for_new_host_and_hosts_keep_their_ip():
    wb = make()
    with pytest.raises(WorkbenchError, match="IP address") as err:
        wb.add("new.test", None, [1])
    assert isinstance(err.value, ValueError)
    wb.add("a.test", "10.0.0.1", [1])
    wb.add("a.test", "10.0.0.2", [2])
    assert [s.ip for s in wb.snapshot()] == ["10.0.0.1"]
    wb.add("a.test", None, [3])
    assert len(wb) == 3 and wb.host_count == 1


def test_next_allowed_for_known_host_only_moves_later():
    clock = FakeClock(0.0)
    wb = make(clock)
    wb.add("a.test", "10.0.0.1", [1], next_allowed=5.0)
    wb.add("a.test", "10.0.0.1", [2], next_allowed=3.0)
    assert wb.acquire() == (None, 5.0)
    wb.add("a.test", "10.0.0.1", [], next_allowed=8.0)  # re-keys a queued visit state
    assert wb.acquire() == (None, 8.0)


def test_remove_host_drops_items_keeps_politeness():
    clock = FakeClock(0.0)
    wb = make(clock)
    wb.add("a.test", "10.0.0.1", [1, 2, 3])
    wb.add("b.test", "10.0.0.2", [4])
    vs, _ = wb.acquire()
    assert vs.host == "a.test"
    vs.pop()
    assert wb.remove_host("a.test") == [2, 3]  # held: its thread keeps it
    wb.release(vs, 0.0)
    assert wb.remove_host("b.test") == [4]  # queued
    assert wb.remove_host("unknown.test") == []
    assert len(wb) == 0 and wb.host_count == 2
    wb.add("a.test", None, [5])
    assert wb.acquire() == (None, CONFIG["host_delay_s"])


def test_drain_and_prune_idle():
    clock = FakeClock(0.0)
    wb = make(clock)
    wb.add("a.test", "10.0.0.1", [1, 2])
    wb.add("b.test", "10.0.0.2", [3])
    wb.add("c.test", "10.0.0.3", [])
    vs, _ = wb.acquire()
    vs.pop()
    wb.release(vs, 0.0)
    assert wb.drain() == [("a.test", [2]), ("b.test", [3])]
    assert len(wb) == 0 and wb.acquire() == (None, math.inf)
    assert wb.prune_idle() == ["b.test", "c.test"]  # a waits until t=2
    clock.now = 2.0
    wb.add("d.test", "10.0.0.4", [])
    assert wb.prune_idle(keep={"d.test"}) == ["a.test"]  # d is kept: its round is about to start
    assert wb.prune_idle() == ["d.test"]
    assert wb.host_count == 0 and wb._ips == {}


def test_snapshot_restore_round_trip_with_wall_clock():
    clock = FakeClock(100.0)
    wb = make(clock)
    wb.add("a.test", "10.0.0.1", ["a1", "a2", "a3"])
    wb.add("b.test", "10.0.0.2", ["b1"], next_allowed=150.0)
    vs, _ = wb.acquire()
    vs.pop()
    vs.set_crawl_delay(3.0)
    wb.release(vs, 0.5)
    states = wb.snapshot()
    assert states[0] == HostState("a.test", "10.0.0.1", 103.0, 3.0, 0.5, 3.0, ("a2", "a3"))
    wall = [s.shifted(1.7e9 - 100.0) for s in states]  # what goes into the hosts table
    later = FakeClock(5.0)  # a new process: another monotonic origin
    wb2 = make(later)
    wb2.restore([s.shifted(5.0 - (1.7e9 + 1.0)) for s in wall])  # read back one second later
    # 3 s of delay were left at save time, 1 s passed: 2 s left on the new clock
    assert wb2.snapshot()[0].next_allowed == pytest.approx(7.0)
    assert [(s.host, s.items, s.crawl_delay_s) for s in wb2.snapshot()] == [
        ("a.test", ("a2", "a3"), 3.0),
        ("b.test", ("b1",), None),
    ]
    assert wb2.acquire() == (None, pytest.approx(2.0))


def test_from_config():
    wb = Workbench.from_config(PolitenessSection(host_delay_s=3.0, ip_delay_s=0.5))
    assert (wb.host_delay_s, wb.ip_delay_s, wb.adaptive_delay_factor) == (3.0, 0.5, 1.0)
    assert wb.ip_concurrency == 1  # BUbiNG's default
    wb = Workbench.from_config(PolitenessSection(ip_concurrency=4))
    assert wb.ip_concurrency == 4
    with pytest.raises(WorkbenchError, match="ip_delay_s"):
        Workbench(ip_delay_s=-1.0)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None, "2"])
def test_ip_concurrency_must_be_a_positive_integer(bad):
    with pytest.raises(WorkbenchError, match="ip_concurrency") as err:
        Workbench(ip_concurrency=bad)
    assert isinstance(err.value, ValueError)


def test_config_rejects_ip_concurrency_below_one():
    text = "[politeness]\nip_concurrency = 0\n"
    with pytest.raises(ConfigError, match="ip_concurrency"):
        load_config(files=[("crawl.toml", text)], environ={})
    ok = load_config(files=[("crawl.toml", "[politeness]\nip_concurrency = 3\n")], environ={})
    assert ok.politeness.ip_concurrency == 3


def test_ip_concurrency_slots_and_ip_delay_from_latest_release():
    """k=2 on one IP: two hosts start at once, a third waits for a slot; the IP delay counts from
    the end of the latest fetch from the IP, and a fetch in flight is not affected by it."""
    clock = FakeClock(0.0)
    wb = make(clock, ip_concurrency=2, ip_delay_s=1.0, host_delay_s=2.0, adaptive_delay_factor=0)
    for host in ("a.test", "b.test", "c.test"):
        wb.add(host, "10.0.0.1", [f"{host}-1", f"{host}-2"])
    wb.add("z.test", "10.0.0.2", ["z"])
    assert wb.ready_count == 3  # two slots on 10.0.0.1, one host on 10.0.0.2
    a, _ = wb.acquire()
    b, _ = wb.acquire()
    assert (a.host, b.host) == ("a.test", "b.test")  # first in, first served
    assert wb.ready_count == 1
    z, _ = wb.acquire()
    assert z.host == "z.test"
    assert wb.acquire() == (None, math.inf)  # c waits for a slot, not for a time
    clock.now = 5.0
    wb.release(a, 0.1)  # IP next-allowed 6.0; a next-allowed 7.0
    assert wb.acquire() == (None, 1.0)  # a slot is free, the IP delay is not over
    assert wb.ready_count == 0
    clock.now = 6.0
    c, _ = wb.acquire()
    assert c.host == "c.test"
    assert wb.acquire() == (None, math.inf)  # b and c hold both slots; a's time does not count
    clock.now = 6.5
    wb.release(b, None)  # no request made: b's and the IP's times stay as they were
    b2, _ = wb.acquire()
    assert b2 is b  # ready at once: its time (0.0) and the IP's (6.0) have passed
    clock.now = 7.0
    wb.release(c, 0.1)  # IP next-allowed 8.0; c next-allowed 9.0
    assert wb.acquire() == (None, 1.0)  # a is ready at 7.0 by its host delay, the IP at 8.0
    clock.now = 8.0
    assert wb.ready_count == 1  # a; c waits until 9.0; b is held
    assert wb.acquire()[0] is a
    assert wb.acquire() == (None, math.inf)  # b and a hold both slots


@pytest.mark.parametrize("k", [1, 2, 5])
def test_ip_concurrency_drains_shared_address(k):
    """Many hosts on 127.0.0.1 (as in tests): with k slots, k fetches run at once, and the whole
    crawl follows the IP delay from each release."""
    clock = FakeClock(0.0)
    wb = make(clock, ip_concurrency=k, ip_delay_s=0.0, host_delay_s=1.0, adaptive_delay_factor=0)
    hosts = [f"s{i}.test" for i in range(6)]
    for h in hosts:
        wb.add(h, "127.0.0.1", [h])
    max_in_flight = 0
    held = []
    while len(wb) or held:
        vs, _ = wb.acquire()
        if vs is not None:
            vs.pop()
            held.append(vs)
            max_in_flight = max(max_in_flight, len(held))
            continue
        clock.now += 0.25
        wb.release(held.pop(0), 0.25)
    assert max_in_flight == k


def test_acquire_wait_timeout_stop_and_wake_on_add():
    wb = make(FakeClock(0.0))
    assert wb.acquire_wait(0.0) is None
    stop = threading.Event()
    stop.set()
    wb.add("a.test", "10.0.0.1", [1])
    assert wb.acquire_wait(10.0, stop) is None  # stopped before looking
    wb.remove_host("a.test")

    got = []
    t = threading.Thread(target=lambda: got.append(wb.acquire_wait(30.0)))
    t.start()
    wb.add("b.test", "10.0.0.2", [2])  # wakes the waiter (or is found at once)
    t.join(30.0)
    assert not t.is_alive() and got and got[0].host == "b.test"


@pytest.mark.parametrize("queued", [False, True])
def test_acquire_wait_returns_on_wakeup_with_nothing_ready(queued):
    """wakeup() ends every wait that finds nothing ready, so each thread rechecks its own state:
    a batch run's fetch threads see that nothing is pending once the last item is done. Before,
    a woken thread waited on to its timeout (1 s per wait in a run: a second per round).
    ``queued``: the workbench still holds a host, not ready for an hour (its delay)."""
    wb = make(FakeClock(0.0))
    if queued:
        wb.add("a.test", "10.0.0.1", [1, 2])
        vs = wb.acquire_wait(0.0)
        assert vs is not None and vs.pop() == 1
        wb.release(vs, 3600.0)  # the next item waits out a long delay
    waiters = [threading.Thread(target=lambda: got.append(wb.acquire_wait(600.0)), daemon=True)
               for _ in range(3)]  # fmt: skip
    got: list = []
    for t in waiters:
        t.start()
    ended = False
    for _ in range(200):  # until every thread waits: a wakeup before a wait ends nothing
        wb.wakeup()
        for t in waiters:
            t.join(0.05)
        if not any(t.is_alive() for t in waiters):
            ended = True
            break
    assert ended, "acquire_wait kept waiting after wakeup()"
    assert got == [None, None, None]
    assert len(wb) == (1 if queued else 0)  # nothing was taken by the woken threads


# ----------------------------------------------------------------------------- threads


class TickingClock:
    """A thread-safe fake clock that moves forward a fixed step at every reading."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0
        self.lock = threading.Lock()

    def __call__(self) -> float:
        with self.lock:
            self.now += self.step
            return self.now


@pytest.mark.parametrize("k", [1, 3])
def test_threads_exclusive_fifo_nothing_lost(k):
    """Real fetch threads and a producer on a ticking fake clock: never two threads on one host or
    more than ``k`` on one IP, each host's items in FIFO order, every item fetched exactly once."""
    hosts = [f"t{i}.test" for i in range(30)]
    ip_of = {h: f"10.1.0.{i % 6}" for i, h in enumerate(hosts)}
    per_host = 12
    total = len(hosts) * per_host
    wb = Workbench(TickingClock(0.001), host_delay_s=0.004, ip_delay_s=0.002, ip_concurrency=k)
    check = threading.Lock()
    busy_hosts: set[str] = set()
    busy_ips: Counter[str] = Counter()
    fetched: dict[str, list[int]] = {h: [] for h in hosts}
    errors: list[str] = []
    done = threading.Event()
    stop = threading.Event()

    def producer():
        for start in range(0, per_host, 3):  # items arrive in batches while threads fetch
            for h in hosts:
                wb.add(h, ip_of[h], [(h, i) for i in range(start, start + 3)])

    def fetcher():
        while not stop.is_set():
            vs = wb.acquire_wait(5.0, stop)
            if vs is None:
                continue
            with check:
                if vs.host in busy_hosts:
                    errors.append(f"{vs.host} handed to two threads")
                if busy_ips[vs.ip] >= k:
                    errors.append(f"{vs.ip} handed to {busy_ips[vs.ip] + 1} threads (k={k})")
                busy_hosts.add(vs.host)
                busy_ips[vs.ip] += 1
            for _ in range(2):
                if not vs.queue:
                    break
                host, i = vs.pop()
                with check:
                    fetched[host].append(i)
                    if sum(map(len, fetched.values())) == total:
                        done.set()
            with check:
                busy_hosts.discard(vs.host)
                busy_ips[vs.ip] -= 1
            wb.release(vs, 0.001)

    threads = [threading.Thread(target=fetcher) for _ in range(6)]
    threads.append(threading.Thread(target=producer))
    for t in threads:
        t.start()
    finished = done.wait(60.0)
    stop.set()
    wb.wakeup()
    for t in threads:
        t.join(30.0)
    assert finished, f"only {sum(map(len, fetched.values()))} of {total} items fetched"
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert all(fetched[h] == list(range(per_host)) for h in hosts)
    assert len(wb) == 0


# ----------------------------------------------------------------------------- politeness groups


def _policy(hosts=(), groups=(), **base) -> PolitenessPolicy:
    base = {"host_delay_s": CONFIG["host_delay_s"], "ip_delay_s": CONFIG["ip_delay_s"],
            "ip_concurrency": 1, **base}  # fmt: skip
    return PolitenessPolicy(host_rules=parse_host_rules(hosts),
                            group_rules=parse_group_rules(groups), **base)  # fmt: skip


#: policies a crawl may switch between from one round or micro-batch to the next: hosts join and
#: leave groups, groups change delay and concurrency, per-host floors come and go
POLICIES = [
    _policy(),
    _policy(hosts=[{"match": "h3.test", "delay_s": 4.0}],
            groups=[{"name": "g", "match": "h[0-2].test", "delay_s": 1.5}]),
    _policy(hosts=[{"surt": "test,h0,", "delay_s": 0.5}],
            groups=[{"name": "g", "match": "h[1-4].test", "delay_s": 0.5, "concurrency": 2},
                    {"name": "d", "match": "h[5-6].test", "by": "ip", "delay_s": 3.0}]),
    _policy(groups=[{"name": "all", "match": "*", "by": "domain", "delay_s": 2.5,
                     "concurrency": 3}], ip_concurrency=2),
]  # fmt: skip


class GroupMachine(WorkbenchMachine):
    """The state machine under politeness groups and per-host floors, switching the policy
    (:meth:`Workbench.set_policy`) at random points: every group delay and concurrency and every
    host floor in force is checked at each acquire, as the IP rules are."""

    policies = POLICIES

    def __init__(self):
        self.current = self.policies[min(1, len(self.policies) - 1)]
        super().__init__()
        self.model.policy = self.current
        self.model.set_policy(self.current, self.clock.now)

    def make_workbench(self):
        return Workbench(self.clock, **{k: v for k, v in CONFIG.items()
                                        if k in ("max_crawl_delay_s", "adaptive_delay_factor")},
                         policy=self.current)  # fmt: skip

    @rule(i=st.integers(0, len(POLICIES) - 1))
    def switch_policy(self, i):
        self.current = self.policies[i % len(self.policies)]
        self.wb.set_policy(self.current)
        self.model.set_policy(self.current, self.clock.now)

    def in_flight_per_ip(
        self,
    ):  # a lowered concurrency leaves fetches in flight: checked at acquire
        pass


def test_workbench_stateful_groups():
    run_state_machine_as_test(GroupMachine, settings=STATEFUL_SETTINGS)


def test_control_checker_catches_a_group_delay_ignored(monkeypatch):
    """A workbench that keeps every host in its IP entry (no groups) must be caught."""
    monkeypatch.setattr(PolitenessPolicy, "slot", lambda self, host, ip, domain=None:
                        Slot(f"ip:{ip}", self.ip_delay_s, self.ip_concurrency))  # fmt: skip

    class OneGroup(GroupMachine):  # every host in one group: any two fetches 5 s apart
        policies = [_policy(groups=[{"name": "all", "match": "*", "delay_s": 5.0}])]

    with pytest.raises(AssertionError, match=CHECKER_MESSAGES):
        run_state_machine_as_test(OneGroup, settings=CONTROL_SETTINGS)


def test_control_checker_catches_a_host_floor_ignored(monkeypatch):
    """A workbench that applies the crawl-wide floor to every host (no per-host delay) is caught."""
    monkeypatch.setattr(Workbench, "_delay", lambda self, vs: reference_delay(
        host_delay_s=self.host_delay_s, crawl_delay_s=vs.crawl_delay_s,
        max_crawl_delay_s=self.max_crawl_delay_s, adaptive_delay_factor=self.adaptive_delay_factor,
        last_download_s=vs.last_download_s))  # fmt: skip

    class SlowHosts(GroupMachine):  # every host's floor 6 s instead of the crawl's 2 s
        policies = [_policy(hosts=[{"match": "*", "delay_s": 6.0}])]

    with pytest.raises(AssertionError, match=CHECKER_MESSAGES):
        run_state_machine_as_test(SlowHosts, settings=CONTROL_SETTINGS)
