"""``extract.at_fetch`` in every mode of the one engine (issue 32 item 2), on a real LocalCluster
against a SampleWeb on loopback: ``round``, pipelined rounds and ``crawl --stream`` commit a
``text`` row for every HTML 200 capture with their round, ``batchcrawl extract`` then has nothing
left to do, each committed text file and WET file is byte for byte what ``extract_warc`` makes from
its WARC file, and the rows equal those of the same crawl made with ``at_fetch`` off and then
extracted (the columns that do not name a capture's time or place)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from round_helpers import new_crawl, round_config, sample_web, serve

from batchcrawl.console.signals import StopRequest
from batchcrawl.extract import extract_crawl
from batchcrawl.extract.job import plan
from batchcrawl.extract.warcfile import extract_warc
from batchcrawl.round import run_rounds
from batchcrawl.store import paths, sql
from batchcrawl.store.crawldir import CrawlDir, Manifest
from batchcrawl.stream import run_stream

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

#: text columns that do not depend on when a capture was made or where it was stored
CONTENT = ["url_key", "url", "url_host_name", "shard", "content_digest", "content_languages",
           "language_shares", "language_reliable", "title", "main_text", "main_text_length",
           "visible_text_length", "meta_description", "meta_keywords", "structured_types",
           "outlinks", "charset", "reason"]  # fmt: skip


def _text(crawl: CrawlDir, columns: str = "*") -> list[dict]:
    return sql.query(crawl, f"SELECT {columns} FROM text ORDER BY url, fetch_time").to_pylist()


def _html_200(crawl: CrawlDir) -> set[tuple[str, int]]:
    rows = sql.query(crawl, "SELECT url, round FROM fetched WHERE fetch_status = 200 AND "
                     "content_mime_type = 'text/html' AND warc_filename IS NOT NULL").to_pylist()  # fmt: skip
    return {(r["url"], r["round"]) for r in rows}


def _same_as_extract(crawl: CrawlDir, tmp_path: Path) -> int:
    """Re-extract every WARC file of ``crawl`` in a copy without its text files; assert each text
    file and WET file equals the at-fetch one; return the files compared."""
    copy = tmp_path / f"{Path(crawl.root).name}-again"
    shutil.copytree(crawl.root, copy)
    manifest = crawl.manifest()
    bare = Manifest(**{**manifest.__dict__, "tables": {k: v for k, v in manifest.tables.items()
                                                       if k != "text"}})  # fmt: skip
    todo = plan(crawl, bare)
    assert todo and len(todo) == len(manifest.files("text"))
    for warc, fetched in todo:
        text_rel = paths.text_file(paths.parse_round(warc), warc)
        (copy / text_rel).unlink()
        (copy / paths.wet_file(warc)).unlink()
        assert extract_warc(str(copy), warc, fetched)["reused"] is False
        assert pq.read_table(copy / text_rel) == pq.read_table(crawl.path(text_rel)), warc
        wet = paths.wet_file(warc)
        assert (copy / wet).read_bytes() == Path(crawl.path(wet)).read_bytes(), warc
    return len(todo)


def test_round_pipelined_and_stream_extract_at_fetch_as_extract_would(tmp_path):
    web = sample_web()
    cfg = round_config(stream={"flush_interval_s": 0.5}, filters={"max_depth": 2})
    on = cfg.replace(extract={"at_fetch": True})
    with serve(web):
        crawls = {}
        for mode in ("batch", "pipelined"):
            crawls[mode] = new_crawl(tmp_path / mode, on, web.seeds())
            run_rounds(crawls[mode].url, on, 20, pipeline=mode == "pipelined")
        crawls["stream"] = new_crawl(tmp_path / "stream", on, web.seeds())
        summary = run_stream(crawls["stream"].url, on, StopRequest(), max_seconds=120)
        assert summary["stopped_by"] == "nothing_due"
        off = new_crawl(tmp_path / "off", cfg, web.seeds())
        run_rounds(off.url, cfg, 20, pipeline=False)
    assert extract_crawl(off)["generation"] is not None
    expected = _text(off, ", ".join(CONTENT))
    assert sum(r["reason"] is None for r in expected) > 30
    for mode, crawl in crawls.items():
        text = _text(crawl)
        rows = {(r["url"], r["round"]) for r in text}
        assert len(rows) == len(text) and _html_200(crawl) <= rows, mode  # every HTML 200 capture
        assert {r["record_type"] for r in text} <= {"response", "revisit"}, mode
        assert extract_crawl(crawl)["generation"] is None, mode  # nothing left to extract
        assert _text(crawl, ", ".join(CONTENT)) == expected, mode
        assert _same_as_extract(crawl, tmp_path) >= 2, mode
