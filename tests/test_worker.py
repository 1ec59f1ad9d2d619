"""The fetch worker as a plain library object against a real loopback web (no Dask)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import subprocess
import sys
from datetime import UTC

import ada_url
import fsspec
import pytest
from fetch_helpers import fetch_item as _item
from fsspec.implementations.dirfs import DirFileSystem
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.config import FetchSection
from batchcrawl.errors import InvalidURL
from batchcrawl.fetch.fetcher import PER_ROUND_FETCH_FIELDS
from batchcrawl.fetch.urlcache import CanonicalMemo, KeyCache
from batchcrawl.fetch.worker import FetchWorker, classify
from batchcrawl.records import Outcome
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key


def _html(body: str, status: int = 200, headers=()) -> Response:
    return Response(status, [("Content-Type", "text/html; charset=utf-8"), *headers], body.encode())


@pytest.fixture
def dirfs(tmp_path):
    return DirFileSystem(str(tmp_path), fsspec.filesystem("file"))


def _worker(cfg, dirfs, seeds):
    return FetchWorker(cfg, 0, dirfs, seed_hosts=seeds, seed_domains=[domain_of(h) for h in seeds])


def test_fetches_robots_first_then_pages_with_links_and_warc(
    web, host_name, test_config, dirfs, tmp_path
):
    base = web.base_url(host_name)
    other = "elsewhere.example"
    web.app.add(
        host_name,
        "/robots.txt",
        Response(200, [("Content-Type", "text/plain")], b"User-agent: *\nDisallow: /private\n"),
    )
    web.app.add(
        host_name,
        "/",
        _html(
            f'<a href="/a">a</a><a href="{base}/private/x">p</a><a href="http://{other}/">out</a>'
            '<a rel="nofollow" href="/nf">nf</a><a href="/a#frag">again</a>'
        ),
    )
    web.app.add(host_name, "/a", _html('<a href="/">home</a><a href="/b">b</a>'))
    web.app.add(host_name, "/moved", Response(301, [("Location", "/a")]))
    w = _worker(test_config, dirfs, {host_name})
    mark = web.log.mark()
    run = w.run(
        [_item(base + "/"), _item(base + "/a"), _item(base + "/private/x"), _item(base + "/moved")],
        round=1,
    )
    w.close()
    by_url = {r["url"]: r for r in run.fetched}
    assert by_url[canonicalize(base + "/")]["outcome"] == Outcome.OK
    assert by_url[canonicalize(base + "/private/x")]["outcome"] == Outcome.ROBOTS_DENIED
    redirect = by_url[canonicalize(base + "/moved")]
    assert redirect["outcome"] == Outcome.REDIRECT
    assert redirect["fetch_redirect"] == canonicalize(base + "/a")
    # robots.txt was the first request to the host, and the disallowed page was never requested
    paths = [e.path for e in web.log.since(mark) if e.host == host_name]
    assert paths[0] == "/robots.txt"
    assert "/private/x" not in paths
    # links: in scope, out of scope (filtered), nofollow flagged; each url key once (URL cache)
    reasons = dict(zip(run.links["dst_url"], run.links["filter_reason"], strict=True))
    assert reasons[canonicalize(base + "/a")] is None
    assert reasons[canonicalize(f"http://{other}/")] == "out_of_scope"
    assert reasons[canonicalize(base + "/nf")] == "nofollow"
    assert len(set(run.links["dst_url_key"])) == len(run.links["dst_url_key"])
    assert run.links["seq"] == sorted(run.links["seq"])
    # WARC: every fetched row with a response points at a readable response record
    files = sorted(p for p in tmp_path.rglob("*.warc.gz"))
    assert files
    for row in run.fetched:
        if row.get("warc_filename"):
            with open(tmp_path / row["warc_filename"], "rb") as fh:
                fh.seek(row["warc_record_offset"])
                rec = next(iter(ArchiveIterator(fh)))
                assert rec.rec_type == "response"
                assert rec.rec_headers.get_header("WARC-Target-URI") == row["url"]
    checked = subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", *map(str, files)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_host_delay_is_kept_between_requests(web, host_name, test_config, dirfs):
    cfg = test_config.replace(politeness={"host_delay_s": 0.2})
    base = web.base_url(host_name)
    for i in range(4):
        web.app.add(host_name, f"/p{i}", _html(f"page {i}"))
    web.app.add(host_name, "/robots.txt", Response(404))
    w = _worker(cfg, dirfs, {host_name})
    mark = web.log.mark()
    w.run([_item(f"{base}/p{i}") for i in range(4)], round=1)
    w.close()
    times = [e.t_ms for e in web.log.since(mark) if e.host == host_name]
    assert len(times) == 5  # robots.txt + 4 pages
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    # the delay counts from the end of one response to the start of the next request
    assert min(gaps) >= 200 - 5, gaps


def test_robots_unavailable_gives_back_every_url_of_the_host(web, test_config, dirfs):
    host = "robots-500.w1.test"
    base = web.base_url(host)
    w = _worker(test_config, dirfs, {host})
    mark = web.log.mark()
    run = w.run([_item(f"{base}/page?{i}") for i in range(3)], round=1)
    w.close()
    assert [r["outcome"] for r in run.fetched] == [Outcome.ROBOTS_UNAVAILABLE] * 3
    assert [e.path for e in web.log.since(mark) if e.host == host] == ["/robots.txt"]


def test_a_host_that_stops_answering_is_held_and_its_urls_given_back_uncharged(
    host_name, test_config, dirfs
):
    """politeness.unreachable_failures fetches in a row without an answer hold the host
    (fetch.holds, unreachable): the rest of its queue goes back at once as host_unreachable
    with the hold's end as retry_after_s, and URLs that reach it while the hold is in force (a
    stream's later fetch lists) go back without a connection attempt."""
    from batchcrawl.testing.webserver import MultiHostServer

    server = MultiHostServer(lambda host, path, headers: _html("<p>up</p>")).start()
    base = server.base_url(host_name)
    cfg = test_config.replace(
        politeness={"unreachable_failures": 2, "unreachable_backoff_s": 600.0},
        fetch={"threads": 1},
    )
    w = _worker(cfg, dirfs, {host_name})
    try:
        first = w.run([_item(f"{base}/")], round=1)  # robots.txt read and cached
        server.stop()  # the host goes down
        down = w.run([_item(f"{base}/p{i}") for i in range(5)], round=2)
        later = w.run([_item(f"{base}/q{i}") for i in range(3)], round=3)
    finally:
        w.close()
        server.stop()
    assert [r["outcome"] for r in first.fetched] == [Outcome.OK]
    outcomes = [r["outcome"] for r in down.fetched]
    assert outcomes == [Outcome.NETWORK_ERROR] * 2 + [Outcome.HOST_UNREACHABLE] * 3
    assert not down.unfetched
    given = [r for r in down.fetched if r["outcome"] == Outcome.HOST_UNREACHABLE]
    assert all(r["retry_after_s"] is not None and 500 < r["retry_after_s"] <= 660 for r in given)
    assert [r["outcome"] for r in later.fetched] == [Outcome.HOST_UNREACHABLE] * 3


