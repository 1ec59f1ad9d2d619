"""The hosts table as delta runs: after random rounds of per-shard host updates (and the
compactions they trigger), the SQL ``hosts`` view and the shard actors' restore path equal a
plain-dict reference, and each round writes only the hosts it touched."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from round_helpers import new_crawl, round_config, serve
from servers.apps import RoutingApp

from batchcrawl.config import Config, to_toml
from batchcrawl.engine.shard import ShardActor, host_shard
from batchcrawl.frontier import hosts as host_runs
from batchcrawl.ring import HashRing
from batchcrawl.round import run_rounds
from batchcrawl.store import paths, schemas, sql
from batchcrawl.store.crawldir import CrawlDir, FileEntry
from batchcrawl.store.gc import gc
from batchcrawl.testing.webserver import Response

SHARDS = 3
NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


def host_row(host: str, shard: int, pages: int) -> dict:
    return {"host": host, "shard": shard, "ip": None, "next_fetch_time": NOW,
            "host_delay_s": 1.0, "pages_fetched": pages, "errors": 0}  # fmt: skip


rounds_st = st.lists(
    st.lists(st.tuples(st.integers(0, 15), st.integers(0, 1000)), max_size=12),  # (host, pages)
    min_size=1,
    max_size=8,
)


def _config() -> Config:
    return Config().replace(frontier={"buckets": 2, "max_runs": 2}, fetch={"shards": SHARDS})


def _commit_round(crawl: CrawlDir, cfg: Config, updates: list[tuple[int, int]]) -> FileEntry:
    """One round as the round driver does it: each shard writes a run of the hosts it touched."""
    ring = HashRing(cfg.fetch.shards, cfg.fetch.ring_vnodes)
    m = crawl.manifest()
    gen = m.generation + 1
    by_shard: dict[int, dict[str, dict]] = {}
    for h, pages in updates:
        host = f"h{h}.test"
        s = host_shard(host, None, cfg, ring)
        by_shard.setdefault(s, {})[host] = host_row(host, s, pages)  # a shard writes a host once
    new = [host_runs.write_run(crawl, gen, s, list(rows.values())) for s, rows in by_shard.items()]
    listing = host_runs.next_listing(crawl, m.tables.get("hosts", ()), new, gen, cfg)
    crawl.commit(m, {"hosts": listing}, {"step": "test"})
    return listing


@settings(max_examples=15, deadline=None)
@given(rounds=rounds_st)
def test_hosts_runs_equal_dict_reference(tmp_path_factory, rounds):
    cfg = _config()
    crawl = CrawlDir.create(str(tmp_path_factory.mktemp("c")), to_toml(cfg), 2)
    ref: dict[str, int] = {}
    for updates in rounds:
        touched = {f"h{h}.test" for h, _ in updates}
        parent = crawl.manifest().tables.get("hosts", ())
        listing = _commit_round(crawl, cfg, updates)
        for h, pages in updates:
            ref[f"h{h}.test"] = pages
        gen = crawl.manifest().generation
        if listing and listing[0].path == paths.hosts_base(
            gen
        ):  # compacted: one base holding every host
            assert len(listing) == 1 and not listing[0].run and listing[0].rows == len(ref)
        else:  # only the touched hosts were written, one run per shard that touched some
            assert list(listing[: len(parent)]) == list(parent)
            new = listing[len(parent) :]
            assert sum(e.rows for e in new) == len(touched) and all(e.run for e in new)
        # the SQL view (status and report read it): newest wins by host
        con = sql.connect(crawl)
        try:
            got = dict(con.execute("SELECT host, pages_fetched FROM hosts").fetchall())
        finally:
            con.close()
        assert got == ref
        # the restore path: each shard actor reloads exactly the hosts it owns, newest rows
        files = crawl.manifest().files("hosts")
        restored: dict[str, int] = {}
        for s in range(SHARDS):
            rows = ShardActor(crawl.url, cfg, s)._own_host_rows(crawl, files)
            assert all(r["host"] not in restored for r in rows)
            restored.update({r["host"]: r["pages_fetched"] for r in rows})
        assert restored == ref


@settings(max_examples=20, deadline=None)
@given(rounds=rounds_st, limit=st.integers(1, 4))
def test_recent_host_rows_give_every_hosts_newest_row_whatever_they_dropped(
    tmp_path_factory, rounds, limit
):
    """One shard's :class:`RecentHostRows` after random rounds, asked with the listing committed
    before the latest round (a pipelined round's base lacks the round fetched just before it):
    every host's newest row, at most ``limit`` rows held beyond the latest round's."""
    cfg = _config().replace(fetch={"shards": 1})
    crawl = CrawlDir.create(str(tmp_path_factory.mktemp("c")), to_toml(cfg), 2)
    kept = host_runs.RecentHostRows(limit)
    ref: dict[str, int] = {}
    for updates in rounds:
        rows = {f"h{h}.test": host_row(f"h{h}.test", 0, pages) for h, pages in updates}
        m = crawl.manifest()
        parent = list(m.tables.get("hosts", ()))
        new = host_runs.write_run(crawl, m.generation + 1, 0, list(rows.values()))
        listing = host_runs.next_listing(crawl, parent, [new], m.generation + 1, cfg)
        crawl.commit(m, {"hosts": listing}, {"step": "test"})
        kept.wrote(list(rows.values()))
        ref.update({h: r["pages_fetched"] for h, r in rows.items()})
        assert len(kept) <= max(limit, len(rows))
        got, _ = kept.rows_for(set(ref) | {"never.test"}, crawl, parent)
        assert {r["host"]: r["pages_fetched"] for r in got} == ref


def test_compaction_merges_runs_and_gc_drops_them(tmp_path):
    cfg = _config()
    crawl = CrawlDir.create(str(tmp_path / "c"), to_toml(cfg), 2)
    for r in range(SHARDS * cfg.frontier.max_runs):
        _commit_round(crawl, cfg, [(h, r) for h in range(8)])
    listing = crawl.manifest().tables["hosts"]
    assert [e.run for e in listing] == [False] and listing[0].rows == 8
    merged = crawl.read_table("hosts", listing)
    assert merged.column("pages_fetched").to_pylist() == [SHARDS * cfg.frontier.max_runs - 1] * 8
    gc(crawl, keep=1)
    on_disk = {p for p in crawl.fs.find(crawl.path("hosts"))}
    assert {crawl.path(e.path) for e in listing} == {p.replace("\\", "/") for p in on_disk}


def test_legacy_snapshots_read_as_bases(tmp_path):
    """A listing written before runs (one full snapshot per shard) stays readable, newest wins."""
    cfg = _config()
    crawl = CrawlDir.create(str(tmp_path / "c"), to_toml(cfg), 2)
    m = crawl.manifest()
    old = crawl.write_table("hosts", "hosts/gen=1/shard=00.parquet",
                            schemas.conform("hosts", [host_row("a.test", 0, 1)]))  # fmt: skip
    crawl.commit(m, {"hosts": [old]}, {"step": "test"})
    m = crawl.manifest()
    run = host_runs.write_run(crawl, 2, 0, [host_row("a.test", 0, 5), host_row("b.test", 0, 2)])
    crawl.commit(m, {"hosts": host_runs.listing(m.tables["hosts"], [run])}, {"step": "test"})
    got = host_runs.read_hosts(crawl, crawl.manifest().tables["hosts"])
    assert dict(zip(got["host"].to_pylist(), got["pages_fetched"].to_pylist(), strict=True)) == {
        "a.test": 5,
        "b.test": 2,
    }


def _page(*links: str) -> Response:
    body = "".join(f'<a href="{u}">{u}</a>' for u in links) or "<p>leaf</p>"
    return Response(200, [("Content-Type", "text/html")], body.encode())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_returning_hosts_whose_rows_were_dropped_come_back_from_the_hosts_table(tmp_path):
    """``fetch.max_kept_host_rows = 1`` on a real crawl (one shard, one worker process): round 1
    fetches a1 and a2, round 2 only c (the worker forgets a1 and a2, the actor keeps c's row
    only), round 3 a1 and a2 again. Their state comes back from the committed hosts table: no
    second robots.txt request, page counts carried on."""
    a1, a2, c = "a1.kept.test", "a2.kept.test", "c.kept.test"  # one pay-level domain
    app = RoutingApp()
    cfg = round_config(fetch={"shards": 1, "max_kept_host_rows": 1}, round={"workers": 1})
    robots = Response(200, [("Content-Type", "text/plain")], b"User-agent: *\nAllow: /\n")
    with serve(app) as server:
        url = {h: f"http://{h}:{server.port}" for h in (a1, a2, c)}
        for host in url:
            app.add(host, "/robots.txt", robots)
        for a in (a1, a2):
            app.add(a, "/", _page(url[c] + "/"))
            app.add(a, "/x", _page())
        app.add(c, "/", _page(url[a1] + "/x", url[a2] + "/x"))
        crawl = new_crawl(tmp_path / "crawl", cfg, [url[a1] + "/", url[a2] + "/"])
        summaries = run_rounds(crawl.url, cfg, 3)
        entries = server.log.entries()
    pages = sorted((e.host, e.path) for e in entries if e.path != "/robots.txt")
    assert pages == sorted([(a1, "/"), (a1, "/x"), (a2, "/"), (a2, "/x"), (c, "/")])
    assert sorted(e.host for e in entries if e.path == "/robots.txt") == sorted(url)  # once each
    rows = host_runs.read_hosts(crawl, crawl.manifest().files("hosts")).to_pylist()
    assert {r["host"]: r["pages_fetched"] for r in rows} == {a1: 2, a2: 2, c: 1}
    assert [s["host_rows"] for s in summaries] == [
        {"kept": 2, "read_back": 0},  # a round's rows are all kept, however many
        {"kept": 1, "read_back": 0},  # a1's and a2's dropped
        {"kept": 2, "read_back": 2},  # a1 and a2 returned: read back from the hosts table
    ]
