"""Parts of the round driver that need no cluster."""

from __future__ import annotations

from batchcrawl.config import loopback_test_config, to_toml
from batchcrawl.frontier import table as frontier
from batchcrawl.frontier.inject import inject
from batchcrawl.round import Crawler
from batchcrawl.store.crawldir import CrawlDir


def test_seed_scope_is_rescanned_only_after_an_inject(tmp_path, monkeypatch):
    cfg = loopback_test_config(frontier={"buckets": 4})
    crawl = CrawlDir.create(str(tmp_path / "c"), to_toml(cfg), 4)
    inject(crawl, cfg, ["http://a.test/"])
    scans = []
    real = frontier.seed_scope
    monkeypatch.setattr(
        frontier, "seed_scope", lambda c, m: scans.append(m.generation) or real(c, m)
    )
    crawler = Crawler(crawl.url, client=None)
    assert crawler.seed_scope(crawl, crawl.manifest()) == ({"a.test"}, {"a.test"})
    crawl.commit(crawl.manifest(), {}, {"step": "round"}, round=1)  # rounds add no seeds
    assert crawler.seed_scope(crawl, crawl.manifest())[0] == {"a.test"}
    assert len(scans) == 1
    inject(crawl, cfg, ["http://b.test/"])  # e.g. another process, between two rounds
    assert crawler.seed_scope(crawl, crawl.manifest())[0] == {"a.test", "b.test"}
    assert len(scans) == 2
