"""Issue 31, item 6 (part): robots.txt Content-Signal lines recorded per host for our agent's group."""

from __future__ import annotations

import fsspec
from fsspec.implementations.dirfs import DirFileSystem
from hypothesis import given
from hypothesis import strategies as st

from batchcrawl.fetch.contentsignal import content_signal
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import FetchItem
from batchcrawl.store import schemas
from batchcrawl.testing.webserver import Response
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key

ROBOTS = """User-agent: *
Content-Signal: search=yes, ai-train=no
Allow: /

User-agent: BatchCrawl/1.0
Content-signal: ai-input=no, bogus, x=maybe, AI-Train=No
Disallow: /private

User-agent: batchcrawl
Content-Signal: ai-input=yes
"""


def test_the_group_of_our_agent_wins_and_values_are_normalized():
    assert content_signal(ROBOTS, "batchcrawl") == "ai-input=no,ai-train=no"  # groups combined
    assert content_signal(ROBOTS, "otherbot") == "search=yes,ai-train=no"  # the * group
    assert content_signal("Content-Signal: search=yes\nUser-agent: *\nDisallow: /", "a") == (
        "search=yes"  # outside any group: for everyone
    )
    assert content_signal("User-agent: *\nDisallow: /", "a") is None
    assert content_signal(None, "a") is None


@given(st.text(max_size=300), st.text(max_size=20))
def test_content_signal_never_raises(text, agent):
    got = content_signal(text, agent)
    assert got is None or all(p.partition("=")[2] in ("yes", "no") for p in got.split(","))


def test_the_hosts_row_records_the_signal(web, host_name, test_config, tmp_path):
    web.app.add(host_name, "/robots.txt", Response(200, [("Content-Type", "text/plain")],
                                                   ROBOTS.encode()))  # fmt: skip
    web.app.add(host_name, "/", Response(200, [("Content-Type", "text/html")], b"<p>x</p>"))
    url = canonicalize(web.base_url(host_name) + "/")
    fs = DirFileSystem(str(tmp_path), fsspec.filesystem("file"))
    w = FetchWorker(test_config, 0, fs, seed_hosts={host_name})
    try:
        run = w.run([FetchItem(url_key(url), url, host_of(url), domain_of(host_name), 0)], round=1)
        (row,) = w.host_rows([host_name])
    finally:
        w.close()
    assert run.fetched[0]["outcome"] == "ok"  # a signal changes nothing that is fetched
    assert row["content_signal"] == "ai-input=no,ai-train=no"
    assert schemas.conform("hosts", [row]).column("content_signal").to_pylist() == [
        "ai-input=no,ai-train=no"
    ]
