"""The crawl's WARC files and CDXJ indexes, checked by the tools archivists use: cdxj-indexer 1.5
(webrecorder's reference indexer, what pywb's ``wb-manager`` runs) and FastWARC's digest checker
(``fastwarc check -p``). Both come with the ``dev`` extra. The crawl is real (a sample web on
loopback with redirects, a duplicate page, 404s and robots.txt; tests/archive_helpers.py)."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest
from archive_helpers import archive_crawl, captures, warc_files
from fastwarc.warc import ArchiveIterator, WarcRecordType
from test_cdxj import fetch
from warcio.warcwriter import WARCWriter

from batchcrawl.export.lake import cdxj_name, export_crawl
from batchcrawl.fetch.warc import WarcWriter
from batchcrawl.store import paths

BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """The console script ``name`` installed beside this Python (the dev extra), else on PATH."""
    path = BIN / name if (BIN / name).exists() else shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: pip install -e '.[dev]'")
    return str(path)


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    crawl, _ = archive_crawl(tmp_path_factory.mktemp("archive") / "crawl")
    return crawl


@pytest.fixture(scope="module")
def export(crawl, tmp_path_factory):
    dest = tmp_path_factory.mktemp("lake")
    export_crawl(crawl, str(dest), tables="index,warc")
    return dest


def indexer_lines(warc: str | Path) -> list[str]:
    """cdxj-indexer's CDXJ for one WARC file, sorted."""
    out = subprocess.run(
        [tool("cdxj-indexer"), str(warc)], capture_output=True, text=True, check=True
    ).stdout
    return sorted(line for line in out.splitlines() if line and not line.startswith("!"))


def split(line: str) -> tuple[str, str, dict]:
    key, stamp, blob = line.split(" ", 2)
    return key, stamp, json.loads(blob)


def assert_same_index(ours: list[str], theirs: list[str]) -> None:
    """Line for line and field for field (key order too), with a readable first difference."""
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert split(a) == split(b)
        assert list(split(a)[2]) == list(split(b)[2])
        assert a == b


