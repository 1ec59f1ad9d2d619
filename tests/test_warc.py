"""Tests of batchcrawl.fetch.warc: records read back with warcio, ``warcio check``, digests, offsets,
rotation, byte-for-byte output, real loopback fetches (chunked, gzip, revisit) read back field by
field, and the reader over ../shared/testdata/warc."""

from __future__ import annotations

import base64
import gzip
import hashlib
import itertools
import json
import shutil
import subprocess
import sys
import uuid
import zlib
from pathlib import Path

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.errors import BatchcrawlError
from batchcrawl.fetch.fetcher import Fetcher
from batchcrawl.fetch.resolver import AddressPolicy, Resolver
from batchcrawl.fetch.warc import (
    REVISIT_PROFILE,
    WarcError,
    WarcLocation,
    WarcSettingError,
    WarcWriter,
    gzip_member,
    payload_digest,
    read_record,
    stored_response_headers,
    warc_date,
)
from batchcrawl.fetch.warcrecords import isal_zlib
from batchcrawl.records import FetchResult
from batchcrawl.testing.webserver import Response

TESTDATA = Path(__file__).resolve().parents[1].parent / "shared" / "testdata" / "warc"
needs_testdata = pytest.mark.skipif(
    not (TESTDATA / "manifest.json").is_file(), reason=f"shared WARC test data not at {TESTDATA}"
)
T0 = 1_700_000_000.25  # 2023-11-14T22:13:20.250000Z


def ids():
    counter = itertools.count()
    return lambda: f"<urn:uuid:00000000-0000-4000-8000-{next(counter):012d}>"


def fetch(path="/x", body=b"<html><a href='/y'>y</a></html>", **kw) -> FetchResult:
    base = dict(
        url=f"http://a.test{path}",
        ip="127.0.0.1",
        status=200,
        reason="OK",
        http_version="HTTP/1.1",
        request_line=f"GET {path} HTTP/1.1",
        request_headers=[("Host", "a.test"), ("User-Agent", "batchcrawl/0.1")],
        response_headers=[("Content-Type", "text/html; charset=utf-8")],
        raw_body=body,
        body=body,
        started=T0,
        finished=T0 + 0.125,
    )
    base.update(kw)
    return FetchResult(**base)


@pytest.fixture(params=["file", "memory"])
def fs_dir(request, tmp_path):
    """(filesystem, directory): a local temp dir, or a unique memory:// dir removed afterwards."""
    if request.param == "file":
        yield fsspec.filesystem("file"), str(tmp_path / "warc" / "round=7")
    else:
        fs = fsspec.filesystem("memory")
        root = f"/test-warc-{uuid.uuid4().hex}"
        yield fs, f"{root}/warc/round=7"
        if fs.exists(root):
            fs.rm(root, recursive=True)


def writer(fs, directory, rotate=10**9, **kw) -> WarcWriter:
    return WarcWriter(
        fs, directory, "shard=03", rotate, "batchcrawl/0.1", clock=lambda: T0,
        record_id_maker=ids(), **kw,
    )  # fmt: skip


def records(fs, path):
    """Every record of a file as (type, rec_headers, http_headers, raw payload, digests ok)."""
    out = []
    with fs.open(path, "rb") as fh:
        it = ArchiveIterator(fh, check_digests=True)
        for rec in it:
            payload = rec.raw_stream.read()
            out.append(
                (
                    rec.rec_type,
                    rec.rec_headers,
                    rec.http_headers,
                    payload,
                    rec.digest_checker.passed,
                )
            )
    return out


