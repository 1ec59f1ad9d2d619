"""Sitemap fetch jobs of a fetch worker (sitemaps.org protocol 0.9; docs/design.md §8a).

A sitemap is fetched like a page: a :class:`SitemapJob` is queued in its host's visit state of the
workbench, so the host's politeness delay, Crawl-delay and robots.txt rules apply to it. Jobs come
from three places:

* the ``Sitemap:`` lines of a robots.txt just fetched (:func:`robots_sitemap_jobs`): a relative
  value is resolved against the URL robots.txt was found at (RFC 3986 §5, the way browsers resolve
  links), since real files say ``Sitemap: /sitemap.ashx``;
* the configured ``sitemaps.seeds`` (:func:`seed_sitemap_jobs`), in the first round;
* the child sitemaps of a sitemap index (:func:`child_jobs`), one level deeper each time, up to
  ``sitemaps.max_depth`` levels below the named sitemap.

A job is only made for a sitemap on the host whose visit state it joins (a shard owns its hosts'
politeness; sitemaps.org also limits a sitemap to URLs of its own host): sitemaps on other hosts are
counted, not fetched. This module only builds jobs; :class:`batchcrawl.fetch.worker.FetchWorker`
fetches and parses them (:func:`batchcrawl.fetch.sitemaps.parse_sitemap`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin

from batchcrawl.errors import InvalidURL
from batchcrawl.fetch.sitemaps import SitemapEntry
from batchcrawl.urls import canonicalize, host_of

__all__ = ["SitemapJob", "child_jobs", "robots_sitemap_jobs", "seed_sitemap_jobs"]


@dataclass(frozen=True)
class SitemapJob:
    """One sitemap to fetch.

    Attributes
    ----------
    url : str
        Canonical absolute URL of the sitemap.
    host : str
        Its host (the visit state it is queued in).
    level : int
        0 for a sitemap named by robots.txt or configured; one more per sitemap index level.
    """

    url: str
    host: str
    level: int = 0


def _job(raw: str, base: str, host: str, level: int, counts: Counter[str]) -> SitemapJob | None:
    try:
        url = canonicalize(urljoin(base, raw.strip()))
    except (InvalidURL, ValueError):
        counts["sitemaps_invalid"] += 1
        return None
    if host_of(url) != host:
        counts["sitemaps_other_host"] += 1
        return None
    return SitemapJob(url, host, level)


def robots_sitemap_jobs(
    values: Iterable[str], robots_url: str, host: str
) -> tuple[list[SitemapJob], Counter[str]]:
    """Jobs for the ``Sitemap:`` values of a robots.txt found at ``robots_url`` (after its
    redirects), for the sitemaps on ``host``.

    Returns
    -------
    (jobs, counts)
        Level-0 jobs in file order, and ``sitemaps_invalid`` / ``sitemaps_other_host`` counts.
    """
    counts: Counter[str] = Counter()
    jobs = [j for v in values if (j := _job(v, robots_url, host, 0, counts)) is not None]
    return jobs, counts


def seed_sitemap_jobs(seeds: Iterable[str], host: str) -> list[SitemapJob]:
    """Level-0 jobs for those configured ``sitemaps.seeds`` (absolute URLs) that are on ``host``;
    a seed that is not a valid absolute URL is on no host."""
    counts: Counter[str] = Counter()
    return [j for s in seeds if (j := _job(s, s, host, 0, counts)) is not None]


def child_jobs(
    parent: SitemapJob, children: Iterable[SitemapEntry], max_depth: int
) -> tuple[list[SitemapJob], Counter[str]]:
    """Jobs for the child sitemaps of the index ``parent`` (``loc`` already absolute), at
    ``parent.level + 1``; none when that is deeper than ``max_depth`` (counted
    ``sitemaps_depth_limit``)."""
    counts: Counter[str] = Counter()
    children = list(children)
    if parent.level + 1 > max_depth:
        counts["sitemaps_depth_limit"] += len(children)
        return [], counts
    jobs = [
        j
        for c in children
        if (j := _job(c.loc, parent.url, parent.host, parent.level + 1, counts)) is not None
    ]
    return jobs, counts
