"""Bad input to ``batchcrawl extract`` (issue 32): real WARC files written by warcio, holding a
page with text, a page with no text, a binary body labelled text/html, a body that cannot be
decoded (a broken gzip Content-Encoding), a truncated record and a revisit; and a second WARC
file damaged in the middle. Every capture ends as a row with a reason or a count, the damaged
file is named in one line, the other file is still extracted, and nothing fails."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from crawl_helpers import fetched_row
from hypothesis import given, settings
from hypothesis import strategies as st
from test_archive_tools import fastwarc_records
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from batchcrawl.cli import main
from batchcrawl.extract import extract_crawl
from batchcrawl.extract.language import identify
from batchcrawl.extract.page import PageSkipped, extract_page, looks_binary
from batchcrawl.extract.wet import WetWriter
from batchcrawl.fetch.warc import payload_digest
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.sql import query

PAGE = (
    b"<html><head><title>Bonjour</title><meta name=description content='Un essai'>"
    b"<meta name=keywords content='a, b'>"
    b'<script type="application/ld+json">{"@context": "https://schema.org", "@type": "Article",'
    b' "author": {"@type": "Person", "name": "X"}}</script></head><body>'
    b"<nav><a href='/'>Accueil</a> <a href='/plan'>Plan du site</a></nav>"
    b"<main itemscope itemtype='https://schema.org/WebPage'><h1>Bonjour</h1>"
    + b"<p>Ceci est une page en fran\xc3\xa7ais qui parle de paquets Debian et de leur gestion "
    b"avec aptitude, un gestionnaire de paquets en mode texte.</p>"
    * 4
    + b"<a href='#top'>haut</a> <a href='mailto:x@y.test'>courriel</a> <a href='/suite'>suite</a>"
    b"</main></body></html>"
)
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8


def _record(writer, uri: str, body: bytes, *, headers=(), rec_type="response", extra=()):
    http = StatusAndHeaders(
        "200 OK", [("Content-Type", "text/html; charset=utf-8"), *headers], protocol="HTTP/1.1"
    )
    warc_headers = {"WARC-Payload-Digest": payload_digest(body), **dict(extra)}
    if rec_type == "revisit":
        body = b""
    return writer.create_warc_record(
        uri, rec_type, payload=io.BytesIO(body), length=len(body), http_headers=http,
        warc_headers_dict=warc_headers,
    )  # fmt: skip


def write_warc(records) -> tuple[bytes, list[int]]:
    """A gzipped WARC file of ``records`` and each record's offset."""
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True, warc_version="WARC/1.1")
    offsets = []
    for rec in records(writer):
        offsets.append(out.tell())
        writer.write_record(rec)
    return out.getvalue(), offsets


def captures(writer):
    yield _record(writer, "http://a.test/fr", PAGE)
    yield _record(writer, "http://a.test/empty", b"<html><body><p> </p></body></html>")
    yield _record(writer, "http://a.test/image", BINARY)
    yield _record(
        writer, "http://a.test/gz", b"not gzip at all", headers=[("Content-Encoding", "gzip")]
    )
    yield _record(writer, "http://a.test/cut", PAGE[:400], extra=[("WARC-Truncated", "length")])
    yield _record(writer, "http://a.test/again", PAGE, rec_type="revisit")


URLS = ["http://a.test/fr", "http://a.test/empty", "http://a.test/image", "http://a.test/gz",
        "http://a.test/cut", "http://a.test/again"]  # fmt: skip


