"""What response headers tell a crawler to do: ``X-Robots-Tag`` and ``Retry-After``.

* ``X-Robots-Tag`` (Google's and Bing's documented header; the same directives as ``<meta
  name="robots">``): ``noindex``, ``nofollow``, ``none`` (= both), ``all``; a value may start with a
  user agent (``googlebot: noindex``), which applies only to that agent; several headers and
  comma-separated values combine. Unknown directives (``noarchive``, ``max-snippet: 20``,
  ``unavailable_after: ...``) are ignored.
* ``Retry-After`` (RFC 9110 §10.2.3) on a 429 or 503: a delay in seconds or an HTTP date; the host's
  next allowed request moves to then (capped by the caller's maximum).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from batchcrawl.httpdate import http_date

_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_KNOWN = frozenset(("noindex", "nofollow", "none", "all", "index", "follow"))


@dataclass(frozen=True)
class RobotsDirectives:
    """Page-level robots directives: ``noindex`` (do not index the content) and ``nofollow`` (do
    not follow its links)."""

    noindex: bool = False
    nofollow: bool = False

    def __or__(self, other: RobotsDirectives) -> RobotsDirectives:
        return RobotsDirectives(self.noindex or other.noindex, self.nofollow or other.nofollow)


def x_robots_tag(values: Iterable[str], agent: str) -> RobotsDirectives:
    """Directives of the ``X-Robots-Tag`` header ``values`` (one string per header line) that apply
    to the robots product token ``agent`` (matched case-insensitively).

    A value ``"otherbot: noindex"`` is ignored; ``"batchcrawl: nofollow"`` and ``"nofollow"``
    apply. Malformed values never raise.
    """
    agent = agent.lower()
    noindex = nofollow = False
    for value in values:
        scope_ok = True
        for raw in value.split(","):
            token = raw.strip().lower()
            if not token:
                continue
            if ":" in token:
                head, _, rest = token.partition(":")
                head = head.strip()
                if head not in _KNOWN and " " not in head and head not in (
                    "max-snippet", "max-image-preview", "max-video-preview", "unavailable_after",
                ):  # fmt: skip
                    # a user-agent prefix: applies to the rest of this header line
                    scope_ok = head == agent
                    token = rest.strip()
            if not scope_ok:
                continue
            if token in ("noindex", "none"):
                noindex = True
            if token in ("nofollow", "none"):
                nofollow = True
    return RobotsDirectives(noindex, nofollow)


#: Longest delay-seconds value read (more digits: :data:`MAX_DELAY_S`), digits.
_MAX_DIGITS = 12
#: Delay given for a delay-seconds value longer than ``_MAX_DIGITS`` digits, seconds.
MAX_DELAY_S = 10.0**12


def retry_after_s(value: str | None, now: float) -> float | None:
    """Seconds to wait from ``now`` (epoch seconds) per a ``Retry-After`` header value
    (RFC 9110 §10.2.3: delay-seconds, ASCII digits, or an HTTP-date in any of the forms of
    §5.6.7), or None when absent or malformed (the caller then uses its normal back-off). A date in
    the past gives 0; a negative number is malformed; an absurdly long number gives
    :data:`MAX_DELAY_S` (the caller caps it). Never raises."""
    if value is None:
        return None
    value = value.strip()
    if _DIGITS.fullmatch(value):
        return float(int(value)) if len(value) <= _MAX_DIGITS else MAX_DELAY_S
    when = http_date(value, now=now)
    if when is None:
        return None
    return max(0.0, when - now)
