"""crawl_status: URLs by status, hosts, depths, outcomes and per-generation summaries."""

from __future__ import annotations

import datetime as dt
import json

from crawl_helpers import frontier_row, small_crawl

from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.status import crawl_status, due_urls


def test_status_of_a_small_crawl(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    st = crawl_status(crawl)
    assert (st["generation"], st["round"], st["buckets"]) == (1, 1, 2)
    assert st["urls"] == {
        "total": 6,
        "by_status": {"fetched": 3, "error": 1, "gone": 1, "queued": 1},
        "due_now": 2,  # the queued and the error URL (neither has a time: due since the epoch)
        "due_now_on_held_hosts": 0,
    }
    assert st["hosts"] == {"total": 2, "domains": 2}
    assert st["depth"] == {"0": 1, "1": 1, "2": 4}
    assert st["fetched"] == {
        "attempts": 5,
        "given_back": 0,
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
    assert empty["urls"] == {
        "total": 0, "by_status": {}, "due_now": 0, "due_now_on_held_hosts": 0
    }  # fmt: skip
    assert empty["depth"] == {} and empty["fetched"]["attempts"] == 0
    assert empty["hosts"] == {"total": 0, "domains": 0}


def test_due_urls_is_the_due_count_of_status(tmp_path):
    """The closing summaries say how many URLs are due with this function: the number `batchcrawl
    status` shows (issue 34). A fresh-user trial: a stream stopped with 332 refetches due said
    "queued 0", and status had no line for them; fetched and gone URLs the schedule made due
    count now, as queued and error ones whose time has come; not those due later, nor final
    statuses."""
    crawl = small_crawl(tmp_path / "c")
    assert due_urls(crawl) == crawl_status(crawl)["urls"]["due_now"] == 2  # queued and error
    assert due_urls(CrawlDir.create(str(tmp_path / "e"), "", buckets=4)) == 0
    past, future = dt.datetime(2026, 1, 1), dt.datetime(2999, 1, 1)
    rows = []
    for i, (status, when) in enumerate([
        ("queued", past), ("queued", future), ("queued", None), ("error", past),
        ("error", future), ("fetched", past), ("fetched", future), ("fetched", None),
        ("gone", past), ("robots_denied", past), ("filtered", past), ("refused", None),
    ]):  # fmt: skip
        row = frontier_row(i, status=status)
        row["next_fetch_time"] = when
        rows.append(row)
    other = CrawlDir.create(str(tmp_path / "d"), "", buckets=1)
    files = [other.write_table("frontier", "frontier/gen=1/b.parquet", rows)]
    other.commit(other.manifest(), {"frontier": files}, {"step": "inject"})
    # queued past and without a time, error past, fetched past, gone past
    assert due_urls(other) == crawl_status(other)["urls"]["due_now"] == 5


def test_a_due_count_that_outlasts_its_timeout_is_left_out(tmp_path, monkeypatch):
    """A stream stopped by a signal counts its due URLs for at most a timeout (the query scans
    the whole frontier: seconds at tens of millions of URLs; a stop must end within 2 s, issue
    34): past it DuckDB is interrupted and the count is None. Here the query is one that runs for
    minutes; with no timeout the same crawl's count is there."""
    from batchcrawl.store import sql

    crawl = small_crawl(tmp_path / "c")
    real = sql.named_query
    slow = (
        "SELECT 'queued' AS status, count(*) AS urls FROM range(100000000000) t(i) WHERE i % 7 = 3"
    )
    monkeypatch.setattr(sql, "named_query", lambda name: slow if name == "due-now" else real(name))
    assert due_urls(crawl, timeout_s=0.3) is None
    monkeypatch.undo()
    assert due_urls(crawl, timeout_s=60) == 2
