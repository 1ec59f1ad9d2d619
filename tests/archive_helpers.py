"""A real small crawl for the archive-tool tests (test_archive_tools, test_pywb): a sample web on
loopback with redirects, a duplicate page (a WARC revisit), 404s and robots.txt, crawled for two
rounds on a 1-worker LocalCluster with the CDXJ written at crawl time, and the WARC records of it.
"""

from __future__ import annotations

import os
from typing import Any

from batchcrawl.config import loopback_test_config, to_toml
from batchcrawl.fetch.warc import read_record
from batchcrawl.frontier.inject import inject
from batchcrawl.round import run_rounds
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.testing.webserver import MultiHostServer

NAME = "archivetest"


def archive_crawl(path: str | os.PathLike, rounds: int = 2) -> tuple[CrawlDir, SampleWeb]:
    """Crawl a 3-host, 60-page sample web (extras on host 1) into ``path``; the server is stopped
    when this returns. Returns the crawl and the (deterministic) web."""
    web = SampleWeb(3, 60, seed=11, page_bytes=1500, trap=False, extras_every=1)
    server = MultiHostServer(web).start()
    web.bind(server.port)
    try:
        cfg = loopback_test_config(
            crawl={"name": NAME},
            politeness={"host_delay_s": 0.01, "ip_delay_s": 0.0, "ip_concurrency": 8,
                        "max_crawl_delay_s": 0.05},
            frontier={"buckets": 2},
            fetch={"shards": 2, "threads": 4, "connect_timeout_s": 2.0, "read_timeout_s": 2.0,
                   "total_timeout_s": 5.0, "warc_max_bytes": 60_000},
            round={"workers": 1, "threads_per_worker": 1},
        )  # fmt: skip
        crawl = CrawlDir.create(str(path), to_toml(cfg), buckets=cfg.frontier.buckets)
        inject(crawl, cfg, web.seeds(), source="seeds")
        run_rounds(crawl.url, cfg, rounds)
        return crawl, web
    finally:
        server.stop()


def warc_files(crawl: CrawlDir) -> list[str]:
    """Crawl-relative paths of the WARC files the committed ``fetched`` rows point into."""
    t = crawl.read_current("fetched", columns=["warc_filename"])
    return sorted({n for n in t.column(0).to_pylist() if n is not None})


def captures(crawl: CrawlDir) -> list[dict[str, Any]]:
    """Committed ``fetched`` rows with a WARC record, each with ``record`` (the
    :class:`~batchcrawl.fetch.warc.StoredRecord` read back at its offset)."""
    out = []
    for row in crawl.read_current("fetched").to_pylist():
        if row["warc_filename"] is None:
            continue
        row["record"] = read_record(
            crawl.fs, crawl.path(row["warc_filename"]), row["warc_record_offset"],
            row["warc_record_length"],
        )  # fmt: skip
        out.append(row)
    return out
