"""Issue 31, item 6: robots.txt Content-Signal carried into the exported index, and `batchcrawl
export --exclude-signal` leaving hosts out, end to end: a loopback web whose robots.txt files carry
Content-Signal lines for our agent's group and for another agent's group, two real rounds, the
real CLI, the export read back with pyarrow."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.dataset as ds
import pytest
from click.testing import CliRunner
from round_helpers import new_crawl, round_config, serve

from batchcrawl.cli import main
from batchcrawl.export.signals import (
    SignalFilterError,
    excluded_hosts,
    parse_signal_filter,
)
from batchcrawl.round import run_rounds
from batchcrawl.store import sql
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize

MINE, OTHER, NONE = "says-no.test", "other-group.test", "no-signal.test"
ROBOTS = {
    # our agent's group says no to training (the * group would say yes: ours wins)
    MINE: "User-agent: *\nContent-Signal: ai-train=yes\nAllow: /\n\n"
    "User-agent: batchcrawl\nContent-Signal: search=yes, ai-train=no\nAllow: /\n",
    # only another agent's group says no; ours falls to the * group
    OTHER: "User-agent: otherbot\nContent-Signal: ai-train=no\nDisallow: /\n\n"
    "User-agent: *\nContent-Signal: search=yes\nAllow: /\n",
}
TABLES = ("fetched", "links", "fetchlists", "index")


class SignalSite:
    """Three hosts: ``/`` links to ``/a`` and ``/b`` on the same host; robots.txt from
    :data:`ROBOTS` (404 for :data:`NONE`)."""

    def __call__(self, host, path, headers):
        if path == "/robots.txt":
            text = ROBOTS.get(host)
            if text is None:
                return Response(404, [("Content-Type", "text/plain")], b"")
            return Response(200, [("Content-Type", "text/plain")], text.encode())
        links = '<a href="/a">a</a> <a href="/b">b</a>' if path == "/" else "<p>leaf</p>"
        return Response(200, [("Content-Type", "text/html")], links.encode())


@pytest.fixture(scope="module")
def crawl(tmp_path_factory):
    cfg = round_config(crawl={"name": "signals"}, fetch={"shards": 1}, round={"workers": 1})
    with serve(SignalSite()) as server:
        seeds = [canonicalize(server.base_url(h) + "/") for h in (MINE, OTHER, NONE)]
        crawl = new_crawl(tmp_path_factory.mktemp("signals") / "crawl", cfg, seeds)
        assert len(run_rounds(crawl.url, cfg, 2)) == 2
    return crawl


def _export(crawl, dest, *extra):
    result = CliRunner().invoke(main, ["export", crawl.url, str(dest), *extra])
    return result, (json.loads(result.stdout.splitlines()[-1]) if result.exit_code == 0 else None)


def _rows(dest, table):
    return ds.dataset(str(dest / table), format="parquet", partitioning="hive").to_table()


def test_signal_recorded_per_host_and_in_the_index(crawl, tmp_path):
    rows = sql.query(crawl, "SELECT host, content_signal FROM hosts").to_pylist()
    got = {r["host"]: r["content_signal"] for r in rows}
    assert got == {MINE: "search=yes,ai-train=no", OTHER: "search=yes", NONE: None}
    result, summary = _export(crawl, tmp_path / "lake", "--tables", "fetched,index")
    assert result.exit_code == 0, result.output
    index = _rows(tmp_path / "lake", "index").to_pylist()
    assert {r["url_host_name"] for r in index} == {MINE, OTHER, NONE}
    assert all(r["content_signal"] == got[r["url_host_name"]] for r in index)
    assert summary["excluded"] == {"hosts": 0, "rows": {"fetched": 0, "index": 0}}


def test_exclude_signal_leaves_the_host_out_of_every_table_and_counts_it(crawl, tmp_path):
    full, lake = tmp_path / "full", tmp_path / "lake"
    result, everything = _export(crawl, full, "--tables", ",".join(TABLES))
    assert result.exit_code == 0, result.output
    result, summary = _export(
        crawl, lake, "--tables", ",".join(TABLES), "--exclude-signal", "AI-Train=No"
    )
    assert result.exit_code == 0, result.output
    assert summary["exclude_signal"] == ["ai-train=no"] and summary["excluded"]["hosts"] == 1
    host_col = {"fetched": "url_host_name", "index": "url_host_name", "fetchlists": "host"}
    for table, col in host_col.items():
        before = Counter(_rows(full, table).column(col).to_pylist())
        after = Counter(_rows(lake, table).column(col).to_pylist())
        assert before[MINE] > 0 and after[MINE] == 0, table  # the host is gone ...
        assert after == before - Counter({MINE: before[MINE]}), table  # ... and only it
        assert summary["excluded"]["rows"][table] == before[MINE], table  # counted
    # links: those found on the excluded host's pages are left out, the others kept
    mine_pages = set(
        _rows(full, "fetched").filter(ds.field("url_host_name") == MINE).column("url_key")
        .to_pylist()
    )  # fmt: skip
    links_before = _rows(full, "links").column("src_url_key").to_pylist()
    links_after = _rows(lake, "links").column("src_url_key").to_pylist()
    dropped = sum(k in mine_pages for k in links_before)
    assert dropped > 0 and not mine_pages & set(links_after)
    assert len(links_after) == len(links_before) - dropped == summary["rows"]["links"]
    assert summary["excluded"]["rows"]["links"] == dropped
    # rows in = rows out + left out
    for table in TABLES:
        kept, left = summary["rows"][table], summary["excluded"]["rows"][table]
        assert kept + left == everything["rows"][table], table
    # the signal changed nothing that was fetched: the host's pages were crawled like the others'
    outcomes = sql.query(
        crawl, f"SELECT outcome FROM fetched WHERE url_host_name = '{MINE}'"
    ).column("outcome").to_pylist()  # fmt: skip
    assert outcomes and set(outcomes) == {"ok"}


def test_exclusions_that_cannot_hold_are_refused_and_write_nothing(crawl, tmp_path):
    lake = tmp_path / "lake"
    result, _ = _export(crawl, lake, "--exclude-signal", "ai-train=no")  # default tables: warc
    assert result.exit_code == 2 and "byte for byte" in result.output
    result, _ = _export(crawl, lake, "--exclude-signal", "ai-train=maybe")
    assert result.exit_code == 2 and "NAME=yes or NAME=no" in result.output
    assert not lake.exists()
    result, _ = _export(crawl, lake, "--tables", "fetched", "--exclude-signal", "search=yes")
    assert result.exit_code == 0, result.output
    before = sorted(p.relative_to(lake) for p in lake.rglob("*"))
    result, _ = _export(crawl, lake, "--tables", "fetched,index")  # another filter (none)
    assert result.exit_code == 2 and "--exclude-signal search=yes" in result.output
    assert sorted(p.relative_to(lake) for p in lake.rglob("*")) == before
    result, again = _export(crawl, lake, "--tables", "fetched,index", "--exclude-signal",
                            "search=yes")  # fmt: skip
    assert (
        result.exit_code == 0 and again["excluded"]["hosts"] == 2
    )  # MINE and OTHER say search=yes


def test_signal_filter_parsing_and_matching():
    assert parse_signal_filter(["AI-Train = No", "search=no,ai-train=no"]) == (
        "ai-train=no", "search=no",
    )  # fmt: skip
    for bad in ("ai-train", "ai-train=maybe", "=no", ""):
        with pytest.raises(SignalFilterError):
            parse_signal_filter([bad])
    signals = {
        "a.test": "search=yes,ai-train=no",
        "b.test": "ai-train=yes",
        "c.test": "ai-input=no",
    }
    assert excluded_hosts(signals, ["ai-train=no"]) == {"a.test"}
    assert excluded_hosts(signals, ["ai-train=no", "ai-input=no"]) == {"a.test", "c.test"}
    assert excluded_hosts(signals, []) == set()


class DeepSignalSite(SignalSite):
    """:class:`SignalSite` with a chain ``/`` -> ``/d1`` -> ... -> ``/d5`` on every host, so a
    crawl has rounds enough for its fact files to be merged."""

    def __call__(self, host, path, headers):
        if path == "/robots.txt":
            return super().__call__(host, path, headers)
        depth = 0 if path == "/" else int(path.removeprefix("/d"))
        link = f'<a href="/d{depth + 1}">next</a>' if depth < 5 else "<p>leaf</p>"
        return Response(200, [("Content-Type", "text/html")], link.encode())


def test_a_repeated_export_with_a_filter_redoes_nothing_across_a_merge(tmp_path, caplog):
    """The user's report: repeating ``--exclude-signal ai-train=no`` to the same DEST replaced
    every round with excluded rows (the marker's row counts are the rows kept, compared with the
    crawl's rows). Repeated, and repeated after a merge of the rounds' fact files in between,
    with and without the filter: nothing is replaced and no warning is logged."""
    from batchcrawl.export.lake import export_crawl
    from batchcrawl.store import factcompact

    cfg = round_config(
        crawl={"name": "deep"}, fetch={"shards": 1}, round={"workers": 1},
        store={"compact_facts_min_files": 2, "compact_facts_min_age_rounds": 1},
    )  # fmt: skip
    tables = "fetched,links,index"
    plain, filtered = str(tmp_path / "plain"), str(tmp_path / "filtered")
    with serve(DeepSignalSite()) as server:
        seeds = [canonicalize(server.base_url(h) + "/") for h in (MINE, OTHER, NONE)]
        crawl = new_crawl(tmp_path / "crawl", cfg, seeds)
        assert len(run_rounds(crawl.url, cfg, 2)) == 2
        runs = {}
        for dest, signal in ((plain, ()), (filtered, ("ai-train=no",))):
            first = export_crawl(crawl, dest, tables=tables, exclude_signals=signal)
            assert first["exported"] == [1, 2], first
            runs[dest] = first
        assert runs[filtered]["excluded"]["rows"]["fetched"] > 0
        caplog.clear()
        for dest, signal in ((plain, ()), (filtered, ("ai-train=no",))):
            again = export_crawl(crawl, dest, tables=tables, exclude_signals=signal)
            assert (again["replaced"], again["exported"], again["skipped"]) == ([], [], [1, 2])
        assert not [r for r in caplog.records if r.levelname == "WARNING"]
        assert len(run_rounds(crawl.url, cfg, 2)) == 2  # rounds 1-2 merged at these commits
    merged = [e for e in crawl.manifest().tables["fetched"] if factcompact.is_merged(e)]
    assert merged and all(factcompact.round_entries(merged).get(r) for r in (1, 2))
    for dest, signal in ((plain, ()), (filtered, ("ai-train=no",))):
        for _ in range(2):
            caplog.clear()
            later = export_crawl(crawl, dest, tables=tables, exclude_signals=signal)
            assert later["replaced"] == [] and not [
                r for r in caplog.records if r.levelname == "WARNING"
            ], (dest, later)
            assert set(later["skipped"]) >= {1, 2}, later
    assert set(later["skipped"]) == {1, 2, 3, 4} and later["exported"] == []
