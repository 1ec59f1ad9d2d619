"""``batchcrawl graph build``: a generation's ``edges`` -> the compressed link graph (docs/design.md
§8b; Manning, Raghavan & Schütze §20.4, the connectivity server; Boldi & Vigna, WebGraph).

A Dask graph like a round, in two steps of one task per partition, partitions being the DRUM
buckets (``url_key % K``, :func:`batchcrawl.urls.bucket_ids`), so a partition's URLs come from one
frontier bucket:

1. **nodes** — the partition's node keys (sources and targets of every edge), sorted, with their
   URLs from the frontier, written as ``graph/gen=G/nodes/part=PPP.parquet``. The driver sums the
   counts into each partition's first node id: node ids run by (partition, key).
2. **lists** — every arc is mapped to ids; the partition's out-lists (arcs from its nodes) and
   in-lists (arcs into them) are sorted, de-duplicated and gap + variable-byte coded in blocks
   (:mod:`batchcrawl.graph.codec`), written as ``graph/gen=G/out/part=PPP.bin`` and ``.../in/...``.

``graph/gen=G/graph.json`` is written last and only if absent: the graph exists exactly when it
does (a build that dies leaves files that nothing lists; rerun it). ``gc`` keeps the graph as long
as generation G. The graph is a set of arcs: duplicate edges (a link repeated on a page, or seen
again in a later round) become one arc; self-loops are kept.

Memory: each task reads the source and target key columns of every edge file of the generation,
and the lists step also every node key (8 bytes per node, as WebGraph's in-memory offsets).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

import batchcrawl.graph.codec as codec
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.urls import bucket_ids

FORMAT = 1


def read_arcs(crawl: CrawlDir, edge_files: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` uint64 key arrays of every row of ``edge_files`` (duplicates included)."""
    table = crawl.read_table("edges", list(edge_files), columns=["src_url_key", "dst_url_key"])
    return (
        table.column("src_url_key").to_numpy().astype(np.uint64),
        table.column("dst_url_key").to_numpy().astype(np.uint64),
    )


def nodes_task(
    crawl_url: str,
    generation: int,
    part: int,
    parts: int,
    edge_files: list[str],
    frontier: list[str],
) -> int:
    """Step 1 for partition ``part`` of ``parts``: write its nodes (key and URL, sorted by key)
    and return their number. ``frontier`` are the frontier files holding its URLs."""
    crawl = CrawlDir(crawl_url)
    src, dst = read_arcs(crawl, edge_files)
    keys = np.concatenate((src, dst))
    keys = np.unique(keys[bucket_ids(keys, parts) == part])
    urls = _urls_of(crawl, frontier, keys)
    table = pa.table({"url_key": pa.array(keys, pa.uint64()), "url": pa.array(urls, pa.string())})
    crawl.write_table("graph_nodes", paths.graph_nodes(generation, part), table)
    return len(keys)


def _urls_of(crawl: CrawlDir, frontier: list[str], keys: np.ndarray) -> list[str | None]:
    """The frontier's URL of each of ``keys`` (sorted uint64), None where it has none."""
    found = crawl.read_table("frontier", frontier, columns=["url_key", "url"])
    fkeys = found.column("url_key").to_numpy().astype(np.uint64)
    if not len(fkeys):
        return [None] * len(keys)
    order = np.argsort(fkeys, kind="stable")
    fkeys = fkeys[order]
    furls = found.column("url").take(pa.array(order)).to_pylist()
    at = np.searchsorted(fkeys, keys)
    hit = (at < len(fkeys)) & (fkeys[np.minimum(at, len(fkeys) - 1)] == keys)
    return [furls[i] if h else None for i, h in zip(at.tolist(), hit.tolist(), strict=True)]


def node_ids(keys: np.ndarray, nodes: list[np.ndarray], first: np.ndarray) -> np.ndarray:
    """Ids (int64) of ``keys`` (uint64, every one a node): partition ``p = key % P`` of the
    sorted per-partition ``nodes``, whose first id is ``first[p]``."""
    keys = np.asarray(keys, dtype=np.uint64)
    part = bucket_ids(keys, len(nodes))
    out = np.empty(len(keys), dtype=np.int64)
    for p in np.unique(part).tolist():
        mask = part == p
        out[mask] = first[p] + np.searchsorted(nodes[p], keys[mask])
    return out


