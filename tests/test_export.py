"""batchcrawl export and the Common Crawl-compatible index, on a real small crawl.

The crawl is built once per module: a 5-host sample web on loopback, two rounds on a 2-worker
LocalCluster (batchcrawl.round.run_rounds). Exports go to local folders and to a real S3 API (moto's
ThreadedMotoServer on 127.0.0.1, credentials and endpoint from AWS_* environment variables, as the
CLI expects them); what was exported is read back with DuckDB (through an fsspec filesystem
registered with DuckDB), pyarrow and warcio.
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from batchcrawl.cli import main
from batchcrawl.config import loopback_test_config, to_toml
from batchcrawl.export import ccindex
from batchcrawl.export.lake import (
    MANIFEST_DIR,
    ExportSettingError,
    cdxj_name,
    export_crawl,
    exported_rounds,
    marker_path,
    parse_tables,
)
from batchcrawl.fetch.warc import read_record
from batchcrawl.frontier.inject import inject
from batchcrawl.round import run_rounds
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.testing.webserver import MultiHostServer
from batchcrawl.urls import surt

REPO = Path(__file__).resolve().parents[1]
NAME = "testcrawl"
ROUNDS = 2


# -- the crawl -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def crawl(tmp_path_factory) -> CrawlDir:
    """A real crawl of a 5-host, 100-page sample web: 2 rounds, 2 shards, 2 Dask workers."""
    web = SampleWeb(5, 100, seed=3, page_bytes=4000, trap=False)
    server = MultiHostServer(web).start()
    web.bind(server.port)
    try:
        cfg = loopback_test_config(
            crawl={"name": NAME},
            politeness={"host_delay_s": 0.02, "ip_delay_s": 0.0, "ip_concurrency": 8,
                        "max_crawl_delay_s": 0.05},
            frontier={"buckets": 4},
            fetch={"shards": 2, "threads": 4, "connect_timeout_s": 2.0, "read_timeout_s": 2.0,
                   "total_timeout_s": 5.0},
            round={"workers": 2, "threads_per_worker": 1},
        )  # fmt: skip
        path = tmp_path_factory.mktemp("export") / "crawl"
        crawl = CrawlDir.create(str(path), to_toml(cfg), buckets=cfg.frontier.buckets)
        inject(crawl, cfg, web.seeds(), source="seeds")
        summaries = run_rounds(crawl.url, cfg, ROUNDS)
        assert [s["round"] for s in summaries] == list(range(1, ROUNDS + 1))
        yield crawl
    finally:
        server.stop()


def source_rows(crawl: CrawlDir, table: str) -> dict[int, int]:
    """Rows per round of a committed per-round table."""
    t = crawl.read_current(table, columns=["round"])
    out: dict[int, int] = {}
    for r in t.column("round").to_pylist():
        out[r] = out.get(r, 0) + 1
    return out


def captures(crawl: CrawlDir) -> pa.Table:
    """The committed fetched rows that have a WARC record."""
    t = crawl.read_current("fetched")
    return t.filter(t.column("warc_filename").is_valid())


def cdxj_records(crawl: CrawlDir) -> int:
    """Capture records in the crawl's committed WARC files (independent count via warcio)."""
    from batchcrawl.export.cdxj import cdxj_lines

    n = 0
    for name in sorted(set(captures(crawl).column("warc_filename").to_pylist())):
        with crawl.fs.open(crawl.path(name), "rb") as fh:
            n += len(cdxj_lines(fh, name))
    return n


def run_cli(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env or {})


# -- local export ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def local_export(crawl, tmp_path_factory):
    # an orphan of a round that died before its commit: never listed, so never exported
    orphan = crawl.path("fetched/round=2/shard=09.parquet")
    pq.write_table(crawl.read_table("fetched", []), orphan)
    dest = tmp_path_factory.mktemp("dest") / "lake"
    result = run_cli("export", crawl.url, dest, "--tables", "fetched,links,fetchlists,index,warc")
    assert result.exit_code == 0, result.output
    return dest, json.loads(result.stdout.strip().splitlines()[-1])


