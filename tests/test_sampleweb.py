"""SampleWeb: determinism, robots variants, redirects, the trap, and the ground truth checked against
an independent breadth-first crawl (lxml links + protego robots) over a real loopback server."""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from urllib.parse import urljoin, urlsplit

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree
from protego import Protego

from batchcrawl.errors import BatchcrawlError
from batchcrawl.testing import sampleweb
from batchcrawl.testing.sampleweb import EXTERNAL_LINKS, EXTRA_PATHS, SampleWeb, SampleWebError
from batchcrawl.testing.webserver import MultiHostServer

Fetch = Callable[[str], tuple[int, dict[str, str], bytes]]


def direct_fetch(web: SampleWeb) -> Fetch:
    """Fetch by calling the app (no network), as the server would."""

    def fetch(url: str) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(url)
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        resp = web(parts.hostname, path, {"Host": parts.netloc})
        return resp.status, {k.lower(): v for k, v in resp.headers}, resp.body

    return fetch


def server_fetch(server: MultiHostServer) -> Fetch:
    """Fetch through the loopback server: connect to 127.0.0.1, name the host in ``Host``."""
    session = requests.Session()

    def fetch(url: str) -> tuple[int, dict[str, str], bytes]:
        parts = urlsplit(url)
        r = session.get(
            f"http://127.0.0.1:{server.port}{parts.path}",
            headers={"Host": parts.netloc},
            allow_redirects=False,
            timeout=10,
        )
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content

    return fetch


_LINKS = etree.XPath("//a/@href | //img/@src", smart_strings=False)


def independent_crawl(
    fetch: Fetch, seeds: Iterable[str], our_netlocs: set[str], max_depth: int, robots: bool
) -> set[str]:
    """Breadth-first crawl: every fetched URL on our hosts within ``max_depth`` hops."""
    rules: dict[str, Protego | bool] = {}

    def allowed(url: str) -> bool:
        netloc = urlsplit(url).netloc
        if netloc not in rules:
            status, _, body = fetch(f"http://{netloc}/robots.txt")
            if status >= 500:
                rules[netloc] = False
            elif status >= 400:
                rules[netloc] = True
            else:
                rules[netloc] = Protego.parse(body.decode())
        rule = rules[netloc]
        return rule if isinstance(rule, bool) else rule.can_fetch(url, "batchcrawl")

    level = [u for u in seeds if urlsplit(u).netloc in our_netlocs]
    seen = set(level)
    fetched: set[str] = set()
    for depth in range(max_depth + 1):
        nxt = []
        for url in level:
            if robots and not allowed(url):
                continue
            fetched.add(url)
            status, headers, body = fetch(url)
            if 300 <= status < 400:
                links = [headers["location"]]
            elif status == 200 and headers["content-type"].startswith("text/html"):
                links = _LINKS(etree.fromstring(body, etree.HTMLParser()))
            else:
                links = []
            for link in links:
                target = urljoin(url, link).split("#", 1)[0]
                if urlsplit(target).netloc in our_netlocs and target not in seen:
                    seen.add(target)
                    nxt.append(target)
        if depth == max_depth:
            break
        level = nxt
    return fetched


def netlocs(web: SampleWeb) -> set[str]:
    return {urlsplit(web.url(h.name, "/")).netloc for h in web.hosts}


# -- construction and determinism ---------------------------------------------------------------


def test_same_seed_same_web_and_different_seed_differs() -> None:
    a, b, c = (SampleWeb(12, 400, seed=s, port=8000) for s in (7, 7, 8))
    assert a.hosts == b.hosts
    fa, fb, fc = direct_fetch(a), direct_fetch(b), direct_fetch(c)
    urls = a.pages_of("h0001.test")[:30] + a.pages_of("h0003.test")[:10]
    assert [fa(u) for u in urls] == [fb(u) for u in urls]
    assert a.reachable() == b.reachable()
    assert [fa(u)[2] for u in urls] != [fc(u)[2] for u in urls]