def sha1_b32(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


# --- round trip --------------------------------------------------------------------------------


def test_round_trip_types_links_and_digests(fs_dir):
    fs, directory = fs_dir
    with writer(fs, directory) as w:
        a = w.write_fetch(fetch("/a"), outlinks=["http://a.test/y", "http://b.test/"])
        b = w.write_fetch(fetch("/b"))
        assert w.write_fetch(FetchResult(url="http://a.test/c", error="connect")) is None
    assert a.filename == b.filename == f"{directory}/shard=03-00000.warc.gz"
    recs = records(fs, a.filename)
    assert [r[0] for r in recs] == [
        "warcinfo", "request", "response", "metadata", "request", "response",
    ]  # fmt: skip
    info, req, resp, meta = recs[0], recs[1], recs[2], recs[3]
    assert info[1]["WARC-Filename"] == "shard=03-00000.warc.gz"
    assert b"software: batchcrawl/0.1\r\n" in info[3]
    assert b"format: WARC File Format 1.1\r\n" in info[3]
    for rec in recs[1:]:
        assert rec[1].protocol == "WARC/1.1"
        assert rec[1]["WARC-Warcinfo-ID"] == info[1]["WARC-Record-ID"]
        assert rec[4] is True  # warcio verified block (and payload) digests
    assert req[1]["WARC-Concurrent-To"] == resp[1]["WARC-Record-ID"]
    assert resp[1]["WARC-Concurrent-To"] == req[1]["WARC-Record-ID"]
    assert meta[1]["WARC-Concurrent-To"] == resp[1]["WARC-Record-ID"]
    for rec in (req, resp, meta):
        assert rec[1]["WARC-Target-URI"] == "http://a.test/a"
        assert rec[1]["WARC-Date"] == "2023-11-14T22:13:20.250000Z"
        assert rec[1]["WARC-IP-Address"] == "127.0.0.1"
    assert resp[1]["WARC-Payload-Digest"] == payload_digest(fetch().raw_body)
    assert resp[3] == fetch().raw_body
    assert resp[2].get_statuscode() == "200"
    assert req[2].protocol == "GET" and req[2].statusline == "/a HTTP/1.1"
    assert meta[3] == (
        b"fetchTimeMs: 125\r\noutlink: http://a.test/y\r\noutlink: http://b.test/\r\n"
    )
    assert resp[1]["Content-Type"] == "application/http; msgtype=response"


def test_a_reference_kept_to_a_records_bytes_does_not_break_the_next_write(tmp_path, monkeypatch):
    # a profiler, a memory probe's gc.get_objects() or a debugger may hold what gzip_member was
    # given past the call: the thread's next fetch must still be written (a view of the thread's
    # own buffer kept it exported: BufferError on its next truncation)
    import batchcrawl.fetch.warcrecords as warcrecords

    kept = []

    def holding(data, level, **kw):
        kept.append(data)
        return gzip_member(data, level, **kw)

    monkeypatch.setattr(warcrecords, "gzip_member", holding)
    fs = fsspec.filesystem("file")
    with writer(fs, str(tmp_path / "warc")) as w:
        locs = [w.write_fetch(fetch(f"/p{i}", body=b"x" * (100 * i + 1))) for i in range(3)]
    assert len(kept) == 1 + 3 * 2  # warcinfo, then request + response of each fetch
    recs = records(fs, locs[0].filename)
    assert [r[0] for r in recs] == ["warcinfo"] + ["request", "response"] * 3
    assert [r[3] for r in recs if r[0] == "response"] == [b"x" * (100 * i + 1) for i in range(3)]
    assert all(r[4] is True for r in recs[1:])


def test_digests_recomputed_independently(fs_dir):
    """Block digest = SHA-1 of the record block, payload digest = SHA-1 of the HTTP entity body."""
    fs, directory = fs_dir
    body = bytes(range(256)) * 40
    with writer(fs, directory) as w:
        loc = w.write_fetch(fetch(body=body))
    with fs.open(loc.filename, "rb") as fh:
        fh.seek(loc.offset)
        raw = zlib.decompress(fh.read(loc.length), 31)
    head, _, block = raw.partition(b"\r\n\r\n")
    assert block.endswith(b"\r\n\r\n")
    block = block[:-4]
    fields = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    assert int(fields["Content-Length"]) == len(block)
    assert fields["WARC-Block-Digest"] == sha1_b32(block)
    http_head, _, entity = block.partition(b"\r\n\r\n")
    assert entity == body
    assert fields["WARC-Payload-Digest"] == sha1_b32(body) == payload_digest(body)


def test_seek_to_each_location_reads_exactly_one_record(fs_dir):
    fs, directory = fs_dir
    with writer(fs, directory) as w:
        locs = [w.write_fetch(fetch(f"/p{i}", body=b"x" * (i * 97)), outlinks=[]) for i in range(8)]
    for i, loc in enumerate(locs):
        with fs.open(loc.filename, "rb") as fh:
            fh.seek(loc.offset)
            member = fh.read(loc.length)
        d = zlib.decompressobj(31)
        d.decompress(member)
        assert d.eof and d.unused_data == b""  # exactly one whole gzip member
        rec = read_record(fs, loc.filename, loc.offset, loc.length)
        assert (rec.rec_type, rec.target_uri, rec.http_status) == (
            "response",
            f"http://a.test/p{i}",
            200,
        )
        assert rec.payload == b"x" * (i * 97)
        assert rec.digests_ok is True


def test_warcio_check_cli(tmp_path):
    fs = fsspec.filesystem("file")
    with writer(fs, str(tmp_path), rotate=3000) as w:
        for i in range(6):
            w.write_fetch(fetch(f"/{i}", body=b"y" * 1500), outlinks=[f"http://a.test/{i + 1}"])
        w.write_fetch(fetch("/r"), revisit_of=("http://a.test/0", warc_date(T0)))
        w.write_fetch(fetch("/t", truncated="length"))
        files = list(w.files)
    assert len(files) > 1
    exe = shutil.which("warcio")
    cmd = [exe] if exe else [sys.executable, "-m", "warcio.cli"]
    done = subprocess.run([*cmd, "check", "-v", *files], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("digest pass") == 1 + 6 * 3 + len(files) - 1 + 1 + 2
    assert "digest present but not checked (revisit)" in done.stdout


def _members(data: bytes) -> list[bytes]:
    """The decompressed gzip members of a file, in order."""
    out, pos = [], 0
    while pos < len(data):
        d = zlib.decompressobj(31)
        out.append(d.decompress(data[pos:]))
        pos = len(data) - len(d.unused_data)
    return out


def test_warcio_check_fails_on_a_corrupted_file(tmp_path):
    """Control case: the CLI check above can fail (one payload byte changed, gzip still valid)."""
    fs = fsspec.filesystem("file")
    with writer(fs, str(tmp_path)) as w:
        loc = w.write_fetch(fetch(body=b"A" * 2000))
    members = _members(Path(loc.filename).read_bytes())
    members = [m.replace(b"A" * 2000, b"B" + b"A" * 1999) for m in members]
    bad = tmp_path / "bad.warc.gz"
    bad.write_bytes(b"".join(gzip.compress(m, mtime=0) for m in members))
    exe = shutil.which("warcio")
    cmd = [exe] if exe else [sys.executable, "-m", "warcio.cli"]
    done = subprocess.run([*cmd, "check", str(bad)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "digest failed" in done.stdout


# --- HTTP header block --------------------------------------------------------------------------


def test_chunked_transfer_encoding_is_not_claimed(fs_dir):
    fs, directory = fs_dir
    result = fetch(
        response_headers=[
            ("Content-Type", "text/plain"),
            ("Transfer-Encoding", "chunked"),
            ("Content-Encoding", "identity"),
        ],
        body=b"0123456789" * 10,
    )
    with writer(fs, directory) as w:
        loc = w.write_fetch(result)
    rec = read_record(fs, loc.filename, loc.offset, loc.length)
    assert rec.http_headers == [
        ("Content-Type", "text/plain"),
        ("X-Crawler-Transfer-Encoding", "chunked"),
        ("Content-Encoding", "identity"),
        ("Content-Length", "100"),
    ]
    assert rec.payload == b"0123456789" * 10 and rec.digests_ok


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ([("Content-Length", "5")], [("Content-Length", "5")]),
        ([("content-length", " 5 ")], [("content-length", " 5 ")]),
        ([("Content-Length", "900")], [("X-Crawler-Content-Length", "900"), ("Content-Length", "5")]),
        (
            [("Content-Length", "5"), ("Content-Length", "5")],
            [("Content-Length", "5"), ("X-Crawler-Content-Length", "5")],
        ),
        ([("TRANSFER-ENCODING", "gzip, chunked")],
         [("X-Crawler-Transfer-Encoding", "gzip, chunked"), ("Content-Length", "5")]),
        ([], [("Content-Length", "5")]),
    ],
)  # fmt: skip
def test_stored_response_headers(headers, expected):
    assert stored_response_headers(fetch(body=b"hello", response_headers=headers)) == expected


def test_latin1_header_bytes_round_trip(fs_dir):
    fs, directory = fs_dir
    with writer(fs, directory) as w:
        loc = w.write_fetch(fetch(response_headers=[("X-Name", "caf\xe9")]))
        loc2 = w.write_fetch(fetch(response_headers=[("X-Name", "\u2603")]))
    with fs.open(loc.filename, "rb") as fh:
        fh.seek(loc.offset)
        assert b"X-Name: caf\xe9\r\n" in zlib.decompress(fh.read(loc.length), 31)
    # outside Latin-1: warcio's RFC 8187 percent-encoding, digests still consistent
    assert read_record(fs, loc2.filename, loc2.offset, loc2.length).digests_ok


@pytest.mark.parametrize(
    ("kw", "value"),
    [
        ({"truncated": "length"}, "length"),
        ({"truncated": "time"}, "time"),
        ({"error": "reset"}, "disconnect"),
        ({"error": "body_short"}, "disconnect"),
        ({"error": "timeout"}, "time"),
        ({}, None),
    ],
)
def test_warc_truncated(fs_dir, kw, value):
    fs, directory = fs_dir
    result = fetch(body=b"partial", response_headers=[("Content-Length", "1000")], **kw)
    with writer(fs, directory) as w:
        loc = w.write_fetch(result)
    rec = read_record(fs, loc.filename, loc.offset, loc.length)
    assert dict(rec.rec_headers).get("WARC-Truncated") == value
    assert ("X-Crawler-Content-Length", "1000") in rec.http_headers
    assert rec.payload == b"partial" and rec.digests_ok


def test_revisit_record(fs_dir):
    fs, directory = fs_dir
    first = fetch("/orig")
    with writer(fs, directory) as w:
        w.write_fetch(first)
        loc = w.write_fetch(fetch("/dup"), revisit_of=("http://a.test/orig", warc_date(T0)))
    rec = read_record(fs, loc.filename, loc.offset, loc.length)
    h = dict(rec.rec_headers)
    assert rec.rec_type == "revisit" and rec.payload == b""
    assert h["WARC-Profile"] == REVISIT_PROFILE
    assert h["WARC-Refers-To-Target-URI"] == "http://a.test/orig"
    assert h["WARC-Refers-To-Date"] == "2023-11-14T22:13:20.250000Z"
    assert h["WARC-Payload-Digest"] == payload_digest(first.raw_body)
    assert (
        rec.http_status == 200 and ("Content-Type", "text/html; charset=utf-8") in rec.http_headers
    )


def test_missing_request_line_is_synthesized(fs_dir):
    fs, directory = fs_dir
    with writer(fs, directory) as w:
        w.write_fetch(fetch("/q?a=1", request_line=""))
        path = w.files[0]
    req = records(fs, path)[1]
    assert req[2].protocol == "GET" and req[2].statusline == "/q?a=1 HTTP/1.1"


# --- files, rotation, determinism ---------------------------------------------------------------


def test_no_file_without_a_response(fs_dir):
    fs, directory = fs_dir
    with writer(fs, directory) as w:
        assert w.write_fetch(FetchResult(url="http://a.test/", error="dns")) is None
        assert w.files == []
    assert not fs.exists(directory) or fs.ls(directory) == []


def test_rotation(fs_dir):
    fs, directory = fs_dir
    rotate = 4000
    with writer(fs, directory, rotate=rotate) as w:
        locs = [
            w.write_fetch(fetch(f"/{i}", body=bytes(range(256)) * (i % 5 + 1)), outlinks=[])
            for i in range(20)
        ]
        files = list(w.files)
    assert files == [f"{directory}/shard=03-{n:05d}.warc.gz" for n in range(len(files))]
    assert len(files) > 2
    by_file: dict[str, list[WarcLocation]] = {}
    for loc in locs:
        by_file.setdefault(loc.filename, []).append(loc)
    for n, path in enumerate(files):
        size = fs.size(path)
        recs = records(fs, path)
        assert recs[0][0] == "warcinfo"
        assert [r[0] for r in recs[1:]] == ["request", "response", "metadata"] * len(by_file[path])
        last = by_file[path][-1]
        if n < len(files) - 1:
            assert size >= rotate  # closed because it reached the limit ...
            assert last.offset < rotate  # ... and not earlier than needed
        else:
            assert size < rotate or len(by_file[path]) == 1


def test_rotate_every_fetch():
    fs = fsspec.filesystem("memory")
    root = f"/test-warc-{uuid.uuid4().hex}"
    try:
        with writer(fs, root, rotate=1) as w:
            locs = [w.write_fetch(fetch(f"/{i}")) for i in range(3)]
        assert [loc.filename.rsplit("/", 1)[1] for loc in locs] == [
            "shard=03-00000.warc.gz", "shard=03-00001.warc.gz", "shard=03-00002.warc.gz",
        ]  # fmt: skip
        for loc in locs:
            assert [r[0] for r in records(fs, loc.filename)] == ["warcinfo", "request", "response"]
    finally:
        fs.rm(root, recursive=True)


GOLDEN_RESPONSE = (
    "WARC/1.1\r\n"
    "WARC-Type: response\r\n"
    "WARC-Record-ID: <urn:uuid:00000000-0000-4000-8000-000000000002>\r\n"
    "WARC-Date: 2023-11-14T22:13:20.250000Z\r\n"
    "WARC-Target-URI: http://a.test/x\r\n"
    "WARC-Warcinfo-ID: <urn:uuid:00000000-0000-4000-8000-000000000000>\r\n"
    "WARC-IP-Address: 127.0.0.1\r\n"
    "WARC-Concurrent-To: <urn:uuid:00000000-0000-4000-8000-000000000001>\r\n"
    "WARC-Payload-Digest: sha1:VL2MMHO4YXUKFWV63YHTWSBM3GXKSQ2N\r\n"  # SHA-1("hello")
    "WARC-Block-Digest: sha1:QGULBYNX7IDCFJ3NVGAOBZVFLYFNJSRP\r\n"
    "Content-Type: application/http; msgtype=response\r\n"
    "Content-Length: 107\r\n"
    "\r\n"
    "HTTP/1.1 200 OK\r\n"
    "Content-Type: text/plain\r\n"
    "X-Crawler-Transfer-Encoding: chunked\r\n"
    "Content-Length: 5\r\n"
    "\r\n"
    "hello\r\n\r\n"
)


def test_byte_for_byte():
    fs = fsspec.filesystem("memory")
    root = f"/test-warc-{uuid.uuid4().hex}"
    result = fetch(
        body=b"hello",
        response_headers=[("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked")],
    )
    try:
        outputs = []
        for run in range(2):
            with writer(fs, f"{root}/{run}") as w:
                loc = w.write_fetch(result)
                path = w.files[0]
            outputs.append(fs.cat(path))
        assert outputs[0] == outputs[1]
        member = outputs[0][loc.offset : loc.offset + loc.length]
        assert zlib.decompress(member, 31).decode() == GOLDEN_RESPONSE
    finally:
        fs.rm(root, recursive=True)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=5000) | st.text(max_size=3000).map(str.encode), st.integers(0, 9))
