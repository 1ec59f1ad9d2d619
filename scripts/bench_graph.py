"""Benchmark the link graph store (issue 17 item 1; not a test): bits per arc, query time, and the
cost per page of writing edges.

Crawls the sample web on loopback (or takes an existing crawl with ``--crawl``), builds the graph
of its current generation in this process, and prints one JSON line::

    {"nodes", "edges", "arcs", "bits_per_arc_out", "bits_per_arc_in", "index_bits_per_arc",
     "build_s", "query_ms_cold", "query_ms_warm", "edges_write_us_per_page"}

``bits_per_arc_*`` count the coded lists (degrees included), ``index_bits_per_arc`` the block
index of both directions; WebGraph reports about 2-3 bits per link on web graphs in lexicographic
URL order (Boldi & Vigna 2004, Table 2). ``query_ms_cold`` opens a new :class:`LinkGraph` per query
(files read), ``query_ms_warm`` reuses one. ``edges_write_us_per_page``: appending a page's edges
as the fetch worker does (60 links a page) plus building and writing the Parquet file, CPU per page.

    python scripts/bench_graph.py --hosts 10 --pages 1000
    python scripts/bench_graph.py --crawl /tmp/pydoc/crawl
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from batchcrawl.graph import LinkGraph, build_graph  # noqa: E402
from batchcrawl.store import schemas  # noqa: E402
from batchcrawl.store.crawldir import CrawlDir  # noqa: E402


def crawl_sample(root: Path, hosts: int, pages: int, rounds: int) -> CrawlDir:
    from round_helpers import new_crawl, round_config, sample_web, serve

    from batchcrawl.round import run_rounds

    web = sample_web(hosts=hosts, pages=pages, links_per_page=20)
    cfg = round_config()
    with serve(web):
        crawl = new_crawl(root / "crawl", cfg, web.seeds())
        run_rounds(crawl.url, cfg, rounds)
    return crawl


def query_times(crawl: CrawlDir, keys: list[int]) -> tuple[float, float]:
    cold, warm = [], []
    graph = LinkGraph.open(crawl)
    for key in keys:
        t0 = time.perf_counter()
        fresh = LinkGraph.open(crawl)
        fresh.outlinks_of_key(key)
        fresh.inlinks_of_key(key)
        cold.append(time.perf_counter() - t0)
        graph.outlinks_of_key(key)
        t0 = time.perf_counter()
        graph.outlinks_of_key(key)
        graph.inlinks_of_key(key)
        warm.append(time.perf_counter() - t0)
    return statistics.median(cold) * 1e3 / 2, statistics.median(warm) * 1e3 / 2


def edges_write_cost(pages: int = 2000, links: int = 60) -> float:
    """CPU microseconds per page to append edges (as ``FetchWorker._emit_edges``) and write them
    (best of 3: the machine is shared)."""
    return min(_edges_write_once(pages, links) for _ in range(3))


def _edges_write_once(pages: int, links: int) -> float:
    rng = np.random.default_rng(0)
    canon = [
        [(int(k), "u", "a", False) for k in rng.integers(0, 2**63, links)] for _ in range(pages)
    ]
    t0 = time.process_time()
    cols: dict[str, list] = {c: [] for c in schemas.schema("edges").names}
    for i, canonical in enumerate(canon):
        n = len(canonical)
        cols["src_url_key"].extend([i] * n)
        cols["dst_url_key"].extend([link[0] for link in canonical])
        cols["round"].extend([1] * n)
        cols["tag"].extend([link[2] for link in canonical])
    table = pa.table(cols, schema=schemas.schema("edges"))
    pq.write_table(table, io.BytesIO(), compression="zstd")
    return (time.process_time() - t0) * 1e6 / pages


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--crawl", help="an existing crawl (default: crawl the sample web)")
    ap.add_argument("--hosts", type=int, default=10)
    ap.add_argument("--pages", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-graph-") as tmp:
        if args.crawl:
            crawl = CrawlDir.open(args.crawl)
        else:
            crawl = crawl_sample(Path(tmp), args.hosts, args.pages, args.rounds)
        t0 = time.perf_counter()
        doc = build_graph(crawl)
        build_s = time.perf_counter() - t0
        src = crawl.read_current("edges", ["src_url_key"]).column(0).to_numpy()
        keys = [int(k) for k in np.unique(src)[: args.queries]]
        cold, warm = query_times(crawl, keys)
        arcs = max(doc["arcs"], 1)
        out = {
            "nodes": doc["nodes"],
            "edges": doc["edges"],
            "arcs": doc["arcs"],
            "bits_per_arc_out": round(8 * doc["bytes"]["out"]["bytes"] / arcs, 2),
            "bits_per_arc_in": round(8 * doc["bytes"]["in"]["bytes"] / arcs, 2),
            "index_bits_per_arc": round(
                8 * sum(d["index_bytes"] for d in doc["bytes"].values()) / arcs, 2
            ),
            "build_s": round(build_s, 3),
            "query_ms_cold": round(cold, 3),
            "query_ms_warm": round(warm, 3),
            "edges_write_us_per_page": round(edges_write_cost(), 2),
        }
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
