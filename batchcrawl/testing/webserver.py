"""A loopback multi-host HTTP/1.1 server for tests, scripts and the demo (docs/design.md §10).

One listening socket on 127.0.0.1 serves many virtual hosts: requests are routed by their ``Host``
header (port stripped, lower-cased) to an *app*, a plain function
``app(host, path_with_query, request_headers) -> Response``. The server speaks HTTP/1.1 with
keep-alive, runs one thread per connection, logs every request (with the id of the connection that
carried it, so tests can see keep-alive reuse), and misbehaves on demand (``Response.behaviour``):
slow answers, resets, short bodies, endless bodies, gzip bombs, chunked transfer coding.

The shape follows Scrapy's ``tests/mockserver``: started once, readiness signalled by the listening
socket (no sleeps); the tests' ready-made apps (misbehaving endpoints, routes per host and path) are
in ``tests/servers/apps.py``.
"""

from __future__ import annotations

import itertools
import socket
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Values of :attr:`Response.behaviour` and what the server does for each.
BEHAVIOURS = {
    "slow": "sleep delay_s, then send the whole response",
    "trickle": "send the head, then the body in about 20 pieces with delay_s between them",
    "stall": "send the head and half the body, then sleep delay_s, then the rest",
    "reset": "close the connection with a TCP RST, without any response",
    "truncate": "announce Content-Length larger than the body, send the body, close",
    "huge": "stream the body over and over (no length, Connection: close) until the peer leaves",
    "gzip_bomb": "send a small gzip member inflating to many MB (Content-Encoding: gzip)",
    "chunked": "send the body with Transfer-Encoding: chunked, in pieces of ~1000 bytes",
    "close": "send the response with Connection: close and close the connection",
}

#: Bytes a gzip bomb inflates to.
GZIP_BOMB_BYTES = 64 * 1024 * 1024
#: Upper bound on bytes streamed by the "huge" behaviour (in case a peer never leaves).
HUGE_MAX_BYTES = 1024 * 1024 * 1024


@dataclass
class Response:
    """What an app answers for one request.

    Parameters
    ----------
    status
        HTTP status code.
    headers
        Header lines ``(name, value)`` in order. ``Content-Length`` is added unless given, the
        status has no body, or the behaviour decides otherwise.
    body
        Entity body bytes, sent as is (an app that sets ``Content-Encoding`` encodes it itself).
    behaviour
        None, or one of :data:`BEHAVIOURS`.
    delay_s
        Seconds used by the ``slow``, ``trickle`` and ``stall`` behaviours.

    Raises
    ------
    ValueError
        ``behaviour`` is not one of :data:`BEHAVIOURS`.
    """

    status: int = 200
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    behaviour: str | None = None
    delay_s: float = 0.0

    def __post_init__(self) -> None:
        if self.behaviour is not None and self.behaviour not in BEHAVIOURS:
            raise ValueError(
                f"Response.behaviour={self.behaviour!r} is unknown; use one of "
                f"{', '.join(sorted(BEHAVIOURS))} or None"
            )


App = Callable[[str, str, Mapping[str, str]], Response]


@dataclass(frozen=True, slots=True)
class RequestLogEntry:
    """One request as the server saw it.

    ``t_ms`` is wall-clock milliseconds (``time.time() * 1000``) when the request head was read;
    ``status`` is None when the server answered nothing (``reset``); ``conn_id`` numbers the TCP
    connection that carried the request (equal ids: a reused keep-alive connection).
    """

    host: str
    path: str
    t_ms: float
    status: int | None
    method: str
    conn_id: int = 0


