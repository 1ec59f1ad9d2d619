"""update: status transitions over every (status, outcome) pair, and merging a round's fetch
results and links into the frontier (rows in = rows out + dropped, counted)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.config import Config, to_toml
from batchcrawl.frontier import runs
from batchcrawl.frontier.inject import inject
from batchcrawl.frontier.runs import bucket_files, iter_buckets
from batchcrawl.frontier.table import FrontierError
from batchcrawl.frontier.update import apply_outcomes, next_status, update
from batchcrawl.records import Outcome, UrlStatus
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.urls import bucket_ids, domain_of, host_of, url_key

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
NOW_MS = int(NOW.timestamp() * 1000)

# outcome -> (status, reason given detail "D", retries rule) written out independently of the code.
EXPECTED = {
    Outcome.OK: ("fetched", None, "reset"),
    Outcome.TRUNCATED: ("fetched", "truncated", "reset"),
    Outcome.NOT_MODIFIED: ("fetched", "not_modified", "reset"),
    Outcome.REDIRECT: ("redirect", "D", "reset"),
    Outcome.REDIRECT_LOOP: ("gone", "redirect_loop:D", "reset"),
    Outcome.GONE: ("gone", "D", "reset"),
    Outcome.HTTP_ERROR: ("gone", "D", "reset"),
    Outcome.SERVER_ERROR: ("error", "D", "inc"),
    Outcome.NETWORK_ERROR: ("error", "D", "inc"),
    Outcome.DNS_ERROR: ("error", "D", "inc"),
    Outcome.ROBOTS_UNAVAILABLE: ("queued", "robots_unavailable", "keep"),  # a host state
    Outcome.HOST_UNREACHABLE: ("queued", "host_unreachable", "keep"),  # a host state too
    Outcome.RATE_LIMITED: ("queued", "rate_limited", "keep"),  # and so is this
    Outcome.ROBOTS_DENIED: ("robots_denied", None, "keep"),
    Outcome.REFUSED: ("refused", "D", "keep"),
    Outcome.NOT_FETCHED: ("queued", None, "keep"),
}


@pytest.mark.parametrize("status", list(UrlStatus))
@pytest.mark.parametrize("outcome", list(Outcome))
def test_next_status_every_pair(status, outcome):
    assert set(EXPECTED) == set(Outcome)
    want_status, want_reason, rule = EXPECTED[outcome]
    for retries in (0, 1, 3):
        got = next_status(status.value, outcome.value, retries, 3, detail="D")
        if rule == "inc" and retries + 1 > 3:
            assert got == ("gone", "max_retries:D", retries + 1)
        else:
            want_retries = {"reset": 0, "inc": retries + 1, "keep": retries}[rule]
            assert got == (want_status, want_reason, want_retries)


def test_next_status_rejects_unknown_values():
    with pytest.raises(ValueError):
        next_status("queued", "exploded", 0, 3)
    with pytest.raises(ValueError):
        next_status("lost", "ok", 0, 3)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(list(UrlStatus)),
            st.sampled_from(list(Outcome)),
            st.integers(0, 5),
            st.sampled_from([None, "404", "timeout"]),
        ),
        max_size=40,
    )
)
def test_apply_outcomes_is_next_status_vectorized(rows):
    s, o, r, d = (list(c) for c in zip(*rows, strict=True)) if rows else ([], [], [], [])
    got = apply_outcomes(
        pa.array(s, pa.string()),
        pa.array(o, pa.string()),
        pa.array(r, pa.int32()),
        pa.array(d, pa.string()),
        2,
    )
    want = [next_status(*row[:3], 2, detail=row[3]) for row in rows]
    assert list(zip(*(a.to_pylist() for a in got), strict=True)) == want


def table(name: str, rows: list[dict]) -> pa.Table:
    schema = schemas.schema(name)
    return pa.Table.from_pylist(rows, schema=schema) if rows else schema.empty_table()


def fetched_row(url: str, outcome: str, *, status=None, error=None, t=0, digest=None) -> dict:
    host = host_of(url)
    return {
        "url_key": url_key(url),
        "url": url,
        "url_host_name": host,
        "url_host_registered_domain": domain_of(host),
        "fetch_time": NOW + dt.timedelta(seconds=t),
        "fetch_status": status,
        "outcome": outcome,
        "error": error,
        "content_digest": digest,
        "depth": 0,
        "round": 1,
        "shard": 0,
    }


def link_row(
    src: str, dst: str, *, shard=0, seq=0, rnd=1, tag="a", nofollow=False, reason=None, depth=1
) -> dict:
    host = host_of(dst)
    return {
        "round": rnd,
        "shard": shard,
        "seq": seq,
        "src_url_key": url_key(src),
        "dst_url_key": url_key(dst),
        "dst_url": dst,
        "dst_host": host,
        "dst_domain": domain_of(host),
        "depth": depth,
        "hops_out": 0,
        "tag": tag,
        "nofollow": nofollow,
        "filter_reason": reason,
    }


@pytest.fixture
def crawl(tmp_path):
    cfg = Config().replace(
        frontier={"buckets": 4, "max_retries": 2, "retry_backoff_s": 10.0},
        robots={"retry_after_s": 60.0},
    )
    c = CrawlDir.create(str(tmp_path / "c"), to_toml(cfg), 4)
    inject(c, cfg, [f"http://s{i}.test/" for i in range(8)])
    return c, cfg


def listed(crawl: CrawlDir, entries):
    """The current manifest with ``entries`` as its (uncommitted) frontier listing."""
    return dataclasses.replace(crawl.manifest(), tables={"frontier": tuple(entries)})


def rows_by_url(crawl: CrawlDir, entries) -> dict[str, dict]:
    """The merged frontier (base + runs, newest wins) of an update's listing."""
    rows = [r for _, t in iter_buckets(crawl, listed(crawl, entries)) for r in t.to_pylist()]
    return {r["url"]: r for r in rows}


