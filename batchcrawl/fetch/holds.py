"""Hosts held by the crawl: a state of the host, not a failure of each of its URLs.

Three reasons hold a host: its robots.txt is unavailable, it asks us to slow down (429/503), or it
does not answer at all.

**robots_unavailable.** While a host's robots.txt answers 5xx or cannot be reached (and no good copy is in force), RFC 9309
§2.3.1.4 has the crawler assume complete disallow: the host is **held**. Its URLs are given back
without a retry counted (``robots_unavailable`` with the time the hold ends), generate leaves the
host out of the fetch lists until then (counted ``held:robots_unavailable``,
:mod:`batchcrawl.frontier.holds`), and robots.txt is tried again then, with an exponential
back-off: ``base_s`` after the first failure, doubling at each further one up to ``max_s``, with
+-10 % jitter so that hosts failing together do not come back together. One success ends the
hold (:func:`hold_host`).

**rate_limit.** A 429 or 503 without ``Retry-After``, or one that repeats a rate limit still
remembered, holds the whole host, not only the URL (RFC 6585 §4, RFC 9110 §15.6.4; Nutch's
NUTCH-2946, StormCrawler): no request to it for ``politeness.rate_limit_backoff_s`` (60 s),
doubled at each further one up to ``politeness.max_rate_limit_backoff_s`` (a day), jittered, and
never less than the server's ``Retry-After``. A first one *with* ``Retry-After`` waits what the
server asked and is remembered. The rate limit is forgotten (the back-off resets) once the host
has answered without one ``politeness.rate_limit_quiet_s`` after its hold ended
(:func:`rate_limit_wait`). Within a round the fetch worker's workbench keeps the host's next
request after a hold of up to ``politeness.rate_limit_wait_in_round_s`` (10 s); a longer one
gives the host's queued URLs back at once as ``rate_limited`` (no retry counted, due when the
hold ends), so a round whose last host answers 503 does not wait out the back-off. Across rounds
generate leaves the host out while the hold is in force.

**unreachable.** ``politeness.unreachable_failures`` fetches in a row that get no answer from the
host (:data:`NO_ANSWER_ERRORS`: connection refused, reset or timed out, no address) hold the whole
host, as Heritrix's and BUbiNG's per-host failure counts put a dead host's queue aside: without it a
site that is down has every due URL tried in each round, each charged a retry, and after
``frontier.max_retries`` rounds of outage the whole site is ``gone``. The hold waits
``politeness.unreachable_backoff_s`` (60 s), doubled at each further failure up to
``max_unreachable_backoff_s`` (an hour), jittered. The host's queued URLs, and any that reach it
while the hold is in force, are given back at once as ``host_unreachable`` without a retry
counted, due when the hold ends (kept waiting in the workbench, they held a round open until its
time limit); across rounds generate leaves the host out, and once the hold is over one URL probes
the host (a failure holds it again at once, doubled); any answer ends the hold
(:func:`unreachable_wait`, :meth:`HostHolds.in_force`). The fetches that failed before the hold
(and a failed probe) stay charged, but are due when the hold ends, not after the retry back-off
(:func:`due_at_hold_end`). A host name that does not resolve is
held at once when more than one of its URLs waits: one lookup answers for them all, so the first
is charged ``dns_error`` and the others go back as ``host_unreachable`` (:func:`hold_unresolved`).

A hold is persisted in the ``hosts`` table (``held_reason``, ``held_since``, ``held_until``,
``held_failures``) by :meth:`HostHolds.to_row` and restored by :meth:`HostHolds.load_row`, so it
survives rounds, streams and restarts, and a long outage is visible per host in SQL and
``status``. This module does no I/O; clock and random source are passed in.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from batchcrawl.records import HOLD_COLUMNS

if TYPE_CHECKING:
    from batchcrawl.config import PolitenessSection, RobotsSection
    from batchcrawl.fetch.robots import RobotsCache, RobotsRules

__all__ = [
    "HOLD_COLUMNS", "NO_ANSWER_ERRORS", "Hold", "HostHolds", "backoff_s", "due_at_hold_end", "hold_host",
    "hold_unreachable", "hold_unresolved", "rate_limit_wait", "unreachable_wait",
]  # fmt: skip

#: ``FetchResult.error`` values of a fetch the host never answered (:mod:`batchcrawl.fetch.fetcher`):
#: no connection, a reset or a timeout before the response, no address. Not ``refused`` (our own
#: address policy), ``bad_response`` (the host answered something) or a body cut short.
NO_ANSWER_ERRORS = frozenset({"connect", "timeout", "reset", "dns"})
#: Relative jitter of a back-off: the wait is drawn from ``[1 - JITTER, 1 + JITTER]`` x the step.
JITTER = 0.1


@dataclass(frozen=True, slots=True)
class Hold:
    """One held host. Times are wall-clock epoch seconds (they are stored in the ``hosts`` table).

    Attributes
    ----------
    reason : str
        Why: ``robots_unavailable``, ``rate_limit`` or ``unreachable``.
    since : float
        The first failure of the current outage.
    until : float
        No request to the host, and no fetch-list URL of it, before this time.
    failures : int
        Consecutive failures of the outage (>= 1): the back-off exponent.
    """

    reason: str
    since: float
    until: float
    failures: int


def backoff_s(failures: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Seconds a host is held after its ``failures``-th consecutive failure (>= 1): ``base_s x
    2**(failures - 1)``, capped at ``max_s``, times a jitter factor in ``[0.9, 1.1]``, never above
    ``max_s``."""
    step = min(max_s, base_s * 2.0 ** min(failures - 1, 64))
    return min(max_s, step * (1.0 + JITTER * (2.0 * rng.random() - 1.0)))


