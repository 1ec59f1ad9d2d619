"""WARC file names are unique across crawls, rounds, shards and reruns (Common Crawl style), and gc
recognises them as the crawl's own layout."""

from __future__ import annotations

import datetime as dt

from batchcrawl.store.gc import is_layout_path
from batchcrawl.store.paths import warc_cdxj, warc_prefix

T = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC).timestamp()


def test_warc_prefix_names_crawl_round_shard_and_time():
    assert warc_prefix("news", 7, 3, T) == "news-00007-03-20260304050607"
    assert warc_prefix("my crawl/2", 1, 0, T) == "my-crawl-2-00001-00-20260304050607"
    names = {warc_prefix("news", r, s, T + t) for r in (1, 2) for s in (0, 1) for t in (0, 1)}
    assert len(names) == 8


def test_gc_layout_knows_the_names():
    name = f"warc/round=7/{warc_prefix('news', 7, 3, T)}-00012.warc.gz"
    assert is_layout_path("warc", name)
    assert is_layout_path("warc", name + ".tmp-0a1b")
    assert is_layout_path("warc", "warc/round=7/shard=03-00000.warc.gz")  # older crawls
    assert not is_layout_path("warc", "warc/round=7/news.warc.gz")
    cdxj = warc_cdxj(name)  # the CDXJ written beside it at crawl time (fetch.warc_cdxj)
    assert cdxj == name.removesuffix(".warc.gz") + ".cdxj"
    assert is_layout_path("warc", cdxj) and is_layout_path("warc", cdxj + ".tmp-0a1b")
    assert not is_layout_path("warc", "warc/round=7/news.cdxj")
