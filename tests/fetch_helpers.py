"""Helpers for the fetch worker tests: a fetch item built from a URL as generate would give it."""

from __future__ import annotations

from batchcrawl.records import FetchItem
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key


def fetch_item(url: str, depth: int = 0) -> FetchItem:
    """The :class:`FetchItem` of ``url`` (canonicalized first) at ``depth`` links from a seed."""
    url = canonicalize(url)
    host = host_of(url)
    return FetchItem(url_key(url), url, host, domain_of(host), depth)
