"""Sitemaps feed the frontier (issue 12 item 4): named by robots.txt (a relative ``Sitemap:``
value) and configured, fetched through the workbench (robots.txt first, the host's delay kept),
gzip, sitemap indexes followed to ``sitemaps.max_depth``, scope filters applied, extension URLs
never taken, ``lastmod`` making a known URL due again. A real crawl of a loopback site."""

from __future__ import annotations

import gzip
import threading

import pytest
from round_helpers import fetched_rows, new_crawl, politeness_violations, round_config, serve
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.fetch.sitemap_jobs import SitemapJob, child_jobs, robots_sitemap_jobs
from batchcrawl.fetch.sitemaps import SitemapEntry
from batchcrawl.round import run_rounds
from batchcrawl.store import sql
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
IMG = 'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"'
XML = [("Content-Type", "application/xml")]
HTML = [("Content-Type", "text/html")]


def _index(*locs: str) -> bytes:
    items = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f'<?xml version="1.0"?><sitemapindex {NS}>{items}</sitemapindex>'.encode()


def _urlset(*entries: str) -> bytes:
    return f'<?xml version="1.0"?><urlset {NS} {IMG}>{"".join(entries)}</urlset>'.encode()


class SitemapSite:
    """``s.test``: robots.txt names ``/maps/index.xml`` relatively (and one sitemap on another
    host); the index lists a gzip sitemap and a nested index whose child is one level too deep;
    the home page links nowhere, so every other page is found through sitemaps."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.paths: list[str] = []
        self._lock = threading.Lock()
        pages = _urlset(
            "<url><loc>/p1</loc><lastmod>2024-05-01</lastmod></url>",  # relative: resolved
            f"<url><loc>{base}/p2</loc><image:image><image:loc>{base}/img.jpg</image:loc>"
            "</image:image></url>",
            f"<url><loc>{base}/</loc><lastmod>2099-01-01T00:00:00Z</lastmod></url>",  # changed
            "<url><loc>http://elsewhere.test/x</loc></url>",  # another host: not listable
        )
        self.routes = {
            "/robots.txt": Response(
                200, [("Content-Type", "text/plain")],
                b"User-agent: *\nDisallow: /private\n"
                b"Sitemap: /maps/index.xml\nSitemap: http://other.test/sitemap.xml\n",
            ),
            "/": Response(200, HTML, b"<p>home, no links</p>"),
            "/maps/index.xml": Response(200, XML, _index("/maps/pages.xml.gz", "nested.xml")),
            "/maps/pages.xml.gz": Response(
                200, [("Content-Type", "application/x-gzip")], gzip.compress(pages)
            ),
            "/maps/nested.xml": Response(200, XML, _index(f"{base}/maps/deep.xml")),
            "/maps/deep.xml": Response(200, XML, _urlset("<url><loc>/too-deep</loc></url>")),
            "/seed-map.txt": Response(  # text sitemaps hold absolute URLs (sitemaps.org)
                200, [("Content-Type", "text/plain")], f"{base}/p3\n{base}/private/p4\n".encode()
            ),
        }  # fmt: skip

    def __call__(self, host, path, headers):
        with self._lock:
            self.paths.append(path)
        if host != "s.test":
            return Response(404, HTML, b"")
        if path in self.routes:
            return self.routes[path]
        if path.startswith("/p"):
            return Response(200, HTML, f"<p>{path}</p>".encode())
        return Response(404, HTML, b"")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sitemaps_from_robots_and_config_feed_the_frontier(tmp_path):
    with serve(lambda *a: site(*a)) as server:
        base = server.base_url("s.test")
        site = SitemapSite(base)
        cfg = round_config(
            sitemaps={"max_depth": 1, "seeds": [f"{base}/seed-map.txt"]},
            filters={"seed_scope": "host"},
        )
        home = canonicalize(base + "/")
        crawl = new_crawl(tmp_path / "crawl", cfg, [home])
        summaries = run_rounds(crawl.url, cfg, 3)
        log = server.log.entries()
    url = {p: canonicalize(base + p) for p in ("/p1", "/p2", "/p3", "/")}
    rows = fetched_rows(crawl)
    got = {(r["url"], r["round"]) for r in rows}
    # pages known only from the sitemaps (robots.txt's relative value, gzip, index, seed) fetched
    for p in ("/p1", "/p2", "/p3"):
        assert (url[p], 2) in got
    # a sitemap lastmod later than the capture made the fetched home page due again
    assert (home, 1) in got and (home, 2) in got
    assert summaries[0]["update"]["lastmod_due"] == 1
    outcome = {r["url"][len(base) :]: r["outcome"] for r in rows}
    assert not set(outcome) & {"/img.jpg", "/too-deep", "/maps/index.xml"}
    assert outcome["/private/p4"] == "robots_denied"  # a sitemap URL is a URL like any other
    # the nested index (level 1) was read, its child (level 2) was not; robots.txt Disallow and
    # the other host's sitemap were never requested
    assert "/maps/nested.xml" in site.paths and "/maps/deep.xml" not in site.paths
    assert "/private/p4" not in site.paths
    assert all(e.host == "s.test" for e in log)
    # through the workbench: robots.txt first, the host's delay between every request
    s_log = [e for e in log if e.host == "s.test"]
    assert s_log[0].path == "/robots.txt"
    assert not politeness_violations(s_log, lambda h: cfg.politeness.host_delay_s)
    for p in ("/maps/index.xml", "/maps/pages.xml.gz", "/maps/nested.xml", "/seed-map.txt"):
        assert site.paths.count(p) == 1  # once: robots.txt is cached across rounds
    # links rows: tag sitemap, lastmod parsed; a URL of another host is no sitemap's to list
    # (sitemaps.org "Sitemap file location"), the scope filters apply to the rest
    links = sql.query(
        crawl, "SELECT dst_url, lastmod, filter_reason FROM links WHERE tag = 'sitemap'"
    ).to_pylist()
    by = {r["dst_url"]: r for r in links}
    assert by[url["/p1"]]["lastmod"].isoformat().startswith("2024-05-01")
    assert by[url["/p2"]]["lastmod"] is None
    assert canonicalize("http://elsewhere.test/x") not in by
    assert by[url["/p3"]]["filter_reason"] is None
    # every sitemap request is archived
    targets = []
    for f in crawl.fs.glob(crawl.path("warc/round=1/*.warc.gz")):
        with crawl.fs.open(f, "rb") as fh:
            targets += [
                r.rec_headers.get_header("WARC-Target-URI")
                for r in ArchiveIterator(fh)
                if r.rec_type == "response"
            ]
    assert canonicalize(base + "/maps/pages.xml.gz") in targets


def test_robots_sitemap_values_resolve_against_the_robots_url():
    jobs, counts = robots_sitemap_jobs(
        ["/sitemap.ashx", " maps/a.xml ", "http://other.test/s.xml", "http://[bad"],
        "http://h.test/robots.txt",
        "h.test",
    )
    assert [j.url for j in jobs] == ["http://h.test/sitemap.ashx", "http://h.test/maps/a.xml"]
    assert counts == {"sitemaps_other_host": 1, "sitemaps_invalid": 1}


def test_index_children_stop_at_the_depth_limit():
    parent = SitemapJob("http://h.test/i.xml", "h.test", level=1)
    kids = [SitemapEntry("http://h.test/a.xml"), SitemapEntry("http://h2.test/b.xml")]
    jobs, counts = child_jobs(parent, kids, max_depth=2)
    assert jobs == [SitemapJob("http://h.test/a.xml", "h.test", 2, cross_submitted=False)]
    assert counts["sitemaps_other_host"] == 1
    jobs, counts = child_jobs(parent, kids, max_depth=1)
    assert jobs == [] and counts["sitemaps_depth_limit"] == 2
