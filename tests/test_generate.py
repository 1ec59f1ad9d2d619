"""generate: due rules, caps (exact, against a one-pass reference), routing, ordering, leases,
re-filtering, and every row counted (rows in = selected + not selected by reason)."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.config import Config, to_toml
from batchcrawl.frontier.drum import partition_by_bucket
from batchcrawl.frontier.generate import (
    assign_fetchlists,
    fair_share,
    generate,
    merge_candidates,
    route_names,
    select_bucket,
)
from batchcrawl.frontier.inject import inject
from batchcrawl.frontier.table import new_rows
from batchcrawl.frontier.update import update
from batchcrawl.ring import ROUTE_MODES, HashRing, route_name
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.sql import query
from batchcrawl.urls import url_key

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
NOW_S = NOW.timestamp()

row_st = st.tuples(
    st.integers(0, 5),  # host
    st.sampled_from(["queued", "queued", "error", "fetched", "gone", "filtered"]),
    st.sampled_from([None, -10, 10]),  # next_fetch_time relative to now, seconds
    st.sampled_from([None, None, 2, 3]),  # lease_round
    st.integers(0, 3),  # discovered_round
)


def make_table(rows) -> pa.Table:
    n = len(rows)
    urls = [f"http://h{h}.d{h % 2}.test/{i}" for i, (h, *_rest) in enumerate(rows)]
    t = new_rows(
        url_key=np.array([url_key(u) for u in urls], np.uint64),
        url=urls,
        host=[f"h{r[0]}.d{r[0] % 2}.test" for r in rows],
        domain=[f"d{r[0] % 2}.test" for r in rows],
        depth=1,
        hops_out=0,
        discovered_round=np.array([r[4] for r in rows], np.int32),
        discovered_seq=np.arange(n, dtype=np.int64)[::-1].copy(),
        status=[r[1] for r in rows],
    )
    nft = pa.array([None if r[2] is None else int((NOW_S + r[2]) * 1000) for r in rows], pa.int64())
    t = t.set_column(
        t.schema.get_field_index("next_fetch_time"), "next_fetch_time", nft.cast(pa.timestamp("ms"))
    )
    t = t.set_column(
        t.schema.get_field_index("lease_round"),
        "lease_round",
        pa.array([r[3] for r in rows], pa.int32()),
    )
    return t


def reference(t: pa.Table, round: int, cfg: Config) -> set[int]:
    """One global pass in breadth-first order with per-host/domain/round counters."""
    rows = sorted(
        t.to_pylist(), key=lambda r: (r["discovered_round"], r["discovered_seq"], r["url_key"])
    )
    g = cfg.generate
    per_host, per_dom, taken = Counter(), Counter(), set()
    for r in rows:
        nft = r["next_fetch_time"]
        refetch = r["status"] in ("fetched", "gone") and nft is not None  # [recrawl] schedule
        if (r["status"] not in ("queued", "error") and not refetch) or r["lease_round"] == round:
            continue
        if nft is not None and nft.replace(tzinfo=dt.UTC) > NOW:
            continue
        if per_host[r["host"]] >= g.max_urls_per_host:
            continue
        per_host[r["host"]] += 1
        if per_dom[r["domain"]] >= g.max_urls_per_domain:
            continue
        per_dom[r["domain"]] += 1
        if len(taken) >= g.max_urls_per_round:
            continue
        taken.add(r["url_key"])
    return taken


@settings(max_examples=80, deadline=None)
@given(
    rows=st.lists(row_st, max_size=80),
    caps=st.tuples(st.integers(1, 6), st.integers(1, 9), st.integers(1, 30)),
    k=st.integers(1, 5),
)
def test_bucketed_selection_equals_one_global_pass(rows, caps, k):
    cfg = Config().replace(
        generate={
            "max_urls_per_host": caps[0],
            "max_urls_per_domain": caps[1],
            "max_urls_per_round": caps[2],
        }
    )
    t = make_table(rows)
    acc, total = None, Counter()
    parts = partition_by_bucket(t, k) if rows else {}
    for b in range(k):
        part = parts.get(b, t.slice(0, 0))
        cands, c, _ = select_bucket(part, 3, cfg, NOW)
        assert part.num_rows == cands.num_rows + sum(
            v for x, v in c.items() if x != "lease_expired"
        )
        total.update(c)
        acc, c, _ = merge_candidates(acc, cands, cfg)
        total.update(c)
    got = set() if acc is None else set(acc.column("url_key").to_pylist())
    assert got == reference(t, 3, cfg)
    total.pop("lease_expired", None)
    assert len(rows) == len(got) + sum(total.values())


@settings(max_examples=150, deadline=None)
@given(
    hosts=st.lists(st.integers(0, 5), max_size=60),
    n=st.integers(0, 70),
    floor=st.integers(0, 4),
)
def test_fair_share_is_max_min_fair_keeps_order_and_each_hosts_first_urls(hosts, n, floor):
    """``generate.time_fit``'s cut: at most ``n`` rows (or every host's first ``floor``), a prefix
    of each host's rows, in the selection's order, and no host that lost rows keeps fewer than
    another host keeps minus one (max-min fairness)."""
    t = pa.table({"host": [f"h{h}.test" for h in hosts], "seq": list(range(len(hosts)))})
    got = fair_share(t, n, floor)
    seqs = got.column("seq").to_pylist()
    assert seqs == sorted(seqs)
    per_host = Counter(got.column("host").to_pylist())
    total = Counter(t.column("host").to_pylist())
    for h, k in total.items():  # a prefix of each host's rows, at least min(floor, its rows)
        mine = [r["seq"] for r in t.to_pylist() if r["host"] == h]
        assert [s for s in seqs if s in set(mine)] == mine[: per_host[h]]
        assert per_host[h] >= min(floor, k)
    if len(hosts) <= n:
        assert got.num_rows == len(hosts)
        return
    floors = sum(min(floor, k) for k in total.values())
    assert max(n, floors) <= got.num_rows <= n + floors
    if not floor:
        assert got.num_rows == n
        for h, k in total.items():
            if per_host[h] < k:  # h lost rows: nobody keeps more than one more than h
                assert all(per_host[o] <= per_host[h] + 1 for o in total)


def test_due_rules_and_leases():
    rows = [
        (0, "queued", None, None, 0),  # due
        (0, "queued", None, 3, 0),  # live lease (this round)
        (0, "queued", None, 2, 0),  # expired lease: due
        (0, "error", -10, None, 0),  # retry time passed: due
        (0, "error", 10, None, 0),  # not due yet
        (0, "fetched", None, None, 0),
    ]
    cands, c, _ = select_bucket(make_table(rows), 3, Config(), NOW)
    assert cands.num_rows == 3
    assert (c["leased"], c["not_due"], c["status:fetched"], c["lease_expired"]) == (1, 1, 1, 1)


def test_route_by_ip_falls_back_to_host():
    t = make_table(
        [(0, "queued", None, None, 0), (1, "queued", None, None, 0), (2, "queued", None, None, 0)]
    )
    cfg = Config().replace(generate={"partition_by": "ip"}, fetch={"shards": 8})
    names = route_names(t, cfg, {"h0.d0.test": "10.0.0.1", "h1.d1.test": "10.0.0.1"})
    assert names == ["10.0.0.1", "10.0.0.1", "h2.d0.test"]
    lists = assign_fetchlists(t, 1, cfg, {"h0.d0.test": "10.0.0.1", "h1.d1.test": "10.0.0.1"})
    ring = HashRing(8, cfg.fetch.ring_vnodes)
    assert lists[ring.shard_for("10.0.0.1")].num_rows >= 2
    assert sum(x.num_rows for x in lists.values()) == 3


_host = st.sampled_from(["h0.d0.test", "h1.d0.test", "h2.d1.test", "h3.d2.test", None])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_host, st.sampled_from(["d0.test", "d1.test", None])), max_size=30),
    st.sampled_from(ROUTE_MODES),
    st.dictionaries(st.sampled_from(["h0.d0.test", "h2.d1.test"]), st.sampled_from(["10.0.0.1"])),
)
def test_route_names_equal_route_name_per_row(rows, mode, ip_of):
    """Routing computes the name once per distinct (host, domain): the same names as one call of
    :func:`route_name` per row."""
    t = pa.table({"host": pa.array([h for h, _ in rows], pa.string()),
                  "domain": pa.array([d for _, d in rows], pa.string())})  # fmt: skip
    cfg = Config().replace(generate={"partition_by": mode})
    want = [route_name(h, d, ip_of.get(h), mode) for h, d in rows]
    assert route_names(t, cfg, ip_of) == want


@pytest.fixture
def crawl(tmp_path):
    cfg = Config().replace(
        frontier={"buckets": 4}, fetch={"shards": 3}, generate={"max_urls_per_host": 3}
    )
    c = CrawlDir.create(str(tmp_path / "c"), to_toml(cfg), 4)
    inject(c, cfg, ["http://a.test/", "http://b.test/", "http://b.test/x.zip"], clock=NOW.timestamp)
    m = c.manifest()
    links = []
    for i in range(10):
        for host in ("a.test", "b.test"):
            links.append(
                {
                    "round": 1,
                    "shard": 0,
                    "seq": len(links),
                    "src_url_key": url_key(f"http://{host}/"),
                    "dst_url_key": url_key(f"http://{host}/p{i}"),
                    "dst_url": f"http://{host}/p{i}",
                    "dst_host": host,
                    "dst_domain": host,
                    "depth": 1,
                    "hops_out": 0,
                    "tag": "a",
                    "nofollow": False,
                    "filter_reason": None,
                }
            )
    entries, _ = update(
        c, m, 1, None, pa.Table.from_pylist(links, schema=schemas.schema("links")), cfg, NOW
    )
    c.commit(m, {"frontier": entries}, {"step": "round"}, round=1)
    return c, cfg


def test_generate_end_to_end(crawl):
    c, cfg = crawl
    m = c.manifest()
    fetchlists, s = generate(c, m, 2, cfg, NOW)
    assert s["frontier_rows"] == 23
    assert s["frontier_rows"] == s["selected"] + sum(s["not_selected"].values())
    assert s["selected"] == 6 and s["not_selected"]["capped_host"] == 16
    # the .zip seed, filtered at inject: never due, so the due-time index never reads it
    assert s["not_selected"]["not_due"] == 1
    ring = HashRing(3, cfg.fetch.ring_vnodes)
    seen = []
    for shard, entry in fetchlists.items():
        t = c.read_table("fetchlists", [entry])
        for r in t.to_pylist():
            assert r["shard"] == shard == ring.shard_for(r["host"]) and r["round"] == 2
        for host in set(t.column("host").to_pylist()):
            rows = [r for r in t.to_pylist() if r["host"] == host]
            assert [(r["discovered_round"], r["discovered_seq"]) for r in rows] == sorted(
                (r["discovered_round"], r["discovered_seq"]) for r in rows
            )
            # breadth-first: the seed (round 0) comes first, then the earliest links
            assert rows[0]["url"] == f"http://{host}/"
        seen += t.column("url").to_pylist()
    assert len(seen) == len(set(seen)) == 6
    # nothing committed: a crash here loses nothing, a rerun selects the same URLs
    assert c.manifest().generation == m.generation
    again, s2 = generate(c, m, 2, cfg, NOW)
    assert s2 == s


def test_refilter_at_generate(crawl):
    c, cfg = crawl
    m = c.manifest()
    cfg2 = cfg.replace(filters={"deny_hosts": ["b.test"]})
    res = generate(c, m, 2, cfg2, NOW)
    assert res.summary["not_selected"]["filtered:deny_host"] == 3
    assert res.summary["selected"] == 3
    assert res.summary["frontier_rows"] == res.summary["selected"] + sum(
        res.summary["not_selected"].values()
    )
    entries, s = update(c, m, 2, None, None, cfg2, NOW, refiltered=res.refiltered)
    c.commit(m, {"frontier": entries}, {"step": "test"})
    rows = query(c, "SELECT * FROM frontier").to_pylist()
    assert (
        Counter((r["status"], r["reason"]) for r in rows if r["host"] == "b.test")[
            ("filtered", "deny_host")
        ]
        == 3
    )
    assert s["refiltered"] == 3


def test_refilter_only_when_filters_changed(tmp_path):
    cfg = Config().replace(frontier={"buckets": 2})
    c = CrawlDir.create(str(tmp_path / "c"), to_toml(cfg), 2)
    inject(
        c, cfg, ["http://a.test/", "http://b.test/"], clock=NOW.timestamp
    )  # records the filters fingerprint
    m = c.manifest()
    same = generate(c, m, 1, cfg, NOW)
    assert same.summary["refiltered"] is False and same.summary["selected"] == 2
    changed = generate(c, m, 1, cfg.replace(filters={"deny_hosts": ["a.test"]}), NOW)
    assert changed.summary["refiltered"] is True
    assert changed.summary["selected"] == 1
    assert changed.summary["not_selected"] == {"filtered:deny_host": 1}
    assert changed.refiltered.column("reason").to_pylist() == ["deny_host"]