def test_local_export_layout_counts_and_markers(crawl, local_export):
    dest, summary = local_export
    assert summary["exported"] == [1, 2] and summary["skipped"] == [] and summary["missing"] == []
    for table in ("fetched", "links", "fetchlists"):
        per_round = source_rows(crawl, table)
        assert summary["rows"][table] == sum(per_round.values())
        for r, n in per_round.items():
            files = sorted((dest / table / f"crawl={NAME}" / f"round={r}").glob("*.parquet"))
            assert [f.name for f in files] == ["part-00.parquet", "part-01.parquet"]
            parts = [pq.read_table(f) for f in files]
            assert sum(p.num_rows for p in parts) == n
            assert all("round" not in p.column_names for p in parts)  # partition column: path only
    assert not (dest / "fetched" / f"crawl={NAME}" / "round=2" / "part-09.parquet").exists()
    markers = exported_rounds(str(dest), NAME)
    assert sorted(markers) == [1, 2]
    for r, marker in markers.items():
        assert marker["round"] == r and marker["crawl"] == NAME
        assert set(marker["tables"]) == {"fetched", "links", "fetchlists", "index", "warc"}
        for table, files in marker["tables"].items():
            for f in files:
                assert (dest / f["path"]).is_file(), (table, f)


def test_local_export_reads_back_with_duckdb_hive_partitions(crawl, local_export):
    dest, _ = local_export
    con = duckdb.connect()
    got = con.sql(
        f"SELECT crawl, round, count(*) FROM read_parquet('{dest}/fetched/*/*/*.parquet', "
        "hive_partitioning = true) GROUP BY ALL ORDER BY round"
    ).fetchall()
    assert got == [(NAME, r, n) for r, n in sorted(source_rows(crawl, "fetched").items())]
    # exported warc_filename points into DEST
    names = con.sql(
        f"SELECT DISTINCT warc_filename FROM read_parquet('{dest}/fetched/*/*/*.parquet') "
        "WHERE warc_filename IS NOT NULL"
    ).fetchall()
    assert names and all((dest / n).is_file() for (n,) in names)


def test_warc_files_are_byte_copies_with_cdxj_beside(crawl, local_export):
    dest, summary = local_export
    sources = sorted(set(captures(crawl).column("warc_filename").to_pylist()))
    assert summary["warc_files"] == len(sources) > 0
    for src in sources:
        r = int(src.split("round=")[1].split("/")[0])
        out = dest / "warc" / f"crawl={NAME}" / f"round={r}" / posixpath.basename(src)
        with crawl.fs.open(crawl.path(src), "rb") as fh:
            assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(fh.read()).digest()
        assert Path(cdxj_name(str(out))).is_file()
    assert summary["cdxj_lines"] == cdxj_records(crawl)


def test_cdxj_offsets_seek_to_their_records_in_the_exported_warc(local_export):
    dest, _ = local_export
    import fsspec

    fs = fsspec.filesystem("file")
    lines = 0
    for path in sorted(dest.glob(f"warc/crawl={NAME}/round=*/*.cdxj")):
        text = path.read_text().splitlines()
        assert text == sorted(text) and text
        for line in text:
            key, stamp, blob = line.split(" ", 2)
            fields = json.loads(blob)
            # the bare WARC name, as cdxj-indexer writes it and a pywb collection resolves it
            warc = path.parent / fields["filename"]
            assert warc == path.with_name(path.name.replace(".cdxj", ".warc.gz"))
            with open(warc, "rb") as fh:  # seek by hand: a gzip member starts
                fh.seek(int(fields["offset"]))
                assert fh.read(2) == b"\x1f\x8b"
            rec = read_record(fs, str(warc), int(fields["offset"]), int(fields["length"]))
            assert rec.rec_type in ("response", "revisit")
            assert rec.target_uri == fields["url"] and key == surt(fields["url"])
            assert str(rec.http_status) == fields["status"]
            assert rec.digests_ok is not False
            lines += 1
    assert lines > 50


