"""Parts of the round driver that need no cluster."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.config import loopback_test_config, to_toml
from batchcrawl.engine.shard import fetch_items, stream_items
from batchcrawl.frontier import table as frontier
from batchcrawl.frontier.inject import inject
from batchcrawl.records import FetchItem
from batchcrawl.round import Crawler
from batchcrawl.store import schemas
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


def test_time_fit_only_after_a_round_that_fetched_some_but_not_all_of_its_lists():
    """``generate.time_fit``: ``(time_fit x rate x time limit, per-host floor)``; no fit before a
    rate is known, after a round that fetched everything (None) or nothing (0: the next round
    would select nothing and read as nothing due), or with ``time_fit = 0``."""
    cfg = loopback_test_config(
        fetch={"time_limit_s": 4.0}, politeness={"host_delay_s": 0.5}, generate={"time_fit": 1.5}
    )
    crawler = Crawler("unused", client=None)
    assert crawler.time_fit(cfg) is None
    crawler.fetch_rate = 0.0
    assert crawler.time_fit(cfg) is None
    crawler.fetch_rate = 10.0
    assert crawler.time_fit(cfg) == (60, 9)
    assert crawler.time_fit(cfg.replace(politeness={"host_delay_s": 0.0})) == (60, 0)
    assert crawler.time_fit(cfg.replace(generate={"time_fit": 0.0})) is None
    crawler.fetch_rate = 0.01
    assert crawler.time_fit(cfg)[0] == 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 5),
                          st.one_of(st.none(), st.text(max_size=8)),
                          st.one_of(st.none(), st.datetimes(min_value=dt.datetime(2000, 1, 1),
                                                            max_value=dt.datetime(2100, 1, 1)))),
                max_size=30))  # fmt: skip
def test_fetch_items_are_the_rows_of_the_fetch_list(rows):
    """A shard's fetch list becomes FetchItems column-wise, positionally: the same items, in
    order, as one dict per row (every field, nulls and timestamps too); the items of one host
    share its host and domain strings."""
    table = pa.table(
        {
            "url_key": pa.array([r[0] for r in rows], pa.uint64()),
            "url": [f"http://h{i}.test/{r[1]}" for i, r in enumerate(rows)],
            "host": [f"h{r[1] % 3}.test" for r in rows],
            "domain": [f"d{r[1] % 2}.test" for r in rows],
            "depth": pa.array([r[1] for r in rows], pa.int32()),
            "hops_out": pa.array([r[1] // 2 for r in rows], pa.int32()),
            "discovered_round": pa.array([r[1] + 1 for r in rows], pa.int32()),
            "discovered_seq": pa.array(range(len(rows)), pa.int64()),
            "retries": pa.array([r[1] % 3 for r in rows], pa.int32()),
            "etag": pa.array([r[2] for r in rows], pa.string()),
            "last_modified": pa.array([r[2] and r[2][::-1] for r in rows], pa.string()),
            "content_fetch_time": pa.array([r[3] for r in rows], pa.timestamp("ms")),
            "content_digest": pa.array([r[2] and "sha1:" + r[2] for r in rows], pa.string()),
        }
    ).select(list(schemas.fetch_item_columns()))
    items = fetch_items(table)
    topped_up = stream_items(table.to_pylist())  # a stream's top-up rows
    assert items == topped_up == [FetchItem(**row) for row in table.to_pylist()]
    for built in (items, topped_up):
        for name in ("host", "domain"):  # one string object per distinct value, not per item
            values = [getattr(item, name) for item in built]
            assert len({id(v) for v in values}) == len(set(values))
