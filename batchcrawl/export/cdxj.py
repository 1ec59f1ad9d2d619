"""CDXJ index of a WARC file on any fsspec filesystem (:func:`write_cdxj`): the lines of
:mod:`batchcrawl.cdxj` (what cdxj-indexer writes), sorted in byte order so replay tools can
binary-search them.
"""

from __future__ import annotations

import posixpath
from typing import IO, Any

import fsspec

from batchcrawl.cdxj import INDEXED_TYPES, cdxj_lines
from batchcrawl.errors import WarcError

__all__ = ["INDEXED_TYPES", "cdxj_lines", "write_cdxj"]


def write_cdxj(
    warc_path: str,
    out: IO[str],
    fs: Any = None,
    *,
    filename: str | None = None,
    arc: bool | None = None,
) -> int:
    """Write the sorted CDXJ index of one WARC file to the text stream ``out``.

    Parameters
    ----------
    warc_path
        Path of the WARC file in ``fs`` (or an fsspec URL such as ``memory://x.warc.gz`` when ``fs``
        is None).
    out
        Text stream the lines are written to, each ending in ``\\n``.
    fs
        fsspec filesystem holding ``warc_path``; None infers it from the URL.
    filename
        Value of the ``filename`` field; default the base name of ``warc_path`` (pywb's choice).
        Pass the crawl-relative path to index many directories into one file.
    arc
        Read a legacy ARC file; None (default) decides by the name (``.arc``, ``.arc.gz``).

    Returns
    -------
    int
        Number of lines written.

    Raises
    ------
    WarcError
        The file cannot be opened or is not a WARC/ARC file.
    """
    if fs is None:
        fs, warc_path = fsspec.core.url_to_fs(warc_path)
    name = filename if filename is not None else posixpath.basename(warc_path)
    if arc is None:
        arc = warc_path.endswith((".arc", ".arc.gz"))
    try:
        with fs.open(warc_path, "rb") as fh:
            lines = cdxj_lines(fh, name, arc=arc)
    except OSError as exc:
        raise WarcError(f"{warc_path}: cannot read WARC file: {exc}") from exc
    lines.sort()
    for line in lines:
        out.write(line + "\n")
    return len(lines)
