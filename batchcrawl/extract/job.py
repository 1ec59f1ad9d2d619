"""``batchcrawl extract``: plan the tasks (one per committed WARC file not yet extracted), run
them as a Dask graph, commit the new ``text`` files as a generation (docs/design.md §8d).

Like a round (Nutch's step-then-commit): tasks write only new files, the commit publishes the next
manifest naming them, and nothing else reads them before. A run killed at any point leaves the
committed generation as it was; its finished tasks' files are whole and deterministic
(:mod:`batchcrawl.extract.warcfile`), so a rerun reuses them and extracts the rest. A WARC file
whose text a committed generation lists is never extracted again: a rerun after success commits
nothing.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow.compute as pc

from batchcrawl.extract.warcfile import extract_warc
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest

log = logging.getLogger(__name__)


def plan(
    crawl: CrawlDir, manifest: Manifest, rounds: tuple[int, int] | None = None
) -> list[tuple[str, str]]:
    """``(warc_rel, fetched_rel)`` of every WARC file that ``manifest``'s ``fetched`` tables name
    (of rounds ``rounds[0]..rounds[1]`` if given, inclusive) and whose text file ``manifest``
    does not list yet, in round, file order."""
    done = set(manifest.files("text"))
    todo = []
    for rel in manifest.files("fetched"):
        span = paths.fact_rounds(rel)  # a merged fetched file spans rounds: its WARC files tell
        if rounds is not None and (span is None or span[1] < rounds[0] or span[0] > rounds[1]):
            continue
        names = crawl.read_table("fetched", [rel], columns=["warc_filename"]).column(0)
        for warc in sorted(pc.unique(names.drop_null()).to_pylist()):
            r = paths.parse_round(warc)
            if rounds is not None and (r is None or not rounds[0] <= r <= rounds[1]):
                continue
            if warc.endswith(".warc.gz") and paths.text_file(r or 0, warc) not in done:
                todo.append((warc, rel))
    return todo


def extract_crawl(
    crawl: CrawlDir,
    client: Any | None = None,
    rounds: tuple[int, int] | None = None,
    *,
    on_damaged: Callable[[str], None] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Extract text from every committed WARC file of ``crawl`` not extracted yet, and commit.

    Parameters
    ----------
    crawl
        The crawl; the caller holds its writer lock.
    client
        A ``distributed.Client`` whose workers see ``crawl.url``
        (:func:`batchcrawl.round.cluster_url`); None runs the tasks in this process.
    rounds
        Only these rounds (inclusive); default every committed round.
    on_damaged
        Called with one line per damaged WARC file (default: logged as a warning).
    progress
        Called with each WARC file's result (:func:`~batchcrawl.extract.warcfile.extract_warc`)
        as it finishes, before the commit.

    Returns
    -------
    dict
        The summary: ``step`` ("extract"), ``generation`` (the one committed, or None when
        nothing was new), ``warc_files``, ``reused`` (finished by an earlier run that died),
        ``rows``, ``counts`` (captures by reason), ``damaged`` (lines).
    """
    manifest = crawl.manifest()
    todo = plan(crawl, manifest, rounds)
    results = _run(crawl.url, todo, client, progress or (lambda result: None))
    counts: Counter = Counter()
    damaged = []
    for res in results:
        counts.update(res["counts"])
        if res["damaged"]:
            damaged.append(res["damaged"])
            (on_damaged or log.warning)(res["damaged"])
    summary = {
        "step": "extract",
        "warc_files": len(results),
        "reused": sum(1 for r in results if r["reused"]),
        "rows": sum(r["rows"] for r in results),
        "counts": dict(sorted(counts.items())),
        "damaged": damaged,
    }
    written = [FileEntry(r["text"], r["rows"]) for r in results if r["text"] is not None]
    if not written:
        return {**summary, "generation": None}
    entries = [*manifest.tables.get("text", ()), *written]
    committed = crawl.commit(manifest, {"text": entries}, summary)
    return {**summary, "generation": committed.generation}


def _run(
    url: str,
    todo: Sequence[tuple[str, str]],
    client: Any | None,
    progress: Callable[[dict[str, Any]], None],
) -> list[dict[str, Any]]:
    """Results of the tasks of ``todo``, in its order: on ``client``'s workers, else here."""
    results: list[dict[str, Any]] = []
    if client is None:
        for warc, fetched in todo:
            results.append(extract_warc(url, warc, fetched))
            progress(results[-1])
        return results
    from distributed import as_completed

    futures = client.map(extract_warc, [url] * len(todo), [w for w, _ in todo],
                         [f for _, f in todo], pure=False)  # fmt: skip
    for future in as_completed(futures):
        progress(future.result())
    return client.gather(futures)
