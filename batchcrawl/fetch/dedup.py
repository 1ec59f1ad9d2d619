"""A shard's memory of the payloads and page fingerprints it has met (content dedup): exact
duplicates by payload digest (the committed ``content`` table of earlier rounds and an LRU of this
shard's recent first captures) and near-duplicates by SimHash per host
(:class:`~batchcrawl.fetch.neardup.NearDuplicates`).

A payload met again is archived as a WARC ``revisit`` of its first capture (WARC 1.1 §6.7.2,
"identical payload digest"), as Heritrix and Common Crawl do. No lock: the page processor that
calls it runs one page at a time.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from batchcrawl.config import DedupSection
from batchcrawl.fetch.neardup import NearDuplicates
from batchcrawl.fetch.warc import warc_date
from batchcrawl.records import FetchItem

#: ``digest -> (url_key, url, fetch_time)`` of a payload's first capture in an earlier round
SeenContent = Mapping[str, tuple[int, str, datetime]]


class ShardDedup:
    """Exact and near duplicates of one shard's pages.

    Parameters
    ----------
    dedup
        The ``[dedup]`` section: ``near_window``, ``near_hamming`` and the ``trap_*`` settings
        (read once, here), ``max_shard_digests`` (read at each :meth:`remember`, so a
        reconfigured worker follows it).
    """

    def __init__(self, dedup: DedupSection) -> None:
        self.dedup = dedup
        # digest -> (url, fetch start in epoch seconds, url_key) of its first capture in this
        # shard, the dedup.max_shard_digests most recent
        self.digests: OrderedDict[str, tuple[str, float, int]] = OrderedDict()
        # content seen in earlier rounds (batchcrawl.frontier.content)
        self.seen: SeenContent = {}
        self.near = NearDuplicates(
            dedup.near_window, dedup.near_hamming, trap_min_pages=dedup.trap_min_pages,
            trap_near_share=dedup.trap_near_share, trap_repeat_segments=dedup.trap_repeat_segments,
        )  # fmt: skip

    def first_capture(self, digest: str, key: int) -> tuple[int | None, tuple[str, str] | None]:
        """Where the payload ``digest`` (``sha1:...``) of url key ``key`` was first captured:
        ``(duplicate_of, (url, WARC-Date))``. ``duplicate_of`` is the first capture's url key when
        that is another URL (None for an unchanged refetch of the same URL); the capture is what a
        WARC revisit refers to; ``(None, None)`` for a first capture. Earlier rounds (``content``
        table) win over this shard's LRU."""
        earlier = self.seen.get(digest)
        if earlier is not None:
            first, url, when = earlier
            return (first if first != key else None,
                    (url, warc_date(when.replace(tzinfo=UTC).timestamp())))  # fmt: skip
        mine = self.digests.get(digest)
        if mine is None:
            return None, None
        url, started, first = mine
        return (first if first != key else None), (url, warc_date(started))

    def remember(self, digest: str, url: str, started_s: float, key: int, limit: int) -> None:
        """Record a first capture (fetch start ``started_s``, epoch seconds), keeping the
        ``limit`` (``dedup.max_shard_digests``) most recent."""
        digests = self.digests
        digests[digest] = (url, started_s, key)  # WARC-Date made when needed
        while len(digests) > limit:
            digests.popitem(last=False)

    def near_duplicate(self, row: dict[str, Any], item: FetchItem) -> None:
        """Flag ``row["near_duplicate_of"]`` against the host's recent pages (Manku et al. 2007,
        SimHash with ``near_hamming`` bits), from ``row["simhash"]``."""
        path = item.url.split("/", 3)[3] if item.url.count("/") >= 3 else ""
        near = self.near.observe(item.host, item.url_key, "/" + path, row.get("simhash"))
        if near is not None:
            row["near_duplicate_of"] = near
