"""Rows spilled during a round (issue 16 memory; ``round.spill_pages``, :mod:`batchcrawl.fetch.spill`):
a shard appends the rows it holds to its round's fact files each time they pass the bound, one row
group per DRUM bucket per spill. On a real cluster and real files: a round spilled page by page
commits the same frontier, ``fetched``, ``links`` and ``edges`` as a round that holds its rows to
the end, and SQL and the link graph read every spill; a worker SIGKILLed after a spill and before
the commit leaves the committed generation whole, only temp files that ``gc`` removes, and a rerun
that sees none of the dead round's rows.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path

import fsspec
import pyarrow.parquet as pq
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from round_helpers import (
    fetched_rows,
    frontier_rows,
    group_members,
    helper_command,
    new_crawl,
    read_every_file,
    round_config,
    sample_web,
    serve,
    wait_gone,
)
from test_crash import KillOnPage, killed_helper, steps_until_killed, with_crawler

from batchcrawl.config import to_toml
from batchcrawl.engine.cluster import dask_client
from batchcrawl.fetch.spill import FACT_KEYS, FactFiles
from batchcrawl.fetch.worker import FetchWorker, ShardRun
from batchcrawl.graph.build import build_graph
from batchcrawl.graph.linkgraph import LinkGraph
from batchcrawl.records import FetchItem
from batchcrawl.store import paths, sql
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.gc import gc
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize, domain_of, url_key

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def spill_config(spill_pages: int):
    """Host delay 0.25 s, so a round of ~15 pages a host spans several of the worker's 0.5 s
    checks (a spill happens at a check that finds ``spill_pages`` rows or more); no tail cut and
    no grace limit and long timeouts (a loaded machine), so every shard fetches its whole list:
    the same pages in every run."""
    return round_config(
        politeness={"host_delay_s": 0.25, "max_crawl_delay_s": 0.25},
        fetch={
            "tail_rate_ratio": 0.0,
            "tail_idle_s": 0.0,
            "tail_capacity_ratio": 0.0,
            "connect_timeout_s": 20.0,
            "read_timeout_s": 20.0,
            "total_timeout_s": 30.0,
        },
        round={"workers": 2, "threads_per_worker": 1, "spill_pages": spill_pages},
    )


@pytest.fixture(scope="module")
def client():
    with dask_client(spill_config(0)) as c:
        yield c


def _web():
    return sample_web(hosts=4, pages=80, zipf_exponent=0.0, extras_every=0, links_per_page=8,
                      menu_links=3)  # fmt: skip


def _crawl_two_rounds(web, path: Path, spill_pages: int, client):
    cfg = spill_config(spill_pages)
    crawl = new_crawl(path, cfg, web.seeds())
    return crawl, with_crawler(crawl.url, client, lambda c: [c.run_round(cfg), c.run_round(cfg)])


def _content(crawl: CrawlDir) -> dict[str, set]:
    """What a crawl committed, as sets without timing-dependent columns (fetch times, WARC
    offsets, discovery order, which page found a link first)."""
    m = crawl.manifest()
    links = crawl.read_table("links", m.files("links"), columns=["round", "dst_url_key"])
    edges = crawl.read_table("edges", m.files("edges"))
    return {
        "frontier": {(r["url"], r["status"], r["depth"]) for r in frontier_rows(crawl)},
        "fetched": {
            (r["url"], r["round"], r["outcome"], r["fetch_status"], r["content_digest"])
            for r in fetched_rows(crawl)
        },  # fmt: skip
        "links": set(zip(*links.to_pydict().values(), strict=True)),
        "edges": {
            (r["src_url_key"], r["dst_url_key"], r["round"], r["tag"]) for r in edges.to_pylist()
        },  # fmt: skip
    }


def test_a_round_spilled_page_by_page_commits_what_an_unspilled_round_does(client, tmp_path):
    web = _web()
    with serve(web):  # one server: the same URLs (ports) in both crawls
        spilled, s_sum = _crawl_two_rounds(web, tmp_path / "spilled", 1, client)
        whole, w_sum = _crawl_two_rounds(web, tmp_path / "whole", 0, client)
    assert w_sum[1]["spills"] == 0
    assert s_sum[1]["spills"] > 2 * 2, ("round 2 spilled several times per shard", s_sum[1])
    # the spills were merged: one file per shard and table, one row group per non-empty bucket
    m = spilled.manifest()
    for table in ("fetched", "links", "edges"):
        entries = [e for e in m.tables[table] if paths.parse_round(e.path) == 2]
        assert len(entries) == 2, table
        for e in entries:
            assert pq.ParquetFile(spilled.path(e.path)).num_row_groups <= 4, (table, e.path)
        left = os.listdir(spilled.path(paths.round_dir(table, 2)))
        assert all(paths.TMP_MARKER not in name for name in left), left  # spill files removed
    read_every_file(spilled, m)
    got, want = _content(spilled), _content(whole)
    for table in want:
        assert got[table] == want[table], table
    assert s_sum[1]["responses"] == w_sum[1]["responses"] > 30
    assert s_sum[1]["outcomes"] == w_sum[1]["outcomes"]
    # -- SQL and the link graph read every spill ------------------------------------------------
    for table in ("fetched", "links", "edges"):
        n = sql.query(spilled, f"SELECT count(*) AS n FROM {table}").column("n")[0].as_py()
        assert n == m.rows(table), table
    build_graph(spilled)
    arcs = LinkGraph.open(spilled).arcs()
    edges = {(r["src_url_key"], r["dst_url_key"]) for r in
             spilled.read_table("edges", m.files("edges")).to_pylist()}  # fmt: skip
    assert set(zip(arcs.column("src_url_key").to_pylist(), arcs.column("dst_url_key").to_pylist(),
                   strict=True)) == edges  # fmt: skip


class KillAfterSpill(KillOnPage):
    """The SampleWeb, plus: once armed, SIGKILL process ``pid`` at the first page request that
    arrives after a shard's spill reached the disk (a ``fetched`` temp file of round ``round``
    with bytes in it): the killed round has spilled and not committed."""

    def __init__(self, web, root: str, round: int) -> None:
        super().__init__(web)
        self.folder = Path(root) / paths.round_dir("fetched", round)
        self.spilled: list[str] = []

    def ready(self) -> bool:
        parts = [p for p in self.folder.glob("*" + paths.TMP_MARKER + "*")
                 if p.stat().st_size > 0] if self.folder.is_dir() else []  # fmt: skip
        self.spilled = [p.name for p in parts]
        return bool(parts)


def test_sigkill_after_a_spill_leaves_the_generation_whole_and_gc_removes_the_parts(
    client, tmp_path
):
    web = _web()
    cfg = spill_config(1)
    app = KillAfterSpill(web, str(tmp_path / "crawl"), 2)
    with serve(app):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        with_crawler(crawl.url, client, lambda c: c.run_round(cfg))  # round 1, committed
        before = crawl.manifest()
        with killed_helper(helper_command(crawl.url, 1)) as proc:
            app.pid = proc.pid
            out, steps = steps_until_killed(proc)
            assert steps[-1] == "fetch", out
            assert app.fired.is_set() and app.spilled
            leftovers = wait_gone(group_members(proc.pid), timeout_s=10)
            assert leftovers == []
            # -- the committed generation is whole; the spills are temp files nobody reads ------
            crawl = CrawlDir.open(crawl.url)
            assert crawl.manifest().generation == before.generation
            assert read_every_file(crawl, crawl.manifest()) == read_every_file(crawl, before)
            folder = Path(crawl.path(paths.round_dir("fetched", 2)))
            left = sorted(p.name for p in folder.iterdir())
            assert left and all(paths.TMP_MARKER in name for name in left), left
            assert not (folder / Path(paths.round_file("fetched", 2, 0)).name).exists()
            # -- gc removes them ----------------------------------------------------------------
            done = gc(crawl, keep=before.generation + 1, tmp_min_age_s=0.0)
            assert done["deleted_files"] >= len(left)
            for table in ("fetched", "links", "edges"):
                folder = Path(crawl.path(paths.round_dir(table, 2)))
                assert not folder.exists() or not any(folder.iterdir()), table
            # -- the rerun commits round 2 once, without the dead round's rows ------------------
            summary = with_crawler(crawl.url, client, lambda c: c.run_round(cfg))
    assert summary["round"] == 2
    after = crawl.manifest()
    read_every_file(crawl, after)
    urls = [r["url"] for r in fetched_rows(crawl) if r["round"] == 2]
    assert len(urls) == len(set(urls)) == summary["attempts"] + summary["given_back"]


class _Rows(list):
    """A ``fetched`` row list a weak reference can watch."""


class _Columns(dict):
    """A ``links``/``edges`` column dict a weak reference can watch."""


def test_each_tables_python_rows_are_gone_before_the_next_table_is_built(
    web, host_name, test_config, tmp_path
):
    """Memory order of a spill (:meth:`FactFiles._tables`): when a table is handed out, its
    Python rows are already freed (nothing, the generator included, holds them) and the next
    tables' rows are not built into Arrow yet."""
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(404))
    page = '<a href="/a">a</a><a href="/b">b</a><a href="http://other.test/">o</a>'
    web.app.add(host_name, "/", Response(200, [("Content-Type", "text/html")], page.encode()))
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    worker = FetchWorker(test_config, 0, fs, seed_hosts=[host_name],
                         seed_domains=[domain_of(host_name)])  # fmt: skip
    url = canonicalize(base + "/")
    run = worker.run([FetchItem(url_key(url), url, host_name, domain_of(host_name), 0)], round=1)
    worker.close()
    rows = ShardRun(fetched=_Rows(run.fetched), links=_Columns(run.links),
                    edges=_Columns(run.edges))  # fmt: skip
    sizes = {"fetched": len(run.fetched), "links": len(run.links["dst_url_key"]),
             "edges": len(run.edges["dst_url_key"])}  # fmt: skip
    assert sizes["fetched"] == 1 and sizes["links"] == 3 and sizes["edges"] > 0
    del run
    held = {name: weakref.ref(getattr(rows, name)) for name in FACT_KEYS}
    crawl = CrawlDir.create(str(tmp_path / "crawl"), to_toml(test_config), buckets=4)
    tables = FactFiles(crawl, 1, 0, 4)._tables(rows)
    names = list(FACT_KEYS)
    for i, (name, table) in enumerate(tables):
        assert name == names[i] and table[0].num_rows == sizes[name]
        assert held[name]() is None, name  # its Python rows are freed
        now = getattr(rows, name)  # an empty holder of the same shape replaced them
        assert now == [] if name == "fetched" else now == dict.fromkeys(now, []) and now
        assert all(held[later]() is not None for later in names[i + 1 :])  # not built yet
    assert i == len(names) - 1