def test_gzip_members_of_every_level_read_back(data, level):
    """ISA-L (levels 1-3) and zlib members are both plain gzip: one member decompresses to the data."""
    for isal in (True, False):
        member = gzip_member(memoryview(data), level, isal=isal)
        assert gzip.decompress(member) == data == zlib.decompress(member, 31)


@pytest.mark.skipif(isal_zlib is None, reason="python-isal (batchcrawl[fast]) not installed")
def test_levels_1_to_3_use_isal():
    data = b"<p>the same words again and again</p>" * 300
    assert gzip_member(data, 1) == isal_zlib.compress(data, 1, 31)
    assert gzip_member(data, 1) != gzip_member(data, 1, isal=False)
    assert gzip_member(data, 6) == zlib.compress(data, 6, 31)


@pytest.mark.parametrize("level", [0, 1, 3, 9])
def test_every_level_writes_the_same_records(level):
    """warcio reads the same records (digests checked) whatever compresses the members."""
    fs = fsspec.filesystem("memory")
    root = f"/test-warc-{uuid.uuid4().hex}"
    try:
        got = []
        for lv in (6, level):
            with writer(fs, f"{root}/{lv}", compress_level=lv) as w:
                w.write_fetch(fetch(body=b"<a href=x>hi</a>" * 500), outlinks=["http://a.test/x"])
                path = w.files[0]
            got.append([(t, h.headers, hh and hh.headers, p, ok) for t, h, hh, p, ok in
                        records(fs, path)])  # fmt: skip
        assert got[0] == got[1] and all(r[-1] is not False for r in got[1])
    finally:
        fs.rm(root, recursive=True)


