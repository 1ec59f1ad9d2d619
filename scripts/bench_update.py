"""Benchmark a round boundary's update step on its own (not a test).

Crawls the sample web (H hosts, N pages, served from its own process on loopback) for R rounds with
``batchcrawl crawl``'s driver, then merges the last round's facts into its parent generation again,
``--repeat`` times, with :func:`batchcrawl.frontier.updatedb.updatedb` (what ``Crawler.finish_round``
and the stream's micro-batch call) on a fresh embedded cluster (the round's own mapper, one Dask
task per bucket) or on threads of this process (``--mapper threads``). The first repeat warms the
workers up (imports, footers) and is left out of the medians. Prints one JSON line::

    {"rounds", "facts": {"fetched", "links", "edges"}, "mapper", "repeats",
     "updatedb_s": median wall seconds, "updatedb_s_all", "by_merge_s": medians of the merges' ends,
     "fact_footers_parsed": fact-file footers parsed per repeat by the processes that ran the
     bucket tasks (median; :class:`batchcrawl.store.shuffle.FooterCache` misses: 0 once warm, as
     the files do not change), "fact_footers_parsed_first": the same in the warm-up repeat
     (a round's boundary: each worker parses each fact file's footer once)}

``--mapper threads`` runs every task in this process, one at a time (the library's
:func:`~batchcrawl.frontier.runs.thread_mapper`): CPU per boundary without the cluster.
``--serial`` runs the three merges one after another, as rounds did before ``updatedb``.
The repeats write the files of the last committed generation again (the same facts merged into the
same parent, at a later ``now``, so due times differ). Before each timed repeat the files the one
before wrote are deleted, so that every repeat writes new files, as a round does: replacing a file
costs more than creating one (on ext4, a rename over an existing file flushes the new file's data,
``auto_da_alloc``: ~0.3 s of the bucket tasks' time per boundary at 50,000 pages, beside the
driver's steps that end the boundary). Harmless only because the crawl is this script's temporary
directory, removed at the end; never point it at a crawl of yours. Compare runs of two trees back
to back on the same machine; the script prints rates and medians, tests never time anything.

    python scripts/bench_update.py --hosts 500 --pages 50000 --rounds 3 --repeat 6
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from batchcrawl.config import load_config, loopback_test_config, to_toml
from batchcrawl.frontier.inject import inject
from batchcrawl.frontier.runs import thread_mapper
from batchcrawl.frontier.updatedb import updatedb
from batchcrawl.round import dask_client, dask_mapper, run_rounds
from batchcrawl.store import paths, shuffle
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.shuffle import Partitioned
from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.urls import bucket_ids

HERE = Path(__file__).resolve().parent
#: The column each partitioned fact table is bucketed by (:mod:`batchcrawl.store.shuffle`).
BUCKET_KEYS = {"fetched": "url_key", "links": "dst_url_key", "edges": "src_url_key"}


def partitioned(crawl: CrawlDir, table: str, entry, buckets: int) -> Partitioned:
    """A committed fact file's :class:`Partitioned` index, rebuilt from its row groups' keys (the
    round kept it in memory only)."""
    groups: dict[int, list[int]] = {}
    with crawl.fs.open(crawl.path(entry.path), "rb") as fh:
        pf = pq.ParquetFile(fh)
        for i in range(pf.num_row_groups):
            keys = pf.read_row_group(i, columns=[BUCKET_KEYS[table]]).column(0).to_numpy()
            for b in np.unique(bucket_ids(keys, buckets)).tolist():
                groups.setdefault(int(b), []).append(i)
    return Partitioned(entry, {b: tuple(g) for b, g in groups.items()})


def round_facts(crawl: CrawlDir, rnd: int, buckets: int) -> dict[str, list[Partitioned]]:
    """Round ``rnd``'s committed ``fetched``, ``links`` and ``edges`` files, shard by shard."""
    manifest = crawl.manifest()
    return {
        table: [
            partitioned(crawl, table, e, buckets)
            for e in sorted(manifest.tables.get(table, ()), key=lambda e: e.path)
            if paths.parse_round(e.path) == rnd
        ]
        for table in BUCKET_KEYS
    }


