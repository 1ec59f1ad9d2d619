"""The fetcher against the loopback MultiHostServer: keep-alive, timeouts, caps, codings, policy."""

from __future__ import annotations

import threading

import pytest

from batchcrawl.errors import InvalidURL
from batchcrawl.fetch.fetcher import Fetcher
from batchcrawl.fetch.resolver import AddressPolicy, Resolver
from batchcrawl.testing.webserver import Response


def make_fetcher(cfg) -> Fetcher:
    return Fetcher(cfg.fetch, cfg.crawl, Resolver(cfg.network), AddressPolicy(cfg.network))


@pytest.fixture
def fetcher(test_config):
    with make_fetcher(test_config) as f:
        yield f


@pytest.fixture
def quick_fetcher(test_config):
    """Timeouts of a few tenths of a second, a 100 kB body cap."""
    cfg = test_config.replace(
        fetch={
            "read_timeout_s": 0.3,
            "total_timeout_s": 0.8,
            "connect_timeout_s": 0.5,
            "max_body_bytes": 100_000,
        }
    )
    with make_fetcher(cfg) as f:
        yield f


def test_fetch_fills_the_record_and_sends_what_it_records(web, fetcher, host_name):
    seen: list[list[tuple[str, str]]] = []

    def app(host, path, headers):
        seen.append(list(headers.items()))
        return Response(200, [("Content-Type", "text/html"), ("X-A", "1"), ("X-A", "2")], b"hi")

    web.app.add(host_name, "/p?q=1", app)
    url = web.base_url(host_name) + "/p?q=1"
    r = fetcher.fetch(url)
    assert (r.status, r.reason, r.http_version, r.error, r.truncated) == (
        200, "OK", "HTTP/1.1", None, None,
    )  # fmt: skip
    assert r.body == r.raw_body == b"hi"
    assert r.ip == "127.0.0.1"
    assert r.url == url
    assert r.request_line == "GET /p?q=1 HTTP/1.1"
    assert r.request_headers == seen[0]  # recorded = sent, in order
    assert r.request_headers[0] == ("Host", f"{host_name}:{web.port}")
    assert ("X-A", "1") in r.response_headers and ("X-A", "2") in r.response_headers
    assert r.header("content-type") == "text/html"
    assert 0 < r.started <= r.finished


def test_keep_alive_reuses_one_connection(web, fetcher, host_name):
    mark = web.log.mark()
    for i in range(4):
        assert fetcher.fetch(web.base_url(host_name) + f"/page?n={i}").status == 200
    entries = web.log.since(mark)
    assert len(entries) == 4
    assert len({e.conn_id for e in entries}) == 1


def test_server_closing_a_keep_alive_connection_is_survived(web, fetcher, host_name):
    web.app.add(host_name, "/close", Response(200, [], b"bye", "close"))
    base = web.base_url(host_name)
    mark = web.log.mark()
    assert fetcher.fetch(base + "/close").body == b"bye"
    assert fetcher.fetch(base + "/page").status == 200
    entries = web.log.since(mark)
    assert [e.path for e in entries] == ["/close", "/page"]
    assert entries[0].conn_id != entries[1].conn_id


def test_redirects_are_returned_not_followed(web, fetcher, host_name):
    mark = web.log.mark()
    r = fetcher.fetch(web.base_url(host_name) + "/redirect-loop")
    assert r.status == 302 and r.header("Location") == "/redirect-loop"
    assert len(web.log.since(mark)) == 1


def test_slow_response_times_out(web, quick_fetcher, host_name):
    r = quick_fetcher.fetch(web.base_url(host_name) + "/slow?delay=3")
    assert r.error == "timeout" and r.status is None


def test_trickling_body_is_cut_by_the_whole_fetch_deadline(web, quick_fetcher, host_name):
    # 20 pieces 0.1 s apart: no single read waits 0.3 s, but the whole takes 2 s > 0.8 s.
    r = quick_fetcher.fetch(web.base_url(host_name) + "/trickle?delay=0.1&size=2000")
    assert r.status == 200
    assert r.truncated == "time" and r.error is None
    assert 0 < len(r.body) < 2000