class HostHolds:
    """The holds of the hosts a fetch worker serves.

    Parameters
    ----------
    rng
        Random source of the jitter.
    clock
        Wall clock, epoch seconds.

    Thread-safe.
    """

    def __init__(self, rng: random.Random, clock: Callable[[], float] = time.time) -> None:
        self._rng = rng
        self._clock = clock
        self._holds: dict[str, Hold] = {}
        self._no_answer: dict[str, int] = {}  # fetches in a row without an answer, by host
        self._lock = threading.Lock()

    def now(self) -> float:
        """The holds' wall clock, epoch seconds."""
        return self._clock()

    def remaining_s(self, host: str) -> float | None:
        """Seconds until ``host``'s hold ends (0 if past), or None when it is not held."""
        hold = self.get(host)
        return None if hold is None else max(0.0, hold.until - self._clock())

    def fail(
        self, host: str, reason: str, base_s: float, max_s: float, *,
        at_least_s: float = 0.0, first_s: float | None = None,
    ) -> Hold:  # fmt: skip
        """Record a failure of ``host`` for ``reason`` now and return its hold: the next
        back-off step (:func:`backoff_s` of the failures in a row, ``base_s``, ``max_s``), at
        least ``at_least_s``; a first failure waits ``first_s`` instead when given (a server's
        ``Retry-After``). A hold of another reason is replaced, its count kept."""
        now = self._clock()
        with self._lock:
            old = self._holds.get(host)
            since, failures = (old.since, old.failures + 1) if old is not None else (now, 1)
            if failures == 1 and first_s is not None:
                wait = first_s
            else:
                wait = max(at_least_s, backoff_s(failures, base_s, max(max_s, base_s), self._rng))
            hold = self._holds[host] = Hold(reason, since, now + wait, failures)
        return hold

    def clear(self, host: str, reason: str) -> Hold | None:
        """End ``host``'s hold if it is held for ``reason``; returns the hold ended, or None."""
        with self._lock:
            hold = self._holds.get(host)
            if hold is None or hold.reason != reason:
                return None
            return self._holds.pop(host)

    def settle(self, host: str, quiet_s: float) -> Hold | None:
        """``host`` answered without a rate limit: forget its ``rate_limit`` hold if that ended
        ``quiet_s`` seconds ago or more (the back-off resets); returns the hold forgotten."""
        with self._lock:
            hold = self._holds.get(host)
            if hold is None or hold.reason != "rate_limit":
                return None
            if self._clock() < hold.until + quiet_s:
                return None
            return self._holds.pop(host)

    def no_answer(self, host: str) -> int:
        """Count a fetch of ``host`` that got no answer; returns how many in a row."""
        with self._lock:
            n = self._no_answer[host] = self._no_answer.get(host, 0) + 1
        return n

    def answered(self, host: str) -> Hold | None:
        """``host`` answered: its count of fetches without an answer starts again, and an
        ``unreachable`` hold ends (returned, else None)."""
        with self._lock:
            self._no_answer.pop(host, None)
            hold = self._holds.get(host)
            if hold is None or hold.reason != "unreachable":
                return None
            return self._holds.pop(host)

    def in_force(self, host: str) -> tuple[str, float] | None:
        """``(reason, seconds left)`` of ``host``'s hold while it is in force, else None (not
        held, or the hold is over: the next fetch probes). One lookup: the fetch loop asks for
        every page."""
        with self._lock:
            hold = self._holds.get(host)
        if hold is None:
            return None
        left = hold.until - self._clock()
        return (hold.reason, left) if left > 0 else None

    def get(self, host: str) -> Hold | None:
        """``host``'s hold, or None (also after it ended but before :meth:`clear`: see ``until``)."""
        with self._lock:
            return self._holds.get(host)

    def forget(self, host: str) -> None:
        """Drop ``host`` (a worker that no longer serves it; its row keeps the hold)."""
        with self._lock:
            self._holds.pop(host, None)
            self._no_answer.pop(host, None)

    def to_row(self, host: str) -> dict[str, Any]:
        """``host``'s :data:`HOLD_COLUMNS` (naive UTC datetimes; all None when not held, but
        ``held_failures``: the fetches in a row it did not answer, if any, so the count goes on
        across rounds and restarts)."""
        hold = self.get(host)
        if hold is None:
            with self._lock:
                in_a_row = self._no_answer.get(host)
            return {**dict.fromkeys(HOLD_COLUMNS), "held_failures": in_a_row}
        return {
            "held_reason": hold.reason,
            "held_since": _utc(hold.since),
            "held_until": _utc(hold.until),
            "held_failures": hold.failures,
        }

    def load_row(self, host: str, row: Mapping[str, Any]) -> Hold | None:
        """Restore ``host``'s hold from its ``hosts`` row, or without one its count of fetches in
        a row without an answer; a row written before the hold columns (or with none) restores
        nothing."""
        if row.get("held_until") is None or row.get("held_reason") is None:
            if row.get("held_failures"):
                with self._lock:
                    self._no_answer[host] = int(row["held_failures"])
            return None
        since = row.get("held_since") or row["held_until"]
        hold = Hold(
            str(row["held_reason"]), _epoch(since), _epoch(row["held_until"]),
            max(1, int(row.get("held_failures") or 1)),
        )  # fmt: skip
        with self._lock:
            self._holds[host] = hold
        return hold


