"""Benchmark of the frontier steps (not a test): update (DRUM merge of links) and generate.

    python scripts/bench_frontier.py --frontier-urls 1000000 --links 1000000

With ``--rounds R`` it runs R successive updates of M links each (half to known URLs, half new),
each followed by generate, printing per round ``update_s``, ``generate_s``, ``rows_rewritten``,
``bytes_written``; then a compaction of every bucket and a generate after it.

Builds, in a child process (so its memory does not count), a crawl whose frontier holds N synthetic
URLs over a Zipf-like host distribution (host i gets a share proportional to 1/i; three hosts per
pay-level domain; statuses 55 % queued, 30 % fetched, 10 % gone, 5 % filtered; ``--due-share`` of
the queued ones due now, the others within 30 days), and M links of one
round (half to known URLs, half to new ones), written as ``links`` files of two shards. Then, in
this process, it runs :func:`batchcrawl.frontier.update.update` with the links and commits, then
:func:`batchcrawl.frontier.generate.generate` (the drivers a round maps on Dask, here on threads), and prints one JSON line per phase::

    {"phase", "frontier_urls", "links", "seconds", "links_per_s", "rows_per_s", "peak_rss_mb"}

``rows_per_s`` is frontier rows merged (update) or scanned (generate) per second; ``peak_rss_mb``
is this process's peak resident set so far (``resource.getrusage``). Run each N in a fresh process.
Everything stays on the local disk (a temporary directory unless ``--dir``); no network.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from batchcrawl.config import Config, to_toml  # noqa: E402
from batchcrawl.frontier.drum import partition_by_bucket  # noqa: E402
from batchcrawl.frontier.runs import write_bucket  # noqa: E402
from batchcrawl.frontier.table import new_rows  # noqa: E402
from batchcrawl.store import schemas  # noqa: E402
from batchcrawl.store.crawldir import CrawlDir  # noqa: E402
from batchcrawl.store.paths import bucket_base, round_file  # noqa: E402
from batchcrawl.urls import url_keys  # noqa: E402

NOW = 1_714_564_800.0  # 2024-05-01T12:00:00Z, epoch seconds
CHUNK = 1_000_000


def config(args) -> Config:
    return Config().replace(
        frontier={"buckets": args.buckets, "drum_batch_bytes": args.drum_batch_bytes},
        generate={"max_urls_per_round": args.max_urls_per_round},
        filters={"seed_scope": "none"},
    )


def host_sampler(hosts: int, rng: np.random.Generator):
    p = 1.0 / np.arange(1, hosts + 1)
    cdf = np.cumsum(p / p.sum())
    return lambda n: np.minimum(np.searchsorted(cdf, rng.random(n)), hosts - 1)


def url_parts(ids: np.ndarray, host_idx: np.ndarray):
    h = pa.array(host_idx.astype(np.int64)).cast(pa.string())
    d = pa.array((host_idx // 3).astype(np.int64)).cast(pa.string())
    host = pc.binary_join_element_wise("h", h, ".d", d, ".test", "")
    domain = pc.binary_join_element_wise("d", d, ".test", "")
    url = pc.binary_join_element_wise("http://", host, "/p/", pa.array(ids).cast(pa.string()), "")
    return url, host, domain


def due_times(queued: np.ndarray, share: float, rng) -> pa.Array:
    """``next_fetch_time`` of the base rows: a queued row is due now with probability ``share``
    (since up to a day), else within the next 30 days; other rows never (null)."""
    n = len(queued)
    now_ms = int(NOW * 1000)
    later = rng.random(n) >= share
    offset = np.where(later, rng.integers(1, 30 * 86_400_000, n), -rng.integers(0, 86_400_000, n))
    return pa.array(now_ms + offset, pa.int64(), mask=~queued).cast(pa.timestamp("ms"))


def build(args) -> None:
    """Child process: write the crawl (frontier of N URLs, M links of round 1)."""
    cfg = config(args)
    rng = np.random.default_rng(42)
    sample = host_sampler(args.hosts, rng)
    root = Path(args.dir)
    crawl = CrawlDir.create(str(root / "crawl"), to_toml(cfg), args.buckets)
    spill = root / "spill"
    spill.mkdir()
    writers: dict[int, pq.ParquetWriter] = {}
    n = args.frontier_urls
    host_of_id = np.empty(n + args.links, dtype=np.int32)
    statuses = np.array(["queued", "fetched", "gone", "filtered"])
    for start in range(0, n, CHUNK):
        ids = np.arange(start, min(n, start + CHUNK), dtype=np.int64)
        hidx = sample(len(ids))
        host_of_id[ids] = hidx
        url, host, domain = url_parts(ids, hidx)
        st = statuses[np.searchsorted([0.55, 0.85, 0.95], rng.random(len(ids)), side="right")]
        rows = new_rows(
            url_key=url_keys(url.to_pylist()),
            url=url,
            host=host,
            domain=domain,
            depth=1,
            hops_out=0,
            discovered_round=rng.integers(0, 5, len(ids)).astype(np.int32),
            discovered_seq=ids,
            status=pa.array(st),
            reason=pa.array(np.where(st == "filtered", "max_depth", None)).cast(pa.string()),
        )
        rows = rows.set_column(
            rows.schema.get_field_index("next_fetch_time"), "next_fetch_time",
            due_times(st == "queued", args.due_share, rng),
        )  # fmt: skip
        for b, part in partition_by_bucket(rows, args.buckets).items():
            if b not in writers:
                writers[b] = pq.ParquetWriter(spill / f"{b}.parquet", part.schema)
            writers[b].write_table(part)
        del rows, url, host, domain
    for w in writers.values():
        w.close()
    entries = []
    from batchcrawl.store.crawldir import FileEntry

    for b in range(args.buckets):
        path = spill / f"{b}.parquet"
        t = pq.read_table(path) if path.exists() else schemas.empty("frontier")
        t = t.take(pa.array(np.argsort(t.column("url_key").to_numpy(), kind="stable")))
        e = write_bucket(crawl, bucket_base(1, b), t, row_group_bytes=args.drum_batch_bytes // 4)
        entries.append(FileEntry(e.path, e.rows, b, False, e.due))
        path.unlink(missing_ok=True)
    m = crawl.manifest()
    crawl.commit(m, {"frontier": entries}, {"step": "bench-build"}, round=0)
    # links: half to known URLs, half to new URLs (ids >= n), in discovery order per shard
    m_links = args.links
    known = rng.integers(0, n, m_links // 2)
    new = n + np.arange(m_links - m_links // 2)
    host_of_id[new] = sample(len(new))
    dst = rng.permutation(np.concatenate([known, new]))
    src = rng.integers(0, n, m_links)
    link_entries = []
    for shard in range(2):
        sel = np.arange(shard, m_links, 2)
        url, host, domain = url_parts(dst[sel], host_of_id[dst[sel]])
        src_url, _, _ = url_parts(src[sel], host_of_id[src[sel]])
        t = pa.table(
            {
                "round": pa.array(np.ones(len(sel), np.int32)),
                "shard": pa.array(np.full(len(sel), shard, np.int32)),
                "seq": pa.array(np.arange(len(sel), dtype=np.int64)),
                "src_url_key": pa.array(url_keys(src_url.to_pylist())),
                "dst_url_key": pa.array(url_keys(url.to_pylist())),
                "dst_url": url,
                "dst_host": host,
                "dst_domain": domain,
                "depth": pa.array(np.full(len(sel), 2, np.int32)),
                "hops_out": pa.array(np.zeros(len(sel), np.int32)),
                "tag": pa.array(["a"] * len(sel)),
                "nofollow": pa.array(np.zeros(len(sel), bool)),
            }
        )
        link_entries.append(crawl.write_table("links", round_file("links", 1, shard), t))
    (root / "links.json").write_text(json.dumps([e.to_json() for e in link_entries]))
    shutil.rmtree(spill)


def peak_rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def emit(phase: str, args, seconds: float, links: int | None, rows: int) -> None:
    print(
        json.dumps(
            {
                "phase": phase,
                "frontier_urls": args.frontier_urls,
                "links": args.links,
                "seconds": round(seconds, 3),
                "links_per_s": None if links is None else round(links / seconds),
                "rows_per_s": round(rows / seconds),
                "peak_rss_mb": peak_rss_mb(),
            }
        ),
        flush=True,
    )


def next_links(rnd: int, first: pa.Table, args, rng) -> pa.Table:
    """Round ``rnd``'s M links: half to known URLs (round 1's targets), half to new URLs."""
    m = args.links
    known = first.take(pa.array(rng.integers(0, first.num_rows, m // 2)))
    ids = args.frontier_urls + rnd * m + np.arange(m - m // 2)
    url, host, domain = url_parts(ids, host_sampler(args.hosts, rng)(len(ids)))
    fresh = pa.table(
        {
            "dst_url_key": pa.array(url_keys(url.to_pylist())),
            "dst_url": url,
            "dst_host": host,
            "dst_domain": domain,
        }
    )
    dst = pa.concat_tables([known.select(fresh.column_names), fresh], promote_options="permissive")
    n = dst.num_rows
    return pa.table(
        {
            "round": pa.array(np.full(n, rnd, np.int32)),
            "shard": pa.array(np.zeros(n, np.int32)),
            "seq": pa.array(np.arange(n, dtype=np.int64)),
            "src_url_key": pa.array(np.ones(n, np.uint64)),
            **{c: dst.column(c) for c in fresh.column_names},
            "depth": pa.array(np.full(n, 2, np.int32)),
            "hops_out": pa.array(np.zeros(n, np.int32)),
            "tag": pa.array(["a"] * n),
            "nofollow": pa.array(np.zeros(n, bool)),
            "filter_reason": pa.nulls(n, pa.string()),
        }
    )


def bytes_of(crawl, before, after) -> int:
    old = {e.path for e in before}
    return sum(os.path.getsize(crawl.path(e.path)) for e in after if e.path not in old)


def run(args) -> None:
    from batchcrawl.frontier import runs
    from batchcrawl.frontier.generate import generate
    from batchcrawl.frontier.runs import thread_mapper
    from batchcrawl.frontier.update import update
    from batchcrawl.store.crawldir import FileEntry

    cfg = config(args)
    root = Path(args.dir)
    crawl = CrawlDir.open(str(root / "crawl"))
    rng = np.random.default_rng(7)
    link_entries = [
        FileEntry(e["path"], e["rows"]) for e in json.loads((root / "links.json").read_text())
    ]
    first = crawl.read_table("links", link_entries)
    mapper = thread_mapper(args.workers)
    for rnd in range(1, args.rounds + 1):
        links = first if rnd == 1 else next_links(rnd, first, args, rng)
        m = crawl.manifest()
        t0 = time.perf_counter()
        entries, s = update(crawl, m, rnd, None, links, cfg, NOW, mapper=mapper)
        m2 = crawl.commit(m, {"frontier": entries}, s, round=rnd)
        dt_update = time.perf_counter() - t0
        written = bytes_of(crawl, m.tables["frontier"], m2.tables["frontier"])
        t0 = time.perf_counter()
        res = generate(crawl, m2, rnd + 1, cfg, NOW, mapper=mapper, refilter_urls=args.refilter)
        dt_gen = time.perf_counter() - t0
        emit_round(rnd, args, dt_update, dt_gen, s, written, res.summary)
    t0 = time.perf_counter()
    out = runs.compact(crawl, cfg, force=True, workers=args.workers)
    dt_c = time.perf_counter() - t0
    emit_line(
        {"phase": "compact_all", "frontier_urls": args.frontier_urls, "seconds": round(dt_c, 3),
         "rows_written": out["rows_written"],
         "rows_per_s": round(out["rows_written"] / max(dt_c, 1e-9)),
         "peak_rss_mb": peak_rss_mb(), **current_bytes(crawl)}
    )  # fmt: skip
    t0 = time.perf_counter()
    res = generate(crawl, crawl.manifest(), args.rounds + 1, cfg, NOW, mapper=mapper)
    dt_gen = time.perf_counter() - t0
    emit_line(
        {"phase": "generate_after_compaction", "frontier_urls": args.frontier_urls,
         "seconds": round(dt_gen, 3), "selected": res.summary["selected"],
         "peak_rss_mb": peak_rss_mb()}
    )  # fmt: skip


def disk(root: Path, urls: int) -> dict:
    """Bytes on disk under ``root``: the frontier's files (``frontier/``), everything, and both
    per URL (``urls``: the frontier's rows)."""
    frontier = total = 0
    for path in root.rglob("*"):
        if path.is_file():
            size = path.stat().st_size
            total += size
            if "frontier" in path.relative_to(root).parts[:1]:
                frontier += size
    return {"frontier_bytes": frontier, "dir_bytes": total,
            "frontier_bytes_per_url": round(frontier / max(urls, 1), 2),
            "dir_bytes_per_url": round(total / max(urls, 1), 2)}  # fmt: skip


def current_bytes(crawl) -> dict:
    """Bytes of the current generation's frontier files (base and due-index side files), its
    rows (URLs) and bytes per URL; older generations' files are not counted."""
    total = rows = 0
    for e in crawl.manifest().tables["frontier"]:
        rows += e.rows
        for rel in (e.path, e.due):
            if rel is not None:
                total += os.path.getsize(crawl.path(rel))
    return {"frontier_rows": rows, "frontier_bytes": total,
            "frontier_bytes_per_url": round(total / max(rows, 1), 2)}  # fmt: skip


def emit_line(data: dict) -> None:
    print(json.dumps(data), flush=True)


def emit_round(rnd, args, dt_update, dt_gen, s, written, gen_summary) -> None:
    frontier = s["frontier_rows_after"]
    emit_line(
        {"phase": "round", "round": rnd, "frontier_urls": frontier, "links": args.links,
         "update_s": round(dt_update, 3), "generate_s": round(dt_gen, 3),
         "rows_rewritten": s["rows_written"], "bytes_written": written,
         "bytes_per_frontier_row": round(written / max(frontier, 1), 3),
         "selected": gen_summary["selected"],
         "due_rows_read": gen_summary["frontier_rows"] - gen_summary["not_selected"].get("not_due", 0),
         "peak_rss_mb": peak_rss_mb()}
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--frontier-urls", type=int, required=True, help="N: URLs in the frontier")
    ap.add_argument("--links", type=int, required=True, help="M: links merged by update")
    ap.add_argument("--buckets", type=int, default=64, help="DRUM buckets K (default 64)")
    ap.add_argument("--hosts", type=int, default=0, help="distinct hosts (default N/100)")
    ap.add_argument("--drum-batch-bytes", type=int, default=Config().frontier.drum_batch_bytes)
    ap.add_argument("--max-urls-per-round", type=int, default=Config().generate.max_urls_per_round)
    ap.add_argument("--workers", type=int, default=2, help="threads merging/scanning buckets")
    ap.add_argument("--rounds", type=int, default=1, help="R: successive updates of M links each")
    ap.add_argument(
        "--due-share", type=float, default=0.02,
        help="share of the base's queued URLs due now (the rest: within 30 days; default 0.02)",
    )  # fmt: skip
    ap.add_argument(
        "--refilter",
        action="store_true",
        help="re-apply the filter chain to every selected URL (as after a config "
        "change); default: steady state, filters unchanged",
    )
    ap.add_argument("--dir", help="work directory (default: a new temporary directory, removed)")
    ap.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument(
        "--reuse-build", action="store_true",
        help="with --dir: use the crawl already built there (a copy of a --build-only --dir)",
    )  # fmt: skip
    ap.add_argument("--verbose", action="store_true", help="print step summaries on stderr")
    args = ap.parse_args()
    args.hosts = args.hosts or max(10, args.frontier_urls // 100)
    if args.build_only:
        build(args)
        return
    tmp = None
    if not args.dir:
        tmp = tempfile.mkdtemp(prefix="bench_frontier_")
        args.dir = tmp
    try:
        argv = [a for a in sys.argv[1:] if a != "--verbose"]
        if "--dir" not in argv:
            argv += ["--dir", args.dir]
        if not (args.reuse_build and (Path(args.dir) / "links.json").exists()):
            t0 = time.perf_counter()
            subprocess.run(
                [sys.executable, __file__, *argv, "--build-only"],
                check=True,
                env={**os.environ, "PYTHONHASHSEED": "0"},
            )
            emit_line(
                {"phase": "build", "frontier_urls": args.frontier_urls,
                 "seconds": round(time.perf_counter() - t0, 3),
                 "child_peak_rss_mb": round(
                     resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0, 1),
                 **disk(Path(args.dir) / "crawl", args.frontier_urls)}
            )  # fmt: skip
        run(args)
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
