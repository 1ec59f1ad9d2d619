"""STAR budgets and BEAST delays (IRLbot §6): the budget and delay functions' invariants, caps
and delays at generate, the delay written by update and seen by the due-time index."""

from __future__ import annotations

import dataclasses
import datetime as dt

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.config import Config, GenerateSection
from batchcrawl.frontier.budget import DomainBudgets, beast_delay_s, star_budget
from batchcrawl.frontier.generate import select_bucket
from batchcrawl.frontier.indegree import domain_pairs
from batchcrawl.frontier.table import new_rows
from batchcrawl.urls import hash64_many, url_key

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


def make_table(rows: list[dict]) -> pa.Table:
    """Queued frontier rows due now, in the given breadth-first order."""
    urls = [r["url"] for r in rows]
    return new_rows(
        url_key=np.array([url_key(u) for u in urls], np.uint64), url=urls,
        host=[r["host"] for r in rows], domain=[r["domain"] for r in rows], depth=1, hops_out=0,
        discovered_round=np.zeros(len(rows), np.int32),
        discovered_seq=np.arange(len(rows), dtype=np.int64), status="queued", next_fetch_time=NOW,
    )  # fmt: skip


G = GenerateSection(
    budget="star", star_min_urls_per_domain=5, star_urls_per_linking_domain=3.0,
    star_max_urls_per_domain=200, beast_delay_s=60.0, beast_max_delay_s=3600.0,
)  # fmt: skip

degrees = st.lists(st.integers(0, 10_000), min_size=1, max_size=50)


@settings(deadline=None)
@given(degrees)
def test_star_budget_monotone_and_bounded(d):
    d = np.sort(np.array(d))
    b = star_budget(d, G)
    assert np.all(np.diff(b) >= 0)
    assert b.min() >= G.star_min_urls_per_domain and b.max() <= G.star_max_urls_per_domain
    assert star_budget(np.array([0]), G)[0] == G.star_min_urls_per_domain
    assert star_budget(np.array([2]), G)[0] == 5 + 6


@settings(deadline=None)
@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=50), st.integers(1, 10_000))
def test_beast_delay_monotone_bounded_exponential(excess, budget):
    e = np.sort(np.array(excess))
    w = beast_delay_s(e, np.full(len(e), budget), G)
    assert np.all(np.diff(w) >= 0)
    assert np.all(w >= G.beast_delay_s) and np.all(w <= G.beast_max_delay_s)
    # queue j holds 2**j budgets' worth: the wait doubles at 1, 3, 7 budgets over
    marks = np.array([0, budget, 3 * budget, 7 * budget])
    assert beast_delay_s(marks, np.full(4, budget), G).tolist() == [60.0, 120.0, 240.0, 480.0]


