"""Issue 31: sitemaps follow sitemaps.org's location rules. A sitemap lists URLs of its own site
under its own directory, unless cross-submitted by the host's robots.txt (then any URL of the
host); a sitemap index lists sitemaps of its own site, and every one of its <loc> is fetched."""

from __future__ import annotations

import pytest
from round_helpers import fetched_rows, new_crawl, round_config, serve

from batchcrawl.fetch.sitemap_jobs import (
    SitemapJob,
    child_jobs,
    directory_of,
    robots_sitemap_jobs,
    seed_sitemap_jobs,
)
from batchcrawl.fetch.sitemaps import SitemapEntry
from batchcrawl.round import run_rounds
from batchcrawl.store import sql
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
XML = [("Content-Type", "application/xml")]
HTML = [("Content-Type", "text/html")]


def _index(*locs: str) -> bytes:
    items = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f"<sitemapindex {NS}>{items}</sitemapindex>".encode()


def _urlset(*locs: str) -> bytes:
    items = "".join(f"<url><loc>{loc}</loc></url>" for loc in locs)
    return f"<urlset {NS}>{items}</urlset>".encode()


def test_directory_and_what_a_sitemap_may_list():
    assert directory_of("http://h.test/catalog/sitemap.xml?x=1") == "http://h.test/catalog/"
    job = SitemapJob("http://h.test:8080/catalog/sitemap.xml", "h.test")
    assert job.may_list("http://h.test:8080/catalog/a/b")
    for other in ("http://h.test:8080/images/a", "http://h.test/catalog/a",
                  "https://h.test:8080/catalog/a", "http://h.test:8080/catalogue"):  # fmt: skip
        assert not job.may_list(other)
    (named,), _ = robots_sitemap_jobs(["/catalog/s.xml"], "http://h.test/robots.txt", "h.test")
    assert named.cross_submitted
    assert named.may_list("http://h.test/images/a") and named.may_list("https://h.test/x")
    assert not named.may_list("http://other.test/catalog/a")
    (seed,) = seed_sitemap_jobs(["http://h.test/catalog/s.xml"], "h.test")
    assert not seed.cross_submitted and not seed.may_list("http://h.test/images/a")


def test_index_children_are_of_its_site_and_inherit_cross_submission():
    index = SitemapJob("http://h.test/maps/i.xml", "h.test", 0, cross_submitted=True)
    kids = [SitemapEntry(u) for u in ("http://h.test/a.xml", "https://h.test/b.xml",
                                      "http://h.test:81/c.xml", "/maps/d.xml", "http://[x")]  # fmt: skip
    jobs, counts = child_jobs(index, kids, max_depth=2)
    assert [j.url for j in jobs] == ["http://h.test/a.xml", "http://h.test/maps/d.xml"]
    assert all(j.cross_submitted and j.level == 1 for j in jobs)
    assert counts == {"sitemaps_other_host": 2, "sitemaps_invalid": 1}


class ScopeSite:
    """``m.test``: robots.txt names ``/maps/index.xml`` (cross-submitted), an index of three
    sitemaps; the configured seed sitemap ``/catalog/sitemap.xml`` (not named by robots.txt)
    lists one URL under ``/catalog/`` and one outside it."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.paths: list[str] = []
        b = base
        self.routes = {
            "/robots.txt": Response(200, [("Content-Type", "text/plain")],
                                    b"User-agent: *\nSitemap: /maps/index.xml\n"),
            "/": Response(200, HTML, b"<p>no links</p>"),
            "/maps/index.xml": Response(200, XML, _index("/maps/a.xml", f"{b}/maps/b.xml",
                                                         "/other/c.xml")),
            "/maps/a.xml": Response(200, XML, _urlset(f"{b}/top-a")),  # outside /maps/: cross
            "/maps/b.xml": Response(200, XML, _urlset(f"{b}/top-b")),
            "/other/c.xml": Response(200, XML, _urlset(f"{b}/top-c")),
            "/catalog/sitemap.xml": Response(200, XML, _urlset(f"{b}/catalog/in",
                                                               f"{b}/images/out")),
        }  # fmt: skip

    def __call__(self, host, path, headers):
        self.paths.append(path)
        if path in self.routes:
            return self.routes[path]
        return Response(200, HTML, f"<p>{path}</p>".encode())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_sitemap_location_rules_end_to_end(tmp_path):
    with serve(lambda *a: site(*a)) as server:
        base = server.base_url("m.test")
        site = ScopeSite(base)
        cfg = round_config(sitemaps={"seeds": [f"{base}/catalog/sitemap.xml"]})
        crawl = new_crawl(tmp_path / "crawl", cfg, [canonicalize(base + "/")])
        run_rounds(crawl.url, cfg, 2)
    for p in ("/maps/a.xml", "/maps/b.xml", "/other/c.xml"):  # every <loc> of the index
        assert site.paths.count(p) == 1
    fetched = {r["url"][len(base) :] for r in fetched_rows(crawl)}
    assert {"/top-a", "/top-b", "/top-c", "/catalog/in"} <= fetched
    assert "/images/out" not in fetched and "/images/out" not in site.paths
    links = sql.query(crawl, "SELECT dst_url FROM links WHERE tag = 'sitemap'").to_pylist()
    assert canonicalize(base + "/images/out") not in {r["dst_url"] for r in links}
