"""A round with nothing due writes nothing and says when the next URL is due (exit 75, no "error")."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import time

import pytest
from crawl_helpers import frontier_row
from round_helpers import cli_command, round_config, subprocess_env

from batchcrawl.config import to_toml
from batchcrawl.console.nothing_due import format_duration, nothing_due
from batchcrawl.store.crawldir import CrawlDir


def crawl_with(path, rows, buckets=2) -> CrawlDir:
    """A crawl (round config) whose frontier holds ``rows``, committed as one generation."""
    cfg = round_config(frontier={"buckets": buckets})
    crawl = CrawlDir.create(str(path), to_toml(cfg), buckets=buckets)
    parent = crawl.manifest()
    files = [
        crawl.write_table(
            "frontier",
            f"frontier/gen=1/bucket={b:03d}.parquet",
            [r for r in rows if r["url_key"] % buckets == b],
        )
        for b in range(buckets)
    ]
    crawl.commit(parent, {"frontier": files}, {"step": "inject"})
    return crawl


def later(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s"), (42.9, "42 s"), (200, "3 min 20 s"), (7500, "2 h 5 min"), (3600, "1 h"),
     (4 * 86400 + 3 * 3600 + 59, "4 d 3 h")],
)  # fmt: skip
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_message_names_the_earliest_waiting_url_of_a_due_status(tmp_path):
    soon, late = later(3 * 3600), later(5 * 86400)
    rows = [
        {**frontier_row(0), "next_fetch_time": late},
        {**frontier_row(1, status="error"), "next_fetch_time": soon},
        {**frontier_row(2, status="fetched"), "next_fetch_time": later(4 * 3600)},  # a refetch
        {**frontier_row(3, status="fetched"), "next_fetch_time": None},  # never due again
        frontier_row(4, status="gone"),
    ]
    crawl = crawl_with(tmp_path / "c", rows)
    now = time.time()
    msg = str(nothing_due(crawl, crawl.manifest(), now))
    assert msg.startswith(f"nothing due; next URL due at {soon.isoformat()[:19]}Z (in ")
    assert msg.endswith(f"(in {format_duration(soon.timestamp() - now)})")
    ended = crawl_with(tmp_path / "d", [frontier_row(0, status="fetched")])
    assert str(nothing_due(ended, ended.manifest(), now)) == "nothing due"
    empty = CrawlDir.create(str(tmp_path / "e"), "", buckets=2)
    assert "frontier is empty" in str(nothing_due(empty, empty.manifest(), now))


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("command", [("round",), ("crawl", "--stream")], ids=["round", "stream"])
def test_round_with_nothing_due_writes_nothing_and_exits_75(tmp_path, command):
    """``crawl --stream`` too (a fresh-user trial: it started a cluster, idled 8.4 s through one
    empty micro-batch, then exited 0 "nothing_due")."""
    due_at = later(2 * 3600 + 30)
    crawl = crawl_with(tmp_path / "c", [{**frontier_row(i), "next_fetch_time": due_at}
                                        for i in range(4)])  # fmt: skip
    before = sorted(os.walk(crawl.root))
    proc = subprocess.run(
        cli_command(*command, crawl.url, "--workers", "1"), capture_output=True, text=True,
        env=subprocess_env(), timeout=100,
    )  # fmt: skip
    assert proc.returncode == 75, proc.stderr[-3000:]
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" not in proc.stderr.lower(), proc.stderr
    assert lines[0].startswith(
        f"batchcrawl: nothing due; next URL due at {due_at.isoformat()[:19]}Z"
    )
    assert "(in 1 h 59 min)" in lines[0] or "(in 2 h)" in lines[0]
    assert not os.path.exists(crawl.path("fetchlists"))
    assert sorted(os.walk(crawl.root)) == before


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_streams_with_nothing_due_leave_no_round_to_rerun(tmp_path):
    """A stream that commits nothing leaves no file behind: its first takes were forced to write
    their (empty) ``fetched``/``links``/``edges`` files under ``round=R/``, never committed, so
    the next start took round R for a crashed one ("round R was started before ... did not
    commit") and gave every host a full politeness delay after a clean stop."""
    from batchcrawl.console.signals import StopRequest
    from batchcrawl.store.orphans import uncommitted_rounds
    from batchcrawl.stream import run_stream  # Dask: imported by the test that runs streams

    crawl = crawl_with(tmp_path / "c", [{**frontier_row(i), "next_fetch_time": later(7200)}
                                        for i in range(4)])  # fmt: skip
    before, gen = sorted(os.walk(crawl.root)), crawl.manifest().generation
    cfg = round_config(
        frontier={"buckets": 2}, round={"workers": 1}, stream={"flush_interval_s": 0.2}
    )
    runs = [
        run_stream(crawl.url, cfg, StopRequest(), max_seconds=60),  # stops: nothing due
        run_stream(crawl.url, cfg.replace(stream={"flush_interval_s": 30.0}), StopRequest(),
                   max_seconds=0.5),  # the last take only, at once: nothing due at the start
        run_stream(crawl.url, cfg, StopRequest(), max_seconds=60),
    ]  # fmt: skip
    # none waited for a micro-batch (the second's 30 s interval outlasts its 0.5 s deadline)
    assert [r["stopped_by"] for r in runs] == ["nothing_due"] * 3
    assert [r["checkpoints"] for r in runs] == [0, 0, 0]
    assert [r["rerun_after_crash"] for r in runs] == [False, False, False]  # no crashed round
    assert crawl.manifest().generation == gen
    assert uncommitted_rounds(crawl, crawl.manifest().round + 1) == []
    assert sorted(os.walk(crawl.root)) == before