def test_refused_and_unresolvable_hosts_are_never_contacted(web, test_config, dirfs):
    cfg = test_config.replace(
        network={"resolve": {"*.test": "127.0.0.1", "blocked.test": "10.0.0.1"}}
    )
    w = _worker(cfg, dirfs, {"blocked.test", "nowhere.invalid"})
    run = w.run([_item("http://blocked.test/x"), _item("http://nowhere.invalid/y")], round=1)
    w.close()
    outcomes = {r["url"]: r["outcome"] for r in run.fetched}
    assert outcomes == {
        "http://blocked.test/x": Outcome.REFUSED,
        "http://nowhere.invalid/y": Outcome.DNS_ERROR,
    }


def test_a_host_name_that_does_not_resolve_charges_one_url_and_holds_the_host(test_config, dirfs):
    """One lookup answers for all of a host's URLs: without an address, one URL is charged
    dns_error and the others go back uncharged as host_unreachable while the host is held; a
    later run gives them back without a lookup, and the probe after the hold (one URL) holds the
    host again, doubled. With politeness.unreachable_failures 0 each URL is charged."""
    host = "nowhere.invalid"
    items = [_item(f"http://{host}/p{i}") for i in range(4)]
    cfg = test_config.replace(politeness={"unreachable_backoff_s": 600.0})
    w = _worker(cfg, dirfs, {host})
    try:
        first = w.run(list(items), round=1)
        held = w.run(list(items[1:]), round=2)
        hold = w.parts.holds.get(host)
        # the hold is over (as restored from a hosts row whose held_until has passed)
        past = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=1)
        w.parts.holds.load_row(host, {"held_reason": "unreachable", "held_since": past,
                                      "held_until": past, "held_failures": 1})  # fmt: skip
        probe = w.run(items[:1], round=3)
    finally:
        w.close()
    assert [r["outcome"] for r in first.fetched] == [Outcome.DNS_ERROR] + [
        Outcome.HOST_UNREACHABLE
    ] * 3
    assert all(r["retry_after_s"] is not None for r in first.fetched[1:])
    assert [r["outcome"] for r in held.fetched] == [Outcome.HOST_UNREACHABLE] * 3
    assert [r["outcome"] for r in probe.fetched] == [Outcome.DNS_ERROR]
    again = w.parts.holds.get(host)
    assert (hold.reason, hold.failures, again.reason, again.failures) == (
        "unreachable",
        1,
        "unreachable",
        2,
    )
    off = _worker(test_config.replace(politeness={"unreachable_failures": 0}), dirfs, {host})
    try:
        each = off.run(list(items), round=1)
    finally:
        off.close()
    assert [r["outcome"] for r in each.fetched] == [Outcome.DNS_ERROR] * 4


