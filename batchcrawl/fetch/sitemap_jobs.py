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
politeness): sitemaps on other hosts are counted (``sitemaps_other_host``), not fetched. A
sitemap index may only list sitemaps of its own site (sitemaps.org, "Sitemap index files"): a
child on another scheme, host or port is counted the same way.

Which URLs a sitemap may list (sitemaps.org, "Sitemap file location"; :meth:`SitemapJob.may_list`):
those of its own scheme, host and port under the directory the sitemap is in
(``http://h/catalog/sitemap.xml`` may list ``http://h/catalog/...``, not ``http://h/images/...``).
A sitemap named by a host's robots.txt is *cross-submitted* (sitemaps.org, "Sitemaps & Cross
Submits"): the robots.txt proves the site's authority over every URL of that host, so such a
sitemap, and the sitemaps of an index so named, may list any URL of the host. Other URLs are
dropped and counted (``sitemap_urls_out_of_scope``). This module only builds jobs;
:class:`batchcrawl.fetch.worker.FetchWorker` fetches and parses them
(:func:`batchcrawl.fetch.sitemaps.parse_sitemap`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from batchcrawl.errors import InvalidURL
from batchcrawl.fetch.sitemaps import SitemapEntry
from batchcrawl.urls import canonicalize, host_of

__all__ = [
    "SitemapJob", "child_jobs", "directory_of", "robots_sitemap_jobs", "seed_sitemap_jobs",
]  # fmt: skip


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
    cross_submitted : bool
        Named by the robots.txt of ``host`` (or listed by an index so named): may list any URL of
        ``host``; otherwise only URLs under its own directory.
    """

    url: str
    host: str
    level: int = 0
    cross_submitted: bool = False

    def may_list(self, url: str) -> bool:
        """Whether this sitemap may list ``url`` (canonical, :func:`batchcrawl.urls.canonicalize`)
        by the sitemaps.org location rules (module docstring)."""
        if self.cross_submitted:
            return host_of(url) == self.host
        return url.startswith(directory_of(self.url))


def directory_of(url: str) -> str:
    """``scheme://authority/path/`` up to the last ``/`` of the path of ``url`` (query dropped):
    the URL prefix a sitemap at ``url`` may list (sitemaps.org, "Sitemap file location")."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path.rpartition('/')[0]}/"


def _site(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _job(
    raw: str, base: str, host: str, level: int, counts: Counter[str], *, cross: bool,
    site: str | None = None,
) -> SitemapJob | None:  # fmt: skip
    try:
        url = canonicalize(urljoin(base, raw.strip()))
    except (InvalidURL, ValueError):
        counts["sitemaps_invalid"] += 1
        return None
    if host_of(url) != host or (site is not None and _site(url) != site):
        counts["sitemaps_other_host"] += 1
        return None
    return SitemapJob(url, host, level, cross)


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
    jobs = [
        j for v in values if (j := _job(v, robots_url, host, 0, counts, cross=True)) is not None
    ]
    return jobs, counts


def seed_sitemap_jobs(seeds: Iterable[str], host: str) -> list[SitemapJob]:
    """Level-0 jobs for those configured ``sitemaps.seeds`` (absolute URLs) that are on ``host``;
    a seed that is not a valid absolute URL is on no host."""
    counts: Counter[str] = Counter()
    return [j for s in seeds if (j := _job(s, s, host, 0, counts, cross=False)) is not None]


def child_jobs(
    parent: SitemapJob, children: Iterable[SitemapEntry], max_depth: int
) -> tuple[list[SitemapJob], Counter[str]]:
    """Jobs for the child sitemaps of the index ``parent`` (``loc`` already absolute), at
    ``parent.level + 1``, every ``<loc>`` in order; none when that is deeper than ``max_depth``
    (counted ``sitemaps_depth_limit``). A child on another site (scheme, host, port) than the index
    is counted ``sitemaps_other_host``; a child of a cross-submitted index is cross-submitted."""
    counts: Counter[str] = Counter()
    children = list(children)
    if parent.level + 1 > max_depth:
        counts["sitemaps_depth_limit"] += len(children)
        return [], counts
    site = _site(parent.url)
    jobs = []
    for c in children:
        job = _job(
            c.loc, parent.url, parent.host, parent.level + 1, counts,
            cross=parent.cross_submitted, site=site,
        )  # fmt: skip
        if job is not None:
            jobs.append(job)
    return jobs, counts
