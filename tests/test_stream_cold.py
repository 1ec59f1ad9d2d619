"""A stream's first request to a host after a clean stop and after a writer that died
(``StreamShardActor.start(cold=...)``, ``WriterLock.took_over``): only requests of a dead writer
were never persisted, so only then does every host wait a full politeness delay first. On a real
loopback server and a real crawl directory; the shard actor runs in this process."""

from __future__ import annotations

import dataclasses
import time

import pytest
from fetch_helpers import fetch_item
from round_helpers import new_crawl

from batchcrawl.engine.shard import StreamShardActor
from batchcrawl.testing.webserver import Response

pytestmark = pytest.mark.timeout(120)

DELAY_S = 20.0  # a host delay far longer than the test: a cooled host is not asked at all


@pytest.mark.parametrize("cold", [False, True])
def test_a_stream_cools_new_hosts_only_after_a_writer_died(cold, web, host_name, test_config,
                                                           tmp_path):  # fmt: skip
    web.app.add(host_name, "/robots.txt", Response(404))
    web.app.add(host_name, "/", Response(200, [("Content-Type", "text/html")], b"<p>home</p>"))
    cfg = test_config.replace(politeness={"host_delay_s": DELAY_S, "max_crawl_delay_s": DELAY_S})
    url = web.base_url(host_name) + "/"
    crawl = new_crawl(tmp_path / "crawl", cfg, [url])
    mark = web.log.mark()
    actor = StreamShardActor(crawl.url, cfg, 0)
    actor.start(cfg=cfg, round=1, host_files=[], seed_hosts={host_name},
                seed_domains=set(), content_files=[], cold=cold)  # fmt: skip
    try:
        actor.top_up([dataclasses.asdict(fetch_item(url))])
        deadline = time.monotonic() + 5  # a host that need not wait is asked within moments
        while not web.log.since(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
        asked = [e.path for e in web.log.since(mark) if e.host == host_name]
    finally:
        actor.take_batch(round=1, next_round=2, generation=2, buckets=cfg.frontier.buckets,
                         final=True, force=False)  # fmt: skip
        actor.close()
    # robots.txt first, then the page after the delay: a cooled host waits DELAY_S for either
    assert asked == ([] if cold else ["/robots.txt"]), asked
