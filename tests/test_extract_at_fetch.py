"""Extraction at fetch time (``extract.at_fetch``, issue 32 item 2) gives the rows and WET bytes
``batchcrawl extract`` gives for the same captures.

Page processor level (no server, no cluster): canned responses -- a page with text, one without
text, a binary body labelled HTML, a broken gzip Content-Encoding, a gzipped page, a truncated
body, a 404, a non-HTML body, a duplicate (a WARC revisit) and a 304 (a server-not-modified
revisit) -- go through :class:`~batchcrawl.fetch.pages.PageProcessor` with a
:class:`~batchcrawl.extract.atfetch.TextsAtFetch`; then the WARC file it wrote is extracted by
:func:`~batchcrawl.extract.warcfile.extract_warc` from its ``fetched`` rows, as ``batchcrawl
extract`` would, and both ``text`` files and WET files must be equal. Hypothesis varies the bodies.
"""

from __future__ import annotations

import gzip
import shutil
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from fsspec.implementations.dirfs import DirFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from batchcrawl.config import loopback_test_config
from batchcrawl.extract import atfetch
from batchcrawl.extract.atfetch import TextsAtFetch
from batchcrawl.extract.warcfile import extract_warc
from batchcrawl.fetch.dedup import ShardDedup
from batchcrawl.fetch.pages import PageProcessor
from batchcrawl.fetch.warc import WarcWriter
from batchcrawl.records import FetchItem, FetchResult
from batchcrawl.store import paths, schemas
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key

WALL = 1_800_000_000.0
ROUND = 4
HTML = [("Content-Type", "text/html; charset=utf-8")]
PAGE = (
    "<html><head><title>Grüße</title><meta name=description content='d'></head><body>"
    "<nav><a href='/'>Start</a> <a href='/map'>Sitemap</a></nav><main><h1>Paquets</h1>"
    + "<p>Ceci est une page en français qui parle de paquets Debian et d'aptitude.</p>" * 5
    + "<a href='/next'>suite</a></main></body></html>"
).encode()
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4


def _item(path: str, **kw) -> FetchItem:
    url = canonicalize("http://af.test" + path)
    host = host_of(url)
    return FetchItem(url_key(url), url, host, domain_of(host), 1, **kw)


def _result(item: FetchItem, status: int, body: bytes, headers, n: int, **kw) -> FetchResult:
    return FetchResult(
        url=item.url, ip="127.0.0.1", status=status, reason="X", http_version="HTTP/1.1",
        request_line="GET / HTTP/1.1", request_headers=[("Host", item.host)],
        response_headers=list(headers), raw_body=body, body=body,
        started=WALL + n * 1.5, finished=WALL + n * 1.5 + 0.1, **kw,
    )  # fmt: skip


#: (path, status, body, headers, FetchResult extras): the canned captures, in fetch order
CAPTURES = [
    ("/fr", 200, PAGE, HTML, {}),
    ("/empty", 200, b"<html><body><p> </p></body></html>", HTML, {}),
    ("/image", 200, BINARY, HTML, {}),
    ("/broken-gz", 200, b"not gzip at all", [*HTML, ("Content-Encoding", "gzip")], {}),
    ("/gz", 200, gzip.compress(PAGE, mtime=0), [*HTML, ("Content-Encoding", "gzip")], {}),
    ("/cut", 200, PAGE[:300], HTML, {"truncated": "length"}),
    ("/missing", 404, b"<html><body><p>not here at all</p></body></html>", HTML, {}),
    ("/plain", 200, b"just text", [("Content-Type", "text/plain")], {}),
    ("/copy", 200, PAGE, HTML, {}),  # the same payload as /fr: a revisit
    ("/bad-charset", 200, "<p>café</p>".encode("utf-16"), [("Content-Type", "text/html; charset=nope")], {}),
]  # fmt: skip


class Shard:
    """A page processor, WARC writer and at-fetch texts writing into ``root`` (a crawl dir)."""

    def __init__(self, root, rotate_bytes: int = 10_000_000) -> None:
        self.crawl = CrawlDir.create(str(root), "", buckets=2)
        self.fs = DirFileSystem(str(root), self.crawl.fs)
        cfg = loopback_test_config(extract={"at_fetch": True})
        self.proc = PageProcessor(cfg, 0, ShardDedup(cfg.dedup), lambda: WALL)
        self.warc = WarcWriter(self.fs, paths.warc_dir(ROUND), f"af-{ROUND:05d}-00-x",
                               rotate_bytes, "test", clock=lambda: WALL)  # fmt: skip
        self.texts = TextsAtFetch(self.fs)
        self.rows: list[dict] = []

    def fetch(self, path, status, body, headers, extra, n, item=None):
        item = item or _item(path)
        result = _result(item, status, body, headers, n, **extra)
        rec = self.proc.process(item, result, ROUND, self.warc, texts=self.texts)
        self.rows.append(rec.row)
        return rec

    def close(self):
        """Close the run; write its ``fetched`` file; return the at-fetch ``text`` entries."""
        self.warc.close()
        entries = self.texts.close()
        table = pa.Table.from_pylist(self.rows, schema=schemas.schema("fetched"))
        self.crawl.write_table("fetched", paths.round_file("fetched", ROUND, 0), table)
        return entries


