"""inject: seeds into a new or existing crawl, bad lines, duplicates, filtered seeds."""

from __future__ import annotations

import pyarrow as pa
import pytest

from batchcrawl.config import Config, to_toml
from batchcrawl.frontier.inject import MAX_BAD_LINES_LISTED, filtered_text, inject
from batchcrawl.frontier.runs import bucket_files, read_bucket
from batchcrawl.frontier.table import seed_scope
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.urls import bucket_of


def make_crawl(tmp_path, buckets: int = 4, **overrides) -> tuple[CrawlDir, Config]:
    cfg = Config().replace(frontier={"buckets": buckets}, **overrides)
    return CrawlDir.create(str(tmp_path / "crawl"), to_toml(cfg), buckets), cfg


def frontier_rows(crawl: CrawlDir) -> dict[str, dict]:
    rows = crawl.read_current("frontier").to_pylist()
    return {r["url"]: r for r in rows}


SEEDS = """# my seeds
http://a.test/

HTTP://A.test:80/#frag
https://b.test/x
ftp://nope.test/
http://a.test/two words
https://c.test/big.zip
"""


def test_inject_new_crawl(tmp_path):
    crawl, cfg = make_crawl(tmp_path)
    s = inject(crawl, cfg, SEEDS.splitlines(), source="seeds.txt")
    assert s["lines"] == 8
    assert (
        s["lines"]
        == s["skipped"] + s["bad_lines"] + s["duplicates"] + s["seeds_known"] + s["seeds_new"]
    )
    assert s["seeds_new"] == s["queued"] + sum(s["filtered"].values())
    assert (s["skipped"], s["bad_lines"], s["duplicates"], s["seeds_new"]) == (2, 2, 1, 3)
    assert [b["line"] for b in s["bad_line_list"]] == [6, 7]
    assert s["filtered"] == {"extension": 1}
    m = crawl.manifest()
    assert m.generation == 1 and m.summary["step"] == "inject"
    assert len(bucket_files(m)) == 4
    rows = frontier_rows(crawl)
    assert set(rows) == {"http://a.test/", "https://b.test/x", "https://c.test/big.zip"}
    a, b = rows["http://a.test/"], rows["https://b.test/x"]
    assert (a["depth"], a["discovered_round"], a["status"], a["source_url_key"]) == (
        0,
        0,
        "queued",
        None,
    )
    assert a["discovered_seq"] < b["discovered_seq"]  # line order
    assert rows["https://c.test/big.zip"]["status"] == "filtered"
    assert rows["https://c.test/big.zip"]["reason"] == "extension"
    for b_, entry in enumerate(bucket_files(m)):  # each bucket sorted by key, in its bucket
        keys = read_bucket(crawl, entry).column("url_key").to_pylist()
        assert keys == sorted(keys) and all(k % 4 == b_ for k in keys)
    assert seed_scope(crawl, m) == ({"a.test", "b.test", "c.test"}, {"a.test", "b.test", "c.test"})


def test_inject_existing_keeps_known_state(tmp_path):
    crawl, cfg = make_crawl(tmp_path)
    inject(crawl, cfg, ["http://a.test/", "http://b.test/"])
    before = frontier_rows(crawl)
    s = inject(crawl, cfg, ["http://b.test/", "http://d.test/"], source="more")
    assert (s["seeds_known"], s["seeds_new"]) == (1, 1)
    after = frontier_rows(crawl)
    assert after["http://b.test/"] == before["http://b.test/"]
    assert after["http://d.test/"]["discovered_seq"] > before["http://b.test/"]["discovered_seq"]
    assert crawl.manifest().rows("frontier") == 3


def test_bad_lines_never_stop_and_are_capped(tmp_path):
    crawl, cfg = make_crawl(tmp_path, buckets=2)
    lines = ["not a url at all"] * 150 + ["mailto:x@y.test"] * 10 + ["http://ok.test/"]
    s = inject(crawl, cfg, lines)
    assert s["bad_lines"] == 160
    assert len(s["bad_line_list"]) == MAX_BAD_LINES_LISTED
    assert s["seeds_new"] == 1


def test_a_seed_line_without_scheme_is_told_to_add_it(tmp_path):
    """Issue: `` h0003.test:38427/x`` was reported as ``has scheme 'h0003.test'``."""
    crawl, cfg = make_crawl(tmp_path, buckets=1)
    s = inject(crawl, cfg, ["http://ok.test/", " h0003.test:38427/x"])
    assert s["bad_line_list"] == [{"line": 2, "reason": "URL 'h0003.test:38427/x' is not an "
                                   "absolute http(s) URL: it has no scheme; write it as "
                                   "http://h0003.test:38427/x"}]  # fmt: skip


def test_seeds_dropped_by_the_url_filters_are_named_for_the_stderr_summary(tmp_path):
    """A 10,024-character seed dropped by ``filters.max_url_length`` was only in the JSON
    (``"filtered": {"url_length": 1}``); the text for the stderr line says how many and why."""
    crawl, cfg = make_crawl(tmp_path, buckets=1)
    long_url = "http://long.test/" + "a" * 10_007
    assert len(long_url) == 10_024
    s = inject(crawl, cfg, ["http://ok.test/", long_url, "not a url"])
    assert s["filtered"] == {"url_length": 1} and s["bad_lines"] == 1
    assert filtered_text(s) == "1 dropped by the URL filters (url_length 1)"
    many = {**s, "filtered": {"url_length": 1200, "deny_host": 3}}
    assert filtered_text(many) == "1,203 dropped by the URL filters (deny_host 3, url_length 1,200)"
    assert filtered_text(inject(crawl, cfg, ["http://ok2.test/"])) == ""


