"""DirectorySite served over a real loopback server, and reachable_pages on small real files and
(when installed) on the Debian python3.11-doc HTML docs."""

from __future__ import annotations

from collections import deque
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
import requests
from lxml import etree
from servers.staticsite import (
    PYTHON_DOCS,
    DirectorySite,
    StaticSiteError,
    reachable_pages,
)

from batchcrawl.testing.webserver import MultiHostServer

HOSTS = ["docs.test", "docs-mirror.test"]

FILES = {
    "index.html": """<html><head><link rel="stylesheet" href="style.css"></head><body>
        <a href="a.html#top">a</a> <a href="a.html?q=1">a again</a> <a href="#self">self</a>
        <a href="sub/">sub</a> <a href="sub2">sub2 without slash</a>
        <a href="missing.html">dead</a> <a href="https://www.python.org/">external</a>
        <a href="http://docs.test/../../etc/passwd">climb</a> <a href="mailto:x@example.org">m</a>
        <img src="img/logo.png"><a href="private/secret.html">private</a></body></html>""",
    "a.html": '<html><body><a href="/tutorial/t1.html">tutorial</a></body></html>',
    "style.css": "body { color: black }",
    "img/logo.png": "\x89PNG fake",
    "sub/index.html": '<html><body><a href="../a.html">up</a><a href="deep/x.html">x</a></body>',
    "sub/deep/x.html": "<html><body><script src='../../app.js'></script></body></html>",
    "app.js": "console.log(1)",
    "sub2/index.html": "<html><body>no links</body></html>",
    "tutorial/index.html": '<a href="t1.html">t1</a><a href="../a.html">outside</a>',
    "tutorial/t1.html": '<html><body><a href="t2.html">t2</a></body></html>',
    "tutorial/t2.html": "<html><body>end</body></html>",
    "private/secret.html": '<html><body><a href="hidden.html">h</a></body></html>',
    "private/hidden.html": "<html><body>hidden</body></html>",
    "orphan.html": "<html><body>nobody links here</body></html>",
}


@pytest.fixture
def site_root(tmp_path: Path) -> Path:
    for name, text in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("latin-1"))
    return tmp_path


def expected_urls(port: int | None, disallow: str | None) -> set[str]:
    p = f":{port}" if port else ""
    primary = {
        "/",
        "/style.css",
        "/a.html",
        "/sub/",
        "/sub2/",
        "/img/logo.png",
        "/sub/deep/x.html",
        "/app.js",
        "/tutorial/t1.html",
        "/tutorial/t2.html",
        "/private/secret.html",
        "/private/hidden.html",
    }
    if disallow:
        primary = {u for u in primary if not u.startswith(disallow)}
    mirror = {"/tutorial/", "/tutorial/t1.html", "/tutorial/t2.html"}  # ../a.html is 404 there
    return {f"http://docs.test{p}{u}" for u in primary} | {
        f"http://docs-mirror.test{p}{u}" for u in mirror
    }


def test_reachable_pages_on_small_tree(site_root: Path) -> None:
    assert reachable_pages(site_root, ["/"], HOSTS, port=8000) == expected_urls(8000, None)
    got = reachable_pages(site_root, ["/"], HOSTS, disallow="/private/")
    assert got == expected_urls(None, "/private/")
    only_a = reachable_pages(site_root, ["/"], HOSTS[:1], port=8000, tags={"a"})
    assert only_a == {
        f"http://docs.test:8000{u}"
        for u in ("/", "/a.html", "/sub/", "/sub2/", "/tutorial/t1.html", "/tutorial/t2.html")
        + ("/sub/deep/x.html", "/private/secret.html", "/private/hidden.html")
    }


def test_bad_arguments(site_root: Path) -> None:
    with pytest.raises(StaticSiteError, match="not a directory"):
        DirectorySite(site_root / "nope", HOSTS)
    with pytest.raises(ValueError, match="without port"):
        DirectorySite(site_root, ["docs.test:80"])
    with pytest.raises(StaticSiteError, match="disallow"):
        DirectorySite(site_root, HOSTS, disallow="private")
    with pytest.raises(StaticSiteError, match="element names"):
        reachable_pages(site_root, ["/"], HOSTS, tags={"a/@x"})


@pytest.fixture
def served(site_root: Path):
    site = DirectorySite(site_root, HOSTS, disallow="/private/")
    with MultiHostServer(site) as server:
        yield site, server


def get(server: MultiHostServer, host: str, path: str) -> requests.Response:
    return requests.get(
        f"http://127.0.0.1:{server.port}{path}",
        headers={"Host": f"{host}:{server.port}"},
        allow_redirects=False,
        timeout=10,
    )


