"""crawl_status: URLs by status, hosts, depths, outcomes and per-generation summaries."""

from __future__ import annotations

import json

from crawl_helpers import frontier_row, small_crawl

from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.status import crawl_status, queued_urls


def test_status_of_a_small_crawl(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    st = crawl_status(crawl)
    assert (st["generation"], st["round"], st["buckets"]) == (1, 1, 2)
    assert st["urls"] == {
        "total": 6,
        "by_status": {"fetched": 3, "error": 1, "gone": 1, "queued": 1},
    }
    assert st["hosts"] == {"total": 2, "domains": 2}
    assert st["depth"] == {"0": 1, "1": 1, "2": 4}
    assert st["fetched"] == {
        "attempts": 5,
        "by_outcome": {"ok": 3, "gone": 1, "network_error": 1},
        "header_rejected": {},
    }
    gens = st["generations"]
    assert [(g["generation"], g["round"], g["step"]) for g in gens] == [
        (0, 0, "init"),
        (1, 1, "round"),
    ]
    assert gens[1]["stored"] == 5 and gens[1]["elapsed_s"] == 6.5
    json.dumps(st)  # serializable as is


def test_status_of_an_older_generation_and_of_a_new_crawl(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    crawl.commit(
        crawl.manifest(),
        {
            "frontier": [
                crawl.write_table("frontier", "frontier/gen=2/b.parquet", [frontier_row(1)])
            ]
        },
        {"step": "inject"},
    )
    assert crawl_status(crawl)["urls"]["total"] == 1
    old = crawl_status(crawl, generation=1)
    assert old["urls"]["total"] == 6 and len(old["generations"]) == 2
    empty = crawl_status(CrawlDir.create(str(tmp_path / "e"), "", buckets=4))
    assert empty["urls"] == {"total": 0, "by_status": {}}
    assert empty["depth"] == {} and empty["fetched"]["attempts"] == 0
    assert empty["hosts"] == {"total": 0, "domains": 0}


def test_queued_urls_is_the_queued_count_of_status(tmp_path):
    """The closing summary of a multi-round crawl says how many URLs are queued with this
    function: the number `batchcrawl status` shows (issue 34)."""
    crawl = small_crawl(tmp_path / "c")
    assert queued_urls(crawl) == crawl_status(crawl)["urls"]["by_status"]["queued"] == 1
    assert queued_urls(CrawlDir.create(str(tmp_path / "e"), "", buckets=4)) == 0


def test_a_queued_count_that_outlasts_its_timeout_is_left_out(tmp_path, monkeypatch):
    """A stream stopped by a signal counts its queued URLs for at most a timeout (the query scans
    the whole frontier: seconds at tens of millions of URLs; a stop must end within 2 s, issue
    34): past it DuckDB is interrupted and the count is None. Here the query is one that runs for
    minutes; with no timeout the same crawl's count is there."""
    from batchcrawl.store import sql

    crawl = small_crawl(tmp_path / "c")
    real = sql.named_query
    slow = (
        "SELECT 'queued' AS status, count(*) AS urls FROM range(100000000000) t(i) WHERE i % 7 = 3"
    )
    monkeypatch.setattr(
        sql, "named_query", lambda name: slow if name == "status-counts" else real(name)
    )
    assert queued_urls(crawl, timeout_s=0.3) is None
    monkeypatch.undo()
    assert queued_urls(crawl, timeout_s=60) == 1