def test_seeds_dropped_by_the_url_filters_are_listed_with_their_line_numbers(tmp_path):
    """The summary names the new seeds the filters dropped (line, reason), like the bad lines;
    a filtered seed injected again is known, not listed again."""
    crawl, cfg = make_crawl(tmp_path, buckets=2)
    long_url = "http://long.test/" + "a" * 10_007
    lines = ["", "http://ok.test/", long_url, "not a url", long_url + "b", long_url]
    s = inject(crawl, cfg, lines)
    assert s["filtered_line_list"] == [
        {"line": 3, "reason": "url_length"},
        {"line": 5, "reason": "url_length"},
    ]
    again = inject(crawl, cfg, [long_url])
    assert again["seeds_known"] == 1 and again["filtered_line_list"] == []


@pytest.mark.parametrize("scope", ["host", "domain"])
def test_seed_scope_includes_new_seeds(tmp_path, scope):
    crawl, cfg = make_crawl(tmp_path, filters={"seed_scope": scope})
    s = inject(crawl, cfg, ["http://x.a.test/", "http://y.b.test/"])
    assert s["queued"] == 2 and s["filtered"] == {}


def test_refetch_of_one_known_and_one_new_url_counts_one_new(tmp_path):
    """Issue 34: ``inject --refetch`` with one known and one new URL reported ``seeds_new: 2``;
    the known one is a refetch, not a new seed, and the counts still add up to the lines."""
    crawl, cfg = make_crawl(tmp_path)
    inject(crawl, cfg, ["http://a.test/"])
    summary = inject(crawl, cfg, ["http://a.test/", "http://b.test/"], refetch=True)
    assert (summary["seeds_new"], summary["seeds_known"]) == (1, 1)
    assert summary["lines"] == (summary["skipped"] + summary["bad_lines"] + summary["duplicates"]
                                + summary["seeds_known"] + summary["seeds_new"])  # fmt: skip


def mark(crawl: CrawlDir, buckets: int, changes: dict[str, dict[str, object]]) -> None:
    """Commit the current frontier again with ``changes`` (``{url: {column: value}}``) applied,
    as a round leaves a URL (its status, reason, retries, due time, lease)."""
    manifest = crawl.manifest()
    rows = crawl.read_current("frontier").to_pylist()
    for r in rows:
        r.update(changes.get(r["url"], {}))
    gen = manifest.generation + 1
    files = [
        crawl.write_table(
            "frontier",
            f"frontier/gen={gen}/bucket={b:03d}.parquet",
            pa.Table.from_pylist(
                [r for r in rows if bucket_of(r["url_key"], buckets) == b],
                schema=schemas.schema("frontier"),
            ),
        )
        for b in range(buckets)
    ]
    crawl.commit(manifest, {"frontier": files}, {"step": "test"})


def _mark(crawl: CrawlDir, buckets: int, statuses: dict[str, tuple[str, str | None]]) -> None:
    """:func:`mark` with ``statuses`` (``{url: (status, reason)}``) set and those URLs never due
    by time, as a round leaves a URL the address policy or robots.txt kept from being fetched."""
    mark(crawl, buckets, {u: {"status": s, "reason": why, "next_fetch_time": None}
                          for u, (s, why) in statuses.items()})  # fmt: skip


def test_refetch_queues_seeds_the_address_policy_or_robots_kept_from_being_fetched(tmp_path):
    """A fresh-user trial: a loopback seed refused by the default address policy stayed
    ``refused`` for good, since ``inject --refetch`` covered only fetched/gone/error/queued, so
    widening ``network.allow_networks`` left nothing due. Now a refetch queues ``refused`` and
    ``robots_denied`` seeds again (reason cleared, due now); a ``filtered`` one stays (the
    filters decide, and a change of them refilters the frontier)."""
    crawl, cfg = make_crawl(tmp_path)
    urls = ["http://a.test/", "http://b.test/", "http://c.test/", "http://d.test/"]
    inject(crawl, cfg, urls)
    _mark(crawl, 4, {
        urls[0]: ("refused", "127.0.0.1 is inside denied network 127.0.0.0/8"),
        urls[1]: ("robots_denied", None),
        urls[2]: ("filtered", "url_length"),
    })  # fmt: skip
    plain = inject(crawl, cfg, urls)  # without --refetch: known seeds, nothing changes
    assert plain["refetch"] == 0 and frontier_rows(crawl)[urls[0]]["status"] == "refused"

    summary = inject(crawl, cfg, urls, refetch=True, clock=lambda: 1_700_000_000.0)
    rows = frontier_rows(crawl)
    assert summary["refetch"] == 3  # the refused, the robots-denied and the queued seed
    for url in urls[:2]:
        assert rows[url]["status"] == "queued" and rows[url]["reason"] is None
        assert rows[url]["next_fetch_time"].timestamp() == 1_700_000_000.0
    assert (rows[urls[2]]["status"], rows[urls[2]]["reason"]) == ("filtered", "url_length")
    assert rows[urls[3]]["status"] == "queued"
