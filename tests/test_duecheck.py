"""Nothing due decided from the due-time index before a cluster starts (batchcrawl.engine.duecheck):
it says "nothing due" exactly when the newest row of every URL is not due, with the message
:func:`batchcrawl.console.nothing_due.nothing_due` gives, and a process that exits on it exits 75."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import pyarrow as pa
from crawl_helpers import frontier_row
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from round_helpers import round_config, subprocess_env

from batchcrawl.config import to_toml
from batchcrawl.console.nothing_due import next_due_ms, nothing_due
from batchcrawl.engine import duecheck
from batchcrawl.frontier import runs
from batchcrawl.store import schemas
from batchcrawl.store.crawldir import CrawlDir

NOW = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
NOW_S = NOW.timestamp()
BUCKETS = 2


def _table(rows: list[dict]) -> pa.Table:
    return schemas.conform("frontier", pa.Table.from_pylist(rows)).sort_by("url_key")


def crawl_of(path, base: list[dict], run: list[dict]) -> CrawlDir:
    """A crawl whose buckets hold ``base`` as their base file and ``run`` as a delta run (each
    with its due-time index, as rounds write them)."""
    cfg = round_config(frontier={"buckets": BUCKETS})
    crawl = CrawlDir.create(str(path), to_toml(cfg), buckets=BUCKETS)
    parent = crawl.manifest()
    out = []
    for b in range(BUCKETS):
        mine = [r for r in base if r["url_key"] % BUCKETS == b]
        files = runs.BucketFiles(b)
        if mine:
            entry = runs.write_bucket(crawl, f"frontier/gen=1/bucket={b:03d}.parquet",
                                      _table(mine), row_group_bytes=1 << 20)  # fmt: skip
            files = runs.BucketFiles(b, entry)
        later = [r for r in run if r["url_key"] % BUCKETS == b]
        if later:
            files = runs.add_run(crawl, files, 1, _table(later), cfg)
        out.append(files)
    crawl.commit(parent, {"frontier": runs.frontier_listing(out)}, {"step": "inject"})
    return crawl


ROW = st.tuples(
    st.integers(0, 7),  # url
    st.sampled_from(["queued", "error", "fetched", "gone", "filtered"]),
    st.one_of(st.none(), st.integers(-3, 3)),  # next_fetch_time, hours from NOW
)


def _rows(spec) -> list[dict]:
    out = {}
    for i, status, hours in spec:
        nft = None if hours is None else NOW + dt.timedelta(hours=hours, minutes=1)
        out[i] = {**frontier_row(i, status=status), "next_fetch_time": nft}
    return list(out.values())


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(base=st.lists(ROW, max_size=8), run=st.lists(ROW, max_size=8))
def test_nothing_due_now_agrees_with_the_newest_rows(tmp_path_factory, base, run):
    crawl = crawl_of(tmp_path_factory.mktemp("c") / "c", _rows(base), _rows(run))
    manifest = crawl.manifest()
    truth = next_due_ms(crawl, manifest) if manifest.rows("frontier") else None
    assert duecheck.next_due_ms(crawl, manifest) == truth
    got = duecheck.nothing_due_now(crawl, NOW_S)
    if truth is not None and truth <= NOW_S * 1000:
        assert got is None  # something is due: the cluster's select decides
    else:
        assert got is not None and str(got) == str(nothing_due(crawl, manifest, NOW_S))


def test_a_run_that_fetched_the_base_rows_leaves_nothing_due(tmp_path):
    """The base's index still lists its queued rows (due long ago); the run's newer rows win."""
    queued = [frontier_row(i) for i in range(4)]
    fetched = [{**frontier_row(i, status="fetched"), "next_fetch_time": None} for i in range(4)]
    crawl = crawl_of(tmp_path / "c", queued, fetched)
    known, earliest = duecheck.earliest_indexed_due_ms(crawl, crawl.manifest())
    assert known and earliest is not None and earliest <= NOW_S * 1000  # a stale lower bound
    assert not duecheck.any_due(crawl, crawl.manifest(), int(NOW_S * 1000))
    assert str(duecheck.nothing_due_now(crawl, NOW_S)) == "nothing due"
    half = crawl_of(tmp_path / "d", queued, fetched[:3])  # url 3 is still queued
    assert duecheck.nothing_due_now(half, NOW_S) is None


def test_round_exits_75_from_the_index_without_dask(tmp_path):
    """The process cannot import ``distributed`` (``sys.modules`` entry None): a round that
    reached for a cluster would fail with ImportError (exit 1), so exit 75 shows the answer came
    before any cluster, and without Arrow's thread pools (no abort at exit, exit 134)."""
    crawl = crawl_of(tmp_path / "c", [{**frontier_row(0, status="fetched"),
                                      "next_fetch_time": None}], [])  # fmt: skip
    proc = _round_without_dask(crawl)
    assert proc.returncode == 75, proc.stderr[-3000:]
    assert proc.stderr.strip() == "batchcrawl: nothing due"
    half = crawl_of(tmp_path / "d", [frontier_row(0)], [])  # due: the round needs Dask
    proc = _round_without_dask(half)
    assert proc.returncode not in (0, 75) and "distributed" in proc.stderr, proc.stderr[-3000:]


def _round_without_dask(crawl: CrawlDir) -> subprocess.CompletedProcess:
    code = ("import sys; sys.modules['distributed'] = None; "
            "from batchcrawl.cli import main; main()")  # fmt: skip
    cmd = [sys.executable, "-c", code, "round", crawl.url, "--workers", "1"]
    return subprocess.run(cmd, capture_output=True, text=True, env=subprocess_env(), timeout=100)
