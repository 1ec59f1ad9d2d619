"""The golden fetch crawl (tests/golden_fetch.py): a crawl of the small sample web by one fetch
worker on a fixed wall clock gives the committed ``fetched``, ``links``, ``edges`` and ``hosts``
rows, counters and WARC records (normalized as tests/golden/README.md says)."""

from __future__ import annotations

import json

import pytest
from golden_fetch import GOLDEN, crawl

pytestmark = pytest.mark.slow


def _first_difference(got: list, want: list) -> str:
    extra = [r for r in got if r not in want][:3]
    missing = [r for r in want if r not in got][:3]
    return f"{len(got)} rows, {len(want)} golden; new: {extra}; missing: {missing}"


def test_golden_crawl_of_the_sample_web_is_unchanged(tmp_path):
    want = json.loads(GOLDEN.read_text())
    got = json.loads(json.dumps(crawl(tmp_path), sort_keys=True, default=str))
    assert got.keys() == want.keys()
    for table in sorted(want):
        assert got[table] == want[table], f"{table}: " + _first_difference(got[table], want[table])


def test_the_comparison_can_fail(tmp_path):
    """Control: the normalized data does carry the crawl's content (a changed row is seen)."""
    want = json.loads(GOLDEN.read_text())
    changed = json.loads(json.dumps(want))
    changed["fetched"][0]["outcome"] = "gone"
    assert changed != want
    assert any(r["outcome"] == "ok" for r in want["fetched"])
    assert any(r["type"] == "revisit" for r in want["warc"])
    assert len(want["links"]) == len(want["edges"]) > 100
