"""A worker's footer cache (``shuffle.FOOTERS``) holds only the update it serves: a shard empties
it as it starts fetching the next round or takes a micro-batch, so the footers of the round before
(~2 MB each) are not held through the fetch, the worker's memory peak (issue 33).

A real two-process LocalCluster for rounds (the caches live in the worker processes); the stream
shard actor runs in this process on a real loopback server.
"""

from __future__ import annotations

import dataclasses
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fetch_helpers import fetch_item
from round_helpers import new_crawl, round_config, sample_web, serve

from batchcrawl.engine.shard import StreamShardActor
from batchcrawl.round import Crawler, dask_client
from batchcrawl.store import shuffle
from batchcrawl.testing.webserver import Response

pytestmark = pytest.mark.timeout(300)


def _cached_rounds() -> list[int]:
    """In a worker: the round of every fact file whose footer its cache holds."""
    from batchcrawl.store import shuffle as worker_shuffle

    return sorted(
        int(m.group(1))
        for key in list(worker_shuffle.FOOTERS._footers)
        if (m := re.search(r"round=(\d+)/", str(key[1])))
    )


def test_a_rounds_fetch_drops_the_footers_of_the_update_before(tmp_path):
    cfg = round_config(round={"workers": 2}, fetch={"shards": 2})
    with serve(sample_web()) as web, dask_client(cfg) as client:
        crawl = new_crawl(tmp_path / "c", cfg, web.app.seeds())
        crawler = Crawler(crawl.url, client)
        held = []
        try:
            for _ in range(3):
                summary = crawler.run_round(cfg)
                assert summary["attempts"] > 0
                held.append([r for rounds in client.run(_cached_rounds).values() for r in rounds])
        finally:
            crawler.close_actors()
    # each round's update read its own fact files (so some worker cached footers), and only
    # those: the next round's fetch dropped them before it wrote its own
    for rnd, rounds in enumerate(held, start=1):
        assert rounds, f"round {rnd}: no footer cached (the update read no fact file?)"
        assert set(rounds) == {rnd}, (rnd, rounds)


def test_a_micro_batch_take_drops_the_footers_of_the_merge_before(
    web, host_name, test_config, tmp_path
):
    url = web.base_url(host_name) + "/"
    crawl = new_crawl(tmp_path / "crawl", test_config, [url])
    rel = "links/round=1/shard=00.parquet"
    with crawl.open_output(rel) as fh:
        pq.write_table(pa.table({"dst_url_key": pa.array([3, 6, 9], pa.uint64())}), fh)
    with crawl.fs.open(crawl.path(rel), "rb") as fh:
        shuffle.FOOTERS.open(crawl, rel, fh)  # as a merge's read of the micro-batch before
    assert shuffle.FOOTERS._footers

    web.app.add(host_name, "/robots.txt", Response(404))
    buckets = test_config.frontier.buckets
    actor = StreamShardActor(crawl.url, test_config, 0)
    actor.start(cfg=test_config, round=2, host_files=[], seed_hosts={host_name},
                seed_domains=set(), content_files=[], cold=False)  # fmt: skip
    try:
        actor.top_up([dataclasses.asdict(fetch_item(url))])
        actor.take_batch(round=2, next_round=3, generation=2, buckets=buckets, final=False,
                         force=False)  # fmt: skip
        assert not shuffle.FOOTERS._footers
    finally:
        actor.take_batch(round=3, next_round=4, generation=3, buckets=buckets, final=True,
                         force=False)  # fmt: skip
        actor.close()
