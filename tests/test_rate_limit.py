"""Issue 31, item 2: a rate limit (429/503) holds the whole host with a back-off that doubles up to
a cap, is jittered, resets after a quiet period and survives rounds and process restarts."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading

import fsspec
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from round_helpers import (
    cli_command,
    group_members,
    kill_group,
    new_crawl,
    round_config,
    serve,
    subprocess_env,
    wait_gone,
)

from batchcrawl.config import Config
from batchcrawl.fetch.holds import HostHolds, rate_limit_wait
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import FetchItem
from batchcrawl.store import sql
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key

T0 = 1_700_000_000.0
#: Jitter and clock slack of the gap checks: a hold is at least 0.9 x its step (JITTER), and a gap
#: measured by the server (request starts) is never shorter than the hold (it counts from the end
#: of the previous response); the log's millisecond rounding.
LOW = 0.9
SLACK_S = 0.002


def _busy_config(base_s: float, cap_s: float, **overrides: dict) -> Config:
    """One shard on one worker, host delay 0.05 s, a rate-limit back-off from ``base_s`` doubling
    up to ``cap_s`` seconds; ``overrides``: ``{section: {key: value}}`` over that."""
    cfg = round_config(
        politeness={"host_delay_s": 0.05, "ip_delay_s": 0.0, "ip_concurrency": 8,
                    "max_crawl_delay_s": 0.3, "rate_limit_backoff_s": base_s,
                    "max_rate_limit_backoff_s": cap_s},
        frontier={"buckets": 4, "retry_backoff_s": 0.1},
        fetch={"shards": 1}, round={"workers": 1},
    )  # fmt: skip
    return cfg.replace(**overrides) if overrides else cfg


def _step(n: int, base: float, cap: float) -> float:
    """The back-off step after the n-th rate limit in a row (n >= 1)."""
    return min(cap, base * 2 ** (n - 1))


def test_rate_limit_back_off_doubles_resets_and_honours_retry_after():
    now = [T0]
    holds = HostHolds(random.Random(3), clock=lambda: now[0])
    pol = Config().politeness  # 60 s doubling to a day, quiet 3600 s

    def wait(status, retry_after=None):
        return rate_limit_wait(holds, "h.test", status, retry_after, pol)

    assert wait(429) == pytest.approx(60, rel=0.1)
    assert wait(503) == pytest.approx(120, rel=0.1)  # repeated: doubled
    assert wait(429, retry_after=1000.0) == pytest.approx(1000)  # never below Retry-After
    assert wait(429) == pytest.approx(480, rel=0.1)
    now[0] += 600
    assert wait(200) is None and holds.get("h.test") is not None  # not quiet long enough
    now[0] += 3600
    assert wait(200) is None and holds.get("h.test") is None  # quiet: the back-off resets
    assert wait(429, retry_after=5.0) == pytest.approx(5.0)  # a first one with Retry-After
    assert wait(429, retry_after=5.0) == pytest.approx(120, rel=0.1)  # repeated: held
    assert wait(None) is None
    for _ in range(40):
        last = wait(429)
    assert last <= pol.max_rate_limit_backoff_s  # capped at a day


# -- a fetch worker: twenty 429s in a row are spaced by the back-off, another host keeps its pace ----
def _item(url: str) -> FetchItem:
    host = host_of(url)
    return FetchItem(url_key(url), url, host, domain_of(host), 0)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_twenty_429s_are_spaced_by_the_back_off_and_other_hosts_keep_their_pace(
    web, test_config, tmp_path
):
    base, cap = 0.2, 0.8
    cfg = test_config.replace(
        politeness={"rate_limit_backoff_s": base, "max_rate_limit_backoff_s": cap,
                    "host_delay_s": 0.02},
        fetch={"time_limit_s": 120.0, "tail_rate_ratio": 0.0, "tail_capacity_ratio": 0.0,
               "tail_idle_s": 0.0},  # no early end: all twenty requests in one run
    )  # fmt: skip
    busy, calm = "busy429.test", "calm429.test"
    for host in (busy, calm):
        web.app.add(host, "/robots.txt", Response(404, [], b""))
    mark = web.log.mark()
    urls = []
    for i in range(20):
        web.app.add(busy, f"/p{i}", Response(429, [("Content-Type", "text/plain")], b"slow down"))
        web.app.add(calm, f"/p{i}", Response(200, [("Content-Type", "text/html")], b"<p>ok</p>"))
        urls += [web.base_url(busy) + f"/p{i}", web.base_url(calm) + f"/p{i}"]
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(cfg, 0, fs, seed_hosts={busy, calm}, seed_domains=["busy429.test"])
    try:
        run = w.run([_item(canonicalize(u)) for u in urls], round=1)
        row = next(r for r in w.host_rows([busy]))
    finally:
        w.close()
    log = web.log.since(mark)
    got = [e.t_ms / 1000 for e in log if e.host == busy and e.path != "/robots.txt"]
    assert len(got) == 20 and sum(r["fetch_status"] == 429 for r in run.fetched) == 20
    for n, (a, b) in enumerate(zip(got, got[1:], strict=False), 1):
        assert b - a >= LOW * _step(n, base, cap) - SLACK_S, (n, b - a)
    pages = [e.host for e in log if e.path != "/robots.txt"]
    assert pages.count(calm) == 20
    # the calm host is not held with the busy one: it was fetched again and again while the busy
    # host waited out its holds (server log order, no clock), so it finished all twenty before the
    # busy host's sixth request (its first five holds come to >= 0.9 x 3.0 s)
    assert max(calm_fetches_per_hold(pages, busy, calm)) >= 3
    assert _nth(pages, busy, 6) > _last(pages, calm)
    assert (row["held_reason"], row["held_failures"]) == ("rate_limit", 20)


def calm_fetches_per_hold(pages: list[str], busy: str, calm: str) -> list[int]:
    """Requests to ``calm`` between each two consecutive requests to ``busy`` (``pages``: the
    hosts of the server log in order): a calm host spaced by the busy host's back-off gets at most
    one per hold."""
    counts, n, started = [], 0, False
    for host in pages:
        if host == busy:
            if started:
                counts.append(n)
            started, n = True, 0
        elif host == calm and started:
            n += 1
    return counts or [0]


def _nth(pages: list[str], host: str, n: int) -> int:
    """Log position of the ``n``-th request to ``host`` (len(pages) if there are fewer)."""
    at = [i for i, h in enumerate(pages) if h == host]
    return at[n - 1] if len(at) >= n else len(pages)


def _last(pages: list[str], host: str) -> int:
    return max(i for i, h in enumerate(pages) if h == host)


def test_calm_fetches_per_hold_tells_a_held_calm_host_from_a_free_one():
    """Control: the order check fails for a calm host paced by the busy host's holds."""
    paced = ["b", "c", "b", "c", "b", "c", "b"]
    free = ["b", "c", "c", "c", "c", "b", "c", "b"]
    assert max(calm_fetches_per_hold(paced, "b", "c")) == 1
    assert max(calm_fetches_per_hold(free, "b", "c")) == 4