def test_payload_digest_known_values():
    assert payload_digest(b"") == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
    assert (
        payload_digest(b"hello")
        == "sha1:" + base64.b32encode(hashlib.sha1(b"hello").digest()).decode()
    )


def test_warc_date_has_microseconds():
    assert warc_date(0) == "1970-01-01T00:00:00.000000Z"
    assert warc_date(T0) == "2023-11-14T22:13:20.250000Z"


@pytest.mark.parametrize(
    "kw",
    [{"rotate_bytes": 0}, {"prefix": ""}, {"prefix": "a/b"}, {"compress_level": 10}],
)
def test_bad_settings(kw):
    args = dict(fs=fsspec.filesystem("memory"), directory="/x", prefix="p", rotate_bytes=10,
                software="s")  # fmt: skip
    args.update(kw)
    with pytest.raises(WarcSettingError) as err:
        WarcWriter(**args)
    assert isinstance(err.value, ValueError) and isinstance(err.value, BatchcrawlError)
    assert next(iter(kw)) in str(err.value)


def test_read_record_errors(tmp_path):
    fs = fsspec.filesystem("file")
    junk = tmp_path / "junk.warc.gz"
    junk.write_bytes(b"this is not a warc file at all\r\n")
    with pytest.raises(WarcError, match="junk.warc.gz"):
        read_record(fs, str(junk), 0)
    empty = tmp_path / "empty.warc.gz"
    empty.write_bytes(b"")
    with pytest.raises(WarcError, match="no WARC record"):
        read_record(fs, str(empty), 0)
    with pytest.raises(WarcError, match="missing"):
        read_record(fs, str(tmp_path / "missing.warc.gz"), 0)


