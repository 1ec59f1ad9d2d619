"""Publishing a generation: the one step of a commit that a stop signal must not cut.

:meth:`batchcrawl.store.crawldir.CrawlDir.commit` writes the new manifest under its final name
(``_commits/NNNNNN.json``: a temp file, a hard link, the temp file's removal, an fsync of the
folder). A stop signal raised in the middle of it left the temp file behind, or ended the command
with "its commit did not happen" when the manifest was already there (issue 34, a fresh-user
trial: ``inject`` stopped at 0.7 s). This module is one of those in which the stop handler does
not raise (:data:`batchcrawl.console.signals._NOT_CUT`): the stop is raised as soon as the
manifest is published and recorded here, and the stop line can say what was committed.
"""

from __future__ import annotations

from typing import Protocol


class _Location(Protocol):
    """What publishing needs of a :class:`~batchcrawl.store.crawldir.CrawlDir` (named without
    importing it: crawldir imports this module)."""

    url: str

    def create_exclusive(self, rel: str, data: bytes) -> bool: ...


#: ``(crawl URL, generation)`` of the last generation this process published, or None.
_published: tuple[str, int] | None = None


def publish_manifest(crawl: _Location, rel: str, data: bytes, generation: int) -> bool:
    """Create the manifest file ``rel`` (``_commits/NNNNNN.json``) of ``generation`` with
    ``data`` atomically and only if it does not exist (:meth:`CrawlDir.create_exclusive`), and
    record it (:func:`committed_in_this_process`). Returns False if another writer committed that
    generation first."""
    global _published
    if not crawl.create_exclusive(rel, data):
        return False
    _published = (crawl.url, generation)
    return True


def committed_in_this_process() -> tuple[str, int] | None:
    """``(crawl URL, generation)`` of the last generation this process committed (published its
    manifest), or None: a command stopped after its commit tells the user its result stands, not
    that its commit did not happen."""
    return _published