# -- across `batchcrawl round` processes -----------------------------------------------------------
class BusySite:
    """``busy.test`` answers 429 to every page; ``calm.test`` is a chain of pages."""

    def __call__(self, host, path, headers):
        if path == "/robots.txt":
            return Response(404, [("Content-Type", "text/plain")], b"")
        if host == "busy.test":
            return Response(429, [("Content-Type", "text/plain")], b"slow down")
        n = int(path.strip("/") or 0)
        return Response(200, [("Content-Type", "text/html")], f'<a href="/{n + 1}">n</a>'.encode())


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_back_off_survives_round_processes(tmp_path):
    base, cap = 0.5, 4.0
    cfg = _busy_config(base, cap)
    with serve(BusySite()) as server:
        busy = [canonicalize(server.base_url("busy.test") + f"/b{i}") for i in range(4)]
        crawl = new_crawl(
            tmp_path / "crawl", cfg, [canonicalize(server.base_url("calm.test")), *busy]
        )
        counts = []
        for _ in range(3):
            done = subprocess.run(
                cli_command("round", crawl.url), env=subprocess_env(), capture_output=True,
                text=True, timeout=300,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr[-3000:]
            counts.append(sum(e.host == "busy.test" for e in server.log.entries()))
        log = server.log.entries()
    got = [e.t_ms / 1000 for e in log if e.host == "busy.test" and e.path != "/robots.txt"]
    assert counts[0] < counts[-1]  # the host was asked again by a later process, and then too
    for n, (a, b) in enumerate(zip(got, got[1:], strict=False), 1):
        assert b - a >= LOW * _step(n, base, cap) - SLACK_S, (n, b - a)
    rows = sql.query(
        crawl, "SELECT held_reason, held_failures FROM hosts WHERE host = 'busy.test'"
    ).to_pylist()
    assert rows == [{"held_reason": "rate_limit", "held_failures": len(got)}]
    calm = [e for e in log if e.host == "calm.test" and e.path != "/robots.txt"]
    assert len(calm) >= 3  # one page a round at least: the calm host is not held


# -- a stream (`batchcrawl crawl --stream`): the busy host is held, the calm one keeps its pace -----
class StreamSite:
    """``busy.test`` answers 429 to every page; ``calm.test`` serves pages without links."""

    def __call__(self, host, path, headers):
        if path == "/robots.txt":
            return Response(404, [("Content-Type", "text/plain")], b"")
        if host == "busy.test":
            return Response(429, [("Content-Type", "text/plain")], b"slow down")
        return Response(200, [("Content-Type", "text/html")], b"<p>calm</p>")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_stream_holds_a_rate_limited_host_and_the_others_keep_their_pace(tmp_path):
    from batchcrawl.console.signals import StopRequest
    from batchcrawl.stream import run_stream

    base, cap = 0.3, 1.2
    cfg = _busy_config(base, cap, stream={"flush_interval_s": 0.5})
    with serve(StreamSite()) as server:
        busy = [canonicalize(server.base_url("busy.test") + f"/b{i}") for i in range(4)]
        calm = [canonicalize(server.base_url("calm.test") + f"/c{i}") for i in range(40)]
        crawl = new_crawl(tmp_path / "crawl", cfg, [*calm, *busy])
        summary = run_stream(crawl.url, cfg, StopRequest(), max_seconds=30)
        log = server.log.entries()
    pages = [e.host for e in log if e.path != "/robots.txt"]
    got = [e.t_ms / 1000 for e in log if e.host == "busy.test" and e.path != "/robots.txt"]
    assert len(got) >= 4 and summary["checkpoints"] >= 2
    for n, (a, b) in enumerate(zip(got, got[1:], strict=False), 1):
        assert b - a >= LOW * _step(n, base, cap) - SLACK_S, (n, b - a)  # spaced by the back-off
    assert pages.count("calm.test") == 40  # every calm page, once
    # fetched on while the busy host waited out its holds (server log order, no clock)
    assert max(calm_fetches_per_hold(pages, "busy.test", "calm.test")) >= 3
    rows = sql.query(
        crawl, "SELECT held_reason, held_failures FROM hosts WHERE host = 'busy.test'"
    ).to_pylist()
    assert rows == [{"held_reason": "rate_limit", "held_failures": len(got)}]


class KillableBusySite(BusySite):
    """:class:`BusySite` that sets :attr:`fetching` at the first page request (not robots.txt) once
    armed: a round process is then in its fetch phase."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self.fetching = threading.Event()

    def __call__(self, host, path, headers):
        if self.armed.is_set() and path != "/robots.txt":
            self.fetching.set()
        return super().__call__(host, path, headers)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_back_off_survives_a_sigkill(tmp_path):
    """A hold committed by one round is kept by the hosts table through a round SIGKILLed in its
    fetch phase: the next process asks nothing of the held host before ``held_until`` (a 60 s
    back-off, far longer than the three processes take), and the row is unchanged."""
    step = 60.0
    cfg = _busy_config(step, step, fetch={"time_limit_s": 2.0})
    query = "SELECT held_reason, held_until, held_failures FROM hosts WHERE host = 'busy.test'"
    site = KillableBusySite()
    with serve(site) as server:
        busy = canonicalize(server.base_url("busy.test") + "/b0")
        crawl = new_crawl(
            tmp_path / "crawl", cfg, [canonicalize(server.base_url("calm.test")), busy]
        )

        def round_process() -> subprocess.CompletedProcess:
            return subprocess.run(cli_command("round", crawl.url), env=subprocess_env(),
                                  capture_output=True, text=True, timeout=300)  # fmt: skip

        done = round_process()
        assert done.returncode == 0, done.stderr[-3000:]
        held = sql.query(crawl, query).to_pylist()
        assert held and held[0]["held_reason"] == "rate_limit", held
        asked = sum(e.host == "busy.test" and e.path != "/robots.txt" for e in server.log.entries())
        assert asked == 1
        generation = crawl.manifest().generation

        site.armed.set()  # the next round is killed as soon as it fetches
        proc = subprocess.Popen(cli_command("round", crawl.url), env=subprocess_env(),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True)  # fmt: skip
        try:
            assert site.fetching.wait(120), "the round never fetched"
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            kill_group(proc)
        assert wait_gone(group_members(proc.pid), 30) == []
        assert crawl.manifest().generation == generation  # the killed round committed nothing

        done = round_process()
        assert done.returncode == 0, done.stderr[-3000:]
        log = server.log.entries()
    asked = [e for e in log if e.host == "busy.test" and e.path != "/robots.txt"]
    assert len(asked) == 1, [e.path for e in asked]  # nothing asked of the held host since
    assert sum(e.host == "calm.test" for e in log) >= 3  # the calm host was fetched meanwhile
    assert crawl.manifest().generation > generation
    assert sql.query(crawl, query).to_pylist() == held


def test_a_long_rate_limit_gives_the_hosts_urls_back_and_a_short_one_waits(tmp_path):
    """A fresh-user trial: a one-site crawl whose site answered 503 without Retry-After kept its
    round open through the back-off (60 s, 120 s, ... until the round's time limit, an hour).
    A hold longer than politeness.rate_limit_wait_in_round_s gives the host's other URLs back at
    once as rate_limited (no retry counted, due when the hold ends), also those that reach it
    later while the hold is in force; a hold within it (Retry-After: 1) waits in the round."""
    from batchcrawl.testing.webserver import MultiHostServer

    def site(host, path, headers):
        if path == "/robots.txt":
            return Response(404, [("Content-Type", "text/plain")], b"")
        if host.startswith("busy") or (host.startswith("brief") and path == "/p0"):
            extra = [("Retry-After", "1")] if host.startswith("brief") else []
            return Response(503, [("Content-Type", "text/plain"), *extra], b"busy")
        return Response(200, [("Content-Type", "text/html")], b"<p>ok</p>")

    cfg = Config().replace(
        network={"resolve": {"*.test": "127.0.0.1"}, "allow_networks": ["127.0.0.0/8"],
                 "system_dns": False},
        politeness={"host_delay_s": 0.05, "ip_delay_s": 0.0, "ip_concurrency": 8},
        fetch={"threads": 2},
    )  # fmt: skip
    server = MultiHostServer(site).start()
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))

    def items(host, n):
        return [_item(canonicalize(f"{server.base_url(host)}/p{i}")) for i in range(n)]

    w = FetchWorker(cfg, 0, fs, seed_hosts={"busy.test", "brief.test"},
                    seed_domains=["busy.test", "brief.test"])  # fmt: skip
    try:
        first = w.run(items("busy.test", 4) + items("brief.test", 3), round=1)
        later = w.run(items("busy.test", 2), round=2)
    finally:
        w.close()
        server.stop()
    busy = [(r["url"].rsplit("/", 1)[1], r["outcome"]) for r in first.fetched
            if "busy" in r["url"]]  # fmt: skip
    assert busy == [("p0", "server_error"), ("p1", "rate_limited"), ("p2", "rate_limited"),
                    ("p3", "rate_limited")]  # fmt: skip
    given = [r for r in first.fetched if r["outcome"] == "rate_limited"]
    assert all(50 <= r["retry_after_s"] <= 66 for r in given)  # the 60 s back-off, jittered
    brief = sorted(r["outcome"] for r in first.fetched if "brief" in r["url"])
    assert brief == ["ok", "ok", "server_error"]  # waited 1 s in the round, then fetched
    assert not first.unfetched
    assert [r["outcome"] for r in later.fetched] == ["rate_limited"] * 2
