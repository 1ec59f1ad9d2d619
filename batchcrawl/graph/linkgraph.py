"""Queries of the link graph store: in- and out-links of a URL (Manning, Raghavan & Schütze §20.4,
the connectivity server), and the decoded arcs as an Arrow table for DuckDB.

A query reads one partition's node file (key -> id), decodes one block of one list file, and maps
the ids back to keys and URLs through the node files of the partitions they fall in; files are read
once per :class:`LinkGraph` and kept.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

import batchcrawl.graph.codec as codec
from batchcrawl.errors import CrawlDirError
from batchcrawl.graph.build import read_graph_manifest
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.urls import bucket_of, canonicalize, url_key


class Link(NamedTuple):
    """One neighbour: its url key and canonical URL (None if the frontier had no row for it)."""

    url_key: int
    url: str | None


class LinkGraph:
    """The link graph built from one generation of a crawl (``batchcrawl graph build``).

    Use :meth:`open`. Nodes are canonical URLs (their url keys); an arc ``u -> v`` means some page
    ``u`` fetched up to that generation links to ``v`` (once, however often it does).
    """

    def __init__(self, crawl: CrawlDir, doc: dict) -> None:
        self.crawl = crawl
        self.doc = doc
        self.generation = int(doc["generation"])
        self.first = np.asarray(doc["first"], dtype=np.int64)
        self.parts = int(doc["parts"])
        self._nodes: dict[int, tuple[np.ndarray, list[str | None]]] = {}
        self._lists: dict[tuple[str, int], codec.CodedLists] = {}

    @classmethod
    def open(cls, crawl: CrawlDir, generation: int | None = None) -> LinkGraph:
        """The graph of ``generation``, or by default of the newest committed generation that
        has one.

        Raises
        ------
        CrawlDirError
            No such graph; the message says to run ``batchcrawl graph build``.
        """
        if generation is not None:
            crawl.manifest(generation)  # a generation gc removed: say so, not "build the graph"
        gens = [generation] if generation is not None else crawl.generations()[::-1]
        for gen in gens:
            doc = read_graph_manifest(crawl, gen)
            if doc is not None:
                return cls(crawl, doc)
        which = f"generation {generation}" if generation is not None else "any generation"
        raise CrawlDirError(
            f"{crawl.url}: no link graph for {which}; build it with `batchcrawl graph build "
            f"{crawl.url}`"
        )

    # -- nodes -----------------------------------------------------------------------------------
    def _part_nodes(self, part: int) -> tuple[np.ndarray, list[str | None]]:
        if part not in self._nodes:
            rel = paths.graph_nodes(self.generation, part)
            table = self.crawl.read_table("graph_nodes", [rel])
            keys = table.column("url_key").to_numpy().astype(np.uint64)
            self._nodes[part] = (keys, table.column("url").to_pylist())
        return self._nodes[part]

    def node_id(self, key: int) -> int | None:
        """Id of the node with url key ``key``, or None if it is not in the graph."""
        part = bucket_of(int(key), self.parts)
        keys, _ = self._part_nodes(part)
        at = int(np.searchsorted(keys, np.uint64(key)))
        if at < len(keys) and int(keys[at]) == int(key):
            return int(self.first[part]) + at
        return None

    def links_of_ids(self, ids: np.ndarray) -> list[Link]:
        """The url key and URL of each node id of ``ids`` (int64, shape ``(n,)``)."""
        parts = np.searchsorted(self.first, ids, side="right") - 1
        out = []
        for node, part in zip(np.asarray(ids).tolist(), parts.tolist(), strict=True):
            keys, urls = self._part_nodes(part)
            local = node - int(self.first[part])
            out.append(Link(int(keys[local]), urls[local]))
        return out

    # -- lists -----------------------------------------------------------------------------------
    def _part_lists(self, direction: str, part: int) -> codec.CodedLists:
        if (direction, part) not in self._lists:
            rel = paths.graph_lists(self.generation, direction, part)
            raw = self.crawl.fs.cat_file(self.crawl.path(rel))
            try:
                self._lists[direction, part] = codec.from_bytes(raw, self.crawl.path(rel))
            except ValueError as exc:
                raise CrawlDirError(f"{exc}; rebuild the graph (delete its graph.json)") from None
        return self._lists[direction, part]

    def neighbour_ids(self, direction: str, key: int) -> np.ndarray:
        """Sorted ids of the successors (``"out"``) or predecessors (``"in"``) of the node with
        url key ``key``; empty if it is not in the graph."""
        node = self.node_id(key)
        if node is None:
            return np.zeros(0, dtype=np.int64)
        part = bucket_of(int(key), self.parts)
        return codec.decode_list(self._part_lists(direction, part), int(self.first[part]), node)

    def outlinks_of_key(self, key: int) -> list[Link]:
        """Pages linked from the page with url key ``key`` (sorted by node id)."""
        return self.links_of_ids(self.neighbour_ids("out", key))

    def inlinks_of_key(self, key: int) -> list[Link]:
        """Pages linking to the page with url key ``key`` (sorted by node id)."""
        return self.links_of_ids(self.neighbour_ids("in", key))

    def outlinks(self, url: str) -> list[Link]:
        """Pages ``url`` links to (``url`` canonicalized first; :class:`InvalidURL` if it does not
        parse). Empty if ``url`` is not in the graph or has no out-links."""
        return self.outlinks_of_key(url_key(canonicalize(url)))

    def inlinks(self, url: str) -> list[Link]:
        """Pages linking to ``url`` (canonicalized first). Empty if none is known."""
        return self.inlinks_of_key(url_key(canonicalize(url)))

    # -- everything ------------------------------------------------------------------------------
    def arcs(self) -> pa.Table:
        """Every arc, decoded: columns ``src_url_key``, ``dst_url_key`` (uint64), sorted by
        source node id then target id. DuckDB reads it once registered (``con.register("arcs", t)``)."""
        srcs, dsts = [], []
        for part in range(self.parts):
            n = int(self.first[part + 1] - self.first[part])
            s, d = codec.decode_all(self._part_lists("out", part), int(self.first[part]), n)
            srcs.append(s)
            dsts.append(d)
        src = np.concatenate(srcs) if srcs else np.zeros(0, np.int64)
        dst = np.concatenate(dsts) if dsts else np.zeros(0, np.int64)
        keys = self._all_keys()
        return pa.table(
            {
                "src_url_key": pa.array(keys[src], pa.uint64()),
                "dst_url_key": pa.array(keys[dst], pa.uint64()),
            }
        )

    def _all_keys(self) -> np.ndarray:
        parts = [self._part_nodes(p)[0] for p in range(self.parts)]
        return np.concatenate(parts) if parts else np.zeros(0, np.uint64)
