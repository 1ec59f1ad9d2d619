"""The page processor (batchcrawl.fetch.pages) on canned responses: no server, no cluster, no
fetch thread. Each test builds a FetchResult as the fetcher would, processes it into a row and
reads the WARC records it wrote back from disk."""

from __future__ import annotations

from datetime import UTC, datetime

import fsspec
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.config import loopback_test_config
from batchcrawl.fetch.dedup import ShardDedup
from batchcrawl.fetch.outcome import HOST_OK, classify
from batchcrawl.fetch.pages import PageProcessor, PageRecord
from batchcrawl.fetch.warc import WarcWriter, payload_digest, read_record
from batchcrawl.records import FetchItem, FetchResult, Outcome
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key

WALL = 1_800_000_000.0
BASE = "http://p1.test"


def _item(path: str, **kw) -> FetchItem:
    url = canonicalize(BASE + path)
    host = host_of(url)
    return FetchItem(url_key(url), url, host, domain_of(host), 2, **kw)


def _result(item: FetchItem, status: int | None, body: bytes = b"", headers=(), **kw):
    """A FetchResult as the fetcher reports one GET of ``item``."""
    return FetchResult(
        url=item.url, ip="127.0.0.1", status=status, reason="X", http_version="HTTP/1.1",
        request_line=f"GET /{item.url.split('/', 3)[3]} HTTP/1.1",
        request_headers=[("Host", item.host)], response_headers=list(headers),
        raw_body=body, body=body, started=WALL + 1.2346, finished=WALL + 1.5, **kw,
    )  # fmt: skip


def _html(body: str, *headers: tuple[str, str]) -> tuple[bytes, list[tuple[str, str]]]:
    return body.encode(), [("Content-Type", "text/html; charset=utf-8"), *headers]


class Harness:
    """A processor, its dedup memory and a WARC writer in a temporary crawl directory."""

    def __init__(self, tmp_path, **overrides) -> None:
        self.cfg = loopback_test_config(**overrides)
        self.fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
        self.dedup = ShardDedup(self.cfg.dedup)
        self.proc = PageProcessor(self.cfg, 3, self.dedup, lambda: WALL)
        self.warc = WarcWriter(self.fs, "warc", "pages-test", 10_000_000, "batchcrawl-test")

    def process(self, item: FetchItem, result: FetchResult, **kw) -> PageRecord:
        return self.proc.process(item, result, 7, self.warc, **kw)

    def record(self, rec: PageRecord):
        self.warc.close()
        row = rec.row
        return read_record(self.fs, row["warc_filename"], row["warc_record_offset"])


@pytest.fixture
def harness(tmp_path):
    return Harness(tmp_path)


def test_an_html_page_becomes_a_row_links_and_a_response_record(harness):
    item = _item("/a")
    body, headers = _html(
        "<html><head><title>t</title></head><body><p>some words here</p>"
        '<a href="/b">b</a><a rel="nofollow" href="/c">c</a><a href="http://x.test/">x</a>'
        "</body></html>",
        ("ETag", '"e1"'),
    )
    rec = harness.process(item, _result(item, 200, body, headers))
    row = rec.row
    assert rec.outcome is Outcome.OK and row["outcome"] == "ok"
    assert (row["url_key"], row["round"], row["shard"], row["depth"]) == (item.url_key, 7, 3, 2)
    assert row["fetch_time"] == datetime(2027, 1, 15, 8, 0, 1, 235000)  # whole milliseconds
    assert row["content_mime_type"] == "text/html" and row["content_charset"] == "utf-8"
    assert row["content_digest"] == payload_digest(body) and row["content_length"] == len(body)
    assert row["etag"] == '"e1"' and row["robots_noindex"] is False
    assert row["simhash"] is not None and row["simhash_version"] >= 1
    assert rec.follow and rec.invalid == 0
    assert [(canonicalize(u), tag, nf) for u, tag, nf in rec.found] == [
        (canonicalize(BASE + "/b"), "a", False),
        (canonicalize(BASE + "/c"), "a", True),
        (canonicalize("http://x.test/"), "a", False),
    ]
    assert rec.counts["ok"] == 1 and "revisits" not in rec.counts  # a first capture
    assert {"cpu_parse_s", "cpu_simhash_s", "cpu_warc_s"} <= rec.counts.keys()
    stored = harness.record(rec)
    assert stored.rec_type == "response" and stored.target_uri == item.url
    assert stored.http_status == 200 and stored.payload == body and stored.digests_ok


def test_x_robots_tag_noindex_nofollow_applies_to_the_row_and_every_link(harness):
    item = _item("/x")
    body, headers = _html('<a href="/y">y</a>', ("X-Robots-Tag", "noindex, nofollow"))
    rec = harness.process(item, _result(item, 200, body, headers))
    assert rec.row["robots_noindex"] is True and rec.row["robots_nofollow"] is True
    assert rec.found and all(nofollow for _, _, nofollow in rec.found)


