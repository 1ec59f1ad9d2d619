"""Files of rounds that died before their commit (docs/design.md §3, §7): the rounds beyond the
committed manifest's that left files, and the hosts they were fetching. A rerun gives those hosts a
full politeness delay first, because their last requests were never persisted."""

from __future__ import annotations

from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir


def uncommitted_rounds(crawl: CrawlDir, rnd: int) -> list[int]:
    """Rounds ``>= rnd`` (``rnd``: the next, uncommitted one) that left files of a fetch that died
    before its commit: a batch round's fetch lists, or a stream micro-batch's ``fetched`` files or
    WARC files (a stream writes no fetch list; a WARC file is written at the first answered
    request). A pipelined crawl (``batchcrawl.pipeline``) can leave two: round ``rnd`` and the
    round fetched while ``rnd`` was being committed. Found by listing the per-round folders:
    orphans are by definition in no manifest."""
    found: set[int] = set()
    for table in ("fetchlists", "fetched", "warc"):
        folder = crawl.path(table)
        if not crawl.fs.exists(folder):
            continue
        for entry in crawl.fs.ls(folder, detail=False):
            r = paths.parse_round(entry.rstrip("/").rsplit("/", 1)[-1] + "/")
            if r is not None and r >= rnd:
                found.add(r)
    return sorted(found)


def uncommitted_hosts(crawl: CrawlDir, rnd: int) -> dict[int, list[str]]:
    """The hosts of the fetch lists of the uncommitted rounds after ``rnd`` (a dead pipelined
    crawl's round in flight), by shard: their last requests were never persisted either, so the
    rerun's first fetch cools them down too (``rnd``'s own hosts are in its new fetch lists)."""
    out: dict[int, set[str]] = {}
    for r in uncommitted_rounds(crawl, rnd + 1):
        folder = crawl.path(paths.round_dir("fetchlists", r))
        if not crawl.fs.exists(folder):
            continue
        for entry in crawl.fs.ls(folder, detail=False):
            rel = paths.round_dir("fetchlists", r) + "/" + entry.rstrip("/").rsplit("/", 1)[-1]
            if paths.LAYOUT_RE["fetchlists"].fullmatch(rel) is None or paths.TMP_MARKER in rel:
                continue
            table = crawl.read_table("fetchlists", [rel], columns=["host", "shard"])
            for host, shard in zip(table.column("host").to_pylist(),
                                   table.column("shard").to_pylist(), strict=True):  # fmt: skip
                out.setdefault(int(shard), set()).add(host)
    return {s: sorted(h) for s, h in out.items()}
