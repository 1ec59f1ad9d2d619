"""The fetch worker's streaming API (FetchWorker.stream_*): threads that keep running across
micro-batch takes, against a real loopback server."""

from __future__ import annotations

import time

import fsspec
import pytest
from fetch_helpers import fetch_item as _item
from fsspec.implementations.dirfs import DirFileSystem

from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import FetchItem
from batchcrawl.testing.webserver import Response, politeness_violations


def _wait_drained(worker: FetchWorker, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while worker.stream_held and time.monotonic() < deadline:
        time.sleep(0.02)
    assert worker.stream_held == 0


@pytest.mark.parametrize("stop_with_queued", [False, True])
def test_stream_takes_micro_batches_without_stopping_and_accounts_every_item(
    web, host_name, test_config, tmp_path, stop_with_queued
):
    base = web.base_url(host_name)
    web.app.add(host_name, "/robots.txt", Response(404, [], b""))
    for i in range(24):
        web.app.add(host_name, f"/p{i}", Response(200, [("Content-Type", "text/html")],
                                                 f'<a href="/p{i + 1}">next</a>'.encode()))  # fmt: skip
    items = [_item(f"{base}/p{i}") for i in range(24)]
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(test_config, 0, fs, seed_hosts={host_name}, seed_domains=[host_name])
    mark = web.log.mark()
    w.stream_start(round=1)
    assert w.stream_add(items[:8]) == 8
    _wait_drained(w)
    threads = list(w._stream_threads)
    first = w.stream_take(next_round=2)
    w.stream_add(items[8:])
    if not stop_with_queued:
        _wait_drained(w)
    last = w.stream_stop()
    w.close()
    # the same threads served both micro-batches: a take does not join them
    assert all(not t.is_alive() for t in threads) and len(threads) == test_config.fetch.threads
    assert [r["url"] for r in first.fetched] and {r["round"] for r in first.fetched} == {1}
    assert {r["round"] for r in last.fetched} <= {2}
    done = [r["url_key"] for r in first.fetched + last.fetched]
    # rows in = rows out + unfetched, each item exactly once
    assert sorted(done + [i.url_key for i in last.unfetched]) == sorted(i.url_key for i in items)
    assert bool(last.unfetched) == stop_with_queued
    assert len(set(done)) == len(done)
    # one WARC file spans both micro-batches (issue 35): opened in round 1, kept open by the take
    # with the end of the records taken, closed by the stop
    name, end = first.warc_open
    assert "/round=1/" in name and first.warc_files == [name] and last.warc_files == [name]
    assert all(r["warc_record_offset"] < end for r in first.fetched if r["warc_filename"])
    later = [r for r in last.fetched if r["warc_filename"]]
    assert all(r["warc_filename"] == name and r["warc_record_offset"] >= end for r in later)
    # politeness held across the take: one host delay between any two requests
    entries = [e for e in web.log.since(mark) if e.host == host_name]
    delay = test_config.politeness.host_delay_s
    assert politeness_violations(entries, lambda h: delay) == []
    assert politeness_violations(entries, lambda h: 10 * delay)  # control


def test_a_stopped_stream_gives_back_fetch_items_only_not_its_queued_sitemap_jobs(
    web, host_name, test_config, tmp_path
):
    # robots.txt names a sitemap and sets Crawl-delay 1 s: when the first page is answered, the
    # sitemap job and the other pages are still queued on the host
    base = web.base_url(host_name)
    robots = f"User-agent: *\nCrawl-delay: 1\nSitemap: {base}/sitemap.xml\n".encode()
    web.app.add(host_name, "/robots.txt", Response(200, [("Content-Type", "text/plain")], robots))
    for i in range(4):
        web.app.add(host_name, f"/p{i}", Response(200, [("Content-Type", "text/html")], b"x"))
    items = [_item(f"{base}/p{i}") for i in range(4)]
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(test_config, 0, fs, seed_hosts={host_name}, seed_domains=[host_name])
    mark = web.log.mark()
    w.stream_start(round=1)
    w.stream_add(items)
    deadline = time.monotonic() + 30
    while not any(e.path == "/p0" for e in web.log.since(mark)):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    out = w.stream_stop()
    w.close()
    assert out.counters["sitemaps_queued"] == 1
    assert out.unfetched and all(isinstance(i, FetchItem) for i in out.unfetched), out.unfetched
    done = [r["url_key"] for r in out.fetched]
    assert sorted(done + [i.url_key for i in out.unfetched]) == sorted(i.url_key for i in items)