def test_the_crawl_has_what_archivists_replay(crawl):
    kinds = {(c["record"].rec_type, c["fetch_status"] // 100) for c in captures(crawl)}
    assert {("response", 2), ("response", 3), ("response", 4), ("revisit", 2)} <= kinds
    assert len(warc_files(crawl)) > 2  # rotation: several files per shard


def test_crawl_time_cdxj_is_what_cdxj_indexer_writes(crawl):
    """fetch.warc_cdxj (default on): each WARC file of the crawl directory has the .cdxj beside it
    that cdxj-indexer would write for it: bare file name, sha1: digests, every field."""
    n = 0
    for rel in warc_files(crawl):
        cdxj = Path(crawl.path(paths.warc_cdxj(rel)))
        ours = cdxj.read_text().splitlines()
        assert ours == sorted(ours) and ours
        assert_same_index(ours, indexer_lines(crawl.path(rel)))
        assert all(split(line)[2]["filename"] == Path(rel).name for line in ours)
        assert all(split(line)[2]["digest"].startswith("sha1:") for line in ours)
        n += len(ours)
    # every capture of the crawl is indexed (robots.txt captures have no fetched row)
    assert n >= len(captures(crawl))


def test_exported_cdxj_is_what_cdxj_indexer_writes(export):
    files = sorted(export.glob("warc/crawl=*/round=*/*.warc.gz"))
    assert files
    for warc in files:
        ours = Path(cdxj_name(str(warc))).read_text().splitlines()
        assert_same_index(ours, indexer_lines(warc))


def fastwarc_records(path: str) -> list[tuple[str, str | None, bool, bool | None]]:
    """``(WARC-Type, WARC-Payload-Digest, block digest ok, payload digest ok or None)`` of every
    record, verified by FastWARC as ``fastwarc check -p`` does (block first without consuming an
    HTTP record, then its HTTP headers parsed and the payload verified)."""
    out = []
    with open(path, "rb") as fh:
        records = ArchiveIterator(fh, record_types=WarcRecordType.any_type, parse_http=False)
        for rec in records:
            digest = rec.headers.get("WARC-Payload-Digest")
            block_ok = rec.verify_block_digest(not rec.is_http)
            payload_ok = None
            if digest is not None:
                if rec.is_http:
                    rec.parse_http()
                payload_ok = rec.verify_payload_digest(True)
            out.append((rec.headers.get("WARC-Type"), digest, block_ok, payload_ok))
    return out


def test_fastwarc_verifies_every_digest(crawl, export):
    """FastWARC verifies every block digest and every payload digest of the crawl's and the
    export's WARC files; ``metadata`` records carry none (no HTTP payload). The one exception is
    by definition: an identical-payload-digest revisit's WARC-Payload-Digest is the *original's*
    payload digest (WARC 1.1 §6.7.2) over a record with no payload, which FastWARC's payload check
    does not know about; it is checked against a response's digest instead. ``fastwarc check -p``
    (the CLI) passes on every file without such a revisit."""
    files = [crawl.path(rel) for rel in warc_files(crawl)]
    files += [str(p) for p in sorted(export.glob("warc/crawl=*/round=*/*.warc.gz"))]
    digests = {c["content_digest"] for c in captures(crawl) if c["record"].rec_type == "response"}
    types, cli_checked = set(), 0
    for path in files:
        records = fastwarc_records(path)
        types.update(t for t, *_ in records)
        for rec_type, payload_digest, block_ok, payload_ok in records:
            assert block_ok, (path, rec_type)
            if rec_type == "metadata":
                assert payload_digest is None
            if rec_type == "revisit" and payload_digest is not None:
                assert payload_digest in digests  # the original's, as WARC 1.1 §6.7.2 says
            else:
                assert payload_ok is not False, (path, rec_type)
        if any(t == "revisit" and d for t, d, *_ in records):
            continue
        run = subprocess.run(
            [tool("fastwarc"), "check", "-p", "-q", path], capture_output=True, text=True
        )
        assert run.returncode == 0, (path, run.stdout[-2000:], run.stderr[-2000:])
        cli_checked += 1
    assert {"warcinfo", "request", "response", "revisit", "metadata"} <= types
    assert cli_checked > 1


def test_fastwarc_payload_check_fails_on_a_metadata_payload_digest(tmp_path):
    """The control: warcio's own writer puts a payload digest on a metadata record (what our
    writer did before), and ``fastwarc check -p`` rejects exactly that; ours has none."""
    meta = b"outlink: http://a.test/x\r\n"
    bad = tmp_path / "bad.warc.gz"
    with open(bad, "wb") as fh:
        w = WARCWriter(fh, gzip=True, warc_version="WARC/1.1")
        w.write_record(
            w.create_warc_record(
                "http://a.test/",
                "metadata",
                payload=io.BytesIO(meta),
                length=len(meta),
                warc_headers_dict={},
            )  # fmt: skip
        )
    fs = fsspec.filesystem("file")
    with WarcWriter(fs, str(tmp_path / "ours"), "ours", 10**9, "test") as ours:
        ours.write_fetch(fetch("http://a.test/", b"<html>a</html>"), outlinks=["http://a.test/x"])
    check = [tool("fastwarc"), "check", "-p", "-q"]
    assert subprocess.run([*check, str(bad)], capture_output=True).returncode != 0
    assert subprocess.run([*check, ours.files[0]], capture_output=True).returncode == 0


def test_cdxj_beside_each_rotated_file_and_none_when_off(tmp_path):
    """The writer indexes each file as it closes it (rotation or close); without ``cdxj_name``
    (``fetch.warc_cdxj = false``) it writes no index."""
    fs = fsspec.filesystem("file")
    bodies = [f"<html>{i}</html>".encode() * 40 for i in range(6)]
    with WarcWriter(fs, str(tmp_path / "on"), "on", 1500, "test",
                    cdxj_name=paths.warc_cdxj) as w:  # fmt: skip
        for i, body in enumerate(bodies):
            w.write_fetch(fetch(f"http://a.test/{i}", body), outlinks=[])
    assert len(w.files) > 2
    for path in w.files:
        assert_same_index(Path(paths.warc_cdxj(path)).read_text().splitlines(),
                          indexer_lines(path))  # fmt: skip
    with WarcWriter(fs, str(tmp_path / "off"), "off", 1500, "test") as w:
        w.write_fetch(fetch("http://a.test/", bodies[0]))
    assert sorted(p.name for p in (tmp_path / "off").iterdir()) == ["off-00000.warc.gz"]