def test_stalled_body_is_a_timeout_keeping_what_arrived(web, quick_fetcher, host_name):
    r = quick_fetcher.fetch(web.base_url(host_name) + "/stall?delay=3&size=2000")
    assert r.status == 200 and r.error == "timeout"
    assert r.raw_body == r.body and len(r.body) == 1000


def test_control_same_trickle_completes_with_generous_timeouts(web, fetcher, host_name):
    r = fetcher.fetch(web.base_url(host_name) + "/trickle?delay=0.01&size=2000")
    assert (r.error, r.truncated, len(r.body)) == (None, None, 2000)


def test_reset(web, fetcher, host_name):
    r = fetcher.fetch(web.base_url(host_name) + "/reset")
    assert r.error == "reset" and r.status is None


def test_short_body_is_never_complete(web, fetcher, host_name):
    r = fetcher.fetch(web.base_url(host_name) + "/truncated?size=5000")
    assert r.status == 200 and r.error == "body_short" and r.truncated is None
    assert len(r.body) == 5000


def test_huge_body_is_cut_at_the_cap(web, quick_fetcher, host_name):
    r = quick_fetcher.fetch(web.base_url(host_name) + "/huge")
    assert r.truncated == "length" and r.error is None
    assert len(r.body) == 100_000 and len(r.raw_body) >= 100_000


@pytest.mark.parametrize(("size", "truncated"), [(100_000, None), (100_001, "length")])
def test_cap_boundary(web, quick_fetcher, host_name, size, truncated):
    r = quick_fetcher.fetch(web.base_url(host_name) + f"/chunked?size={size}")
    assert r.truncated == truncated and len(r.body) == min(size, 100_000)


def test_gzip_bomb_stops_at_the_cap(web, fetcher, host_name):
    r = fetcher.fetch(web.base_url(host_name) + "/gzip-bomb")
    assert r.truncated == "length" and r.error is None
    assert r.body == b"\0" * 1_000_000
    assert r.raw_body[:2] == b"\x1f\x8b"  # raw stays content-encoded


def test_chunked_body_is_dechunked(web, fetcher, host_name):
    r = fetcher.fetch(web.base_url(host_name) + "/chunked?size=4321")
    assert r.header("Transfer-Encoding") == "chunked"
    assert len(r.body) == 4321 and r.raw_body == r.body and r.error is None


@pytest.mark.parametrize("path", ["/gzip", "/br", "/deflate-zlib", "/deflate-raw"])
def test_content_codings_are_decoded(web, fetcher, host_name, path):
    plain = fetcher.fetch(web.base_url(host_name) + "/page?x").body  # any text, then compare:
    assert plain
    r = fetcher.fetch(web.base_url(host_name) + path + "?size=30000")
    assert r.error is None and r.truncated is None
    assert len(r.body) == 30000 and r.body.startswith(b"The quick brown fox")
    assert len(r.raw_body) < len(r.body)


def test_unknown_content_coding_is_a_decode_error(web, fetcher, host_name):
    web.app.add(host_name, "/z", Response(200, [("Content-Encoding", "zstd")], b"\x28\xb5"))
    r = fetcher.fetch(web.base_url(host_name) + "/z")
    assert r.error == "decode" and r.body == b"" and r.raw_body == b"\x28\xb5"


def test_refused_address_is_never_contacted(web, test_config, host_name):
    cfg = test_config.replace(network={"allow_networks": ["10.0.0.0/8"]})
    before_log, before_conns = web.log.mark(), web.connections
    with make_fetcher(cfg) as f:
        r = f.fetch(web.base_url(host_name) + "/page")
    assert r.error == "refused" and r.ip is None and r.status is None
    assert web.log.since(before_log) == [] and web.connections == before_conns


