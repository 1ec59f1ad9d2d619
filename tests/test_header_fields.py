"""Issue 31, item 1: no value from the network can fail a round. Header fields are typed and
validated at the fetch boundary (batchcrawl.fetch.fields); arbitrary values go through a real
fetch (loopback server, in-process fetch worker), the update step and a commit; If-Modified-Since
is always an IMF-fixdate; a Link rel=canonical header fills fetched.canonical_url."""

from __future__ import annotations

import datetime as dt
import itertools
import tempfile
import time

import fsspec
import pyarrow as pa
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from round_helpers import fetched_rows, frontier_rows, new_crawl, round_config, serve

from batchcrawl.config import to_toml
from batchcrawl.fetch.directives import MAX_DELAY_S, retry_after_s
from batchcrawl.fetch.fields import entity_tag, link_canonical, media_type, response_fields
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.frontier.inject import inject
from batchcrawl.frontier.update import update
from batchcrawl.httpdate import http_date, imf_fixdate
from batchcrawl.records import FetchItem
from batchcrawl.round import run_rounds
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key

IMF = "Fri, 01 Nov 2019 20:00:00 GMT"
HTML = [("Content-Type", "text/html; charset=utf-8")]


# -- the value functions ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        IMF,
        "Friday, 01-Nov-19 20:00:00 GMT",
        "Fri Nov  1 20:00:00 2019",
        "fri, 01 nov 2019 20:00:00 gmt",
    ],
)
def test_every_http_date_form_becomes_the_imf_fixdate(value):
    assert imf_fixdate(http_date(value)) == IMF


@pytest.mark.parametrize(
    "value",
    ["", "yesterday", "Fri, 31 Feb 2019 20:00:00 GMT", "Fri, 01 Nov 2019 24:00:00 GMT",
     "Fri, 01 Nov 0099 20:00:00 GMT", "Fri, 01 Nov 2019 20:00:00 +0200", "1572638400"],
)  # fmt: skip
def test_what_is_no_http_date_is_none(value):
    assert http_date(value) is None


def test_retry_after_reads_ascii_digits_only_and_never_raises():
    assert retry_after_s("120", 0.0) == 120.0
    assert retry_after_s("\u00b2", 0.0) is None  # isdigit() but not delay-seconds (int() raised)
    assert retry_after_s("1" * 400, 0.0) == MAX_DELAY_S  # float(int()) overflowed
    assert retry_after_s("Fri Nov  1 20:00:00 2019", http_date(IMF) - 30) == 30.0


def test_link_header_canonical():
    base = "http://a.test/en/page-a"
    assert link_canonical(['</en/page-b>; rel="canonical"'], base) == "http://a.test/en/page-b"
    two = '<http://a.test/x,y>; rel="next", </c>; title="a, b"; rel="alternate Canonical"'
    assert link_canonical([two], base) == "http://a.test/c"
    assert link_canonical(['</p>; rel="next"', "<mailto:x@a.test>; rel=canonical"], base) is None
    assert link_canonical(["garbage, <", '"<x>; rel=canonical'], base) is None


def test_validators_and_media_types():
    assert entity_tag('W/"a-1"') == 'W/"a-1"' and entity_tag("opaque123") == "opaque123"
    assert entity_tag('"a" "b"') is None and entity_tag("a b") is None and entity_tag(" ") is None
    assert media_type("Text/HTML; charset=x") == "text/html"
    assert media_type("html") is None and media_type("text/html/x") is None


def test_response_fields_reject_with_reasons():
    got = response_fields(
        [("Content-Type", "html"), ("ETag", "a b"), ("Last-Modified", "Fri Nov  1 20:00:00 2019"),
         ("Date", "now"), ("Retry-After", "\u00b2"), ("Link", '</c>; rel="canonical"')],
        status=503, url="http://a.test/p", agent="batchcrawl", received=0.0,
        max_retry_after_s=60.0,
    )  # fmt: skip
    assert got.rejected == ("content_type", "etag", "date", "retry_after")
    assert (got.content_mime_type, got.etag, got.retry_after_s) == (None, None, None)
    assert got.last_modified == IMF and got.canonical_url == "http://a.test/c"


# -- arbitrary header values through fetch -> update -> commit ---------------------------------------
#: What a server can put in a header value (http.client reads values as Latin-1; no CR or LF).
VALUE = st.text(st.characters(min_codepoint=0, max_codepoint=0xFF, exclude_characters="\r\n"),
                max_size=60)  # fmt: skip