def test_each_spill_gives_the_freed_rows_back_to_the_system(
    web, host_name, test_config, tmp_path, monkeypatch
):
    """A spill frees the rows it wrote among the fetch threads' live buffers; a shard's spills
    (:func:`batchcrawl.engine.shard.trimmed`, what ``ShardActor.fetch`` hands its run) are each
    followed by a ``malloc_trim`` (:func:`batchcrawl.procmem.trim`), or the freed memory stays
    in malloc's arenas until the round ends and a worker's peak builds on it (issue 33)."""
    from batchcrawl.engine import shard

    web.app.add(host_name, "/robots.txt", Response(404))
    pages = [f"/p{i}" for i in range(8)]
    for path in pages:
        web.app.add(host_name, path, Response(200, [("Content-Type", "text/html")], b"<p>x</p>"))
    events: list[str] = []
    monkeypatch.setattr(shard.procmem, "trim", lambda: events.append("trim"))
    cfg = test_config.replace(politeness={"host_delay_s": 0.3, "max_crawl_delay_s": 0.3},
                              round={"spill_pages": 1})  # fmt: skip
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    worker = FetchWorker(cfg, 0, fs, seed_hosts=[host_name], seed_domains=[domain_of(host_name)])
    base = web.base_url(host_name)
    items = [FetchItem(url_key(u), u, host_name, domain_of(host_name), 0)
             for u in (canonicalize(base + p) for p in pages)]  # fmt: skip
    try:
        worker.run(items, round=1, spill=shard.trimmed(lambda rows: events.append("spill")))
    finally:
        worker.close()
    # 8 pages 0.3 s apart span several of the run's 0.5 s ticks, each spilling what came
    assert events.count("spill") >= 2 and events.count("trim") == events.count("spill"), events
    assert all(b == "trim" for a, b in zip(events, events[1:], strict=False) if a == "spill")