def test_domain_pairs_distinct_other_domains():
    edges = pa.table({
        "src_domain": ["a.test", "a.test", "a.test", "b.test", "c.test", None],
        "dst_domain": ["b.test", "b.test", "a.test", "b.test", "b.test", "b.test"],
    })  # fmt: skip
    t = domain_pairs(edges, 4)
    got = sorted(
        zip(t.column("src_domain").to_pylist(), t.column("dst_domain").to_pylist(), strict=True)
    )
    assert got == [("a.test", "b.test"), ("c.test", "b.test")]
    assert t.column("round").to_pylist() == [4, 4]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from(["a.test", "b.test", "c.example", "é.test"])),
            st.one_of(st.none(), st.sampled_from(["a.test", "b.test", "d.test", "c.example"])),
        ),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=4),
)
def test_domain_pairs_equal_the_distinct_pairs_in_python(rows, chunks):
    """The encoded pairs (dictionary codes, numpy unique) are the distinct pairs of other, known
    domains, whatever the chunking and nulls; each sorted by pair_key as hash64 of "src dst"."""
    size = max(1, -(-len(rows) // chunks))
    parts = [rows[i : i + size] for i in range(0, len(rows), size)] or [[]]
    edges = pa.concat_tables([
        pa.table({"src_domain": pa.array([s for s, _ in p], pa.string()),
                  "dst_domain": pa.array([d for _, d in p], pa.string())})
        for p in parts
    ])  # fmt: skip
    t = domain_pairs(edges, 7)
    want = sorted({(s, d) for s, d in rows if s is not None and d is not None and s != d})
    keys = hash64_many(f"{s} {d}" for s, d in want)
    want = [p for _, p in sorted(zip(keys, want, strict=True), key=lambda kp: kp[0])]
    got = list(zip(t.column("src_domain").to_pylist(), t.column("dst_domain").to_pylist(),
                   strict=True))  # fmt: skip
    assert got == want
    assert t.column("pair_key").to_pylist() == sorted(hash64_many(f"{s} {d}" for s, d in want))
    assert set(t.column("round").to_pylist()) <= {7}


def test_star_caps_by_indegree_and_beast_delays_the_rest():
    cfg = dataclasses.replace(Config(), generate=dataclasses.replace(G, max_urls_per_host=10_000))
    rows = [{"url": f"http://h{i}.farm.test/p{i}", "host": f"h{i}.farm.test", "domain": "farm.test"}
            for i in range(100)]  # fmt: skip
    rows += [{"url": f"http://www.good.test/{i}", "host": "www.good.test", "domain": "good.test"}
             for i in range(30)]  # fmt: skip
    table = make_table(rows)
    budgets = DomainBudgets.of(cfg, {"good.test": 10, "farm.test": 0})
    cands, counts, delayed = select_bucket(table, 3, cfg, NOW, budgets)
    per = dict(zip(*np.unique(cands.column("domain").to_pylist(), return_counts=True), strict=True))
    assert per == {"farm.test": 5, "good.test": 30}  # 5 + 3*0; min(5 + 3*10, ...) = 35 >= 30
    assert counts["capped_domain"] == 95 == delayed.num_rows
    farm_keys = set(table.filter(pa.compute.equal(table.column("domain"), "farm.test"))
                    .column("url_key").to_pylist())  # fmt: skip
    assert set(delayed.column("url_key").to_pylist()) <= farm_keys
    waits = delayed.column("delay_s").to_pylist()
    assert waits == sorted(waits) and waits[0] == 60.0 and waits[-1] == 60.0 * 2**4
    fixed = dataclasses.replace(cfg, generate=dataclasses.replace(cfg.generate, budget="fixed"))
    cands, counts, delayed = select_bucket(table, 3, fixed, NOW)
    assert cands.num_rows == 130 and delayed.num_rows == 0


def test_keyset_runs_are_compacted_past_max_runs(tmp_path):
    """Item 3: the insert-only sets (content, domainlinks) no longer grow one run per round."""
    from batchcrawl.config import to_toml
    from batchcrawl.frontier.indegree import DOMAINLINKS
    from batchcrawl.frontier.keyset import update_set
    from batchcrawl.frontier.runs import thread_mapper
    from batchcrawl.store.crawldir import CrawlDir

    cfg = Config().replace(frontier={"buckets": 1, "max_runs": 3, "compact_run_ratio": 100.0})
    crawl = CrawlDir.create(str(tmp_path / "c"), to_toml(cfg), buckets=1)
    seen = set()
    for r in range(1, 8):
        m = crawl.manifest()
        edges = pa.table({"src_domain": [f"s{r}.test", "s1.test"], "dst_domain": ["d.test"] * 2})
        done = update_set(crawl, m, DOMAINLINKS, m.generation + 1, domain_pairs(edges, r), cfg,
                          thread_mapper(1))  # fmt: skip
        seen |= {f"s{r}.test"}
        crawl.commit(m, {"domainlinks": done.listing}, {"step": "test"}, round=r)
        assert done.new.num_rows == 1  # ("s1.test", "d.test") is new once
        assert len(done.listing) <= 3  # a base plus at most max_runs - 1 runs
        rows = crawl.read_current("domainlinks", ["src_domain"]).column("src_domain").to_pylist()
        assert sorted(rows) == sorted(seen)
