"""``batchcrawl report``: one self-contained HTML page of plots a crawl operator reads (rounds,
frontier, responses, hosts, depth, politeness, robots.txt, bytes stored).

Three steps, one module each: :mod:`~batchcrawl.report.data` runs the named queries of
``storage/queries`` over one committed generation, :mod:`~batchcrawl.report.figures` draws them with
matplotlib as inline SVG, :mod:`~batchcrawl.report.page` lays them out as HTML.
"""

from __future__ import annotations

import os
from typing import Any

import fsspec

from batchcrawl.config import Config
from batchcrawl.errors import ConfigError
from batchcrawl.store.crawldir import CrawlDir


def build_report(crawl: CrawlDir, cfg: Config, generation: int | None = None) -> tuple[str, int]:
    """The report of ``crawl`` at ``generation`` (default current).

    Parameters
    ----------
    crawl
        The crawl directory.
    cfg
        The crawl's effective configuration (the configured delays are drawn in the politeness plot).
    generation
        Committed generation to show; None for the current one.

    Returns
    -------
    tuple[str, int]
        The HTML text and the generation shown.

    Raises
    ------
    CrawlDirError
        ``generation`` does not exist, or a file its manifest names cannot be read.
    """
    from batchcrawl.report import data, figures, page  # lazy: matplotlib loads in ~1 s

    d = data.read_report_data(crawl, cfg, generation)
    return page.render(d, figures.draw(d)), d.generation


def write_report(
    crawl: CrawlDir, cfg: Config, out: str, generation: int | None = None
) -> dict[str, Any]:
    """Write the report of ``crawl`` to ``out`` (a path or fsspec URL).

    Returns
    -------
    dict
        ``{"report": out, "generation": g, "bytes": n}``; ``bytes`` is the size of the HTML file.

    Raises
    ------
    CrawlDirError
        ``generation`` does not exist, or a file its manifest names cannot be read.
    ConfigError
        ``out`` cannot be written (bad folder, protocol or access), is a local folder, is a local
        path in a folder that does not exist (it is not created: a mistyped path would be), or lies inside the
        crawl directory (:meth:`CrawlDir.contains`).
    """
    if crawl.contains(out):
        raise ConfigError(
            f"report output {out!r} is inside the crawl directory {crawl.url!r}: it could "
            "overwrite the crawl's own files (crawl.toml, a manifest) and `batchcrawl gc` would "
            "delete it; write the report outside the crawl"
        )
    if out == "-":
        raise ConfigError("report output '-': the report is a file; name one, e.g. report.html")
    _check_local_folder(out)
    html, gen = build_report(crawl, cfg, generation)
    body = html.encode("utf-8")
    try:
        with fsspec.open(out, "wb") as f:
            f.write(body)
    except OSError as exc:  # read-only, full, a file system that takes no new files (/proc)
        raise ConfigError(
            f"report output {out!r} cannot be written ({exc.strerror or exc}); name a file in a "
            "folder you can write to"
        ) from None
    except (ValueError, ImportError) as exc:  # fsspec: an unknown protocol, a missing package
        raise ConfigError(f"report output {out!r}: {type(exc).__name__}: {exc}") from None
    return {"report": out, "generation": gen, "bytes": len(body)}


def _check_local_folder(out: str) -> None:
    """Raise :class:`ConfigError` if ``out`` is a local path whose folder does not exist (issue 34:
    fsspec created it, so a mistyped ``--out`` left a new folder behind) or that is a folder (the
    write failed with ``IsADirectoryError`` after the whole report was built). Object-store URLs
    have no folders to check."""
    try:
        fs, path = fsspec.core.url_to_fs(out)
    except (ValueError, ImportError):
        return  # the write reports it
    if "file" not in (fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)):
        return
    if os.path.isdir(path):  # found before the report is built, not by the write after it
        raise ConfigError(
            f"report output {out!r} is a folder; name a file in it, e.g. "
            f"{os.path.join(path, 'report.html')}"
        )
    folder = os.path.dirname(path)
    if folder and os.path.exists(folder) and not os.path.isdir(folder):
        raise ConfigError(  # e.g. /dev/null/r.html: mkdir -p would fail too
            f"report output {out!r}: {folder} is a file, not a folder; name a file in a folder"
        )
    if folder and not os.path.isdir(folder):
        raise ConfigError(
            f"report output {out!r}: the folder {folder} does not exist; create it first "
            f"(mkdir -p {folder}) or name a file in an existing folder"
        )
