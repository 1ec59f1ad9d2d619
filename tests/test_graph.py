"""The link graph store answers in- and out-link queries exactly like a brute-force reference
(random graphs with empty lists, self-loops and duplicate edges; duplicates become one arc)."""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.graph import LinkGraph, build, build_graph, codec
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.gc import gc
from batchcrawl.store.retention import expire

KEYS = st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=25, unique=True)


def _crawl_with_edges(root: str, buckets: int, edges: list[tuple[int, int]]) -> CrawlDir:
    crawl = CrawlDir.create(root, "# test\n", buckets=buckets)
    half = len(edges) // 2  # two rounds: the graph is built from both
    entries = []
    for rnd, chunk in ((1, edges[:half]), (2, edges[half:])):
        rows = {
            "src_url_key": pa.array([s for s, _ in chunk], pa.uint64()),
            "dst_url_key": pa.array([d for _, d in chunk], pa.uint64()),
            "round": [rnd] * len(chunk),
            "tag": ["a"] * len(chunk),
        }
        entries.append(crawl.write_table("edges", paths.round_file("edges", rnd, 0), rows))
    crawl.commit(crawl.manifest(), {"edges": entries}, {"step": "test"})
    return crawl


@st.composite
def graphs(draw):
    keys = draw(KEYS)
    pair = st.tuples(st.sampled_from(keys), st.sampled_from(keys))
    edges = draw(st.lists(pair, max_size=80))
    edges += [(k, k) for k in draw(st.lists(st.sampled_from(keys), max_size=3))]  # self-loops
    edges += edges[: draw(st.integers(0, len(edges)))]  # duplicates
    return keys, edges, draw(st.integers(1, 5))


@settings(max_examples=40, deadline=None)
@given(graphs(), st.integers(0, 2**64 - 1))
def test_store_answers_like_brute_force(graph, stranger):
    keys, edges, buckets = graph
    out, inn = defaultdict(set), defaultdict(set)
    for s, d in edges:
        out[s].add(d)
        inn[d].add(s)
    with tempfile.TemporaryDirectory() as tmp:
        crawl = _crawl_with_edges(tmp + "/c", buckets, edges)
        doc = build_graph(crawl)
        g = LinkGraph.open(crawl)
        assert doc["arcs"] == len(set(edges))
        assert doc["nodes"] == len({k for e in edges for k in e})
        for key in [*keys, stranger]:
            got_out = [link.url_key for link in g.outlinks_of_key(key)]
            got_in = [link.url_key for link in g.inlinks_of_key(key)]
            assert sorted(got_out) == sorted(out.get(key, ())) and len(got_out) == len(set(got_out))
            assert sorted(got_in) == sorted(inn.get(key, ())) and len(got_in) == len(set(got_in))
        arcs = g.arcs()
        pairs = zip(arcs.column(0).to_pylist(), arcs.column(1).to_pylist(), strict=True)
        assert sorted(pairs) == sorted(set(edges))


@given(st.lists(st.integers(0, 2**64 - 1), max_size=50))
def test_vbyte_round_trip(values):
    data, nbytes = codec.vbyte_encode(np.array(values, dtype=np.uint64))
    assert codec.vbyte_decode(data).tolist() == values
    assert nbytes.sum() == len(data)


def test_rebuild_returns_the_built_graph_and_gc_keeps_it_with_its_generation(tmp_path):
    crawl = _crawl_with_edges(str(tmp_path / "c"), 3, [(1, 2), (2, 3), (3, 1)])
    doc = build_graph(crawl)
    assert build_graph(crawl) == doc
    files = [doc["files"][0], paths.graph_manifest(doc["generation"])]
    gc(crawl, keep=1)
    assert all(crawl.fs.exists(crawl.path(f)) for f in files)
    crawl.commit(crawl.manifest(), {}, {"step": "test"})  # a newer generation without a graph
    assert LinkGraph.open(crawl).generation == doc["generation"]
    gc(crawl, keep=1)
    assert not any(crawl.fs.exists(crawl.path(f)) for f in files)
    with pytest.raises(Exception, match="graph build"):
        LinkGraph.open(crawl)


def _folders(crawl: CrawlDir, top: str) -> list[str]:
    return sorted(os.path.relpath(d, crawl.root) for d, _, _ in os.walk(crawl.path(top)))


def test_gc_and_retention_remove_the_folders_of_a_graph_they_delete(tmp_path):
    """``gc`` (and the automatic retention) deleted an old generation's graph files and left
    empty ``graph/gen=G/{nodes,out,in}`` folders; now those go too, but never a folder that still
    holds a file (a foreign one here)."""
    for how in ("gc", "retention"):
        crawl = _crawl_with_edges(str(tmp_path / how), 2, [(1, 2), (2, 3)])
        gen = build_graph(crawl)["generation"]
        built = [f"graph/gen={gen}", *(f"graph/gen={gen}/{d}" for d in ("in", "nodes", "out"))]
        assert _folders(crawl, "graph") == ["graph", *built]
        crawl.commit(crawl.manifest(), {}, {"step": "test"})
        if how == "gc":
            gc(crawl, keep=1)
        else:
            assert expire(crawl, 1, 0)["expired"] == [0, gen]
        assert _folders(crawl, "graph") == ["graph"], how

    crawl = _crawl_with_edges(str(tmp_path / "foreign"), 2, [(1, 2), (2, 3)])
    gen = build_graph(crawl)["generation"]
    with open(crawl.path(f"graph/gen={gen}/out/notes.txt"), "w") as fh:
        fh.write("not batchcrawl's")
    crawl.commit(crawl.manifest(), {}, {"step": "test"})
    gc(crawl, keep=1)
    assert _folders(crawl, "graph") == ["graph", f"graph/gen={gen}", f"graph/gen={gen}/out"]


def test_gc_removes_the_folders_an_interrupted_graph_build_left(tmp_path, monkeypatch):
    """A ``graph build`` that died after writing the nodes (and creating ``out/``) left an empty
    ``graph/gen=G/`` behind after ``gc`` deleted its files; now the folder goes too."""
    crawl = _crawl_with_edges(str(tmp_path / "c"), 2, [(1, 2), (2, 3)])
    gen = crawl.manifest().generation

    def dies(*args, **kwargs):
        os.makedirs(crawl.path(f"graph/gen={gen}/out"), exist_ok=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(build, "lists_task", dies)
    with pytest.raises(KeyboardInterrupt):
        build_graph(crawl)
    assert os.listdir(crawl.path(f"graph/gen={gen}/nodes"))  # written, never named by a graph
    result = gc(crawl, keep=1, tmp_min_age_s=0)
    assert result["deleted_files"] == 2  # the nodes of both partitions
    assert _folders(crawl, "graph") == ["graph"]


def test_damaged_list_file_is_reported(tmp_path):
    crawl = _crawl_with_edges(str(tmp_path / "c"), 1, [(1, 2)])
    build_graph(crawl)
    rel = paths.graph_lists(crawl.manifest().generation, "out", 0)
    crawl.fs.pipe_file(crawl.path(rel), b"junk")
    with pytest.raises(Exception, match="not a batchcrawl graph list file"):
        LinkGraph.open(crawl).outlinks_of_key(1)
