"""Hostile response bodies over real loopback sockets (issue 14, item 0): every stage of a coding
chain, the wire bytes and the decoded body stop at ``fetch.max_body_bytes``; a deadline cut is
``truncated="time"`` in the result, its outcome and its WARC record. The server sends exact bytes
from a raw socket; payloads are generated here and are small on the wire."""

from __future__ import annotations

import gzip
import tracemalloc

import fsspec
import pytest
from raw_server import RawServer
from test_decode import hostile_inner_member

from batchcrawl.fetch.fetcher import Fetcher
from batchcrawl.fetch.resolver import AddressPolicy, Resolver
from batchcrawl.fetch.warc import WarcWriter, read_record
from batchcrawl.fetch.worker import classify
from batchcrawl.records import Outcome

CAP = 1_000_000


@pytest.fixture
def serve():
    servers: list[RawServer] = []

    def start(send) -> str:
        server = RawServer(send)
        servers.append(server)
        return f"http://hostile.test:{server.port}/"

    yield start
    for s in servers:
        s.close()


def fetcher_for(test_config, **fetch) -> Fetcher:
    cfg = test_config.replace(fetch={"max_body_bytes": CAP, **fetch})
    return Fetcher(cfg.fetch, cfg.crawl, Resolver(cfg.network), AddressPolicy(cfg.network))


def head(*headers: str) -> bytes:
    return ("HTTP/1.1 200 OK\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode()


def whole(body: bytes, coding: str):
    def send(conn, _release, _head):
        conn.sendall(
            head(
                f"Content-Encoding: {coding}",
                f"Content-Length: {len(body)}",
                "Content-Type: text/plain",
            )
            + body
        )

    return send


def fetch_measured(fetcher: Fetcher, url: str):
    tracemalloc.start()
    try:
        result = fetcher.fetch(url)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return result, peak


@pytest.mark.parametrize(
    ("empty_blocks", "body_len"),
    [(20_000, CAP), (400_000, 0)],  # 0.1 MB of empty blocks, then zeros; 2 MB: past the cap first
)
def test_stacked_gzip_bomb_is_bounded_in_every_stage(serve, test_config, empty_blocks, body_len):
    """Content-Encoding: gzip, gzip; the inner member is empty stored deflate blocks then 512 MiB of
    zeros. Before: the chain's flush ran unbounded (2.1 GB RSS for the issue's 1 GiB variant)."""
    wire = gzip.compress(hostile_inner_member(empty_blocks, 512), 9)
    url = serve(whole(wire, "gzip, gzip"))
    with fetcher_for(test_config) as f:
        r, peak = fetch_measured(f, url)
    assert (r.status, r.error, r.truncated) == (200, None, "length")
    assert len(r.body) == body_len and r.body == b"\0" * body_len
    assert r.raw_body == wire
    assert classify(r) is Outcome.TRUNCATED
    assert peak < 8 * CAP  # body + raw + a few decoding blocks; the bomb inflates to 512 MiB


def test_stacked_empty_members_are_linear_and_capped(serve, test_config):
    """gzip, gzip: ~30 KB on the wire, 12 MB of 20-byte empty gzip members inside. The inner
    stream is cut at the cap (an intermediate stage is capped like the body)."""
    inner = gzip.compress(b"") * 600_000
    wire = gzip.compress(inner, 9)
    assert len(wire) < 40_000
    url = serve(whole(wire, "gzip, gzip"))
    # only the length cap may stop it: a whole-fetch deadline long enough for a loaded machine
    with fetcher_for(test_config, total_timeout_s=120.0, read_timeout_s=60.0) as f:
        r, peak = fetch_measured(f, url)
    assert (r.status, r.error, r.truncated, r.body) == (200, None, "length", b"")
    assert peak < 8 * CAP


def test_control_stacked_members_under_the_cap_decode_completely(serve, test_config):
    inner = gzip.compress(b"") * 20_000 + gzip.compress(b"the end")
    url = serve(whole(gzip.compress(inner), "gzip, gzip"))
    with fetcher_for(test_config) as f:
        r = f.fetch(url)
    assert (r.error, r.truncated, r.body) == (None, None, b"the end")


def endless_empty_members(conn, release, _head):
    conn.sendall(head("Content-Encoding: gzip", "Connection: close"))
    unit = gzip.compress(b"") * 5000
    while not release.is_set():
        conn.sendall(unit)


def test_endless_empty_members_cap_the_wire_bytes(serve, test_config):
    """An endless stream of 20-byte empty gzip members: before, 160 MB of raw body was kept and
    archived with outcome ok. The wire bytes stop at the cap."""
    url = serve(endless_empty_members)
    with fetcher_for(test_config) as f:
        r, peak = fetch_measured(f, url)
    assert (r.status, r.error, r.truncated, r.body) == (200, None, "length", b"")
    assert len(r.raw_body) == CAP
    assert classify(r) is Outcome.TRUNCATED
    assert peak < 8 * CAP


def one_piece_then_hold(conn, release, _head):
    """No Content-Length, Connection: close, one piece of the body, then nothing until the server
    stops: only the fetch's own deadline can end this body."""
    conn.sendall(head("Content-Type: text/html", "Connection: close") + b"<html>first piece")
    release.wait()


def test_deadline_cut_of_a_close_delimited_body_is_truncated_time(serve, test_config):
    """Before: the watchdog's shutdown read as a clean end: a complete 200, outcome ok."""
    url = serve(one_piece_then_hold)
    # The read timeout is far longer than the whole-fetch deadline: only the deadline can fire.
    with fetcher_for(test_config, read_timeout_s=60.0, total_timeout_s=0.5) as f:
        r = f.fetch(url)
    assert (r.status, r.error, r.truncated) == (200, None, "time")
    assert r.body == b"<html>first piece"
    assert classify(r) is Outcome.TRUNCATED
    fs = fsspec.filesystem("memory")
    with WarcWriter(fs, "/hostile-warc", "shard=00", 10**9, "batchcrawl-test") as w:
        loc = w.write_fetch(r)
    try:
        rec = read_record(fs, loc.filename, loc.offset, loc.length)
        assert dict(rec.rec_headers).get("WARC-Truncated") == "time"
        assert rec.payload == b"<html>first piece"
    finally:
        fs.rm("/hostile-warc", recursive=True)


def test_control_close_delimited_body_that_ends_is_complete(serve, test_config):
    def send(conn, _release, _head):
        conn.sendall(head("Content-Type: text/html", "Connection: close") + b"<html>all")

    url = serve(send)
    with fetcher_for(test_config, read_timeout_s=60.0, total_timeout_s=30.0) as f:
        r = f.fetch(url)
    assert (r.status, r.error, r.truncated, r.body) == (200, None, None, b"<html>all")
