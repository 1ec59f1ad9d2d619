"""Real input (issue 5.5): crawl the Python HTML documentation of the Debian package, served on
loopback under two host names by ``scripts/crawl_pydoc.py``, until nothing is due.

Ground truth: :func:`servers.staticsite.reachable_pages` over the files (lxml, ``<a>`` and
``<area>`` links), independent of the crawler's parser. One crawl per module; the tests read it,
its WARC files and the server's request log.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from urllib.parse import urlsplit

import fsspec
import pytest
from round_helpers import (
    REPO,
    fetched_rows,
    frontier_rows,
    politeness_violations,
    robots_not_first,
)
from servers.staticsite import PYTHON_DOCS, reachable_pages

from batchcrawl.fetch.warc import read_record
from batchcrawl.store.sql import query

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(
        not (PYTHON_DOCS / "index.html").is_file(),
        reason=f"{PYTHON_DOCS} is absent: install the Debian package python3.11-doc "
        "(scripts/test.sh does)",
    ),
]

MAX_ROUNDS = 40


def _script():
    spec = importlib.util.spec_from_file_location("crawl_pydoc", REPO / "scripts/crawl_pydoc.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _file_path(url: str) -> str:
    """The served file's path of a URL (a directory is served by its index.html)."""
    path = urlsplit(url).path
    return path + "index.html" if path.endswith("/") else path


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    """The script's crawl of the docs (host delay 0.02 s), and the script module."""
    script = _script()
    run = script.crawl_docs(PYTHON_DOCS, tmp_path_factory.mktemp("pydoc"), max_rounds=MAX_ROUNDS)
    return script, run


def test_every_page_reachable_by_links_is_fetched(docs):
    script, run = docs
    assert len(run.summaries) < MAX_ROUNDS, "rounds ran until nothing was due"
    truth = reachable_pages(PYTHON_DOCS, ["/"], list(script.HOSTS), port=run.port,
                            tags={"a", "area"})  # fmt: skip
    assert len(truth) > 500 and any(urlsplit(u).hostname == "docs-mirror.test" for u in truth)
    fetched = fetched_rows(run.crawl)
    ok = {f["url"] for f in fetched if f["fetch_status"] == 200}
    missing = sorted(truth - ok)
    assert missing == [], f"{len(missing)} reachable pages not fetched, e.g. {missing[:5]}"
    # and nothing answered 200 that no href/src of the files points to
    linked = reachable_pages(PYTHON_DOCS, ["/"], list(script.HOSTS), port=run.port)
    assert ok <= linked, sorted(ok - linked)[:5]
    status = {r["url"]: r["status"] for r in frontier_rows(run.crawl)}
    assert all(status[u] == "fetched" for u in truth)
    assert "queued" not in status.values()


def test_scope_keeps_every_request_on_the_two_loopback_hosts(docs):
    script, run = docs
    hosts = set(script.HOSTS)
    assert {e.host for e in run.log} == hosts
    fetched = fetched_rows(run.crawl)
    assert {f["url_host_name"] for f in fetched} == hosts
    assert {f["fetch_ip"] for f in fetched if f.get("fetch_ip")} == {"127.0.0.1"}
    outside = [r for r in frontier_rows(run.crawl) if r["host"] not in hosts]
    assert len(outside) > 100, "the docs link to many real sites"
    assert {(r["status"], r["reason"]) for r in outside} == {("filtered", "default_reject")}


def test_robots_first_and_no_two_requests_to_a_host_closer_than_the_delay(docs):
    _, run = docs
    delay = run.cfg.politeness.host_delay_s
    assert robots_not_first(run.log) == []
    assert sum(e.path == "/robots.txt" for e in run.log) == 2
    assert politeness_violations(run.log, lambda host: delay) == []
    assert politeness_violations(run.log, lambda host: 10 * delay), "control: the check can fail"


def test_warc_files_pass_warcio_check_and_hold_the_files_bytes(docs):
    script, run = docs
    files = script.warc_files(run.crawl)
    assert files
    check = script.warcio_check(files)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    fs = fsspec.filesystem("file")
    rows = [f for f in fetched_rows(run.crawl) if f["fetch_status"] == 200]
    compared = 0
    for f in rows[:: max(1, len(rows) // 40)]:
        if urlsplit(f["url"]).path in ("/", "/index.html"):
            continue  # the root index gets the mirror links injected
        rec = read_record(fs, run.crawl.path(f["warc_filename"]), f["warc_record_offset"],
                          f["warc_record_length"])  # fmt: skip
        assert rec.target_uri == f["url"] and rec.digests_ok is not False
        if rec.rec_type == "revisit":  # a duplicate of a page fetched before (the mirror's copies)
            continue
        assert rec.rec_type == "response"
        assert rec.payload == (PYTHON_DOCS / _file_path(f["url"]).lstrip("/")).read_bytes()
        compared += 1
    assert compared >= 20


def test_sql_shows_the_crawl_and_the_mirror_holds_exact_duplicates(docs):
    script, run = docs
    report = {name: query(run.crawl, text).to_pylist() for name, text in script.SQL.items()}
    by_status = {(r["status"], r["reason"]): r["urls"] for r in report["frontier_by_status"]}
    assert by_status[("fetched", "")] >= 500
    assert report["duplicates_across_hosts"][0]["digests"] > 5
    # the mirror serves exact copies of the primary's tutorial pages: equal digests, path by path
    ok = [f for f in fetched_rows(run.crawl) if f["outcome"] == "ok"]
    primary = {_file_path(f["url"]): f["content_digest"] for f in ok
               if f["url_host_name"] == script.HOSTS[0]}  # fmt: skip
    mirror = {_file_path(f["url"]): f["content_digest"] for f in ok
              if f["url_host_name"] == script.HOSTS[1]}  # fmt: skip
    assert len(mirror) > 5 and all(p.startswith("/tutorial/") for p in mirror)
    assert {p: d for p, d in mirror.items() if primary.get(p) != d} == {}
    assert Path(run.crawl.path("crawl.duckdb")).is_file()