def test_a_url_given_back_by_an_unreachable_host_waits_for_the_hold_uncharged(crawl):
    """host_unreachable (fetch.holds): queued again with its retries kept, due at the end of the
    host's hold (the row's retry_after_s), or politeness.unreachable_backoff_s without one."""
    c, cfg = crawl
    cfg = cfg.replace(politeness={"unreachable_backoff_s": 90.0})
    given = [fetched_row(f"http://s{i}.test/", "host_unreachable") for i in (1, 2)]
    given[0]["retry_after_s"] = 30.5
    tried = fetched_row("http://s3.test/", "network_error", error="connect")
    entries, _ = update(c, c.manifest(), 1, table("fetched", [*given, tried]), table("links", []),
                        cfg, NOW)  # fmt: skip
    rows = rows_by_url(c, entries)
    got = {u: (rows[u]["status"], rows[u]["reason"], rows[u]["retries"], rows[u]["next_fetch_time"])
           for u in ("http://s1.test/", "http://s2.test/")}  # fmt: skip
    at = lambda s: (NOW + dt.timedelta(seconds=s)).replace(tzinfo=None)  # noqa: E731
    assert got == {"http://s1.test/": ("queued", "host_unreachable", 0, at(30.5)),
                   "http://s2.test/": ("queued", "host_unreachable", 0, at(90.0))}  # fmt: skip
    s3 = rows["http://s3.test/"]  # the fetch that got no answer is charged
    assert (s3["status"], s3["reason"], s3["retries"]) == ("error", "connect", 1)