DATEISH = st.one_of(
    VALUE,
    st.integers(-(2**40), 2**40).map(str),
    st.floats(allow_nan=True).map(str),
    st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)).map(
        lambda d: d.strftime("%a, %d %b %Y %H:%M:%S GMT")
    ),
    st.sampled_from([IMF, "Friday, 01-Nov-19 20:00:00 GMT", "Fri Nov  1 20:00:00 2019"]),
)
FUZZED = {
    "Retry-After": DATEISH,
    "Last-Modified": DATEISH,
    "Date": DATEISH,
    "ETag": VALUE,
    "Content-Type": VALUE,
    "Content-Length": st.one_of(VALUE, st.integers(-5, 10**20).map(str)),
    "Location": VALUE,
    "Link": st.one_of(VALUE, VALUE.map(lambda v: f"<{v}>; rel=canonical")),
    "X-Robots-Tag": VALUE,
}
RESPONSE = st.fixed_dictionaries(
    {"status": st.sampled_from([200, 301, 304, 404, 429, 500, 503])},
    optional={name: s for name, s in FUZZED.items()},
)
ROBOTS_LINES = st.lists(
    st.one_of(
        VALUE,
        st.tuples(
            st.sampled_from(
                ["User-agent", "Disallow", "Allow", "Crawl-delay", "Sitemap", "Content-Signal", "x"]
            ),
            VALUE,
        ).map(": ".join),
    ),
    max_size=8,
)


def _sendable(v: str) -> str:
    """What BaseHTTPRequestHandler can put on the wire as a header value (no leading space:
    http.client would read it as a continuation line of the previous field)."""
    return v.lstrip(" \t")


_hosts = itertools.count()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_arbitrary_header_values_never_fail_the_round(web, test_config, tmp_path_factory):
    cfg = test_config.replace(
        politeness={
            "host_delay_s": 0.0,
            "max_crawl_delay_s": 0.0,
            "max_retry_after_s": 0.05,
            "rate_limit_backoff_s": 0.01,
            "max_rate_limit_backoff_s": 0.05,
        },
        frontier={"buckets": 2},
    )
    fs = DirFileSystem(str(tmp_path_factory.mktemp("fz")), fsspec.filesystem("file"))

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(RESPONSE, min_size=1, max_size=4), ROBOTS_LINES)
    def check(responses, robots):
        host = f"fz{next(_hosts)}.test"
        base = web.base_url(host)
        body = "\n".join(_sendable(x) for x in robots).encode("latin-1")
        web.app.add(host, "/robots.txt", Response(200, [("Content-Type", "text/plain")], body))
        urls = []
        for i, r in enumerate(responses):
            headers = [(k, _sendable(v)) for k, v in r.items() if k != "status"]
            web.app.add(host, f"/p{i}", Response(r["status"], headers, b"<p>x</p>", "close"))
            urls.append(canonicalize(f"{base}/p{i}"))
        w = FetchWorker(cfg, 0, fs, seed_hosts={host}, seed_domains=[domain_of(host)])
        try:
            run = w.run([_item(u) for u in urls], round=1)
        finally:
            w.close()
        fetched = pa.Table.from_pylist(run.fetched, schema=schemas.schema("fetched"))  # as spill
        assert fetched.num_rows >= len(urls)
        assert all(isinstance(r["retry_after_s"], float | None) for r in run.fetched)
        with tempfile.TemporaryDirectory() as d:
            crawl = CrawlDir.create(d + "/c", to_toml(cfg), 2)
            inject(crawl, cfg, urls)
            m = crawl.manifest()
            done = update(
                crawl,
                m,
                1,
                fetched,
                pa.table(run.links, schema=schemas.schema("links")),
                cfg,
                time.time(),
            )
            crawl.commit(m, {"frontier": done.listing}, {"step": "test"}, round=1)
            assert crawl.manifest().generation == m.generation + 1
            assert done.summary.fetched["applied"] >= len(urls)

    check()


def _item(url: str) -> FetchItem:
    host = host_of(url)
    return FetchItem(url_key(url), url, host, domain_of(host), 0)


