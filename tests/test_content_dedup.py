"""Content seen across shards and rounds (issue 17 item 2): the same page served by hosts that the
ring routes to different shards, in one round and in a later one."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from round_helpers import hosts_on_two_shards, new_crawl, round_config, serve
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.round import run_rounds
from batchcrawl.store import sql
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize, url_key

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _hosts_on_two_shards(cfg) -> tuple[str, str, str]:
    a, b = hosts_on_two_shards(cfg, "d")
    c = next(h for h in (f"d{i}.test" for i in range(40)) if h not in (a, b))
    return a, b, c


class SameWeb:
    """``/same.html`` is the same bytes on every host (it links to ``other.html`` and to host C's
    copy); ``/other.html`` differs per host; ``/start.html`` is host C's seed."""

    def __init__(self, c: str) -> None:
        self.c = c
        self.port = 0

    def bind(self, port: int) -> None:
        self.port = port

    def __call__(self, host, path, headers):
        html = [("Content-Type", "text/html")]
        if path == "/robots.txt":
            return Response(404, [], b"")
        if path == "/same.html":
            body = (f'<html><body><p>one text</p><a href="other.html">o</a>'
                    f'<a href="http://{self.c}:{self.port}/same.html">c</a></body></html>')  # fmt: skip
            return Response(200, html, body.encode())
        if path == "/start.html":  # host C's seed (puts C in the crawl's scope)
            return Response(200, html, b"<html><body>start</body></html>")
        if path == "/other.html":
            return Response(200, html, f"<html><body>{host}</body></html>".encode())
        return Response(404, [], b"")


def _duplicates(con) -> list[tuple]:
    query = sql.named_query("duplicates").strip().rstrip(";")
    return con.execute(f"SELECT url, first_url, known_at_fetch FROM ({query})").fetchall()


def _warc_types(crawl) -> dict[str, str]:
    """WARC-Target-URI -> record type of its response or revisit record."""
    out = {}
    for path in crawl.fs.find(crawl.path("warc")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type in ("response", "revisit"):
                    out[rec.rec_headers.get_header("WARC-Target-URI")] = rec.rec_type
    return out


def test_duplicates_across_shards_and_rounds(tmp_path):
    # with dedup.skip_duplicate_links (BUbiNG's choice; off by default since issue 30)
    cfg = round_config(dedup={"skip_duplicate_links": True})
    a, b, c = _hosts_on_two_shards(cfg)
    web = SameWeb(c)
    with serve(web) as server:
        port = server.port
        seeds = [canonicalize(f"http://{h}:{port}/same.html") for h in (a, b)]
        crawl = new_crawl(tmp_path / "crawl", cfg, [*seeds, f"http://{c}:{port}/start.html"])
        run_rounds(crawl.url, cfg, 1)
        # round 1: the two seeds, on two shards; the content table keeps one of them
        con = sql.connect(crawl)
        (first, first_round), *rest = con.execute(
            "SELECT url, round FROM content WHERE url LIKE '%/same.html'"
        ).fetchall()
        assert not rest and first in seeds and first_round == 1
        other = next(s for s in seeds if s != first)
        assert _duplicates(con) == [(other, first, False)]  # flagged at update time only
        assert _warc_types(crawl)[other] == "response"  # the shards did not know at fetch time
        run_rounds(crawl.url, cfg, 1)
    # round 2: C's copy is known at fetch time from round 1's content table
    con = sql.connect(crawl)
    c_same = canonicalize(f"http://{c}:{port}/same.html")
    dup_of = con.execute("SELECT duplicate_of FROM fetched WHERE url = ?", [c_same]).fetchall()
    assert dup_of == [(url_key(first),)]
    assert (c_same, first, True) in _duplicates(con)
    assert _warc_types(crawl)[c_same] == "revisit"
    urls = {r[0] for r in con.execute("SELECT url FROM frontier").fetchall()}
    assert canonicalize(f"http://{a}:{port}/other.html") in urls
    assert canonicalize(f"http://{c}:{port}/other.html") not in urls  # links not followed
    # same.html, start.html, two other.html
    assert con.execute("SELECT count(*) FROM content").fetchone()[0] == 4


def test_links_of_duplicates_are_followed_by_default(tmp_path):
    cfg = round_config()
    assert cfg.dedup.skip_duplicate_links is False
    a, b, c = _hosts_on_two_shards(cfg)
    web = SameWeb(c)
    with serve(web) as server:
        port = server.port
        seeds = [f"http://{a}:{port}/same.html", f"http://{c}:{port}/start.html"]
        crawl = new_crawl(tmp_path / "crawl", cfg, seeds)
        run_rounds(crawl.url, cfg, 2)
    con = sql.connect(crawl)
    urls = {r[0] for r in con.execute("SELECT url FROM frontier").fetchall()}
    assert canonicalize(f"http://{c}:{port}/other.html") in urls


def test_a_worker_loads_at_most_max_seen_digests_the_newest_first_captures(tmp_path):
    """``dedup.max_seen_digests``: the content-seen map a fetch worker loads is bounded, and keeps
    the digests first captured last, across every file of the table."""
    from datetime import datetime, timedelta

    from batchcrawl.frontier.content import load_seen
    from batchcrawl.store import schemas
    from batchcrawl.store.crawldir import CrawlDir
    from batchcrawl.urls import hash64

    crawl = CrawlDir.create(str(tmp_path / "c"), "", 2)
    t0 = datetime(2026, 1, 1)
    files = []
    for f in range(3):  # digests 0..29, first captured at t0 + i seconds, spread over 3 files
        rows = [{"digest_key": hash64(f"sha1:{i}"), "digest": f"sha1:{i}", "url_key": i,
                 "url": f"http://h.test/{i}", "round": 1, "fetch_time": t0 + timedelta(seconds=i)}
                for i in range(30) if i % 3 == f]  # fmt: skip
        table = pa.Table.from_pylist(rows, schema=schemas.schema("content"))  # uint64 keys
        files.append(
            crawl.write_table("content", f"content/gen=1/bucket={f:03d}.parquet", table).path
        )
    assert set(load_seen(crawl, files, 100)) == {f"sha1:{i}" for i in range(30)}
    seen = load_seen(crawl, files, 7)
    assert set(seen) == {f"sha1:{i}" for i in range(23, 30)}
    assert seen["sha1:29"] == (29, "http://h.test/29", t0 + timedelta(seconds=29))
    assert load_seen(crawl, files, 0) == {}
    assert load_seen(crawl, [], 5) == {} and load_seen(crawl, [], 5).get("sha1:1") is None
    assert "sha1:3" not in seen and seen.get("sha1:3") is None and seen.get(3) is None


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=12), st.integers(0, 2**63 - 1), max_size=60),
       st.lists(st.text(max_size=12), max_size=30))  # fmt: skip