@settings(max_examples=40, deadline=None)
@given(
    body=st.binary(max_size=3000),
    status=st.integers(100, 599),
    headers=st.lists(
        st.tuples(
            st.sampled_from(
                ["X-A", "Content-Length", "Transfer-Encoding", "Content-Type", "Set-Cookie"]
            ),
            st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=20).map(str.strip),
        ),
        max_size=5,
    ),
    outlinks=st.one_of(st.none(), st.lists(st.just("http://a.test/z"), max_size=3)),
)
def test_any_fetch_round_trips(body, status, headers, outlinks):
    fs = fsspec.filesystem("memory")
    root = f"/test-warc-{uuid.uuid4().hex}"
    try:
        result = fetch(body=body, status=status, response_headers=headers)
        with writer(fs, root) as w:
            loc = w.write_fetch(result, outlinks=outlinks)
            path = w.files[0]
        rec = read_record(fs, loc.filename, loc.offset, loc.length)
        assert rec.payload == body and rec.http_status == status and rec.digests_ok is True
        assert dict(rec.rec_headers)["WARC-Payload-Digest"] == payload_digest(body)
        assert [r[0] for r in records(fs, path)] == ["warcinfo", "request", "response"] + (
            ["metadata"] if outlinks is not None else []
        )
    finally:
        fs.rm(root, recursive=True)


# --- the shared WARC test files through our reader -----------------------------------------------


def _manifest():
    return json.loads((TESTDATA / "manifest.json").read_text()) if TESTDATA.is_dir() else {}


#: Files whose records warcio's digest check does not pass, and why (our reader reports the same).
SHARED_DIGEST_RESULTS = {
    "example-digest.warc": [False, True, True, True],  # record 1: invalid payload digest
    "example-trunc.warc": [None, None, False, None],  # response cut short: block digest fails
    "clipped.warc.gz": [None],  # block shorter than Content-Length: warcio cannot verify (None)
}


