"""requeue: URLs that ended refused, robots_denied, gone or error made due again, by status and
host; and, end to end, a linked host the address policy refused is fetched after the policy was
widened and its URLs requeued (``inject --refetch`` reaches seeds only)."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime

import pytest
from round_helpers import cli_command, frontier_rows, new_crawl, round_config, subprocess_env
from test_inject import frontier_rows as rows_by_url
from test_inject import make_crawl, mark

from batchcrawl.config import to_toml
from batchcrawl.errors import ConfigError
from batchcrawl.frontier.inject import inject
from batchcrawl.frontier.requeue import requeue
from batchcrawl.records import REQUEUABLE_STATUSES, UrlStatus
from batchcrawl.store.crawldir import CONFIG_FILE
from batchcrawl.testing.webserver import MultiHostServer, Response

NOW = 1_700_000_000.0
URLS = {
    "refused": "http://a.test/",
    "robots_denied": "http://a.test/private",
    "gone": "http://b.test/old",
    "error": "http://b.test/flaky",
    "filtered": "http://b.test/deep",
    "fetched": "http://b.test/",
}


def _crawl_with_every_status(tmp_path):
    crawl, cfg = make_crawl(tmp_path)
    inject(crawl, cfg, list(URLS.values()))
    mark(crawl, 4, {url: {"status": status, "reason": f"why-{status}", "retries": 3,
                          "next_fetch_time": None} for status, url in URLS.items()})  # fmt: skip
    return crawl, cfg


def test_requeue_queues_the_chosen_statuses_due_now_with_reason_and_retries_cleared(tmp_path):
    crawl, cfg = _crawl_with_every_status(tmp_path)
    before = crawl.manifest().generation
    summary = requeue(crawl, cfg, ["refused", "gone"], clock=lambda: NOW)
    assert summary["committed"] and summary["generation"] == before + 1
    assert summary["requeued"] == 2 and summary["by_status"] == {"gone": 1, "refused": 1}
    rows = rows_by_url(crawl)
    assert len(rows) == len(URLS)  # no row lost or added
    for status in ("refused", "gone"):
        r = rows[URLS[status]]
        assert (r["status"], r["reason"], r["retries"]) == ("queued", None, 0)
        assert r["next_fetch_time"] == datetime.fromtimestamp(NOW)
    for status in ("robots_denied", "error", "filtered", "fetched"):  # untouched
        r = rows[URLS[status]]
        assert (r["status"], r["reason"], r["retries"]) == (status, f"why-{status}", 3)
        assert r["next_fetch_time"] is None
    assert crawl.manifest().summary["step"] == "requeue"


def test_requeue_only_the_given_hosts_and_never_a_leased_url(tmp_path):
    crawl, cfg = _crawl_with_every_status(tmp_path)
    mark(crawl, 4, {URLS["error"]: {"lease_round": 5, "lease_shard": 0}})
    summary = requeue(crawl, cfg, REQUEUABLE_STATUSES, hosts=["B.test"], clock=lambda: NOW)
    assert summary["hosts"] == ["b.test"] and summary["by_status"] == {"gone": 1}
    assert summary["leased_kept"] == 1  # the round that holds it decides
    rows = rows_by_url(crawl)
    assert rows[URLS["gone"]]["status"] == "queued"
    assert rows[URLS["error"]]["status"] == "error" and rows[URLS["error"]]["lease_round"] == 5
    assert rows[URLS["refused"]]["status"] == "refused"  # another host


def test_requeue_by_reason_prefix_tells_an_outages_gone_urls_from_404s(tmp_path):
    crawl, cfg = make_crawl(tmp_path)
    urls = {"http://a.test/1": "max_retries:connect", "http://a.test/2": "404",
            "http://b.test/3": "max_retries:timeout", "http://b.test/4": None}  # fmt: skip
    inject(crawl, cfg, list(urls))
    mark(crawl, 4, {u: {"status": "gone", "reason": why, "next_fetch_time": None}
                    for u, why in urls.items()})  # fmt: skip
    summary = requeue(crawl, cfg, ["gone"], reasons=["max_retries:connect"], clock=lambda: NOW)
    assert (summary["requeued"], summary["reasons"]) == (1, ["max_retries:connect"])
    rows = rows_by_url(crawl)
    assert [u for u in urls if rows[u]["status"] == "queued"] == ["http://a.test/1"]
    summary = requeue(crawl, cfg, ["gone"], reasons=["max_retries:", "nothing"])
    assert summary["requeued"] == 1  # b.test/3; the 404 and the URL without a reason stay gone
    rows = rows_by_url(crawl)
    assert {u for u in urls if rows[u]["status"] == "gone"} == {
        "http://a.test/2",
        "http://b.test/4",
    }


def test_requeue_of_a_host_makes_the_urls_its_hold_gave_back_due_now(tmp_path):
    """A host held ``unreachable`` gave its queued URLs back, due when the hold ends (up to an
    hour away); ``requeue --host`` says its outage is over: they are due now, the hold ends, and
    another host's given-back URLs and plain queued URLs are left as they were."""
    crawl, cfg = make_crawl(tmp_path)
    later = datetime.fromtimestamp(NOW + 3600)
    marks = {
        "http://a.test/down": {"status": "error", "reason": "connect", "retries": 1},
        "http://a.test/back": {"status": "queued", "reason": "host_unreachable"},
        "http://a.test/slow": {"status": "queued", "reason": "rate_limited"},
        "http://a.test/new": {"status": "queued", "reason": None},
        "http://b.test/back": {"status": "queued", "reason": "host_unreachable"},
    }
    inject(crawl, cfg, list(marks))
    mark(crawl, 4, {u: {**m, "next_fetch_time": later} for u, m in marks.items()})
    summary = requeue(crawl, cfg, ["error"], hosts=["a.test"], clock=lambda: NOW)
    assert summary["committed"] and summary["requeued"] == 3
    assert (summary["by_status"], summary["given_back"]) == ({"error": 1}, 2)
    rows = rows_by_url(crawl)
    for u in ("http://a.test/down", "http://a.test/back", "http://a.test/slow"):
        assert (rows[u]["status"], rows[u]["reason"]) == ("queued", None)
        assert rows[u]["next_fetch_time"] == datetime.fromtimestamp(NOW)
    for u in ("http://a.test/new", "http://b.test/back"):  # not given back by a.test's hold
        assert rows[u]["next_fetch_time"] == later
    assert rows["http://b.test/back"]["reason"] == "host_unreachable"
    # without --host, nothing of any host's given-back URLs is touched
    summary = requeue(crawl, cfg, ["error"], clock=lambda: NOW)
    assert not summary["committed"] and summary["given_back"] == 0


