"""Log-structured frontier buckets: after random sequences of updates and compactions, the merged
frontier, the SQL view and crawl.duckdb equal a plain-dict reference; gc drops superseded runs."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.config import Config, to_toml
from batchcrawl.frontier import runs
from batchcrawl.frontier.update import SEQ_BITS, update
from batchcrawl.store import schemas, sql
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.gc import gc

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
K = 3


def url(i: int) -> str:
    return f"http://h{i % 4}.test/p{i}"


def links_table(rnd: int, dsts: list[int]) -> pa.Table:
    from batchcrawl.urls import url_key

    rows = [
        {"round": rnd, "shard": 0, "seq": s, "src_url_key": 1, "dst_url_key": url_key(url(d)),
         "dst_url": url(d), "dst_host": f"h{d % 4}.test", "dst_domain": f"h{d % 4}.test",
         "depth": 1, "hops_out": 0, "tag": "a", "nofollow": False, "filter_reason": None}
        for s, d in enumerate(dsts)
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=schemas.schema("links"))


def fetched_table(rnd: int, done: list[int]) -> pa.Table:
    from batchcrawl.urls import url_key

    rows = [
        {"url_key": url_key(url(d)), "url": url(d), "url_host_name": f"h{d % 4}.test",
         "url_host_registered_domain": f"h{d % 4}.test", "fetch_time": NOW, "fetch_status": 200,
         "outcome": "ok", "depth": 1, "round": rnd, "shard": 0}
        for d in done
    ]  # fmt: skip
    return pa.Table.from_pylist(rows, schema=schemas.schema("fetched"))


rounds_st = st.lists(
    st.tuples(
        st.lists(st.integers(0, 40), max_size=25),  # link targets
        st.lists(st.integers(0, 40), max_size=10),  # fetched (known or linked ones apply)
        st.sampled_from(["none", "policy", "force"]),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=20, deadline=None)
@given(rounds=rounds_st)
def test_merged_frontier_equals_dict_reference(tmp_path_factory, rounds):
    from batchcrawl.urls import url_key

    cfg = Config().replace(frontier={"buckets": K, "max_runs": 3, "compact_run_ratio": 0.5})
    crawl = CrawlDir.create(str(tmp_path_factory.mktemp("c")), to_toml(cfg), K)
    ref: dict[int, tuple[str, int, int]] = {}  # url_key -> (status, discovered_round, seq)
    for rnd, (dsts, done, compaction) in enumerate(rounds, 1):
        m = crawl.manifest()
        for seq, d in enumerate(dsts):
            ref.setdefault(url_key(url(d)), ("queued", rnd, seq))
        entries, s = update(
            crawl, m, rnd, fetched_table(rnd, done), links_table(rnd, dsts), cfg, NOW
        )
        # fetch facts apply to URLs known before this round and to the rows this round's links
        # insert (frontier.update: a stream's shard fetches links to its own hosts before the
        # merge); a fetch of a URL neither known nor linked is dropped as unknown
        for d in done:
            k = url_key(url(d))
            if k in ref:
                ref[k] = ("fetched", *ref[k][1:])
        assert s["frontier_rows_after"] == len(ref)
        crawl.commit(m, {"frontier": entries}, s, round=rnd)
        if compaction != "none":
            runs.compact(crawl, cfg, force=compaction == "force")
        want = sorted((k, *v) for k, v in ref.items())
        merged = sorted(
            (r["url_key"], r["status"], r["discovered_round"], r["discovered_seq"])
            for _, t in runs.iter_buckets(crawl, crawl.manifest())
            for r in t.to_pylist()
        )
        assert merged == want
        view = sql.query(
            crawl, "SELECT url_key, status, discovered_round, discovered_seq FROM frontier"
        ).to_pylist()
        assert sorted(tuple(r.values()) for r in view) == want
        con = duckdb.connect(crawl.path(sql.DUCKDB_FILE), read_only=True)
        try:
            assert con.execute("SELECT count(*) FROM frontier").fetchone()[0] == len(want)
        finally:
            con.close()
    assert all(seq < 1 << SEQ_BITS for *_, seq in ref.values())


def test_update_writes_only_delta_and_gc_drops_superseded_runs(tmp_path):
    cfg = Config().replace(frontier={"buckets": K, "max_runs": 2, "compact_run_ratio": 100.0})
    crawl = CrawlDir.create(str(tmp_path / "c"), to_toml(cfg), K)
    m = crawl.manifest()
    entries, s = update(crawl, m, 1, None, links_table(1, list(range(30))), cfg, NOW)
    m = crawl.commit(m, {"frontier": entries}, s, round=1)
    old_runs = {e.path for e in m.tables["frontier"]}
    assert len(old_runs) == 3  # one run per bucket, no base yet
    entries, s = update(crawl, m, 2, None, links_table(2, [0, 1, 50]), cfg, NOW)
    assert s["rows_written"] == 1  # only the new URL; the other buckets are not rewritten
    # its bucket had one run: with this one it passes max_runs, so update writes a new base at
    # once instead of a second run for compaction to read back (runs.add_run with compact=True)
    assert s["buckets_compacted"] == 1
    m = crawl.commit(m, {"frontier": entries}, s, round=2)
    after = runs.bucket_files(m)
    assert sum(len(bf.runs) for bf in after) == 2 and sum(bf.base is not None for bf in after) == 1
    assert runs.compact(crawl, cfg)["buckets_compacted"] == 0  # nothing left past the thresholds
    gc(crawl, keep=1)
    files = {e.path for e in crawl.manifest().tables["frontier"]}
    for rel in old_runs - files:
        assert not crawl.fs.exists(crawl.path(rel))
    for rel in files:
        assert crawl.fs.exists(crawl.path(rel))
    assert sql.query(crawl, "SELECT count(*) AS n FROM frontier").column("n")[0].as_py() == 31