@needs_testdata
def test_shared_warc_files_read_record_by_record():
    """Walk each shared file with warcio, then re-read every record at its offset with
    read_record; report counts (-s to see them)."""
    fs = fsspec.filesystem("file")
    read = rejected = files = 0
    digests: dict[str, list] = {}
    for source, entries in _manifest().items():
        for name, expect in entries.items():
            path = str(TESTDATA / source / name)
            is_arc = ".arc" in name
            offsets = []
            try:
                with open(path, "rb") as fh:
                    it = ArchiveIterator(fh, arc2warc=True)
                    for rec in it:
                        it.read_to_end(rec)
                        offsets.append(
                            (rec.rec_type, it.get_record_offset(), it.get_record_length())
                        )
            except Exception:  # noqa: BLE001 - warcio's errors for the broken files
                if expect.get("expect_error"):
                    rejected += 1
                    continue
                if name != "example-wrong-chunks.warc.gz":  # warcio reads 1 record, then stops
                    raise
                assert len(offsets) == 1
            files += 1
            if "record_types" in expect:
                got = [t for t, _, _ in offsets]
                want = [t if t != "arc_header" else "warcinfo" for t in expect["record_types"]]
                assert got == want, name
            if "records" in expect:
                assert len(offsets) == expect["records"], name
            if "record_offsets" in expect:
                want_offsets = expect["record_offsets"]
                assert [o for _, o, _ in offsets[: len(want_offsets)]] == want_offsets
            results = []
            for rec_type, offset, length in offsets:
                rec = read_record(fs, path, offset, length, arc=is_arc)
                assert rec.rec_type == rec_type
                results.append(rec.digests_ok)
                read += 1
            digests[name] = results
            if name in SHARED_DIGEST_RESULTS:
                assert results == SHARED_DIGEST_RESULTS[name], name
            elif name == "clueweb-quirk.warc.gz":
                # LF-only HTTP headers: warcio's payload boundary differs from ClueWeb's digests
                assert results[0] is None and all(r is False for r in results[1:])
            else:
                assert False not in results, name
            if expect.get("digests_valid"):
                assert all(r is not False for r in results)
    passed = sum(r is True for rs in digests.values() for r in rs)
    failed = sum(r is False for rs in digests.values() for r in rs)
    print(
        f"\nshared WARC files: {files} read, {rejected} rejected as expected, {read} records "
        f"re-read at their offsets; digests: {passed} pass, {failed} fail"
    )
    assert rejected == 2 and files == 18


def test_threads_share_one_writer(fs_dir):
    fs, directory = fs_dir
    from concurrent.futures import ThreadPoolExecutor

    w = WarcWriter(fs, directory, "t", 20_000, "batchcrawl/0.1")
    with ThreadPoolExecutor(4) as pool:
        locs = list(
            pool.map(
                lambda i: w.write_fetch(fetch(f"/{i}", body=b"z" * 900), outlinks=[]), range(60)
            )
        )
    w.close()
    assert len({(loc.filename, loc.offset) for loc in locs}) == 60
    for path in w.files:
        recs = records(fs, path)
        assert all(r[4] is not False for r in recs)
        groups = [recs[i : i + 3] for i in range(1, len(recs), 3)]
        for req, resp, meta in groups:
            assert (req[0], resp[0], meta[0]) == ("request", "response", "metadata")
            assert (
                req[1]["WARC-Target-URI"]
                == resp[1]["WARC-Target-URI"]
                == meta[1]["WARC-Target-URI"]
            )
    for i, loc in enumerate(locs):
        assert (
            read_record(fs, loc.filename, loc.offset, loc.length).target_uri == f"http://a.test/{i}"
        )


# --- real fetches written and read back by warcio's ArchiveIterator, field by field -------------


def _expected_block_digest(http_head: bytes, payload: bytes) -> str:
    return sha1_b32(http_head + payload)


def _response_fields(result, resp_id, info_id, req_id, head: bytes, payload: bytes) -> list:
    """The WARC fields expected on the response record of a loopback fetch, in order."""
    return [
        ("WARC-Type", "response"),
        ("WARC-Record-ID", resp_id),
        ("WARC-Date", warc_date(result.started)),
        ("WARC-Target-URI", result.url),
        ("WARC-Warcinfo-ID", info_id),
        ("WARC-IP-Address", "127.0.0.1"),
        ("WARC-Concurrent-To", req_id),
        ("WARC-Payload-Digest", sha1_b32(payload)),
        ("WARC-Block-Digest", _expected_block_digest(head, payload)),
        ("Content-Type", "application/http; msgtype=response"),
        ("Content-Length", str(len(head) + len(payload))),
    ]


def _http_head(first_line: str, headers: list[tuple[str, str]], encoding: str) -> bytes:
    return (first_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n").encode(
        encoding
    )


def _fetch_records(fs, path):
    """(rec_type, rec_headers list, http protocol, statusline, http headers, payload, digests)."""
    out = []
    with fs.open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, check_digests=True):
            payload = rec.raw_stream.read()
            http = rec.http_headers
            out.append(
                (
                    rec.rec_type,
                    list(rec.rec_headers.headers),
                    http.protocol if http else None,
                    http.statusline if http else None,
                    list(http.headers) if http else None,
                    payload,
                    rec.digest_checker.passed,
                )
            )
    return out


def _check_request(rec, result: FetchResult, req_id, resp_id, info_id):
    rec_type, fields, protocol, statusline, headers, payload, ok = rec
    head = _http_head(result.request_line, result.request_headers, "latin-1")
    assert (rec_type, protocol, statusline, payload, ok) == (
        "request", "GET", result.request_line[4:], b"", True,
    )  # fmt: skip
    assert headers == result.request_headers
    assert fields == [
        ("WARC-Type", "request"),
        ("WARC-Record-ID", req_id),
        ("WARC-Date", warc_date(result.started)),
        ("WARC-Target-URI", result.url),
        ("WARC-Warcinfo-ID", info_id),
        ("WARC-IP-Address", "127.0.0.1"),
        ("WARC-Concurrent-To", resp_id),
        ("WARC-Payload-Digest", sha1_b32(b"")),
        ("WARC-Block-Digest", _expected_block_digest(head, b"")),
        ("Content-Type", "application/http; msgtype=request"),
        ("Content-Length", str(len(head))),
    ]


