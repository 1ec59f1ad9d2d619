"""Automatic retention removes what a SIGKILLed round left (issue 35, retention leftovers;
:func:`batchcrawl.store.retention.remove_orphans`).

A round is written for real -- partitioned ``fetched``, ``links``, ``edges`` files of each shard,
a real WARC file per shard (warcio) with its CDXJ, an interrupted write's temp file -- and merged
and committed through the real path (:func:`batchcrawl.engine.merge.merge_and_commit`: updatedb,
bucket compaction, the commit, retention). A child process doing that with three shards is
SIGKILLed at the start of the update, the compaction or the commit; the rerun of the round (two
shards, new WARC files, as a rerun's fetch makes them) then commits it with automatic retention
on. Afterwards: nothing the killed attempt left in the round's and the generation's folders
remains unless the new generation names it (written before the rerun's lock: a dead writer's); every file a kept generation references exists; the
stream's open WARC file and the temp file of its CDXJ (a writer still owns them) are kept; and a
full ``gc`` finds nothing else to delete but those two (which it, run with no writer, would).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from batchcrawl.config import Config, loopback_test_config, to_toml
from batchcrawl.engine.merge import Work, merge_and_commit
from batchcrawl.engine.report import ShardReport
from batchcrawl.frontier import generate as gen_mod
from batchcrawl.frontier.inject import inject
from batchcrawl.frontier.runs import thread_mapper
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.gc import gc, referenced_files
from batchcrawl.store.lock import WriterLock
from batchcrawl.store.shuffle import write_partitioned
from batchcrawl.urls import bucket_ids, url_keys

HOSTS = 6
URLS = [f"http://h{i % HOSTS}.test/p{i}" for i in range(200)]
KEYS = url_keys(URLS)

KILLED = """
import sys
sys.path[:0] = [sys.argv[3], sys.argv[4]]
from test_retention_orphans import attempt
attempt(sys.argv[1], shards=3, seed=99, wall=1.7e9, kill_at=sys.argv[2])
"""


def config() -> Config:
    """4 buckets, automatic retention keeping the newest 2 generations by count alone."""
    return loopback_test_config(
        frontier={"buckets": 4},
        gc={"auto": True, "keep_seconds": 0.0},
        crawl={"keep_generations": 2, "name": "t"},
    )


def write_warc(crawl: CrawlDir, rel: str, urls: list[str]) -> None:
    """A real WARC file at ``rel`` (one response record per URL) and its CDXJ beside it."""
    path = Path(crawl.path(rel))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        writer = WARCWriter(out, gzip=True)
        for url in urls:
            headers = StatusAndHeaders(
                "200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1"
            )
            body = f"<html>{url}</html>".encode()
            writer.write_record(writer.create_warc_record(
                url, "response", payload=__import__("io").BytesIO(body),
                http_headers=headers))  # fmt: skip
    Path(crawl.path(paths.warc_cdxj(rel))).write_text("".join(f"{u} {{}}\n" for u in urls))


def shard_files(crawl: CrawlDir, rnd: int, shard: int, buckets: int, warc: str,
                rng: np.random.Generator) -> ShardReport:  # fmt: skip
    """One shard's round: 5 fetched pages (their records in ``warc``), 3 out-links each."""
    src = rng.choice(len(URLS), 5, replace=False)
    dst = rng.choice(len(URLS), 15)
    write_warc(crawl, warc, [URLS[i] for i in src])
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    host = [URLS[i].split("/")[2] for i in src]
    fetched = pa.table({
        "url_key": pa.array(KEYS[src], pa.uint64()), "url": [URLS[i] for i in src],
        "url_host_name": host, "url_host_registered_domain": host,
        "fetch_time": pa.array([now] * 5, pa.timestamp("ms")),
        "fetch_status": pa.array([200] * 5, pa.int32()), "outcome": ["ok"] * 5,
        "content_length": pa.array([100] * 5, pa.int64()), "depth": pa.array([1] * 5, pa.int32()),
        "round": pa.array([rnd] * 5, pa.int32()), "shard": pa.array([shard] * 5, pa.int32()),
        "warc_filename": [warc] * 5,
    })  # fmt: skip
    dhost = [URLS[i].split("/")[2] for i in dst]
    links = pa.table({
        "round": pa.array([rnd] * 15, pa.int32()), "shard": pa.array([shard] * 15, pa.int32()),
        "seq": pa.array(np.arange(15), pa.int64()),
        "src_url_key": pa.array(np.repeat(KEYS[src], 3), pa.uint64()),
        "dst_url_key": pa.array(KEYS[dst], pa.uint64()), "dst_url": [URLS[i] for i in dst],
        "dst_host": dhost, "dst_domain": dhost, "depth": pa.array([2] * 15, pa.int32()),
        "hops_out": pa.array([0] * 15, pa.int32()), "tag": ["a"] * 15, "nofollow": [False] * 15,
    })  # fmt: skip
    edges = pa.table({
        "src_url_key": pa.array(np.repeat(KEYS[src], 3), pa.uint64()),
        "dst_url_key": pa.array(KEYS[dst], pa.uint64()),
        "round": pa.array([rnd] * 15, pa.int32()), "tag": ["a"] * 15,
    })  # fmt: skip

    def write(table: str, data: pa.Table, key: str):
        keys = bucket_ids(data.column(key).to_numpy(), buckets)
        return write_partitioned(crawl, table, paths.round_file(table, rnd, shard), data, keys)

    return ShardReport(shard=shard, fetched=write("fetched", fetched, "url_key"),
                       links=write("links", links, "dst_url_key"),
                       edges=write("edges", edges, "src_url_key"), outcomes={"ok": 5})  # fmt: skip


