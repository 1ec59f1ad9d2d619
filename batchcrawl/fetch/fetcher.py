"""HTTP fetching for the fetch threads: one GET, observed raw enough for WARC (docs/design.md §6).

The fetcher connects to the address *we* resolved and the :class:`~batchcrawl.fetch.resolver.AddressPolicy`
accepted — never letting an HTTP library resolve the name itself — and sends ``Host: name[:port]``.
It keeps idle keep-alive connections per ``(scheme, host, port)`` (urllib3's connection class, the
HTTP stack beneath requests), follows no redirects (a 3xx is returned: the crawl turns its target
into a new frontier entry), and bounds every fetch three ways: a connect timeout, a read timeout on
each ``recv``, and a whole-fetch deadline enforced by one watchdog thread per :class:`Fetcher` that
shuts the socket down when a fetch overruns — a trickling server cannot hold a thread.

The body is read raw (content-encoded, ``decode_content=False``) and decoded incrementally by
:class:`~batchcrawl.fetch.decode.ContentDecoder`, so ``max_body_bytes`` caps the wire bytes, every
decoding stage and the decoded body alike: a decompression bomb, stacked codings or an endless
stream of empty gzip members stop at the cap (``truncated="length"``), and decoding stops at the
fetch's deadline like the socket does (``truncated="time"``). Fetch threads are blocking, as
BUbiNG argues (§4.3). Response header blocks are parsed by :mod:`batchcrawl.fetch.headerblock`
(``http.client``'s response with a parser that skips ``email.parser`` for plain field lines).
"""

from __future__ import annotations

import dataclasses
import heapq
import http.client
import re
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NewConnectionError,
    ReadTimeoutError,
)
from urllib3.util import is_connection_dropped

from batchcrawl.config import CrawlSection, FetchSection
from batchcrawl.errors import InvalidURL
from batchcrawl.fetch.cookies import HostCookieJars
from batchcrawl.fetch.decode import CORRUPT, ContentDecoder, UnsupportedCoding
from batchcrawl.fetch.headerblock import Response
from batchcrawl.fetch.resolver import AddressPolicy, DNSError, Resolver
from batchcrawl.records import FetchResult

#: Bytes asked for per read of the response body.
READ_CHUNK_BYTES = 65536
#: Idle keep-alive connections kept per (scheme, host, port), and in all.
MAX_IDLE_PER_HOST = 2
MAX_IDLE_TOTAL = 256

#: What may not be sent in a request line: the URL must be percent-encoded ASCII (RFC 9112 §3.2).
_UNSENDABLE = re.compile(r"[^\x21-\x7e]")

ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
ACCEPT_ENCODING = "gzip, deflate, br"


# -- whole-fetch deadlines ---------------------------------------------------------------------------


#: Disarmed timers the fetch watchdog's heap may hold beyond its armed ones before it is rebuilt.
WATCHDOG_SLACK = 64


class _Timer:
    __slots__ = ("deadline", "sock", "fired", "done")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.sock: socket.socket | None = None
        self.fired = False
        self.done = False

    def __lt__(self, other: _Timer) -> bool:
        return self.deadline < other.deadline


class _Watchdog:
    """One thread that shuts down the socket of every fetch past its deadline.

    A fetch that ends disarms its timer, which stays in the heap (lazy deletion) until it reaches
    the top or the heap is rebuilt: the heap is rebuilt without the disarmed timers once they are
    more than half of it (and more than :data:`WATCHDOG_SLACK`), so it holds at most about twice
    the fetches in flight, not every fetch of the last ``fetch.total_timeout_s`` seconds (~30,000
    timers per worker at 500 pages/s and 60 s). A disarmed timer lets go of its socket at once."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: list[_Timer] = []
        self._armed = 0  # timers in the heap not disarmed
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, deadline: float) -> _Timer:
        timer = _Timer(deadline)
        with self._cv:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="batchcrawl-fetch-watchdog", daemon=True
                )
                self._thread.start()
            heapq.heappush(self._heap, timer)
            self._armed += 1
            if self._heap[0] is timer:
                self._cv.notify()
        return timer

    def attach(self, timer: _Timer, sock: socket.socket | None) -> None:
        """Let the watchdog shut ``sock`` down; if the deadline has passed already, do it now."""
        with self._cv:
            timer.sock = sock
            if timer.fired and sock is not None:
                _shutdown(sock)

    def disarm(self, timer: _Timer) -> None:
        """After this returns the watchdog never touches the timer's socket again."""
        with self._cv:
            if timer.done:
                return
            timer.done = True
            timer.sock = None
            if not timer.fired:  # still in the heap, now as a disarmed timer
                self._armed -= 1
                heap = self._heap
                if len(heap) > 2 * self._armed + WATCHDOG_SLACK:
                    self._heap = [t for t in heap if not t.done]
                    heapq.heapify(self._heap)

    def heap_size(self) -> int:
        """Timers in the heap, disarmed ones included (for tests and memory probes)."""
        with self._cv:
            return len(self._heap)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()

    def _run(self) -> None:
        with self._cv:
            while not self._closed:
                while self._heap and self._heap[0].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cv.wait()
                    continue
                wait = self._heap[0].deadline - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                timer = heapq.heappop(self._heap)
                timer.fired = True
                self._armed -= 1  # out of the heap before its fetch disarms it
                if timer.sock is not None:
                    _shutdown(timer.sock)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