def test_index_matches_common_crawl_schema_and_the_crawl(crawl, local_export):
    dest, summary = local_export
    dataset = ds.dataset(str(dest / "index"), format="parquet", partitioning="hive")
    table = dataset.to_table()
    # every Common Crawl column we have, with Common Crawl's type; crawl comes from the partition
    for field in schemas.schema("index"):
        if field.name != "crawl":
            assert dataset.schema.field(field.name).type == field.type, field.name
    assert set(table.column("crawl").to_pylist()) == {NAME}
    rows = table.to_pylist()
    fetched = captures(crawl)
    robots = [r for r in rows if r["subset"] == "robotstxt"]
    assert len(rows) == fetched.num_rows + len(robots) == summary["rows"]["index"]
    assert len(rows) == cdxj_records(crawl)  # the index covers every capture in the WARC files
    assert robots and all(r["url_path"] == "/robots.txt" for r in robots)
    by_url = {}
    for r in fetched.to_pylist():
        by_url.setdefault(r["url"], []).append(r)
    for row in rows:
        assert row["url_surtkey"] == surt(row["url"])
        assert row["warc_segment"] == str(row["round"])
        assert row["subset"] == (
            "robotstxt"
            if row["subset"] == "robotstxt"
            else "warc"
            if 200 <= row["fetch_status"] < 300
            else "crawldiagnostics"
        )
        assert row["url_host_tld"] == "test" and row["url_protocol"] == "http"
        assert row["url_host_name_reversed"] == ".".join(reversed(row["url_host_name"].split(".")))
        if row["subset"] != "robotstxt":
            src = [s for s in by_url[row["url"]] if s["warc_record_offset"] ==
                   row["warc_record_offset"]]  # fmt: skip
            assert len(src) == 1
            assert "sha1:" + row["content_digest"] == src[0]["content_digest"]
            assert row["fetch_status"] == src[0]["fetch_status"]
            assert row["fetch_time"] == src[0]["fetch_time"]
    assert {r["subset"] for r in rows} >= {"warc", "robotstxt"}
    # sorted by SURT key inside each part, as Common Crawl's index
    for f in dest.glob("index/*/*/*.parquet"):
        keys = pq.read_table(f, columns=["url_surtkey"]).column(0).to_pylist()
        assert keys == sorted(keys)


