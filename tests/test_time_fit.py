"""A round's fetch lists fitted to its time limit (``generate.time_fit``, Nutch's ``-topN``): after a
round that ran out of time, the next selects at most what it can fetch, and what it leaves stays
due for the rounds after it."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from round_helpers import fetched_rows, new_crawl, round_config, serve

from batchcrawl.errors import NothingDue
from batchcrawl.round import Crawler, dask_client
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

HOSTS = [f"fit{i}.test" for i in range(4)]


def _page(host, path, headers):
    if path == "/robots.txt":
        return Response(404, [], b"")
    return Response(200, [("Content-Type", "text/html")], f"<p>{host}{path}</p>".encode())


def test_a_round_after_a_time_limited_one_selects_at_most_its_fit_and_the_rest_stays_due(tmp_path):
    cfg = round_config(
        politeness={"host_delay_s": 0.2, "ip_delay_s": 0.0, "ip_concurrency": 8},
        fetch={"shards": 2, "threads": 4, "time_limit_s": 1.0, "tail_rate_ratio": 0.0,
               "tail_idle_s": 0.0, "tail_capacity_ratio": 0.0},
    )  # fmt: skip
    with serve(_page) as web:
        seeds = [f"{web.base_url(h)}/p{i}" for h in HOSTS for i in range(40)]
        crawl = new_crawl(tmp_path / "c", cfg, seeds)
        with dask_client(cfg) as client:
            crawler = Crawler(crawl.url, client)
            try:
                first = crawler.run_round(cfg)
                assert first["not_fetched"] > 0, "1 s at 0.2 s per page cannot fetch 160 pages"
                assert "capped_time" not in first["generate"]["not_selected"]  # no rate yet
                done = first["generate"]["selected"] - first["not_fetched"]
                rate = done / first["seconds_by_step"]["fetch"]
                assert crawler.fetch_rate == pytest.approx(rate, rel=1e-2)
                n = math.ceil(cfg.generate.time_fit * crawler.fetch_rate * 1.0)
                floor = math.ceil(1.0 / 0.2) + 1
                second = crawler.run_round(cfg)
                gen = second["generate"]
                due = len(seeds) - first["attempts"]
                assert gen["selected"] <= max(n, floor * len(HOSTS)) < due
                assert gen["selected"] + gen["not_selected"]["capped_time"] == due
                # no time limit that binds: every URL left is selected, and nothing is lost
                loose = cfg.replace(fetch={"time_limit_s": 120.0})
                rounds = [crawler.run_round(loose)]
                assert "capped_time" not in rounds[0]["generate"]["not_selected"]
                assert crawler.fetch_rate is None  # it fetched its whole lists
                with pytest.raises(NothingDue):
                    rounds.append(crawler.run_round(loose))
            finally:
                crawler.close_actors()
    attempts = Counter(r["url"] for r in fetched_rows(crawl))
    assert set(attempts) == {canonicalize(u) for u in seeds}
    assert set(attempts.values()) == {1}