def test_time_limit_hands_back_unfetched_urls_in_order(web, host_name, test_config, dirfs):
    cfg = test_config.replace(politeness={"host_delay_s": 0.3})
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(404))
    items = [_item(f"{base}/q{i}") for i in range(10)]
    w = _worker(cfg, dirfs, {host_name})
    run = w.run(items, round=1, time_limit_s=0.5)
    w.close()
    assert run.unfetched, "a 0.5 s limit at 0.3 s per page cannot fetch 10 pages"
    assert [i.url for i in run.unfetched] == [i.url for i in items[-len(run.unfetched) :]]
    assert len(run.fetched) + len(run.unfetched) == len(items)


def test_state_survives_rounds_through_host_rows(web, host_name, test_config, dirfs):
    cfg = test_config.replace(politeness={"host_delay_s": 0.4})
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(200, [], b"User-agent: *\nCrawl-delay: 0.5\n"))
    w1 = _worker(cfg, dirfs, {host_name})
    w1.run([_item(f"{base}/r1")], round=1)
    rows = w1.host_rows()
    w1.close()
    (row,) = rows
    assert row["crawl_delay_s"] == 0.5 and row["robots_status"] == 200
    assert row["next_fetch_time"].replace(tzinfo=UTC).timestamp() > 0
    w2 = _worker(cfg, dirfs, {host_name})
    assert w2.restore_hosts(rows) == 1
    mark = web.log.mark()
    w2.run([_item(f"{base}/r2")], round=2)
    w2.close()
    entries = [e for e in web.log.since(mark) if e.host == host_name]
    assert [e.path for e in entries] == ["/r2"]  # robots.txt came from the persisted cache
    assert entries[0].t_ms / 1000 >= row["next_fetch_time"].replace(tzinfo=UTC).timestamp() - 0.005


@pytest.mark.parametrize(
    ("status", "error", "headers", "outcome"),
    [
        (200, None, [], Outcome.OK),
        (301, None, [("Location", "/x")], Outcome.REDIRECT),
        (302, None, [], Outcome.HTTP_ERROR),
        (304, None, [], Outcome.NOT_MODIFIED),
        (404, None, [], Outcome.GONE),
        (410, None, [], Outcome.GONE),
        (403, None, [], Outcome.HTTP_ERROR),
        (429, None, [], Outcome.SERVER_ERROR),
        (503, None, [], Outcome.SERVER_ERROR),
        (None, "timeout", [], Outcome.NETWORK_ERROR),
        (200, "body_short", [], Outcome.NETWORK_ERROR),
        (None, "refused", [], Outcome.REFUSED),
    ],
)
def test_classify(status, error, headers, outcome):
    from batchcrawl.records import FetchResult

    assert (
        classify(
            FetchResult("http://a.test/", status=status, error=error, response_headers=headers)
        )
        is outcome
    )


