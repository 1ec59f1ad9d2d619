"""Skewed webs (issue 30, items 2 and 5): a shard's fetch ends by its own work only.

The 500-host benchmark web hides what these show: with hundreds of hosts every shard always has
work. Here one shard has all the work and the other none (one host; two hosts routed to one
shard), one large host sits beside fifty small ones that run dry early, and one page takes
seconds to answer. Each web is crawled on a real two-process cluster from a real loopback
server; the tests assert what was fetched, in how many rounds, that no round left URLs for
later, and the server log's politeness -- never wall time. Before issue 30 each of them needed
more rounds: ``fetch.shard_grace_s`` ended the busy shard's fetch one second after the idle
shard's, and the tail rules cut rounds whose next round would have had the same hosts.
"""

from __future__ import annotations

import hashlib

import pytest
from round_helpers import (
    fetched_rows,
    hosts_on_one_shard,
    new_crawl,
    politeness_violations,
    robots_not_first,
    round_config,
    serve,
)

from batchcrawl.config import Config, load_config
from batchcrawl.round import run_rounds
from batchcrawl.testing.webserver import Response

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

DELAY_S = 0.05
#: seconds the slow page takes: more than the old one-second shard grace, little CI time
SLOW_S = 4.0


class LinkWeb:
    """A loopback web of linked HTML pages: ``pages[host][path]`` lists the page's links (paths
    on its host). Every page also links to its host's ``/`` (a site menu), every robots.txt
    allows everything, and the paths in ``slow`` answer after :data:`SLOW_S` seconds."""

    def __init__(self, pages: dict[str, dict[str, list[str]]], slow: frozenset[str] = frozenset()):
        self.pages, self.slow = pages, slow

    def __call__(self, host: str, path: str, headers) -> Response:
        if path == "/robots.txt":
            return Response(200, [("Content-Type", "text/plain")], b"User-agent: *\nDisallow:\n")
        links = self.pages.get(host, {}).get(path)
        if links is None:
            return Response(404, [("Content-Type", "text/plain")], b"not found")
        body = "".join(f'<a href="{href}">{href}</a> ' for href in ["/", *links])
        html = f"<html><body><h1>{host}{path}</h1><p>{_prose(host + path)}</p>{body}</body></html>"
        slow = path in self.slow
        return Response(200, [("Content-Type", "text/html; charset=utf-8")], html.encode(),
                        behaviour="slow" if slow else None, delay_s=SLOW_S if slow else 0.0)  # fmt: skip


_SYLLABLES = (
    "ka",
    "lo",
    "mi",
    "nu",
    "pe",
    "ra",
    "si",
    "to",
    "ve",
    "wu",
    "xa",
    "yo",
    "ze",
    "bi",
    "co",
    "du",
)


def _prose(seed: str) -> str:
    """Sixty words of made-up text particular to ``seed``, so no two pages are near-duplicates
    (dedup.trap_near_share would take a web of look-alike pages for a spider trap)."""
    hexes = (
        hashlib.sha256(seed.encode()).hexdigest() + hashlib.sha256(seed.encode()[::-1]).hexdigest()
    )
    return " ".join(_SYLLABLES[int(a, 16)] + _SYLLABLES[int(b, 16)]
                    for a, b in zip(hexes[::2], hexes[1::2], strict=True))  # fmt: skip


def _tree(fanout: list[int]) -> dict[str, list[str]]:
    """The pages of one host: ``/`` links to ``fanout[0]`` pages, each of those to
    ``fanout[1]`` pages below it, and so on."""
    pages: dict[str, list[str]] = {}
    level = ["/"]
    for n in fanout:
        below = []
        for parent in level:
            base = parent.rstrip("/")
            kids = [f"{base}/p{i}" for i in range(n)]
            pages[parent] = kids
            below += kids
        level = below
    for leaf in level:
        pages[leaf] = []
    return pages


