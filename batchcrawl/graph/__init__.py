"""The link graph (docs/design.md §8b): every outlink kept as an edge by the fetch workers, built
per generation into a compressed adjacency store of out- and in-links (WebGraph-style gap +
variable-byte coded lists in blocks) that answers link queries in milliseconds (MRS §20.4)."""

from batchcrawl.graph.build import build_graph
from batchcrawl.graph.linkgraph import Link, LinkGraph

__all__ = ["Link", "LinkGraph", "build_graph"]
