"""The due-time index: generate through it selects exactly what a full scan of the merged frontier
selects, after random sequences of updates (every kind of outcome), re-filters and compactions;
a row a newer run changed is never selected from an older file's index; gc keeps the indexes."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.config import Config, to_toml
from batchcrawl.frontier import due, runs
from batchcrawl.frontier.generate import SELECT_COLUMNS, select_bucket, select_files
from batchcrawl.frontier.update import update
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.gc import gc
from batchcrawl.urls import url_key

T0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
K = 3
HOUR = dt.timedelta(hours=1)


def url(i: int) -> str:
    return f"http://h{i % 5}.test/p{i}"


def links_table(rnd: int, dsts: list[int]) -> pa.Table:
    rows = [
        {"round": rnd, "shard": 0, "seq": s, "src_url_key": 1, "dst_url_key": url_key(url(d)),
         "dst_url": url(d), "dst_host": f"h{d % 5}.test", "dst_domain": f"h{d % 5}.test",
         "depth": 1, "hops_out": 0, "tag": "a", "nofollow": False,
         "filter_reason": "max_depth" if d % 7 == 6 else None}
        for s, d in enumerate(dsts)
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=schemas.schema("links"))


OUTCOMES = {
    "ok": (200, None),
    "server_error": (503, None),
    "network_error": (None, "timeout"),
    "not_fetched": (None, None),
    "robots_unavailable": (None, None),
    "host_unreachable": (None, None),
    "rate_limited": (None, None),
    "gone": (404, None),
    "not_modified": (304, None),
}


def fetched_table(rnd: int, when: dt.datetime, done: list[tuple[int, str]]) -> pa.Table:
    rows = [
        {"url_key": url_key(url(d)), "url": url(d), "url_host_name": f"h{d % 5}.test",
         "url_host_registered_domain": f"h{d % 5}.test", "fetch_time": when,
         "fetch_status": OUTCOMES[o][0], "error": OUTCOMES[o][1], "outcome": o, "depth": 1,
         "round": rnd, "shard": 0}
        for d, o in done
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=schemas.schema("fetched"))


def refiltered_table(keys: list[int]) -> pa.Table:
    return pa.table(
        {
            "url_key": pa.array([url_key(url(d)) for d in keys], pa.uint64()),
            "reason": pa.array(["deny_host"] * len(keys), pa.string()),
        }
    )


def full_scan(crawl: CrawlDir, bf: runs.BucketFiles, rnd: int, cfg: Config, now):
    """Reference: the whole merged bucket, selected with the same rules."""
    table = runs.read_bucket(crawl, bf, SELECT_COLUMNS)
    cands, counts, _ = select_bucket(table, rnd, cfg, now)
    for k in [k for k in counts if k.startswith("status:")]:
        counts["not_due"] += counts.pop(k)
    return table.num_rows, cands, counts


rounds_st = st.lists(
    st.tuples(
        st.lists(st.integers(0, 40), max_size=20),  # link targets
        st.lists(st.tuples(st.integers(0, 40), st.sampled_from(sorted(OUTCOMES))), max_size=12),
        st.lists(st.integers(0, 40), max_size=3),  # re-filtered at generate
        st.sampled_from(["none", "policy", "force"]),
        st.integers(-2, 30),  # generate at the round's time + this many hours
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=25, deadline=None)
@given(rounds=rounds_st)
def test_generate_via_index_equals_full_scan(tmp_path_factory, rounds):
    cfg = Config().replace(
        frontier={"buckets": K, "max_runs": 3, "compact_run_ratio": 0.5, "retry_backoff_s": 3600},
        generate={"max_urls_per_host": 4, "max_urls_per_round": 12},
        robots={"retry_after_s": 7200},
        # fetched and gone rows come due again within the test's hours (the refetch rule)
        recrawl={"policy": "adaptive", "interval_s": 10 * 3600, "min_interval_s": 3600,
                 "gone_interval_s": 20 * 3600},
    )  # fmt: skip
    crawl = CrawlDir.create(str(tmp_path_factory.mktemp("c")), to_toml(cfg), K)
    for rnd, (dsts, done, refilter, compaction, later) in enumerate(rounds, 1):
        now = T0 + rnd * 6 * HOUR
        m = crawl.manifest()
        entries, s = update(
            crawl, m, rnd, fetched_table(rnd, now, done), links_table(rnd, dsts), cfg, now,
            refiltered=refiltered_table(refilter),
        )  # fmt: skip
        crawl.commit(m, {"frontier": entries}, s, round=rnd)
        if compaction != "none":
            runs.compact(crawl, cfg, force=compaction == "force")
        at = now + later * HOUR
        for bf in runs.bucket_files(crawl.manifest()):
            n, cands, counts, _ = select_files(crawl, bf, rnd + 1, cfg, at)
            n_ref, cands_ref, counts_ref = full_scan(crawl, bf, rnd + 1, cfg, at)
            assert n == n_ref
            assert cands.to_pylist() == cands_ref.to_pylist()
            assert +counts == +counts_ref


def test_index_entry_superseded_by_a_newer_run_is_not_selected(tmp_path):
    cfg = Config().replace(frontier={"buckets": 1, "max_runs": 100, "compact_run_ratio": 100.0})
    crawl = CrawlDir.create(str(tmp_path / "c"), to_toml(cfg), 1)
    m = crawl.manifest()
    entries, s = update(crawl, m, 1, None, links_table(1, [1, 2, 3]), cfg, T0)
    crawl.commit(m, {"frontier": entries}, s, round=1)
    runs.compact(crawl, cfg, force=True)  # the three URLs are due in the base's index
    m = crawl.manifest()
    done = fetched_table(2, T0, [(1, "ok"), (2, "server_error")])
    entries, s = update(crawl, m, 2, done, None, cfg, T0)
    crawl.commit(m, {"frontier": entries}, s, round=2)
    (bf,) = runs.bucket_files(crawl.manifest())
    assert bf.base is not None and len(bf.runs) == 1
    _, cands, counts, _ = select_files(crawl, bf, 3, cfg, T0 + HOUR / 2)
    # p1 fetched (due again in 30 days), p2 backs off until T0 + 1 h: only p3 is due at T0 + 30 min
    assert cands.column("url").to_pylist() == [url(3)]
    assert counts["not_due"] == 2
    _, cands, _, _ = select_files(crawl, bf, 3, cfg, T0 + 3 * HOUR)
    assert sorted(cands.column("url").to_pylist()) == [url(2), url(3)]


def test_due_time_rule():
    t = pa.table(
        {
            "status": ["queued", "error", "queued", "fetched", "gone", "fetched", "gone",
                       "filtered", "redirect"],
            "next_fetch_time": pa.array([5, 9, None, 7, 8, None, None, 3, 4], pa.int64()).cast(
                pa.timestamp("ms")
            ),
        }
    )  # fmt: skip
    got = due.due_time(t).cast(pa.int64()).to_pylist()
    # queued/error: due from the time (null: always); fetched/gone: only when the schedule set one
    assert got == [5, 9, 0, 7, 8, None, None, None, None]


def test_gc_keeps_the_indexes_of_kept_files_and_drops_the_rest(tmp_path):
    cfg = Config().replace(frontier={"buckets": 2, "max_runs": 2, "compact_run_ratio": 100.0})
    crawl = CrawlDir.create(str(tmp_path / "c"), to_toml(cfg), 2)
    for rnd in (1, 2, 3):
        m = crawl.manifest()
        entries, s = update(crawl, m, rnd, None, links_table(rnd, list(range(rnd * 5))), cfg, T0)
        crawl.commit(m, {"frontier": entries}, s, round=rnd)
    runs.compact(crawl, cfg, force=True)
    gc(crawl, keep=1, tmp_min_age_s=0)
    m = crawl.manifest()
    index_files = m.side_files("frontier")
    assert index_files and len(index_files) == len(m.files("frontier"))
    on_disk = {
        p[len(crawl.root) + 1 :] for p in crawl.fs.find(crawl.path("frontier")) if "due" in p
    }
    assert on_disk == set(index_files)
    rows = np.sum([e.rows for e in m.tables["frontier"]])
    assert rows == 15
