"""A WARC file that holds only robots.txt captures: every URL of its shard's round was disallowed,
so no ``fetched`` row names the file. ``gc`` found WARC files only through ``fetched.
warc_filename`` and deleted it, robots.txt captures and all (and the automatic gc after each
commit did so at once). Now each commit lists such files and carries the list on
(``Manifest.warcs_without_rows``). A real round on a loopback web, real WARC reading."""

from __future__ import annotations

import os

import pyarrow.dataset as ds
import pytest
from round_helpers import new_crawl, round_config, sample_web, serve
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.export.lake import export_crawl, warc_dest
from batchcrawl.frontier.inject import inject
from batchcrawl.round import run_rounds
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.gc import gc
from batchcrawl.testing.webserver import Response

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


class DenyAll:
    """The sample web, but the first host's robots.txt disallows everything."""

    def __init__(self, web) -> None:
        self.web, self.denying = web, None

    def bind(self, port: int):
        self.web.bind(port)
        self.denying = self.web.seeds()[0].split("//", 1)[1].split(":", 1)[0]
        return self

    def __call__(self, host, path, headers):
        if host.split(":", 1)[0] == self.denying and path == "/robots.txt":
            return Response(200, [("Content-Type", "text/plain")], b"User-agent: *\nDisallow: /\n")
        return self.web(host, path, headers)


def _warc_types(path: str) -> list[tuple[str, str]]:
    with open(path, "rb") as fh:
        return [(r.rec_type, r.rec_headers.get_header("WARC-Target-URI") or "")
                for r in ArchiveIterator(fh)]  # fmt: skip


def _robots_only_crawl(tmp_path, cfg, rounds: int):
    """A crawl whose round 1 fetched only the denying host's seed (one shard, so its WARC file
    holds robots.txt captures alone); later rounds crawl an allowed host. Returns the crawl,
    the seeds (denied, allowed) and the WARC files without rows after round 1."""
    web = sample_web(hosts=2, pages=10, extras_every=0)
    with serve(DenyAll(web)):
        denied, allowed = web.seeds()[0], web.seeds()[1]
        crawl = new_crawl(tmp_path / "crawl", cfg, [denied])
        first = run_rounds(crawl.url, cfg, 1)[0]
        assert first["outcomes"] == {"robots_denied": 1}, first
        crawl = CrawlDir.open(crawl.url)
        kept = crawl.manifest().warcs_without_rows
        assert len(kept) == 1, kept
        inject(crawl, cfg, [allowed])
        run_rounds(crawl.url, cfg, rounds - 1)
    return CrawlDir.open(crawl.url), (denied, allowed), kept


def test_a_warc_file_of_robots_txt_captures_only_is_exported_and_indexed(tmp_path):
    cfg = round_config(fetch={"shards": 1})
    crawl, (denied, _), kept = _robots_only_crawl(tmp_path, cfg, 2)
    dest = tmp_path / "lake"
    summary = export_crawl(crawl, str(dest), crawl_name="c")
    assert summary["exported"] == [1, 2], summary
    copy = dest / warc_dest("c", 1, kept[0])
    assert copy.exists(), sorted(p.name for p in dest.rglob("*.warc*"))
    assert copy.read_bytes() == open(crawl.path(kept[0]), "rb").read()  # a byte copy
    assert copy.with_name(copy.name.replace(".warc.gz", ".cdxj")).exists()
    index = ds.dataset(str(dest / "index"), format="parquet", partitioning="hive").to_table()
    robots = [r for r in index.to_pylist() if r["subset"] == "robotstxt"]
    assert denied.rstrip("/") + "/robots.txt" in {r["url"] for r in robots}, robots
    assert {r["warc_filename"] for r in robots} >= {warc_dest("c", 1, kept[0])}


def test_a_warc_file_of_robots_txt_captures_only_survives_gc(tmp_path):
    cfg = round_config(fetch={"shards": 1}, gc={"auto": True}, crawl={"keep_generations": 1})
    crawl, (denied, _), kept = _robots_only_crawl(tmp_path, cfg, 3)
    gc(crawl, keep=1, tmp_min_age_s=0)
    path = crawl.path(kept[0])
    assert os.path.exists(path), "the robots.txt captures were deleted"
    types = _warc_types(path)
    assert types[0][0] == "warcinfo"
    assert ("response", denied.rstrip("/") + "/robots.txt") in types, types
    assert crawl.manifest().warcs_without_rows == kept  # carried on by every later commit
