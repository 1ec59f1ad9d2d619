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

from batchcrawl.console.signals import StopRequest
from batchcrawl.round import run_rounds
from batchcrawl.stream import run_stream
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


STAR = {"budget": "star", "star_min_urls_per_domain": 4, "star_urls_per_linking_domain": 8,
        "beast_delay_s": 3600.0, "beast_max_delay_s": 86400.0}  # fmt: skip


def _crawl(tmp_path, name: str, generate: dict, rounds: int, stream: bool = False):
    web = SpamFarmWeb()
    cfg = round_config(
        generate={"max_urls_per_domain": 300, **generate},
        politeness={"host_delay_s": 0.0, "ip_delay_s": 0.0, "ip_concurrency": 16},
        fetch={"threads": 16, "tail_rate_ratio": 0.0, "tail_capacity_ratio": 0.0},
        filters={"max_depth": 10, "allow_domains": ["farm.test"]},
        stream={"flush_interval_s": 0.5},
    )
    with serve(web) as server:
        seeds = [f"http://{h}:{server.port}/" for h in NORMAL]
        crawl = new_crawl(tmp_path / name, cfg, seeds)
        if stream:
            summaries = [run_stream(crawl.url, cfg, StopRequest(), max_seconds=120)]
        else:
            summaries = run_rounds(crawl.url, cfg, rounds)
    rows = crawl.read_current("fetched", ["url_host_registered_domain", "round"]).to_pylist()
    per_round = Counter((r["round"], r["url_host_registered_domain"] == "farm.test") for r in rows)
    return crawl, summaries, per_round


def _farm_waits(crawl) -> list[dict]:
    """The farm's queued URLs whose next fetch BEAST put more than half an hour away."""
    frontier = crawl.read_current("frontier", ["domain", "status", "next_fetch_time"]).to_pylist()
    soon = dt.datetime.now(dt.UTC).replace(tzinfo=None) + dt.timedelta(seconds=1800)
    return [f for f in frontier if f["domain"] == "farm.test" and f["status"] == "queued"
            and f["next_fetch_time"] > soon]  # fmt: skip


def _linking_domains(crawl) -> dict[str, int]:
    return {r["domain"]: r["linking_domains"] for r in crawl.read_current("indegree").to_pylist()}


def test_star_bounds_a_spam_farm_while_normal_domains_keep_their_pace(tmp_path):
    crawl, summaries, star_rounds = _crawl(tmp_path, "star", STAR, 4)
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
    deg = _linking_domains(crawl)
    assert deg["farm.test"] == 1 and all(deg[h[4:]] >= 3 for h in NORMAL)
    # BEAST: the farm's URLs over budget were delayed, not dropped, and the index skips them
    delayed = sum(s["generate"]["beast_delayed"] for s in summaries)
    assert delayed > 0 and sum(s["update"]["delayed"] for s in summaries) == delayed
    assert _farm_waits(crawl)


def test_a_stream_keeps_in_degrees_and_beast_delays_as_rounds_do(tmp_path):
    """``crawl --stream`` with STAR: each micro-batch merges its edges into ``domainlinks`` and
    ``indegree`` and moves the URLs over budget into BEAST's wait, so the stream ends with nothing
    due instead of handing out the farm's capped URLs at every top-up."""
    crawl, (summary,), per_round = _crawl(tmp_path, "stream", STAR, 0, stream=True)
    assert summary["stopped_by"] == "nothing_due", summary
    deg = _linking_domains(crawl)
    assert deg["farm.test"] == 1 and all(deg[h[4:]] >= 3 for h in NORMAL)
    assert sum(n for (_, farm), n in per_round.items() if not farm) == len(NORMAL) * (
        NORMAL_PAGES + 1
    )
    waits = _farm_waits(crawl)
    fetched_farm = sum(n for (_, farm), n in per_round.items() if farm)
    assert waits and len(waits) > 10 * fetched_farm, (len(waits), fetched_farm)
