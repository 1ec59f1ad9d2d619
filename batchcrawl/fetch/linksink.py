"""The link sink: where a shard's outlinks leave the fetch worker (StormCrawler's status
stream, Frontera's ``links_extracted``).

Every canonical outlink becomes an ``edges`` row (the link graph keeps every link). The links to
follow then pass BUbiNG's URL cache (:class:`~batchcrawl.fetch.urlcache.KeyCache`), so the menu
links repeated on every page of a host are sent to the frontier once, and the scope filters
(:class:`~batchcrawl.scope.filters.FilterChain`), which name a reason for every link they drop; what
is left and what was dropped become ``links`` rows, in discovery order (``seq``). Every page's
full outlink list is in its WARC ``metadata`` record.

The sink's methods that touch the run's rows say "lock held": the fetch loop calls them under
its lock (the URL cache is shared by the fetch threads).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from batchcrawl.fetch.pages import FoundLink
from batchcrawl.fetch.runstate import RunState
from batchcrawl.fetch.urlcache import CanonicalMemo, KeyCache
from batchcrawl.records import FetchItem
from batchcrawl.scope.filters import FilterChain

#: a canonical outlink: ``(url_key, url, host, domain, tag, nofollow)``
Link = tuple[int, str, str, str, str, bool]
#: a scope-checked outlink: ``Link`` + ``(filter reason or None, hops_out)``
ScopedLink = tuple[int, str, str, str, str, bool, str | None, int]


class LinkSink:
    """Canonicalize, de-duplicate, scope-check and emit one shard's outlinks.

    Parameters
    ----------
    shard
        Shard number written into the ``links`` rows.
    filters
        The scope filters (assign :attr:`filters` for a reconfigured worker).
    url_cache_size, canonical_memo_size
        Entries of the URL cache (``fetch.url_cache_size``) and of the canonicalization memo
        (``fetch.canonical_memo_size``); :meth:`resize` changes them.
    """

    def __init__(
        self, shard: int, filters: FilterChain, url_cache_size: int, canonical_memo_size: int
    ) -> None:
        self.shard = shard
        self.filters = filters
        self.url_cache = KeyCache(url_cache_size)
        self.memo = CanonicalMemo(canonical_memo_size)
        self._sizes = (url_cache_size, canonical_memo_size)

    def resize(self, url_cache_size: int, canonical_memo_size: int) -> None:
        """Start a new URL cache or memo when its size setting changed (the old entries go)."""
        if url_cache_size != self._sizes[0]:
            self.url_cache = KeyCache(url_cache_size)
        if canonical_memo_size != self._sizes[1]:
            self.memo = CanonicalMemo(canonical_memo_size)
        self._sizes = (url_cache_size, canonical_memo_size)

    def canonical(self, found: Iterable[FoundLink]) -> tuple[list[Link], int]:
        """Canonicalize outlinks through the memo: the :data:`Link` tuples and the number of
        invalid URLs (no lock: the memo needs none)."""
        memo = self.memo.canonical
        out: list[Link] = []
        invalid = 0
        for raw, tag, nofollow in found:
            hit = memo(raw)
            if hit is None:
                invalid += 1
            else:
                out.append((*hit, tag, nofollow))
        return out, invalid

    def not_seen(self, links: list[Link]) -> list[Link]:
        """The links whose url key is not in the URL cache (recording them; lock held)."""
        seen = self.url_cache.seen
        return [link for link in links if not seen(link[0])]

    def scope(self, item: FetchItem, links: list[Link]) -> list[ScopedLink]:
        """Scope-check ``item``'s outlinks at ``item.depth + 1``: a filter reason (None: in
        scope; ``nofollow`` for a nofollow link) and the hops off the seeds' sites (no lock)."""
        out: list[ScopedLink] = []
        depth = item.depth + 1
        check = self.filters.check
        hops = self.filters.hops_out
        for key, url, host, domain, tag, nofollow in links:
            hops_out = hops(host, domain, item.hops_out)
            reason = "nofollow" if nofollow else check(url, host, domain, depth, hops_out)
            out.append((key, url, host, domain, tag, nofollow, reason, hops_out))
        return out

    def edges(self, run: RunState, item: FetchItem, links: list[Link]) -> None:
        """Append one ``edges`` row per canonical outlink of ``item`` (lock held)."""
        cols = run.out.edges
        n = len(links)
        cols["src_url_key"].extend([item.url_key] * n)
        cols["dst_url_key"].extend([link[0] for link in links])
        cols["round"].extend([run.round] * n)
        cols["tag"].extend([link[4] for link in links])
        cols["src_domain"].extend([item.domain] * n)  # STAR's domain in-degree (frontier.indegree)
        cols["dst_domain"].extend([link[3] for link in links])

    def emit(
        self,
        run: RunState,
        item: FetchItem,
        links: list[ScopedLink],
        lastmod: list[datetime | None] | None = None,
    ) -> None:
        """Append ``links`` rows for ``item``'s outlinks (lock held); ``lastmod`` (sitemap
        links) is row-aligned with ``links``."""
        cols = run.out.links
        depth = item.depth + 1
        if run.found_hosts is not None:
            run.found_hosts.update(link[2] for link in links if link[6] is None)
        for key, url, host, domain, tag, nofollow, reason, hops_out in links:
            run.seq += 1
            cols["round"].append(run.round)
            cols["shard"].append(self.shard)
            cols["seq"].append(run.seq)
            cols["src_url_key"].append(item.url_key)
            cols["dst_url_key"].append(key)
            cols["dst_url"].append(url)
            cols["dst_host"].append(host)
            cols["dst_domain"].append(domain)
            cols["depth"].append(depth)
            cols["hops_out"].append(hops_out)
            cols["tag"].append(tag)
            cols["nofollow"].append(nofollow)
            cols["filter_reason"].append(reason)
        cols["lastmod"].extend(lastmod if lastmod is not None else [None] * len(links))
        run.out.counters["links_new"] += len(links)