# -- the fetcher ---------------------------------------------------------------------------------------


class _HTTPConnection(HTTPConnection):
    response_class = Response  # header blocks parsed without email.parser when plain


class _HTTPSConnection(HTTPSConnection):
    response_class = Response


class _Stale(Exception):
    """A reused keep-alive connection failed before any response byte: retry on a new one."""


#: ``[fetch]`` settings a round reads afresh (:meth:`batchcrawl.fetch.worker.FetchWorker.run`, the
#: round driver) and the fetcher never does: the fetch phase's time limit (lowered per round under a
#: deadline, :meth:`batchcrawl.pipeline.Deadline.round_cfg`) and its tail cut. A change of any other ``[fetch]`` field rebuilds the fetcher (:func:`http_settings`),
#: so a setting added later reaches the fetcher without being listed anywhere.
PER_ROUND_FETCH_FIELDS = frozenset({
    "time_limit_s", "tail_rate_ratio", "tail_capacity_ratio", "throughput_window_s",
    "tail_idle_s",
})  # fmt: skip


def http_settings(fetch: FetchSection, crawl: CrawlSection) -> tuple[Any, ...]:
    """What a :class:`Fetcher` may be built from: every ``[fetch]`` field but
    :data:`PER_ROUND_FETCH_FIELDS`, and ``crawl.user_agent``. A worker rebuilds its fetcher
    (closing its keep-alive connections and cookie jars) when these change, and only then: not for
    a new ``fetch.time_limit_s`` or tail setting of the next round."""
    kept = tuple(
        (f.name, getattr(fetch, f.name))
        for f in dataclasses.fields(fetch)
        if f.name not in PER_ROUND_FETCH_FIELDS
    )
    return kept, crawl.user_agent