def test_requeue_commits_nothing_when_no_url_matches_and_refuses_other_statuses(tmp_path):
    crawl, cfg = _crawl_with_every_status(tmp_path)
    before = crawl.manifest().generation
    summary = requeue(crawl, cfg, ["refused"], hosts=["nowhere.test"])
    assert (summary["committed"], summary["requeued"], summary["generation"]) == (False, 0, before)
    assert crawl.manifest().generation == before
    for bad in (["filtered"], ["fetched"], []):
        with pytest.raises(ConfigError, match="requeue"):
            requeue(crawl, cfg, bad)
    assert set(REQUEUABLE_STATUSES) < {s.value for s in UrlStatus}


def test_a_refused_linked_host_is_fetched_once_the_policy_is_widened_and_it_is_requeued(tmp_path):
    """a.test (127.0.0.1) links to b.test (127.0.0.2); the policy allows only 127.0.0.1, so b.test's
    page ends ``refused`` and is never due again. Widening ``network.allow_networks`` alone leaves
    nothing due; ``batchcrawl requeue`` makes it due, and the next round fetches it."""
    from servers.apps import RoutingApp

    app_a, app_b = RoutingApp(), RoutingApp()
    servers = [MultiHostServer(app_a), MultiHostServer(app_b, host="127.0.0.2")]
    for s in servers:
        s.start()
    try:
        port_a, port_b = (s.port for s in servers)
        page_b = f"http://b.test:{port_b}/"
        html = f'<html><body><a href="{page_b}">b</a></body></html>'
        app_a.add("a.test", "/", Response(200, [("Content-Type", "text/html")], html.encode()))
        app_b.add("b.test", "/", Response(200, [("Content-Type", "text/html")], b"<p>b</p>"))
        network = {"resolve": {"a.test": "127.0.0.1", "b.test": "127.0.0.2"},
                   "system_dns": False}  # fmt: skip
        narrow = round_config(network={**network, "allow_networks": ["127.0.0.1/32"]},
                              filters={"allow_hosts": ["b.test"]})  # fmt: skip
        crawl = new_crawl(tmp_path / "crawl", narrow, [f"http://a.test:{port_a}/"])
        env = subprocess_env()

        def cli(*args, check=True):
            proc = subprocess.run(cli_command(*args), capture_output=True, text=True, env=env,
                                  timeout=300)  # fmt: skip
            assert not check or proc.returncode == 0, proc.stderr[-3000:]
            return proc

        cli("crawl", crawl.url, "--rounds", "3")
        status = {r["url"]: r["status"] for r in frontier_rows(crawl)}
        assert status[page_b] == "refused", status
        wide = narrow.replace(network={**network, "allow_networks": ["127.0.0.0/8"]})
        with open(crawl.path(CONFIG_FILE), "w", encoding="utf-8") as fh:
            fh.write(to_toml(wide))
        assert cli("round", crawl.url, check=False).returncode != 0  # nothing due
        assert {r["url"]: r["status"] for r in frontier_rows(crawl)}[page_b] == "refused"

        done = cli("requeue", crawl.url, "--host", "b.test")
        summary = json.loads(done.stdout)
        assert summary["requeued"] == 1 and summary["by_status"] == {"refused": 1}
        assert "1 URL queued again (refused 1)" in done.stderr, done.stderr
        assert "no URL is" in cli("requeue", crawl.url, "--status", "gone").stderr

        cli("round", crawl.url)
        row = {r["url"]: r for r in frontier_rows(crawl)}[page_b]
        assert (row["status"], row["fetch_status"]) == ("fetched", 200)
        assert [e.path for e in servers[1].log if e.host.startswith("b.test")][-1] == "/"
    finally:
        for s in servers:
            s.stop()


