"""Self-redirects (issue 14, item 2): a 3xx whose Location is the URL itself is fetched again after
the host's delay, up to ``fetch.max_self_redirects`` times, then recorded ``redirect_loop``."""

from __future__ import annotations

import threading
from collections import Counter

import fsspec
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from raw_server import RawServer
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import FetchItem, Outcome
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key


class RedirectGraph:
    """Raw responder: ``/robots.txt`` 404; a path in ``self_loops`` answers ``302 Location: PATH``
    (with a cookie) its first ``self_loops[path]`` times, then 200; a path in ``moves`` answers
    ``302`` to another path; anything else 200. Requests per path are counted in ``hits``."""

    def __init__(self) -> None:
        self.self_loops: dict[str, int] = {}
        self.moves: dict[str, str] = {}
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()

    def reset(self, self_loops: dict[str, int], moves: dict[str, str]) -> None:
        with self._lock:
            self.self_loops, self.moves, self.hits = dict(self_loops), dict(moves), Counter()

    def __call__(self, conn, _release, head: bytes) -> None:
        path = head.split(b" ", 2)[1].decode("ascii")
        with self._lock:
            self.hits[path] += 1
            n = self.hits[path]
        if path == "/robots.txt":
            conn.sendall(
                b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )
        elif n <= self.self_loops.get(path, 0) or path in self.moves:
            target = self.moves.get(path, path).encode()
            conn.sendall(
                b"HTTP/1.1 302 Found\r\nLocation: " + target + b"\r\nSet-Cookie: s=%d; Path=/\r\n"
                b"Content-Length: 0\r\nConnection: close\r\n\r\n" % n
            )
        else:
            body = b"<html><body><a href='/linked'>x</a></body></html>"
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )


@pytest.fixture(scope="module")
def graph_server():
    app = RedirectGraph()
    server = RawServer(app)
    yield app, server
    server.close()


def _item(url: str) -> FetchItem:
    url = canonicalize(url)
    host = host_of(url)
    return FetchItem(url_key(url), url, host, domain_of(host), 0)


def _crawl(cfg, tmp_path, urls: list[str]):
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    hosts = sorted({host_of(u) for u in urls})
    w = FetchWorker(cfg, 0, fs, seed_hosts=hosts, seed_domains=[domain_of(h) for h in hosts])
    try:
        run = w.run([_item(u) for u in urls], round=1)
    finally:
        w.close()
    return run, fs


def _warc_targets(fs, run) -> list[str]:
    out = []
    for name in run.warc_files:
        with fs.open(name, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response":
                    out.append(rec.rec_headers.get_header("WARC-Target-URI"))
    return out


def test_self_redirect_then_page_is_fetched(graph_server, test_config, tmp_path):
    """Before: one request, outcome ``redirect`` to itself, and the page was never fetched."""
    app, server = graph_server
    app.reset({"/self": 1}, {})
    url = f"http://self.test:{server.port}/self"
    run, fs = _crawl(test_config, tmp_path, [url])
    (row,) = run.fetched
    assert (row["outcome"], row["fetch_status"]) == (Outcome.OK, 200)
    assert app.hits["/self"] == 2
    assert run.counters["self_redirect_hops"] == 1
    assert run.links["dst_url"] == [f"http://self.test:{server.port}/linked"]
    assert _warc_targets(fs, run).count(url) == 2  # both hops archived


def test_endless_self_redirect_is_a_redirect_loop(graph_server, test_config, tmp_path):
    """Before: outcome ``redirect`` after one request, no loop recorded."""
    app, server = graph_server
    app.reset({"/loop": 10**6}, {})
    url = f"http://loop.test:{server.port}/loop"
    run, fs = _crawl(test_config, tmp_path, [url])
    bound = test_config.fetch.max_self_redirects
    (row,) = run.fetched
    assert row["outcome"] == Outcome.REDIRECT_LOOP
    assert row["fetch_redirect"] == url
    assert row["error"] == f"redirect_loop:{bound + 1}"
    assert app.hits["/loop"] == bound + 1
    assert run.links["dst_url"] == []
    assert _warc_targets(fs, run).count(url) == bound + 1


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    loops=st.dictionaries(st.sampled_from(["/a", "/b", "/c"]), st.integers(0, 6), max_size=3),
    moves=st.dictionaries(st.sampled_from(["/d", "/e"]), st.sampled_from(["/a", "/d", "/e"])),
    bound=st.integers(0, 4),
)
def test_self_redirect_hops_are_bounded_for_any_graph(
    graph_server, test_config, tmp_path_factory, loops, moves, bound
):
    """For any graph of self-loops and moves: each URL is requested at most ``bound + 1`` times,
    ends with exactly one row, and its outcome follows from its loop length."""
    import dataclasses

    app, server = graph_server
    app.reset(loops, moves)
    cfg = dataclasses.replace(
        test_config, fetch=dataclasses.replace(test_config.fetch, max_self_redirects=bound)
    )
    base = f"http://graph.test:{server.port}"
    paths = ["/a", "/b", "/c", "/d", "/e"]
    run, _ = _crawl(cfg, tmp_path_factory.mktemp("g"), [base + p for p in paths])
    rows = {r["url"]: r for r in run.fetched}
    assert len(run.fetched) == len(rows) == len(paths)
    for p in paths:
        assert 1 <= app.hits[p] <= bound + 1
        outcome = rows[base + p]["outcome"]
        if p in moves and moves[p] != p:
            assert outcome == Outcome.REDIRECT
        elif p in moves or loops.get(p, 0) > bound:
            assert outcome == Outcome.REDIRECT_LOOP and app.hits[p] == bound + 1
        else:
            assert outcome == Outcome.OK and app.hits[p] == loops.get(p, 0) + 1
