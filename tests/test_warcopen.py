"""The cut-back of WARC files a stream left open (:mod:`batchcrawl.engine.warcopen`, issue 35),
on a real crawl directory with commits made by hand: which commit's ``warc_open`` counts, the
truncation to the committed end and the CDXJ rewritten from what is left, repeatable; a file
shorter than its committed end is an error, not a silent loss. The same cut-back after real
SIGKILLed streams: ``tests/test_warc_checkpoints.py``."""

from __future__ import annotations

import json
import logging
import os

import fsspec
import pytest
from fsspec.implementations.dirfs import DirFileSystem
from round_helpers import round_config
from test_warc import fetch, writer
from warc_checks import check_committed_warcs

from batchcrawl.console.signals import StopRequest
from batchcrawl.engine.warcopen import close_open_warcs, committed_open_warcs
from batchcrawl.errors import WarcError
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir


def _commit(crawl: CrawlDir, summary: dict) -> None:
    crawl.commit(crawl.manifest(), {}, summary)


@pytest.fixture
def left_open(tmp_path):
    """A crawl whose newest round commit left one WARC file open at ``end``, with records of a
    micro-batch never committed after it: ``(crawl, file, end)``."""
    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    w = writer(DirFileSystem(crawl.root, fsspec.filesystem("file")), paths.warc_dir(1),
               cdxj_name=paths.warc_cdxj)  # fmt: skip
    w.write_fetch(fetch(path="/a"))
    point = w.checkpoint()
    w.write_fetch(fetch(path="/b"))
    w.checkpoint()  # the uncommitted micro-batch's take: flushed and indexed, never committed
    w.write_fetch(fetch(path="/c"))
    summary = {"step": "round", "warc_open": {"3": [point.open_file, point.open_end]}}
    crawl.commit(crawl.manifest(), {}, summary, round=1)
    return crawl, point.open_file, point.open_end


def test_the_open_file_is_cut_back_to_its_committed_end_with_its_cdxj(left_open):
    crawl, name, end = left_open
    size = os.path.getsize(crawl.path(name))
    _commit(crawl, {"step": "extract"})  # not a crawl step: looked past
    assert committed_open_warcs(crawl) == {name: end}
    assert close_open_warcs(crawl) == {name: {"end": end, "cut_bytes": size - end}} and size > end
    assert os.path.getsize(crawl.path(name)) == end
    check_committed_warcs(crawl, also=[name])  # whole records, warcio check, CDXJ exact
    with open(crawl.path(paths.warc_cdxj(name)), encoding="utf-8") as fh:
        assert [line.split('"url": "')[1].split('"')[0] for line in fh] == ["http://a.test/a"]
    assert close_open_warcs(crawl) == {name: {"end": end, "cut_bytes": 0}}  # repeatable
    index = crawl.path(paths.warc_cdxj(name))
    indexed_at = os.stat(index).st_mtime_ns
    os.utime(index, ns=(indexed_at - 10**9, indexed_at - 10**9))
    assert close_open_warcs(crawl)[name]["cut_bytes"] == 0
    assert os.stat(index).st_mtime_ns == indexed_at - 10**9  # its index was right: not rewritten
    _commit(crawl, {"step": "round", "warc_open": {}})  # the next writer committed
    assert committed_open_warcs(crawl) == {} and close_open_warcs(crawl) == {}


def test_a_file_shorter_than_its_committed_end_is_an_error(left_open):
    crawl, name, end = left_open
    with open(crawl.path(name), "r+b") as fh:
        fh.truncate(end - 10)
    with pytest.raises(WarcError, match="committed records were lost"):
        close_open_warcs(crawl)


def test_the_cut_back_warns_once_when_records_are_removed_and_not_at_every_later_start(
    left_open, caplog
):
    """A fresh-user trial: after a killed stream, every later ``round`` that committed nothing
    (nothing due, a stop) warned again "... cut back to its last committed record (N bytes, 0
    removed)" -- six warnings, a stop's output five lines long. Removing uncommitted records is
    the warning; a file found at its committed end again (or left at one: a crash right after a
    checkpoint) is INFO, and its CDXJ is rewritten only when it does not index exactly the
    committed records."""
    crawl, name, end = left_open
    with caplog.at_level(logging.INFO, logger="batchcrawl.engine"):
        close_open_warcs(crawl)
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "removed" in warned[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="batchcrawl.engine"):
        assert close_open_warcs(crawl) == {name: {"end": end, "cut_bytes": 0}}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert name in caplog.text  # still said, at INFO
    # a stale index (records of an uncommitted micro-batch in it) is rewritten even at 0 removed
    index = crawl.path(paths.warc_cdxj(name))
    with open(index, "a", encoding="utf-8") as fh:
        line = {"url": "http://a.test/z", "offset": str(end), "length": "40"}
        fh.write(f"a,test)/z 20260101000000 {json.dumps(line)}\n")
    close_open_warcs(crawl)
    check_committed_warcs(crawl, also=[name])


def test_a_stream_that_cut_back_open_files_settles_it_so_the_next_start_does_not_again(
    left_open, caplog
):
    """The cut-back warning ("... cut back to its last committed record (N bytes, 0 removed)")
    came again at every later start: a stream that had nothing to fetch committed nothing when
    the newest commit was not a crawl step (an ``extract`` here), so the crawl commit that left
    the file open stayed the newest one. The stream's last take now commits that nothing is open
    left, and the next start finds nothing to cut back."""
    from batchcrawl.stream import run_stream  # Dask: imported by the one test that runs a stream

    crawl, name, end = left_open
    _commit(crawl, {"step": "extract"})  # not a crawl step: looked past
    cfg = round_config(stream={"flush_interval_s": 0.2}, frontier={"buckets": 1})
    with caplog.at_level(logging.INFO, logger="batchcrawl.engine"):
        first = run_stream(crawl.url, cfg, StopRequest(), max_seconds=60)
    assert first["stopped_by"] == "nothing_due" and first["rerun_after_crash"] is True
    assert "cut back to its last committed record" in caplog.text
    assert os.path.getsize(crawl.path(name)) == end
    assert committed_open_warcs(crawl) == {}  # settled: a crawl commit says nothing is open
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="batchcrawl.engine"):
        again = run_stream(crawl.url, cfg, StopRequest(), max_seconds=60)
    assert again["rerun_after_crash"] is False
    assert "left open" not in caplog.text and "did not commit" not in caplog.text
    assert os.path.getsize(crawl.path(name)) == end  # the committed records stay
