"""Tests of batchcrawl.export.cdxj: CDXJ lines for our own WARC files and the shared ones; every offset is
verified by seeking into the WARC and reading the record with warcio."""

from __future__ import annotations

import io
import itertools
import json
import uuid
from pathlib import Path

import fsspec
import pytest
import surt
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl import cdxj
from batchcrawl.export.cdxj import write_cdxj
from batchcrawl.fetch.warc import WarcError, WarcWriter, payload_digest, read_record, warc_date
from batchcrawl.records import FetchResult

TESTDATA = Path(__file__).resolve().parents[1].parent / "shared" / "testdata" / "warc"
needs_testdata = pytest.mark.skipif(
    not (TESTDATA / "manifest.json").is_file(), reason=f"shared WARC test data not at {TESTDATA}"
)
T0 = 1_700_000_000.5


def fetch(url: str, body: bytes, status: int = 200, ctype: str = "text/html; charset=utf-8"):
    path = "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/"
    return FetchResult(
        url=url,
        ip="127.0.0.1",
        status=status,
        reason="OK",
        http_version="HTTP/1.1",
        request_line=f"GET {path} HTTP/1.1",
        request_headers=[("Host", url.split("/")[2])],
        response_headers=[("Content-Type", ctype)],
        raw_body=body,
        body=body,
        started=T0,
        finished=T0 + 0.01,
    )


def parse(line: str) -> tuple[str, str, dict]:
    key, ts, js = line.split(" ", 2)
    return key, ts, json.loads(js)


@pytest.fixture
def crawl_warc():
    """A memory:// WARC with responses, a revisit, a 404 and metadata records."""
    fs = fsspec.filesystem("memory")
    root = f"/test-cdxj-{uuid.uuid4().hex}"
    counter = itertools.count()
    fetches = [
        fetch("http://www.b.test/z?b=2&a=1", b"<html>z</html>"),
        fetch("http://a.test/", b"<html>root</html>"),
        fetch("https://a.test/page", b"%PDF-1.7", ctype="application/pdf"),
        fetch("http://a.test/missing", b"not found", status=404, ctype="text/plain"),
    ]
    with WarcWriter(
        fs, root, "s", 10**9, "test", clock=lambda: T0,
        record_id_maker=lambda: f"<urn:uuid:{next(counter)}>",
    ) as w:  # fmt: skip
        locs = [w.write_fetch(f, outlinks=["http://a.test/x"]) for f in fetches]
        locs.append(
            w.write_fetch(fetch("http://a.test/copy", b"<html>root</html>"),
                          revisit_of=("http://a.test/", warc_date(T0)))
        )  # fmt: skip
        path = w.files[0]
    yield fs, path, fetches, locs
    fs.rm(root, recursive=True)


def test_lines_sorted_and_fields(crawl_warc):
    fs, path, fetches, locs = crawl_warc
    out = io.StringIO()
    n = write_cdxj(path, out, fs)
    lines = out.getvalue().splitlines()
    assert n == len(lines) == 5  # 4 responses + 1 revisit; no request/metadata/warcinfo
    assert lines == sorted(lines)
    by_url = {parse(line)[2]["url"]: parse(line) for line in lines}
    key, ts, rec = by_url["http://www.b.test/z?b=2&a=1"]
    assert key == "test,b)/z?a=1&b=2" == surt.surt("http://www.b.test/z?b=2&a=1")
    assert ts == "20231114221320"
    assert rec["mime"] == "text/html" and rec["status"] == "200"
    assert rec["digest"] == payload_digest(b"<html>z</html>")  # sha1: kept, as cdxj-indexer 1.5
    assert rec["filename"] == path.rsplit("/", 1)[1]
    assert by_url["https://a.test/page"][2]["mime"] == "application/pdf"
    assert by_url["http://a.test/missing"][2]["status"] == "404"
    revisit = by_url["http://a.test/copy"][2]
    assert revisit["mime"] == "warc/revisit" and revisit["status"] == "200"
    assert revisit["digest"] == by_url["http://a.test/"][2]["digest"]
    assert all(isinstance(v, str) for _, _, r in by_url.values() for v in r.values())
    assert list(rec) == ["url", "mime", "status", "digest", "length", "offset", "filename"]


def test_offsets_match_writer_and_read_back(crawl_warc):
    fs, path, fetches, locs = crawl_warc
    out = io.StringIO()
    write_cdxj(path, out, fs)
    entries = {parse(line)[2]["url"]: parse(line)[2] for line in out.getvalue().splitlines()}
    for loc, url in zip(locs, [f.url for f in fetches] + ["http://a.test/copy"], strict=True):
        entry = entries[url]
        assert (int(entry["offset"]), int(entry["length"])) == (loc.offset, loc.length)
        rec = read_record(fs, path, int(entry["offset"]), int(entry["length"]))
        assert rec.target_uri == url
        assert rec.rec_type in ("response", "revisit")
        assert str(rec.http_status) == entry["status"]


def test_fsspec_url_and_filename_override(crawl_warc):
    fs, path, _, _ = crawl_warc
    out = io.StringIO()
    write_cdxj(f"memory://{path}", out, filename="warc/round=1/s-00000.warc.gz")
    assert all(
        parse(line)[2]["filename"] == "warc/round=1/s-00000.warc.gz"
        for line in out.getvalue().splitlines()
    )


