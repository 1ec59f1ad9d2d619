"""How a shard's fetch ends (issue 30: by its own work only, never because another shard
finished; the retired ``fetch.shard_grace_s`` ended it one second after the first shard's run).
A crawl's deadline (``crawl --max-seconds``) ends every shard's run by it. Skewed webs, where one
shard has all the work: tests/test_skewed_webs.py."""

from __future__ import annotations

import pytest
from round_helpers import fetched_rows, hosts_on_two_shards, new_crawl, round_config, serve
from test_crash import with_crawler

from batchcrawl.engine.cluster import dask_client
from batchcrawl.pipeline import Deadline
from batchcrawl.testing.webserver import Response


def _app(host, path, headers):
    if path == "/robots.txt":
        return Response(404, [], b"")
    return Response(200, [("Content-Type", "text/plain")], f"{host}{path}".encode())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_shards_run_ends_by_the_crawls_deadline_whatever_the_round_spent_before(tmp_path):
    # crawl --max-seconds: fetch.time_limit_s counts from a run's start, the deadline does not.
    # A deadline already passed when the fetch starts (generate and start-up took the time
    # left): the runs fetch nothing, their URLs stay queued; the next round fetches them.
    cfg = round_config(politeness={"host_delay_s": 0.05, "max_crawl_delay_s": 0.05})
    quick, slow = hosts_on_two_shards(cfg, "g")
    with serve(_app) as server:
        seeds = [f"http://{h}:{server.port}/p{i}" for h in (quick, slow) for i in range(5)]
        crawl = new_crawl(tmp_path / "crawl", cfg, seeds)
        with dask_client(cfg) as client:

            def rounds(crawler):
                crawler.deadline = Deadline.after(0.0)
                first = crawler.run_round(cfg)
                crawler.deadline = Deadline.after(60.0)
                return first, crawler.run_round(cfg)

            first, second = with_crawler(crawl.url, client, rounds)
    assert first["attempts"] == 0 and first["not_fetched"] == 10, first
    assert first["time_limit_hit"] is True and "shards_ended_early" not in first
    assert second["attempts"] == 10 and second["not_fetched"] == 0, second
    assert sorted(r["url"] for r in fetched_rows(crawl)) == sorted(seeds)
