"""A stream shard's found links queued at once, before the merge (issue 30 item 4; BUbiNG's
fetching threads hand the URLs they find to their own workbench through the sieve, Heritrix's
frontier takes a ToeThread's links at once).

In a stream, a link to a page of the host a fetch thread is on would otherwise wait for the next
micro-batch: take, merge, commit, select, top-up, seconds during which a deep site's host sits dry.
:class:`DirectLinks` lets the shard queue such a link itself, **exactly once**:

* only links in scope and followed (no filter reason), in the seeds' scope (``hops_out`` 0: the
  same on every path), to the **same host** as the page (its
  robots.txt rules are live and it is this shard's), a host with no committed ``hosts`` row when the
  stream started (nothing of it was ever fetched, so no URL of it is fetched or waits for a revisit
  in the frontier) and neither a probable trap nor held (``blocked``);
* only while the host holds fewer than its ``urls_per_round`` and the shard fewer than
  ``fetch.max_queued_urls`` (the selection's caps, which would otherwise be passed by);
* a url key the shard was never given nor queued itself in this stream (:attr:`seen`, bounded by
  ``max_keys``: past it nothing more is queued directly).

The driver learns the keys queued directly at the next take (:meth:`take`) and counts them leased,
so its selection skips them after the merge inserted their links; until then a hand-out of one of
them is skipped by the shard (:meth:`claimed`); a fetch of one of them in the micro-batch that
found it applies to the row its link inserts (:mod:`batchcrawl.frontier.update`). A crash before
the checkpoint loses the uncommitted fetches and links together: the pages that found the links are
still due, as in any micro-batch. Not thread-safe: the fetch loop calls it under its lock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable

from batchcrawl.records import FetchItem

#: ``(url_key, url, host, domain, tag, nofollow, filter reason, hops_out)``, as the link sink's
ScopedLink = tuple[int, str, str, str, str, bool, str | None, int]


class DirectLinks:
    """Which found links a stream shard queues itself (see the module doc).

    Parameters
    ----------
    old_hosts
        Hosts with a committed ``hosts`` row when the stream started: never queued directly.
    host_cap
        Most URLs a host may hold at once (``urls_per_round`` of its politeness rule, else
        ``generate.max_urls_per_host``).
    shard_cap
        Most URLs the shard may hold (``fetch.max_queued_urls``).
    blocked
        Whether a host is a probable trap or held now (its URLs wait for the selection).
    max_keys
        Most url keys remembered; past it nothing more is queued directly.
    """

    def __init__(
        self,
        old_hosts: Iterable[str],
        host_cap: Callable[[str], int],
        shard_cap: int,
        blocked: Callable[[str], bool],
        max_keys: int = 1_000_000,
    ) -> None:
        self.old_hosts = frozenset(old_hosts)
        self.host_cap, self.shard_cap, self.blocked = host_cap, shard_cap, blocked
        self.max_keys = max_keys
        self.seen: set[int] = set()  # given by a top-up or queued directly in this stream
        self._claimed: set[int] = set()  # queued directly, not taken yet
        self._new: list[tuple[int, str]] = []  # queued directly since the last take
        self.held: Counter[str] = Counter()  # URLs per host given and not finished
        self.queued = 0  # queued directly, the whole stream

    def given(self, items: Iterable[FetchItem]) -> list[FetchItem]:
        """A top-up's items minus those queued directly and not taken yet (they are queued
        already; the driver counts them leased at the next take); the rest are remembered."""
        out = [i for i in items if i.url_key not in self._claimed]
        for i in out:
            self.seen.add(i.url_key)
            self.held[i.host] += 1
        return out

    def finished(self, item: FetchItem) -> None:
        """``item`` was fetched (or failed): its host holds one URL less."""
        if self.held[item.host] > 0:
            self.held[item.host] -= 1

    def pick(self, item: FetchItem, links: list[ScopedLink], pending: int) -> list[FetchItem]:
        """The links of page ``item`` to queue now (recorded as queued directly), given the
        shard's ``pending`` URLs; each at the link's depth, found in micro-batch
        ``item``'s round is left to the merge (``discovered_round`` 0)."""
        host = item.host
        if host in self.old_hosts or self.blocked(host):
            return []
        room = min(self.host_cap(host) - self.held[host], self.shard_cap - pending,
                   self.max_keys - len(self.seen))  # fmt: skip
        out: list[FetchItem] = []
        for key, url, to_host, domain, _tag, nofollow, reason, hops_out in links:
            if len(out) >= room:
                break
            if to_host != host or reason is not None or nofollow or hops_out or key in self.seen:
                continue
            self.seen.add(key)
            self._claimed.add(key)
            self._new.append((key, host))
            out.append(FetchItem(url_key=key, url=url, host=host, domain=domain,
                                 depth=item.depth + 1, hops_out=hops_out))  # fmt: skip
        self.held[host] += len(out)
        self.queued += len(out)
        return out

    def take(self, done: Iterable[int]) -> list[tuple[int, str]]:
        """At a take: the ``(url key, host)`` queued directly since the last one (the driver
        leases them); ``done``, the url keys the take finished, are no longer claimed (a later
        hand-out of one is a retry or a revisit)."""
        new, self._new = self._new, []
        self._claimed.difference_update(done)
        return new
