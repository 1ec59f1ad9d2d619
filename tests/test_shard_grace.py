"""``fetch.shard_grace_s`` (issue 16, "no idle fetch phase"): once the first shard's fetch run is
over, the other shards end theirs within the grace, counted from that run's end
(:meth:`batchcrawl.engine.shard.ShardActor.run_over`), not from the moment its result (written facts)
reached the driver. On a real two-process cluster and a loopback web, and the actor's signal
alone; and a crawl's deadline (``crawl --max-seconds``) ends every shard's run by it."""

from __future__ import annotations

import asyncio

import pytest
from round_helpers import fetched_rows, hosts_on_two_shards, new_crawl, round_config, serve
from test_crash import with_crawler

from batchcrawl.engine.shard import ShardActor, host_shard
from batchcrawl.errors import CrawlDirError
from batchcrawl.pipeline import Deadline
from batchcrawl.ring import HashRing
from batchcrawl.round import dask_client
from batchcrawl.testing.webserver import Response

GRACE_S = 1.0
DELAY_S = 0.25
WRITE_S = 3.0  # far above the latencies a loaded machine adds to the gap (<= WRITE_S - 0.3)


def _slow_writes(seconds: float) -> None:
    """In a Dask worker process: each shard's hosts rows (written after its run, with its facts)
    take ``seconds`` longer, as on slow storage."""
    import time

    original = ShardActor.write_hosts

    def slow(self, *args, **kwargs):
        time.sleep(seconds)
        return original(self, *args, **kwargs)

    ShardActor.write_hosts = slow


def _app(host, path, headers):
    if path == "/robots.txt":
        return Response(404, [], b"")
    return Response(200, [("Content-Type", "text/plain")], f"{host}{path}".encode())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_grace_counts_from_the_first_shards_run_end(tmp_path):
    # only the grace ends a shard early: no tail rules, long timeouts
    cfg = round_config(
        politeness={"host_delay_s": DELAY_S, "max_crawl_delay_s": DELAY_S},
        fetch={"tail_idle_s": 0.0, "tail_rate_ratio": 0.0, "shard_grace_s": GRACE_S},
    )
    quick, slow = hosts_on_two_shards(cfg, "g")
    with serve(_app) as server:
        base = f"http://{{}}:{server.port}"
        # the quick host's shard is done after ~2 delays; the slow one needs ~40 (10 s)
        seeds = [base.format(quick) + "/q0", base.format(quick) + "/q1"]
        seeds += [base.format(slow) + f"/s{i}" for i in range(40)]
        crawl = new_crawl(tmp_path / "crawl", cfg, seeds)
        with dask_client(cfg) as client:
            client.run(_slow_writes, WRITE_S)  # a shard's facts take WRITE_S to write
            summary = with_crawler(crawl.url, client, lambda c: c.run_round(cfg))
    by_shard = {s["shard"]: s for s in summary["fetch_by_shard"]}
    ring = HashRing(cfg.fetch.shards, cfg.fetch.ring_vnodes)
    q = by_shard[host_shard(quick, None, cfg, ring)]
    s = by_shard[host_shard(slow, None, cfg, ring)]

    def run_end(r):  # seconds from the shard's call to its run's end
        return r["startup_s"] + r["fetch_seconds"]

    gap = run_end(s) - run_end(q)
    # told to end GRACE_S after the quick run's end (+ the driver's 20 ms poll, the remote call,
    # and the slow run's last fetch in flight, under a delay of 0.25 s), not GRACE_S after the
    # quick shard's result came (WRITE_S later)
    assert q["seconds"] - run_end(q) >= WRITE_S
    assert GRACE_S - 0.1 <= gap < GRACE_S + WRITE_S - 0.3, (gap, summary["fetch_by_shard"])
    rows = fetched_rows(crawl)
    slow_done = [r for r in rows if slow in r["url"]]
    assert summary["not_fetched"] == 40 - len(slow_done) > 0
    # the grace, not the time limit (60 s), left the slow host's URLs for later
    assert summary["shards_ended_early"] == 1 and summary["time_limit_hit"] is False
    assert len([r for r in rows if quick in r["url"]]) == 2
    assert all(k in r for r in summary["fetch_by_shard"]
               for k in ("startup_s", "fetch_seconds", "idle_s", "tail_s", "seconds"))  # fmt: skip


def test_run_over_answers_in_either_order_and_after_a_failed_fetch(tmp_path):
    actor = ShardActor(str(tmp_path / "absent"), round_config(), 0)
    kwargs = dict(cfg=round_config(), round=3, generation=1, fetchlist=None, host_files=[],
                  seed_hosts=set(), seed_domains=set(), buckets=4, cold=False)  # fmt: skip

    async def main():
        early = asyncio.ensure_future(actor.run_over("a"))  # asked before the fetch starts
        await asyncio.sleep(0)
        assert not early.done()
        with pytest.raises(CrawlDirError):
            await actor.fetch(run_token="a", **kwargs)  # no crawl there: fails before its run
        assert await asyncio.wait_for(early, 5) is True
        assert await asyncio.wait_for(actor.run_over("a"), 5) is True  # asked after
        # the same round fetched again (a rerun in this process) is a new fetch, not "a"
        again = asyncio.ensure_future(actor.run_over("b"))
        await asyncio.sleep(0.05)
        assert not again.done()
        with pytest.raises(CrawlDirError):
            await actor.fetch(run_token="b", **kwargs)
        assert await asyncio.wait_for(again, 5) is True
        assert sorted(actor._run_over) == ["b"]  # finished fetches' events are dropped

    asyncio.run(main())


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
    assert first["time_limit_hit"] is True and first["shards_ended_early"] == 0
    assert second["attempts"] == 10 and second["not_fetched"] == 0, second
    assert sorted(r["url"] for r in fetched_rows(crawl)) == sorted(seeds)