@pytest.fixture
def loopback_fetch(web, test_config, host_name):
    """fetch(path, Response) -> FetchResult: serve the response on a fresh host, fetch it once."""
    cfg = test_config
    with Fetcher(cfg.fetch, cfg.crawl, Resolver(cfg.network), AddressPolicy(cfg.network)) as f:

        def fetch_one(path, response=None):
            if response is not None:
                web.app.add(host_name, path, response)
            return f.fetch(web.base_url(host_name) + path)

        yield fetch_one


def test_chunked_fetch_read_back_field_by_field(loopback_fetch):
    """A chunked response with UTF-8 bytes in a header (decoded as Latin-1 by http.client) is stored
    de-chunked, ``X-Crawler-Transfer-Encoding`` and the stored ``Content-Length`` in its header
    block, the header bytes as they came off the wire."""
    body = bytes(range(32, 127)) * 40
    wire_value = "caf\xc3\xa9 \xe9"  # b"caf\xc3\xa9 \xe9" on the wire
    result = loopback_fetch(
        "/c", Response(200, [("Content-Type", "text/plain"), ("X-Title", wire_value)], body,
                       "chunked")
    )  # fmt: skip
    assert result.error is None and result.header("Transfer-Encoding") == "chunked"
    fs = fsspec.filesystem("memory")
    root = f"/test-warc-{uuid.uuid4().hex}"
    try:
        with writer(fs, root) as w:
            loc = w.write_fetch(result)
            path = w.files[0]
        recs = _fetch_records(fs, path)
        member = zlib.decompress(fs.cat(path)[loc.offset : loc.offset + loc.length], 31)
    finally:
        fs.rm(root, recursive=True)
    assert [r[0] for r in recs] == ["warcinfo", "request", "response"]
    info_id, req_id, resp_id = (f"<urn:uuid:00000000-0000-4000-8000-{n:012d}>" for n in range(3))
    _check_request(recs[1], result, req_id, resp_id, info_id)
    rec_type, fields, protocol, statusline, headers, payload, ok = recs[2]
    stored = [
        ("Content-Type", "text/plain"),
        ("X-Title", wire_value),
        ("X-Crawler-Transfer-Encoding", "chunked"),
        ("Content-Length", str(len(body))),
    ]
    head = _http_head("HTTP/1.1 200 OK", stored, "latin-1")
    assert b"X-Title: caf\xc3\xa9 \xe9\r\n" in head and head in member
    assert (rec_type, protocol, statusline, headers, payload, ok) == (
        "response", "HTTP/1.1", "200 OK", stored, body, True,
    )  # fmt: skip
    assert fields == _response_fields(result, resp_id, info_id, req_id, head, body)


def test_gzip_fetch_read_back_field_by_field(loopback_fetch):
    """A gzip-encoded response is stored content-encoded: payload and payload digest are the gzip
    bytes, ``Content-Encoding`` and the matching ``Content-Length`` are kept as sent."""
    html = b"<html><body>" + b"<p>caf\xc3\xa9</p>" * 300 + b"</body></html>"
    wire = gzip.compress(html, mtime=0)
    result = loopback_fetch(
        "/g.html",
        Response(200, [("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip")],
                 wire),
    )  # fmt: skip
    assert result.error is None and result.body == html and result.raw_body == wire
    fs = fsspec.filesystem("memory")
    root = f"/test-warc-{uuid.uuid4().hex}"
    try:
        with writer(fs, root) as w:
            w.write_fetch(result, outlinks=["http://a.test/"], digest=payload_digest(wire))
            path = w.files[0]
        recs = _fetch_records(fs, path)
    finally:
        fs.rm(root, recursive=True)
    assert [r[0] for r in recs] == ["warcinfo", "request", "response", "metadata"]
    info_id, req_id, resp_id, meta_id = (
        f"<urn:uuid:00000000-0000-4000-8000-{n:012d}>" for n in range(4)
    )
    _check_request(recs[1], result, req_id, resp_id, info_id)
    rec_type, fields, protocol, statusline, headers, payload, ok = recs[2]
    stored = [
        ("Content-Type", "text/html; charset=utf-8"),
        ("Content-Encoding", "gzip"),
        ("Content-Length", str(len(wire))),
    ]
    head = _http_head("HTTP/1.1 200 OK", stored, "latin-1")
    assert (rec_type, protocol, statusline, headers, payload, ok) == (
        "response", "HTTP/1.1", "200 OK", stored, wire, True,
    )  # fmt: skip
    assert gzip.decompress(payload) == html
    assert fields == _response_fields(result, resp_id, info_id, req_id, head, wire)
    rec_type, fields, protocol, statusline, headers, payload, ok = recs[3]
    meta = f"fetchTimeMs: {round(result.download_s * 1000)}\r\noutlink: http://a.test/\r\n".encode()
    assert (rec_type, protocol, headers, payload, ok) == ("metadata", None, None, meta, True)
    assert fields == [
        ("WARC-Type", "metadata"),
        ("WARC-Record-ID", meta_id),
        ("WARC-Date", warc_date(result.started)),
        ("WARC-Target-URI", result.url),
        ("WARC-Warcinfo-ID", info_id),
        ("WARC-IP-Address", "127.0.0.1"),
        ("WARC-Concurrent-To", resp_id),
        ("WARC-Block-Digest", sha1_b32(meta)),  # no payload digest: no HTTP payload
        ("Content-Type", "application/warc-fields"),
        ("Content-Length", str(len(meta))),
    ]