def attempt(url: str, *, shards: int, seed: int, wall: float, kill_at: str | None = None,
            open_warc: bool = False) -> None:  # fmt: skip
    """Write and commit the next round of the crawl at ``url`` (``shards`` shards, WARC names
    stamped ``wall``); SIGKILL this process at the start of step ``kill_at``. ``open_warc``:
    shard 0 also reports a WARC file kept open across the commit (a stream's), with no
    committed record yet, and the temp file of its CDXJ."""
    crawl = CrawlDir.open(url)
    cfg = config()
    rng = np.random.default_rng(seed)
    with WriterLock(crawl, owner="test") as lock:
        parent = crawl.manifest()
        rnd = parent.round + 1
        reports = []
        for s in range(shards):
            warc = f"{paths.warc_dir(rnd)}/{paths.warc_prefix('t', rnd, s, wall)}-00000.warc.gz"
            reports.append(shard_files(crawl, rnd, s, parent.buckets, warc, rng))
        if kill_at is not None:  # an interrupted write (a spill of a shard that died)
            Path(crawl.path(paths.spill_file("fetched", rnd, 0, f"x{seed}"))).write_bytes(b"..")
        if open_warc:
            name = f"{paths.warc_dir(rnd)}/{paths.warc_prefix('t', rnd, 0, wall)}-00001.warc.gz"
            write_warc(crawl, name, [])
            Path(crawl.path(paths.warc_cdxj(name) + ".tmp-abc")).write_bytes(b"")
            reports[0].warc_open = (name, os.path.getsize(crawl.path(name)))
            # a closed file of robots.txt captures only: no fetched row names it
            robots = f"{paths.warc_dir(rnd)}/{paths.warc_prefix('t', rnd, 1, wall)}-00001.warc.gz"
            write_warc(crawl, robots, ["http://h1.test/robots.txt"])
        touched = {b for r in reports for p in (r.fetched, r.links) for b in p.row_groups}
        summary = gen_mod.selection_summary(rnd, cfg, 0, {}, 0, False, None)

        def on_step(step: str) -> None:
            if step == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

        work = Work(rnd, parent.generation + 1, reports, time.time(), summary, buckets=touched)
        merge_and_commit(crawl, lock, parent, work, cfg, mapper=thread_mapper(1),
                         on_step=on_step, t_start=time.monotonic())  # fmt: skip


def layout_files(crawl: CrawlDir) -> set[str]:
    """Every file under the crawl's data folders and ``_commits``, relative to its root."""
    root = Path(crawl.root)
    return {
        p.relative_to(root).as_posix()
        for folder in (*paths.DATA_DIRS, paths.COMMITS_DIR)
        for p in (root / folder).rglob("*")
        if p.is_file()
    }


@pytest.mark.parametrize("kill_at", ["update", "compact", "commit"])
def test_the_commit_after_a_sigkilled_round_removes_its_orphans(kill_at, tmp_path):
    cfg = config()
    crawl = CrawlDir.create(str(tmp_path / "crawl"), to_toml(cfg), cfg.frontier.buckets)
    inject(crawl, cfg, URLS[:HOSTS])
    attempt(crawl.url, shards=2, seed=1, wall=1.6e9)  # round 1, committed
    before = crawl.manifest()
    files_before = layout_files(crawl)
    tests, repo = str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])
    proc = subprocess.run([sys.executable, "-c", KILLED, crawl.url, kill_at, tests, repo],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert crawl.manifest().generation == before.generation  # nothing committed
    left = layout_files(crawl) - files_before
    killed_warcs = {f for f in left if f.startswith("warc/round=2/")}
    assert len(killed_warcs) == 6  # three WARC files and their CDXJ
    assert "fetched/round=2/shard=02.parquet" in left
    assert paths.spill_file("fetched", 2, 0, "x99") in left

    attempt(crawl.url, shards=2, seed=2, wall=1.8e9, open_warc=True)  # the rerun of round 2
    after = crawl.manifest()
    assert (after.round, after.generation) == (2, before.generation + 1)
    now = layout_files(crawl)
    assert not killed_warcs & now
    assert "fetched/round=2/shard=02.parquet" not in now
    assert paths.spill_file("fetched", 2, 0, "x99") not in now
    kept = referenced_files(crawl, crawl.generations())
    for rel in kept:
        assert crawl.fs.exists(crawl.path(rel)) or rel.endswith(".wet.gz"), rel
    (open_name,) = after.summary["warc_open"].values()
    cdxj = paths.warc_cdxj(open_name[0])
    robots = open_name[0].replace("-00-", "-01-")
    owned = {open_name[0], cdxj, cdxj + ".tmp-abc", robots, paths.warc_cdxj(robots)}
    # a writer's open WARC file, its CDXJ and the CDXJ being rewritten, and its file of robots.txt
    # captures: written under the rerun's lock, so kept
    assert owned <= now
    # the reference: a full gc (no writer running) deletes just those, nothing else
    assert (now - kept) - {paths.commit_file(g) for g in crawl.generations()} == owned
    dry = gc(crawl, keep=cfg.crawl.keep_generations, tmp_min_age_s=0, dry_run=True)
    assert (dry["deleted_manifests"], dry["deleted_files"]) == (0, len(owned))
