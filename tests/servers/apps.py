"""Ready-made apps for the loopback server of the tests (:class:`batchcrawl.testing.webserver.MultiHostServer`):
content registered per host and path (:class:`RoutingApp`) and misbehaving endpoints
(:class:`MisbehavingApp`: slow, reset, truncated, endless answers, gzip bombs, encodings, status
codes). Only tests use them; the demo's sample web (:mod:`batchcrawl.testing.sampleweb`) is an
app of its own.
"""

from __future__ import annotations

import gzip
import threading
import zlib
from collections.abc import Mapping
from functools import lru_cache
from urllib.parse import parse_qsl, urlsplit

import brotli

from batchcrawl.testing.webserver import App, Response


def _html(body: str, status: int = 200, charset: str = "utf-8") -> Response:
    return Response(status, [("Content-Type", f"text/html; charset={charset}")], body.encode())


class RoutingApp:
    """An app with content registered per ``(host, path)``, falling back to another app.

    ``path`` is matched with its query string. Registration is thread-safe; tests sharing one
    server should use distinct host names.
    """

    def __init__(self, fallback: App | None = None) -> None:
        self._routes: dict[tuple[str, str], Response | App] = {}
        self._lock = threading.Lock()
        self.fallback = fallback

    def add(self, host: str, path: str, response: Response | App) -> None:
        """Serve ``response`` (or call ``response(host, path, headers)``) at ``host`` + ``path``."""
        with self._lock:
            self._routes[(host.lower(), path)] = response

    def remove(self, host: str, path: str) -> None:
        """Forget a route (no error if absent)."""
        with self._lock:
            self._routes.pop((host.lower(), path), None)

    def __call__(self, host: str, path: str, headers: Mapping[str, str]) -> Response:
        with self._lock:
            route = self._routes.get((host, path))
        if route is None:
            if self.fallback is None:
                return _html("<h1>not found</h1>", 404)
            return self.fallback(host, path, headers)
        return route if isinstance(route, Response) else route(host, path, headers)


#: robots.txt answered by :class:`MisbehavingApp` per first host label.
ROBOTS_VARIANTS = {
    "robots-500": "503 Service Unavailable",
    "robots-404": "404 Not Found",
    "robots-403": "403 Forbidden",
    "robots-redirect": "3 hops of 301 to robots-target, which disallows /private",
    "robots-cross": "302 to robots-disallow on the same suffix and port (another host)",
    "robots-loop": "302 to itself forever",
    "robots-slow": "answers after ?delay= or 5 s",
    "robots-reset": "TCP reset",
    "robots-disallow": "Disallow: / for every agent",
    "robots-delay": "Crawl-delay: 3 and a Sitemap line",
}
DEFAULT_ROBOTS = b"User-agent: *\nDisallow: /private\n"


