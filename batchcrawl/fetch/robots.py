"""robots.txt: fetching, the access decision and the per-host cache (RFC 9309; IRLbot's RobotsCache).

Three parts with one job each:

* :func:`robots_policy_for` — a pure function from what the fetch of ``/robots.txt`` produced to the
  rules that apply (RFC 9309 §2.3.1): 2xx → parse the first ``max_bytes``; 4xx → allow all
  ("unavailable" in the RFC's words); 5xx, 429, or no response at all → disallow all, flagged
  ``unavailable`` so the caller fetches it again after ``retry_after_s`` (the RFC's "unreachable").
* :class:`RobotsCache` — rules per origin (scheme, host, port: RFC §2.3) with an expiry (at most
  ``cache_ttl_s``, RFC §2.4: 24 h) on an injected wall clock, a last good copy kept in force while
  the file is unreachable (RFC §2.4), convertible to and from the ``hosts`` table columns.
* :func:`fetch_robots` — fetch ``/robots.txt`` following up to ``max_redirects`` redirects (RFC
  §2.3.1.2), across hosts too, returning every hop's result so each can be archived in WARC.

Parsing and matching are protego's. Before handing the file to protego, :func:`normalize_robots_txt`
makes three RFC-driven adjustments (each covered by the RFC 9309 / google-robotstxt suites):
lines with unknown fields are dropped instead of ending a group (§2.2.4 "other records"); a
``User-agent`` value is cut to its product token ``[A-Za-z_-]+`` (§2.2.1); and in the query part of
rules and URLs ``%2F`` and ``/`` compare equal (§2.2.2, figure 4 row 2).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from protego import Protego

from batchcrawl.config import RobotsSection
from batchcrawl.errors import InvalidURL
from batchcrawl.fetch.contentsignal import content_signal
from batchcrawl.records import FetchResult
from batchcrawl.urls import redirect_target

#: Fields protego understands (and their spellings it tolerates); other lines are dropped.
KNOWN_FIELDS = frozenset(
    {
        "user-agent", "useragent", "user agent",
        "allow", "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw",
        "sitemap", "sitemaps", "site-map",
        "crawl-delay", "crawl delay", "request-rate", "request rate", "visit-time", "visit time",
        "host",
    }
)  # fmt: skip
_AGENT_FIELDS = frozenset({"user-agent", "useragent", "user agent"})
_RULE_FIELDS = frozenset(
    {"allow", "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"}
)
_PRODUCT_TOKEN = re.compile(r"[A-Za-z_-]+")
_QUERY_SLASH = re.compile(r"%2[Ff]")

#: Redirect statuses followed by :func:`fetch_robots`.
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})

PARSED = "parsed"
ALLOW_ALL = "allow_all"
UNAVAILABLE = "unavailable"


def _split_directive(line: str) -> tuple[str, str] | None:
    """``(field, value)`` of a robots.txt line whose field protego knows (field lower-cased,
    ``field: value`` or, as protego also accepts, ``field value``), or None."""
    name, sep, value = line.partition(":")
    if sep and name.strip().lower() in KNOWN_FIELDS:
        return name.strip().lower(), value.strip()
    words = line.split()
    for n in (2, 1):
        if len(words) >= n and " ".join(words[:n]).lower() in KNOWN_FIELDS:
            return " ".join(words[:n]).lower(), " ".join(words[n:])
    return None


def _query_slashes(value: str) -> str:
    """``%2F`` -> ``/`` after the first ``?`` (both spellings mean the same in a query)."""
    q = value.find("?")
    if q < 0 or "%2" not in value[q:]:
        return value
    return value[:q] + _QUERY_SLASH.sub("/", value[q:])


def normalize_robots_txt(text: str) -> str:
    """Rewrite a robots.txt text so that protego reads it as RFC 9309 says.

    Line for line: comments and lines whose field protego does not know become empty lines (they
    neither end a group nor count as rules); ``User-agent`` values become their product token
    (``FooBot/2.1 (+http://x)`` -> ``FooBot``; ``*`` stays ``*``); in ``Allow``/``Disallow``
    values, ``%2F`` in the query part becomes ``/``. Other lines are kept as they are.
    """
    out = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        directive = _split_directive(line) if line else None
        if directive is None:
            out.append("")
            continue
        field, value = directive
        if field in _AGENT_FIELDS:
            m = _PRODUCT_TOKEN.match(value)
            value = "*" if value.startswith("*") else (m.group(0) if m else value)
            line = f"{field}: {value}"
        elif field in _RULE_FIELDS:
            line = f"{field}: {_query_slashes(value)}"
        out.append(line)
    return "\n".join(out)


def decode_robots_body(body: bytes, max_bytes: int) -> str:
    """The first ``max_bytes`` of a robots.txt body as text (RFC 9309 §2.5).

    A line cut by the limit is dropped (a rule cut short could mean something else). A UTF-8 byte
    order mark is removed; bytes that are not UTF-8 become U+FFFD.
    """
    if len(body) > max_bytes:
        body = body[:max_bytes]
        cut = max(body.rfind(b"\n"), body.rfind(b"\r"))
        body = body[: cut + 1] if cut >= 0 else b""
    if body.startswith(b"\xef\xbb\xbf"):
        body = body[3:]
    return body.decode("utf-8", errors="replace")


class RobotsRules:
    """The robots.txt rules that apply to one host.

    Attributes
    ----------
    state
        ``"parsed"`` (2xx: the file's rules), ``"allow_all"`` (4xx, or too many redirects) or
        ``"unavailable"`` (5xx, 429 or a network failure: everything disallowed until the file
        can be fetched again; never to be cached as allow).
    status
        HTTP status of the final robots.txt response; None when there was no usable response.
    text
        The text parsed (decoded, capped at ``max_bytes``); None unless ``state == "parsed"``.
    """

    __slots__ = ("state", "status", "text", "_parser")

    def __init__(self, state: str, status: int | None, text: str | None = None) -> None:
        if state not in (PARSED, ALLOW_ALL, UNAVAILABLE):
            raise ValueError(
                f"RobotsRules state {state!r}: expected parsed, allow_all or unavailable"
            )
        self.state = state
        self.status = status
        self.text = text if state == PARSED else None
        self._parser = Protego.parse(normalize_robots_txt(self.text)) if self.text else None

    @property
    def unavailable(self) -> bool:
        """True when robots.txt could not be obtained (5xx/429/network): disallow all, retry."""
        return self.state == UNAVAILABLE

    def allowed(self, url: str, agent: str) -> bool:
        """May ``agent`` (a product token, e.g. ``crawl.robots_agent``) fetch ``url``?

        ``url`` is absolute and percent-encoded (canonical URLs are). ``/robots.txt`` itself is
        always allowed (RFC 9309 §2.2.2); the longest matching rule wins, ``Allow`` on a tie.
        """
        if self.state == UNAVAILABLE:
            return False
        if self._parser is None:
            return True
        return self._parser.can_fetch(_query_slashes(url), agent)

    def crawl_delay(self, agent: str) -> float | None:
        """``Crawl-delay`` of the group that applies to ``agent``, in seconds, or None.

        Not part of RFC 9309; the caller bounds it (``politeness.max_crawl_delay_s``)."""
        if self._parser is None:
            return None
        return self._parser.crawl_delay(agent)

    def content_signal(self, agent: str) -> str | None:
        """The ``Content-Signal`` that applies to ``agent`` (:mod:`batchcrawl.fetch.contentsignal`:
        ``"search=yes,ai-train=no"``), or None."""
        return content_signal(self.text, agent)

    @property
    def sitemaps(self) -> list[str]:
        """``Sitemap:`` URLs, in file order."""
        return list(self._parser.sitemaps) if self._parser is not None else []

    def __repr__(self) -> str:
        return f"RobotsRules(state={self.state!r}, status={self.status!r})"


def robots_policy_for(
    status: int | None,
    body: bytes | None,
    error: str | None,
    *,
    truncated: str | None = None,
    max_bytes: int = 512_000,
) -> RobotsRules:
    """The rules implied by one (final) robots.txt fetch (RFC 9309 §2.3.1).

    Parameters
    ----------
    status
        HTTP status of the last response of the redirect chain; None without a response.
    body
        Its decoded body (``FetchResult.body``); only read for 2xx.
    error
        ``FetchResult.error``: any error (timeout, reset, dns, refused, body_short, ...) means no
        usable file was obtained.
    truncated
        ``FetchResult.truncated``: ``"time"`` (an incomplete file) counts as a network failure;
        ``"length"`` is fine — only the first ``max_bytes`` are read anyway.
    max_bytes
        Bytes of the body parsed, ``robots.max_bytes`` (at least 500 KiB, RFC §2.5).

    Returns
    -------
    RobotsRules
        2xx → ``parsed``; 3xx (a chain that did not end: more than ``max_redirects`` hops, or no
        usable ``Location``) and 4xx except 429 → ``allow_all`` (RFC §2.3.1.2-3); 5xx, 429,
        other statuses, errors → ``unavailable`` (RFC §2.3.1.4: "MUST assume complete disallow";
        429 follows Google's reading of a rate limit as a server error).
    """
    if error is not None or status is None or truncated == "time":
        return RobotsRules(UNAVAILABLE, None)
    if 200 <= status < 300:
        return RobotsRules(PARSED, status, decode_robots_body(body or b"", max_bytes))
    if 300 <= status < 400 or (400 <= status < 500 and status != 429):
        return RobotsRules(ALLOW_ALL, status)
    return RobotsRules(UNAVAILABLE, status)


def rules_from_fetch(result: FetchResult, max_bytes: int = 512_000) -> RobotsRules:
    """:func:`robots_policy_for` applied to the last :class:`FetchResult` of a robots.txt chain."""
    return robots_policy_for(
        result.status, result.body, result.error, truncated=result.truncated, max_bytes=max_bytes
    )


def fetch_robots(
    fetcher: Any,
    scheme_host_port: str,
    *,
    max_redirects: int = 5,
    extra_headers: Mapping[str, str] | None = None,
) -> list[FetchResult]:
    """Fetch ``SCHEME://HOST[:PORT]/robots.txt``, following redirects (RFC 9309 §2.3.1.2).

    Parameters
    ----------
    fetcher
        A :class:`batchcrawl.fetch.fetcher.Fetcher` (anything with ``fetch(url, extra_headers=)``); each
        hop is resolved and checked against the address policy by it.
    scheme_host_port
        ``"http://h1.test:8080"`` (no path; a trailing slash is ignored).
    max_redirects
        Redirects followed (``robots.max_redirects``, 5): at most ``max_redirects + 1`` requests.

    Returns
    -------
    list of FetchResult
        Every hop in order (archive each in WARC); the last one decides, see
        :func:`rules_from_fetch`. A chain that still ends on a 3xx gave up (too many hops, a
        Location that is missing, invalid or not http(s)). Each hop's URL is
        :func:`~batchcrawl.urls.redirect_target` of the Location: raw octets percent-encoded as
        received, canonical.
    """
    url = scheme_host_port.rstrip("/") + "/robots.txt"
    chain = [fetcher.fetch(url, extra_headers=extra_headers)]
    while len(chain) <= max_redirects:
        last = chain[-1]
        location = last.header("Location") if last.status in REDIRECT_STATUSES else None
        if not location:
            break
        try:  # the octets as received, percent-encoded; canonical (no trailing host dot)
            url = redirect_target(location, last.url)
        except InvalidURL:  # not http(s), no host, does not parse: the chain ends on its 3xx
            break
        chain.append(fetcher.fetch(url, extra_headers=extra_headers))
    return chain


# -- the cache ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RobotsEntry:
    """Cached rules of one origin; times are wall-clock seconds since the epoch."""

    rules: RobotsRules
    fetch_time: float
    expires: float
    stale: bool = False  # a good copy kept in force while robots.txt is unreachable


def _to_datetime(seconds: float) -> datetime:
    """Naive UTC datetime (the ``TIMESTAMP_MS`` columns hold UTC without a zone)."""
    return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None)


def _to_seconds(value: Any) -> float:
    if isinstance(value, datetime):
        when: datetime = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return when.timestamp()
    if isinstance(value, int | float):
        return float(value) / 1000.0  # epoch milliseconds, as TIMESTAMP_MS integers
    raise ValueError(f"robots time {value!r}: expected a datetime or epoch milliseconds")


def robots_origin(url: str) -> str:
    """The origin a robots.txt applies to: ``scheme://host[:port]`` of ``url`` (RFC 9309 §2.3:
    "the rules MUST be valid only for the scheme, host and port"), lower-case, the scheme's
    default port dropped. ``http://h/`` and ``https://h:8443/`` have different files.

    Raises
    ------
    ValueError
        ``url`` has no scheme or host, or a bad port.
    """
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").rstrip(".")
    if not scheme or not host:
        raise ValueError(f"robots origin of {url!r}: expected an absolute URL with a host")
    port = parts.port
    if ":" in host:
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


_DEFAULT_PORTS = {"http": 80, "https": 443}


class RobotsCache:
    """robots.txt rules per origin with expiry (IRLbot's RobotsCache; RFC 9309 §2.3, §2.4).

    Entries are keyed by :func:`robots_origin` (scheme, host, port). Per host, the methods that
    read and write the ``hosts`` table (:meth:`to_row`, :meth:`load_row`, :meth:`forget`,
    :meth:`latest`) work on the host's most recently fetched origin: one row per host keeps one
    origin (``robots_origin``); a host's other origins are fetched again when next needed.

    When robots.txt becomes unreachable (5xx, 429, network) after a successful fetch (2xx or
    4xx), the last good copy stays in force (RFC 9309 §2.4: a cached copy may be used past 24 h
    while the file is unreachable; §2.3.1.4) until it is ``stale_max_s`` past its expiry, and is
    re-checked every ``retry_after_s`` meanwhile; only then does "unreachable" disallow all.

    Parameters
    ----------
    robots
        ``[robots]`` section: ``cache_ttl_s`` (parsed and allow-all entries; RFC: at most 24 h),
        ``retry_after_s`` (``unavailable`` entries, which disallow everything meanwhile),
        ``stale_max_s`` and ``max_bytes``.
    agent
        Product token (``crawl.robots_agent``) for the ``crawl_delay_s`` column.
    clock
        Wall clock in seconds since the epoch (``time.time``; injected in tests). Wall time,
        because expiry times are stored in the ``hosts`` table and read by later rounds.

    Thread-safe.
    """

    def __init__(
        self, robots: RobotsSection, agent: str, clock: Callable[[], float] = time.time
    ) -> None:
        self._ttl_s = robots.cache_ttl_s
        self._retry_s = robots.retry_after_s
        self._stale_s = robots.stale_max_s
        self._max_bytes = robots.max_bytes
        self._agent = agent
        self._clock = clock
        self._entries: dict[str, RobotsEntry] = {}  # origin -> live entry
        self._good: dict[str, RobotsEntry] = {}  # origin -> last good entry, kept past expiry
        self._origins: dict[str, set[str]] = {}  # host -> its origins with an entry
        self._lock = threading.Lock()

    def put(self, origin: str, rules: RobotsRules, fetch_time: float | None = None) -> RobotsEntry:
        """Remember ``rules`` for ``origin`` (:func:`robots_origin`) fetched at ``fetch_time``
        (default: now) and return the entry in force, which is the last good copy when ``rules``
        are ``unavailable`` and that copy is still within ``stale_max_s`` of its expiry."""
        t = self._clock() if fetch_time is None else fetch_time
        with self._lock:
            good = self._good.get(origin)
            until = good.fetch_time + self._ttl_s + self._stale_s if good is not None else t
            if good is not None and rules.unavailable and t < until:
                entry = RobotsEntry(
                    good.rules, good.fetch_time, min(t + self._retry_s, until), True
                )
            else:
                ttl = self._retry_s if rules.unavailable else self._ttl_s
                entry = RobotsEntry(rules, t, t + min(ttl, self._ttl_s))
            self._set(origin, entry)
        return entry

    def hold(self, origin: str, until: float) -> None:
        """Keep ``origin``'s live ``unavailable`` entry until ``until`` (epoch seconds), the end of
        its host's back-off (:mod:`batchcrawl.fetch.holds`): robots.txt is not fetched again
        before. Other entries are left as they are."""
        with self._lock:
            entry = self._entries.get(origin)
            if entry is not None and entry.rules.unavailable and not entry.stale:
                self._entries[origin] = RobotsEntry(entry.rules, entry.fetch_time, until)

    def _set(self, origin: str, entry: RobotsEntry) -> None:
        """Store ``entry`` (lock held)."""
        self._entries[origin] = entry
        if not entry.rules.unavailable:
            self._good[origin] = entry
        self._origins.setdefault(_host_of_origin(origin), set()).add(origin)

    def get(self, origin: str) -> RobotsRules | None:
        """Rules for ``origin``, or None when unknown or expired (then fetch robots.txt again)."""
        entry = self.entry(origin)
        return entry.rules if entry is not None else None

    def entry(self, origin: str) -> RobotsEntry | None:
        """The live :class:`RobotsEntry` of ``origin``; expired entries are dropped (a good one
        is kept aside for a later unreachable fetch)."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(origin)
            if entry is not None and entry.expires <= now:
                del self._entries[origin]
                entry = None
        return entry

    def latest(self, host: str) -> RobotsEntry | None:
        """The live entry of ``host``'s most recently fetched origin, or None."""
        with self._lock:
            origins = list(self._origins.get(host, ()))
        live = [e for e in map(self.entry, origins) if e is not None]
        return max(live, key=lambda e: e.fetch_time, default=None)

    def _latest_origin(self, host: str) -> str | None:
        with self._lock:
            origins = list(self._origins.get(host, ()))
        live = [(e.fetch_time, o) for o in origins if (e := self.entry(o)) is not None]
        return max(live)[1] if live else None

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def forget(self, host: str) -> None:
        """Drop every origin of ``host`` (a worker that no longer serves the host)."""
        with self._lock:
            for origin in self._origins.pop(host, ()):
                self._entries.pop(origin, None)
                self._good.pop(origin, None)

    def to_row(self, host: str) -> dict[str, Any]:
        """The ``hosts`` columns for ``host``'s most recently fetched live origin (all None when
        nothing live is cached): ``robots_origin``, ``robots_status``, ``robots_txt``,
        ``robots_fetch_time``, ``robots_expires`` (naive UTC datetimes), ``crawl_delay_s``,
        ``sitemaps``, ``content_signal``. A stale copy in force keeps its own fetch time and status."""
        origin = self._latest_origin(host)
        entry = self.entry(origin) if origin is not None else None
        if entry is None:
            return dict.fromkeys(
                ("robots_origin", "robots_status", "robots_txt", "robots_fetch_time",
                 "robots_expires", "crawl_delay_s", "sitemaps", "content_signal")
            )  # fmt: skip
        rules = entry.rules
        return {
            "robots_origin": origin,
            "robots_status": rules.status,
            "robots_txt": rules.text,
            "robots_fetch_time": _to_datetime(entry.fetch_time),
            "robots_expires": _to_datetime(entry.expires),
            "crawl_delay_s": rules.crawl_delay(self._agent),
            "sitemaps": rules.sitemaps,
            "content_signal": rules.content_signal(self._agent),
        }

    def load_row(self, host: str, row: Mapping[str, Any]) -> RobotsEntry | None:
        """Restore ``host``'s origin from its ``hosts`` row (as written by :meth:`to_row`).

        A row without ``robots_origin`` (written before robots.txt was scoped by origin: which
        origin it came from is unknown), without ``robots_fetch_time`` or already past
        ``robots_expires`` restores no live entry (returns None): robots.txt is fetched again. A
        good copy past its expiry is still kept aside for :meth:`put` (RFC 9309 §2.4).
        ``robots_status`` NULL means the last fetch failed (``unavailable``).
        """
        origin = row.get("robots_origin")
        if origin is None or row.get("robots_fetch_time") is None:
            return None
        if row.get("robots_expires") is None:
            return None
        expires = _to_seconds(row["robots_expires"])
        status = row.get("robots_status")
        text = row.get("robots_txt")
        body = text.encode("utf-8") if text is not None else None
        rules = robots_policy_for(
            None if status is None else int(status), body,
            "network" if status is None else None, max_bytes=self._max_bytes,
        )  # fmt: skip
        entry = RobotsEntry(rules, _to_seconds(row["robots_fetch_time"]), expires)
        now = self._clock()
        with self._lock:
            if expires > now:
                self._set(origin, entry)
                return entry
            if not rules.unavailable and now < entry.fetch_time + self._ttl_s + self._stale_s:
                self._good[origin] = entry  # expired, but kept for an unreachable refetch
                self._origins.setdefault(_host_of_origin(origin), set()).add(origin)
        return None


def _host_of_origin(origin: str) -> str:
    """``h`` of ``scheme://h[:port]`` (``[v6]`` without brackets)."""
    rest = origin.partition("://")[2]
    if rest.startswith("["):
        return rest[1 : rest.index("]")]
    return rest.rpartition(":")[0] if ":" in rest else rest