def test_tail_detector_fires_only_when_the_rate_drops_below_the_ratio():
    from batchcrawl.fetch.worker import TailDetector

    # 10 pages/s for 30 s, then 1 page/s: the tail starts once a whole window is slow
    tail = TailDetector(ratio=0.25, window_s=5.0)
    done, fired_at = 0, None
    for step in range(100):
        t = step * 0.5
        done += 5 if t < 30 else (1 if step % 2 else 0)
        if tail.observe(t, done) and fired_at is None:
            fired_at = t
    assert fired_at is not None and 30 < fired_at <= 36, fired_at
    # a steady rate (a single slow host from the start) is never a tail
    steady = TailDetector(ratio=0.25, window_s=5.0)
    assert not any(steady.observe(i * 0.5, i) for i in range(200))
    # ratio 0 disables it, even when fetching stops entirely
    off = TailDetector(ratio=0.0, window_s=5.0)
    assert not any(off.observe(i * 0.5, 0 if i > 20 else i * 10) for i in range(100))


# -- a long-lived worker (a Dask actor kept across rounds) -------------------------------------------
def _skewed_clock():
    """A monotonic clock the test can move forward (so politeness delays pass without sleeping)."""
    import time

    skew = [0.0]
    return (lambda: time.monotonic() + skew[0]), skew


def test_long_lived_worker_forgets_hosts_it_no_longer_serves(web, test_config, dirfs):
    clock, skew = _skewed_clock()
    worker = FetchWorker(test_config, 0, dirfs, clock=clock)
    sizes = []
    rows = {}
    for round_ in range(1, 13):
        hosts = [f"ll{round_}x{i}.test" for i in range(3)]  # three new hosts every round
        for h in hosts:
            web.app.add(h, "/robots.txt", Response(200, [], b"User-agent: *\nDisallow: /no\n"))
            web.app.add(h, "/", _html("<p>hi</p>"))
        run = worker.run([_item(web.base_url(h) + "/") for h in hosts], round=round_)
        assert [r["outcome"] for r in run.fetched] == [Outcome.OK] * 3
        rows.update({r["host"]: r for r in worker.host_rows(hosts)})
        sizes.append(worker.state_sizes())
        skew[0] += 60.0  # every politeness delay has passed before the next round
    worker.close()
    # per-host state follows the current round's hosts, not all 36 hosts ever fetched
    assert sizes[0] == sizes[-1] == {"hosts": 3, "robots": 3, "addresses": 3, "counters": 3}
    assert max(s["hosts"] for s in sizes) == 3
    assert len(rows) == 36  # nothing was lost: each host's last state is in its hosts row


def test_forgotten_host_comes_back_from_its_row(web, host_name, test_config, dirfs):
    clock, skew = _skewed_clock()
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(200, [], b"User-agent: *\nDisallow: /no\n"))
    web.app.add(host_name, "/", _html("<p>hi</p>"))
    worker = FetchWorker(test_config, 0, dirfs, clock=clock)
    worker.run([_item(base + "/")], round=1)
    (row,) = worker.host_rows([host_name])
    skew[0] += 60.0
    assert worker.forget_idle_hosts() == [host_name] and not worker.knows(host_name)
    assert worker.restore_hosts([row]) == 1 and worker.knows(host_name)
    mark = web.log.mark()
    run = worker.run([_item(base + "/"), _item(base + "/no")], round=2)
    worker.close()
    assert [e.path for e in web.log.since(mark) if e.host == host_name] == ["/"]  # no robots.txt
    assert {r["outcome"] for r in run.fetched} == {Outcome.OK, Outcome.ROBOTS_DENIED}
    assert worker.host_rows([host_name])[0]["pages_fetched"] == 2  # counted across the gap


