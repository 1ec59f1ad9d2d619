"""The round's update of the insert-only sets (``content``, ``domainlinks``, ``indegree``) reads
the round's facts a row group at a time (issue 16 item 3: the driver's memory no longer holds a
round's edges). Its results must equal a reference computed independently from the committed
``fetched`` and ``edges`` tables: through real rounds on a LocalCluster, and over any split of
the facts into pieces (hypothesis)."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from round_helpers import new_crawl, round_config, sample_web, serve

from batchcrawl.frontier import content as content_mod
from batchcrawl.frontier import indegree as indegree_mod
from batchcrawl.round import run_rounds
from batchcrawl.urls import hash64

STORED = ("ok", "truncated")


class DupWeb:
    """The sample web, plus ``/same.html`` and ``/same2.html``: the same bytes on every host
    (each links to ``same2.html``), so one round fetches a payload on several shards and the
    next round fetches it again (known at fetch time)."""

    def __init__(self) -> None:
        self.web = sample_web(hosts=8, pages=240, links_per_page=12, cross_host_fraction=0.3)

    def bind(self, port: int) -> DupWeb:
        self.web = self.web.bind(port)
        return self

    def __call__(self, host, path, headers):
        from batchcrawl.testing.webserver import Response

        if path in ("/same.html", "/same2.html"):
            body = b'<html><body><p>one text</p><a href="same2.html">s</a></body></html>'
            return Response(200, [("Content-Type", "text/html")], body)
        return self.web(host, path, headers)


def reference_content(fetched: list[dict]) -> tuple[dict, dict]:
    """From every committed ``fetched`` row: ``{digest: content row}`` (the earliest fetch of
    each stored payload, ties by the smallest url_key) and ``{round: summary counts}``."""
    stored = [r for r in fetched if r["outcome"] in STORED and (r["content_length"] or 0) > 0
              and r["content_digest"] is not None]  # fmt: skip
    first: dict[str, dict] = {}
    for r in sorted(stored, key=lambda r: (r["fetch_time"], r["url_key"])):
        first.setdefault(r["content_digest"], r)
    counts: dict[int, dict[str, int]] = {}
    for rnd in sorted({r["round"] for r in fetched}):
        rows = [r for r in stored if r["round"] == rnd]
        new = sum(1 for d, r in first.items() if r["round"] == rnd)
        distinct = len({r["content_digest"] for r in rows})
        counts[rnd] = {"new_digests": new, "known_digests": distinct - new,
                       "duplicate_fetches": len(rows) - new}  # fmt: skip
    table = {
        d: {"digest_key": hash64(d), "digest": d, "url_key": r["url_key"], "url": r["url"],
            "round": r["round"], "fetch_time": r["fetch_time"]}
        for d, r in first.items()
    }  # fmt: skip
    return table, counts


def reference_indegree(edges: list[dict]) -> tuple[dict, dict, dict]:
    """From every committed ``edges`` row: ``{(src, dst): first round}`` of the pairs of two
    different known domains, ``{domain: (linking domains, last round it grew)}`` and
    ``{round: summary counts}``."""
    pairs: dict[tuple[str, str], int] = {}
    for e in sorted(edges, key=lambda e: e["round"]):
        s, d = e["src_domain"], e["dst_domain"]
        if s is not None and d is not None and s != d:
            pairs.setdefault((s, d), e["round"])
    linking: dict[str, set] = defaultdict(set)
    grew: dict[str, int] = {}
    for (s, d), rnd in pairs.items():
        linking[d].add(s)
        grew[d] = max(grew.get(d, 0), rnd)
    indeg = {d: (len(srcs), grew[d]) for d, srcs in linking.items()}
    counts = {}
    for rnd in sorted({e["round"] for e in edges}):
        new = [p for p, r in pairs.items() if r == rnd]
        counts[rnd] = {"new_domain_pairs": len(new), "domains_grown": len({d for _, d in new})}
    return pairs, indeg, counts


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_round_sets_equal_a_reference_computed_from_the_facts(tmp_path):
    cfg = round_config(politeness={"host_delay_s": 0.0, "ip_delay_s": 0.0, "ip_concurrency": 8})
    web = DupWeb()
    with serve(web) as server:
        hosts = [h.name for h in web.web.hosts]
        seeds = [f"http://{h}:{server.port}/" for h in hosts]
        seeds += [f"http://{h}:{server.port}/same.html" for h in hosts]
        crawl = new_crawl(tmp_path / "crawl", cfg, seeds)
        summaries = run_rounds(crawl.url, cfg, 3)
    assert len(summaries) == 3
    fetched = crawl.read_current("fetched").to_pylist()
    edges = crawl.read_current("edges").to_pylist()

    want_content, content_counts = reference_content(fetched)
    got = {r["digest"]: r for r in crawl.read_current("content").to_pylist()}
    assert got == want_content
    assert content_counts[1]["duplicate_fetches"] >= 2  # same.html on several hosts, one round
    assert content_counts[2]["known_digests"] >= 1  # same2.html: known from round 1

    pairs, indeg, indeg_counts = reference_indegree(edges)
    assert len(pairs) > len(hosts)  # cross-domain links in every round
    got_pairs = {(r["src_domain"], r["dst_domain"]): r for r in
                 crawl.read_current("domainlinks").to_pylist()}  # fmt: skip
    assert {p: r["round"] for p, r in got_pairs.items()} == pairs
    assert all(r["pair_key"] == hash64(f"{s} {d}") for (s, d), r in got_pairs.items())
    got_indeg = {r["domain"]: (r["linking_domains"], r["round"])
                 for r in crawl.read_current("indegree").to_pylist()}  # fmt: skip
    assert got_indeg == indeg

    for s in summaries:
        assert s["content"] == content_counts[s["round"]]
        assert s["indegree"] == indeg_counts[s["round"]]


T0 = dt.datetime(2026, 1, 1)
_fetch = st.tuples(
    st.integers(0, 7),  # digest id (None at 7)
    st.integers(0, 5),  # url id
    st.integers(0, 3),  # fetch time, seconds
    st.sampled_from(["ok", "truncated", "not_modified", "gone"]),
    st.integers(0, 2),  # content length
    st.booleans(),  # archived as a revisit (duplicate_of set)
)


def _fetched(rows: list[tuple]) -> pa.Table:
    return pa.table({
        "url_key": pa.array([u * 7 + 1 for _, u, *_ in rows], pa.uint64()),
        "url": pa.array([f"http://h{u}.test/" for _, u, *_ in rows], pa.string()),
        "round": pa.array([1] * len(rows), pa.int32()),
        "fetch_time": pa.array([T0 + dt.timedelta(seconds=t) for _, _, t, *_ in rows],
                               pa.timestamp("ms")),
        "content_digest": pa.array([None if d == 7 else f"sha1:D{d}" for d, *_ in rows],
                                   pa.string()),
        "outcome": pa.array([o for *_, o, _, _ in rows], pa.string()),
        "content_length": pa.array([n for *_, n, _ in rows], pa.int64()),
        "duplicate_of": pa.array([99 if r else None for *_, r in rows], pa.uint64()),
    })  # fmt: skip


def _pieces(t: pa.Table, cuts: list[int]) -> list[pa.Table]:
    bounds = sorted({min(c, t.num_rows) for c in cuts} | {0, t.num_rows})
    return [t.slice(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=60, deadline=None)
@given(st.lists(_fetch, max_size=40), st.lists(st.integers(0, 40), max_size=6))
def test_content_of_pieces_equals_content_of_the_whole(rows, cuts):
    """Reducing each piece to its earliest fetch per digest, then folding, gives the rows and the
    stored-fetch count of the whole table."""
    t = _fetched(rows)
    got, stored, revisit_only = content_mod.round_content(_pieces(t, cuts))
    assert got.equals(content_mod.content_rows(t))
    assert stored == content_mod.stored_fetches(t).num_rows
    all_digests = set(content_mod.stored_fetches(t).column("content_digest").to_pylist())
    assert revisit_only == len(all_digests) - got.num_rows


_domain = st.sampled_from([None, "a.test", "b.test", "c.test", "d.test"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_domain, _domain), max_size=40),
       st.lists(st.integers(0, 40), max_size=6))  # fmt: skip
def test_domain_pairs_of_pieces_equal_pairs_of_the_whole(edges, cuts):
    t = pa.table({"src_domain": pa.array([s for s, _ in edges], pa.string()),
                  "dst_domain": pa.array([d for _, d in edges], pa.string())})  # fmt: skip
    want = {(s, d) for s, d in edges if s is not None and d is not None and s != d}
    assert indegree_mod.distinct_pairs(_pieces(t, cuts)) == want
    rows = indegree_mod.pair_rows(want, 3)
    assert rows.equals(indegree_mod.domain_pairs(t, 3))
    assert rows.column("pair_key").to_pylist() == sorted(hash64(f"{s} {d}") for s, d in want)