@settings(max_examples=25, deadline=None)
@given(
    hosts=st.integers(2, 30),
    extra=st.integers(0, 400),
    seed=st.integers(0, 2**32 - 1),
    trap=st.booleans(),
)
def test_zipf_sizes_sum_to_pages(hosts: int, extra: int, seed: int, trap: bool) -> None:
    pages = hosts + extra
    web = SampleWeb(hosts, pages, seed=seed, trap=trap, port=1234)
    sizes = [h.size for h in web.hosts]
    assert sum(sizes) == pages
    content = sizes[:-1] if trap else sizes
    assert content == sorted(content, reverse=True) and min(sizes) >= 1
    assert [h.name for h in web.hosts] == [f"h{i:04d}.test" for i in range(1, hosts + 1)]
    assert (web.trap_host == web.hosts[-1].name) if trap else web.trap_host is None


def test_bad_parameters_raise_value_errors_naming_them() -> None:
    with pytest.raises(SampleWebError, match="pages=3"):
        SampleWeb(5, 3)
    with pytest.raises(SampleWebError, match="hosts=1"):
        SampleWeb(1, 10, trap=True)
    with pytest.raises(ValueError, match="sections"):
        SampleWeb(3, 10, sections=1)
    with pytest.raises(BatchcrawlError, match="bind"):
        SampleWeb(3, 10).seeds()


# -- serving --------------------------------------------------------------------------------------


def test_robots_variants_and_allowed_pages_agree_with_protego() -> None:
    web = SampleWeb(8, 300, seed=3, port=8000)
    fetch = direct_fetch(web)
    kinds = [h.robots for h in web.hosts[:5]]
    assert kinds == ["allow", "disallow", "delay", "404", "500"]
    statuses = [fetch(web.url(h.name, "/robots.txt"))[0] for h in web.hosts[:5]]
    assert statuses == [200, 200, 200, 404, 500]
    for spec in web.hosts:
        status, _, body = fetch(web.url(spec.name, "/robots.txt"))
        pages = web.pages_of(spec.name)
        if status == 200:
            rp = Protego.parse(body.decode())
            expected = [u for u in pages if rp.can_fetch(u, "batchcrawl")]
            assert web.crawl_delay(spec.name) == rp.crawl_delay("batchcrawl")
        else:
            expected = pages if status == 404 else []
            assert web.crawl_delay(spec.name) is None
        assert web.allowed_pages(spec.name) == expected
    assert web.crawl_delay("h0003.test") in (1.0, 2.0, 3.0)
    assert 0 < len(web.allowed_pages("h0002.test")) < len(web.pages_of("h0002.test"))


def test_redirects_single_chain_and_loop() -> None:
    web = SampleWeb(4, 200, seed=1, port=8123)
    fetch = direct_fetch(web)
    base = web.url("h0001.test", "")

    status, headers, _ = fetch(base + "/r/301")
    assert status == 301 and headers["location"].startswith("http://h0001.test:8123/")
    assert fetch(headers["location"])[0] == 200
    status, headers, _ = fetch(base + "/r/302")
    assert status == 302 and headers["location"].startswith("/")

    url, hops = base + "/r/chain/1", 0
    while (res := fetch(url))[0] in (301, 302):
        url, hops = urljoin(url, res[1]["location"]), hops + 1
    assert hops == 3 and res[0] == 200 and web.kind_of(url) == "page"

    url, visited = base + "/r/loop/a", []
    for _ in range(4):
        visited.append(url)
        url = urljoin(url, fetch(url)[1]["location"])
    assert visited == [base + "/r/loop/a", base + "/r/loop/b"] * 2


def test_duplicates_files_dead_links_and_unknown_paths() -> None:
    web = SampleWeb(4, 200, seed=2, port=8000)
    fetch = direct_fetch(web)
    base = web.url("h0001.test", "")
    dup, near = fetch(base + "/dup/copy.html")[2], fetch(base + "/near/copy.html")[2]
    sources = [fetch(u)[2] for u in web.pages_of("h0001.test") if web.kind_of(u) == "page"]
    assert dup in sources
    assert near != dup and len(near) == len(dup)
    assert sum(x != y for x, y in zip(near, dup, strict=True)) <= 2
    status, headers, body = fetch(base + "/files/report.pdf")
    assert (status, headers["content-type"]) == (200, "application/pdf") and body[:5] == b"%PDF-"
    status, headers, body = fetch(base + "/img/logo.png")
    assert headers["content-type"] == "image/png" and body[:8] == b"\x89PNG\r\n\x1a\n"
    assert fetch(base + "/files/notes.txt")[1]["content-type"].startswith("text/plain")
    for path in ("/dead/1", "/dead/2", "/nope", "/s1/p01.html", "/s2/p1.html", "/s0/p0.html"):
        assert fetch(base + path)[0] == 404, path
    assert fetch(base + "/s1/p1.html?any=query")[0] == 200  # queries are ignored
    assert fetch(web.url("h0002.test", "/dup/copy.html"))[0] == 404  # extras on every 10th host
    assert fetch("http://unknown.test:8000/")[0] == 404
    assert {web.kind_of(base + p) for p in EXTRA_PATHS} == set(EXTRA_PATHS.values())