class RequestLog:
    """Thread-safe, append-only list of :class:`RequestLogEntry`."""

    def __init__(self) -> None:
        self._entries: list[RequestLogEntry] = []
        self._lock = threading.Lock()

    def append(self, entry: RequestLogEntry) -> None:
        with self._lock:
            self._entries.append(entry)

    def entries(self) -> list[RequestLogEntry]:
        """A copy of every entry so far, in arrival order."""
        with self._lock:
            return list(self._entries)

    def mark(self) -> int:
        """Position to pass to :meth:`since` later (the current number of entries)."""
        with self._lock:
            return len(self._entries)

    def since(self, mark: int) -> list[RequestLogEntry]:
        """Entries appended after :meth:`mark` returned ``mark``."""
        with self._lock:
            return self._entries[mark:]

    def for_host(self, host: str) -> list[RequestLogEntry]:
        """Entries whose Host (port stripped) is ``host``."""
        with self._lock:
            return [e for e in self._entries if e.host == host]

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __iter__(self) -> Iterator[RequestLogEntry]:
        return iter(self.entries())

    def __getitem__(self, index: int) -> RequestLogEntry:
        with self._lock:
            return self._entries[index]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    # listen backlog: socketserver's default of 5 overflows when a crawler's fetch threads open
    # connections to many new hosts at once (a round's first contacts): the kernel drops the
    # SYNs and each client retries after 1 s, 3 s, ... (TCP's initial RTO), which looked like a
    # slow crawler. nginx's default is 511; the kernel caps it at net.core.somaxconn.
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], app: App) -> None:
        self.app = app
        self.log = RequestLog()
        self.stopping = threading.Event()
        self.conn_ids = itertools.count(1)
        self.accepted = 0
        self.open_sockets: set[socket.socket] = set()
        self.sockets_lock = threading.Lock()
        super().__init__(address, _Handler)

    def handle_error(self, request: object, client_address: object) -> None:
        """Peers that reset or vanish are expected here; anything else is printed."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.sockets_lock:
            self.conn_id = next(self.server.conn_ids)
            self.server.accepted = self.conn_id
        with self.server.sockets_lock:
            self.server.open_sockets.add(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        with self.server.sockets_lock:
            self.server.open_sockets.discard(self.connection)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        """Silence the stdlib's stderr logging; :class:`RequestLog` records requests."""

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._serve(send_body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve(send_body=False)

    def _serve(self, send_body: bool) -> None:
        host = (self.headers.get("Host") or "").strip().lower()
        if host.startswith("["):
            host = host[: host.find("]") + 1]
        else:
            host = host.rsplit(":", 1)[0] if ":" in host else host
        t_ms = time.time() * 1000.0
        try:
            resp = self.server.app(host, self.path, self.headers)
        except Exception as exc:  # noqa: BLE001 - a broken app must answer 500, not hang the test
            resp = Response(500, [("Content-Type", "text/plain")], repr(exc).encode())
        status = None if resp.behaviour == "reset" else resp.status
        self.server.log.append(
            RequestLogEntry(host, self.path, t_ms, status, self.command, self.conn_id)
        )
        try:
            _send(self, resp, send_body)
        except OSError:  # the client went away (timeouts, caps): normal in these tests
            self.close_connection = True

    # -- writing ---------------------------------------------------------------------------------

    def _head(self, resp: Response, extra: list[tuple[str, str]]) -> None:
        self.send_response_only(resp.status)
        for name, value in [*resp.headers, *extra]:
            self.send_header(name, value)
        self.end_headers()

    def _sleep(self, seconds: float) -> None:
        self.server.stopping.wait(seconds)


def _has(headers: list[tuple[str, str]], name: str) -> bool:
    lname = name.lower()
    return any(k.lower() == lname for k, _ in headers)


def _send(h: _Handler, resp: Response, send_body: bool) -> None:
    """Write ``resp`` on handler ``h`` according to its behaviour."""
    b = resp.behaviour
    body = resp.body if send_body else b""
    no_body = resp.status in (204, 304) or 100 <= resp.status < 200
    length = (
        []
        if no_body or _has(resp.headers, "Content-Length")
        else [("Content-Length", str(len(resp.body)))]
    )
    if b == "reset":
        h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        h.connection.close()
        h.close_connection = True
        return
    if b == "slow":
        h._sleep(resp.delay_s)
    if b == "truncate":
        h._head(resp, [("Content-Length", str(len(resp.body) * 2 + 100))])
        h.wfile.write(body)
        h.wfile.flush()
        h.close_connection = True
        return
    if b == "huge":
        h._head(resp, [("Connection", "close")])
        h.close_connection = True
        unit = resp.body or b"x" * 65536
        sent = 0
        while send_body and sent < HUGE_MAX_BYTES and not h.server.stopping.is_set():
            h.wfile.write(unit)
            sent += len(unit)
        return
    if b == "gzip_bomb":
        bomb = gzip_bomb()
        h._head(resp, [("Content-Encoding", "gzip"), ("Content-Length", str(len(bomb)))])
        if send_body:
            h.wfile.write(bomb)
        return
    if b == "chunked":
        h._head(resp, [("Transfer-Encoding", "chunked")])
        if send_body:
            for i in range(0, len(body), 1000):
                piece = body[i : i + 1000]
                h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            h.wfile.write(b"0\r\n\r\n")
        return
    if b == "close":
        h._head(resp, [*length, ("Connection", "close")])
        h.wfile.write(body)
        h.close_connection = True
        return
    h._head(resp, length)
    if b == "trickle":
        step = max(1, len(body) // 20)
        for i in range(0, len(body), step):
            h.wfile.write(body[i : i + step])
            h.wfile.flush()
            h._sleep(resp.delay_s)
        return
    if b == "stall":
        half = len(body) // 2
        h.wfile.write(body[:half])
        h.wfile.flush()
        h._sleep(resp.delay_s)
        h.wfile.write(body[half:])
        return
    h.wfile.write(body)


@lru_cache(maxsize=1)
def gzip_bomb(size_bytes: int = GZIP_BOMB_BYTES) -> bytes:
    """A one-member gzip of ``size_bytes`` zero bytes (about 1000:1; built once, in ~0.1 s).

    Each MiB is deflated once and its (identical) compressed block repeated: after a full flush
    the compressor state is reset, so the concatenation is one valid deflate stream.
    """
    mib = 1024 * 1024
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = c.compress(b"\0" * mib) + c.flush(zlib.Z_FULL_FLUSH)
    end = c.flush(zlib.Z_FINISH)
    blocks, rest = divmod(size_bytes, mib)
    if rest:  # a fresh compressor may continue the stream after a full flush
        c_rest = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        end = c_rest.compress(b"\0" * rest) + c_rest.flush(zlib.Z_FINISH)
    crc = 0
    zero_mib = b"\0" * mib
    for _ in range(blocks):
        crc = zlib.crc32(zero_mib, crc)
    crc = zlib.crc32(b"\0" * rest, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = struct.pack("<II", crc, size_bytes & 0xFFFFFFFF)
    return header + block * blocks + end + trailer


class MultiHostServer:
    """Threaded HTTP/1.1 keep-alive server on loopback, routing by ``Host`` to ``app``.

    Parameters
    ----------
    app
        ``app(host, path_with_query, request_headers) -> Response``; ``host`` is lower-case
        without port; ``request_headers`` is case-insensitive.
    host, port
        Address to listen on; port 0 picks a free ephemeral port (read it from :attr:`port`).

    Use as a context manager, or call :meth:`start` and :meth:`stop`. :meth:`start` returns once
    the socket listens: connections made after it are queued even before the first is accepted.
    """

    def __init__(self, app: App, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._log = RequestLog()

    def start(self) -> MultiHostServer:
        """Bind and listen (synchronously), then serve in a daemon thread. Returns ``self``."""
        if self._server is not None:
            raise RuntimeError("MultiHostServer.start() called twice; call stop() first")
        self._server = _Server(self._address, self.app)
        self._server.log = self._log
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"MultiHostServer:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    @property
    def port(self) -> int:
        """The TCP port listened on."""
        if self._server is None:
            raise RuntimeError("MultiHostServer is not started; call start() first")
        return self._server.server_address[1]

    def base_url(self, host_name: str) -> str:
        """``http://HOST_NAME:PORT`` for a virtual host (no trailing slash)."""
        return f"http://{host_name}:{self.port}"

    @property
    def connections(self) -> int:
        """TCP connections accepted (and handed to a handler) so far."""
        if self._server is None:
            return 0
        with self._server.sockets_lock:
            return self._server.accepted

    @property
    def log(self) -> RequestLog:
        """Every request served so far (thread-safe)."""
        return self._log

    def stop(self) -> None:
        """Stop serving, interrupt sleeping handlers and close open connections."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stopping.set()
        server.shutdown()
        server.server_close()
        with server.sockets_lock:
            socks = list(server.open_sockets)
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> MultiHostServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def politeness_violations(
    entries: Iterable[RequestLogEntry | Mapping[str, Any]],
    delay_s: Callable[[str], float],
    tolerance_ms: float = 1.0,
) -> list[tuple[str, float, float]]:
    """Pairs of consecutive requests to one host that arrived closer than that host's delay.

    Parameters
    ----------
    entries
        A server's request log (:class:`RequestLogEntry` or dicts with ``host`` and ``t_ms``).
    delay_s
        The least delay of a host in seconds (``host_delay_s``, or its capped robots.txt
        Crawl-delay if larger). A crawler counts the delay from the *end* of one response, so the
        gap between two request *arrivals* must be at least this long.
    tolerance_ms
        Clock granularity allowed, milliseconds.

    Returns
    -------
    list of (host, gap_ms, required_ms)
        One entry per violation; empty for a polite crawl.
    """
    times: dict[str, list[float]] = {}
    for e in entries:
        host, t_ms = (e["host"], e["t_ms"]) if isinstance(e, Mapping) else (e.host, e.t_ms)
        times.setdefault(host, []).append(t_ms)
    out = []
    for host, ts in times.items():
        ts.sort()
        need = delay_s(host) * 1000.0
        out.extend(
            (host, b - a, need)
            for a, b in zip(ts, ts[1:], strict=False)
            if b - a < need - tolerance_ms
        )
    return out