@pytest.mark.parametrize("skip", [True, False])
def test_a_duplicate_payload_is_a_revisit_of_its_first_capture(tmp_path, skip):
    h = Harness(tmp_path, dedup={"skip_duplicate_links": skip})
    first, second = _item("/one"), _item("/two")
    body, headers = _html('<p>same</p><a href="/z">z</a>')
    r1 = h.process(first, _result(first, 200, body, headers))
    r2 = h.process(second, _result(second, 200, body, headers))
    assert "duplicate_of" not in r1.row and r1.counts["ok"] == 1
    assert r2.row["duplicate_of"] == first.url_key
    assert r2.follow is (not skip)  # the link graph keeps the links either way: found is full
    assert r2.found and r2.counts["revisits"] == 1
    stored = h.record(r2)
    assert stored.rec_type == "revisit"
    assert dict(stored.rec_headers)["WARC-Refers-To-Target-URI"] == first.url


def test_content_seen_in_an_earlier_round_wins_and_an_unchanged_refetch_is_no_duplicate(harness):
    item = _item("/old")
    body, headers = _html("<p>kept</p>")
    digest = payload_digest(body)
    harness.dedup.seen = {digest: (item.url_key, item.url, datetime(2026, 1, 2, 3, 4, 5))}
    rec = harness.process(item, _result(item, 200, body, headers))
    assert "duplicate_of" not in rec.row  # the same URL: unchanged, not a duplicate
    stored = harness.record(rec)
    assert stored.rec_type == "revisit"
    assert dict(stored.rec_headers)["WARC-Refers-To-Date"].startswith("2026-01-02T03:04:05")


def test_redirects_give_their_target_and_a_self_redirect_ends_as_a_loop(harness):
    item = _item("/from")
    rec = harness.process(item, _result(item, 301, b"", [("Location", "/to")]))
    assert rec.outcome is Outcome.REDIRECT
    assert rec.row["fetch_redirect"] == canonicalize(BASE + "/to")
    assert rec.found == [(canonicalize(BASE + "/to"), "redirect", False)]
    loop = harness.process(item, _result(item, 302, b"", [("Location", "/from")]), self_hops=2)
    assert loop.outcome is Outcome.REDIRECT_LOOP and loop.row["outcome"] == "redirect_loop"
    assert loop.row["error"] == "redirect_loop:3" and loop.found == []
    assert loop.counts["redirect_loop"] == 1
    bad = harness.process(item, _result(item, 301, b"", [("Location", "http://[::bad")]))
    assert bad.invalid == 1 and bad.row["fetch_redirect"] is None and bad.found == []


def test_a_304_keeps_the_stored_validators_and_refers_to_the_stored_capture(harness):
    when = datetime(2026, 5, 6, 7, 8, 9, 123000)
    item = _item("/same", etag='"v1"', last_modified="Tue, 01 Jan 2026 00:00:00 GMT",
                 content_fetch_time=when, content_digest="sha1:AAAA")  # fmt: skip
    rec = harness.process(item, _result(item, 304))
    row = rec.row
    assert rec.outcome is Outcome.NOT_MODIFIED and row["content_digest"] is None
    assert row["etag"] == '"v1"' and row["last_modified"] == item.last_modified
    stored = harness.record(rec)
    assert stored.rec_type == "revisit"
    refers = dict(stored.rec_headers)["WARC-Refers-To-Date"]
    assert refers == when.replace(tzinfo=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_no_response_means_no_record_and_a_503_caps_its_retry_after(tmp_path):
    h = Harness(tmp_path, politeness={"max_retry_after_s": 60.0})
    item = _item("/down")
    rec = h.process(item, _result(item, None, error="timeout"))
    assert rec.outcome is Outcome.NETWORK_ERROR and rec.row["error"] == "timeout"
    assert "warc_filename" not in rec.row and "revisits" not in rec.counts
    busy = h.process(item, _result(item, 503, b"busy", [("Retry-After", "7200")]))
    assert busy.outcome is Outcome.SERVER_ERROR and busy.row["retry_after_s"] == 60.0
    assert h.record(busy).http_status == 503


@settings(max_examples=60, deadline=None)
@given(status=st.integers(100, 599), location=st.sampled_from([None, "/next", "/s"]))
def test_every_status_gives_one_row_with_the_classified_outcome(tmp_path_factory, status, location):
    """Rows in = rows out: one row per response, whose outcome is classify's (a redirect to the
    URL itself being the loop), and a WARC record for every response."""
    h = Harness(tmp_path_factory.mktemp("pages"))
    item = _item("/s")
    headers = [("Location", location)] if location else []
    result = _result(item, status, b"<p>x</p>", [("Content-Type", "text/html"), *headers])
    want = classify(result)
    rec = h.process(item, result)
    if want is Outcome.REDIRECT and location == "/s":
        want = Outcome.REDIRECT_LOOP
    assert rec.outcome is want and rec.row["outcome"] == want.value
    assert rec.counts[want.value] == 1
    assert rec.row["warc_filename"] and rec.row["fetch_status"] == status
    assert (want in HOST_OK) == (status < 500 and status not in (408, 425, 429))
