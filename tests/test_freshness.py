"""Freshness (issue 12): refetch schedule, conditional GET, server-not-modified revisits,
X-Robots-Tag, rel=canonical and Retry-After, against a loopback web whose pages change between
rounds."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from email.utils import formatdate

import fsspec
import pytest
from fetch_helpers import fetch_item as _item
from fsspec.implementations.dirfs import DirFileSystem
from round_helpers import fetched_rows, frontier_rows, new_crawl, round_config, serve
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.fetch.warc import NOT_MODIFIED_PROFILE, REVISIT_PROFILE
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.frontier.inject import inject
from batchcrawl.round import run_rounds
from batchcrawl.store import sql
from batchcrawl.testing.webserver import MultiHostServer, Response
from batchcrawl.urls import canonicalize, domain_of

HTML = [("Content-Type", "text/html; charset=utf-8")]
LAST_MODIFIED = "Wed, 01 May 2024 12:00:00 GMT"


class ChangingSite:
    """One host, four pages; ``epoch`` flips ``/a``. ``/`` has an ETag (and answers its 304 with a
    stray Content-Length), ``/a`` an ETag that changes with its content, ``/b`` only
    Last-Modified, ``/c`` no validators. Request headers are logged per path."""

    def __init__(self) -> None:
        self.epoch = 0
        self.seen: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()

    def __call__(self, host, path, headers):
        with self._lock:
            self.seen.append((path, {k.lower(): v for k, v in headers.items()}))
        inm, ims = headers.get("If-None-Match"), headers.get("If-Modified-Since")
        if path == "/robots.txt":
            return Response(404, [("Content-Type", "text/plain")], b"")
        if path == "/":
            if inm == '"home"':
                return Response(304, [("ETag", '"home"'), ("Content-Length", "1234")])
            body = b'<a href="/a">a</a><a href="/b">b</a><a href="/c">c</a>'
            return Response(200, [*HTML, ("ETag", '"home"')], body)
        if path == "/a":
            tag = f'"a{self.epoch}"'
            if inm == tag:
                return Response(304, [("ETag", tag)])
            return Response(200, [*HTML, ("ETag", tag)], f"<p>version {self.epoch}</p>".encode())
        if path == "/b":
            if self.epoch == 2:  # gone for a while, with a body of its own
                return Response(404, HTML, b"<p>not here for now</p>")
            if ims == LAST_MODIFIED:
                return Response(304, [])
            return Response(200, [*HTML, ("Last-Modified", LAST_MODIFIED)], b"<p>b stays</p>")
        if path == "/c":
            return Response(200, HTML, b"<p>c stays, no validators</p>")
        return Response(404, HTML, b"")

    def headers_of(self, path: str) -> list[dict[str, str]]:
        return [h for p, h in self.seen if p == path]


def _records(crawl, rnd):
    out = []
    assert crawl.fs.glob(crawl.path(f"warc/round={rnd}/*.warc.gz"))
    for f in crawl.fs.glob(crawl.path(f"warc/round={rnd}/*.warc.gz")):
        with crawl.fs.open(f, "rb") as fh:
            for rec in ArchiveIterator(fh):
                out.append((rec.rec_type, dict(rec.rec_headers.headers)))
    return out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_refetch_sends_validators_and_304s_become_server_not_modified_revisits(tmp_path):
    site = ChangingSite()
    cfg = round_config(recrawl={"policy": "adaptive", "interval_s": 86400.0})
    with serve(site) as server:
        base, port = server.base_url("f.test"), server.port
        urls = {p: canonicalize(base + p) for p in ("/", "/a", "/b", "/c")}
        crawl = new_crawl(tmp_path / "crawl", cfg, [urls["/"]])
        first = run_rounds(crawl.url, cfg, 5)
        assert not any(h for p in urls for h in site.headers_of(p) if "if-none-match" in h)
        before = {r["url"]: r for r in frontier_rows(crawl)}
        assert all(before[u]["fetch_interval_s"] == 86400.0 for u in urls.values())
        assert all(before[u]["next_fetch_time"] is not None for u in urls.values())
        site.epoch = 1  # /a changes
        summary = inject(crawl, cfg, list(urls.values()), refetch=True)
        assert summary["refetch"] == 4
        run_rounds(crawl.url, cfg, 1)
    rnd = len(first) + 1
    # the refetches carried the stored validators, and only those
    assert site.headers_of("/")[-1]["if-none-match"] == '"home"'
    assert site.headers_of("/a")[-1]["if-none-match"] == '"a0"'
    last_b = site.headers_of("/b")[-1]
    assert last_b["if-modified-since"] == LAST_MODIFIED and "if-none-match" not in last_b
    assert not {"if-none-match", "if-modified-since"} & set(site.headers_of("/c")[-1])
    got = {r["url"]: r for r in fetched_rows(crawl) if r["round"] == rnd}
    assert {u: got[u]["outcome"] for u in urls.values()} == {
        urls["/"]: "not_modified",
        urls["/a"]: "ok",
        urls["/b"]: "not_modified",
        urls["/c"]: "ok",
    }
    assert got[urls["/"]]["content_length"] == 0 and got[urls["/"]]["content_digest"] is None
    after = {r["url"]: r for r in frontier_rows(crawl)}
    # 304: the stored digest and capture time kept; adaptive interval grown; /a shrunk
    for p in ("/", "/b"):
        assert after[urls[p]]["content_digest"] == before[urls[p]]["content_digest"]
        assert after[urls[p]]["content_fetch_time"] == before[urls[p]]["content_fetch_time"]
        assert after[urls[p]]["fetch_interval_s"] == pytest.approx(86400 * 1.2)
    assert after[urls["/a"]]["fetch_interval_s"] == pytest.approx(86400 * 0.6)
    assert after[urls["/a"]]["etag"] == '"a1"'
    assert after[urls["/c"]]["fetch_interval_s"] == pytest.approx(86400 * 1.2)  # same digest
    assert all(after[u]["status"] == "fetched" for u in urls.values())
    # WARC: 304s are server-not-modified revisits referring to the first capture
    first_dates = {
        h["WARC-Target-URI"]: h["WARC-Date"]
        for r in range(1, rnd)
        for t, h in _records(crawl, r)
        if t == "response"
    }
    recs = _records(crawl, rnd)
    by = {(t, h["WARC-Target-URI"]): h for t, h in recs if t in ("response", "revisit")}
    for p in ("/", "/b"):
        h = by[("revisit", urls[p])]
        assert h["WARC-Profile"] == NOT_MODIFIED_PROFILE
        assert h["WARC-Refers-To-Target-URI"] == urls[p]
        assert h["WARC-Refers-To-Date"] == first_dates[urls[p]]
        assert "WARC-Payload-Digest" not in h
    assert ("response", urls["/a"]) in by
    assert by[("revisit", urls["/c"])]["WARC-Profile"] == REVISIT_PROFILE
    # no outlinks re-extracted from a 304
    assert not any(t == "metadata" and h["WARC-Target-URI"] == urls["/"] for t, h in recs)
    for f in crawl.fs.glob(crawl.path(f"warc/round={rnd}/*.warc.gz")):
        check = subprocess.run(
            [sys.executable, "-m", "warcio.cli", "check", "-v", crawl.fs._strip_protocol(f)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout + check.stderr
    due = sql.query(crawl, sql.named_query("due-soon")).to_pylist()
    assert sum(r["urls"] for r in due if r["status"] == "fetched") == 4

    # A fresh-user trial: an unchanged 200 (a revisit) moved content_fetch_time to the revisit,
    # so the next revisit referred to a revisit; a 404 replaced content_digest with its body's
    # while content_fetch_time stayed the 200's. /b is 404 for a round, then back (304 to the
    # kept Last-Modified); /c is unchanged twice: both revisits refer to the first responses.
    again = MultiHostServer(site, port=port)  # the crawl's URLs name that port
    again.start()
    try:
        for epoch, want_b in ((2, "gone"), (3, "fetched")):
            site.epoch = epoch
            inject(crawl, cfg, [urls["/b"], urls["/c"]], refetch=True)
            run_rounds(crawl.url, cfg, 1)
            now = {r["url"]: r for r in frontier_rows(crawl)}
            assert now[urls["/b"]]["status"] == want_b
            for p in ("/b", "/c"):
                assert now[urls[p]]["content_digest"] == before[urls[p]]["content_digest"], p
                assert now[urls[p]]["content_fetch_time"] == before[urls[p]]["content_fetch_time"]
    finally:
        again.stop()
    last = {(t, h.get("WARC-Target-URI")): h for t, h in _records(crawl, rnd + 2)}
    for p in ("/b", "/c"):
        h = last[("revisit", urls[p])]
        assert h["WARC-Refers-To-Date"] == first_dates[urls[p]], p


# -- fetch worker level: Retry-After, X-Robots-Tag, canonical -------------------------------------


@pytest.fixture
def dirfs(tmp_path):
    return DirFileSystem(str(tmp_path), fsspec.filesystem("file"))


def _run(cfg, dirfs, host, urls):
    w = FetchWorker(cfg, 0, dirfs, seed_hosts={host}, seed_domains=[domain_of(host)])
    try:
        run = w.run([_item(u) for u in urls], round=1)
        return w, {r["url"]: r for r in run.fetched}, run
    finally:
        w.close()


@pytest.mark.parametrize(
    ("value", "want"),
    [("120", 120.0), ("http-date", 60.0), ("soon", None), ("-5", None), ("999999", 600.0)],
)
def test_retry_after_moves_the_host_and_is_recorded(
    web, host_name, test_config, dirfs, value, want
):
    cfg = test_config.replace(politeness={"max_retry_after_s": 600.0, "rate_limit_backoff_s": 30.0})
    if value == "http-date":
        value = formatdate(time.time() + 60, usegmt=True)
    web.app.add(host_name, "/robots.txt", Response(404, [], b""))
    web.app.add(host_name, "/busy", Response(503, [("Retry-After", value)], b"busy"))
    url = web.base_url(host_name) + "/busy"
    w, rows, _ = _run(cfg, dirfs, host_name, [url])
    got = rows[canonicalize(url)]["retry_after_s"]
    vs = w.workbench.visit_state(host_name)
    if want is None:  # no usable Retry-After: the host is held by the rate-limit back-off
        assert got is None
        assert vs.next_allowed - w.clock() == pytest.approx(30.0, abs=3 + 3)  # +-10 % jitter
    else:
        assert got == pytest.approx(want, abs=3)
        assert vs.next_allowed - w.clock() == pytest.approx(want, abs=3)


def test_x_robots_tag_and_canonical(web, host_name, test_config, dirfs):
    web.app.add(host_name, "/robots.txt", Response(404, [], b""))
    web.app.add(
        host_name, "/p",
        Response(200, [*HTML, ("X-Robots-Tag", "otherbot: noindex"),
                       ("X-Robots-Tag", "batchcrawl: nofollow")],
                 b'<link rel="canonical" href="/p?x=1"><a href="/q">q</a>'),
    )  # fmt: skip
    web.app.add(host_name, "/r", Response(200, [*HTML, ("X-Robots-Tag", "none")], b"<p>r</p>"))
    base = web.base_url(host_name)
    _, rows, run = _run(test_config, dirfs, host_name, [base + "/p", base + "/r"])
    p, r = rows[canonicalize(base + "/p")], rows[canonicalize(base + "/r")]
    assert (p["robots_noindex"], p["robots_nofollow"]) == (False, True)
    assert p["canonical_url"] == base + "/p?x=1"
    assert (r["robots_noindex"], r["robots_nofollow"]) == (True, True)
    q = dict(zip(run.links["dst_url"], run.links["nofollow"], strict=True))
    assert q[canonicalize(base + "/q")] is True


class BusySite:
    """One host: ``/`` links to ``/busy-date``, ``/busy-secs`` and ``/ok``; the first answers 503
    with an HTTP-date ``Retry-After`` that is not a whole number of seconds away, the second 503
    with ``Retry-After: 0``."""

    def __call__(self, host, path, headers):
        if path == "/robots.txt":
            return Response(404, [("Content-Type", "text/plain")], b"")
        if path == "/":
            body = b'<a href="/busy-date">d</a><a href="/busy-secs">s</a><a href="/ok">ok</a>'
            return Response(200, HTML, body)
        if path == "/busy-date":  # RFC 9110 sec. 10.2.3, the HTTP-date form; fractional offset
            return Response(503, [("Retry-After", formatdate(time.time() + 1800.4, usegmt=True))])
        if path == "/busy-secs":
            return Response(503, [("Retry-After", "0")])
        return Response(200, HTML, b"<p>ok</p>")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_retry_after_date_commits_the_round_and_waits_for_the_date(tmp_path):
    """A 503 whose Retry-After is an HTTP-date (fractional seconds from now) used to fail the
    update step (a float cast to int64) on every rerun: the crawl was stuck."""
    cfg = round_config()
    with serve(BusySite()) as server:
        base = server.base_url("busy.test")
        crawl = new_crawl(tmp_path / "crawl", cfg, [canonicalize(base + "/")])
        summaries = run_rounds(crawl.url, cfg, 2)
    assert len(summaries) == 2 and all(s["generation"] for s in summaries)
    rows = {r["url"]: r for r in frontier_rows(crawl)}
    busy = rows[canonicalize(base + "/busy-date")]
    assert busy["status"] == "error"
    wait_s = (busy["next_fetch_time"] - busy["fetch_time"]).total_seconds()
    assert 1700 < wait_s < 1900
    # the host is held until the date (RFC 9110: the whole host, not only the URL)
    assert rows[canonicalize(base + "/ok")]["status"] == "queued"
    got = {r["url"]: r for r in fetched_rows(crawl)}
    assert got[canonicalize(base + "/busy-date")]["retry_after_s"] == pytest.approx(1800, abs=30)
