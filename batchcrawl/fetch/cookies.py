"""Per-host cookie jars for the fetcher: bounded, in memory (as BUbiNG and Heritrix keep them).

A crawl keeps cookies per host because servers expect them: the common case is a redirect to the
page itself that sets a session cookie (``302 Location: /self`` + ``Set-Cookie``), which answers
200 only once the cookie comes back. Cookies are parsed, matched and expired by the standard
library's :mod:`http.cookiejar` (RFC 6265 with its default policy); this module adapts our
requests and header lists to it and bounds it: at most ``max_per_host`` cookies per host (RFC 6265
§6.1 asks for at least 50), none larger than :data:`MAX_COOKIE_BYTES`, and jars for at most
:data:`MAX_HOSTS` hosts (least recently used dropped). Cookies live as long as the fetcher (a
long-lived worker keeps them across rounds); they are not persisted in the crawl directory.
"""

from __future__ import annotations

import threading
import urllib.request
from collections import OrderedDict
from collections.abc import Iterable
from email.message import Message
from http.client import HTTPResponse
from http.cookiejar import CookieJar
from typing import cast

#: Largest cookie kept, name plus value, bytes (RFC 6265 §6.1: at least 4096).
MAX_COOKIE_BYTES = 4096
#: Hosts with a jar at once; the least recently used jar is dropped beyond this.
MAX_HOSTS = 10_000


class _Response:
    """What :meth:`CookieJar.extract_cookies` reads from a response: ``info().get_all``."""

    def __init__(self, headers: Iterable[tuple[str, str]]) -> None:
        self._msg = Message()
        for name, value in headers:
            if name.lower() in ("set-cookie", "set-cookie2"):
                self._msg[name] = value

    def info(self) -> Message:
        return self._msg


class HostCookieJars:
    """Cookie jars per host, bounded.

    Parameters
    ----------
    max_per_host
        Most cookies kept per host (``fetch.max_cookies_per_host``); 0 keeps none.

    Thread-safe (each :class:`~http.cookiejar.CookieJar` has its own lock).
    """

    def __init__(self, max_per_host: int) -> None:
        self._max = max_per_host
        self._jars: OrderedDict[str, CookieJar] = OrderedDict()
        self._lock = threading.Lock()

    def _jar(self, host: str, create: bool) -> CookieJar | None:
        with self._lock:
            jar = self._jars.get(host)
            if jar is None and create:
                jar = self._jars[host] = CookieJar()
                if len(self._jars) > MAX_HOSTS:
                    self._jars.popitem(last=False)
            if jar is not None:
                self._jars.move_to_end(host)
            return jar

    def header(self, url: str, host: str) -> str | None:
        """The ``Cookie`` header value for a request of ``url`` (on ``host``), or None."""
        jar = self._jar(host, create=False)
        if jar is None:
            return None
        request = urllib.request.Request(url)
        jar.add_cookie_header(request)
        return request.get_header("Cookie")

    def store(self, url: str, host: str, response_headers: Iterable[tuple[str, str]]) -> None:
        """Keep the cookies that ``response_headers`` (of a request of ``url``) set, within the
        bounds: oversized cookies are dropped, and beyond ``max_per_host`` the newest ones."""
        response = _Response(response_headers)
        if self._max == 0 or not response.info().keys():
            return
        jar = self._jar(host, create=True)
        assert jar is not None  # create=True always gives one
        before = {(c.domain, c.path, c.name) for c in jar}
        jar.extract_cookies(cast(HTTPResponse, response), urllib.request.Request(url))
        jar.clear_expired_cookies()
        kept = 0
        for c in sorted(jar, key=lambda c: (c.domain, c.path, c.name) not in before):
            if len(c.name) + len(c.value or "") > MAX_COOKIE_BYTES or kept >= self._max:
                jar.clear(c.domain, c.path, c.name)
            else:
                kept += 1

    def count(self, host: str) -> int:
        """Cookies held for ``host``."""
        jar = self._jar(host, create=False)
        return 0 if jar is None else len(jar)

    def forget(self, host: str) -> None:
        """Drop ``host``'s cookies."""
        with self._lock:
            self._jars.pop(host, None)