@pytest.fixture
def crawl(tmp_path) -> CrawlDir:
    """One committed round: a good WARC file (the captures above) and a damaged one (its second
    record's gzip member overwritten in the middle)."""
    crawl = CrawlDir.create(str(tmp_path / "crawl"), "", buckets=2)
    good = "warc/round=1/c-00001-00-20240101120000-00000.warc.gz"
    bad = "warc/round=1/c-00001-01-20240101120000-00000.warc.gz"
    data, offsets = write_warc(captures)
    bad_data, bad_offsets = write_warc(
        lambda w: [_record(w, f"http://b.test/{i}", PAGE) for i in range(3)]
    )
    cut = bad_offsets[1] + 40
    bad_data = bad_data[:cut] + b"\xff" * 64 + bad_data[cut + 64 :]
    for rel, blob in ((good, data), (bad, bad_data)):
        crawl.fs.makedirs(crawl.path("warc/round=1"), exist_ok=True)
        crawl.fs.pipe_file(crawl.path(rel), blob)
    rows = []
    for i, (url, off) in enumerate(zip(URLS, offsets, strict=True)):
        row = fetched_row(i, host="a.test", warc=good)
        digest = payload_digest(PAGE) if url.endswith(("/fr", "/again")) else None
        row.update(url=url, warc_record_offset=off, content_mime_type="text/html",
                   content_digest=digest, content_charset="utf-8")  # fmt: skip
        rows.append(row)
    for i, off in enumerate(bad_offsets):
        row = fetched_row(10 + i, host="b.test", warc=bad)
        row.update(url=f"http://b.test/{i}", warc_record_offset=off, content_mime_type="text/html",
                   shard=1)  # fmt: skip
        rows.append(row)
    entry = crawl.write_table("fetched", "fetched/round=1/shard=00.parquet", rows)
    crawl.commit(crawl.manifest(), {"fetched": [entry]}, {"step": "round"}, round=1)
    return crawl


def text_rows(crawl: CrawlDir) -> dict[str, dict]:
    return {r["url"]: r for r in query(crawl, "SELECT * FROM text").to_pylist()}


def test_every_capture_ends_as_a_row_with_a_reason_or_a_count(crawl):
    damaged: list[str] = []
    summary = extract_crawl(crawl, on_damaged=damaged.append)
    rows = text_rows(crawl)
    good = rows["http://a.test/fr"]
    assert good["reason"] is None and good["content_languages"].split(",")[0] == "fr"
    assert good["title"] == "Bonjour" and "Plan du site" not in good["main_text"]
    assert "paquets Debian" in good["main_text"]
    assert good["main_text_length"] == len(good["main_text"]) < good["visible_text_length"]
    assert (good["meta_description"], good["meta_keywords"]) == ("Un essai", "a, b")
    assert good["structured_types"] == ["Article", "Person", "https://schema.org/WebPage"]
    assert good["outlinks"] == 3  # '#top' and mailto: are not links
    assert rows["http://a.test/empty"]["reason"] == "no_text"
    assert rows["http://a.test/image"]["reason"] == "binary"
    assert rows["http://a.test/gz"]["reason"].startswith(("undecodable", "binary"))
    assert rows["http://a.test/cut"]["reason"] == "truncated"
    revisit = rows["http://a.test/again"]
    assert revisit["record_type"] == "revisit" and revisit["main_text"] == good["main_text"]
    assert revisit["wet_record_offset"] == good["wet_record_offset"]  # the original's record
    # the damaged file: named in one line, its rows before the damage kept
    assert len(damaged) == 1 and "c-00001-01-" in damaged[0] and "\n" not in damaged[0]
    assert summary["damaged"] == damaged and summary["counts"]["damaged_file"] == 1
    assert "http://b.test/0" in rows and "http://b.test/2" not in rows
    assert summary["rows"] == len(rows) and summary["generation"] == crawl.manifest().generation