def test_index_records_are_where_the_index_says(local_export):
    dest, _ = local_export
    import fsspec

    fs = fsspec.filesystem("file")
    con = duckdb.connect()
    rows = con.sql(
        f"SELECT url, warc_filename, warc_record_offset, warc_record_length, content_digest, "
        f"fetch_time, content_mime_type, subset "
        f"FROM read_parquet('{dest}/index/*/*/*.parquet') ORDER BY url_surtkey"
    ).fetchall()
    kinds = set()
    for url, name, offset, length, digest, fetch_time, mime, subset in rows:
        rec = read_record(fs, str(dest / name), offset, length)
        headers = dict(rec.rec_headers)
        assert rec.target_uri == url
        assert headers["WARC-Payload-Digest"] == f"sha1:{digest}"
        # every row, robots.txt ones too, has the WARC-Date to the millisecond
        date = datetime.fromisoformat(headers["WARC-Date"].replace("Z", "+00:00"))
        assert fetch_time == date.replace(tzinfo=None, microsecond=date.microsecond // 1000 * 1000)
        # a revisit's byte range has no body: Common Crawl's mime says so
        assert (mime == "warc/revisit") == (rec.rec_type == "revisit"), (url, mime)
        kinds.add((rec.rec_type, subset))
    assert {("revisit", "warc"), ("response", "robotstxt")} <= kinds


def test_rerun_skips_everything_and_new_tables_are_added(crawl, local_export, tmp_path):
    dest, _ = local_export
    written: list[str] = []
    again = export_crawl(crawl, str(dest), crawl_name=NAME, on_file=written.append)
    assert again["exported"] == [] and again["skipped"] == [1, 2] and written == []
    # a new destination: round 1 with fetched only, then everything
    other = tmp_path / "lake2"
    first = export_crawl(crawl, str(other), crawl_name=NAME, rounds=(1, 1), tables="fetched")
    assert first["exported"] == [1] and first["rows"] == {
        "fetched": source_rows(crawl, "fetched")[1]
    }
    second = export_crawl(
        crawl, str(other), crawl_name=NAME, tables="fetched,links", on_file=written.append
    )
    assert second["exported"] == [1, 2]
    assert not any("fetched/" in w and "round=1/" in w for w in written)  # only links of round 1
    assert any("links/" in w and "round=1/" in w for w in written)
    assert set(exported_rounds(str(other), NAME)[1]["tables"]) == {"fetched", "links"}
    third = export_crawl(crawl, str(other), crawl_name=NAME, rounds=(2, 9), tables=["links"])
    assert third["skipped"] == [2] and third["missing"] == list(range(3, 10))


def test_a_round_committed_again_is_exported_again(crawl, tmp_path):
    """After a return to an older generation (README: rename the newest manifest) a round number
    is committed again with other rows, in files of the same names: the export must not keep the
    old round because its marker exists. It removes the old files, exports the round anew (every
    table exported before) and says so; rounds that did not change are skipped."""
    import shutil

    copy = CrawlDir.open(shutil.copytree(crawl.root, tmp_path / "crawl", symlinks=True))
    dest = str(tmp_path / "lake")
    first = export_crawl(copy, dest, crawl_name=NAME, tables="fetched,warc")
    assert first["exported"] == [1, 2] and first["replaced"] == []
    manifest = copy.manifest()
    round2 = sorted((e for e in manifest.tables["fetched"] if "/round=2/" in e.path),
                    key=lambda e: e.path)  # fmt: skip
    assert len(round2) == 2  # one file per shard
    kept, dropped = round2
    rows = copy.read_table("fetched", [kept])
    entry = copy.write_table("fetched", kept.path, rows.slice(0, rows.num_rows // 2))
    others = [e for e in manifest.tables["fetched"] if e not in round2]
    copy.commit(manifest, {"fetched": [*others, entry]}, {"step": "again"}, round=manifest.round)
    old_parts = sorted(Path(dest, "fetched", f"crawl={NAME}", "round=2").iterdir())
    assert len(old_parts) == 2

    again = export_crawl(copy, dest, crawl_name=NAME, tables="fetched")
    assert again["replaced"] == [2] and again["exported"] == [2] and again["skipped"] == [1]
    parts = sorted(Path(dest, "fetched", f"crawl={NAME}", "round=2").iterdir())
    assert len(parts) == 1  # the dropped shard's old part is gone
    assert sum(pq.read_metadata(p).num_rows for p in parts) == rows.num_rows // 2
    marker = exported_rounds(dest, NAME)[2]
    assert set(marker["tables"]) == {"fetched", "warc"}  # warc was exported before: again too
    assert marker["generation"] == copy.manifest().generation
    assert export_crawl(copy, dest, crawl_name=NAME, tables="fetched")["skipped"] == [1, 2]


def test_crawl_without_rounds_exports_nothing(tmp_path):
    empty = CrawlDir.create(str(tmp_path / "empty"), "", buckets=1)
    summary = export_crawl(empty, str(tmp_path / "lake"))
    assert summary["exported"] == summary["skipped"] == summary["missing"] == []
    assert exported_rounds(str(tmp_path / "lake"), "empty") == {}
    assert export_crawl(empty, str(tmp_path / "lake"), rounds=(1, 2))["missing"] == [1, 2]


def test_export_errors_name_the_input(crawl, tmp_path):
    result = run_cli("export", crawl.url, tmp_path / "x", "--tables", "fetched,frontier")
    assert result.exit_code == 2 and "unknown table 'frontier'" in result.stderr
    result = run_cli("export", crawl.url, tmp_path / "x", "--set", "crawl.name=a/b")
    assert result.exit_code == 2 and "crawl name 'a/b'" in result.stderr
    result = run_cli("export", crawl.url, tmp_path / "x", "--rounds", "3..1")
    assert result.exit_code == 2
    with pytest.raises(ExportSettingError):
        parse_tables("")
    assert parse_tables("index, warc,index") == ("index", "warc")


@pytest.mark.parametrize(
    "dest, reason",
    [
        ("/proc/nope/x", "No such file or directory"),  # under a virtual filesystem
        ("/sys/x", "not permitted"),
        ("/dev/null/x", "Not a directory"),  # under a device file
        ("afile", "is a file, not a folder"),  # an existing regular file
        ("afile/sub", "Not a directory"),  # under one
    ],
)
def test_an_unusable_destination_is_bad_input_in_one_line(tmp_path, monkeypatch, dest, reason):
    """Every destination that cannot be created or written exits 2 (README's exit codes) with one
    line naming it, before anything is read, and writes nothing (the crawl is untouched)."""
    crawl = CrawlDir.create(str(tmp_path / "empty"), "", buckets=1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_bytes(b"x")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    result = run_cli("export", crawl.url, dest, "--tables", "fetched")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"export destination {dest!r}" in lines[0], lines
    assert reason in lines[0] and "Error" not in lines[0].removeprefix("batchcrawl: error"), lines
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert (tmp_path / "afile").read_bytes() == b"x"


# -- S3 (moto) ---------------------------------------------------------------------------------
def s3():
    import s3fs

    return s3fs.S3FileSystem()  # endpoint and keys from the environment


def test_s3_export_reads_back_with_duckdb_and_pyarrow(crawl, s3_env):
    result = run_cli("export", crawl.url, "s3://lake/cli")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["exported"] == [1, 2]
    fs = s3()
    assert fs.exists(f"lake/cli/{marker_path(NAME, 2)}")
    con = duckdb.connect()
    con.register_filesystem(fs)
    for table in ("fetched", "links"):
        got = con.sql(
            f"SELECT round, count(*) FROM read_parquet('s3://lake/cli/{table}/*/*/*.parquet', "
            "hive_partitioning = true) GROUP BY round ORDER BY round"
        ).fetchall()
        assert got == sorted(source_rows(crawl, table).items())
    # a Common Crawl-style query: WARC locations of the successful captures of one domain
    domain = captures(crawl).column("url_host_registered_domain")[0].as_py()
    got = con.sql(
        "SELECT url, warc_filename, warc_record_offset, warc_record_length "
        "FROM read_parquet('s3://lake/cli/index/*/*/*.parquet', hive_partitioning = true) "
        f"WHERE crawl = '{NAME}' AND subset = 'warc' AND url_host_registered_domain = '{domain}'"
    ).fetchall()
    want = captures(crawl).to_pylist()
    want = [r for r in want if r["url_host_registered_domain"] == domain
            and 200 <= r["fetch_status"] < 300]  # fmt: skip
    assert len(got) == len(want) > 0
    dataset = ds.dataset("lake/cli/index", filesystem=fs, format="parquet", partitioning="hive")
    assert dataset.count_rows() == summary["rows"]["index"]
    # a sample of WARC records, cut out of S3 by range, equals the crawl's records
    for url, name, offset, length in sorted(got)[:15]:
        exported = read_record(fs, f"lake/cli/{name}", offset, length)
        src = next(r for r in want if r["url"] == url and r["warc_record_offset"] == offset)
        original = read_record(crawl.fs, crawl.path(src["warc_filename"]), offset, length)
        assert exported.payload == original.payload and exported.target_uri == url
        assert exported.rec_headers == original.rec_headers


_KILLABLE = """
import sys
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.export.lake import export_crawl

def on_file(rel):
    if "round=2/" in rel:
        print("PAUSED", rel, flush=True)
        sys.stdin.readline()  # blocks until the test kills us

export_crawl(CrawlDir.open(sys.argv[1]), sys.argv[2], crawl_name=sys.argv[3], on_file=on_file)
print("FINISHED", flush=True)
"""


def test_killed_export_leaves_round_incomplete_and_rerun_completes_it(crawl, s3_env):
    dest = "s3://lake/killed"
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLABLE, crawl.url, dest, NAME],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={**os.environ, **s3_env},
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("PAUSED"), line
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    fs = s3()
    partial = [p for p in fs.find("lake/killed") if "/round=2/" in p]
    assert partial  # partial output of round 2 is there ...
    assert sorted(exported_rounds(dest, NAME)) == [1]  # ... but round 2 is not complete
    assert not fs.exists(f"lake/killed/{marker_path(NAME, 2)}")

    fs.invalidate_cache()
    result = run_cli("export", crawl.url, dest)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["exported"] == [2] and summary["skipped"] == [1]
    assert sorted(exported_rounds(dest, NAME)) == [1, 2]
    con = duckdb.connect()
    con.register_filesystem(fs)
    got = con.sql(
        "SELECT round, count(*) FROM read_parquet('s3://lake/killed/fetched/*/*/*.parquet', "
        "hive_partitioning = true) GROUP BY round ORDER BY round"
    ).fetchall()
    assert got == sorted(source_rows(crawl, "fetched").items())  # nothing duplicated
    assert fs.ls(f"lake/killed/{MANIFEST_DIR}/crawl={NAME}", detail=False)


# -- the index, unit by unit -------------------------------------------------------------------
def test_url_columns_follow_common_crawl_meanings():
    row = ccindex.url_columns("https://news.bbc.co.uk:8443/a/b.html?x=1&y=2")
    assert row["url_surtkey"] == surt("https://news.bbc.co.uk:8443/a/b.html?x=1&y=2")
    assert (row["url_host_tld"], row["url_host_2nd_last_part"], row["url_host_3rd_last_part"],
            row["url_host_4th_last_part"], row["url_host_5th_last_part"]) == (
        "uk", "co", "bbc", "news", None)  # fmt: skip
    assert row["url_host_registry_suffix"] == "co.uk"
    assert row["url_host_registered_domain"] == "bbc.co.uk"
    assert row["url_host_name_reversed"] == "uk.co.bbc.news"
    assert (row["url_protocol"], row["url_port"], row["url_path"], row["url_query"]) == (
        "https", 8443, "/a/b.html", "x=1&y=2")  # fmt: skip
    blog = ccindex.url_columns("http://me.blogspot.com/")
    assert blog["url_host_registered_domain"] == "blogspot.com"  # ICANN section only
    assert blog["url_host_private_suffix"] == "blogspot.com"
    assert blog["url_host_private_domain"] == "me.blogspot.com"
    assert (blog["url_port"], blog["url_query"]) == (None, None)
    ip = ccindex.url_columns("http://127.0.0.1:8080/")
    assert ip["url_host_name"] == "127.0.0.1" and ip["url_host_tld"] is None
    assert ip["url_host_name_reversed"] is None
    with pytest.raises(ccindex.CCIndexError, match="no host"):
        ccindex.url_columns("http:///nohost")


@given(
    labels=st.lists(st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True), min_size=1, max_size=6),
    path=st.from_regex(r"(/[a-z0-9]{0,5}){0,3}", fullmatch=True),
)
def test_host_parts_reassemble_the_host(labels, path):
    host = ".".join(labels)
    row = ccindex.url_columns(f"http://{host}{path}")
    assert row["url_host_name_reversed"].split(".") == labels[::-1]
    parts = [row[c] for c in ("url_host_tld", "url_host_2nd_last_part", "url_host_3rd_last_part",
                              "url_host_4th_last_part", "url_host_5th_last_part")]  # fmt: skip
    assert parts[: len(labels)] == labels[::-1][:5]
    assert host.endswith(row["url_host_registry_suffix"])
    assert host.endswith(row["url_host_private_suffix"])
    domain = row["url_host_private_domain"]
    if len(labels) == 1:  # a bare public suffix (the PSL's "*" rule) has no registrable domain
        assert domain is None and row["url_host_registered_domain"] is None
    else:
        assert domain.endswith("." + row["url_host_private_suffix"]) and host.endswith(domain)
    assert row["url_path"] == (path or "/")


@pytest.mark.parametrize(
    ("status", "robots", "subset"),
    [(200, False, "warc"), (204, False, "warc"), (301, False, "crawldiagnostics"),
     (304, False, "crawldiagnostics"), (404, False, "crawldiagnostics"),
     (503, False, "crawldiagnostics"), (200, True, "robotstxt"), (404, True, "robotstxt")],
)  # fmt: skip
def test_subset_of(status, robots, subset):
    assert ccindex.subset_of(status, robots=robots) == subset


def test_captures_without_a_fetched_row_are_robotstxt_only_when_they_are_robots_txt():
    """A fresh-user trial: a sitemap.xml capture (archived, no fetched row) was indexed in the
    ``robotstxt`` subset. Only /robots.txt is; a sitemap goes by its status, as a page."""
    from batchcrawl.cdxj import Capture

    def capture(url, status, offset):
        fields = {"url": url, "status": str(status), "mime": "text/plain", "digest": "sha1:AB"}
        return Capture("response", "2026-01-01T00:00:00.123456Z", fields, offset, 100)

    caps = [capture("http://a.test/robots.txt", 200, 0), capture("http://a.test/sitemap.xml", 200, 100),
            capture("http://a.test/gone-sitemap.xml", 404, 200), capture("http://a.test/p", 200, 300)]  # fmt: skip
    rows = ccindex.robots_rows(caps, "w.warc.gz", known={300})  # the page has a fetched row
    assert [(r["url_path"], r["subset"]) for r in rows] == [
        ("/robots.txt", "robotstxt"), ("/sitemap.xml", "warc"),
        ("/gone-sitemap.xml", "crawldiagnostics"),
    ]  # fmt: skip


def test_index_refuses_offsets_beyond_32_bits(crawl):
    rows = captures(crawl).slice(0, 1).to_pylist()
    rows[0]["warc_record_offset"] = 2**31 - 10
    table = pa.Table.from_pylist(rows, schema=crawl.read_current("fetched").schema)
    with pytest.raises(ccindex.CCIndexError, match="warc_max_bytes"):
        ccindex.index_table(table, crawl=NAME, segment="1")
    rows[0]["warc_record_offset"] = 100
    assert ccindex.index_table(pa.Table.from_pylist(rows, schema=table.schema), crawl=NAME,
                               segment="1").num_rows == 1  # fmt: skip


def test_an_export_made_before_extract_gets_the_wet_files_and_languages_after_it(crawl, tmp_path):
    """A fresh-user trial: ``export --tables text,wet,index`` before ``extract`` recorded each
    round's ``wet`` as done (no files) and its index without ``content_languages``; the export
    after the extract skipped every round, so the WET files and languages never reached the lake.
    Now ``wet`` and ``index`` are exported again once the round's ``text`` rows changed."""
    import shutil

    from batchcrawl.extract import extract_crawl

    copy = CrawlDir.open(str(shutil.copytree(crawl.root, tmp_path / "crawl")))
    dest = tmp_path / "lake"
    tables = "text,wet,index"

    def export() -> dict:
        result = run_cli("export", copy.url, dest, "--tables", tables)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout.strip().splitlines()[-1])

    before = export()
    assert before["exported"] == [1, 2] and before["wet_files"] == 0
    assert "text" not in before["rows"] or before["rows"]["text"] == 0
    assert extract_crawl(copy)["rows"] > 0
    after = export()
    assert after["exported"] == [1, 2] and after["skipped"] == []
    wets = sorted(dest.glob(f"wet/crawl={NAME}/round=*/*.warc.wet.gz"))
    assert after["wet_files"] == len(wets) > 0
    text = copy.read_current("text").to_pylist()
    assert after["rows"]["text"] == len(text)
    languages = {(r["warc_filename"], r["warc_record_offset"]): r["content_languages"]
                 for r in text}  # fmt: skip
    index = duckdb.sql(
        f"SELECT content_languages FROM read_parquet('{dest}/index/*/*/*.parquet') "
        "WHERE subset = 'warc'"
    ).fetchall()
    filled = [lang for (lang,) in index if lang is not None]
    assert len(filled) == sum(v is not None for v in languages.values()) > 0
    again = export()  # the text did not change since: every round skipped
    assert again["exported"] == [] and again["skipped"] == [1, 2]
