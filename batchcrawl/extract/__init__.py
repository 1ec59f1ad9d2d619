"""Text, language and page metadata derived from the committed WARC files (docs/design.md §8d).

``page`` turns one HTML payload into its text and metadata, ``language`` names its languages,
``wet`` writes WARC ``conversion`` records, ``warcfile`` is the task of one WARC file, ``job``
plans the tasks, runs them on Dask and commits the ``text`` table as a generation.
"""

from batchcrawl.extract.job import extract_crawl

__all__ = ["extract_crawl"]
