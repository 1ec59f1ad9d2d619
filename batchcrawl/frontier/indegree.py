"""Pay-level-domain in-degree, kept up to date from each round's edges: STAR's reputation input
(IRLbot, Lee et al. 2008 §6.1; :mod:`batchcrawl.frontier.budget`).

A domain's reputation is the number of *distinct other* pay-level domains linking to it: links
inside a domain do not count (a spam farm's thousands of hosts all share one pay-level domain),
and a million links from one domain count once. Two tables, both maintained by the round's update
step at the cost of the round's edges, never of the whole graph:

* ``domainlinks``: one row per distinct ``(src_domain, dst_domain)`` pair seen in an ``edges`` row
  (:func:`domain_pairs`), an insert-only set bucketed by ``pair_key``
  (:mod:`batchcrawl.frontier.keyset`): the DRUM check says which pairs of the round are new;
* ``indegree``: ``(domain, linking_domains)``, one small file per generation that changes it: the
  previous counts plus the round's new pairs per target domain.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.config import Config
from batchcrawl.frontier.keyset import KeySet, update_set
from batchcrawl.frontier.runs import Mapper
from batchcrawl.store import paths, schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest
from batchcrawl.urls import hash64_many

__all__ = ["DOMAINLINKS", "IndegreeUpdate", "domain_pairs", "read_indegree", "update_indegree"]

#: The domain link pairs: an insert-only set keyed by ``pair_key``.
DOMAINLINKS = KeySet("domainlinks", "pair_key", paths.domainlinks_bucket)
#: ``edges`` columns the pairs are made from.
EDGE_COLUMNS = ["src_domain", "dst_domain"]


def domain_pairs(edges: pa.Table, round: int) -> pa.Table:
    """The distinct ``(src_domain, dst_domain)`` pairs of ``edges`` (at least
    :data:`EDGE_COLUMNS`) between two different, known domains, as ``domainlinks`` rows of
    ``round`` (``pair_key`` = hash64 of ``"src dst"``), sorted by ``pair_key``.

    A round has millions of edges but few distinct pairs: each column is dictionary-encoded and
    the pairs are made distinct as integer codes in numpy (Acero's group_by would warn on stderr
    about unaligned buffers of tables read from Parquet, breaking the CLI's one-line output);
    only the distinct pairs become Python strings."""
    t = edges.select(EDGE_COLUMNS)
    src, dst = t.column("src_domain"), t.column("dst_domain")
    keep = pc.and_(pc.and_(pc.is_valid(src), pc.is_valid(dst)), pc.not_equal(src, dst))
    t = t.filter(pc.fill_null(keep, False))
    s = pc.dictionary_encode(t.column("src_domain").combine_chunks())
    d = pc.dictionary_encode(t.column("dst_domain").combine_chunks())
    width = max(1, len(d.dictionary))
    codes = np.unique(s.indices.to_numpy().astype(np.int64) * width + d.indices.to_numpy())
    src_names, dst_names = s.dictionary.to_pylist(), d.dictionary.to_pylist()
    pairs = sorted((src_names[c // width], dst_names[c % width]) for c in codes.tolist())
    keys = hash64_many(f"{s} {d}" for s, d in pairs)
    rows = pa.table({
        "pair_key": pa.array(keys, pa.uint64()),
        "src_domain": pa.array([s for s, _ in pairs], pa.string()),
        "dst_domain": pa.array([d for _, d in pairs], pa.string()),
        "round": pa.array(np.full(len(pairs), round, np.int32)),
    })  # fmt: skip
    return schemas.conform("domainlinks", rows.sort_by([("pair_key", "ascending")]))


def read_indegree(crawl: CrawlDir, manifest: Manifest) -> pa.Table:
    """The committed ``indegree`` table of ``manifest`` (empty before the first edges)."""
    return crawl.read_table("indegree", manifest.files("indegree"))


def linking_domains(crawl: CrawlDir, manifest: Manifest) -> dict[str, int]:
    """``{domain: distinct other pay-level domains linking to it}`` of ``manifest``."""
    t = read_indegree(crawl, manifest)
    return dict(
        zip(t.column("domain").to_pylist(), t.column("linking_domains").to_pylist(), strict=True)
    )


@dataclass(frozen=True)
class IndegreeUpdate:
    """What :func:`update_indegree` did: the ``domainlinks`` and ``indegree`` listings to commit,
    the new pairs and the domains whose in-degree grew."""

    domainlinks: list[FileEntry]
    indegree: list[FileEntry]
    new_pairs: int
    domains_grown: int

    def to_json(self) -> dict[str, int]:
        """The counts as the round summary's ``indegree`` object."""
        return {"new_domain_pairs": self.new_pairs, "domains_grown": self.domains_grown}


def update_indegree(
    crawl: CrawlDir,
    manifest: Manifest,
    generation: int,
    round: int,
    edges: pa.Table,
    cfg: Config,
    mapper: Mapper,
) -> IndegreeUpdate:
    """Merge a round's ``edges`` rows (all shards, at least :data:`EDGE_COLUMNS`) into
    ``domainlinks`` (one task per touched bucket through ``mapper``) and write the new
    ``indegree`` file when a pair was new. Nothing is committed.

    Memory: the round's distinct domain pairs, plus the ``indegree`` table (one row per domain
    linked to from another domain).
    """
    done = update_set(crawl, manifest, DOMAINLINKS, generation, domain_pairs(edges, round), cfg,
                      mapper)  # fmt: skip
    old_listing = list(manifest.tables.get("indegree", ()))
    if done.new.num_rows == 0:
        return IndegreeUpdate(done.listing, old_listing, 0, 0)
    grown = Counter(done.new.column("dst_domain").to_pylist())
    old = read_indegree(crawl, manifest)
    counts = dict(zip(old.column("domain").to_pylist(),
                      old.column("linking_domains").to_pylist(), strict=True))  # fmt: skip
    since = dict(zip(old.column("domain").to_pylist(), old.column("round").to_pylist(),
                     strict=True))  # fmt: skip
    for d, n in grown.items():
        counts[d] = counts.get(d, 0) + n
        since[d] = round
    names = sorted(counts)
    table = pa.table({
        "domain": pa.array(names, pa.string()),
        "linking_domains": pa.array([counts[d] for d in names], pa.int64()),
        "round": pa.array([since[d] for d in names], pa.int32()),
    })  # fmt: skip
    entry = crawl.write_table("indegree", paths.indegree_file(generation), table)
    return IndegreeUpdate(done.listing, [entry], done.new.num_rows, len(grown))