def test_pages_have_configured_size_links_menu_and_externals() -> None:
    web = SampleWeb(6, 600, seed=4, port=8000, page_bytes=12_000, links_per_page=40)
    fetch = direct_fetch(web)
    pages = [u for u in web.pages_of("h0001.test") if web.kind_of(u) == "page"][1:80]
    sizes, counts, menus = [], [], []
    for url in pages:
        doc = etree.fromstring(fetch(url)[2], etree.HTMLParser())
        sizes.append(len(fetch(url)[2]))
        counts.append(len(doc.xpath("//a")))
        menus.append(tuple(doc.xpath("//nav//a/@href")))
    assert all(11_000 <= s <= 13_000 for s in sizes)
    assert 32 <= sum(counts) / len(counts) <= 48
    assert len(set(menus)) == 1 and len(menus[0]) == 10  # one menu per host
    home = etree.fromstring(fetch(web.url("h0001.test", "/"))[2], etree.HTMLParser())
    assert set(EXTERNAL_LINKS) <= set(home.xpath("//a/@href"))


def test_links_carry_the_request_port_when_unbound() -> None:
    web = SampleWeb(3, 100, seed=0, cross_host_fraction=0.5)
    body = web("h0001.test", "/s1/p1.html", {"Host": "h0001.test:4321"}).body
    hrefs = etree.fromstring(body, etree.HTMLParser()).xpath("//a/@href")
    cross = [h for h in hrefs if h.startswith("http://h")]
    assert cross and all(urlsplit(h).port == 4321 for h in cross)
    assert all(h.startswith(("/", "http://h")) for h in hrefs)


# -- the spider trap ------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(year=st.integers(2024, 9000), month=st.integers(1, 12))
def test_trap_links_only_to_later_months(year: int, month: int) -> None:
    web = _trap_web()
    url = web.url(web.trap_host, f"/cal/{year:04d}/{month:02d}")
    status, _, body = direct_fetch(web)(url)
    assert status == 200
    cal = [h for h in etree.fromstring(body, etree.HTMLParser()).xpath("//a/@href") if "cal" in h]
    assert len(cal) == 2
    for href in cal:
        y, m = map(int, href.split("/")[2:])
        assert (y, m) > (year, month)
        assert direct_fetch(web)(urljoin(url, href))[0] == 200


def test_trap_grows_without_bound_with_depth() -> None:
    web = _trap_web()
    seed = [web.url(web.trap_host, "/")]
    counts = [
        Counter(web.kind_of(u) for u in web.reachable(seed, max_depth=d))["calendar"]
        for d in range(1, 12)
    ]
    assert counts == sorted(set(counts)) and counts[0] == 1  # strictly increasing
    assert web.politeness_bound(100.0, 1.0) >= 101  # the trap alone allows one fetch per second


def _trap_web() -> SampleWeb:
    return SampleWeb(3, 30, seed=9, port=8000)


# -- ground truth vs an independent crawl ---------------------------------------------------------


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hosts=st.integers(2, 12),
    pages=st.integers(12, 150),
    seed=st.integers(0, 1000),
    depth=st.integers(0, 7),
    robots=st.booleans(),
    extras_every=st.sampled_from([1, 3, 10]),
)
def test_reachable_matches_independent_crawl(
    hosts: int, pages: int, seed: int, depth: int, robots: bool, extras_every: int
) -> None:
    web = SampleWeb(
        hosts,
        pages,
        seed=seed,
        port=8000,
        page_bytes=2000,
        links_per_page=15,
        extras_every=extras_every,
    )
    seeds = web.seeds(2)
    got = web.reachable(seeds, respect_robots=robots, max_depth=depth)
    assert got == independent_crawl(direct_fetch(web), seeds, netlocs(web), depth, robots)