class Fetcher:
    """Fetch URLs over HTTP/1.1 with keep-alive, to addresses the policy accepts.

    Parameters
    ----------
    fetch
        ``[fetch]`` section: ``connect_timeout_s``, ``read_timeout_s``, ``total_timeout_s``
        (seconds), ``max_body_bytes`` (bytes kept of the wire body, of every decoding stage and
        of the decoded body) and ``max_cookies_per_host`` (per-host cookie jars,
        :mod:`batchcrawl.fetch.cookies`: ``Set-Cookie`` is kept and sent back to that host).
    crawl
        ``[crawl]`` section: ``user_agent`` is sent with every request.
    resolver, policy
        Name resolution (:class:`~batchcrawl.fetch.resolver.Resolver`) and the address policy
        (:class:`~batchcrawl.fetch.resolver.AddressPolicy`), consulted before any connection.

    Thread-safe: any number of fetch threads may call :meth:`fetch` at once. Call :meth:`close`
    (or use as a context manager) to close idle connections and stop the watchdog thread.
    """

    def __init__(
        self,
        fetch: FetchSection,
        crawl: CrawlSection,
        resolver: Resolver,
        policy: AddressPolicy,
    ) -> None:
        self._connect_s = min(fetch.connect_timeout_s, fetch.total_timeout_s)
        self._read_s = fetch.read_timeout_s
        self._total_s = fetch.total_timeout_s
        self._cap = fetch.max_body_bytes
        self._resolver = resolver
        self._policy = policy
        self._base_headers = (
            ("User-Agent", crawl.user_agent),
            ("Accept", ACCEPT),
            ("Accept-Encoding", ACCEPT_ENCODING),
            ("Connection", "keep-alive"),
        )
        self._idle: OrderedDict[tuple[str, str, int, str], list[HTTPConnection]] = OrderedDict()
        self._idle_count = 0
        self._lock = threading.Lock()
        self._watchdog = _Watchdog()
        self.cookies = HostCookieJars(fetch.max_cookies_per_host)

    # -- connection reuse --------------------------------------------------------------------------

    def _take(self, key: tuple[str, str, int, str]) -> HTTPConnection | None:
        while True:
            with self._lock:
                conns = self._idle.get(key)
                if not conns:
                    return None
                conn = conns.pop()
                if not conns:
                    del self._idle[key]  # no empty lists: eviction below takes from the oldest
                self._idle_count -= 1
            if not is_connection_dropped(conn):
                return conn
            conn.close()

    def _give(self, key: tuple[str, str, int, str], conn: HTTPConnection) -> None:
        evicted: list[HTTPConnection] = []
        with self._lock:
            conns = self._idle.setdefault(key, [])
            self._idle.move_to_end(key)
            if len(conns) >= MAX_IDLE_PER_HOST:
                evicted.append(conns.pop(0))
                self._idle_count -= 1
            conns.append(conn)
            self._idle_count += 1
            while self._idle_count > MAX_IDLE_TOTAL:
                old_key, old = next(iter(self._idle.items()))
                evicted.append(old.pop(0))
                self._idle_count -= 1
                if not old:
                    del self._idle[old_key]
        for c in evicted:
            c.close()

    def _new_conn(self, scheme: str, host: str, ip: str, port: int) -> HTTPConnection:
        if scheme == "https":
            return _HTTPSConnection(
                ip, port, timeout=self._connect_s, server_hostname=host, assert_hostname=host
            )
        return _HTTPConnection(ip, port, timeout=self._connect_s)

    def close(self) -> None:
        """Close idle connections and stop the watchdog. The fetcher must not be used after."""
        with self._lock:
            conns = [c for cs in self._idle.values() for c in cs]
            self._idle.clear()
            self._idle_count = 0
        for c in conns:
            c.close()
        self._watchdog.close()

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- one fetch -------------------------------------------------------------------------------------

    def fetch(self, url: str, *, extra_headers: Mapping[str, str] | None = None) -> FetchResult:
        """GET ``url`` once (no redirects followed) and report what happened.

        Parameters
        ----------
        url
            Absolute ``http``/``https`` URL, normally canonical; sent with its path and query as
            given.
        extra_headers
            Headers added to (or replacing, by name) the defaults: ``User-Agent``, ``Accept``,
            ``Accept-Encoding: gzip, deflate, br``, ``Connection: keep-alive``. ``Host`` is always
            the URL's host (and port if given).

        Returns
        -------
        FetchResult
            Never raises for network trouble: ``error`` is ``dns``, ``refused`` (policy; no socket
            was opened), ``connect``, ``timeout`` (connect, or a read stalled ``read_timeout_s``),
            ``reset``, ``bad_response``, ``body_short`` (fewer bytes than Content-Length or a cut
            chunked body; the body is not complete) or ``decode``. ``truncated`` is ``"length"``
            when the wire body, a decoding stage or the decoded body went past ``max_body_bytes``
            and ``"time"`` when the whole-fetch deadline cut the body or its decoding (what
            arrived is kept), also for a body delimited by the connection's close.

        Raises
        ------
        InvalidURL
            ``url`` is not absolute http(s) with a host, or holds characters that cannot be sent
            (non-ASCII, space, controls).
        """
        started = time.time()
        try:
            parts = urlsplit(url)
            scheme, host, port = parts.scheme, parts.hostname, parts.port
        except ValueError as exc:
            raise InvalidURL(f"cannot fetch {url!r}: {exc}") from None
        if scheme not in ("http", "https") or not host:
            raise InvalidURL(f"cannot fetch {url!r}: expected an absolute http(s) URL with a host")
        if _UNSENDABLE.search(url):
            raise InvalidURL(
                f"cannot fetch {url!r}: non-ASCII, space or control characters; pass the URL "
                "through batchcrawl.urls.canonicalize (or redirect_target for a Location)"
            )
        if port is None:
            port = 443 if scheme == "https" else 80
        result = FetchResult(url=url, started=started)
        try:
            ip = self._resolver.resolve(host)
        except DNSError:
            result.error = "dns"
            result.finished = time.time()
            return result
        if self._policy.check(ip) is not None:
            result.error = "refused"
            result.finished = time.time()
            return result

        target = parts.path or "/"
        if parts.query or url.endswith("?"):
            target += "?" + parts.query
        headers = {"Host": parts.netloc.rpartition("@")[2]}
        headers.update(self._base_headers)
        if extra_headers:
            for name, value in extra_headers.items():
                for have in [h for h in headers if h.lower() == name.lower()]:
                    del headers[have]
                headers[name] = value
        cookie = self.cookies.header(url, host)
        if cookie and not any(h.lower() == "cookie" for h in headers):
            headers["Cookie"] = cookie
        result.request_line = f"GET {target} HTTP/1.1"
        result.request_headers = list(headers.items())
        result.ip = ip

        key = (scheme, host, port, ip)
        deadline = time.monotonic() + self._total_s
        conn = self._take(key)
        try:
            if conn is not None:
                try:
                    self._exchange(result, conn, key, target, headers, deadline, reused=True)
                    return result
                except _Stale:
                    result.status = result.reason = result.http_version = None
                    result.response_headers = []
            conn = self._new_conn(scheme, host, ip, port)
            self._exchange(result, conn, key, target, headers, deadline, reused=False)
            return result
        finally:
            result.finished = time.time()
            self.cookies.store(url, host, result.response_headers)

    def _exchange(
        self,
        result: FetchResult,
        conn: HTTPConnection,
        key: tuple[str, str, int, str],
        target: str,
        headers: dict[str, str],
        deadline: float,
        reused: bool,
    ) -> None:
        """Send the request on ``conn``, read the response into ``result``; give ``conn`` back
        to the idle pool only when the response was read completely and may be reused."""
        timer = self._watchdog.arm(deadline)
        keep = False
        resp = None
        try:
            if conn.sock is None:
                conn.timeout = self._connect_s
                conn.connect()
            self._watchdog.attach(timer, conn.sock)
            conn.timeout = self._read_s  # urllib3's request() sets it on the socket
            try:
                conn.request(
                    "GET", target, headers=headers, preload_content=False, decode_content=False
                )
                resp = conn.getresponse()
            except (http.client.RemoteDisconnected, ConnectionError) as exc:
                if reused and not timer.fired:
                    raise _Stale from exc
                raise
            result.status = resp.status
            result.reason = resp.reason
            result.http_version = "HTTP/1.0" if resp.version == 10 else "HTTP/1.1"
            result.response_headers = list(resp.headers.iteritems())
            keep = self._read_body(result, resp, timer, deadline)
        except _Stale:
            raise
        except NewConnectionError:
            result.error = "timeout" if timer.fired else "connect"
        except (ConnectTimeoutError, ReadTimeoutError, TimeoutError):
            result.error = "timeout"
        except ConnectionError:
            result.error = "timeout" if timer.fired else "reset"
        except (http.client.HTTPException, HTTPError, OSError):
            result.error = "timeout" if timer.fired else "bad_response"
        finally:
            self._watchdog.disarm(timer)
            if keep and not timer.fired and conn.sock is not None:
                self._give(key, conn)
            else:
                if resp is not None:
                    resp.close()
                conn.close()

    def _read_body(self, result: FetchResult, resp: Any, timer: _Timer, deadline: float) -> bool:
        """Fill ``raw_body``/``body``/``truncated``/``error``; True if ``conn`` is reusable.

        Both the wire bytes (``raw_body``) and every decoding stage stop at ``max_body_bytes``
        (``truncated="length"``); the deadline, whether it cut the socket or the decoding,
        gives ``truncated="time"``.
        """
        cap = self._cap
        try:
            decoder = ContentDecoder(
                resp.headers.get("Content-Encoding") or "", limit=cap, deadline=deadline
            )
        except UnsupportedCoding:
            decoder = None
            result.error = "decode"
        decoding = decoder is not None and not decoder.identity
        raw: list[bytes] = []
        out: list[bytes] = []
        raw_size = size = 0
        truncated = None
        complete = False
        try:
            while truncated is None and not complete:
                chunk = resp.read1(min(READ_CHUNK_BYTES, cap + 1 - raw_size), decode_content=False)
                if not chunk:
                    complete = not timer.fired  # a deadline shutdown also ends the stream
                    truncated = "time" if timer.fired else None
                elif raw_size + len(chunk) > cap:  # the wire cap
                    chunk = chunk[: cap - raw_size]
                    truncated = "length"
                if chunk:
                    raw.append(chunk)
                    raw_size += len(chunk)
                if not decoding or decoder is None:  # decoding implies a decoder
                    continue
                for piece in decoder.feed(chunk) if chunk else decoder.finish():
                    if size + len(piece) > cap:
                        out.append(piece[: cap - size])
                        size = cap
                        truncated = "length"
                        break
                    out.append(piece)
                    size += len(piece)
                truncated = decoder.truncated or truncated
        except CORRUPT:
            result.error = "decode"
        except (HTTPError, http.client.HTTPException, OSError) as exc:
            if timer.fired:
                truncated = "time"
            elif isinstance(exc, ReadTimeoutError | TimeoutError):
                result.error = "timeout"
            else:
                result.error = "body_short"
        result.truncated = truncated
        result.raw_body = raw[0] if len(raw) == 1 else b"".join(raw)
        if result.error == "decode":
            result.body = b""
        elif not decoding:
            result.body = result.raw_body
        else:
            result.body = b"".join(out)
        return complete and result.error is None and truncated is None
