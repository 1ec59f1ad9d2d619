"""Redirect targets from raw ``Location`` octets (issue 14, item 1): percent-encoded as received,
for page and robots.txt redirects alike; no Location can raise out of a fetch or kill a thread."""

from __future__ import annotations

import fsspec
import pytest
from fetch_helpers import fetch_item as _item
from fsspec.implementations.dirfs import DirFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raw_server import RawServer

from batchcrawl.errors import InvalidURL
from batchcrawl.fetch.fetcher import Fetcher
from batchcrawl.fetch.resolver import AddressPolicy, Resolver
from batchcrawl.fetch.robots import fetch_robots, rules_from_fetch
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import Outcome
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize, domain_of, redirect_target

ARABIC = "اعلام".encode()  # raw UTF-8 octets: D8 A7 D8 B9 D9 84 D8 A7 D9 85
ARABIC_ESCAPED = "%D8%A7%D8%B9%D9%84%D8%A7%D9%85"


def as_received(octets: bytes) -> str:
    """A header value as http.client hands it over: the octets decoded as Latin-1."""
    return octets.decode("latin-1")


@pytest.mark.parametrize(
    ("octets", "expected"),
    [
        (b"/fa/news/1815565/" + ARABIC, "http://a.test/fa/news/1815565/" + ARABIC_ESCAPED),
        (b"/robots file.txt", "http://a.test/robots%20file.txt"),
        (b"  /x?q=a b  ", "http://a.test/x?q=a%20b"),
        (b"http://b\xc3\xbccher.test./p", "http://xn--bcher-kva.test/p"),
        (b"/already%D8%A7", "http://a.test/already%D8%A7"),
    ],
)
def test_location_octets_are_percent_encoded_as_received(octets, expected):
    assert redirect_target(as_received(octets), "http://a.test/dir/page") == expected


@pytest.mark.parametrize("octets", [b"", b"   ", b"mailto:x@y.test", b"http://", b"ftp://a.test/"])
def test_unusable_locations_raise_invalid_url(octets):
    with pytest.raises(InvalidURL):
        redirect_target(as_received(octets), "http://a.test/")


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80))
def test_any_location_octets_give_a_sendable_canonical_url_or_invalid_url(octets):
    try:
        url = redirect_target(as_received(octets), "http://a.test/d/p?q")
    except InvalidURL:
        return
    assert url.isascii() and " " not in url and url == canonicalize(url)


def test_fetcher_refuses_an_unsendable_url_with_invalid_url(test_config):
    cfg = test_config
    with Fetcher(cfg.fetch, cfg.crawl, Resolver(cfg.network), AddressPolicy(cfg.network)) as f:
        for url in ("http://a.test/robots file.txt", "http://a.test/\u0627", "http://a.test/\x01"):
            with pytest.raises(InvalidURL, match="canonicalize"):
                f.fetch(url)


class RobotsRedirect:
    """/robots.txt -> 301 with ``location`` octets; the target -> a robots.txt; else 404."""

    def __init__(self) -> None:
        self.location = b"/"
        self.target_path = b""

    def __call__(self, conn, _release, head: bytes) -> None:
        path = head.split(b" ", 2)[1]
        if path == b"/robots.txt":
            conn.sendall(
                b"HTTP/1.1 301 Moved\r\nLocation: " + self.location + b"\r\n"
                b"Content-Length: 0\r\nConnection: close\r\n\r\n"
            )
        elif path == self.target_path:
            body = b"User-agent: *\nDisallow: /private\n"
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
        else:
            conn.sendall(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )


@pytest.fixture(scope="module")
def robots_server():
    app = RobotsRedirect()
    server = RawServer(app)
    yield app, server
    server.close()


@pytest.fixture(scope="module")
def module_fetcher():
    from batchcrawl.config import loopback_test_config

    cfg = loopback_test_config(fetch={"read_timeout_s": 5.0, "total_timeout_s": 10.0})
    with Fetcher(cfg.fetch, cfg.crawl, Resolver(cfg.network), AddressPolicy(cfg.network)) as f:
        yield f


@pytest.mark.parametrize(
    ("octets", "sent_path"),
    [
        (b"/fa/" + ARABIC + b"/robots.txt", b"/fa/" + ARABIC_ESCAPED.encode() + b"/robots.txt"),
        (b"/robots file.txt", b"/robots%20file.txt"),
    ],
)
def test_robots_redirect_to_raw_octets_is_followed_percent_encoded(
    robots_server, module_fetcher, octets, sent_path
):
    """Before: raw UTF-8 killed the fetch thread (UnicodeEncodeError); a raw space was refused by
    the HTTP client and the host became robots-unavailable."""
    app, server = robots_server
    app.location, app.target_path = octets, sent_path
    chain = fetch_robots(module_fetcher, f"http://robots.test:{server.port}")
    assert [r.status for r in chain] == [301, 200]
    assert chain[1].url.endswith(sent_path.decode())
    assert server.heads[-1].startswith(b"GET " + sent_path + b" HTTP/1.1")
    rules = rules_from_fetch(chain[-1])
    assert rules.state == "parsed"
    assert not rules.allowed(f"http://robots.test:{server.port}/private/x", "batchcrawl")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=60).filter(lambda b: b"\r" not in b and b"\n" not in b))
def test_any_robots_location_ends_the_chain_with_an_outcome(robots_server, module_fetcher, octets):
    """Whatever octets the Location holds, fetch_robots returns a chain (never raises) whose every
    hop URL is sendable ASCII, and the last hop gives rules."""
    app, server = robots_server
    app.location, app.target_path = octets, b"-"
    chain = fetch_robots(module_fetcher, f"http://robots.test:{server.port}", max_redirects=2)
    assert 1 <= len(chain) <= 3
    assert all(r.url.isascii() and " " not in r.url for r in chain)
    assert rules_from_fetch(chain[-1]).state in ("parsed", "allow_all", "unavailable")


def test_worker_records_page_redirect_targets_as_received(web, host_name, test_config, tmp_path):
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(404))
    location = as_received(b"/fa/news/1815565/" + ARABIC)
    web.app.add(host_name, "/old", Response(301, [("Location", location)]))
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(test_config, 0, fs, seed_hosts=[host_name], seed_domains=[domain_of(host_name)])
    try:
        run = w.run([_item(base + "/old")], round=1)
    finally:
        w.close()
    (row,) = run.fetched
    assert row["outcome"] == Outcome.REDIRECT
    assert row["fetch_redirect"] == base + "/fa/news/1815565/" + ARABIC_ESCAPED
    assert run.links["dst_url"] == [row["fetch_redirect"]]