def test_reconfigure_applies_new_filters_and_politeness_and_keeps_host_state(
    web, host_name, test_config, dirfs
):
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(200, [], b"User-agent: *\nCrawl-delay: 0.2\n"))
    web.app.add(host_name, "/", _html('<a href="/a">a</a>'))
    web.app.add(host_name, "/b", _html('<a href="/c">c</a>'))
    worker = _worker(test_config, dirfs, {host_name})
    run = worker.run([_item(base + "/")], round=1)
    assert run.links["filter_reason"] == [None]
    cfg = test_config.replace(filters={"max_depth": 0}, politeness={"host_delay_s": 0.06})
    worker.reconfigure(cfg, seed_hosts={host_name}, seed_domains={domain_of(host_name)})
    assert worker.cfg is cfg and worker.workbench.host_delay_s == 0.06
    vs = worker.workbench.visit_state(host_name)
    assert vs is not None and vs.crawl_delay_s == 0.2  # the host's state moved to the new workbench
    mark = web.log.mark()
    run = worker.run([_item(base + "/b", depth=0)], round=2)
    worker.close()
    assert run.links["filter_reason"] == ["max_depth"]  # the new filters decide
    assert [e.path for e in web.log.since(mark) if e.host == host_name] == ["/b"]  # robots kept


def test_reconfigure_for_the_next_rounds_time_limit_keeps_connections(
    web, host_name, test_config, dirfs
):
    """A round under a deadline (``crawl --max-seconds``) gets a new ``fetch.time_limit_s``: the
    worker keeps its keep-alive connections (the next round does not start with a burst of new
    connections to every host); a new User-Agent rebuilds the fetcher and is sent."""
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(200, [], b"User-agent: *\nAllow: /\n"))
    for path in ("/", "/a", "/b"):
        web.app.add(host_name, path, _html("<p>x</p>"))
    worker = _worker(test_config, dirfs, {host_name})
    mark = web.log.mark()
    worker.run([_item(base + "/")], round=1)
    cfg = test_config.replace(fetch={"time_limit_s": 17.0, "tail_idle_s": 1.0})
    worker.reconfigure(cfg, seed_hosts={host_name}, seed_domains={domain_of(host_name)})
    worker.run([_item(base + "/a")], round=2)
    cfg = cfg.replace(crawl={"user_agent": "other-agent/1.0"})
    worker.reconfigure(cfg, seed_hosts={host_name}, seed_domains={domain_of(host_name)})
    worker.run([_item(base + "/b")], round=3)
    worker.close()
    log = [e for e in web.log.since(mark) if e.host == host_name]
    conn = {e.path: e.conn_id for e in log}
    assert [e.path for e in log] == ["/robots.txt", "/", "/a", "/b"]
    assert conn["/robots.txt"] == conn["/"] == conn["/a"]  # one connection across rounds 1-2
    assert conn["/b"] != conn["/a"]  # rebuilt for the new User-Agent