def test_served_over_loopback_matches_ground_truth() -> None:
    web = SampleWeb(11, 300, seed=5, page_bytes=4000, extras_every=2)
    with MultiHostServer(web) as server:
        web.bind(server.port)
        crawled = independent_crawl(server_fetch(server), web.seeds(), netlocs(web), 8, True)
        log = server.log.entries()
    assert crawled == web.reachable(max_depth=8)
    assert web.url("h0001.test", "/r/chain/3") in crawled  # only reachable through redirects
    assert {e.host for e in log} <= {h.name for h in web.hosts}  # never outside our hosts
    kinds = Counter(web.kind_of(u) for u in crawled)
    assert {"page", "redirect", "dead", "duplicate", "pdf", "image", "calendar"} <= set(kinds)
    assert not any(web.kind_of(u) == "page" and "h0005.test" in u for u in crawled)  # robots 500
    assert {e.status for e in log if e.path == "/robots.txt"} == {200, 404, 500}


def test_politeness_bound_formula() -> None:
    web = SampleWeb(6, 200, seed=0, port=8000, extras_every=0)
    t, d = 10.0, 0.5
    expected = 0
    for spec in web.hosts:
        allowed = len(web.allowed_pages(spec.name))
        delay = max(d, web.crawl_delay(spec.name) or 0.0)
        budget = 1 + int(t // delay)
        expected += budget if spec.trap else min(allowed, budget)
    assert web.politeness_bound(t, d) == expected
    assert web.politeness_bound(0.0, d) == sum(
        1 for s in web.hosts if s.trap or web.allowed_pages(s.name)
    )
    with pytest.raises(SampleWebError, match="host_delay_s"):
        web.politeness_bound(1.0, 0.0)


@pytest.mark.parametrize("d", [0.0, 0.5, 3.0])
def test_crawl_ceiling_is_reachable_urls_capped_by_each_hosts_delay(d: float) -> None:
    web = SampleWeb(24, 600, seed=3, port=8000)
    t, cap, depth = 4.0, 2.5, 6
    per_host = Counter(urlsplit(u).hostname for u in web.reachable(max_depth=depth))
    assert any(web.crawl_delay(h) for h in per_host)  # some host is held back by its Crawl-delay
    expected = 0
    for host, n in per_host.items():
        delay = max(d, min(web.crawl_delay(host) or 0.0, cap))
        expected += n if delay == 0 else min(n, 1 + int(t // delay))
    assert web.crawl_ceiling(t, d, cap, max_depth=depth) == expected
    # a long enough crawl is limited by the web alone; a short one by the delays
    assert web.crawl_ceiling(1e6, d, cap, max_depth=depth) == sum(per_host.values())
    assert web.crawl_ceiling(0.0, d, cap, max_depth=depth) <= sum(per_host.values())
    with pytest.raises(SampleWebError, match="host_delay_s"):
        web.crawl_ceiling(1.0, -1.0, cap)


def test_every_page_reachable_from_its_home_page_without_robots() -> None:
    web = SampleWeb(7, 500, seed=11, port=8000, trap=False)
    got = web.reachable(respect_robots=False, max_depth=50)
    assert {u for h in web.hosts for u in web.pages_of(h.name)} == got


def test_corpus_is_built_once_when_many_threads_ask_at_once(monkeypatch) -> None:
    """The server answers each connection on its own thread: the first burst of page requests
    must not build the text corpus once per thread (that stalled every seed round ~2 s)."""
    builds = []

    @functools.lru_cache(maxsize=4)
    def slow_build(seed: int, words: int) -> str:
        builds.append(seed)
        time.sleep(0.05)  # long enough for every thread to find the cache empty
        return "word. " * 100

    monkeypatch.setattr(sampleweb, "_build_corpus", slow_build)
    start = threading.Barrier(8)
    got: list[str] = []

    def ask() -> None:
        start.wait()
        got.append(sampleweb._corpus(12345))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert builds == [12345]
    assert got == ["word. " * 100] * 8