def test_control_same_fetch_allowed_does_reach_the_server(web, fetcher, host_name):
    before = web.connections
    assert fetcher.fetch(web.base_url(host_name) + "/page").status == 200
    assert web.connections == before + 1


def test_dns_override_and_unresolvable_names(web, test_config):
    cfg = test_config.replace(network={"resolve": {"www.example.com": "127.0.0.1"}})
    mark = web.log.mark()
    with make_fetcher(cfg) as f:
        ok = f.fetch(f"http://www.example.com:{web.port}/page")
        missing = f.fetch(f"http://h1.test:{web.port}/page")  # *.test no longer mapped
    assert ok.status == 200 and ok.ip == "127.0.0.1"
    assert missing.error == "dns" and missing.ip is None
    assert [e.host for e in web.log.since(mark)] == ["www.example.com"]


def test_connection_refused_port(test_config):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with make_fetcher(test_config) as f:
        r = f.fetch(f"http://closed.test:{port}/")
    assert r.error == "connect" and r.ip == "127.0.0.1"


def test_extra_headers_replace_defaults(web, fetcher, host_name):
    got = {}

    def app(host, path, headers):
        got.update(ua=headers.get("User-Agent"), inm=headers.get("If-None-Match"))
        return Response(304)

    web.app.add(host_name, "/e", app)
    r = fetcher.fetch(
        web.base_url(host_name) + "/e",
        extra_headers={"user-agent": "other/2", "If-None-Match": '"abc"'},
    )
    assert r.status == 304 and r.body == b""
    assert got == {"ua": "other/2", "inm": '"abc"'}
    assert [k for k, _ in r.request_headers].count("User-Agent") == 0
    assert ("user-agent", "other/2") in r.request_headers


@pytest.mark.parametrize("url", ["ftp://h1.test/x", "/relative", "http:///nohost"])
def test_bad_urls_raise(fetcher, url):
    with pytest.raises(InvalidURL):
        fetcher.fetch(url)


def test_many_threads_get_their_own_bodies(web, fetcher):
    hosts = [f"mt{i}.test" for i in range(6)]
    for h in hosts:
        for n in range(5):
            web.app.add(h, f"/d{n}", Response(200, [], f"{h}/{n}".encode() * 100))
    errors: list[str] = []

    def work(h: str) -> None:
        for _ in range(3):
            for n in range(5):
                r = fetcher.fetch(web.base_url(h) + f"/d{n}")
                if r.body != f"{h}/{n}".encode() * 100:
                    errors.append(f"{h}/{n}: {r.error} {r.body[:20]!r}")

    threads = [threading.Thread(target=work, args=(h,)) for h in hosts * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_idle_pool_evicts_while_a_host_connection_is_in_use(web, test_config, monkeypatch):
    """A connection taken out of the idle pool (a fetch in flight) must not leave an empty slot
    that a later eviction trips over; found by the 500-host round benchmark."""
    import batchcrawl.fetch.fetcher as fetcher_mod

    monkeypatch.setattr(fetcher_mod, "MAX_IDLE_TOTAL", 1)
    hosts = [f"pool{i}.t-evict.test" for i in range(3)]
    for h in hosts:
        web.app.add(h, "/", Response(200, [("Content-Type", "text/plain")], b"ok"))
    with make_fetcher(test_config) as f:
        assert f.fetch(web.base_url(hosts[0]) + "/").status == 200
        (key,) = list(f._idle)  # noqa: SLF001
        in_flight = f._take(key)  # noqa: SLF001 - as a concurrent fetch of hosts[0] would
        assert in_flight is not None
        for h in hosts[1:]:  # each give-back now exceeds the pool and evicts the oldest
            r = f.fetch(web.base_url(h) + "/")
            assert r.status == 200 and r.error is None
        f._give(key, in_flight)  # noqa: SLF001
        assert f._idle_count == 1  # noqa: SLF001
        assert all(f._idle.values())  # noqa: SLF001 - no empty slots left behind