def files_written_since(root: Path, since: float) -> list[Path]:
    """The Parquet files under ``root`` modified at or after ``since`` (epoch seconds): what one
    ``updatedb`` wrote (it writes no manifest)."""
    return [
        p for p in root.rglob("*")
        if p.is_file() and p.stat().st_mtime >= since and p.suffix == ".parquet"
    ]  # fmt: skip


def footer_misses(dask_worker=None) -> int:
    """Footers parsed so far by this process's fact-file cache (:data:`shuffle.FOOTERS`)."""
    return shuffle.FOOTERS.misses


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, crawl, time the repeats, print the JSON line; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--pages", type=int, default=50_000)
    ap.add_argument(
        "--rounds", type=int, default=3, help="rounds crawled; the last is merged again"
    )
    ap.add_argument("--repeat", type=int, default=6, help="merges timed (the first is a warm-up)")
    ap.add_argument("--mapper", choices=["dask", "threads"], default="dask")
    ap.add_argument(
        "--serial",
        action="store_true",
        help="the three merges one after another (as rounds ran them before updatedb)",
    )
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.KEY=V")
    args = ap.parse_args(argv)
    if args.repeat < 2:
        ap.error("--repeat must be at least 2 (the first is a warm-up)")

    with tempfile.TemporaryDirectory() as tmp:
        server = subprocess.Popen(
            [sys.executable, str(HERE / "serve_sample_web.py"), "--hosts", str(args.hosts),
             "--pages", str(args.pages), "--seconds", "3600"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            info = json.loads(server.stdout.readline())
            web = SampleWeb(args.hosts, args.pages).bind(info["port"])
            cfg = loopback_test_config(
                politeness={"host_delay_s": 0.0, "ip_delay_s": 0.0, "ip_concurrency": 64},
                generate={"max_urls_per_host": 100_000},
            )
            cfg = load_config(files=[("bench", to_toml(cfg))], environ={}, sets=args.sets)
            crawl = CrawlDir.create(os.path.join(tmp, "crawl"), to_toml(cfg), cfg.frontier.buckets)
            inject(crawl, cfg, web.seeds())
            summaries = run_rounds(crawl.url, cfg, args.rounds)
        finally:
            server.terminate()
            server.wait()
        last = crawl.manifest()
        parent = crawl.manifest(last.generation - 1)
        rnd = summaries[-1]["round"]
        facts = round_facts(crawl, rnd, last.buckets)
        times, merges, counts = [], [], []
        with dask_client(cfg) as client:
            mapper = dask_mapper(client) if args.mapper == "dask" else thread_mapper(1)

            def parsed() -> int:  # footers parsed by the processes that ran the bucket tasks
                if args.mapper == "threads":
                    return footer_misses()
                return sum(client.run(footer_misses).values())

            written: list[Path] = []
            for _ in range(args.repeat):
                for path in written:  # what the repeat before wrote: this one writes new files
                    path.unlink()
                before = parsed()
                started = time.time()
                t0 = time.monotonic()
                done = updatedb(
                    crawl, parent, rnd, facts["fetched"], facts["links"], facts["edges"], cfg,
                    time.time(), mapper=mapper, parallel=not args.serial,
                )  # fmt: skip
                times.append(time.monotonic() - t0)
                merges.append(done.seconds)
                counts.append(parsed() - before)
                written = written or files_written_since(Path(crawl.root), started)
        timed = times[1:]
        print(json.dumps({
            "rounds": len(summaries),
            "facts": {t: sum(p.entry.rows for p in parts) for t, parts in facts.items()},
            "mapper": args.mapper,
            "serial": args.serial,
            "repeats": len(timed),
            "updatedb_s": round(statistics.median(timed), 3),
            "updatedb_s_all": [round(t, 3) for t in times],
            "by_merge_s": {k: round(statistics.median(m[k] for m in merges[1:]), 3)
                           for k in merges[0]},
            "fact_footers_parsed": statistics.median(counts[1:]),
            "fact_footers_parsed_first": counts[0],
        }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