def test_update_round(crawl):
    c, cfg = crawl
    m = c.manifest()
    fetched = table(
        "fetched",
        [
            fetched_row("http://s0.test/", "ok", status=200, digest="sha1:AAA"),
            fetched_row("http://s1.test/", "gone", status=404),
            fetched_row("http://s2.test/", "network_error", error="timeout", t=1),
            fetched_row("http://s2.test/", "ok", status=200, t=0),  # earlier attempt: superseded
            fetched_row("http://s3.test/", "not_fetched"),
            fetched_row("http://s4.test/", "robots_unavailable"),
            fetched_row("http://s5.test/", "redirect", status=301),
            fetched_row("http://unknown.test/", "ok", status=200),
        ],
    )
    links = table(
        "links",
        [
            link_row("http://s0.test/", "http://s0.test/a", shard=1, seq=5),
            link_row(
                "http://s1.test/", "http://s0.test/a", shard=0, seq=9
            ),  # smaller (0<<40|9): wins
            link_row("http://s0.test/", "http://s1.test/", seq=1),  # known
            link_row("http://s0.test/", "http://s0.test/nf", seq=2, nofollow=True),
            link_row("http://s0.test/", "http://out.test/", seq=3, reason="out_of_scope"),
            link_row("http://s5.test/", "http://s5.test/new", seq=4, tag="redirect", depth=0),
        ],
    )
    entries, s = update(c, m, 1, fetched, links, cfg, NOW)
    assert len(bucket_files(listed(c, entries))) == 4
    f, lk = s["fetched"], s["links"]
    assert f["in"] == 8 and f["in"] == f["applied"] + f["superseded"] + f["unknown"]
    assert (f["superseded"], f["unknown"]) == (1, 1)
    assert lk["in"] == 6
    assert (
        lk["in"]
        == lk["nofollow"]
        + lk["duplicate"]
        + lk["known"]
        + lk["new_queued"]
        + lk["new_filtered:out_of_scope"]
    )
    assert s["frontier_rows_after"] == s["frontier_rows_before"] + 3
    rows = rows_by_url(c, entries)
    assert len(rows) == 11
    s0, s1, s2 = rows["http://s0.test/"], rows["http://s1.test/"], rows["http://s2.test/"]
    assert (s0["status"], s0["fetch_status"], s0["content_digest"]) == ("fetched", 200, "sha1:AAA")
    assert (s1["status"], s1["reason"]) == ("gone", "404")
    assert (s2["status"], s2["reason"], s2["retries"]) == ("error", "timeout", 1)
    assert s2["next_fetch_time"] == (NOW + dt.timedelta(seconds=10)).replace(tzinfo=None)
    assert rows["http://s3.test/"]["status"] == "queued"
    assert rows["http://s3.test/"]["retries"] == 0
    s4 = rows["http://s4.test/"]
    assert (s4["status"], s4["retries"]) == ("queued", 0)  # the host was held: no retry counted
    assert s4["next_fetch_time"] == (NOW + dt.timedelta(seconds=60)).replace(tzinfo=None)
    assert rows["http://s5.test/"]["status"] == "redirect"
    a = rows["http://s0.test/a"]
    assert (a["discovered_round"], a["discovered_seq"], a["depth"]) == (1, 9, 1)
    assert a["source_url_key"] == url_key("http://s1.test/")
    assert rows["http://out.test/"]["status"] == "filtered"
    assert rows["http://out.test/"]["reason"] == "out_of_scope"
    red = rows["http://s5.test/new"]
    assert red["source_url_key"] == url_key("http://s5.test/") and red["status"] == "queued"
    assert "http://s0.test/nf" not in rows


def test_backoff_doubles_then_gone(crawl):
    c, cfg = crawl
    m = c.manifest()
    url = "http://s6.test/"
    for attempt, want in enumerate([("error", 10), ("error", 20), ("gone", None)], 1):
        fetched = table("fetched", [fetched_row(url, "server_error", status=503)])
        entries, _ = update(c, m, attempt, fetched, None, cfg, NOW)
        m = c.commit(m, {"frontier": entries}, {"step": "test"}, round=attempt)
        row = rows_by_url(c, entries)[url]
        assert row["status"] == want[0]
        if want[1] is None:  # gone: checked again after recrawl.gone_interval_s
            gone_at = NOW + dt.timedelta(seconds=cfg.recrawl.gone_interval_s)
            assert row["next_fetch_time"] == gone_at.replace(tzinfo=None)
            assert row["reason"] == "max_retries:503"
        else:
            assert row["next_fetch_time"] == (NOW + dt.timedelta(seconds=want[1])).replace(
                tzinfo=None
            )


def test_idle_buckets_keep_their_file(crawl):
    c, cfg = crawl
    m = c.manifest()
    url = "http://s0.test/"
    fetched = table("fetched", [fetched_row(url, "ok", status=200)])
    entries, s = update(c, m, 1, fetched, None, cfg, NOW)
    old, new = bucket_files(m), bucket_files(listed(c, entries))
    changed = [b for b in range(4) if new[b] != old[b]]
    assert changed == [url_key(url) % 4]
    assert s["buckets_rewritten"] == 1


def test_link_seq_out_of_range(crawl):
    c, cfg = crawl
    links = table("links", [link_row("http://a.test/", "http://b.test/", seq=1 << 40)])
    with pytest.raises(FrontierError, match="seq"):
        update(c, c.manifest(), 1, None, links, cfg, NOW)