def test_serving_rules(served) -> None:
    site, server = served
    r = get(server, "docs.test", "/")
    assert r.status_code == 200 and r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert f'href="http://docs-mirror.test:{server.port}/tutorial/"' in r.text  # injected link
    assert r.text.rstrip().endswith("</body></html>")
    assert "docs-mirror" in get(server, "docs.test", "/index.html").text
    assert "docs-mirror" not in get(server, "docs.test", "/a.html").text
    assert get(server, "docs.test", "/style.css").headers["Content-Type"].startswith("text/css")
    assert get(server, "docs.test", "/img/logo.png").headers["Content-Type"] == "image/png"
    assert get(server, "docs.test", "/sub/").text == FILES["sub/index.html"]
    r = get(server, "docs.test", "/sub?x=1")
    assert (r.status_code, r.headers["Location"]) == (301, "/sub/")
    assert get(server, "docs.test", "/a.html?q=1").status_code == 200
    for path in ("/missing.html", "/../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/a.html%00"):
        assert get(server, "docs.test", path).status_code == 404, path
    assert get(server, "docs-mirror.test", "/a.html").status_code == 404
    assert get(server, "docs-mirror.test", "/tutorial/t1.html").content == (
        get(server, "docs.test", "/tutorial/t1.html").content
    )
    assert get(server, "other.test", "/").status_code == 404
    robots = get(server, "docs-mirror.test", "/robots.txt")
    assert robots.text == "User-agent: *\nDisallow: /private/\n"
    assert get(server, "docs.test", "/private/secret.html").status_code == 200  # robots only asks


def crawl_over_server(server: MultiHostServer, seed: str, disallow: str | None) -> set[str]:
    """Independent breadth-first crawl through the server (requests + lxml), 200s only."""
    session = requests.Session()
    ours = {f"{h}:{server.port}" for h in HOSTS}
    queue, seen, ok = deque([seed]), {seed}, set()
    while queue:
        url = queue.popleft()
        parts = urlsplit(url)
        if disallow and parts.path.startswith(disallow):
            continue
        r = session.get(
            f"http://127.0.0.1:{server.port}{parts.path}",
            headers={"Host": parts.netloc},
            allow_redirects=False,
            timeout=10,
        )
        links = []
        if r.status_code == 301:
            links = [r.headers["Location"]]
        elif r.status_code == 200:
            ok.add(url)
            if r.headers["Content-Type"].startswith("text/html"):
                doc = etree.fromstring(r.content, etree.HTMLParser())
                links = doc.xpath("//@href | //@src") if doc is not None else []
        for link in links:
            target = urljoin(url, link).split("#")[0].split("?")[0]
            if urlsplit(target).netloc in ours and target not in seen:
                seen.add(target)
                queue.append(target)
    return ok


def test_reachable_pages_matches_a_crawl_over_loopback(served) -> None:
    site, server = served
    seed = f"http://docs.test:{server.port}/"
    crawled = crawl_over_server(server, seed, "/private/")
    assert crawled == site.reachable(["/"], port=server.port)
    assert crawled == expected_urls(server.port, "/private/")


@pytest.mark.skipif(
    not (PYTHON_DOCS / "index.html").is_file(),
    reason="python3.11-doc is not installed (apt-get install -y python3.11-doc)",
)
def test_python_docs_sanity() -> None:
    pages = reachable_pages(PYTHON_DOCS, ["/"], HOSTS, port=8000)
    html = {u for u in pages if u.endswith((".html", "/"))}
    n_html_files = sum(1 for _ in PYTHON_DOCS.rglob("*.html"))
    assert 0.9 * n_html_files <= len(html) <= n_html_files + 30
    assert "http://docs.test:8000/library/os.html" in pages
    assert "http://docs.test:8000/_static/jquery.js" in pages  # a symlink out of the tree
    mirror = {u for u in pages if u.startswith("http://docs-mirror.test:8000/")}
    assert mirror and all(u.startswith("http://docs-mirror.test:8000/tutorial/") for u in mirror)
    assert all(urlsplit(u).hostname in HOSTS for u in pages)
    site = DirectorySite(PYTHON_DOCS, HOSTS)
    with MultiHostServer(site) as server:
        for path in ("/", "/library/os.html", "/_static/jquery.js", "/tutorial/"):
            assert get(server, "docs.test", path).status_code == 200, path
        assert get(server, "docs.test", "/library").status_code == 301
