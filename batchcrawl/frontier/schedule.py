"""The fetch schedule: when a URL is due again (docs/design.md §8a).

Two policies, as in Nutch (``DefaultFetchSchedule``, ``AdaptiveFetchSchedule``):

* ``fixed`` — every fetched URL is due again ``interval_s`` after its fetch.
* ``adaptive`` — the interval shrinks by ``inc_rate`` when the content changed since the previous
  fetch and grows by ``dec_rate`` when it did not (a 304, or the same payload digest), always within
  ``[min_interval_s, max_interval_s]``. The first fetch of a URL gets ``interval_s``.

Failures follow their own back-off: a transient error (5xx, timeout, network) is retried after
``retry_backoff_s * 2**(retries - 1)``, capped at ``max_interval_s``; a URL that is ``gone`` (404,
410) is checked again after ``gone_interval_s``. All times are epoch seconds (float); intervals are
seconds.

The schedule is a pure function of its inputs (no clock inside), so it is tested exhaustively.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from batchcrawl.errors import ConfigError

#: How a fetch ended, as the schedule sees it.
Change = Literal["changed", "unchanged", "first"]


@dataclass(frozen=True)
class FetchSchedule:
    """When a fetched URL is due again (Nutch's ``FetchSchedule``).

    Parameters
    ----------
    policy
        ``"fixed"`` or ``"adaptive"``.
    interval_s
        Interval after a first fetch (and every fetch under ``fixed``), seconds. Nutch's default
        is 30 days.
    min_interval_s, max_interval_s
        Bounds of the adaptive interval, seconds.
    inc_rate, dec_rate
        Adaptive factors: the interval is multiplied by ``1 - inc_rate`` when the page changed and by
        ``1 + dec_rate`` when it did not (Nutch: 0.4 and 0.2).
    retry_backoff_s
        First retry delay after a transient failure, seconds; doubles with each retry.
    gone_interval_s
        Delay before a gone URL (404/410) is checked again, seconds.

    Raises
    ------
    ConfigError
        A bound is not positive, ``min_interval_s > max_interval_s``, or a rate is outside [0, 1).
    """

    policy: Literal["fixed", "adaptive"] = "fixed"
    interval_s: float = 30 * 86400.0
    min_interval_s: float = 3600.0
    max_interval_s: float = 365 * 86400.0
    inc_rate: float = 0.4
    dec_rate: float = 0.2
    retry_backoff_s: float = 3600.0
    gone_interval_s: float = 90 * 86400.0

    def __post_init__(self) -> None:
        if self.policy not in ("fixed", "adaptive"):
            raise ConfigError(f"fetch schedule policy {self.policy!r}: expected fixed or adaptive")
        for name in ("interval_s", "min_interval_s", "max_interval_s", "retry_backoff_s",
                     "gone_interval_s"):  # fmt: skip
            if not getattr(self, name) > 0:
                raise ConfigError(f"fetch schedule {name} = {getattr(self, name)}: must be > 0")
        if self.min_interval_s > self.max_interval_s:
            raise ConfigError(
                f"fetch schedule min_interval_s = {self.min_interval_s} is above max_interval_s = "
                f"{self.max_interval_s}"
            )
        for name in ("inc_rate", "dec_rate"):
            if not 0 <= getattr(self, name) < 1:
                raise ConfigError(
                    f"fetch schedule {name} = {getattr(self, name)}: expected 0 <= x < 1"
                )

    def after_fetch(
        self, fetch_time: float, previous_interval_s: float | None, change: Change
    ) -> tuple[float, float]:
        """``(next_fetch_time, interval_s)`` of a URL whose content was fetched (200) or
        confirmed unchanged (304) at ``fetch_time``.

        ``previous_interval_s`` is the interval the URL had (None for a first fetch); ``change``
        says whether the content changed since the previous fetch (``"first"`` when there was none).
        """
        if self.policy == "fixed" or change == "first" or previous_interval_s is None:
            return fetch_time + self.interval_s, self.interval_s
        rate = -self.inc_rate if change == "changed" else self.dec_rate
        interval = min(
            max(previous_interval_s * (1.0 + rate), self.min_interval_s), self.max_interval_s
        )
        return fetch_time + interval, interval

    def after_failure(self, fetch_time: float, retries: int) -> float:
        """``next_fetch_time`` after a transient failure; ``retries`` counts failures so far (≥ 1)."""
        exponent = max(0, retries - 1)
        delay = self.retry_backoff_s * (2.0 ** min(exponent, 60))
        return fetch_time + min(delay, self.max_interval_s)

    def after_gone(self, fetch_time: float) -> float:
        """``next_fetch_time`` of a URL found gone (404/410) at ``fetch_time``."""
        return fetch_time + self.gone_interval_s