def test_update_of_some_buckets_equals_the_full_update_there(crawl):
    # a stream's micro-batch updates only the buckets it touched (stream.Stream.micro_batch)
    c, cfg = crawl
    m = c.manifest()
    urls = ["http://s0.test/", "http://s1.test/", "http://s2.test/", "http://s3.test/"]
    fetched = table("fetched", [fetched_row(u, "ok", status=200) for u in urls])

    def bucket_of(key: int) -> int:
        return int(bucket_ids(np.array([key], np.uint64), 4)[0])

    bucket = {u: bucket_of(url_key(u)) for u in urls}
    want = bucket[urls[0]]
    part = update(c, m, 1, fetched, None, cfg, NOW, buckets=[want])
    assert [bf.bucket for bf in part.buckets] == [want]
    inside = [u for u in urls if bucket[u] == want]
    assert part.summary.to_json()["fetched"]["in"] == len(inside) < len(urls)
    some = {bf.bucket: bf for bf in bucket_files(m)} | {bf.bucket: bf for bf in part.buckets}
    got = rows_by_url(c, runs.frontier_listing(some[b] for b in sorted(some)))
    full = rows_by_url(c, update(c, m, 1, fetched, None, cfg, NOW).listing)

    def of_bucket(rows):
        return {u: r for u, r in rows.items() if bucket_of(r["url_key"]) == want}

    assert of_bucket(got) == of_bucket(full) and of_bucket(got)
    assert all(got[u]["status"] == "queued" for u in urls if bucket[u] != want)
    with pytest.raises(FrontierError, match="buckets"):
        update(c, m, 1, fetched, None, cfg, NOW, buckets=[4])


def test_sitemap_lastmod_after_the_capture_makes_a_fetched_url_due(crawl):
    """A link tagged sitemap with a lastmod later than the last capture: due now; an older one and
    a plain link change nothing (issue 12 item 4, update side)."""
    c, cfg = crawl
    m = c.manifest()
    fresh, stale = "http://s0.test/", "http://s1.test/"
    fetched = table(
        "fetched", [fetched_row(fresh, "ok", status=200), fetched_row(stale, "ok", status=200)]
    )
    entries, _ = update(c, m, 1, fetched, None, cfg, NOW)
    m = c.commit(m, {"frontier": entries}, {"step": "test"}, round=1)
    later = NOW + dt.timedelta(days=2)
    rows = [link_row("http://s9.test/sitemap.xml", u, seq=i, rnd=2, tag="sitemap") for i, u in
            enumerate([fresh, stale])]  # fmt: skip
    rows[0]["lastmod"] = NOW + dt.timedelta(hours=1)
    rows[1]["lastmod"] = NOW - dt.timedelta(hours=1)
    entries, summary = update(c, m, 2, None, table("links", rows), cfg, later)
    got = rows_by_url(c, entries)
    assert got[fresh]["next_fetch_time"] == later.replace(tzinfo=None)
    assert got[stale]["next_fetch_time"] == (NOW + dt.timedelta(days=30)).replace(tzinfo=None)
    assert summary["lastmod_due"] == 1


def test_a_fetch_of_a_url_first_linked_in_the_same_batch_applies_to_its_new_row(crawl):
    # a stream shard fetched a link it found itself (stream.direct_links) before the merge: the
    # link inserts the row, the fetch is applied to it, not dropped as unknown
    c, cfg = crawl
    fetched = table("fetched", [fetched_row("http://s0.test/new", "ok", status=200, digest="d:1"),
                                fetched_row("http://elsewhere.test/", "ok", status=200)])  # fmt: skip
    links = table("links", [link_row("http://s0.test/", "http://s0.test/new", seq=1, depth=1)])
    entries, s = update(c, c.manifest(), 1, fetched, links, cfg, NOW)
    f = s["fetched"]
    assert (f["in"], f["applied"], f["unknown"]) == (2, 1, 1)  # no link: still unknown
    new = rows_by_url(c, entries)["http://s0.test/new"]
    assert (new["status"], new["fetch_status"], new["content_digest"]) == ("fetched", 200, "d:1")
    assert (new["depth"], new["discovered_round"], new["lease_round"]) == (1, 1, None)
    assert new["next_fetch_time"] > NOW.replace(tzinfo=None)  # not due again
    assert "http://elsewhere.test/" not in rows_by_url(c, entries)