def test_requeued_robots_denied_urls_are_checked_against_the_sites_robots_txt_of_now(tmp_path):
    """A fresh-user trial: after a site's robots.txt stopped disallowing /secret/, requeueing
    (or ``inject --refetch``) left the URL robots_denied again, checked against the copy cached
    for ``robots.cache_ttl_s`` (24 h). Requeueing a robots_denied URL now expires its host's
    copy, so the next round reads robots.txt first and fetches the URL."""
    from servers.apps import RoutingApp

    app = RoutingApp()
    server = MultiHostServer(app)
    server.start()
    try:
        base = f"http://r.test:{server.port}"
        html = b'<html><body><a href="/secret/page.html">s</a></body></html>'

        def robots(body: bytes) -> Response:
            return Response(200, [("Content-Type", "text/plain")], body)

        app.add("r.test", "/robots.txt", robots(b"User-agent: *\nDisallow: /secret/\n"))
        app.add("r.test", "/", Response(200, [("Content-Type", "text/html")], html))
        app.add("r.test", "/secret/page.html", Response(200, [("Content-Type", "text/html")],
                                                          b"<p>now allowed</p>"))  # fmt: skip
        crawl = new_crawl(tmp_path / "crawl", round_config(), [f"{base}/"])
        env = subprocess_env()

        def cli(*args):
            proc = subprocess.run(cli_command(*args), capture_output=True, text=True, env=env,
                                  timeout=300)  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            return proc

        cli("crawl", crawl.url, "--rounds", "2")
        secret = f"{base}/secret/page.html"
        assert {r["url"]: r["status"] for r in frontier_rows(crawl)}[secret] == "robots_denied"
        app.add("r.test", "/robots.txt", robots(b"User-agent: *\nDisallow:\n"))
        robots_reads = sum(e.path == "/robots.txt" for e in server.log.entries())

        summary = json.loads(cli("requeue", crawl.url, "--status", "robots_denied").stdout)
        assert summary["by_status"] == {"robots_denied": 1} and summary["robots_expired"] == 1
        cli("round", crawl.url)
        row = {r["url"]: r for r in frontier_rows(crawl)}[secret]
        assert (row["status"], row["fetch_status"]) == ("fetched", 200)
        log = server.log.entries()
        assert sum(e.path == "/robots.txt" for e in log) == robots_reads + 1
        paths = [e.path for e in log]
        assert paths.index("/secret/page.html") > max(
            i for i, p in enumerate(paths) if p == "/robots.txt"
        )  # robots.txt read again first
    finally:
        server.stop()
