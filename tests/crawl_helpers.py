"""Test helpers: rows for the crawl tables, a small real crawl dir, and a commit loop that can be
paused at a chosen point of a commit and killed there (run as a script).

Script use::

    python tests/crawl_helpers.py CRAWL COMMITS [PAUSE_AT]

writes a frontier bucket, a fetched file and a WARC file, then commits, ``COMMITS`` times. With
``PAUSE_AT`` (one of :data:`PAUSE_POINTS`) the last commit prints ``PAUSED <point>`` on stdout at
that point and blocks reading stdin, so the test can SIGKILL it exactly there.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from batchcrawl.store import crawldir  # noqa: E402
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest  # noqa: E402

PAUSE_POINTS = (
    "data_tmp",  # a data file's temp written, before its rename into place
    "data",  # all data files of the step written, before the commit
    "list_tmp",  # a file list's temp written, before its rename (before the manifest)
    "manifest_tmp",  # the temp manifest written and fsynced, before the link
    "linked",  # the manifest linked, before its temp is removed
    "duckdb",  # published; crawl.duckdb's temp written, before its rename
)
T0 = dt.datetime(2024, 1, 1, 12, 0, 0)


def frontier_row(
    i: int, *, host: str = "h1.test", status: str = "queued", depth: int = 0, round: int = 0
) -> dict:
    return {
        "url_key": 1000 + i,
        "url": f"http://{host}/p{i}",
        "host": host,
        "domain": host.split(".", 1)[-1] if host.count(".") > 1 else host,
        "depth": depth,
        "hops_out": 0,
        "status": status,
        "discovered_round": round,
        "discovered_seq": i,
        "retries": 0,
    }


def fetched_row(
    i: int,
    *,
    host: str = "h1.test",
    outcome: str = "ok",
    status: int | None = 200,
    round: int = 1,
    warc: str | None = None,
    error: str | None = None,
    seconds: int = 0,
) -> dict:
    return {
        "url_key": 1000 + i,
        "url": f"http://{host}/p{i}",
        "url_host_name": host,
        "url_host_registered_domain": host,
        "fetch_time": T0 + dt.timedelta(seconds=seconds),
        "fetch_status": status,
        "outcome": outcome,
        "error": error,
        "content_length": 100 if outcome == "ok" else None,
        "depth": 0,
        "round": round,
        "shard": 0,
        "warc_filename": warc,
    }


def put(crawl: CrawlDir, rel: str, data: bytes) -> None:
    """Write a non-table file (a stand-in WARC) at ``rel``."""
    crawl.fs.makedirs(crawl.path(rel).rsplit("/", 1)[0], exist_ok=True)
    crawl.fs.pipe_file(crawl.path(rel), data)


def small_crawl(path: str | os.PathLike, buckets: int = 2) -> CrawlDir:
    """A crawl with one round committed: 6 URLs over 2 hosts, 5 fetch attempts."""
    crawl = CrawlDir.create(str(path), "", buckets=buckets)
    parent = crawl.manifest()
    statuses = ["fetched", "fetched", "gone", "queued", "error", "fetched"]
    rows = [
        frontier_row(i, host="a.test" if i < 4 else "b.test", status=s, depth=min(i, 2), round=0)
        for i, s in enumerate(statuses)
    ]
    buckets_files = [
        crawl.write_table(
            "frontier",
            f"frontier/gen=1/bucket={b:03d}.parquet",
            [r for r in rows if r["url_key"] % buckets == b],
        )
        for b in range(buckets)
    ]
    warc = "warc/round=1/shard=00-00000.warc.gz"
    put(crawl, warc, b"WARC")
    fetched = crawl.write_table(
        "fetched",
        "fetched/round=1/shard=00.parquet",
        [
            fetched_row(0, host="a.test", warc=warc, seconds=0),
            fetched_row(1, host="a.test", warc=warc, seconds=2),
            fetched_row(2, host="a.test", outcome="gone", status=404, warc=warc, seconds=3),
            fetched_row(
                4, host="b.test", outcome="network_error", status=None, error="timeout", seconds=5
            ),
            fetched_row(5, host="b.test", warc=warc, seconds=6),
        ],
    )
    crawl.commit(
        parent,
        {"frontier": buckets_files, "fetched": [fetched]},
        {"step": "round", "responses": 5, "stored": 5, "elapsed_s": 6.5},
        round=1,
    )
    return crawl


def commit_step(crawl: CrawlDir, parent: Manifest, n: int, pause=None) -> Manifest:
    """One step of the loop: rewrite bucket 0, add a fetched file and a WARC, commit."""
    g = parent.generation + 1
    bucket = crawl.write_table(
        "frontier",
        f"frontier/gen={g}/bucket=000.parquet",
        [frontier_row(i, status="fetched") for i in range(n)],
    )
    warc = f"warc/round={g}/shard=00-00000.warc.gz"
    put(crawl, warc, b"WARC")
    fetched = crawl.write_table(
        "fetched",
        f"fetched/round={g}/shard=00.parquet",
        [fetched_row(i, round=g, warc=warc) for i in range(n)],
    )
    if pause:
        pause("data")
    old = list(parent.tables.get("fetched", ()))
    return crawl.commit(
        parent,
        {"frontier": [bucket], "fetched": [*old, fetched]},
        {"step": "round", "stored": n},
        round=g,
    )


def _install_pause(point: str):
    """Patch ``os.link``/``os.replace`` of this (throw-away) process so the commit blocks at
    ``point``; returns the pause function for the step's own pause points."""

    def pause(at: str) -> None:
        if at == point:
            print(f"PAUSED {at}", flush=True)
            sys.stdin.readline()  # blocks until the test kills us

    real_link, real_replace = os.link, os.replace

    def link(src, dst, *args, **kwargs):
        is_manifest = "_commits" in str(dst) and str(dst).endswith(".json")
        if is_manifest:
            pause("manifest_tmp")
        real_link(src, dst, *args, **kwargs)
        if is_manifest:
            pause("linked")

    def replace(src, dst, *args, **kwargs):
        if "_commits/lists/" in str(dst):
            pause("list_tmp")
        if str(dst).endswith(".parquet"):
            pause("data_tmp")
        if str(dst).endswith("crawl.duckdb"):
            pause("duckdb")
        real_replace(src, dst, *args, **kwargs)

    os.link = link
    os.replace = replace
    return pause


def main(argv: list[str]) -> int:
    path, commits = argv[0], int(argv[1])
    if os.environ.get("BATCHCRAWL_TEST_INLINE_MAX") is not None:  # spill lists at each commit
        crawldir.INLINE_MAX = int(os.environ["BATCHCRAWL_TEST_INLINE_MAX"])
    point = argv[2] if len(argv) > 2 else None
    crawl = (
        CrawlDir.open(path)
        if os.path.exists(os.path.join(path, "crawl.toml"))
        else (CrawlDir.create(path, "", buckets=1))
    )
    parent = crawl.manifest()
    for k in range(commits):
        pause = _install_pause(point) if point and k == commits - 1 else None
        parent = commit_step(crawl, parent, n=3 + parent.generation, pause=pause)
    print(f"DONE {parent.generation}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

__all__ = ["FileEntry", "PAUSE_POINTS", "commit_step", "fetched_row", "frontier_row", "small_crawl"]
