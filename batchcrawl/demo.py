"""The demo: crawl a local multi-host sample web for a few rounds and show what was crawled.

Everything stays on this machine (docs/design.md §10): the sample web (:class:`~batchcrawl.testing.sampleweb.SampleWeb`,
with robots.txt variants, redirects, dead links, duplicates and a spider trap) is served on an
ephemeral loopback port; the crawl config resolves only ``*.test`` names (to 127.0.0.1), asks no DNS
server and may contact 127.0.0.0/8 only, so the sample pages' links to real sites are never followed.
The rounds run on the embedded default: a ``distributed.LocalCluster`` and a local crawl directory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from batchcrawl.config import Config, load_config, loopback_test_config, to_toml
from batchcrawl.frontier.inject import inject
from batchcrawl.round import run_rounds
from batchcrawl.store import sql
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.lock import WriterLock
from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.testing.webserver import MultiHostServer

#: Settings the demo changes from the defaults (a small web, a short politeness delay).
DEMO_SETTINGS: dict[str, dict[str, Any]] = {
    "politeness": {"host_delay_s": 0.1, "ip_delay_s": 0.0, "ip_concurrency": 16,
                   "max_crawl_delay_s": 1.0},
    "frontier": {"buckets": 16},
    "generate": {"max_urls_per_host": 100},
    "fetch": {"shards": 2, "threads": 8, "time_limit_s": 12.0, "connect_timeout_s": 5.0, "read_timeout_s": 5.0,
              "total_timeout_s": 10.0},
    "filters": {"max_depth": 8},
}  # fmt: skip

#: Named queries shown at the end.
DEMO_QUERIES = ("status-counts", "top-hosts", "fetch-errors")


def headline(result: Mapping[str, Any]) -> str:
    """The demo's first closing line, in the words of ``batchcrawl status``: URLs in the ``fetched``
    status (content stored; from the ``status-counts`` query) and the fetch attempts of the rounds.

    ``result`` is :func:`run_demo`'s return value."""
    statuses = dict(zip(*(result["queries"]["status-counts"].column(c).to_pylist()
                          for c in ("status", "urls")), strict=True))  # fmt: skip
    attempts = sum(r["attempts"] for r in result["rounds"])
    return (f"{statuses.get('fetched', 0):,} URLs fetched and stored, from {attempts:,} fetch "
            f"attempts in {len(result['rounds'])} rounds.")  # fmt: skip


def fresh_demo_dir(base: str = "batchcrawl-demo") -> str:
    """``base``, or ``base-2``, ``base-3`` ... : the first name that does not exist yet."""
    name, n = base, 1
    while os.path.exists(name):
        n += 1
        name = f"{base}-{n}"
    return name


def demo_config(sets: tuple[str, ...] = ()) -> Config:
    """The demo's config: loopback only (:func:`loopback_test_config`), :data:`DEMO_SETTINGS`, then
    the user's ``--set`` pairs."""
    base = loopback_test_config(**DEMO_SETTINGS)
    return load_config(files=[("demo settings", to_toml(base))], environ={}, sets=sets)


def run_demo(
    crawl_url: str,
    *,
    hosts: int = 20,
    pages: int = 800,
    rounds: int = 4,
    sets: tuple[str, ...] = (),
    on_round: Callable[[dict[str, Any]], None] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Serve a sample web of ``hosts`` hosts and about ``pages`` pages on loopback, create the crawl
    ``crawl_url`` (which must not exist), inject one seed per host and run up to ``rounds`` rounds.

    Returns ``{"crawl", "port", "seeds", "rounds": [summaries], "queries": {name: pyarrow.Table}}``.

    Raises
    ------
    CrawlDirError
        ``crawl_url`` already holds a crawl.
    """
    cfg = demo_config(sets)
    web = SampleWeb(hosts, pages, seed=0)
    with MultiHostServer(web, host="127.0.0.1") as server:
        port = web.bind(server.port).port
        seeds = web.seeds()
        crawl = CrawlDir.create(crawl_url, to_toml(cfg), cfg.frontier.buckets)
        with WriterLock(crawl, owner="batchcrawl demo"):
            injected = inject(crawl, cfg, seeds, source="sample web seeds")
        summaries = run_rounds(crawl.url, cfg, rounds, progress=progress, on_round=on_round)
    queries: Mapping[str, Any] = {name: sql.query(crawl, sql.named_query(name))
                                  for name in DEMO_QUERIES}  # fmt: skip
    return {
        "crawl": crawl.url,
        "port": port,
        "seeds": seeds,
        "inject": injected,
        "rounds": summaries,
        "queries": dict(queries),
    }
