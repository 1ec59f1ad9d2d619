"""Host bookkeeping: the per-host state of one shard that outlives a round, and its mapping to
the ``hosts`` table (docs/design.md §6).

A host's state is spread over the worker's parts: its visit state in the workbench (politeness
clock, Crawl-delay), its robots.txt entry, its cached address, its near-duplicate window and trap
flag, and the counters kept here (pages fetched, errors). :meth:`HostBook.rows` gathers them into
``hosts`` rows (the politeness clock as wall-clock UTC), :meth:`HostBook.restore` puts them back
on this worker's monotonic clock, :meth:`HostBook.forget_idle` drops the hosts the shard no longer
serves (Nutch keeps host state in the CrawlDb the same way, between fetch jobs).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from batchcrawl.fetch.neardup import NearDuplicates
from batchcrawl.fetch.pages import utc
from batchcrawl.fetch.parts import ShardParts
from batchcrawl.fetch.resolver import DNSError
from batchcrawl.fetch.robots import RobotsRules


class HostBook:
    """Per-host state of one shard (see the module docstring).

    Parameters
    ----------
    parts
        The worker's parts (workbench, robots.txt cache, resolver, clocks).
    near
        The shard's near-duplicate memory (per host windows and trap flags).
    """

    def __init__(self, parts: ShardParts, near: NearDuplicates) -> None:
        self.parts = parts
        self.near = near
        self.counts: dict[str, list[int]] = {}  # host -> [pages_fetched, errors]

    def count(self, host: str, error: bool) -> None:
        """Count one fetch of ``host`` as a page or an error (the fetch loop's lock held)."""
        counts = self.counts.setdefault(host, [0, 0])
        counts[1 if error else 0] += 1

    def set_crawl_delay(self, host: str, rules: RobotsRules) -> None:
        """Give ``host``'s visit state the Crawl-delay of ``rules`` for our agent."""
        vs = self.parts.workbench.visit_state(host)
        if vs is not None:
            vs.set_crawl_delay(rules.crawl_delay(self.parts.agent))

    def forget_idle(self, keep: Iterable[str] = ()) -> list[str]:
        """Forget every idle host not in ``keep`` whose politeness delay has passed: its visit
        state, robots.txt entry, cached address, near-duplicate window and counters. Returns the
        hosts forgotten."""
        p = self.parts
        gone = p.workbench.prune_idle(keep=frozenset(keep))
        for host in gone:
            p.robots.forget(host)
            p.holds.forget(host)
            p.resolver.forget(host)
            self.near.forget(host)
            self.counts.pop(host, None)
        return gone

    def sizes(self) -> dict[str, int]:
        """Entries of each per-host structure: ``hosts`` (visit states), ``robots``,
        ``addresses`` (resolver cache), ``counters``."""
        p = self.parts
        return {
            "hosts": p.workbench.host_count,
            "robots": len(p.robots),
            "addresses": p.resolver.cached_count,
            "counters": len(self.counts),
        }

    def restore(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Reload ``hosts`` rows of an earlier round: ``next_fetch_time`` (wall-clock UTC, or
        epoch seconds) becomes the host's next allowed time on the monotonic clock; live
        robots.txt rules, the trap flag and the counters come back. Returns the hosts restored."""
        p = self.parts
        n = 0
        offset = p.clock() - p.wall()
        for row in rows:
            host = row["host"]
            p.robots.load_row(host, row)
            p.holds.load_row(host, row)
            self.near.restore(host, row.get("trap"))
            self.counts[host] = [int(row.get("pages_fetched") or 0), int(row.get("errors") or 0)]
            nxt = row.get("next_fetch_time")
            ip = row.get("ip")
            if nxt is not None and ip:
                when = nxt.replace(tzinfo=UTC).timestamp() if isinstance(nxt, datetime) else nxt
                p.workbench.add(host, ip, (), next_allowed=when + offset)
                entry = p.robots.latest(host)
                if entry is not None:
                    self.set_crawl_delay(host, entry.rules)
            n += 1
        return n

    def cool_down(self, hosts: Iterable[str]) -> None:
        """Make each host wait a full delay (its own, else ``politeness.host_delay_s``) before
        its next fetch; a host that does not resolve is skipped."""
        p = self.parts
        now = p.clock()
        for host in hosts:
            vs = p.workbench.visit_state(host)
            delay = vs.delay_s if vs is not None else p.cfg.politeness.host_delay_s
            ip = vs.ip if vs is not None else None
            if ip is None:
                try:
                    ip = p.resolver.resolve(host)
                except DNSError:
                    continue
            p.workbench.add(host, ip, (), next_allowed=now + delay)

    def rows(self, hosts: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """``hosts`` table rows for the hosts the workbench holds (all, or only ``hosts``):
        politeness clock as wall-clock UTC, effective delay, robots.txt entry, counters."""
        p = self.parts
        offset = p.wall() - p.clock()
        out = []
        wanted = None if hosts is None else set(hosts)
        for state in p.workbench.snapshot():
            if wanted is not None and state.host not in wanted:
                continue
            pages, errors = self.counts.get(state.host, (0, 0))
            row = {
                "host": state.host,
                "shard": p.shard,
                "ip": state.ip,
                "next_fetch_time": utc(state.next_allowed + offset),
                "host_delay_s": state.delay_s,
                "pages_fetched": pages,
                "errors": errors,
                "trap": self.near.trap(state.host),
            }
            row.update(p.robots.to_row(state.host))
            row.update(p.holds.to_row(state.host))
            out.append(row)
        return out
