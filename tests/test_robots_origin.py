"""robots.txt scoped by origin and kept while unreachable (issue 14, item 5; RFC 9309 §2.3, §2.4)."""

from __future__ import annotations

import fsspec
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from raw_server import RawServer

from batchcrawl.fetch.robots import RobotsCache, robots_origin, robots_policy_for
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import FetchItem, Outcome
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://h.test/x?y", "http://h.test"),
        ("http://h.test:80/", "http://h.test"),
        ("https://h.test:443/a", "https://h.test"),
        ("https://h.test:8443/a", "https://h.test:8443"),
        ("HTTP://H.Test./", "http://h.test"),
        ("http://[::1]:8080/", "http://[::1]:8080"),
    ],
)
def test_robots_origin_is_scheme_host_port(url, origin):
    assert robots_origin(url) == origin


class Clock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


GOOD = b"User-agent: *\nDisallow: /p\n"


def test_cache_keeps_the_last_good_copy_while_unreachable(test_config):
    robots = test_config.robots
    clock = Clock()
    cache = RobotsCache(robots, "bot", clock)
    cache.put("http://a.test", robots_policy_for(200, GOOD, None))
    cache.put("http://a.test:8080", robots_policy_for(404, None, None))
    assert cache.get("http://a.test").state == "parsed"  # origins do not share rules
    assert cache.get("http://a.test:8080").state == "allow_all"
    assert cache.get("https://a.test") is None
    clock.t += robots.cache_ttl_s + 1
    assert cache.get("http://a.test") is None  # expired: fetch again
    entry = cache.put("http://a.test", robots_policy_for(503, None, None))
    assert entry.stale and entry.rules.state == "parsed"
    assert entry.expires == clock.t + robots.retry_after_s  # re-checked soon
    # persisted and restored by a later round, the stale copy still stands in
    row = cache.to_row("a.test")
    assert row["robots_status"] == 200 and row["robots_origin"] in ("http://a.test",)
    clock.t = entry.expires + 1
    later = RobotsCache(robots, "bot", clock)
    assert later.load_row("a.test", row) is None  # expired: fetch again ...
    assert later.put("http://a.test", robots_policy_for(None, None, "timeout")).stale  # ... kept
    # past its stale limit, unreachable means disallow all
    clock.t += robots.cache_ttl_s + robots.stale_max_s
    assert later.put("http://a.test", robots_policy_for(503, None, None)).rules.unavailable
    # rows written before robots_origin existed restore nothing
    assert (
        RobotsCache(robots, "bot", clock).load_row("a.test", {**row, "robots_origin": None}) is None
    )


class TwoRobots:
    """Raw responder: ``/robots.txt`` gives ``robots`` (status, body); any other path 200."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body

    def __call__(self, conn, _release, head: bytes) -> None:
        path = head.split(b" ", 2)[1]
        status, body = (self.status, self.body) if path == b"/robots.txt" else (200, b"page")
        conn.sendall(
            b"HTTP/1.1 %d X\r\nContent-Type: text/plain\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (status, len(body), body)
        )


@pytest.fixture
def servers():
    apps = [TwoRobots(200, GOOD), TwoRobots(404, b"")]
    srvs = [RawServer(a) for a in apps]
    yield apps, srvs
    for s in srvs:
        s.close()


def _item(url: str) -> FetchItem:
    url = canonicalize(url)
    host = host_of(url)
    return FetchItem(url_key(url), url, host, domain_of(host), 0)


def _worker(cfg, tmp_path, clock=None):
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    kw = {"wall": clock} if clock is not None else {}
    return FetchWorker(cfg, 0, fs, seed_hosts=["origin.test"], seed_domains=["origin.test"], **kw)


def test_each_origin_of_a_host_has_its_own_robots_txt(servers, test_config, tmp_path):
    """Before: the first origin's robots.txt (Disallow: /p) was applied to the other port too."""
    apps, (a, b) = servers
    urls = [f"http://origin.test:{a.port}/p", f"http://origin.test:{b.port}/p"]
    w = _worker(test_config, tmp_path)
    try:
        run = w.run([_item(u) for u in urls], round=1)
    finally:
        w.close()
    outcomes = {r["url"]: r["outcome"] for r in run.fetched}
    assert outcomes == {urls[0]: Outcome.ROBOTS_DENIED, urls[1]: Outcome.OK}
    assert a.heads[0].startswith(b"GET /robots.txt") and b.heads[0].startswith(b"GET /robots.txt")


def test_unreachable_robots_keeps_the_cached_copy_across_rounds(servers, test_config, tmp_path):
    """Before: a 503 after a good fetch replaced the rules by disallow-all (robots_unavailable)."""
    apps, (a, _) = servers
    clock = Clock()
    base = f"http://origin.test:{a.port}"
    w = _worker(test_config, tmp_path, clock)
    try:
        w.run([_item(base + "/q1")], round=1)
        rows = w.host_rows()
    finally:
        w.close()
    apps[0].status, apps[0].body = 503, b""
    clock.t += test_config.robots.cache_ttl_s + 1  # the cached copy expired: fetched again
    w2 = _worker(test_config, tmp_path, clock)
    try:
        w2.restore_hosts(rows)
        run = w2.run([_item(base + "/q2"), _item(base + "/p")], round=2)
    finally:
        w2.close()
    outcomes = {r["url"]: r["outcome"] for r in run.fetched}
    assert outcomes == {base + "/q2": Outcome.OK, base + "/p": Outcome.ROBOTS_DENIED}
    assert [h.split(b" ")[1] for h in a.heads].count(b"/robots.txt") == 2
    assert run.counters["robots_stale_kept"] == 1
