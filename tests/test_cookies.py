"""Per-host bounded cookie jars (issue 14, item 2): a self-redirect that sets a cookie answers 200
once the cookie comes back; cookies stay with their host and within their bounds."""

from __future__ import annotations

import re

import fsspec
import pytest
from fetch_helpers import fetch_item as _item
from fsspec.implementations.dirfs import DirFileSystem
from raw_server import RawServer

from batchcrawl.fetch.cookies import HostCookieJars
from batchcrawl.fetch.fetcher import Fetcher
from batchcrawl.fetch.resolver import AddressPolicy, Resolver
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import Outcome


def cookie_gate(conn, _release, head: bytes) -> None:
    """``/many``: sets 80 cookies; ``/robots.txt``: 404; else 200 with ``session=ok`` sent, else a
    302 to the same URL setting it."""
    path = head.split(b" ", 2)[1]
    if path == b"/robots.txt":
        conn.sendall(b"HTTP/1.1 404 No\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    elif path == b"/many":
        sets = b"".join(b"Set-Cookie: c%d=%d; Path=/\r\n" % (i, i) for i in range(80))
        conn.sendall(
            b"HTTP/1.1 200 OK\r\n" + sets + b"Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
    elif re.search(rb"\r\nCookie:[^\r]*\bsession=ok\b", head):
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 4\r\n"
            b"Connection: close\r\n\r\npage"
        )
    else:
        conn.sendall(
            b"HTTP/1.1 302 Found\r\nLocation: " + path + b"\r\nSet-Cookie: session=ok; Path=/\r\n"
            b"Content-Length: 0\r\nConnection: close\r\n\r\n"
        )


@pytest.fixture
def server():
    s = RawServer(cookie_gate)
    yield s
    s.close()


def test_self_redirect_setting_a_cookie_gets_the_page(server, test_config, tmp_path):
    """Before: the cookie was never sent back, so the chain ended as a redirect (loop)."""
    url = f"http://gate.test:{server.port}/self"
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(test_config, 0, fs, seed_hosts=["gate.test"], seed_domains=["gate.test"])
    try:
        run = w.run([_item(url)], round=1)
    finally:
        w.close()
    (row,) = run.fetched
    assert (row["outcome"], row["fetch_status"]) == (Outcome.OK, 200)
    pages = [h for h in server.heads if h.startswith(b"GET /self ")]
    assert len(pages) == 2 and b"Cookie: session=ok" in pages[1]


def test_cookies_stay_with_their_host_and_within_bounds(server, test_config):
    cfg = test_config.replace(fetch={"max_cookies_per_host": 20})
    net = cfg.network
    with Fetcher(cfg.fetch, cfg.crawl, Resolver(net), AddressPolicy(net)) as f:
        f.fetch(f"http://one.test:{server.port}/many")
        assert f.cookies.count("one.test") == 20
        f.fetch(f"http://two.test:{server.port}/x")
        f.fetch(f"http://one.test:{server.port}/x")
    heads = {h.split(b"\r\nHost: ")[1].split(b":")[0]: h for h in server.heads if b"/x " in h}
    assert b"Cookie:" not in heads[b"two.test"]  # the first request to two.test: no cookie of one
    sent = re.search(rb"\r\nCookie: ([^\r]*)", heads[b"one.test"]).group(1)
    assert len(sent.split(b"; ")) == 20


def test_jar_drops_oversized_cookies_and_keeps_none_at_zero():
    jars = HostCookieJars(5)
    big = "x" * 5000
    jars.store("http://a.test/", "a.test", [("Set-Cookie", f"big={big}"), ("Set-Cookie", "s=1")])
    assert jars.header("http://a.test/p", "a.test") == "s=1"
    assert jars.header("http://b.test/p", "b.test") is None
    none = HostCookieJars(0)
    none.store("http://a.test/", "a.test", [("Set-Cookie", "s=1")])
    assert none.header("http://a.test/", "a.test") is None
