"""The long-lived parts of one shard's fetch worker, held in one place so the fetch loop, the
host book and the facade always see the current ones: the configuration, the clocks, the HTTP
stack (resolver, address policy, fetcher), the politeness workbench, the robots.txt cache, the
host holds and the scope filters. :meth:`ShardParts.reconfigure` swaps what a new configuration changes and keeps the
per-host state (visit states, robots.txt rules)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from random import Random
from typing import Any

from batchcrawl.config import Config
from batchcrawl.fetch.fetcher import Fetcher, http_settings
from batchcrawl.fetch.holds import HostHolds
from batchcrawl.fetch.resolver import AddressPolicy, Resolver
from batchcrawl.fetch.robots import RobotsCache
from batchcrawl.fetch.workbench import Workbench
from batchcrawl.scope.filters import FilterChain

#: what a visit state's FIFO holds: fetch items, sitemap jobs and the robots.txt marker
QueueEntry = Any


@dataclass
class ShardParts:
    """See the module docstring. ``clock`` is monotonic (politeness, deadlines), ``wall`` the
    wall clock (timestamps, file names); both in seconds."""

    cfg: Config
    shard: int
    fs: Any  # fsspec filesystem rooted at the crawl directory
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    seed_hosts: Iterable[str] = ()
    seed_domains: Iterable[str] = ()
    resolver: Resolver = field(init=False)
    policy: AddressPolicy = field(init=False)
    fetcher: Fetcher = field(init=False)
    workbench: Workbench[QueueEntry] = field(init=False)
    robots: RobotsCache = field(init=False)
    holds: HostHolds = field(init=False)  # robots.txt outages and rate limits
    filters: FilterChain = field(init=False)

    def __post_init__(self) -> None:
        cfg = self.cfg
        self._http(cfg)
        self.workbench = Workbench.from_config(cfg.politeness, self.clock)
        self.robots = RobotsCache(cfg.robots, self.agent, clock=self.wall)
        self.holds = HostHolds(Random(), self.wall)
        self.filters = FilterChain.from_config(cfg.filters, self.seed_hosts, self.seed_domains)

    @property
    def agent(self) -> str:
        """The robots.txt product token (``crawl.robots_agent``)."""
        return self.cfg.crawl.robots_agent

    def _http(self, cfg: Config) -> None:
        self.resolver = Resolver(cfg.network)
        self.policy = AddressPolicy(cfg.network)
        self.fetcher = Fetcher(cfg.fetch, cfg.crawl, self.resolver, self.policy)

    def reconfigure(
        self, cfg: Config, seed_hosts: Iterable[str] = (), seed_domains: Iterable[str] = ()
    ) -> Config:
        """Use ``cfg`` and the seeds' scope; returns the previous configuration.

        The filters are rebuilt; the HTTP stack only if ``network``, ``crawl.user_agent`` or a
        ``[fetch]`` field other than the per-round ones
        (:func:`~batchcrawl.fetch.fetcher.http_settings`) changed, so a round under a deadline
        keeps its hosts' connections, cookies and addresses. A changed ``politeness`` section
        is applied to the workbench in place (:meth:`Workbench.configure
        <batchcrawl.fetch.workbench.Workbench.configure>`: per-host rules and groups); a changed ``robots`` section (or agent)
        reloads the live robots.txt entries into a new cache.
        """
        old, self.cfg = self.cfg, cfg
        self.filters = FilterChain.from_config(cfg.filters, seed_hosts, seed_domains)
        if old.network != cfg.network or http_settings(old.fetch, old.crawl) != http_settings(
            cfg.fetch, cfg.crawl
        ):
            self.fetcher.close()
            self._http(cfg)
        if old.politeness != cfg.politeness:  # hosts move between entries; no delay is broken
            self.workbench.configure(cfg.politeness)
        if old.robots != cfg.robots or old.crawl.robots_agent != cfg.crawl.robots_agent:
            hosts = [st.host for st in self.workbench.snapshot()]
            rows = {h: self.robots.to_row(h) for h in hosts}
            self.robots = RobotsCache(cfg.robots, self.agent, clock=self.wall)
            for host, row in rows.items():
                self.robots.load_row(host, row)
        return old
