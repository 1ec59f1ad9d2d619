"""Near-duplicates and traps on a real crawl of the sample web (issue 17 item 3): the calendar
trap's pages (which differ only in digits) and the planted copies are flagged, normal pages are
not, and the trap host is flagged in the ``hosts`` table and throttled by generate."""

from __future__ import annotations

import pytest
from round_helpers import new_crawl, round_config, sample_web, serve

from batchcrawl.console.status_view import status_tables
from batchcrawl.round import run_rounds
from batchcrawl.store.status import crawl_status

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def test_near_duplicates_and_the_calendar_trap_are_detected(tmp_path):
    web = sample_web(hosts=6, pages=120, trap=True, extras_every=3)
    cfg = round_config(dedup={"trap_min_pages": 4, "trap_max_urls_per_host": 1})
    with serve(web):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        summaries = run_rounds(crawl.url, cfg, 5)
    rows = crawl.read_current(
        "fetched", ["url", "url_key", "simhash", "near_duplicate_of"]
    ).to_pylist()
    kind = {r["url"]: web.kind_of(r["url"]) for r in rows}
    flagged = {r["url"] for r in rows if r["near_duplicate_of"] is not None}
    calendar = [r["url"] for r in rows if kind[r["url"]] == "calendar"]
    planted = [r["url"] for r in rows if kind[r["url"]] in ("duplicate", "near_duplicate")]
    normal = [r["url"] for r in rows if kind[r["url"]] == "page" and r["simhash"] is not None]
    assert len(calendar) >= 3 and len(planted) >= 2 and len(normal) > 50
    assert set(calendar[1:]) <= flagged or len(set(calendar) & flagged) >= len(calendar) - 1
    # a planted copy is flagged, or its original when the copy was fetched first
    key = {r["url"]: r["url_key"] for r in rows}
    flagged_of = {r["near_duplicate_of"] for r in rows if r["near_duplicate_of"] is not None}
    assert all(u in flagged or key[u] in flagged_of for u in planted)
    copies = {key[u] for u in planted}
    wrong = [r for r in rows if r["url"] in set(normal) and r["near_duplicate_of"] is not None
             and r["near_duplicate_of"] not in copies]  # fmt: skip
    assert not wrong  # no false positive among normal pages
    hosts = crawl.read_current("hosts", ["host", "trap"]).to_pylist()
    assert {h["host"]: h["trap"] for h in hosts if h["trap"]} == {web.trap_host: "near"}
    assert any(s["generate"]["not_selected"].get("trap_throttled") for s in summaries)
    traps = crawl_status(crawl)["traps"]  # batchcrawl status shows the probable trap
    assert [(t["host"], t["trap"]) for t in traps] == [(web.trap_host, "near")]
    assert "probable traps" in [t.title for t in status_tables(crawl_status(crawl))]