def test_local_file(tmp_path):
    fs = fsspec.filesystem("file")
    with WarcWriter(fs, str(tmp_path), "local", 10**9, "test") as w:
        loc = w.write_fetch(fetch("http://a.test/", b"x"))
    out = io.StringIO()
    assert write_cdxj(loc.filename, out) == 1
    assert parse(out.getvalue())[2]["offset"] == str(loc.offset)


def test_not_a_warc(tmp_path):
    bad = tmp_path / "bad.warc.gz"
    bad.write_bytes(b"<html>an HTML page saved under a WARC name</html>\r\n")
    with pytest.raises(WarcError, match="bad.warc.gz"):
        write_cdxj(str(bad), io.StringIO())
    empty = tmp_path / "empty.warc.gz"
    empty.write_bytes(b"")
    assert write_cdxj(str(empty), io.StringIO()) == 0
    with pytest.raises(WarcError, match="nothing-here"):
        write_cdxj(str(tmp_path / "nothing-here.warc.gz"), io.StringIO())


@needs_testdata
def test_shared_warc_files():
    """Index every shared file; seek to each line's offset and read the record back. Counts are
    printed (-s)."""
    manifest = json.loads((TESTDATA / "manifest.json").read_text())
    fs = fsspec.filesystem("file")
    indexed_files = lines_total = errors = 0
    for source, entries in manifest.items():
        for name, expect in entries.items():
            path = str(TESTDATA / source / name)
            out = io.StringIO()
            try:
                n = write_cdxj(path, out)
            except WarcError:
                assert expect.get("expect_error") or name == "example-wrong-chunks.warc.gz", name
                errors += 1
                continue
            assert not expect.get("expect_error"), name
            indexed_files += 1
            lines = out.getvalue().splitlines()
            assert n == len(lines) and lines == sorted(lines)
            if "record_types" in expect:
                capture_types = [t for t in expect["record_types"] if t in ("response", "revisit",
                                                                            "resource")]  # fmt: skip
                assert len(lines) == len(capture_types), name
            for line in lines:
                key, ts, entry = parse(line)
                assert len(ts) == 14 and ts.isdigit()
                rec = read_record(
                    fs, path, int(entry["offset"]), int(entry["length"]), arc=".arc" in name
                )
                assert rec.target_uri == entry["url"], (name, entry)
                assert rec.rec_type in ("response", "revisit", "resource")
                lines_total += 1
    print(
        f"\nCDXJ over shared WARC/ARC files: {indexed_files} files indexed, {lines_total} lines, "
        f"every offset read back; {errors} files refused (2 broken by design + "
        "example-wrong-chunks.warc.gz, which warcio cannot read past its first record)"
    )
    assert errors == 3 and indexed_files == 17


#: Issue 14, item 3: the ``www`` label goes only when a registrable host with a dot is left.
WWW_KEYS = {
    "https://www3288.com/": "com,www3288)/",
    "https://www.com/": "com,www)/",
    "http://www.co.uk/": "uk,co,www)/",
    "https://www.example.com/": "com,example)/",
    "http://www2.example.co.uk:8080/x": "uk,co,example:8080)/x",
    "http://www.example.com./": "com,example)/",
}


def test_cdxj_and_index_keys_keep_www_unless_a_registrable_host_is_left():
    from batchcrawl.export.ccindex import url_columns

    fs = fsspec.filesystem("memory")
    root = f"/test-cdxj-{uuid.uuid4().hex}"
    try:
        with WarcWriter(fs, root, "s", 10**9, "test", clock=lambda: T0) as w:
            for url in WWW_KEYS:
                w.write_fetch(fetch(url, b"<html></html>"))
            path = w.files[0]
        out = io.StringIO()
        write_cdxj(path, out, fs)
    finally:
        fs.rm(root, recursive=True)
    cdxj = {parse(line)[2]["url"]: parse(line)[0] for line in out.getvalue().splitlines()}
    assert cdxj == WWW_KEYS
    assert {u: url_columns(u)["url_surtkey"] for u in WWW_KEYS} == WWW_KEYS
    assert url_columns("http://www.example.com./")["url_host_name"] == "www.example.com"


_field_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@given(
    url=_field_text.map(lambda s: "http://h.test/" + s),
    others=st.dictionaries(st.sampled_from(["mime", "status", "digest"]), _field_text),
    offset=st.integers(0, 2**40),
    length=st.integers(0, 2**31),
    filename=_field_text,
)
@settings(max_examples=200, deadline=None)
def test_a_line_built_in_two_parts_is_the_json_of_all_its_fields(
    url, others, offset, length, filename
):
    # the writer builds a capture's line head first (outside its lock) and adds where the record
    # is once it is placed; the result must be what json.dumps of the whole object gives
    fields = {"url": url, **others}
    whole = {**fields, "length": str(length), "offset": str(offset), "filename": filename}
    head = cdxj.line_head("2023-11-14T22:13:20Z", fields)
    line = cdxj.line_tail(head, offset, length, filename)
    assert line.endswith(" 20231114221320 " + json.dumps(whole))