def _changed(value):
    """A valid value other than ``value`` (a ``[fetch]`` field's)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    return value / 2 if value else 1.0


def test_reconfigure_keeps_the_connection_only_for_the_per_round_fetch_fields(
    web, host_name, test_config, dirfs
):
    """Every ``[fetch]`` field, changed alone between two runs: the per-round ones
    (``PER_ROUND_FETCH_FIELDS``: time limit, tail cut, grace) keep the fetcher and its keep-alive
    connection; any other rebuilds it (a new connection), so a fetcher setting added later is never
    silently ignored between rounds."""
    names = [f.name for f in dataclasses.fields(FetchSection)]
    assert PER_ROUND_FETCH_FIELDS < set(names)
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(200, [], b"User-agent: *\nAllow: /\n"))
    seeds = {host_name}
    worker = _worker(test_config, dirfs, seeds)
    kept = set()
    try:
        for i, name in enumerate(names):
            for path in (f"/before{i}", f"/after{i}"):
                web.app.add(host_name, path, _html("<p>x</p>"))
            cfg = test_config.replace(fetch={name: _changed(getattr(test_config.fetch, name))})
            assert getattr(cfg.fetch, name) != getattr(test_config.fetch, name)
            worker.reconfigure(test_config, seed_hosts=seeds, seed_domains={domain_of(host_name)})
            mark = web.log.mark()
            worker.run([_item(f"{base}/before{i}")], round=2 * i + 1)
            fetcher = worker.fetcher
            worker.reconfigure(cfg, seed_hosts=seeds, seed_domains={domain_of(host_name)})
            worker.run([_item(f"{base}/after{i}")], round=2 * i + 2)
            conn = {e.path: e.conn_id for e in web.log.since(mark) if e.host == host_name}
            assert (conn[f"/before{i}"] == conn[f"/after{i}"]) == (worker.fetcher is fetcher), name
            if worker.fetcher is fetcher:
                kept.add(name)
    finally:
        worker.close()
    assert kept == PER_ROUND_FETCH_FIELDS


_RAW_URLS = [
    "http://a.test/", "HTTP://A.test:80/", "http://a.test/x/../y?b=1&a=2#f", "http://b.test/%7Ex",
    "https://b.test/p q", "http://c.test/menu/1", "http://c.test/menu/2", "http://[::1/", "http:",
    "http://xn--nxasmq6b.test/", "http://\u00e9t\u00e9.test/caf\u00e9", "ftp://d.test/f",
]  # fmt: skip


def _direct(raw: str) -> tuple[int, str, str, str] | None:
    try:
        url = canonicalize(raw)
    except InvalidURL:
        return None
    return (url_key(url), url, host_of(url), domain_of(host_of(url)))


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(0, 7),
    raws=st.lists(st.sampled_from(_RAW_URLS) | st.text(max_size=12).map("http://e.test/".__add__),
                  max_size=60),
)  # fmt: skip
def test_bounded_canonical_memo_answers_as_canonicalize_and_stays_in_its_bound(size, raws):
    """``fetch.canonical_memo_size``: however small the memo and whatever was evicted, every
    outlink gets the key, URL, host and domain that canonicalizing it directly gives: a URL as
    written (``serialized=False``, a sitemap's) and its WHATWG serialization (the parser's)."""
    memo = CanonicalMemo(size)
    for raw in raws:
        assert memo.canonical(raw, serialized=False) == _direct(raw)
        assert len(memo) <= size
        try:
            href = ada_url.normalize_url(raw)
        except ValueError:
            continue
        assert memo.canonical(href) == _direct(raw)
        assert len(memo) <= size
    if size < 2:
        assert len(memo) == 0


@settings(max_examples=300, deadline=None)
@given(size=st.integers(0, 9), keys=st.lists(st.integers(0, 15), max_size=80))
def test_url_cache_remembers_the_recent_keys_never_an_unseen_one_and_stays_in_its_bound(size, keys):
    """``fetch.url_cache_size`` (BUbiNG's URL cache), against a reference: every key among the
    last ``size // 2`` distinct ones is seen, no key given for the first time is, and at most
    ``size`` keys are held."""
    cache = KeyCache(size)
    given_before: set[int] = set()
    recent: list[int] = []  # distinct keys, most recent last (an exact LRU)
    for key in keys:
        seen = cache.seen(key)
        if key not in given_before:
            assert not seen
        if key in recent[-(size // 2) :] and size >= 2:
            assert seen
        given_before.add(key)
        if key in recent:
            recent.remove(key)
        recent.append(key)
        assert len(cache) <= size


def test_shard_digests_are_bounded_and_a_duplicate_of_an_evicted_capture_stays_a_response(
    web, host_name, test_config, dirfs
):
    """``dedup.max_shard_digests``: the worker keeps its newest captures' digests only; a
    duplicate of a newer one is a revisit naming its first capture, of an older one a response
    (left to update's ``duplicates``)."""
    cfg = test_config.replace(dedup={"max_shard_digests": 2}, fetch={"threads": 1})
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(404))
    for name, body in [("p1", "one"), ("p2", "two"), ("p3", "three"), ("d1", "one"),
                       ("d3", "three")]:  # fmt: skip
        web.app.add(host_name, f"/{name}", _html(f"<p>{body}</p>"))
    items = [_item(f"{base}/{n}") for n in ("p1", "p2", "p3", "d1", "d3")]
    w = _worker(cfg, dirfs, {host_name})
    run = w.run(items, round=1)
    assert len(w.dedup.digests) == 2
    w.close()
    rows = {r["url"]: r for r in run.fetched}
    assert [rows[i.url]["outcome"] for i in items] == [Outcome.OK] * 5
    assert rows[items[3].url].get("duplicate_of") is None  # p1's digest was evicted
    assert rows[items[4].url].get("duplicate_of") == items[2].url_key  # p3's was not