# -- end to end: rounds over a server sending every old date form, a Link header, bad values ------
class OldFormsSite:
    """``/`` links to ``/asc`` (Last-Modified in asctime), ``/rfc850`` (RFC 850 form), ``/doc``
    (a PDF whose canonical URL is given by a Link header) and ``/bad`` (malformed values of every
    validated field). Request headers are logged per path."""

    def __init__(self) -> None:
        self.seen: dict[str, list[dict[str, str]]] = {}

    def __call__(self, host, path, headers):
        self.seen.setdefault(path, []).append({k.lower(): v for k, v in headers.items()})
        if path == "/robots.txt":
            return Response(404, [("Content-Type", "text/plain")], b"")
        if path == "/":
            links = "".join(f'<a href="{p}">x</a>' for p in ("/asc", "/rfc850", "/doc", "/bad"))
            return Response(200, HTML, links.encode())
        if path == "/asc":
            return Response(200, [*HTML, ("Last-Modified", "Fri Nov  1 20:00:00 2019")], b"a")
        if path == "/rfc850":
            return Response(200, [*HTML, ("Last-Modified", "Friday, 01-Nov-19 20:00:00 GMT")], b"r")
        if path == "/doc":
            link = ("Link", '</en/page-b>; rel="canonical"')
            return Response(200, [("Content-Type", "application/pdf"), link], b"%PDF-1.4")
        if path == "/bad":
            bad = [("Content-Type", "html"), ("ETag", "a b"), ("Last-Modified", "\u00b2"),
                   ("Date", "soon"), ("Link", "<"), ("X-Robots-Tag", ":::")]  # fmt: skip
            return Response(200, bad, b"<p>bad</p>")
        return Response(404, HTML, b"")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_if_modified_since_is_imf_fixdate_and_link_canonical_is_kept(tmp_path):
    site = OldFormsSite()
    cfg = round_config()
    with serve(site) as server:
        base = server.base_url("old.test")
        url = {p: canonicalize(base + p) for p in ("/", "/asc", "/rfc850", "/doc", "/bad")}
        crawl = new_crawl(tmp_path / "crawl", cfg, [url["/"]])
        first = run_rounds(crawl.url, cfg, 2)
        assert all(s["generation"] for s in first)
        inject(crawl, cfg, [url["/asc"], url["/rfc850"]], refetch=True)
        later = run_rounds(crawl.url, cfg, 1)
        assert later[0]["generation"]
    for p in ("/asc", "/rfc850"):
        assert site.seen[p][-1]["if-modified-since"] == IMF  # RFC 9110 §5.6.7
    got = {r["url"]: r for r in fetched_rows(crawl)}
    assert got[url["/asc"]]["last_modified"] == IMF
    assert got[url["/doc"]]["canonical_url"] == base + "/en/page-b"
    bad = got[url["/bad"]]
    assert bad["header_errors"] == "content_type,etag,last_modified,date"
    assert (bad["content_mime_type"], bad["etag"], bad["last_modified"]) == (None, None, None)
    assert bad["outcome"] == "ok"
    rows = {r["url"]: r for r in frontier_rows(crawl)}
    assert rows[url["/asc"]]["last_modified"] == IMF and rows[url["/bad"]]["status"] == "fetched"
    # rejections are counted by field in the round summaries and in `status` (issue 31)
    from collections import Counter

    from batchcrawl.store.status import crawl_status

    by_rows = Counter(f for r in got.values() for f in (r["header_errors"] or "").split(",") if f)
    assert by_rows["last_modified"] >= 1
    by_rounds = Counter()
    for s in [*first, *later]:
        by_rounds.update(s["header_rejected"])
    assert by_rounds == by_rows
    assert crawl_status(crawl)["fetched"]["header_rejected"] == dict(by_rows)


# -- end to end: raw malformed header blocks through real rounds ---------------------------------
RAW = {
    "/nocolon": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nno colon here\r\n"
    b"Content-Length: 5\r\n\r\nhello",
    "/twolength": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello",
    "/negative": b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nhello",
    "/controls": b'HTTP/1.1 200 OK\r\nETag: "a\x00b"\r\nLast-Modified: \xff\xfe\r\n'
    b"Date: \x01\r\nContent-Type: \x7f/\x80\r\n\r\nhello",
    "/fold": b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Robots-Tag: noindex\r\n"
    b"  , nofollow\r\n\r\n<p>folded</p>",
    "/utf8": b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=\xc3\xa9\r\n"
    b"Link: <\xc3\xa9/\xe2\x80\x8b>; rel=canonical\r\n\r\n<p>x</p>",
    "/longheader": b"HTTP/1.1 200 OK\r\nX-Long: " + b"x" * 70000 + b"\r\n\r\nhello",
    "/status999": b"HTTP/1.1 999 Whatever\r\nContent-Length: 2\r\n\r\nhi",
    "/retry": b"HTTP/1.1 503 Busy\r\nRetry-After: \xb2\r\nContent-Length: 0\r\n\r\n",
    "/location": b"HTTP/1.1 301 Moved\r\nLocation: http://[::1\r\nContent-Length: 0\r\n\r\n",
}


def _raw_answer(conn, release, head: bytes) -> None:
    path = head.split(b" ", 2)[1].decode("latin-1")
    if path == "/robots.txt":
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    elif path == "/":
        body = "".join(f'<a href="{p}">x</a>' for p in RAW).encode()
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
    else:
        conn.sendall(RAW.get(path, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_round_over_malformed_header_blocks_commits(tmp_path):
    from raw_server import RawServer

    server = RawServer(_raw_answer)
    try:
        cfg = round_config(fetch={"shards": 1}, round={"workers": 1})
        base = f"http://raw.test:{server.port}"
        crawl = new_crawl(tmp_path / "crawl", cfg, [canonicalize(base + "/")])
        summaries = run_rounds(crawl.url, cfg, 2)
    finally:
        server.close()
    assert len(summaries) == 2 and all(s["generation"] for s in summaries)
    got = {r["url"][len(base) :]: r for r in fetched_rows(crawl)}
    assert set(RAW) <= set(got)  # every malformed answer has its row
    assert not [p for p, r in got.items() if r["error"] == "internal"]  # no exception path taken
    assert got["/retry"]["outcome"] == "server_error" and got["/retry"]["retry_after_s"] is None
    assert got["/controls"]["header_errors"] == "content_type,etag,last_modified,date"
    rows = {r["url"]: r for r in frontier_rows(crawl)}
    assert all(canonicalize(base + p) in rows for p in RAW)
