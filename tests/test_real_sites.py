"""A small real site on one shard (issue 30, item 5): two languages of the Debian aptitude manual,
one host each, both routed to one shard, crawled in rounds with the figures
``scripts/bench_sites.py`` prints (its site app, config and ground truth), until nothing is due.

Before issue 30 the idle shard's end cut the busy one's fetch a second later, every round.
Asserts what was fetched, the rounds, and the server log's politeness; never wall time.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
from round_helpers import REPO, new_crawl, serve

from batchcrawl.engine.shard import host_shard
from batchcrawl.ring import HashRing
from batchcrawl.round import run_rounds
from batchcrawl.store.sql import query


def _script():
    spec = importlib.util.spec_from_file_location("bench_sites", REPO / "scripts/bench_sites.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


bench = _script()
LANGS = ("en", "fr")
SITE = bench.Site(
    "aptitude-2",
    tuple(bench.Part(bench.APTITUDE_DOCS / lang, (f"{lang}.aptitude.test",)) for lang in LANGS),
    "aptitude-doc-en aptitude-doc-fr",
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        bool(SITE.missing()),
        reason=f"{bench.APTITUDE_DOCS}/{{en,fr}} absent: install the Debian packages "
        "aptitude-doc-en aptitude-doc-fr (scripts/test.sh does)",
    ),
]


def test_two_languages_on_one_shard_are_crawled_whole_and_politely(tmp_path):
    delay = 0.05
    cfg = bench.site_config(SITE, delay, shards=2, workers=2, threads=8, flush_interval_s=5.0)
    ring = HashRing(cfg.fetch.shards, cfg.fetch.ring_vnodes)
    assert len({host_shard(h, None, cfg, ring) for h in SITE.hosts}) == 1  # one shard has all
    app = bench.SiteApp(SITE)
    with serve(app) as server:
        seeds = [server.base_url(p.hosts[0]) + "/" for p in SITE.parts]
        crawl = new_crawl(tmp_path / "crawl", cfg, seeds)
        summaries = run_rounds(crawl.url, cfg, 10)
        log = server.log.entries()
        port = server.port
    truth = bench.reachable(SITE, port)
    assert len(truth) > 150
    ok = {r["url"] for r in query(crawl, "SELECT url FROM fetched WHERE fetch_status = 200")
          .to_pylist()}  # fmt: skip
    assert sorted(truth - ok) == []
    left = [(s["round"], s["not_fetched"]) for s in summaries]
    assert all(n == 0 for _, n in left), left
    assert len(summaries) <= 4, left  # the manuals' link depth, not seconds-long slices
    figures = bench.log_figures(log, delay)
    assert figures["violations"] == 0 and figures["robots_not_first"] == []