def _extract_again(shard: Shard, tmp_path, entries) -> list[tuple[list, list, bytes, bytes]]:
    """For each at-fetch text file: (its rows, the rows ``extract_warc`` makes from the WARC file,
    both WET files' bytes), extracting in a copy of the crawl without the at-fetch outputs."""
    copy = tmp_path / "copy"
    shutil.copytree(shard.crawl.root, copy)
    fetched = paths.round_file("fetched", ROUND, 0)
    out = []
    for entry in entries:
        warc = next(w for w in shard.warc.files if paths.text_file(ROUND, w) == entry.path)
        (copy / entry.path).unlink()
        (copy / paths.wet_file(warc)).unlink()
        result = extract_warc(str(copy), warc, fetched)
        assert not result["reused"] and result["damaged"] is None
        out.append((
            pq.read_table(shard.crawl.path(entry.path)).to_pylist(),
            pq.read_table(str(copy / entry.path)).to_pylist(),
            Path(shard.crawl.path(paths.wet_file(warc))).read_bytes(),
            (copy / paths.wet_file(warc)).read_bytes(),
        ))  # fmt: skip
    return out


def test_at_fetch_rows_and_wet_files_equal_those_extract_makes(tmp_path):
    shard = Shard(tmp_path / "crawl")
    for n, (path, status, body, headers, extra) in enumerate(CAPTURES):
        shard.fetch(path, status, body, headers, extra, n)
    prior = _item("/fr", content_digest=shard.rows[0]["content_digest"],
                  content_fetch_time=datetime(2027, 1, 1), etag='"e"')  # fmt: skip
    shard.fetch("/fr", 304, b"", HTML, {}, len(CAPTURES), item=prior)
    entries = shard.close()
    assert len(entries) == 1
    [(at_fetch, extracted, wet_at_fetch, wet_extracted)] = _extract_again(shard, tmp_path, entries)
    assert at_fetch == extracted
    assert wet_at_fetch == wet_extracted
    reasons = {r["url"].rsplit("/", 1)[1]: r["reason"] for r in at_fetch}
    assert reasons["fr"] is None or reasons["fr"] == "revisit"
    assert {reasons[k] for k in ("empty", "image", "cut", "copy")} == {
        "no_text", "binary", "truncated", "revisit"
    }  # fmt: skip
    assert reasons["broken-gz"].startswith("undecodable") and reasons["gz"] is None
    assert reasons["bad-charset"] == "binary"  # UTF-16: NUL bytes
    assert "missing" not in reasons and "plain" not in reasons  # counted, no row
    assert shard.texts.counts["not_200"] == 1 and shard.texts.counts["not_html"] == 1
    assert sum(r["record_type"] == "revisit" for r in at_fetch) == 2  # /copy and the 304


def test_rotated_warc_files_each_get_their_own_text_and_wet_file(tmp_path):
    shard = Shard(tmp_path / "crawl", rotate_bytes=1)  # every fetch closes its file
    for n in range(3):
        body = PAGE.replace(b"Paquets", f"Paquets {n}".encode())
        shard.fetch(f"/p{n}", 200, body, HTML, {}, n)
    entries = shard.close()
    assert [e.rows for e in entries] == [1, 1, 1] and len(shard.warc.files) == 3
    for at_fetch, extracted, wet_a, wet_b in _extract_again(shard, tmp_path, entries):
        assert at_fetch == extracted and wet_a == wet_b


def test_a_text_file_written_in_row_groups_holds_the_rows_extract_writes_at_once(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(atfetch, "ROWS_PER_GROUP", 2)  # a worker holds at most 2 rows
    shard = Shard(tmp_path / "crawl")
    for n in range(5):
        body = PAGE.replace(b"Paquets", f"Paquets {n}".encode())
        shard.fetch(f"/g{n}", 200, body, HTML, {}, n)
    [entry] = shard.close()
    assert entry.rows == 5
    assert pq.ParquetFile(shard.crawl.path(entry.path)).num_row_groups == 3
    [(at_fetch, extracted, wet_a, wet_b)] = _extract_again(shard, tmp_path, [entry])
    assert at_fetch == extracted and wet_a == wet_b


_markup = st.sampled_from(["<p>", "</p>", "<div>", "<title>", "</title>", "<main>", "<nav>",
                           "<script>", "<!--", "<a href='/x'>", "&amp;", "\x00", "é", "東京"])  # fmt: skip
_text = st.text(st.characters(codec="utf-8"), max_size=40)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parts=st.lists(st.one_of(_markup, _text), max_size=30),
    encoding=st.sampled_from(["utf-8", "latin-1", "utf-16"]),
    charset=st.sampled_from([None, "utf-8", "iso-8859-1", "bogus"]),
    coding=st.sampled_from([None, "gzip", "br", "identity"]),
    garbage=st.binary(max_size=64),
)
def test_any_body_gives_the_row_extract_gives(tmp_path_factory, parts, encoding, charset, coding,
                                              garbage):  # fmt: skip
    import brotli

    tmp = tmp_path_factory.mktemp("h")
    body = "".join(parts).encode(encoding, "replace") + garbage
    headers = [("Content-Type", "text/html" + (f"; charset={charset}" if charset else ""))]
    if coding == "gzip":
        body = gzip.compress(body, mtime=0)
    elif coding == "br":
        body = brotli.compress(body)
    if coding:
        headers.append(("Content-Encoding", coding))
    shard = Shard(tmp / "crawl")
    shard.fetch("/h", 200, body, headers, {}, 0)
    entries = shard.close()
    [(at_fetch, extracted, wet_a, wet_b)] = _extract_again(shard, tmp, entries)
    assert at_fetch == extracted and len(at_fetch) == 1
    assert wet_a == wet_b
