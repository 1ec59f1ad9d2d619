"""What the crawl report shows, read from one committed generation: the named queries of
``storage/queries`` (run by :mod:`batchcrawl.store.sql`), which rounds have fetch lists, and the
manifests' round summaries with their commit times.

Everything here is plain rows (lists of dicts), so the figures can be drawn, and tested, without a
crawl directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from batchcrawl.config import Config
from batchcrawl.store import sql
from batchcrawl.store.crawldir import CRAWL_STEPS, CrawlDir

#: Named queries run over the generation shown; their rows land in :attr:`ReportData.tables`.
QUERIES = (
    "rounds",
    "outcomes-by-round",
    "fetch-timeline",
    "status-counts",
    "http-status",
    "mime-types",
    "top-hosts",
    "top-error-hosts",
    "depth-histogram",
    "host-intervals",
    "robots-outcomes",
    "bytes-by-round",
    "pages-per-language",
    "languages-per-host",
    "held-hosts",
)
#: At most this many generations (the newest) are read for the frontier-by-generation plot.
MAX_GENERATIONS = 40


@dataclass(frozen=True)
class ReportData:
    """The numbers behind a crawl report.

    Attributes
    ----------
    crawl
        URL of the crawl directory.
    generation, round
        Generation shown and the last round committed at or before it.
    created
        ISO 8601 UTC time of that generation's commit.
    host_delay_s
        Configured least delay between two requests to one host, seconds (``politeness.host_delay_s``).
    max_crawl_delay_s
        Highest robots.txt ``Crawl-delay`` honoured, seconds (``politeness.max_crawl_delay_s``).
    tables
        Query name (:data:`QUERIES`) -> its rows.
    frontier_by_generation
        ``[{"generation": g, "round": r, "step": s, "by_status": {status: urls}}, ...]``, oldest
        first, for the newest :data:`MAX_GENERATIONS` generations still kept.
    rounds
        Summaries of the ``round`` steps among the kept manifests, oldest first, each with its
        ``generation`` and its commit time ``created`` (a stream micro-batch's rate is drawn over
        the wall time between two commits, :func:`batchcrawl.report.crawl_plots.stream_windows`).
    fetchlist_rounds
        Rounds the generation holds fetch lists of: batch rounds (a stream writes none), so a
        round with requests, no fetch list and no kept manifest was a stream micro-batch.
    flush_interval_s
        Configured seconds between a stream's micro-batches (``stream.flush_interval_s``): the
        wall time given to a micro-batch whose previous one's commit is not known.
    """

    crawl: str
    generation: int
    round: int
    created: str
    host_delay_s: float
    max_crawl_delay_s: float
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    frontier_by_generation: list[dict[str, Any]] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    fetchlist_rounds: frozenset[int] = frozenset()
    flush_interval_s: float = 5.0


#: Rounds with fetch lists (:attr:`ReportData.fetchlist_rounds`).
FETCHLIST_ROUNDS_SQL = "SELECT DISTINCT round FROM fetchlists"


def _rows(con, name: str) -> list[dict[str, Any]]:
    return con.sql(sql.named_query(name)).to_arrow_table().to_pylist()


def read_report_data(crawl: CrawlDir, cfg: Config, generation: int | None = None) -> ReportData:
    """Run the report's queries over ``generation`` (default current) of ``crawl``.

    Parameters
    ----------
    crawl
        The crawl directory.
    cfg
        The crawl's effective configuration (for the configured delays).
    generation
        Committed generation to show; None for the current one.

    Raises
    ------
    CrawlDirError
        ``generation`` does not exist, or a file its manifest names cannot be read.
    """
    manifest = crawl.manifest(generation)
    con = sql.connect(crawl, manifest.generation)
    try:
        with sql.reading_generation(crawl, manifest.generation):
            tables = {name: _rows(con, name) for name in QUERIES}
            listed = con.sql(FETCHLIST_ROUNDS_SQL).to_arrow_table().column("round").to_pylist()
    finally:
        con.close()
    kept = [g for g in crawl.generations() if g <= manifest.generation]
    by_gen, rounds = [], []
    for g in kept:
        m = manifest if g == manifest.generation else crawl.manifest(g)
        if m.summary.get("step") in CRAWL_STEPS:  # a stream's checkpoints too
            rounds.append(dict(m.summary, generation=g, created=m.created))
    for g in kept[-MAX_GENERATIONS:]:
        m = manifest if g == manifest.generation else crawl.manifest(g)
        con = sql.connect(crawl, g)
        try:
            with sql.reading_generation(crawl, g):
                counts = {r["status"]: r["urls"] for r in _rows(con, "status-counts")}
        finally:
            con.close()
        by_gen.append(
            {"generation": g, "round": m.round, "step": m.summary.get("step"), "by_status": counts}
        )
    return ReportData(
        crawl=crawl.url,
        generation=manifest.generation,
        round=manifest.round,
        created=manifest.created,
        host_delay_s=cfg.politeness.host_delay_s,
        max_crawl_delay_s=cfg.politeness.max_crawl_delay_s,
        tables=tables,
        frontier_by_generation=by_gen,
        rounds=rounds,
        fetchlist_rounds=frozenset(listed),
        flush_interval_s=cfg.stream.flush_interval_s,
    )