def lists_task(
    crawl_url: str, generation: int, part: int, edge_files: list[str], first: list[int]
) -> dict[str, int]:
    """Step 2 for partition ``part``: code and write its out- and in-lists; return the number of
    distinct arcs and bytes of each direction."""
    crawl = CrawlDir(crawl_url)
    parts = len(first) - 1
    nodes = [
        crawl.read_table("graph_nodes", [paths.graph_nodes(generation, p)], ["url_key"])
        .column(0)
        .to_numpy()
        .astype(np.uint64)
        for p in range(parts)
    ]
    src_key, dst_key = read_arcs(crawl, edge_files)
    src, dst = (
        node_ids(src_key, nodes, np.asarray(first)),
        node_ids(dst_key, nodes, np.asarray(first)),
    )
    lo, hi = first[part], first[part + 1]
    out: dict[str, int] = {}
    for direction, a, b in (("out", src, dst), ("in", dst, src)):
        mine = (a >= lo) & (a < hi)
        arcs = np.unique(np.stack((a[mine], b[mine]), axis=1), axis=0) if mine.any() else None
        a_sorted = arcs[:, 0] if arcs is not None else np.zeros(0, np.int64)
        b_sorted = arcs[:, 1] if arcs is not None else np.zeros(0, np.int64)
        coded = codec.encode(lo, hi - lo, a_sorted, b_sorted)
        raw = codec.to_bytes(coded)
        with crawl.open_output(paths.graph_lists(generation, direction, part)) as fh:
            fh.write(raw)
        out[f"{direction}_arcs"] = len(a_sorted)
        out[f"{direction}_bytes"] = len(coded.data)
        out[f"{direction}_index_bytes"] = len(coded.index) * 8
    return out


def _inline_map(fn: Callable, *iterables: Sequence) -> list:
    return [fn(*args) for args in zip(*iterables, strict=True)]


def build_graph(crawl: CrawlDir, client: Any | None = None, generation: int | None = None) -> dict:
    """Build the link graph of ``generation`` (default current) of ``crawl``; return its manifest.

    Parameters
    ----------
    crawl
        The crawl; the caller holds its writer lock (``gc`` must not run meanwhile).
    client
        A ``distributed.Client`` whose workers see ``crawl.url`` (see
        :func:`batchcrawl.engine.cluster.cluster_url`); None runs the same tasks in this process.
    generation
        Committed generation whose ``edges`` (every round up to it) are built.

    Returns
    -------
    dict
        The ``graph.json`` content: ``generation``, ``parts``, ``first`` (first node id of each
        partition, then the node count; list of ``parts + 1`` ints), ``nodes``, ``edges`` (rows
        read), ``arcs`` (distinct), ``bytes`` per direction, ``files``. An existing graph of that
        generation is returned as it is.
    """
    manifest = crawl.manifest(generation)
    gen = manifest.generation
    existing = read_graph_manifest(crawl, gen)
    if existing is not None:
        return existing
    parts = manifest.buckets
    edge_files = manifest.files("edges")
    frontier: list[list[str]] = [[] for _ in range(parts)]
    for e in manifest.tables.get("frontier", ()):
        frontier[e.bucket if e.bucket is not None else 0].append(e.path)
    url = crawl.url
    if client is None:
        run_map, gather = _inline_map, list
    else:
        run_map, gather = (lambda fn, *it: client.map(fn, *it, pure=False)), client.gather
    counts = gather(run_map(nodes_task, [url] * parts, [gen] * parts, range(parts),
                            [parts] * parts, [edge_files] * parts, frontier))  # fmt: skip
    first = [0, *np.cumsum(counts).tolist()]
    stats = gather(run_map(lists_task, [url] * parts, [gen] * parts, range(parts),
                           [edge_files] * parts, [first] * parts))  # fmt: skip
    files = [paths.graph_nodes(gen, p) for p in range(parts)] + [
        paths.graph_lists(gen, d, p) for d in paths.GRAPH_DIRECTIONS for p in range(parts)
    ]
    doc = {
        "format": FORMAT,
        "generation": gen,
        "parts": parts,
        "block": codec.BLOCK,
        "first": first,
        "nodes": first[-1],
        "edges": manifest.rows("edges"),
        "arcs": sum(s["out_arcs"] for s in stats),
        "bytes": {
            d: {k: sum(s[f"{d}_{k}"] for s in stats) for k in ("bytes", "index_bytes")}
            for d in paths.GRAPH_DIRECTIONS
        },
        "files": files,
    }
    raw = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("utf-8")
    if not crawl.create_exclusive(paths.graph_manifest(gen), raw):
        return read_graph_manifest(crawl, gen)  # another build finished first: same content
    return doc


def read_graph_manifest(crawl: CrawlDir, generation: int) -> dict | None:
    """The ``graph.json`` of ``generation``, or None if its graph was not built."""
    try:
        return json.loads(crawl.fs.cat_file(crawl.path(paths.graph_manifest(generation))))
    except FileNotFoundError:
        return None
