"""Every WARC revisit refers to a response record (issue 30, item 3).

A shard's fetch threads finish out of order: a slow page whose request started first is processed
after a quick duplicate of it, so it is archived as a revisit although its ``fetch_time`` (the
start of its request) is the earlier one. The content-seen table took the earliest fetch of a
digest as the capture later revisits name, so a later round's revisit could name a revisit,
which a replay tool cannot resolve. :func:`batchcrawl.frontier.content.captures` keeps revisits
out of it; here on a real crawl, and as a property of :func:`content_rows`.
"""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from round_helpers import fetched_rows, hosts_on_one_shard, new_crawl, round_config, serve
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.frontier import content as content_mod
from batchcrawl.round import run_rounds
from batchcrawl.testing.webserver import Response

SLOW_S = 1.5  # the slow copy's answer; its request starts ~0.25 s before the quick copy's
CRAWL_DELAY_S = 0.3  # the quick copy's host: its page waits this long after its robots.txt


class CopiesWeb:
    """Three hosts serving one payload at ``/x``; it links to the third host's copy. The first
    host answers it after :data:`SLOW_S`; the second asks for a Crawl-delay."""

    def __init__(self, slow: str, quick: str, later: str) -> None:
        self.slow, self.quick, self.later = slow, quick, later
        self.port = 0

    def bind(self, port: int) -> None:
        self.port = port

    def __call__(self, host: str, path: str, headers) -> Response:
        if path == "/robots.txt":
            delay = f"Crawl-delay: {CRAWL_DELAY_S}\n" if host == self.quick else ""
            return Response(200, [("Content-Type", "text/plain")],
                            f"User-agent: *\nDisallow:\n{delay}".encode())  # fmt: skip
        if path != "/x":
            return Response(404, [("Content-Type", "text/plain")], b"not found")
        body = f'<html><body><p>one payload</p><a href="http://{self.later}:{self.port}/x">x</a>'
        slow = host == self.slow
        return Response(200, [("Content-Type", "text/html")], body.encode(),
                        behaviour="slow" if slow else None, delay_s=SLOW_S if slow else 0.0)  # fmt: skip


def _records(paths: list[str]) -> list[dict[str, str | None]]:
    out = []
    for path in paths:
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                h = rec.rec_headers
                out.append({k: h.get_header(v) for k, v in (
                    ("type", "WARC-Type"), ("uri", "WARC-Target-URI"), ("date", "WARC-Date"),
                    ("refers_uri", "WARC-Refers-To-Target-URI"),
                    ("refers_date", "WARC-Refers-To-Date"))})  # fmt: skip
    return out


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_later_revisit_names_a_response_when_a_slow_duplicate_started_first(tmp_path):
    cfg = round_config(fetch={"read_timeout_s": 5.0}, filters={"seed_scope": "none"})
    slow, quick = hosts_on_one_shard(cfg, "copy", 2)  # one shard: its own digests find the dup
    web = CopiesWeb(slow, quick, "later.test")
    with serve(web) as server:
        crawl = new_crawl(
            tmp_path / "crawl", cfg, [f"http://{h}:{server.port}/x" for h in (slow, quick)]
        )
        summaries = run_rounds(crawl.url, cfg, 4)
    rows = {
        r["url"].split("/")[2].split(":")[0]: r
        for r in fetched_rows(crawl)
        if r["url"].endswith("/x")
    }
    # the set-up: the slow copy started first and was archived as a revisit of the quick one
    assert rows[slow]["fetch_time"] < rows[quick]["fetch_time"]
    assert (
        rows[slow]["duplicate_of"] == rows[quick]["url_key"] and rows[quick]["duplicate_of"] is None
    )
    assert rows["later.test"]["round"] == 2 and len(summaries) == 2
    records = _records(sorted({crawl.path(r["warc_filename"]) for r in rows.values()}))
    responses = {(r["uri"], r["date"]) for r in records if r["type"] == "response"}
    revisits = [r for r in records if r["type"] == "revisit"]
    assert {r["uri"].split("/")[2].split(":")[0] for r in revisits} == {slow, "later.test"}
    for r in revisits:
        assert (r["refers_uri"], r["refers_date"]) in responses, r
    later = next(r for r in revisits if "later.test" in r["uri"])
    assert later["refers_uri"] == rows[quick]["url"]


_T0 = dt.datetime(2026, 1, 1)
_row = st.tuples(
    st.integers(0, 3),  # digest id
    st.integers(0, 5),  # url id
    st.integers(0, 3),  # fetch time, seconds
    st.booleans(),  # archived as a revisit
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_row, max_size=30))
def test_content_rows_name_responses_only(rows):
    """The content row of a digest is its earliest response; a digest fetched only as revisits
    (of earlier rounds' captures) offers none."""
    t = pa.table({
        "url_key": pa.array([u + 1 for _, u, _, _ in rows], pa.uint64()),
        "url": pa.array([f"http://h{u}.test/" for _, u, _, _ in rows], pa.string()),
        "round": pa.array([3] * len(rows), pa.int32()),
        "fetch_time": pa.array([_T0 + dt.timedelta(seconds=s) for _, _, s, _ in rows],
                               pa.timestamp("ms")),
        "content_digest": pa.array([f"sha1:D{d}" for d, *_ in rows], pa.string()),
        "outcome": pa.array(["ok"] * len(rows), pa.string()),
        "content_length": pa.array([10] * len(rows), pa.int64()),
        "duplicate_of": pa.array([99 if r else None for *_, r in rows], pa.uint64()),
    })  # fmt: skip
    got = {
        r["digest"]: (r["fetch_time"], r["url_key"])
        for r in content_mod.content_rows(t).to_pylist()
    }
    want: dict[str, tuple] = {}
    for d, u, s, revisit in rows:
        if not revisit:
            cand = (_T0 + dt.timedelta(seconds=s), u + 1)
            want[f"sha1:D{d}"] = min(want.get(f"sha1:D{d}", cand), cand)
    assert got == want
