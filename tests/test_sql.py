"""Read-only DuckDB SQL over committed generations, the named queries, and remote (S3) crawls."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from crawl_helpers import fetched_row, frontier_row, small_crawl

from batchcrawl.errors import CrawlDirError, SQLError
from batchcrawl.store import schemas, sql
from batchcrawl.store.crawldir import CrawlDir


@pytest.fixture
def crawl(tmp_path) -> CrawlDir:
    return small_crawl(tmp_path / "c")


def rows(crawl, text, generation=None):
    return sql.query(crawl, text, generation).to_pylist()


# -- views -----------------------------------------------------------------------------------
def test_views_cover_exactly_the_manifest_files_of_a_generation(crawl):
    assert rows(crawl, "SELECT count(*) AS n FROM frontier") == [{"n": 6}]
    assert rows(crawl, "SELECT count(*) AS n FROM frontier", generation=0) == [{"n": 0}]
    # an orphan (written, never committed) is invisible
    crawl.write_table("frontier", "frontier/gen=2/bucket=000.parquet", [frontier_row(99)])
    crawl.write_table("fetched", "fetched/round=2/shard=00.parquet", [fetched_row(99)])
    assert rows(crawl, "SELECT count(*) AS n FROM frontier") == [{"n": 6}]
    assert rows(crawl, "SELECT count(*) AS n FROM fetched") == [{"n": 5}]


@pytest.mark.parametrize("table", schemas.TABLES)
def test_empty_views_are_typed_from_schema_sql(tmp_path, table):
    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    result = sql.query(crawl, f"SELECT * FROM {table}")
    assert result.num_rows == 0
    assert result.schema.names == schemas.schema(table).names
    assert result.schema.types == schemas.schema(table).types


def test_unknown_generation_is_a_crawl_dir_error(crawl):
    with pytest.raises(CrawlDirError, match="generation 7 does not exist") as raised:
        sql.query(crawl, "SELECT 1", generation=7)
    have = crawl.generations()
    listed = f"{have[0]}-{have[-1]}" if len(have) > 2 else ", ".join(map(str, have))
    assert str(raised.value).endswith(f"(the committed generations are {listed})")


# -- read-only -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "statement",
    [
        "SELECT url FROM frontier WHERE status = 'queued'",
        "WITH q AS (SELECT * FROM frontier) SELECT count(*) FROM q",
        "FROM fetched LIMIT 1",
        "DESCRIBE frontier",
        "SHOW TABLES",
        "SUMMARIZE fetched",
        "EXPLAIN SELECT * FROM links",
        "EXPLAIN ANALYZE SELECT count(*) FROM frontier",
        "PRAGMA show_tables",
        "PRAGMA version",
        "VALUES (1, 2)",
        "SELECT 1;",
    ],
)
def test_reading_statements_run(crawl, statement):
    sql.query(crawl, statement)


@pytest.mark.parametrize(
    ("statement", "kind"),
    [
        ("COPY frontier TO 'out.csv'", "COPY"),
        ("CREATE TABLE t AS SELECT * FROM frontier", "CREATE"),
        ("INSERT INTO frontier SELECT * FROM frontier", "INSERT"),
        ("DELETE FROM frontier", "DELETE"),
        ("UPDATE frontier SET depth = 0", "UPDATE"),
        ("DROP VIEW frontier", "DROP"),
        ("ATTACH 'other.duckdb'", "ATTACH"),
        ("INSTALL httpfs", "INSTALL"),  # under its own name (issue 34: "LOAD statement")
        ("FORCE INSTALL httpfs", "FORCE INSTALL"),
        ("LOAD httpfs", "LOAD"),
        ("SET threads = 1", "SET"),
        ("PRAGMA enable_profiling", "PRAGMA"),
        ("PRAGMA threads=1", "PRAGMA"),  # under its own name, not DuckDB's type SET (a trial)
        ("CHECKPOINT", "CHECKPOINT"),  # not CALL
        ("/* note */ -- line\n  checkpoint", "CHECKPOINT"),
        ("EXPORT DATABASE 'dump'", "EXPORT"),
        ("CALL pragma_version()", "CALL"),
        ("SELECT 1; DROP VIEW frontier", "DROP"),
        ("EXPLAIN ANALYZE CREATE TABLE t AS SELECT 1", "EXPLAIN"),
        ("explain analyze copy (select 1) to 'x.csv'", "EXPLAIN"),
    ],
)
def test_writing_statements_are_refused(crawl, statement, kind, tmp_path):
    with pytest.raises(SQLError, match=f"refused {kind} statement.*read-only") as info:
        sql.query(crawl, statement)
    assert info.value.exit_code == 2
    assert "SUMMARIZE and showing PRAGMAs such as PRAGMA version" in str(info.value)  # they run
    assert rows(crawl, "SELECT count(*) AS n FROM frontier") == [{"n": 6}]


def test_connection_cannot_read_files_outside_the_generation(crawl, tmp_path):
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    with pytest.raises(SQLError, match="Permission|disabled"):
        sql.query(crawl, f"SELECT * FROM read_csv('{secret}')")
    # a Parquet file outside the crawl is a refused statement too, not a damaged crawl (issue 34)
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1]}), other)
    for reader in ("read_parquet", "read_csv"):
        with pytest.raises(SQLError, match="query refused: it reads a file outside the crawl"):
            sql.query(crawl, f"SELECT * FROM {reader}('{other}')")
    con = sql.connect(crawl)
    with pytest.raises(Exception, match="lock|configuration"):
        con.execute("SET enable_external_access = true")
    con.close()


def test_bad_sql_is_an_sql_error_naming_the_problem(crawl):
    with pytest.raises(SQLError, match="does not parse"):
        sql.query(crawl, "SELEC 1")
    with pytest.raises(SQLError, match="no_such_column"):
        sql.query(crawl, "SELECT no_such_column FROM frontier")
    with pytest.raises(SQLError, match="empty query"):
        sql.query(crawl, "  ")


def test_error_hints_list_every_view(crawl, tmp_path):
    """The hint of a failed or unparsable statement listed 5 views (no edges, content, text...);
    the refusal of a file outside the generation listed all of them: all list schemas.TABLES."""
    views = f"views: {', '.join(schemas.TABLES)})"
    for statement in ("SELEC 1", "SELECT no_such_column FROM frontier"):
        with pytest.raises(SQLError) as info:
            sql.query(crawl, statement)
        assert str(info.value).endswith(views), info.value
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1]}), other)
    with pytest.raises(SQLError) as info:
        sql.query(crawl, f"SELECT * FROM read_parquet('{other}')")
    assert f"query the views {', '.join(schemas.TABLES)} " in str(info.value)


# -- named queries ---------------------------------------------------------------------------
def test_named_queries_are_all_covered():
    assert set(sql.named_queries()) == set(NAMED_EXPECTED)


NAMED_EXPECTED = {
    "duplicates": [],  # this crawl has no content table; see tests/test_content_dedup.py
    # the small crawl has no due times; tests/test_freshness.py checks due-soon on a real crawl
    "due-soon": [],
    # no due times here: queued and error URLs are due since the epoch (tests/test_status.py
    # checks every status with times)
    "due-now": [
        {"status": "error", "urls": 1, "on_held_hosts": 0},
        {"status": "queued", "urls": 1, "on_held_hosts": 0},
    ],  # fmt: skip
    "probable-traps": [],  # no trap here; tests/test_quality_round.py checks a flagged host
    "held-hosts": [],  # no host held here; tests/test_holds.py checks a held host
    "status-counts": [
        {"status": "fetched", "urls": 3},
        {"status": "error", "urls": 1},
        {"status": "gone", "urls": 1},
        {"status": "queued", "urls": 1},
    ],
    "status-by-host": [
        {
            "host": "a.test",
            "urls": 4,
            "queued": 1,
            "fetched": 2,
            "redirect": 0,
            "gone": 1,
            "error": 0,
            "robots_denied": 0,
            "filtered": 0,
            "refused": 0,
        },
        {
            "host": "b.test",
            "urls": 2,
            "queued": 0,
            "fetched": 1,
            "redirect": 0,
            "gone": 0,
            "error": 1,
            "robots_denied": 0,
            "filtered": 0,
            "refused": 0,
        },
    ],
    "top-hosts": [
        {"host": "a.test", "attempts": 3, "ok": 2, "failed": 1, "content_bytes": 200},
        {"host": "b.test", "attempts": 2, "ok": 1, "failed": 1, "content_bytes": 100},
    ],
    "depth-histogram": [
        {"depth": 0, "urls": 1, "fetched": 1},
        {"depth": 1, "urls": 1, "fetched": 1},
        {"depth": 2, "urls": 4, "fetched": 1},
    ],
    "fetch-errors": [
        {
            "outcome": "gone",
            "fetch_status": 404,
            "error": None,
            "attempts": 1,
            "example_url": "http://a.test/p2",
        },
        {
            "outcome": "network_error",
            "fetch_status": None,
            "error": "timeout",
            "attempts": 1,
            "example_url": "http://b.test/p4",
        },
    ],
    "rounds": [
        {
            "round": 1,
            "attempts": 5,
            "ok": 3,
            "failed": 2,
            "hosts": 2,
            "content_bytes": 300,
            "first_fetch": dt.datetime(2024, 1, 1, 12, 0, 0),
            "last_fetch": dt.datetime(2024, 1, 1, 12, 0, 6),
            "span_s": 6.0,
        },
    ],
    "outcomes-by-round": [
        {"round": 1, "outcome": "gone", "attempts": 1},
        {"round": 1, "outcome": "network_error", "attempts": 1},
        {"round": 1, "outcome": "ok", "attempts": 3},
    ],
    "fetch-timeline": [
        {"round": 1, "second": 0, "crawl_second": 0, "attempts": 1, "failed": 0},
        {"round": 1, "second": 2, "crawl_second": 2, "attempts": 1, "failed": 0},
        {"round": 1, "second": 3, "crawl_second": 3, "attempts": 1, "failed": 1},
        {"round": 1, "second": 5, "crawl_second": 5, "attempts": 1, "failed": 1},
        {"round": 1, "second": 6, "crawl_second": 6, "attempts": 1, "failed": 0},
    ],
    "http-status": [
        {"fetch_status": 200, "attempts": 3},
        {"fetch_status": 404, "attempts": 1},
        {"fetch_status": None, "attempts": 1},
    ],
    "mime-types": [{"mime_type": "(none)", "responses": 4, "content_bytes": 300}],
    # no text table here (no extract run): tests/test_extract_crawl.py checks them with rows
    "languages-per-host": [],
    "pages-per-language": [],
    "top-error-hosts": [
        {"host": "a.test", "attempts": 3, "failed": 1, "top_outcome": "gone"},
        {"host": "b.test", "attempts": 2, "failed": 1, "top_outcome": "network_error"},
    ],
    # a.test requests start at 0, 2 and 3 s; b.test at 5 and 6 s (no hosts rows: no delays)
    "host-intervals": [
        {
            "host": "a.test",
            "gaps": 2,
            "min_gap_s": 1.0,
            "median_gap_s": 1.5,
            "host_delay_s": None,
            "crawl_delay_s": None,
        },
        {
            "host": "b.test",
            "gaps": 1,
            "min_gap_s": 1.0,
            "median_gap_s": 1.0,
            "host_delay_s": None,
            "crawl_delay_s": None,
        },
    ],
    "robots-outcomes": [],  # no hosts table; tests/test_report.py checks it with hosts rows
    "bytes-by-round": [
        {"round": 1, "content_bytes": 300, "warc_bytes": 0, "warc_bytes_total": 0},
    ],
}


@pytest.mark.parametrize("name", sorted(NAMED_EXPECTED))
def test_named_query_on_a_real_small_crawl(crawl, name):
    assert rows(crawl, sql.named_query(name)) == NAMED_EXPECTED[name]


@pytest.mark.parametrize("name", sorted(NAMED_EXPECTED))
def test_named_query_runs_on_an_empty_crawl(tmp_path, name):
    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    assert rows(crawl, sql.named_query(name)) == []


def test_unknown_named_query_lists_the_known_ones():
    with pytest.raises(SQLError, match="no named query 'nope'.*status-counts"):
        sql.named_query("nope")
    with pytest.raises(SQLError):
        sql.named_query("../schema")


# -- remote crawl dirs -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def s3_options():
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    options = {"endpoint_url": f"http://{host}:{port}", "key": "test", "secret": "test"}
    import s3fs

    s3fs.S3FileSystem(**options).mkdir("crawls")
    yield options
    server.stop()


def test_s3_crawl_commits_queries_locks_and_collects(s3_options):
    from batchcrawl.errors import LockedError
    from batchcrawl.store.gc import gc
    from batchcrawl.store.lock import WriterLock

    crawl = CrawlDir.create("s3://crawls/news", "", buckets=1, storage_options=s3_options)
    g0 = crawl.manifest()
    entry = crawl.write_table(
        "frontier", "frontier/gen=1/bucket=000.parquet", [frontier_row(i) for i in range(4)]
    )
    crawl.commit(g0, {"frontier": [entry]}, {"step": "inject"})
    assert rows(crawl, "SELECT count(*) AS n FROM frontier") == [{"n": 4}]
    assert rows(crawl, "SELECT count(*) AS n FROM frontier", generation=0) == [{"n": 0}]
    assert not crawl.fs.exists(crawl.path(sql.DUCKDB_FILE))  # remote crawls skip crawl.duckdb
    with WriterLock(crawl, owner="s3 writer"):
        with pytest.raises(LockedError, match="s3 writer"):
            WriterLock(crawl).acquire()
        result = gc(crawl, keep=1)
    assert result["deleted_manifests"] == 1 and crawl.generations() == [1]
    assert not crawl.fs.exists(crawl.path("_lock.json"))
    assert rows(crawl, "SELECT count(*) AS n FROM frontier") == [{"n": 4}]


def test_due_soon_lists_only_statuses_that_are_ever_due_with_seconds(tmp_path):
    """Issue 34: filtered URLs with a time were listed as due, and 20 s intervals showed as
    ``avg_interval_days 0.0``."""
    crawl = CrawlDir.create(str(tmp_path / "d"), "", buckets=1)
    when = dt.datetime(2026, 1, 2, 3, 4, 5)
    table = []
    for i, status in enumerate(["queued", "fetched", "filtered", "robots_denied", "gone"]):
        row = frontier_row(i, status=status)
        row.update(next_fetch_time=when, fetch_interval_s=20.0)
        table.append(row)
    files = [crawl.write_table("frontier", "frontier/gen=1/b.parquet", table)]
    crawl.commit(crawl.manifest(), {"frontier": files}, {"step": "inject"})
    due = sql.query(crawl, sql.named_query("due-soon")).to_pylist()
    assert sorted(r["status"] for r in due) == ["fetched", "gone", "queued"]
    assert {r["avg_interval_s"] for r in due} == {20.0}
    assert {r["avg_interval"] for r in due} == {"20.0 s"}


@pytest.mark.parametrize(("seconds", "shown"), [(59.0, "59.0 s"), (90.0, "1.5 min"),
                                                (5400.0, "1.5 h"), (2592000.0, "30.0 d")])  # fmt: skip
def test_due_soon_gives_the_interval_in_the_largest_unit_that_fits(tmp_path, seconds, shown):
    """A fresh-user trial (issue 34): ``avg_interval_s 2592000.0`` had to be divided by hand."""
    crawl = CrawlDir.create(str(tmp_path / "d"), "", buckets=1)
    row = frontier_row(0, status="fetched")
    row.update(next_fetch_time=dt.datetime(2026, 1, 2), fetch_interval_s=seconds)
    files = [crawl.write_table("frontier", "frontier/gen=1/b.parquet", [row])]
    crawl.commit(crawl.manifest(), {"frontier": files}, {"step": "inject"})
    due = sql.query(crawl, sql.named_query("due-soon")).to_pylist()
    assert [(r["avg_interval_s"], r["avg_interval"]) for r in due] == [(seconds, shown)]


def test_language_queries_count_each_page_once_by_its_newest_capture_with_text():
    """A fresh-user trial: after a recrawl, ``pages-per-language`` counted every capture, so a
    90-page French site showed ~90 ``fr`` and ~90 ``(none)`` (its 304 revisits, which have no
    text). Each page (URL) now counts once, by its newest capture that has text."""
    import duckdb

    from batchcrawl.store import duckdbfile

    def capture(key, url, t, languages, chars, reason=None):
        return {"url_key": key, "url": url, "url_host_name": url.split("/")[2], "round": t,
                "fetch_time": dt.datetime(2026, 1, 1, 0, t), "shard": 0, "record_type":
                "revisit" if reason else "response", "content_languages": languages,
                "main_text_length": chars, "reason": reason, "warc_filename": "w.warc.gz",
                "warc_record_offset": t}  # fmt: skip

    rows = [
        capture(1, "http://fr.test/a", 1, "fr", 100),
        capture(1, "http://fr.test/a", 2, None, None, "revisit"),  # a 304 revisit: no text
        capture(2, "http://fr.test/b", 1, "en", 50),  # English then, French now
        capture(2, "http://fr.test/b", 3, "fr,en", 80),
        capture(3, "http://en.test/c", 1, None, None, "no_text"),  # never any text
    ]
    schema = schemas.schema("text")
    text = pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema)
    con = duckdb.connect()
    body = "SELECT * FROM text_rows"
    con.register("text_rows", text)
    duckdbfile.create_views(con, {"text": body}, "")  # text, then page_text over it
    per_language = con.execute(sql.named_query("pages-per-language")).fetchall()
    assert per_language == [("fr", 2, 1, 180), ("(none)", 1, 1, 0)]
    per_host = con.execute(sql.named_query("languages-per-host")).fetchall()
    assert per_host == [("en.test", "(none)", 1, 0), ("fr.test", "fr", 2, 180)]


def test_mime_types_name_why_a_response_has_no_type(tmp_path):
    """A recrawl's 304s have no body and no Content-Type: the report's MIME chart showed them as
    one big "(none)" bar (a fresh-user trial). They are "(not modified)", a redirect without a
    type "(redirect)", and only other responses without one "(none)"."""
    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    parent = crawl.manifest()
    typed = [
        {**fetched_row(i, status=s, outcome=o), "content_mime_type": m}
        for i, (s, o, m) in enumerate([
            (200, "ok", "text/html"), (304, "not_modified", None), (304, "not_modified", None),
            (301, "redirect", None), (302, "redirect", "text/html"), (200, "ok", None),
            (None, "network_error", None),
        ])
    ]  # fmt: skip
    entry = crawl.write_table("fetched", "fetched/round=1/shard=00.parquet", typed)
    crawl.commit(parent, {"fetched": [entry]}, {"step": "round"}, round=1)
    got = {r["mime_type"]: r["responses"] for r in rows(crawl, sql.named_query("mime-types"))}
    assert got == {"text/html": 2, "(not modified)": 2, "(redirect)": 1, "(none)": 1}