def test_wet_file_points_at_its_responses_and_passes_warcio_check(crawl):
    extract_crawl(crawl)
    warc = "warc/round=1/c-00001-00-20240101120000-00000.warc.gz"
    responses = {}
    with open(crawl.path(warc), "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "response":
                responses[rec.rec_headers.get_header("WARC-Record-ID")] = (
                    rec.rec_headers.get_header("WARC-Target-URI")
                )
    wet = crawl.path(paths.wet_file(warc))
    conversions = []
    with open(wet, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "conversion":
                h = rec.rec_headers
                assert h.get_header("Content-Type") == "text/plain"
                assert h.get_header("WARC-Block-Digest")
                refers = h.get_header("WARC-Refers-To")
                assert responses[refers] == h.get_header("WARC-Target-URI")
                conversions.append(rec.content_stream().read().decode("utf-8"))
    assert len(conversions) == 2  # the French page and the truncated one
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", wet],
                           capture_output=True, text=True)  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    assert [(t, block) for t, _, block, _ in fastwarc_records(wet)] == [
        ("warcinfo", True),
        ("conversion", True),
        ("conversion", True),
    ]


def test_rerun_commits_nothing_and_cli_prints_the_summary(crawl):
    result = CliRunner().invoke(main, ["extract", crawl.url, "--workers", "1"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["warc_files"] == 2 and "damaged WARC file" in result.stderr
    before = crawl.generations()
    again = extract_crawl(crawl)
    assert again["generation"] is None and again["warc_files"] == 0
    assert crawl.generations() == before


def test_binary_sniffing_and_pages_without_a_head():
    assert looks_binary(BINARY) and not looks_binary(PAGE) and not looks_binary(b"")
    page = extract_page(b"<p>only a paragraph</p>", None)
    assert page.title is None and page.main_text == "only a paragraph" and page.outlinks == 0
    gz = gzip.compress(PAGE)
    assert looks_binary(gz)


def test_a_missing_warc_file_is_named_and_tried_again_by_the_next_run(crawl):
    missing = "warc/round=1/c-00001-01-20240101120000-00000.warc.gz"
    crawl.fs.rm_file(crawl.path(missing))
    damaged: list[str] = []
    first = extract_crawl(crawl, on_damaged=damaged.append)
    assert damaged == [f"{missing}: WARC file named by committed fetched rows is missing"]
    assert first["generation"] == crawl.manifest().generation and first["rows"] == 6
    assert crawl.manifest().files("text") == [
        "text/round=1/c-00001-00-20240101120000-00000.parquet"
    ]
    again = extract_crawl(crawl, on_damaged=damaged.append)
    assert again["generation"] is None and len(damaged) == 2


def test_gc_keeps_the_wet_and_text_files_of_kept_generations(crawl):
    from batchcrawl.store.gc import gc

    extract_crawl(crawl)
    gc(crawl, keep=1, tmp_min_age_s=0.0)
    for rel in crawl.manifest().files("text"):
        assert crawl.fs.exists(crawl.path(rel))
    warc = "warc/round=1/c-00001-00-20240101120000-00000.warc.gz"
    assert crawl.fs.exists(crawl.path(paths.wet_file(warc)))


@given(st.binary(max_size=3000), st.sampled_from([None, "utf-8", "latin-1", "x-unknown"]))
@settings(max_examples=200, deadline=None)
def test_any_body_gives_a_page_or_a_counted_reason(body, charset):
    try:
        page = extract_page(body, charset)
    except PageSkipped as exc:
        assert exc.reason in ("binary", "undecodable")
        return
    assert page.visible_text_length >= 0 and page.outlinks >= 0
    identify(page.main_text)  # never raises


@given(st.text(max_size=2000))
@settings(max_examples=100, deadline=None)
def test_wet_records_read_back_with_their_text_and_a_valid_digest(text):
    out = io.BytesIO()
    wet = WetWriter(out, "x.warc.wet.gz")
    wet.write_warcinfo("2024-01-01T00:00:00Z", {"software": "test"})
    clean = text.encode("utf-8", "ignore").decode("utf-8")
    offset, length = wet.write_conversion(
        clean, target_uri="http://a.test/", refers_to="<urn:uuid:1>",
        date="2024-01-01T00:00:00Z", languages=None,
    )  # fmt: skip
    read = [
        (rec.rec_type, rec.rec_headers.get_header("WARC-Block-Digest"), rec.content_stream().read())
        for rec in ArchiveIterator(io.BytesIO(out.getvalue()[offset : offset + length]))
    ]  # each record read before the iterator moves on (it skips the rest of a record)
    assert [(t, d) for t, d, _ in read] == [("conversion", payload_digest(read[0][2]))]
    assert read[0][2].decode("utf-8") == clean
