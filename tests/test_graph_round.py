"""The link graph of a real crawl (issue 17 item 1): rounds on the sample web write ``edges``; the
``graph build`` command (a subprocess, on its own LocalCluster) turns them into the store, whose
out-links of every page equal the outlinks of that page's WARC metadata record, canonicalized, and
whose in-links equal a DuckDB query over the ``edges`` view."""

from __future__ import annotations

import json
import subprocess

import pytest
from round_helpers import cli_command, new_crawl, round_config, sample_web, serve, subprocess_env
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.errors import InvalidURL
from batchcrawl.graph import LinkGraph
from batchcrawl.round import run_rounds
from batchcrawl.store import sql
from batchcrawl.urls import canonicalize, url_key

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The sample web crawled for 3 rounds, then ``batchcrawl graph build`` in a subprocess;
    yields ``(web, crawl, build_result)``."""
    web = sample_web(hosts=3, pages=40)
    cfg = round_config()
    with serve(web):
        crawl = new_crawl(tmp_path_factory.mktemp("graph") / "crawl", cfg, web.seeds())
        run_rounds(crawl.url, cfg, 3)
    done = subprocess.run(cli_command("graph", "build", crawl.url), env=subprocess_env(),
                          capture_output=True, text=True, timeout=240)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return web, crawl, json.loads(done.stdout)


def _warc_outlinks(crawl) -> dict[int, set[int]]:
    """url key of each page with a WARC metadata record -> the keys of its canonical outlinks."""
    out: dict[int, set[int]] = {}
    for rel in crawl.fs.find(crawl.path("warc")):
        with open(rel, "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type != "metadata":
                    continue
                page = url_key(canonicalize(record.rec_headers.get_header("WARC-Target-URI")))
                keys = out.setdefault(page, set())
                for line in record.content_stream().read().decode().splitlines():
                    if line.startswith("outlink: "):
                        try:
                            keys.add(url_key(canonicalize(line[len("outlink: ") :])))
                        except InvalidURL:
                            pass  # the worker drops these too (links_invalid)
    return out


def test_outlinks_of_every_page_are_its_warc_outlinks(built):
    _, crawl, doc = built
    graph = LinkGraph.open(crawl)
    assert graph.generation == crawl.manifest().generation == doc["generation"]
    warc = _warc_outlinks(crawl)
    assert len(warc) > 20 and doc["arcs"] >= sum(len(v) for v in warc.values())
    assert doc["edges"] > crawl.manifest().rows("links")  # before the URL cache: every link
    fetched = crawl.read_current("fetched", ["url_key"]).column(0).to_pylist()
    for page in fetched:
        got = [link.url_key for link in graph.outlinks_of_key(page)]
        assert sorted(got) == sorted(warc.get(page, ())), page


def test_inlinks_equal_the_edges_view_and_urls_are_shown(built):
    web, crawl, _ = built
    graph = LinkGraph.open(crawl)
    con = sql.connect(crawl)
    seed = canonicalize(web.seeds()[0])
    targets = [link.url for link in graph.outlinks(seed)]
    assert targets and all(u is not None for u in targets)
    for target in [seed, *targets]:
        want = {r[0] for r in con.execute(
            "SELECT DISTINCT src_url_key FROM edges WHERE dst_url_key = ?", [url_key(target)]
        ).fetchall()}  # fmt: skip
        got = graph.inlinks(target)
        assert {link.url_key for link in got} == want
        assert all(link.url is not None and url_key(link.url) == link.url_key for link in got)
    arcs = graph.arcs()
    con.register("arcs", arcs)
    assert con.execute("SELECT count(*) FROM arcs").fetchone()[0] == built[2]["arcs"]
    distinct = "SELECT count(*) FROM (SELECT DISTINCT src_url_key, dst_url_key FROM edges)"
    assert con.execute(distinct).fetchone()[0] == arcs.num_rows


def test_cli_lists_urls_and_says_what_is_wrong(built, tmp_path):
    web, crawl, _ = built
    seed = web.seeds()[0]
    env = subprocess_env()

    def run(*args):
        return subprocess.run(cli_command("graph", *args), env=env, capture_output=True,
                              text=True, timeout=180)  # fmt: skip

    out = run(crawl.url, "outlinks", seed)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [link.url for link in LinkGraph.open(crawl).outlinks(seed)]
    target = out.stdout.splitlines()[0]
    inl = run(crawl.url, "inlinks", target, "--json")
    assert inl.returncode == 0, inl.stderr
    doc = json.loads(inl.stdout)
    assert canonicalize(seed) in [r["url"] for r in doc["inlinks"]]
    assert doc["count"] == len(doc["inlinks"]) and doc["in_graph"] is True
    assert "not in the link graph" not in inl.stderr
    # a URL the crawl never saw: empty stdout as for a page without links, but stderr says so
    unseen = run(crawl.url, "outlinks", "http://never.test/")
    assert unseen.returncode == 0 and unseen.stdout == ""
    assert "http://never.test/ is not in the link graph of generation" in unseen.stderr
    unseen = run(crawl.url, "inlinks", "http://never.test/", "--json")
    assert json.loads(unseen.stdout)["in_graph"] is False
    gone = run(crawl.url, "outlinks", seed, "--generation", "999")
    assert gone.returncode == 3 and "does not exist" in gone.stderr, gone.stderr
    assert run(crawl.url, "sideways", seed).returncode == 2
    assert run(crawl.url, "outlinks", "ftp://nope").returncode == 2
    empty = new_crawl(tmp_path / "empty", round_config(), [seed])
    missing = run(empty.url, "outlinks", seed)
    assert missing.returncode == 3 and "graph build" in missing.stderr
