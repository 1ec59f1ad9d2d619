"""What a host's FIFO in the workbench holds, and taking it back out.

A visit state's queue (:mod:`batchcrawl.fetch.visitstate`) holds the host's pages
(:class:`~batchcrawl.records.FetchItem`), its sitemap jobs
(:class:`~batchcrawl.fetch.sitemap_jobs.SitemapJob`) and, at its front, the robots.txt marker
:data:`ROBOTS` when the host's origin has no live rules (RFC 9309 §2.4: robots.txt first). A held
host gives its entries back without a fetch (:mod:`batchcrawl.fetch.holds`): :func:`take_queue`
takes them out.
"""

from __future__ import annotations

from typing import Any

from batchcrawl.fetch.robots import robots_origin
from batchcrawl.fetch.sitemap_jobs import SitemapJob
from batchcrawl.fetch.visitstate import VisitState
from batchcrawl.records import FetchItem

__all__ = ["ROBOTS", "Entry", "RobotsMarker", "take_queue"]


class RobotsMarker:
    """The placeholder put at the front of a host's FIFO: "fetch robots.txt now"."""

    def __repr__(self) -> str:
        return "ROBOTS"


#: The one robots.txt marker.
ROBOTS = RobotsMarker()
#: What a visit state's FIFO holds.
Entry = FetchItem | SitemapJob | RobotsMarker


def take_queue(
    vs: VisitState[Any], taken: list[Entry], origin: str | None = None
) -> list[FetchItem | SitemapJob]:
    """Empty ``vs``'s queue (held by the calling thread) of its pages and sitemaps, after those
    of ``taken`` (entries already popped): all of them, or those of ``origin``
    (``scheme://host[:port]``) only, when the host's other origins and its robots.txt markers keep
    their place. Markers are dropped when the whole queue is taken. Returns them in queue order."""
    out = [it for it in taken if not isinstance(it, RobotsMarker)]
    kept: list[Entry] = []
    while vs.queue:
        it = vs.pop()
        if not isinstance(it, RobotsMarker) and origin in (None, robots_origin(it.url)):
            out.append(it)
        elif origin is not None:  # a marker or another origin keeps its place
            kept.append(it)
    for it in reversed(kept):
        vs.push_front(it)
    return out