def test_seen_digests_answers_as_the_dict_of_its_rows(rows, probes):
    """:class:`SeenDigests` (Arrow columns, binary search on ``digest_key``) answers every lookup
    as a ``dict`` of the same rows: present and absent digests, iteration, length."""
    from datetime import datetime, timedelta

    from batchcrawl.frontier.content import SeenDigests
    from batchcrawl.urls import hash64

    t0 = datetime(2026, 1, 1)
    want = {
        d: (k, f"http://h.test/{k}", t0 + timedelta(seconds=k % 10**6)) for d, k in rows.items()
    }
    table = pa.table({
        "digest_key": pa.array([hash64(d) for d in want], pa.uint64()),
        "digest": list(want), "url_key": [v[0] for v in want.values()],
        "url": [v[1] for v in want.values()], "fetch_time": [v[2] for v in want.values()],
    })  # fmt: skip
    seen = SeenDigests(table)
    assert len(seen) == len(want) and sorted(seen) == sorted(want) and seen == want
    for d in [*want, *probes]:
        assert seen.get(d) == want.get(d)
        assert (d in seen) == (d in want)


def test_seen_digests_confirms_a_key_on_the_digest():
    """Two digests under one ``digest_key`` (a 64-bit collision, forced here): each finds its own
    row, and a digest that only shares the key is not a duplicate."""
    from datetime import datetime

    from batchcrawl.frontier.content import SeenDigests
    from batchcrawl.urls import hash64

    key = hash64("sha1:B")
    table = pa.table({
        "digest_key": pa.array([key, key, hash64("sha1:C")], pa.uint64()),
        "digest": ["sha1:A", "sha1:B", "sha1:C"], "url_key": [1, 2, 3],
        "url": ["http://a.test/", "http://b.test/", "http://c.test/"],
        "fetch_time": [datetime(2026, 1, d) for d in (1, 2, 3)],
    })  # fmt: skip
    seen = SeenDigests(table)
    assert seen["sha1:B"] == (2, "http://b.test/", datetime(2026, 1, 2))
    assert seen["sha1:C"][0] == 3
    assert "sha1:A" not in seen  # stored under B's key: never found by its own
    with pytest.raises(KeyError):
        seen["sha1:D"]
