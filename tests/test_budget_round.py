"""STAR and BEAST through real rounds on loopback (issue 17 item 4): a spam farm -- thousands of
hosts of one pay-level domain linking to each other, one link from outside -- beside four normal
domains that link to each other. With ``generate.budget = "star"`` the farm gets its small
in-degree budget per round and the rest of its URLs wait (BEAST), while the normal domains are
crawled at the same pace as with the fixed cap; the fixed cap (the control) lets the farm take
most of the fetches."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter

import pytest
from round_helpers import new_crawl, round_config, serve

from batchcrawl.round import run_rounds
from batchcrawl.testing.webserver import Response

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

FARM_HOSTS = 3000
NORMAL = [f"www.n{k}.test" for k in range(4)]
NORMAL_PAGES = 8


class SpamFarmWeb:
    """Normal domains ``n0..n3.test`` (8 pages each: every page links to its site's pages and to
    one page of each other normal domain; ``n0``'s home also links to the farm) and a farm of
    :data:`FARM_HOSTS` hosts ``hK.farm.test``, each page linking to 40 random farm hosts and to
    nothing outside."""

    def __init__(self, seed: int = 3) -> None:
        self.port = 0
        self.rng = random.Random(seed)

    def bind(self, port: int) -> None:
        self.port = port

    def _url(self, host: str, path: str) -> str:
        return f"http://{host}:{self.port}{path}"

    def __call__(self, host: str, path: str, headers) -> Response:
        host = host.split(":")[0]
        if path == "/robots.txt":
            return Response(404, [("Content-Type", "text/plain")], b"")
        if host.endswith(".farm.test"):
            k = int(host.split(".")[0][1:])
            rng = random.Random(k)
            links = [self._url(f"h{rng.randrange(FARM_HOSTS)}.farm.test", "/") for _ in range(40)]
        elif host in NORMAL:
            links = [self._url(host, f"/p{j}") for j in range(NORMAL_PAGES)]
            links += [self._url(h, "/p1") for h in NORMAL if h != host]
            if host == NORMAL[0] and path == "/":
                links.append(self._url("h0.farm.test", "/"))
        else:
            return Response(404, [("Content-Type", "text/plain")], b"")
        body = "".join(f'<a href="{u}">{i} {host}</a> ' for i, u in enumerate(links))
        html = f"<html><body><p>{host} {path}</p>{body}</body></html>".encode()
        return Response(200, [("Content-Type", "text/html")], html)


def _crawl(tmp_path, name: str, generate: dict, rounds: int):
    web = SpamFarmWeb()
    cfg = round_config(
        generate={"max_urls_per_domain": 300, **generate},
        politeness={"host_delay_s": 0.0, "ip_delay_s": 0.0, "ip_concurrency": 16},
        fetch={"threads": 16, "tail_rate_ratio": 0.0},
        filters={"max_depth": 10, "allow_domains": ["farm.test"]},
    )
    with serve(web) as server:
        seeds = [f"http://{h}:{server.port}/" for h in NORMAL]
        crawl = new_crawl(tmp_path / name, cfg, seeds)
        summaries = run_rounds(crawl.url, cfg, rounds)
    rows = crawl.read_current("fetched", ["url_host_registered_domain", "round"]).to_pylist()
    per_round = Counter((r["round"], r["url_host_registered_domain"] == "farm.test") for r in rows)
    return crawl, summaries, per_round


def test_star_bounds_a_spam_farm_while_normal_domains_keep_their_pace(tmp_path):
    star = {"budget": "star", "star_min_urls_per_domain": 4, "star_urls_per_linking_domain": 8,
            "beast_delay_s": 3600.0, "beast_max_delay_s": 86400.0}  # fmt: skip
    crawl, summaries, star_rounds = _crawl(tmp_path, "star", star, 4)
    _, _, fixed_rounds = _crawl(tmp_path, "fixed", {"budget": "fixed"}, 4)
    budget = 4 + 8 * 1  # the farm: one other domain (n0) links to it
    for r in range(1, 5):
        assert star_rounds[(r, True)] <= budget
        # normal domains: the same pages per round as under the fixed cap
        assert star_rounds[(r, False)] == fixed_rounds[(r, False)]
    assert sum(star_rounds[(r, False)] for r in range(1, 5)) == len(NORMAL) * (NORMAL_PAGES + 1)
    farm_star = sum(star_rounds[(r, True)] for r in range(1, 5))
    farm_fixed = sum(fixed_rounds[(r, True)] for r in range(1, 5))
    assert farm_fixed > 3 * farm_star  # the control: without STAR the farm takes the crawl
    # the in-degree table: the farm has one linking domain, each normal domain three or four
    deg = {r["domain"]: r["linking_domains"] for r in crawl.read_current("indegree").to_pylist()}
    assert deg["farm.test"] == 1 and all(deg[h[4:]] >= 3 for h in NORMAL)
    # BEAST: the farm's URLs over budget were delayed, not dropped, and the index skips them
    delayed = sum(s["generate"]["beast_delayed"] for s in summaries)
    assert delayed > 0 and sum(s["update"]["delayed"] for s in summaries) == delayed
    frontier = crawl.read_current("frontier", ["domain", "status", "next_fetch_time"]).to_pylist()
    waiting = [f for f in frontier if f["domain"] == "farm.test" and f["status"] == "queued"]
    soon = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(seconds=1800)
    assert waiting and any(f["next_fetch_time"] > soon for f in waiting)