def _crawl(tmp_path, cfg: Config, web: LinkWeb, max_rounds: int = 8):
    """Crawl ``web`` from each host's ``/`` until nothing is due: (summaries, fetched rows,
    the server's request log, the server's port)."""
    with serve(web) as server:
        seeds = [f"http://{h}:{server.port}/" for h in web.pages]
        crawl = new_crawl(tmp_path / "crawl", cfg, seeds)
        summaries = run_rounds(crawl.url, cfg, max_rounds)
        log = server.log.entries()
        port = server.port
    return summaries, fetched_rows(crawl), log, port


def _assert_complete(web: LinkWeb, port: int, summaries, rows, log, rounds: int) -> None:
    """Every page fetched (200), in ``rounds`` rounds, none leaving URLs for later, politely."""
    want = {f"http://{h}:{port}{p}" for h, pages in web.pages.items() for p in pages}
    ok = {r["url"] for r in rows if r["fetch_status"] == 200}
    assert ok == want, sorted(want - ok)[:5]
    left = [(s["round"], s["not_fetched"], s["shards_tail_cut"]) for s in summaries]
    assert all(n == 0 for _, n, _ in left), f"(round, not fetched, shards cut): {left}"
    assert len(summaries) == rounds, left
    assert politeness_violations(log, lambda _host: DELAY_S) == []
    assert robots_not_first(log) == []


def test_one_host_is_fetched_level_by_level_whatever_the_idle_shard_does(tmp_path):
    # 40 pages a level: 2 s a round at 0.05 s, while the other shard has nothing to do
    cfg = round_config()
    web = LinkWeb({"solo.test": _tree([40, 1])})
    summaries, rows, log, port = _crawl(tmp_path, cfg, web)
    _assert_complete(web, port, summaries, rows, log, rounds=3)


def test_two_hosts_on_one_shard(tmp_path):
    cfg = round_config()
    hosts = hosts_on_one_shard(cfg, "pair", 2)
    web = LinkWeb({h: _tree([40]) for h in hosts})
    summaries, rows, log, port = _crawl(tmp_path, cfg, web)
    _assert_complete(web, port, summaries, rows, log, rounds=2)
    busy = [s for s in summaries[1]["fetch_by_shard"] if s["fetch_seconds"] > 0.5]
    assert len(busy) == 1, summaries[1]["fetch_by_shard"]  # one shard did all of round 2


def test_one_large_host_beside_fifty_small_ones_is_not_cut_at_its_tail(tmp_path):
    # the small hosts run dry within a second or two of round 2 with nothing new found; a tail
    # cut then would only start a round 3 with the same large host
    cfg = round_config()
    pages = {"large.test": _tree([120])}
    pages |= {f"small{i}.test": _tree([2]) for i in range(50)}
    web = LinkWeb(pages)
    summaries, rows, log, port = _crawl(tmp_path, cfg, web)
    _assert_complete(web, port, summaries, rows, log, rounds=2)


def test_a_page_slower_than_the_old_shard_grace_is_fetched_in_its_round(tmp_path):
    cfg = round_config(fetch={"read_timeout_s": SLOW_S + 4, "total_timeout_s": SLOW_S + 6})
    web = LinkWeb({"slowpage.test": _tree([10]) | {"/slow": []}}, slow=frozenset({"/slow"}))
    web.pages["slowpage.test"]["/"] = ["/slow", *web.pages["slowpage.test"]["/"]]
    summaries, rows, log, port = _crawl(tmp_path, cfg, web)
    _assert_complete(web, port, summaries, rows, log, rounds=2)
    slow = [r for r in rows if r["url"].endswith("/slow")]
    assert [(r["round"], r["fetch_status"]) for r in slow] == [(2, 200)]


def test_an_old_crawl_toml_with_the_retired_shard_grace_still_loads():
    text = "[fetch]\nshard_grace_s = 3600.0\ntail_idle_s = 1.5\n"
    cfg = load_config(files=[("crawl.toml", text)], environ={})
    assert cfg == Config().replace(fetch={"tail_idle_s": 1.5})
    assert not hasattr(cfg.fetch, "shard_grace_s")
