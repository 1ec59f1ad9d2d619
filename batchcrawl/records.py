"""The small value types passed between crawl steps: URL states, fetch outcomes, fetch items, fetch
results. Nothing here does I/O.

``UrlStatus`` is the state of a URL in the frontier (Nutch's CrawlDatum status); ``Outcome`` is what
one fetch attempt produced. ``batchcrawl.frontier.update`` maps (status, outcome) pairs to the next status.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime

from batchcrawl.httpdate import http_date, imf_fixdate


class UrlStatus(enum.StrEnum):
    """State of a URL in the frontier (column ``frontier.status``)."""

    QUEUED = "queued"  # known, due for fetching
    FETCHED = "fetched"  # fetched with a 2xx (or another final, storable status)
    REDIRECT = "redirect"  # answered 3xx; its target became a new URL
    GONE = "gone"  # 404/410, or retries exhausted
    ERROR = "error"  # transient failure; retried after a backoff
    ROBOTS_DENIED = "robots_denied"  # disallowed by robots.txt
    FILTERED = "filtered"  # rejected by the scope filters; ``reason`` names the filter
    REFUSED = "refused"  # the address policy refused its host's address


#: Statuses ``batchcrawl requeue`` puts back to ``queued`` (:mod:`batchcrawl.frontier.requeue`):
#: final or waiting ones whose cause can be fixed outside the crawl. ``queued`` is due already;
#: ``fetched`` and ``redirect`` follow the ``[recrawl]`` schedule or ``inject --refetch``;
#: ``filtered`` follows the ``[filters]``.
REQUEUABLE_STATUSES = (
    UrlStatus.REFUSED.value,
    UrlStatus.ROBOTS_DENIED.value,
    UrlStatus.GONE.value,
    UrlStatus.ERROR.value,
)


#: The ``hosts`` columns of a host's hold (storage/schema.sql; :mod:`batchcrawl.fetch.holds`
#: writes them, :mod:`batchcrawl.frontier.requeue` clears them).
HOLD_COLUMNS = ("held_reason", "held_since", "held_until", "held_failures")


class Outcome(enum.StrEnum):
    """Result of one fetch attempt (column ``fetched.outcome``)."""

    OK = "ok"  # 2xx, stored complete
    TRUNCATED = "truncated"  # 2xx, body cut at max_body_bytes or the time limit (stored, flagged)
    REDIRECT = "redirect"  # 3xx with a usable Location
    REDIRECT_LOOP = "redirect_loop"  # 3xx to itself after fetch.max_self_redirects hops followed
    NOT_MODIFIED = "not_modified"  # 304
    GONE = "gone"  # 404 or 410
    HTTP_ERROR = "http_error"  # other 4xx: permanent for this URL
    SERVER_ERROR = "server_error"  # 5xx, 429: transient
    NETWORK_ERROR = "network_error"  # connect/read timeout, reset, short body, bad response
    DNS_ERROR = "dns_error"  # the host does not resolve
    ROBOTS_DENIED = "robots_denied"  # robots.txt disallows the URL
    ROBOTS_UNAVAILABLE = (
        "robots_unavailable"  # robots.txt 5xx/unreachable: not fetched, retry later
    )
    REFUSED = "refused"  # address policy refused the resolved address
    HOST_UNREACHABLE = (
        "host_unreachable"  # its host is held after fetches without an answer: retry later
    )
    RATE_LIMITED = "rate_limited"  # its host is held after a 429/503 (a long hold): retry later
    NOT_FETCHED = "not_fetched"  # still queued when the round ended (time limit)


#: Outcomes of a URL that a held host gave back unfetched (:mod:`batchcrawl.fetch.holds`): it
#: stays ``queued`` with the outcome as its ``reason``, due when the hold ends, no retry counted.
GIVEN_BACK_OUTCOMES = (Outcome.ROBOTS_UNAVAILABLE, Outcome.HOST_UNREACHABLE, Outcome.RATE_LIMITED)
#: Their values (``fetched.outcome``): summaries and ``status`` count them ``given_back``, not as
#: attempts or errors.
GIVEN_BACK = frozenset(o.value for o in GIVEN_BACK_OUTCOMES)


@dataclass(frozen=True, slots=True)
class FetchItem:
    """One URL of a fetch list, as a fetch worker receives it (a ``fetchlists`` row).

    ``url`` is canonical (``batchcrawl.urls.canonicalize``); ``url_key`` its 64-bit key.
    ``etag`` and ``last_modified`` are the validators of the last capture (sent back as
    ``If-None-Match`` / ``If-Modified-Since``, RFC 9110 §13.1), ``content_fetch_time`` (UTC) when
    that capture was fetched (the ``WARC-Refers-To-Date`` of a 304's revisit record) and
    ``content_digest`` its payload digest (an unchanged 200 becomes a revisit of it).
    """

    url_key: int
    url: str
    host: str
    domain: str
    depth: int
    hops_out: int = 0
    discovered_round: int = 0
    discovered_seq: int = 0
    retries: int = 0
    etag: str | None = None
    last_modified: str | None = None
    content_fetch_time: datetime | None = None
    content_digest: str | None = None

    def conditional_headers(self) -> dict[str, str]:
        """``If-None-Match`` / ``If-Modified-Since`` for a refetch (RFC 9110 §13.1.2, §13.1.3):
        empty for a URL never captured. ``If-Modified-Since`` is an IMF-fixdate (RFC 9110
        §5.6.7: a sender MUST generate it), also for a ``last_modified`` stored in another form
        by a crawl made before the fetch boundary normalized it; one that is no HTTP-date is not
        sent."""
        out = {}
        if self.etag:
            out["If-None-Match"] = self.etag
        when = http_date(self.last_modified)
        if when is not None:
            out["If-Modified-Since"] = imf_fixdate(when)
        return out


@dataclass(slots=True)
class FetchResult:
    """What the HTTP layer observed for one request, raw enough to write WARC records.

    Attributes
    ----------
    url
        The URL requested (canonical).
    ip
        Address connected to (after the address policy), or None if no connection was made.
    status, reason, http_version
        Status line of the response (``http_version`` like ``"HTTP/1.1"``); None without a response.
    request_headers
        Header lines sent, in order, as ``(name, value)``; ``request_line`` e.g. ``"GET / HTTP/1.1"``.
    response_headers
        Header lines received, in order. ``Transfer-Encoding`` is kept here but the body below is
        already de-chunked (WARC 1.1 §6.3: payload with transfer encoding removed).
    raw_body
        The entity body as received, content-encoding (gzip, br) still applied, transfer encoding
        removed; cut where reading stopped.
    body
        ``raw_body`` decoded (content-encoding removed), at most ``max_body_bytes`` bytes.
    truncated
        None, ``"length"`` (decoded body reached the cap) or ``"time"`` (whole-fetch timeout).
    error
        None, or a short kind: ``timeout``, ``connect``, ``reset``, ``body_short``, ``bad_response``,
        ``dns``, ``refused``, ``decode``.
    started, finished
        Wall-clock times (seconds since the epoch) of the request start and the last byte.
    """

    url: str
    ip: str | None = None
    status: int | None = None
    reason: str | None = None
    http_version: str | None = None
    request_line: str = ""
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    raw_body: bytes = b""
    body: bytes = b""
    truncated: str | None = None
    error: str | None = None
    started: float = 0.0
    finished: float = 0.0

    @property
    def download_s(self) -> float:
        """Seconds from request start to last byte."""
        return max(0.0, self.finished - self.started)

    def header(self, name: str) -> str | None:
        """First response header called ``name`` (case-insensitive), or None."""
        lname = name.lower()
        for key, value in self.response_headers:
            if key.lower() == lname:
                return value
        return None