def test_non_latin1_headers_read_back_field_by_field(loopback_fetch):
    """Header values outside Latin-1 (which http.client never produces, but a FetchResult may
    carry) make warcio percent-encode every non-ASCII value of that block (RFC 8187); digests and
    lengths stay consistent."""
    result = loopback_fetch("/page?n=1")
    assert result.status == 200
    body = result.raw_body
    result.response_headers = [
        ("Content-Type", "text/html"),
        ("X-Latin", "caf\xe9"),
        ("X-Snow", "\u2603"),
        ("Content-Disposition", 'attachment; filename="\u2603.txt"'),
    ]
    fs = fsspec.filesystem("memory")
    root = f"/test-warc-{uuid.uuid4().hex}"
    try:
        with writer(fs, root) as w:
            w.write_fetch(result)
            path = w.files[0]
        recs = _fetch_records(fs, path)
    finally:
        fs.rm(root, recursive=True)
    stored = [
        ("Content-Type", "text/html"),
        ("X-Latin", "caf%C3%A9"),
        ("X-Snow", "%E2%98%83"),
        ("Content-Disposition", "attachment; filename*=UTF-8''%E2%98%83.txt"),
        ("Content-Length", str(len(body))),
    ]
    head = _http_head("HTTP/1.1 200 OK", stored, "ascii")
    rec_type, fields, protocol, statusline, headers, payload, ok = recs[2]
    assert (rec_type, protocol, statusline, headers, payload, ok) == (
        "response", "HTTP/1.1", "200 OK", stored, body, True,
    )  # fmt: skip
    assert dict(fields)["WARC-Payload-Digest"] == sha1_b32(body)
    assert dict(fields)["WARC-Block-Digest"] == _expected_block_digest(head, body)
    assert dict(fields)["Content-Length"] == str(len(head) + len(body))


def test_revisit_of_a_refetch_read_back_field_by_field(loopback_fetch):
    """The second fetch of an unchanged page as a revisit: identical-payload-digest profile, the
    first capture's URI and date, the payload digest of the (unstored) body, HTTP headers only."""
    first = loopback_fetch("/page?n=2")
    again = loopback_fetch("/page?n=2")
    assert first.raw_body == again.raw_body and first.raw_body
    fs = fsspec.filesystem("memory")
    root = f"/test-warc-{uuid.uuid4().hex}"
    try:
        with writer(fs, root) as w:
            w.write_fetch(first)
            w.write_fetch(again, revisit_of=(first.url, warc_date(first.started)))
            path = w.files[0]
        recs = _fetch_records(fs, path)
    finally:
        fs.rm(root, recursive=True)
    assert [r[0] for r in recs] == ["warcinfo", "request", "response", "request", "revisit"]
    info_id = "<urn:uuid:00000000-0000-4000-8000-000000000000>"
    req_id, resp_id = (f"<urn:uuid:00000000-0000-4000-8000-{n:012d}>" for n in (3, 4))
    _check_request(recs[3], again, req_id, resp_id, info_id)
    rec_type, fields, protocol, statusline, headers, payload, ok = recs[4]
    stored = [(k, v) for k, v in again.response_headers if k.lower() != "content-length"]
    stored.append(("Content-Length", str(len(again.raw_body))))
    head = _http_head("HTTP/1.1 200 OK", stored, "latin-1")
    assert (rec_type, protocol, statusline, headers, payload) == (
        "revisit", "HTTP/1.1", "200 OK", stored, b"",
    )  # fmt: skip
    assert ok is None  # warcio: "digest present but not checked (revisit)"
    assert fields == [
        ("WARC-Type", "revisit"),
        ("WARC-Record-ID", resp_id),
        ("WARC-Date", warc_date(again.started)),
        ("WARC-Target-URI", again.url),
        ("WARC-Warcinfo-ID", info_id),
        ("WARC-IP-Address", "127.0.0.1"),
        ("WARC-Concurrent-To", req_id),
        ("WARC-Profile", REVISIT_PROFILE),
        ("WARC-Refers-To-Target-URI", first.url),
        ("WARC-Refers-To-Date", warc_date(first.started)),
        ("WARC-Payload-Digest", sha1_b32(first.raw_body)),
        ("WARC-Block-Digest", _expected_block_digest(head, b"")),
        ("Content-Type", "application/http; msgtype=response"),
        ("Content-Length", str(len(head))),
    ]
