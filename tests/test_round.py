"""Integration tests of the round (issue 5 items 1-2; docs/design.md §7): ``run_rounds`` on a LocalCluster
of 2 worker processes against a SampleWeb served on loopback, and the ``round`` command in fresh
processes.

One module-scoped crawl (:func:`crawled`) runs rounds until nothing is due; the tests then read it
and the server's request log: the generations it committed, the pages it reached against the web's
ground truth (:meth:`SampleWeb.reachable`), where requests went, robots.txt order and the gaps
between requests to one host across rounds.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest
from round_helpers import (
    by_host,
    cli_command,
    fetched_rows,
    frontier_rows,
    new_crawl,
    politeness_violations,
    read_every_file,
    robots_not_first,
    round_config,
    sample_delay,
    sample_web,
    serve,
    subprocess_env,
)
from servers.apps import RoutingApp

from batchcrawl.round import run_rounds
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.testing.webserver import Response

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

MAX_ROUNDS = 12
#: A response outcome: the URL was requested and answered.
ANSWERED = {"ok", "redirect", "gone", "http_error", "server_error", "truncated", "not_modified"}


@pytest.fixture(scope="module")
def crawled(tmp_path_factory):
    """A SampleWeb (6 hosts, 90 pages, no trap) crawled until nothing is due, in one process on
    one LocalCluster; yields ``(web, cfg, crawl, summaries, log_entries, steps)``."""
    web = sample_web()
    cfg = round_config()
    steps: list[str] = []
    with serve(web) as server:
        crawl = new_crawl(tmp_path_factory.mktemp("round") / "crawl", cfg, web.seeds())
        summaries = run_rounds(crawl.url, cfg, MAX_ROUNDS, on_step=steps.append)
        entries = server.log.entries()
    return web, cfg, crawl, summaries, entries, steps


def test_each_round_commits_a_generation_with_its_files(crawled):
    _, _, crawl, summaries, _, steps = crawled
    assert steps[:5] == ["generate", "fetch", "update", "compact", "commit"]
    assert [s["round"] for s in summaries] == list(range(1, len(summaries) + 1))
    for s in summaries:
        manifest = crawl.manifest(s["generation"])
        assert manifest.round == s["round"]
        r = s["round"]
        for table in ("fetched", "links", "fetchlists"):
            assert any(f"/round={r}/" in f"/{e.path}" for e in manifest.tables[table]), table
        gen = s["generation"]
        # the hosts table: the parent's listing plus this round's runs (only the hosts it
        # touched), or one compacted base
        hosts = list(manifest.tables["hosts"])
        parent = list(crawl.manifest(gen - 1).tables.get("hosts", ()))
        new = hosts[len(parent) :] if hosts[: len(parent)] == parent else hosts
        assert new and all(f"hosts/gen={gen}/" in e.path for e in new)
        lists = [e for e in manifest.tables["fetchlists"] if f"/round={r}/" in f"/{e.path}"]
        touched = set(crawl.read_table("fetchlists", lists, ["host"]).column("host").to_pylist())
        assert len(new) == 1 and not new[0].run or sum(e.rows for e in new) == len(touched)
        assert all("frontier/gen=" in e.path for e in manifest.tables["frontier"])
        assert read_every_file(crawl, manifest) > 0
        rows = [f for f in fetched_rows(crawl, gen) if f["round"] == r]
        assert len(rows) == s["attempts"] + s["given_back"]  # a row for a URL given back too
        stored = [f for f in rows if f["outcome"] in ("ok", "truncated", "not_modified")]
        assert s["stored"] == len(stored) and s["responses"] >= s["stored"]
        warcs = {f["warc_filename"] for f in rows if f["warc_filename"]}
        assert all(crawl.fs.exists(crawl.path(w)) for w in warcs)
    assert crawl.manifest().generation == summaries[-1]["generation"]


def test_rounds_until_nothing_due_reach_every_reachable_page(crawled):
    web, cfg, crawl, summaries, _, _ = crawled
    assert len(summaries) < MAX_ROUNDS, "the crawl stopped because nothing was due"
    status = {r["url"]: r for r in frontier_rows(crawl)}
    truth = web.reachable(max_depth=cfg.filters.max_depth)
    missing = {u: status.get(u, {}).get("status") for u in truth}
    missing = {
        u: s
        for u, s in missing.items()
        if s not in ("fetched", "redirect", "gone")
        # the crawler's own extension filter drops the image (deny_extensions has png)
        and not (s == "filtered" and web.kind_of(u) == "image")
    }
    assert not missing, f"{len(missing)} reachable URLs not fetched: {sorted(missing.items())[:10]}"
    answered = {f["url"] for f in fetched_rows(crawl) if f["outcome"] in ANSWERED}
    assert answered <= truth, f"fetched beyond scope or robots: {sorted(answered - truth)[:10]}"
    assert sum(s["responses"] for s in summaries) == len(
        [f for f in fetched_rows(crawl) if f["outcome"] in ANSWERED]
    )


def test_no_request_left_loopback(crawled):
    web, _, crawl, _, entries, _ = crawled
    names = {h.name for h in web.hosts}
    assert entries and {e.host for e in entries} <= names
    assert all(h.endswith(".test") for h in names)
    fetched = fetched_rows(crawl)
    assert {f["url_host_name"] for f in fetched} <= names
    assert {f["fetch_ip"] for f in fetched if f.get("fetch_ip")} <= {"127.0.0.1"}
    externals = {r["url"]: r for r in frontier_rows(crawl) if r["host"] not in names}
    assert externals, "the web links to real sites; the frontier must have seen them"
    assert all(r["status"] == "filtered" for r in externals.values()), externals


def test_robots_txt_is_the_first_request_to_every_host(crawled):
    _, _, _, _, entries, _ = crawled
    assert robots_not_first(entries) == []
    # fetched once per host: the cache (RFC 9309 §2.4) holds across rounds
    robots = Counter(e.host for e in entries if e.path == "/robots.txt")
    assert set(robots) == {e.host for e in entries} and set(robots.values()) == {1}, robots


def test_no_two_requests_to_a_host_closer_than_its_delay_across_rounds(crawled):
    web, cfg, _, summaries, entries, _ = crawled
    assert len(summaries) >= 3
    assert politeness_violations(entries, sample_delay(web, cfg)) == []
    # control: the same check finds the gaps when the delay asked for is longer than kept
    assert politeness_violations(entries, lambda host: 1.0)
    busiest = max(by_host(entries).values(), key=len)
    assert len(busiest) > 10


# -- the command in fresh processes --------------------------------------------------------------
SLOW_HOST = "h0003.test"
SLOW_DELAY_S = 7.0


def _run(*args):
    return subprocess.run(
        cli_command(*args), capture_output=True, text=True, env=subprocess_env(), timeout=120
    )


def test_round_command_json_exit_codes_and_state_reloaded_by_a_new_process(tmp_path):
    """Three ``batchcrawl round`` processes on a web of 3 hosts x 2 pages: each of the first two
    prints one JSON line and exits 0, the third finds nothing due and exits 75. Host h0003 asks for
    ``Crawl-delay: 7`` (longer than starting a process): the second process must wait for the
    politeness clock the first one persisted in the hosts table, and must not fetch robots.txt
    again (its cache is reloaded too)."""
    web = sample_web(hosts=3, pages=6, zipf_exponent=0.0, extras_every=0, links_per_page=4,
                     menu_links=2)  # fmt: skip
    app = RoutingApp(fallback=web)
    app.add(SLOW_HOST, "/robots.txt", Response(200, [("Content-Type", "text/plain")],
                                               f"User-agent: *\nCrawl-delay: {SLOW_DELAY_S:g}\n"
                                               .encode()))  # fmt: skip
    # the slow host is a one-host tail: this test wants each round to wait it out
    cfg = round_config(politeness={"max_crawl_delay_s": 10.0},
                       fetch={"tail_idle_s": 0.0, "tail_capacity_ratio": 0.0})  # fmt: skip
    config_file = tmp_path / "crawl.toml"
    from batchcrawl.config import to_toml

    config_file.write_text(to_toml(cfg))
    with serve(app) as server:
        web.bind(server.port)
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("\n".join(web.seeds()) + "\n")
        target = tmp_path / "crawl"
        init = _run("init", target, "--config", config_file, "--seeds", seeds)
        assert init.returncode == 0, init.stderr
        runs = []
        for _ in range(3):
            mark = server.log.mark()
            proc = _run("round", target, "--workers", "1")
            runs.append((proc, server.log.since(mark)))
        entries = server.log.entries()
    (a, log_a), (b, log_b), (c, log_c) = runs
    for proc, n in ((a, 1), (b, 2)):
        assert proc.returncode == 0, proc.stderr[-2000:]
        lines = proc.stdout.splitlines()
        assert len(lines) == 1
        summary = json.loads(lines[0])
        assert summary["round"] == n and summary["step"] == "round"
        assert summary["responses"] >= 1 and set(summary["seconds_by_step"]) == {
            "generate", "fetch", "fetch_startup", "fetch_tail", "update", "compact", "commit"
        }  # fmt: skip
        assert 0.0 <= summary["fetch_idle_share"] <= 1.0
    assert c.returncode == 75, c.stderr[-2000:]
    assert c.stdout == "" and "batchcrawl: nothing due" in c.stderr and log_c == []
    assert "error" not in c.stderr and not (target / "fetchlists" / "round=3").exists()
    # the second process reloaded the robots.txt cache and the politeness clock
    assert any(e.host == SLOW_HOST for e in log_b)
    delays = {SLOW_HOST: SLOW_DELAY_S}
    assert (
        politeness_violations(entries, lambda h: delays.get(h, cfg.politeness.host_delay_s)) == []
    )
    assert [e for e in log_b if e.path == "/robots.txt"] == []
    assert robots_not_first(entries) == []
    crawl = CrawlDir.open(str(target))
    from batchcrawl.store.sql import query

    hosts = {r["host"]: r for r in query(crawl, "SELECT * FROM hosts").to_pylist()}
    assert set(hosts) == {h.name for h in web.hosts}
    slow = hosts[SLOW_HOST]
    assert slow["crawl_delay_s"] == SLOW_DELAY_S and slow["host_delay_s"] >= SLOW_DELAY_S
    page_requests = Counter(e.host for e in log_a + log_b if e.path != "/robots.txt")
    assert slow["pages_fetched"] == page_requests[SLOW_HOST] == 2