class MisbehavingApp:
    """Ready-made misbehaving routes on every host (host names only choose robots.txt variants).

    Paths (query parameters in brackets): ``/page`` (HTML with links), ``/slow`` [delay],
    ``/trickle`` [delay], ``/stall`` [delay], ``/reset``, ``/truncated``, ``/huge``,
    ``/gzip-bomb``, ``/chunked`` [size], ``/gzip``, ``/br``, ``/deflate-zlib``, ``/deflate-raw``
    [size], ``/redirect-loop`` (302 to itself), ``/redirect`` [to], ``/wrong-charset``
    (header says latin-1, body is UTF-8), ``/meta-charset`` (no header charset, meta disagrees
    with the bytes), ``/status`` [code], ``/robots.txt`` (see :data:`ROBOTS_VARIANTS`).
    """

    def __call__(self, host: str, path: str, headers: Mapping[str, str]) -> Response:
        parts = urlsplit(path)
        q = dict(parse_qsl(parts.query))
        delay = float(q.get("delay", 5.0))
        size = int(q.get("size", 20_000))
        route = parts.path
        if route == "/robots.txt":
            return self.robots(host, q, headers)
        text = _text(size)
        if route == "/page":
            return _html(
                "<html><head><title>page</title></head><body>"
                '<a href="/page?n=1">one</a> <a href="http://other.test/">other</a>'
                ' <a href="https://example.com/">outside</a> <a rel="nofollow" href="/nf">nf</a>'
                "</body></html>"
            )
        simple = {
            "/slow": Response(200, [], text, "slow", delay),
            "/trickle": Response(200, [], text, "trickle", delay),
            "/stall": Response(200, [], text, "stall", delay),
            "/reset": Response(200, [], text, "reset"),
            "/truncated": Response(200, [], text, "truncate"),
            "/huge": Response(200, [("Content-Type", "text/plain")], b"", "huge"),
            "/gzip-bomb": Response(200, [("Content-Type", "text/html")], b"", "gzip_bomb"),
            "/chunked": Response(200, [("Content-Type", "text/plain")], text, "chunked"),
        }
        if route in simple:
            return simple[route]
        encoders = {
            "/gzip": ("gzip", gzip.compress),
            "/br": ("br", brotli.compress),
            "/deflate-zlib": ("deflate", zlib.compress),
            "/deflate-raw": ("deflate", _raw_deflate),
        }
        if route in encoders:
            name, encode = encoders[route]
            return Response(
                200, [("Content-Type", "text/plain"), ("Content-Encoding", name)], encode(text)
            )
        if route == "/redirect-loop":
            return Response(302, [("Location", path)])
        if route == "/redirect":
            return Response(301, [("Location", q.get("to", "/page"))])
        if route == "/status":
            return _html(f"<p>status {q.get('code', '500')}</p>", int(q.get("code", 500)))
        if route == "/wrong-charset":
            return Response(
                200,
                [("Content-Type", "text/html; charset=iso-8859-1")],
                "<html><body><p>Grüße, café — 東京</p></body></html>".encode(),
            )
        if route == "/meta-charset":
            return Response(
                200,
                [("Content-Type", "text/html")],
                '<html><head><meta charset="windows-1252"></head><body>naïve 東京</body></html>'.encode(),
            )
        return _html("<h1>not found</h1>", 404)

    def robots(
        self, host: str, q: Mapping[str, str], headers: Mapping[str, str] | None = None
    ) -> Response:
        """robots.txt for ``host`` (by its first label, see :data:`ROBOTS_VARIANTS`)."""
        label = host.split(".", 1)[0]
        plain = [("Content-Type", "text/plain")]
        if label == "robots-500":
            return Response(503, plain, b"unavailable")
        if label == "robots-404":
            return Response(404, plain, b"not found")
        if label == "robots-403":
            return Response(403, plain, b"forbidden")
        if label == "robots-redirect":
            hop = int(q.get("hop", 0))
            if hop < 3:
                return Response(301, [("Location", f"/robots.txt?hop={hop + 1}")])
            return Response(200, plain, b"User-agent: *\nDisallow: /private\n")
        if label == "robots-cross":
            suffix = host.split(".", 1)[1] if "." in host else "test"
            port = (headers or {}).get("Host", "").rpartition(":")[2]
            authority = f"robots-disallow.{suffix}" + (f":{port}" if port.isdigit() else "")
            return Response(302, [("Location", f"http://{authority}/robots.txt")])
        if label == "robots-loop":
            return Response(302, [("Location", "/robots.txt")])
        if label == "robots-slow":
            return Response(200, plain, DEFAULT_ROBOTS, "slow", float(q.get("delay", 5.0)))
        if label == "robots-reset":
            return Response(200, plain, DEFAULT_ROBOTS, "reset")
        if label == "robots-disallow":
            return Response(200, plain, b"User-agent: *\nDisallow: /\n")
        if label == "robots-delay":
            return Response(
                200,
                plain,
                b"User-agent: *\nCrawl-delay: 3\nDisallow: /private\n"
                b"Sitemap: http://robots-delay.test/sitemap.xml\n",
            )
        return Response(200, plain, DEFAULT_ROBOTS)


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


@lru_cache(maxsize=16)
def _text(size: int) -> bytes:
    """``size`` bytes of plain ASCII text (deterministic)."""
    line = b"The quick brown fox jumps over the lazy dog. 0123456789\n"
    return (line * (size // len(line) + 1))[:size]
