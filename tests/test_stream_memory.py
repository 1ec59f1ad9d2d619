"""A stream's memory is bounded (issue 11 item 4; BUbiNG's virtualizer): on a 200-host web with
50,000 URLs all due at once and ``fetch.max_queued_urls`` = 5,000, no shard ever holds more than
5,000 URLs (the rest waits in the frontier) and the Dask worker processes' resident memory stays
flat while the stream fetches.

The held count is the shard's own (``FetchWorker.stream_held`` right after each top-up, the only
moment it grows), asserted strictly; the RSS of each worker process (psutil) is sampled after every
micro-batch and asserted loosely: after warm-up it grows by less than half.
"""

from __future__ import annotations

import json
import time

import psutil
import pytest
from round_helpers import new_crawl, round_config, sample_web, serve

from batchcrawl.console.signals import StopRequest
from batchcrawl.stream import run_stream

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

CAP = 5_000
URLS = 50_000
STREAM_S = 30.0  # at least; and at least MIN_SAMPLES micro-batches, however loaded the machine
MIN_SAMPLES = 6


def _worker_rss() -> dict[int, int]:
    """Resident bytes of each Dask worker process of the embedded LocalCluster (the processes
    this test spawned through multiprocessing's ``spawn_main``)."""
    out = {}
    for p in psutil.Process().children(recursive=True):
        try:
            if any("spawn_main" in part for part in p.cmdline()):
                out[p.pid] = p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return out


def test_a_stream_holds_at_most_max_queued_urls_and_its_workers_rss_stays_flat(tmp_path):
    web = sample_web(hosts=200, pages=URLS, zipf_exponent=0.0, page_bytes=200,
                     links_per_page=4, menu_links=2, extras_every=0)  # fmt: skip
    cfg = round_config(
        politeness={"host_delay_s": 0.0, "max_crawl_delay_s": 0.0},
        fetch={"max_queued_urls": CAP},
        stream={"flush_interval_s": 1.0},
    )
    samples: list[dict[int, int]] = []
    held: list[dict[int, int]] = []
    stop = StopRequest()
    t0 = time.monotonic()

    def progress(snap) -> None:
        samples.append(_worker_rss())
        held.append(snap["held"])
        if len(samples) >= MIN_SAMPLES and time.monotonic() - t0 >= STREAM_S:
            stop.event.set()  # as SIGTERM would: the stream ends at its next checkpoint

    with serve(web):
        urls = [u for h in web.hosts for u in web.pages_of(h.name)]
        assert len(urls) == URLS
        crawl = new_crawl(tmp_path / "crawl", cfg, urls)
        summary = run_stream(crawl.url, cfg, stop, max_seconds=10 * STREAM_S,
                             progress=progress)  # fmt: skip
    # -- held URLs: bounded by the cap, and the cap is what bounded them ----------------------------
    print(json.dumps(summary))
    assert summary["stopped_by"] is None and stop.is_set(), summary  # stopped by the request
    assert 0.8 * CAP <= summary["held_max"] <= CAP, summary["held_max"]
    assert all(n <= CAP for h in held for n in h.values())
    assert summary["attempts"] > 2 * CAP, "the shards were topped up again as they drained"
    assert summary["attempts"] < URLS, "still URLs waiting in the frontier at the end"
    # -- RSS of each worker process: flat after warm-up (the first third of the samples) ----------
    assert len(samples) >= MIN_SAMPLES, len(samples)
    pids = set(samples[-1])
    assert len(pids) == cfg.round.workers
    warm = len(samples) // 3
    for pid in pids:
        series = [s[pid] for s in samples[warm:] if pid in s]
        assert max(series) < 1.5 * series[0], (pid, [round(x / 2**20) for x in series])
