"""updatedb: the three merges of a round's facts side by side give what they give one by one."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from batchcrawl.config import Config, to_toml
from batchcrawl.errors import CrawlDirError
from batchcrawl.frontier import runs
from batchcrawl.frontier.runs import thread_mapper
from batchcrawl.frontier.updatedb import updatedb
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry
from batchcrawl.store.shuffle import Partitioned, write_partitioned
from batchcrawl.urls import bucket_ids, url_key

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
K = 4


def url(i: int) -> str:
    return f"http://h{i % 5}.test/p{i}"


def _facts(crawl: CrawlDir, rnd: int, pages: list[int], out: list[tuple[int, int]]):
    """Round ``rnd``'s fact files of one shard: ``pages`` fetched (200, distinct digests every
    third page repeated), ``out`` links (src page, dst page) with their edges."""
    fetched = schemas.conform("fetched", {
        "url_key": pa.array([url_key(url(p)) for p in pages], pa.uint64()),
        "url": [url(p) for p in pages],
        "url_host_name": [f"h{p % 5}.test" for p in pages],
        "url_host_registered_domain": [f"h{p % 5}.test" for p in pages],
        "fetch_time": [NOW] * len(pages), "fetch_status": [200] * len(pages),
        "outcome": ["ok"] * len(pages), "content_length": [100] * len(pages),
        "content_digest": [f"sha1:D{p % 3 if p % 3 == 0 else p}" for p in pages],
        "depth": [0] * len(pages), "round": [rnd] * len(pages), "shard": [0] * len(pages),
    })  # fmt: skip
    src = [url_key(url(s)) for s, _ in out]
    dst = [url_key(url(d)) for _, d in out]
    links = schemas.conform("links", {
        "round": [rnd] * len(out), "shard": [0] * len(out), "seq": list(range(len(out))),
        "src_url_key": pa.array(src, pa.uint64()), "dst_url_key": pa.array(dst, pa.uint64()),
        "dst_url": [url(d) for _, d in out], "dst_host": [f"h{d % 5}.test" for _, d in out],
        "dst_domain": [f"h{d % 5}.test" for _, d in out], "depth": [1] * len(out),
        "hops_out": [0] * len(out), "tag": ["a"] * len(out), "nofollow": [False] * len(out),
    })  # fmt: skip
    edges = schemas.conform("edges", {
        "src_url_key": pa.array(src, pa.uint64()), "dst_url_key": pa.array(dst, pa.uint64()),
        "round": [rnd] * len(out), "tag": ["a"] * len(out),
        "src_domain": [f"h{s % 5}.test" for s, _ in out],
        "dst_domain": [f"h{d % 5}.test" for _, d in out],
    })  # fmt: skip

    def write(table, data, key):
        keys = np.asarray(data.column(key).to_numpy(), np.uint64)
        rel = f"{table}/round={rnd}/shard=00.parquet"
        return write_partitioned(crawl, table, rel, data, bucket_ids(keys, K))

    return (write("fetched", fetched, "url_key"), write("links", links, "dst_url_key"),
            write("edges", edges, "src_url_key"))  # fmt: skip


def _crawl(tmp_path, name: str) -> tuple[CrawlDir, Config]:
    cfg = Config().replace(frontier={"buckets": K, "max_runs": 2, "compact_run_ratio": 0.5})
    return CrawlDir.create(str(tmp_path / name), to_toml(cfg), K), cfg


def _state(crawl: CrawlDir) -> dict:
    m = crawl.manifest()
    frontier = sorted(
        (r["url_key"], r["status"], r["discovered_round"])
        for _, t in runs.iter_buckets(crawl, m)
        for r in t.to_pylist()
    )
    content = sorted(crawl.read_current("content", ["digest", "url"]).to_pylist(),
                     key=lambda r: r["digest"])  # fmt: skip
    pairs = sorted(crawl.read_current("domainlinks", ["src_domain", "dst_domain"]).to_pylist(),
                   key=lambda r: (r["src_domain"], r["dst_domain"]))  # fmt: skip
    indegree = sorted(crawl.read_current("indegree").to_pylist(), key=lambda r: r["domain"])
    return {"frontier": frontier, "content": content, "pairs": pairs, "indegree": indegree}


@pytest.mark.parametrize("seed", [1, 2])
def test_side_by_side_merges_commit_what_serial_ones_do(tmp_path, seed):
    states = []
    for parallel in (False, True):
        rng = np.random.default_rng(seed)  # the same rounds for both
        crawl, cfg = _crawl(tmp_path, f"c{int(parallel)}")
        known: list[int] = [0]  # page 0 is fetched but never linked: its facts are "unknown"
        linked: set[int] = set()
        for rnd in range(1, 5):  # round 1 links from the seed; later rounds fetch what was found
            pages = known[:]
            out = [(int(s), int(d)) for s, d in zip(rng.choice(pages, 30), rng.integers(0, 60, 30),
                                                    strict=True)]  # fmt: skip
            fparts, lparts, eparts = _facts(crawl, rnd, pages, out)
            m = crawl.manifest()
            done = updatedb(crawl, m, rnd, [fparts], [lparts], [eparts], cfg, NOW,
                            mapper=thread_mapper(2), parallel=parallel)  # fmt: skip
            crawl.commit(m, {
                "frontier": done.frontier.listing, "content": done.content.listing,
                "domainlinks": done.indegree.domainlinks, "indegree": done.indegree.indegree,
            }, done.frontier.summary.to_json(), round=rnd)  # fmt: skip
            assert set(done.seconds) == {"frontier", "content", "indegree"}
            linked |= {d for _, d in out}
            known = sorted({*known, *linked})
        states.append(_state(crawl))
    serial, side_by_side = states
    assert serial == side_by_side
    assert {k for k, _, _ in serial["frontier"]} == {url_key(url(d)) for d in linked}
    assert {s for _, s, _ in serial["frontier"]} >= {"fetched", "queued"}
    assert serial["content"] and serial["pairs"] and serial["indegree"]


def test_two_failed_merges_raise_one_error_naming_the_other(tmp_path):
    """The frontier and content merges both read a fact file that is gone: the frontier's error
    is raised, and the content merge's failure is on it as a note (not lost)."""
    crawl, cfg = _crawl(tmp_path, "c")
    gone = Partitioned(FileEntry("fetched/round=1/shard=00.parquet", 3), {0: (0,)})
    with pytest.raises(CrawlDirError, match="shard=00.parquet: the file is missing") as err:
        updatedb(crawl, crawl.manifest(), 1, [gone], [], [], cfg, NOW, mapper=thread_mapper(1))
    notes = getattr(err.value, "__notes__", [])
    assert any("the content merge failed too" in n for n in notes)
    assert crawl.manifest().generation == 0  # nothing committed


def test_a_stop_during_the_merges_logs_no_traceback_per_merge(tmp_path, caplog):
    """CI: a SIGINT 1.5 s into a round landed in the update, and each merge the stop ended was
    logged as an ERROR with its traceback (54 lines where the stop says one). The stop is raised
    (the CLI says it), and a merge it ended is not logged. The mapper raises the stop here: when
    a signal lands cannot be chosen."""
    import logging

    from batchcrawl.console.signals import Interrupted

    crawl, cfg = _crawl(tmp_path, "c")
    fparts, lparts, eparts = _facts(crawl, 1, [0, 1, 2], [(0, 1), (1, 2), (2, 3)])

    def stopped(fn, items):
        raise Interrupted(2)

    with caplog.at_level(logging.ERROR, logger="batchcrawl"), pytest.raises(Interrupted):
        updatedb(crawl, crawl.manifest(), 1, [fparts], [lparts], [eparts], cfg, NOW,
                 mapper=stopped)  # fmt: skip
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert crawl.manifest().generation == 0  # nothing committed
