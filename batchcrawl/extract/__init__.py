"""Text, language and page metadata derived from the committed WARC files (docs/design.md §8d).

``page`` turns one HTML payload into its text and metadata, ``language`` names its languages,
``wet`` writes WARC ``conversion`` records, ``warcfile`` is the task of one WARC file, ``job``
plans the tasks, runs them on Dask and commits the ``text`` table as a generation.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from batchcrawl.extract.job import extract_crawl


def __getattr__(name: str) -> Any:
    """``extract_crawl`` on first use (PEP 562): importing a submodule (``atfetch``, which every
    Dask worker imports) does not load the job, its WARC readers and its HTML and language
    libraries (issue 33)."""
    if name == "extract_crawl":
        from batchcrawl.extract.job import extract_crawl

        return extract_crawl
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["extract_crawl"]