def _utc(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, UTC).replace(tzinfo=None)


def _epoch(value: datetime | float) -> float:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    return float(value) / 1000.0  # TIMESTAMP_MS as epoch milliseconds


def hold_host(
    holds: HostHolds,
    robots: RobotsCache,
    host: str,
    origin: str,
    rules: RobotsRules,
    cfg: RobotsSection,
) -> float | None:
    """After a robots.txt fetch of ``origin`` (of ``host``) whose rules in force are ``rules``
    (:class:`~batchcrawl.fetch.robots.RobotsRules`, the last good copy if one is kept): hold the
    host while they are ``unavailable`` (back-off ``cfg.retry_after_s`` doubling to
    ``cfg.max_hold_s``; the cache keeps that entry until the hold ends, so robots.txt is fetched
    again only then) and end a ``robots_unavailable`` hold otherwise.

    Returns the seconds the host is held from now, or None when it is not held.
    """
    if not rules.unavailable:
        holds.clear(host, "robots_unavailable")
        return None
    hold = holds.fail(host, "robots_unavailable", cfg.retry_after_s, cfg.max_hold_s)
    robots.hold(origin, hold.until)
    return holds.remaining_s(host)


#: Statuses that ask a client to slow down (RFC 6585 §4; RFC 9110 §15.6.4).
RATE_LIMIT_STATUSES = frozenset((429, 503))


