"""Reading WARC files that batchcrawl did not write (the reader and the CDXJ indexer), with files built
byte by byte here, so a clone without ../shared/testdata still tests WARC reading beyond our own
writer: uncompressed files, WARC/1.0, per-record gzip members, resource and revisit records, a
payload digest that does not match, and a record cut short.

The byte layout follows the WARC 1.1 specification (ISO 28500:2017, §4-§6): a version line, named
fields, an empty line, ``Content-Length`` bytes of block, then two CRLFs.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json

import fsspec
import pytest

from batchcrawl.errors import WarcError
from batchcrawl.export.cdxj import cdxj_lines
from batchcrawl.fetch.warc import read_record

HTML = b"<html><body><a href='/next'>next</a></body></html>"


def sha1(data: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode()


def record(rec_type: str, uri: str | None, block: bytes, *, version: str = "1.1",
           extra: tuple[tuple[str, str], ...] = (), payload: bytes | None = None) -> bytes:  # fmt: skip
    """One WARC record: header fields, block, two CRLFs."""
    fields = [
        ("WARC-Type", rec_type),
        ("WARC-Date", "2024-05-01T12:00:00Z"),
        ("WARC-Record-ID", f"<urn:uuid:{hashlib.md5(block + rec_type.encode()).hexdigest()}>"),
    ]
    if uri is not None:
        fields.append(("WARC-Target-URI", uri))
    fields.append(("WARC-Block-Digest", sha1(block)))
    if payload is not None:
        fields.append(("WARC-Payload-Digest", sha1(payload)))
    fields += [*extra, ("Content-Length", str(len(block)))]
    head = f"WARC/{version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields) + "\r\n"
    return head.encode() + block + b"\r\n\r\n"


def http_response(body: bytes, status: str = "200 OK", ctype: str = "text/html") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def sample_records(version: str = "1.1") -> list[bytes]:
    """warcinfo, request, response, resource and revisit records of one small capture session."""
    response = http_response(HTML)
    return [
        record("warcinfo", None, b"software: handmade\r\nformat: WARC File Format 1.1\r\n",
               version=version, extra=(("Content-Type", "application/warc-fields"),)),
        record("request", "http://a.test/", b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n",
               version=version, extra=(("Content-Type", "application/http; msgtype=request"),)),
        record("response", "http://a.test/", response, version=version, payload=HTML,
               extra=(("Content-Type", "application/http; msgtype=response"),)),
        record("resource", "http://a.test/logo.txt", b"just text", version=version,
               extra=(("Content-Type", "text/plain"),)),
        record("revisit", "http://a.test/again", b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n", version=version,
               payload=HTML,
               extra=(("Content-Type", "application/http; msgtype=response"),
                      ("WARC-Profile", "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"),
                      ("WARC-Refers-To-Target-URI", "http://a.test/"),
                      ("WARC-Refers-To-Date", "2024-05-01T12:00:00Z"))),
    ]  # fmt: skip


def write(tmp_path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def offsets(records: list[bytes], gz: bool) -> list[tuple[int, bytes]]:
    out, pos = [], 0
    for rec in records:
        member = gzip.compress(rec) if gz else rec
        out.append((pos, member))
        pos += len(member)
    return out


@pytest.mark.parametrize("gz", [False, True], ids=["uncompressed", "gzip-per-record"])
@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_every_record_reads_back_at_its_offset(tmp_path, gz, version):
    records = sample_records(version)
    located = offsets(records, gz)
    name = "foreign.warc.gz" if gz else "foreign.warc"
    path = write(tmp_path, name, b"".join(m for _, m in located))
    fs = fsspec.filesystem("file")
    got = [read_record(fs, path, off, len(m)) for off, m in located]
    assert [r.rec_type for r in got] == ["warcinfo", "request", "response", "resource", "revisit"]
    response = got[2]
    assert response.target_uri == "http://a.test/" and response.http_status == 200
    assert response.payload == HTML and response.digests_ok is True
    assert dict(response.http_headers)["Content-Type"] == "text/html"
    assert got[3].payload == b"just text" and got[3].http_status is None
    assert got[1].http_status is None  # a request has no status
    assert dict(got[4].rec_headers)["WARC-Refers-To-Target-URI"] == "http://a.test/"


@pytest.mark.parametrize("gz", [False, True], ids=["uncompressed", "gzip-per-record"])
def test_cdxj_indexes_the_captures_of_a_foreign_file(tmp_path, gz):
    records = sample_records()
    located = offsets(records, gz)
    data = b"".join(m for _, m in located)
    lines = cdxj_lines(io.BytesIO(data), "foreign.warc")
    # response, resource and revisit are captures; warcinfo and request are not
    assert len(lines) == 3
    fs = fsspec.filesystem("file")
    path = write(tmp_path, "f.warc.gz" if gz else "f.warc", data)
    for line in lines:
        key, ts, rest = line.split(" ", 2)
        entry = json.loads(rest)
        assert ts == "20240501120000" and key.startswith("test,a)/")
        rec = read_record(fs, path, int(entry["offset"]), int(entry["length"]))
        assert rec.target_uri == entry["url"]
    assert {json.loads(line.split(" ", 2)[2])["offset"] for line in lines} == {
        str(located[i][0]) for i in (2, 3, 4)
    }


def test_wrong_payload_digest_is_reported_not_hidden(tmp_path):
    bad = record("response", "http://a.test/", http_response(HTML), payload=HTML + b"x")
    path = write(tmp_path, "bad.warc", bad)
    rec = read_record(fsspec.filesystem("file"), path, 0)
    assert rec.payload == HTML and rec.digests_ok is False


def test_record_cut_short_is_an_error_or_unverified(tmp_path):
    whole = record("response", "http://a.test/", http_response(HTML), payload=HTML)
    cut = whole[: len(whole) - 30]  # the block ends before Content-Length says
    path = write(tmp_path, "cut.warc", cut)
    try:
        rec = read_record(fsspec.filesystem("file"), path, 0)
    except WarcError as exc:
        assert "cut.warc" in str(exc)
    else:  # a short block can never pass a digest check
        assert rec.digests_ok is not True and len(rec.payload) < len(HTML)


def test_junk_at_the_offset_is_a_warc_error(tmp_path):
    path = write(tmp_path, "junk.warc", b"this is not a WARC file\r\n" * 4)
    with pytest.raises(WarcError, match=r"junk\.warc.*offset 0"):
        read_record(fsspec.filesystem("file"), path, 0)
