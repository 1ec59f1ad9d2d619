"""WARC files a stream left open at a crash, cut back to their last committed record
(docs/design.md §8c; issue 35).

A stream keeps one WARC file per shard open across checkpoints
(:meth:`~batchcrawl.fetch.warc.WarcWriter.checkpoint`); each commit records, in its summary's
``warc_open`` (shard -> ``[file, end]``), the open files and the end in bytes of the records the
committed rows point into -- always the end of a whole gzip member. A clean stop closes every file, so
a crawl commit whose ``warc_open`` is not empty was followed by a crash (SIGKILL, a lost machine):
the files may hold records of uncommitted micro-batches and end inside a record. Before the next
writer (a stream or a round) fetches anything, :func:`close_open_warcs` truncates each such file to
its committed end and rewrites its CDXJ from what is left (:func:`batchcrawl.fetch.warc.reindex`). The file is
then closed for good (the next writer starts new ones), every committed row points at a whole record,
and ``warcio check`` passes on it. Truncating to the same end again is harmless, so a crash during
the cut-back is repaired by the next start; a start that finds the file at its end and its CDXJ
indexing exactly that far does nothing but say so (INFO: the warning is for records removed). The
next crawl commit settles it: its ``warc_open`` names only the files of that writer (a stream's last take commits for this even when it fetched nothing,
:meth:`batchcrawl.stream.Stream.micro_batch`), so later starts find nothing to cut back.

Commits that are not a crawl step (``extract``, ``compact``, ``graph``, ...) carry no ``warc_open``
and touch no WARC file: the state is read from the newest commit of a round or a stream micro-batch
(:func:`committed_open_warcs`). Only a local crawl directory keeps files open (on an object store a
checkpoint closes them), so only local files are ever cut back.
"""

from __future__ import annotations

import json
import logging
import os

from batchcrawl.errors import WarcError
from batchcrawl.fetch.warc import reindex
from batchcrawl.store import atomic, paths
from batchcrawl.store.crawldir import CrawlDir

log = logging.getLogger(__name__)


def committed_open_warcs(crawl: CrawlDir, generation: int | None = None) -> dict[str, int]:
    """The WARC files the newest crawl commit (a round or a stream micro-batch) left open:
    file (relative to the crawl root) -> committed end in bytes (:meth:`CrawlDir.open_warcs`).
    Empty after a clean stop, a round, or a crawl written before issue 35 (its commits name no
    open file). ``generation``: look at the commits up to that generation only."""
    return crawl.open_warcs(generation)


def close_open_warcs(crawl: CrawlDir) -> dict[str, dict[str, int]]:
    """Cut every WARC file left open by the newest crawl commit back to its committed end and
    rewrite the CDXJ beside it (if one was written) from the records left; call it under the
    writer lock, before fetching.

    Returns
    -------
    dict
        file -> ``{"end": committed end, "cut_bytes": bytes removed}`` for each file left open
        (``cut_bytes`` 0 when the crash came right after a checkpoint).

    Raises
    ------
    WarcError
        A file is shorter than its committed end (its committed records were lost: the storage
        did not keep what was fsynced), or what is left is not a readable WARC file.
    """
    out: dict[str, dict[str, int]] = {}
    for name, end in sorted(committed_open_warcs(crawl).items()):
        cut = _cut_back(crawl, name, end)
        out[name] = {"end": end, "cut_bytes": cut}
        # a warning when records were removed, once: every later start until the next crawl
        # commit finds the file at its end again (a fresh-user trial: six "0 removed" warnings)
        log.log(logging.WARNING if cut else logging.INFO,
                "%s was left open by a stream that did not stop cleanly: cut back to its last "
                "committed record (%d bytes, %d removed)", name, end, cut)  # fmt: skip
    return out


def _cut_back(crawl: CrawlDir, name: str, end: int) -> int:
    """Truncate ``name`` to ``end`` bytes and rewrite its CDXJ; returns the bytes removed."""
    if not atomic.is_local(crawl.fs):  # never kept open there (WarcWriter.appends_in_place)
        raise WarcError(f"{name}: a WARC file left open on a non-local crawl directory")
    path = crawl.path(name)
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        raise WarcError(f"{path}: cannot read the WARC file a stream left open: {exc}") from exc
    if size < end:
        raise WarcError(
            f"{path}: {size} bytes, but its committed records end at byte {end}: committed "
            "records were lost (the storage did not keep fsynced data); restore the file or "
            "remove the crawl's last generations"
        )
    if size > end:
        with open(path, "r+b") as fh:
            fh.truncate(end)
            fh.flush()
            os.fsync(fh.fileno())
    index = crawl.path(paths.warc_cdxj(name))
    if crawl.fs.exists(index) and (size > end or _indexed_end(index) != end):
        reindex(crawl.fs, path, index)
    return size - end


def _indexed_end(index: str) -> int | None:
    """The end in bytes of the last record the CDXJ file ``index`` (a local path) points at, or
    None when it cannot be read: equal to the committed end when the index is exactly the cut-back
    file's (a rewrite is atomic; the index a checkpoint leaves can lag or lead it)."""
    end = 0
    try:
        with open(index, encoding="utf-8") as fh:
            for line in fh:
                fields = json.loads(line.split(" ", 2)[2])
                end = max(end, int(fields["offset"]) + int(fields["length"]))
    except (OSError, ValueError, IndexError, KeyError, TypeError):
        return None
    return end