def rate_limit_wait(
    holds: HostHolds,
    host: str,
    status: int | None,
    retry_after_s: float | None,
    cfg: PolitenessSection,
) -> float | None:
    """Seconds ``host`` must wait after a response with ``status`` (None: no response) whose
    ``Retry-After`` was ``retry_after_s`` (seconds, already capped; None if absent or bad).

    A 429/503 holds the host (module docstring, ``rate_limit``): the returned wait is the hold's.
    Another response settles a remembered rate limit (:meth:`HostHolds.settle`) and returns
    None, as does no response.
    """
    if status is None:
        return None
    if status not in RATE_LIMIT_STATUSES:
        holds.settle(host, cfg.rate_limit_quiet_s)
        return None
    hold = holds.fail(
        host, "rate_limit", cfg.rate_limit_backoff_s, cfg.max_rate_limit_backoff_s,
        at_least_s=retry_after_s or 0.0, first_s=retry_after_s,
    )  # fmt: skip
    return max(0.0, hold.until - holds.now())


def unreachable_wait(
    holds: HostHolds, host: str, status: int | None, error: str | None, cfg: PolitenessSection
) -> float | None:
    """Seconds ``host`` must wait after a fetch that ended with HTTP ``status`` (None: no
    response) and ``FetchResult.error`` ``error`` (module docstring, ``unreachable``).

    Any response ends an ``unreachable`` hold and the count (returns None). A fetch without an
    answer (:data:`NO_ANSWER_ERRORS`) is counted; the ``cfg.unreachable_failures``-th in a row,
    or any while the host's last hold was ``unreachable`` (the probe after a hold), holds the
    host and returns the hold's wait. Other errors, and ``unreachable_failures`` 0, return None.
    """
    if status is not None:
        holds.answered(host)
        return None
    if error not in NO_ANSWER_ERRORS or cfg.unreachable_failures <= 0:
        return None
    in_a_row = holds.no_answer(host)
    last = holds.get(host)
    if in_a_row < cfg.unreachable_failures and (last is None or last.reason != "unreachable"):
        return None
    return hold_unreachable(holds, host, cfg)


def due_at_hold_end(rows: list[dict[str, Any]], host: str, wait_s: float) -> int:
    """A hold of ``host`` ``unreachable`` just began, ``wait_s`` seconds long: its fetches
    without an answer among ``rows`` (a run's ``fetched`` rows not yet spilled) are due again when
    the hold ends (``retry_after_s``), not after ``frontier.retry_backoff_s`` (an hour, doubling).
    They stay charged a retry, but once the host answers again the failures that revealed its
    outage are fetched with the rest of the site: before, a crawl whose site came back could end
    with those pages missing for hours (a trial: 82 of 90). Returns how many rows changed."""
    changed = 0
    for row in rows:
        if (
            row["url_host_name"] == host
            and row.get("error") in NO_ANSWER_ERRORS
            and row.get("retry_after_s") is None
        ):
            row["retry_after_s"] = wait_s
            changed += 1
    return changed


def hold_unreachable(holds: HostHolds, host: str, cfg: PolitenessSection) -> float | None:
    """Hold ``host`` ``unreachable`` now (the next back-off step of
    ``cfg.unreachable_backoff_s`` doubling to ``cfg.max_unreachable_backoff_s``) and return the
    hold's seconds; None (no hold) when ``cfg.unreachable_failures`` is 0. Also for a failure
    that answers for the whole host at once: its name did not resolve."""
    if cfg.unreachable_failures <= 0:
        return None
    hold = holds.fail(
        host, "unreachable", cfg.unreachable_backoff_s,
        max(cfg.max_unreachable_backoff_s, cfg.unreachable_backoff_s),
    )  # fmt: skip
    return max(0.0, hold.until - holds.now())


def hold_unresolved(
    holds: HostHolds, host: str, waiting: int, cfg: PolitenessSection
) -> float | None:
    """``host``'s name did not resolve while ``waiting`` of its URLs were to be fetched: hold it
    ``unreachable`` (:func:`hold_unreachable`) when more than one waits, or when its last hold
    was ``unreachable`` (this was its probe), and return the hold's seconds; else None."""
    last = holds.get(host)
    if waiting > 1 or (last is not None and last.reason == "unreachable"):
        return hold_unreachable(holds, host, cfg)
    return None
