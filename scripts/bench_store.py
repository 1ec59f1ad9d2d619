"""Benchmark the crawl directory over many checkpoints (issue 35; not a test).

Simulates a stream crawl's checkpoints without any network: each checkpoint is a synthetic
micro-batch (``--pages`` pages per shard over ``--shards`` shards, each with ``--links`` out-links,
drawn from a fixed universe of ``--urls`` URLs on ``--hosts`` hosts, so the frontier stays the same
size and only history grows) written as real partitioned ``fetched``, ``links`` and ``edges`` files
and merged and committed through the real path a stream takes
(:func:`batchcrawl.engine.merge.merge_and_commit`: updatedb, bucket compaction, fact-file
compaction, the commit, automatic retention; the update's bucket tasks on one thread of this
process, ``crawl.duckdb`` refreshed in the background as during a crawl). Every ``--every``
checkpoints it prints one JSON line::

    {"checkpoint", "commit_ms": mean of merge_and_commit's "commit" step over the window,
     "checkpoint_ms": mean wall time of a whole checkpoint (files written, update, commit),
     "manifest_bytes": the current manifest's size, "lists": file lists it names,
     "current_files": data files the current generation names, "generations": manifests kept,
     "dir_files": files under the crawl directory}

and at the end one line with ``flat`` (the last window's ``commit_ms`` and ``manifest_bytes`` over
the first's) and ``sql_s``: wall seconds of ``batchcrawl sql CRAWL "select count(*) from fetched"``
run as a command. The timings are wall times on a shared machine: compare runs back to back.

    python scripts/bench_store.py --checkpoints 20000
    python scripts/bench_store.py --checkpoints 5000 --keep CRAWL_DIR
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

from batchcrawl.config import load_config, loopback_test_config, to_toml
from batchcrawl.engine.merge import Work, merge_and_commit
from batchcrawl.engine.report import ShardReport
from batchcrawl.frontier import generate as gen_mod
from batchcrawl.frontier.inject import inject
from batchcrawl.frontier.runs import thread_mapper
from batchcrawl.store import paths, views
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.lock import WriterLock
from batchcrawl.store.shuffle import write_partitioned
from batchcrawl.urls import bucket_ids, url_keys


def universe(hosts: int, urls: int) -> list[str]:
    """``urls`` canonical URLs spread over ``hosts`` hosts named ``hN.test``."""
    return [f"http://h{i % hosts}.test/p{i}" for i in range(urls)]


def micro_batch(
    crawl: CrawlDir, rnd: int, shard: int, urls: list[str], keys: np.ndarray, pages: int,
    links: int, buckets: int, rng: np.random.Generator,
) -> ShardReport:  # fmt: skip
    """One shard's synthetic micro-batch of round ``rnd``: ``pages`` fetched rows and their
    ``links`` out-links each, written as the shard writes them (partitioned by bucket)."""
    src = rng.choice(len(urls), pages, replace=False)
    dst = rng.choice(len(urls), pages * links)
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    fetched = pa.table({
        "url_key": pa.array(keys[src], pa.uint64()),
        "url": [urls[i] for i in src],
        "url_host_name": [urls[i].split("/")[2] for i in src],
        "url_host_registered_domain": [urls[i].split("/")[2] for i in src],
        "fetch_time": pa.array([now] * pages, pa.timestamp("ms")),
        "fetch_status": pa.array([200] * pages, pa.int32()),
        "outcome": ["ok"] * pages,
        "content_length": pa.array([1000] * pages, pa.int64()),
        "depth": pa.array([1] * pages, pa.int32()),
        "round": pa.array([rnd] * pages, pa.int32()),
        "shard": pa.array([shard] * pages, pa.int32()),
    })  # fmt: skip
    src_keys = np.repeat(keys[src], links)
    hosts = [urls[i].split("/")[2] for i in dst]
    link_rows = pa.table({
        "round": pa.array([rnd] * len(dst), pa.int32()),
        "shard": pa.array([shard] * len(dst), pa.int32()),
        "seq": pa.array(np.arange(len(dst)), pa.int64()),
        "src_url_key": pa.array(src_keys, pa.uint64()),
        "dst_url_key": pa.array(keys[dst], pa.uint64()),
        "dst_url": [urls[i] for i in dst],
        "dst_host": hosts,
        "dst_domain": hosts,
        "depth": pa.array([2] * len(dst), pa.int32()),
        "hops_out": pa.array([0] * len(dst), pa.int32()),
        "tag": ["a"] * len(dst),
        "nofollow": [False] * len(dst),
    })  # fmt: skip
    edges = pa.table({
        "src_url_key": pa.array(src_keys, pa.uint64()),
        "dst_url_key": pa.array(keys[dst], pa.uint64()),
        "round": pa.array([rnd] * len(dst), pa.int32()),
        "tag": ["a"] * len(dst),
    })  # fmt: skip

    def write(table: str, data: pa.Table, key: str):
        rel = paths.round_file(table, rnd, shard)
        return write_partitioned(crawl, table, rel, data, bucket_ids(
            data.column(key).to_numpy(), buckets))  # fmt: skip

    return ShardReport(
        shard=shard,
        fetched=write("fetched", fetched, "url_key"),
        links=write("links", link_rows, "dst_url_key"),
        edges=write("edges", edges, "src_url_key"),
        outcomes={"ok": pages},
    )


def dir_files(root: str) -> int:
    """Files under ``root``."""
    return sum(len(files) for _, _, files in os.walk(root))


def sql_seconds(url: str) -> tuple[float, str]:
    """Wall seconds of ``batchcrawl sql URL "select count(*) from fetched"`` as a command, and
    its output."""
    cmd = [sys.executable, "-m", "batchcrawl.cli", "sql", url, "select count(*) from fetched"]
    t0 = time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.monotonic() - t0, out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the checkpoints, print the JSON lines; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--checkpoints", type=int, default=20_000)
    ap.add_argument("--every", type=int, default=1_000, help="checkpoints per printed line")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--pages", type=int, default=4, help="pages per shard per checkpoint")
    ap.add_argument("--links", type=int, default=4, help="out-links per page")
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--urls", type=int, default=5_000)
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.KEY=V")
    ap.add_argument("--keep", metavar="DIR", help="build the crawl at DIR and keep it")
    args = ap.parse_args(argv)

    tmp = None if args.keep else tempfile.mkdtemp(prefix="bench_store-")
    url = args.keep or os.path.join(tmp, "crawl")
    try:
        # the time-travel window by count alone: this runs ~5 checkpoints a second, so the
        # default hour (gc.keep_seconds) would keep ~18,000 generations, a stream's 5 s ~720
        cfg = loopback_test_config(frontier={"buckets": 16}, gc={"keep_seconds": 0.0})
        cfg = load_config(files=[("bench", to_toml(cfg))], environ={}, sets=args.sets)
        crawl = CrawlDir.create(url, to_toml(cfg), cfg.frontier.buckets)
        urls = universe(args.hosts, args.urls)
        keys = url_keys(urls)
        inject(crawl, cfg, urls[: args.hosts])
        rng = np.random.default_rng(35)
        mapper = thread_mapper(1)
        window: dict[str, list[float]] = {"commit": [], "checkpoint": []}
        lines = []
        with WriterLock(crawl, owner="bench_store") as lock, views.background_refresh():
            parent = crawl.manifest()
            for n in range(1, args.checkpoints + 1):
                t0 = time.monotonic()
                rnd = parent.round + 1
                reports = [
                    micro_batch(crawl, rnd, s, urls, keys, args.pages, args.links,
                                parent.buckets, rng)
                    for s in range(args.shards)
                ]  # fmt: skip
                touched = {b for r in reports for p in (r.fetched, r.links) for b in p.row_groups}
                gen_summary = gen_mod.selection_summary(rnd, cfg, 0, {}, 0, False, None)
                gen_summary["step"] = "stream"
                work = Work(rnd, parent.generation + 1, reports, time.time(), gen_summary,
                            buckets=touched)  # fmt: skip
                done = merge_and_commit(crawl, lock, parent, work, cfg, mapper=mapper,
                                        on_step=lambda step: None, t_start=t0)  # fmt: skip
                parent = done.manifest
                window["commit"].append(work.steps["commit"])
                window["checkpoint"].append(time.monotonic() - t0)
                if n % args.every == 0 or n == args.checkpoints:
                    line = {
                        "checkpoint": n,
                        "commit_ms": round(1000 * statistics.fmean(window["commit"]), 2),
                        "checkpoint_ms": round(1000 * statistics.fmean(window["checkpoint"]), 1),
                        "manifest_bytes": os.path.getsize(
                            crawl.path(paths.commit_file(parent.generation))),
                        "lists": len(parent.list_files()),
                        "current_files": sum(len(es) for es in parent.tables.values()),
                        "generations": len(crawl.generations()),
                        "dir_files": dir_files(crawl.root),
                    }  # fmt: skip
                    lines.append(line)
                    print(json.dumps(line), flush=True)
                    window = {"commit": [], "checkpoint": []}
        sql_s, out = sql_seconds(url)
        first, last = lines[0], lines[-1]
        print(json.dumps({
            "checkpoints": args.checkpoints,
            "flat": {k: round(last[k] / max(first[k], 1e-9), 2)
                     for k in ("commit_ms", "checkpoint_ms", "manifest_bytes")},
            "sql_s": round(sql_s, 2),
            "sql_output": out,
        }))  # fmt: skip
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
