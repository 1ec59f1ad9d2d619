"""Crawl configuration: one typed, frozen object read once at the edge (CLI, Airflow, scripts).

Precedence, lowest first (docs/design.md §9): the defaults declared below < ``CRAWL/crawl.toml`` (or
``--config FILE``) < ``BATCHCRAWL_SECTION__KEY`` environment variables < ``--set section.key=value``
< explicit CLI flags. ``configs/default.toml`` lists every setting with its comment and unit; a test
checks it agrees with the defaults here, which are the one source of truth.

Units are in the names: ``_s`` seconds, ``_bytes`` bytes. Unknown keys and bad values raise
:class:`~batchcrawl.errors.ConfigError` naming the key, its origin (file and line when known) and
what was expected.

Every rule a value must follow is written here, on its field's type, and checked once, when the
config is read: choices are ``Literal`` types, bounds are :class:`Range` and the syntax of lists and
tables (regular expressions, CIDR networks, IP addresses) a validator in the field's ``Annotated``
metadata. Numbers are >= 0 unless a ``Range`` says more. The modules that use the config trust it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
import os
import re
import tomllib
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from batchcrawl.errors import ConfigError
from batchcrawl.politeness import parse_group_rules, parse_host_rules

ENV_PREFIX = "BATCHCRAWL_"

#: Addresses a crawler must not reach unless explicitly allowed: loopback, RFC 1918, link-local
#: (including cloud metadata 169.254.169.254), CGNAT (RFC 6598), multicast, unspecified, reserved,
#: and their IPv6 counterparts (ULA, link-local, loopback, multicast, IPv4-mapped, NAT64 well-known).
DEFAULT_DENY_NETWORKS = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
    "::/128",
    "::1/128",
    "::ffff:0:0/96",
    "64:ff9b::/96",
    "fc00::/7",
    "fe80::/10",
    "ff00::/8",
)


@dataclass(frozen=True)
class Range:
    """Inclusive bounds of a number setting (``None``: unbounded on that side)."""

    min: float | None = None
    max: float | None = None
    why: str = ""
    """Where the bound comes from (a standard, a format), added to the error message."""

    def describe(self) -> str:
        """The bounds as words: ``">= 0.01 and <= 1"`` (empty when unbounded)."""
        lo = "" if self.min is None else f">= {self.min:g}"
        hi = "" if self.max is None else f"<= {self.max:g}"
        return " and ".join(filter(None, (lo, hi)))

    def check(self, value: float, where: str) -> None:
        """Raise :class:`ConfigError` naming ``where`` if ``value`` is out of bounds."""
        if (self.min is not None and value < self.min) or (
            self.max is not None and value > self.max
        ):
            because = f" ({self.why})" if self.why else ""
            raise ConfigError(f"{where}: expected a value {self.describe()}{because}, "
                              f"got {value!r}")  # fmt: skip


def _regexes(value: list[str], where: str) -> None:
    for pattern in value:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(f"{where}: bad regular expression {pattern!r}: {exc}") from None


def _header_value(value: str, where: str) -> None:
    """An HTTP field value (RFC 9110 §5.5): visible ASCII and spaces, not empty; no CR or LF,
    which would start another header."""
    if not value.strip():
        raise ConfigError(f"{where}: must not be empty (servers and robots.txt see it)")
    bad = sorted({c for c in value if not (c == " " or c == "\t" or "!" <= c <= "~")})
    if bad:
        raise ConfigError(f"{where}: only visible ASCII and spaces may go in an HTTP header "
                          f"(RFC 9110 §5.5), got {''.join(bad)!r} in {value!r}")  # fmt: skip


def _product_token(value: str, where: str) -> None:
    """A robots.txt product token (RFC 9309 §2.2.1): letters, ``_`` and ``-`` only."""
    if not re.fullmatch(r"[A-Za-z_-]+", value):
        raise ConfigError(f"{where}: a robots.txt product token has only letters, '_' and '-' "
                          f"(RFC 9309 §2.2.1), got {value!r}")  # fmt: skip


def _networks(value: list[str], where: str) -> None:
    for cidr in value:
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError as exc:
            raise ConfigError(f"{where}: {cidr!r} is not a CIDR network ({exc})") from None


def _addresses(value: dict[str, str], where: str) -> None:
    for pattern, addr in value.items():
        try:
            ipaddress.ip_address(addr)
        except ValueError:
            raise ConfigError(
                f"{where}: {pattern!r} must map to an IP address, got {addr!r}"
            ) from None


#: ``[scheme://]host:port`` of a Dask scheduler (host: a name, IPv4, or ``[IPv6]``).
_SCHEDULER_RE = re.compile(
    r"(?:(?:tcp|tls|ws|wss|ucx)://)?(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\]):\d{1,5}"
)


def _scheduler(value: str, where: str) -> None:
    if value and not _SCHEDULER_RE.fullmatch(value):
        raise ConfigError(
            f"{where}: {value!r} is not a Dask scheduler address; expected "
            "tcp://HOST:PORT (or tls://, ws://, wss://), e.g. tcp://10.0.0.5:8786"
        )


def _above_zero(value: float, where: str) -> None:
    if not value > 0:
        raise ConfigError(f"{where}: expected a value > 0, got {value!r}")


#: A count of things that must exist (buckets, shards, threads, bytes of a buffer): >= 1.
Positive = Annotated[int, Range(1)]
Regexes = Annotated[list[str], _regexes]
Networks = Annotated[list[str], _networks]
SeedScope = Literal["host", "domain", "none"]
FilterDefault = Literal["allow", "reject"]
PartitionBy = Literal["host", "domain", "ip"]
Budget = Literal["fixed", "star"]
LongCrawlDelay = Literal["slow", "skip", "cap"]


def _host_rules(value: list[dict[str, Any]], where: str) -> None:
    parse_host_rules(value, where)


def _group_rules(value: list[dict[str, Any]], where: str) -> None:
    parse_group_rules(value, where)


HostRules = Annotated[list[dict[str, Any]], _host_rules]
GroupRules = Annotated[list[dict[str, Any]], _group_rules]


@dataclass(frozen=True)
class CrawlSection:
    """``[crawl]``: identity of the crawler and of the crawl."""

    name: str = ""
    """Crawl name used in exports; empty means the crawl directory's base name."""
    user_agent: Annotated[str, _header_value] = (
        "batchcrawl/0.1 (+https://github.com/batchcrawl/batchcrawl)"
    )
    """User-Agent header sent with every request."""
    robots_agent: Annotated[str, _product_token] = "batchcrawl"
    """Product token matched against robots.txt ``User-agent`` lines (RFC 9309 §2.2.1)."""
    keep_generations: Positive = 5
    """Committed generations kept by ``gc`` (time travel); older files are removed. At least 1."""


@dataclass(frozen=True)
class NetworkSection:
    """``[network]``: name resolution and the address policy (checked after resolving, before
    connecting)."""

    resolve: Annotated[dict[str, str], _addresses] = field(default_factory=dict)
    """Host pattern -> IP address, consulted before DNS. ``"*.test" = "127.0.0.1"`` matches any
    subdomain of ``test``; an exact name matches only itself."""
    system_dns: bool = True
    """Ask the system resolver for names not in ``resolve``. Tests and demos set false: then only
    names in ``resolve`` resolve, and no DNS server is ever asked."""
    dns_ttl_s: float = 3600.0
    """How long a resolved address is cached per host, in seconds."""
    allow_networks: Networks = field(default_factory=list)
    """CIDRs. If non-empty, only addresses inside one of them may be contacted; an address inside one
    of them is allowed even when ``deny_networks`` also covers it."""
    deny_networks: Networks = field(default_factory=lambda: list(DEFAULT_DENY_NETWORKS))
    """CIDRs never contacted (unless also in ``allow_networks``). Default: loopback, private,
    link-local, CGNAT, multicast, unspecified, reserved and metadata ranges."""


@dataclass(frozen=True)
class PolitenessSection:
    """``[politeness]``: delays between requests (BUbiNG §4.2; Heritrix politeness bounds)."""

    host_delay_s: float = 2.0
    """Least time between the end of one request to a host and the start of the next, seconds."""
    ip_delay_s: float = 1.0
    """Least time between the end of any request to one IP address (any host on it) and the start
    of the next, seconds."""
    ip_concurrency: Positive = 1
    """Most fetches in flight at once to one IP address (hosts sharing an address); 1 is
    BUbiNG's one-connection-per-IP rule."""
    max_crawl_delay_s: float = 30.0
    """A robots.txt ``Crawl-delay`` up to this many seconds raises the host's delay (it never
    lowers it below the host's floor); a longer one does what ``long_crawl_delay`` says."""
    long_crawl_delay: LongCrawlDelay = "slow"
    """A ``Crawl-delay`` above ``max_crawl_delay_s`` (stormcrawler#1979): ``slow`` crawls the host
    at the robots.txt value, with as many URLs per round as fit ``fetch.time_limit_s`` at that
    delay (at least 1; the rest stays queued, counted ``capped_host``); ``skip`` leaves
    the host's URLs queued and never selects them (counted ``long_crawl_delay``); ``cap`` uses
    ``max_crawl_delay_s`` instead, breaking the site's robots.txt: only for servers of your own
    (the loopback test webs use it)."""
    hosts: HostRules = field(default_factory=list)
    """Per-host settings (``[[politeness.hosts]]``, Heritrix's sheets), the first table whose
    ``match`` (a glob on the host, ``"*.example.org"``) or ``surt`` (a SURT prefix,
    ``"org,example,"``) covers a host applies: ``delay_s`` replaces ``host_delay_s`` for it,
    ``urls_per_round`` replaces ``generate.max_urls_per_host``, ``enabled = false`` keeps its
    URLs queued and unselected (counted ``disabled``). Drop this line and write each as a table
    after the ``[politeness]`` keys: ``[[politeness.hosts]]`` ``match = "*.example.org"``
    ``delay_s = 5.0`` ``urls_per_round = 100``. Read again at each round and each stream
    micro-batch (:mod:`batchcrawl.politeness`)."""
    groups: GroupRules = field(default_factory=list)
    """Politeness groups (``[[politeness.groups]]``, Scrapy's ``DOWNLOAD_SLOTS``): ``name``,
    ``match`` or ``surt``, ``by`` (``pattern``: all matching hosts in one group; ``domain``: one
    group per pay-level domain; ``ip``: one per address), ``delay_s`` (seconds between the end of
    any fetch of the group and the start of the next) and ``concurrency`` (fetches in flight,
    default 1). A grouped host shares its group's delay and concurrency instead of its IP
    address's (``ip_delay_s``, ``ip_concurrency``); its own host delay still holds. A group's
    hosts are fetched by one shard (routed by the group). First match wins; read again at each
    round and micro-batch. Drop this line and write tables, e.g. ``[[politeness.groups]]`` ``name = "cdn"`` ``match =
    "*.cdn.example"`` ``delay_s = 1.0`` ``concurrency = 2``."""
    adaptive_delay_factor: float = 1.0
    """The host delay is at least this factor times the host's last download time (0 disables)."""
    max_retry_after_s: Annotated[float, _above_zero] = 3600.0
    """A ``Retry-After`` on a 429 or 503 (RFC 9110 §10.2.3) moves the host's next allowed request
    and the URL's retry to then, but at most this many seconds ahead."""
    rate_limit_backoff_s: Annotated[float, _above_zero] = 60.0
    """A 429 or 503 without ``Retry-After`` (or one repeating a remembered rate limit) holds the
    whole host this many seconds, doubled at each further one (+-10 % jitter, never less than its
    ``Retry-After``); the hold is kept in the ``hosts`` table across rounds and restarts."""
    max_rate_limit_backoff_s: Annotated[float, _above_zero] = 86400.0
    """Longest rate-limit hold of a host, seconds."""
    rate_limit_quiet_s: Annotated[float, Range(0, None)] = 3600.0
    """A host that answers without a rate limit this many seconds after its rate-limit hold ended
    has its back-off reset."""
    rate_limit_wait_in_round_s: Annotated[float, Range(0, None)] = 10.0
    """A rate-limit hold up to this many seconds keeps the host's URLs waiting in the round; a
    longer one gives them back at once (``rate_limited``, no retry counted, due when the hold
    ends), so a round whose last host answers 503 does not wait out its back-off."""
    unreachable_failures: Annotated[int, Range(0, 1000)] = 5
    """This many fetches in a row that get no answer from a host (connection refused, reset or
    timed out; no address) hold the whole host, so a site that is down does not have every due
    URL tried and each charged a retry; 0 never holds. Its other URLs go back at once without a
    retry counted (``host_unreachable``, due when the hold ends); after the hold one URL probes
    the host, and an answer ends the hold."""
    unreachable_backoff_s: Annotated[float, _above_zero] = 60.0
    """First hold of an unreachable host, seconds; doubled at each further failure (+-10 %
    jitter); kept in the ``hosts`` table across rounds and restarts."""
    max_unreachable_backoff_s: Annotated[float, _above_zero] = 3600.0
    """Longest hold of an unreachable host, seconds."""


@dataclass(frozen=True)
class RobotsSection:
    """``[robots]``: robots.txt fetching and caching (RFC 9309)."""

    cache_ttl_s: Annotated[
        float, Range(0, 86400, why="RFC 9309 §2.4: a robots.txt is cached 24 h at most")
    ] = 86400.0
    """A fetched robots.txt is reused for at most this long, seconds; at most 86400 (RFC 9309 §2.4:
    24 h)."""
    max_bytes: Annotated[int, Range(512000, why="RFC 9309 §2.5: parse at least 500 KiB")] = 512000
    """Bytes of robots.txt parsed; at least 512000 (RFC 9309 §2.5 requires at least 500 KiB)."""
    max_redirects: int = 5
    """Redirect hops followed when fetching robots.txt (RFC 9309 §2.3.1.2)."""
    retry_after_s: float = 300.0
    """After a 5xx or a network failure (and no good copy in force) the host is held: treated as
    fully disallowed, its URLs kept queued with no retry counted and left off the fetch lists,
    and robots.txt fetched again after this many seconds, doubled at each further failure up to
    ``max_hold_s`` (+-10 % jitter; RFC 9309 §2.3.1.4)."""
    max_hold_s: Annotated[float, _above_zero] = 86400.0
    """Longest back-off of a host held while its robots.txt is unavailable, seconds."""
    stale_max_s: Annotated[float, Range(0, 2_592_000)] = 86400.0
    """When robots.txt becomes unreachable (5xx, 429, network) after a successful fetch, the last
    good copy stays in force until this many seconds past its ``cache_ttl_s`` (RFC 9309 §2.4 allows
    a cached copy past 24 h while the file is unreachable; §2.3.1.4: after 30 days, at most
    2592000), fetched again every ``retry_after_s``; 0 disallows all at once."""


@dataclass(frozen=True)
class FrontierSection:
    """``[frontier]``: the DRUM-bucketed URL table (IRLbot DRUM; Nutch CrawlDb)."""

    buckets: Positive = 64
    """Number of DRUM buckets K, fixed at ``init``; a URL's bucket is ``url_key % K``."""
    max_retries: int = 3
    """Transient fetch errors retried this many times before a URL becomes ``gone``."""
    retry_backoff_s: float = 3600.0
    """Backoff before the first retry, seconds; doubled at each further retry."""
    drum_batch_bytes: Positive = 64_000_000
    """Memory budget of one bucket merge, in bytes: larger buckets are streamed by row group."""
    compact_run_ratio: Annotated[float, _above_zero] = 0.5
    """Compact a bucket (merge its delta runs into a new base) once its runs hold this many rows
    per base row (LSM size ratio; 0.5 = runs total half the base)."""
    max_runs: Positive = 8
    """Compact a bucket once it has this many delta runs, whatever their size."""


Rate = Annotated[float, Range(0, 0.99)]


@dataclass(frozen=True)
class RecrawlSection:
    """``[recrawl]``: when a fetched URL is due again (Nutch's ``DefaultFetchSchedule`` and
    ``AdaptiveFetchSchedule``; :class:`batchcrawl.frontier.schedule.FetchSchedule`)."""

    policy: Literal["fixed", "adaptive"] = "fixed"
    """``fixed``: due again ``interval_s`` after each fetch; ``adaptive``: the interval shrinks
    when the page changed and grows when it did not, within ``[min_interval_s, max_interval_s]``."""
    interval_s: Annotated[float, _above_zero] = 30 * 86400.0
    """Interval after a first fetch (every fetch under ``fixed``), seconds; Nutch's 30 days."""
    min_interval_s: Annotated[float, _above_zero] = 3600.0
    """Least adaptive interval, seconds."""
    max_interval_s: Annotated[float, _above_zero] = 365 * 86400.0
    """Largest adaptive interval (and largest error back-off), seconds."""
    inc_rate: Rate = 0.4
    """Adaptive: the interval is multiplied by ``1 - inc_rate`` when the page changed."""
    dec_rate: Rate = 0.2
    """Adaptive: the interval is multiplied by ``1 + dec_rate`` when it did not (304 or same
    payload digest)."""
    gone_interval_s: Annotated[float, _above_zero] = 90 * 86400.0
    """A gone URL (404, 410, retries exhausted) is checked again after this many seconds."""

    def __post_init__(self) -> None:
        if self.min_interval_s > self.max_interval_s:
            raise ConfigError(
                f"recrawl.min_interval_s = {self.min_interval_s:g} is above recrawl."
                f"max_interval_s = {self.max_interval_s:g}: lower the first or raise the second"
            )


@dataclass(frozen=True)
class SitemapsSection:
    """``[sitemaps]``: sitemaps (sitemaps.org) named in robots.txt and configured here."""

    enabled: bool = True
    """Fetch the sitemaps named by robots.txt ``Sitemap:`` lines of the hosts crawled."""
    seeds: list[str] = field(default_factory=list)
    """Sitemap URLs fetched in the first round even when robots.txt does not name them (its rules
    still apply), by the shard crawling their host: a sitemap's host needs a seed URL."""
    max_depth: Annotated[int, Range(0, 10)] = 2
    """Sitemap index levels followed below a sitemap named by robots.txt or a seed."""
    max_urls: Annotated[int, Range(1, 50000, why="sitemaps.org: 50,000 URLs per file")] = 50000
    """URLs taken from one sitemap file."""
    max_bytes: Annotated[int, Range(1, 52428800, why="sitemaps.org: 50 MiB per file")] = 52428800
    """Bytes of one (decompressed) sitemap file parsed."""


@dataclass(frozen=True)
class GenerateSection:
    """``[generate]``: building the fetch lists (Nutch ``generate.max.count``; IRLbot budgets)."""

    max_urls_per_round: int = 1_000_000
    """Most URLs put on all fetch lists of one round together."""
    time_fit: Annotated[float, Range(0, None)] = 1.5
    """Fit a round's fetch lists to its time limit (Nutch's ``-topN``, sized to the round): when the
    last round ended with URLs left unfetched (``fetch.time_limit_s`` or its tail cut), this
    round's lists hold at most ``time_fit`` x that round's fetch-list URLs done per second x
    this round's ``fetch.time_limit_s``, shared fairly among hosts (each keeps its first
    breadth-first URLs, up to a common level), never fewer per host than its delay allows in the
    time limit (``fetch.time_limit_s / politeness.host_delay_s``); the rest stays due. A selection
    the round cannot fetch costs the driver ~0.8 KB and the fetch worker ~0.2 KB per URL. 1.5
    leaves room for a round faster than the last; 0 never fits. Sequential rounds only."""
    max_urls_per_host: int = 1000
    """Most URLs of one host per round."""
    max_urls_per_domain: int = 5000
    """Most URLs of one pay-level domain per round."""
    partition_by: PartitionBy = "host"
    """What the shard ring hashes: ``host``, ``domain`` (pay-level domain) or ``ip``."""
    budget: Budget = "fixed"
    """Per-domain cap of a round: ``fixed`` (``max_urls_per_domain`` for every pay-level domain) or
    ``star`` (IRLbot's STAR, Lee et al. 2008 §6: grows with the number of other domains linking
    to the domain, ``star_*``; URLs over it are delayed by BEAST, ``beast_*``)."""
    star_min_urls_per_domain: Annotated[int, Range(1)] = 10
    """STAR: URLs per round of a domain no other pay-level domain links to."""
    star_urls_per_linking_domain: Annotated[float, Range(0)] = 10.0
    """STAR: URLs per round added for each distinct other pay-level domain linking to the domain."""
    star_max_urls_per_domain: Annotated[int, Range(1)] = 5000
    """STAR: most URLs per round of any one pay-level domain."""
    beast_delay_s: Annotated[float, Range(0)] = 600.0
    """BEAST: wait of the first URLs over a domain's STAR budget before they are due again,
    seconds; each further budget's worth of them waits twice as long (1, 2, 4, ... budgets)."""
    beast_max_delay_s: Annotated[float, Range(0)] = 604_800.0
    """BEAST: longest wait of a URL over its domain's budget, seconds (7 days)."""


@dataclass(frozen=True)
class FetchSection:
    """``[fetch]``: the host-sharded fetch workers."""

    shards: Positive = 2
    """Number of fetch shards (one fetch worker each), placed on a consistent-hash ring."""
    ring_vnodes: Positive = 100
    """Virtual nodes per shard on the ring (Karger et al.)."""
    threads: Annotated[int, Range(1, 1024, "threads of one fetch worker")] = 16
    """Fetch threads per worker (blocking I/O, as BUbiNG argues). At most 1024."""
    connect_timeout_s: float = 10.0
    """TCP connect timeout, seconds."""
    read_timeout_s: float = 30.0
    """Longest wait for the next bytes of a response, seconds."""
    total_timeout_s: float = 60.0
    """Longest whole fetch (connect to last byte), seconds."""
    max_body_bytes: Positive = 10_485_760
    """Cap on the body's wire bytes, on each content-decoding stage and on the decoded body; longer
    bodies are cut here and flagged truncated (``length``)."""
    max_self_redirects: Annotated[int, Range(0, 20)] = 3
    """A 3xx whose ``Location`` is the URL itself (often with a ``Set-Cookie``) is fetched again,
    after the host's delay, up to this many times; then the URL is recorded ``redirect_loop``.
    Other redirects become new frontier entries."""
    max_cookies_per_host: Annotated[int, Range(0, 1000)] = 50
    """Cookies kept per host and sent back to it (in memory, for the fetcher's life; RFC 6265
    §6.1 asks for at least 50); 0 sends and keeps no cookies."""
    time_limit_s: Annotated[
        float, Range(0.001, None, "a round with no fetch time fetches nothing")
    ] = 3600.0
    """Longest fetch phase of one round, seconds (more than 0); what is left stays queued for the
    next round."""
    warc_max_bytes: Positive = 1_000_000_000
    """A WARC file is closed and a new one started past this many bytes (compressed; about 1 GB,
    as Common Crawl). A stream keeps appending to one file per shard across checkpoints until
    then (on a local crawl directory; on an object store each checkpoint closes the file); a
    round closes its files at its end. Formerly ``warc_rotate_bytes``."""
    warc_cdxj: bool = True
    """Write each WARC file's CDXJ index beside it (``X.warc.gz`` -> ``X.cdxj``, the lines
    cdxj-indexer would write) when it closes and, for a file a stream keeps open, at each
    checkpoint, so pywb replays the crawl directory without an export."""
    warc_compress_level: Annotated[int, Range(0, 9)] = 1
    """zlib-style level (0-9) of each WARC record's gzip member; 1 costs about 60% of the WARC CPU of 6
    for ~16% more bytes with zlib; levels 1-3 use ISA-L when python-isal is installed
    (``batchcrawl[fast]``: about 3x less CPU than zlib's 1, smaller output; docs/benchmarks.md)."""
    url_cache_size: int = 100_000
    """Recently seen url keys remembered per worker, so repeated menu links are sent once
    (BUbiNG's URL cache; the last half of them surely, all at most; ~45 bytes each beside the
    key's int)."""
    canonical_memo_size: Annotated[int, Range(0, None)] = 20_000
    """Raw outlink URLs whose canonical form a fetch worker remembers (entries, ~450 bytes each;
    0: none). What repeats from page to page is a host's menu (a few dozen links per host of the
    worker's round), so 20,000 keeps those for ~500 busy hosts; a larger memo mostly holds links
    seen once (docs/benchmarks.md, "session 4")."""
    tail_rate_ratio: Annotated[float, Range(0, 1)] = 0.3
    """End a shard's fetch phase early once its pages/s over the last ``throughput_window_s`` falls
    below this fraction of its best window, so a few slow hosts (e.g. a large Crawl-delay) do not
    hold the round; their URLs stay queued, first in line, for the next round. 0 never ends early
    (Nutch's fetcher.throughput.threshold, made relative). Like ``tail_idle_s``, it ends a phase
    only when a host of the shard ran dry and was given new links (batchcrawl.fetch.idle
    .tail_cut_pays): otherwise the next round would have the same hosts. Measured by
    scripts/bench_round.py."""
    tail_capacity_ratio: Annotated[float, Range(0, 1)] = 0.5
    """Also end a shard's fetch phase early once its hosts still with work could give, by
    politeness alone (one fetch per fixed host delay, Crawl-delay included), less than this
    fraction of what they and the dry hosts given new links this round could give (capped by the
    best rate seen): in a polite crawl, hosts run dry one by one while the round's links give them
    URLs for the next round, which then starts one round boundary later instead of when the last
    host is done. It never fires while a host with work has no fixed delay, nor when the dry hosts
    were given nothing new. Where it pays most is a seed round with no host delay: once only
    the Crawl-delay hosts' home pages wait (2-3 s apart from their robots.txt), the round ends
    instead of idling its threads for them (the benchmark's round 1 at D = 0: 4.9 -> 2.1 s). At a
    1 s delay the share of the politeness bound went 0.965 -> 0.973 (docs/benchmarks.md,
    "Session 8"). 0 disables it."""
    tail_overlap_s: Annotated[float, Range(0, None)] = 5.0
    """Also end a shard's fetch phase once dry hosts given new links this round could add at
    least half the politeness capacity of its hosts still with work, and both have at least this
    many seconds of politeness-bound work (queued URLs, or new links, times the host delay): the
    next round runs them side by side instead of one after the other (a mirror host discovered
    one level after its original; batchcrawl.fetch.idle.overlap_pays). It costs one round's
    overhead for up to the shorter side's seconds. 0 disables. Measured by
    scripts/bench_sites.py (the pydoc mirror pair)."""
    throughput_window_s: float = 5.0
    """Window over which the fetch rate is measured for ``tail_rate_ratio``, seconds."""
    tail_idle_s: Annotated[float, Range(0, None)] = 2.0
    """Also end a shard's fetch phase once fewer hosts than half its fetch threads have had work
    for this many seconds after the phase was busy (its slow tail, batchcrawl.fetch.idle), and a
    host of the shard that ran dry was given new links (the next round gains it; without one the
    cut would only add a round boundary); their URLs stay queued for the next round, first in
    line. A shard's fetch ends by its own work only: its list, its time limit, or this tail,
    never because another shard finished (issue 30); and a shard in any of these tails goes on
    fetching while another shard of the round still fetches outside its own (the round waits
    for that one anyway: ``Crawler._wait_fetch``). 0 disables. Measured by
    scripts/bench_round.py (``fetch_idle_share``)."""
    max_queued_urls: Positive = 20_000
    """Most URLs one shard holds in memory in ``crawl --stream`` (BUbiNG's virtualizer): the rest
    of each host's queue waits in the frontier and is topped up as the shard drains."""
    max_kept_host_rows: Positive = 10_000
    """Last ``hosts`` rows (robots.txt text included) a shard actor keeps in memory for the hosts
    its worker forgets between rounds, least recently written dropped first; a returning host
    whose row was dropped is read back from the committed ``hosts`` table (slower, same state).
    The rows a round just wrote are always kept."""


@dataclass(frozen=True)
class FiltersSection:
    """``[filters]``: the scope chain; each filter answers ALLOW, REJECT or ABSTAIN."""

    default: FilterDefault = "allow"
    """Answer when every filter abstains: ``allow`` or ``reject``."""
    seed_scope: SeedScope = "domain"
    """Keep to the seeds' ``host``s, their pay-level ``domain``s, or ``none`` (no seed scope)."""
    external_hops: int = 0
    """Links may leave the seed scope by this many hops."""
    allow_hosts: list[str] = field(default_factory=list)
    """Host patterns always in scope (``*.example.org`` matches subdomains)."""
    deny_hosts: list[str] = field(default_factory=list)
    """Host patterns never fetched."""
    allow_domains: list[str] = field(default_factory=list)
    """Pay-level domains always in scope."""
    deny_domains: list[str] = field(default_factory=list)
    """Pay-level domains never fetched."""
    allow_regex: Regexes = field(default_factory=list)
    """Regular expressions (Python ``re``) over the canonical URL: a match allows."""
    deny_regex: Regexes = field(default_factory=list)
    """Regular expressions over the canonical URL: a match rejects."""
    max_depth: int = 20
    """Links more than this many hops from a seed are rejected (``filtered:max_depth``)."""
    max_url_length: int = 2048
    """Longer canonical URLs are rejected, characters."""
    max_repeated_segments: int = 3
    """A path repeating one segment more often than this is rejected (spider traps)."""
    max_query_params: int = 20
    """URLs with more query parameters are rejected."""
    deny_extensions: list[str] = field(
        default_factory=lambda: [
            "7z",
            "avi",
            "bin",
            "bmp",
            "bz2",
            "dmg",
            "exe",
            "flv",
            "gif",
            "gz",
            "ico",
            "iso",
            "jar",
            "jpeg",
            "jpg",
            "mkv",
            "mov",
            "mp3",
            "mp4",
            "mpeg",
            "msi",
            "ogg",
            "png",
            "rar",
            "svg",
            "tar",
            "tgz",
            "tif",
            "tiff",
            "wav",
            "webm",
            "webp",
            "wmv",
            "woff",
            "woff2",
            "xz",
            "zip",
        ]
    )
    """Path extensions (lowercase, no dot) rejected before fetching."""


@dataclass(frozen=True)
class RoundSection:
    """``[round]``: how ``batchcrawl round`` runs its Dask graph."""

    workers: Positive = 2
    """Worker processes of the embedded ``LocalCluster``."""
    threads_per_worker: Positive = 2
    """Threads per Dask worker process of the embedded cluster (fetch threads are separate)."""
    scheduler: Annotated[str, _scheduler] = ""
    """Address of an existing Dask scheduler (``tcp://host:8786``); empty starts a LocalCluster."""
    connect_timeout_s: Annotated[float, _above_zero] = 30.0
    """Seconds to wait for the scheduler at ``scheduler`` to answer before giving up."""
    pipeline: bool = False
    """``batchcrawl crawl``: fetch round N+1 while round N is updated, compacted and committed
    (pipelined rounds, docs/design.md §8; ``batchcrawl round`` is always sequential). Round N+1 is
    selected from the generation before round N's, leaving out round N's URLs."""
    pipeline_min_busy_share: Annotated[float, Range(0, 1)] = 0.5
    """A pipelined round is fetched only if its fetch list has hosts for at least this share of all
    fetch threads (``fetch.threads`` x ``fetch.shards``; a host keeps one thread busy); else the
    driver waits for the commit and generates the round from it (the sequential path)."""
    malloc_arena_max: Annotated[int, Range(0, 64)] = 2
    """glibc malloc arenas per process of the embedded cluster (``MALLOC_ARENA_MAX``; 0 leaves
    glibc's default of 8 per core): each fetch thread's arena otherwise keeps the page bodies it
    freed (:mod:`batchcrawl.procmem`)."""
    malloc_trim_threshold_bytes: Annotated[int, Range(0, 1 << 30)] = 1 << 20
    """glibc malloc's trim threshold in the embedded cluster's processes
    (``MALLOC_TRIM_THRESHOLD_``): free memory above this at the top of a heap goes back to the
    system. Dask sets 64 KB, below one page's working set (SimHash, parse and WARC buffers of a 20
    KB page: ~0.5 MB), so each page's buffers were returned and faulted in anew: ~10 % of a fetch
    worker's CPU (:mod:`batchcrawl.procmem`). 0 leaves Dask's setting in the workers and glibc's
    adaptive default in the driver."""
    malloc_mmap_threshold_bytes: Annotated[int, Range(0, 1 << 30)] = 1 << 18
    """glibc malloc's mmap threshold in the same processes (``MALLOC_MMAP_THRESHOLD_``): blocks of
    this size or more are mapped on their own and unmapped when freed. Setting a trim threshold
    (Dask's or ``malloc_trim_threshold_bytes``) pins this at 128 KB unless it is set too; 0 leaves
    it so (the driver keeps glibc's adaptive default)."""
    arrow_pool: Literal["system", "jemalloc", "mimalloc", "default"] = "system"
    """pyarrow's memory pool in the embedded cluster's processes: ``system`` (malloc) returns the
    Arrow tables a round frees to the system; ``jemalloc``/``mimalloc`` keep them cached;
    ``default`` leaves pyarrow's choice."""
    spill_pages: Annotated[int, Range(0, None)] = 2000
    """A shard writes the ``fetched``, ``links`` and ``edges`` rows it holds to its round's files
    each time they pass this many pages, and drops them (Hadoop's map-side spills,
    :mod:`batchcrawl.fetch.spill`): a fetch worker's memory is then bounded by this, not by the
    size of the round. 0 holds a round's rows until it ends. Stream micro-batches never spill."""
    task_nice: Annotated[int, Range(0, 19)] = 10
    """The nice value (Linux; a lower CPU priority) of the Dask threads that run the crawl's tasks
    (selection, generate, update, compaction) in the worker processes, so that the fetch threads
    beside them keep each host's schedule while a merge runs: a stream at a 1 s host delay over
    500 hosts fetched 0.88-0.92 of the politeness bound at 0, 0.95 at 10 (docs/benchmarks.md,
    "Issue 33, 2026-12-07, second session"; batchcrawl.engine.taskpriority). A task still gets
    every core the fetch threads leave. On an existing cluster (``scheduler``) its task threads
    keep the value after the crawl (a thread cannot lower it again without privilege): set 0
    where that cluster also runs other work. 0 leaves the threads as they are."""


@dataclass(frozen=True)
class StreamSection:
    """``[stream]``: ``batchcrawl crawl --stream`` (docs/design.md §8)."""

    flush_interval_s: Annotated[float, _above_zero] = 5.0
    """Seconds between micro-batches: every shard's fetched rows and links since the last one are
    merged into the frontier (delta runs), newly due URLs are handed out, and a generation is
    committed (a checkpoint: what a SIGKILL can lose)."""
    max_batch_share: Annotated[float, Range(0.01, 1.0)] = 0.5
    """Most of the stream's time its micro-batches may take (take, merge, commit and the
    hand-out's selection: Dask work on the same processes as the fetch threads): the next
    regular micro-batch starts at least the last one's seconds divided by this after the last
    one's start, later than ``flush_interval_s`` when a micro-batch took more than this share
    of it. On the 500-host, 200,000-page benchmark web at a 1 s host delay a micro-batch took
    ~4-6 s once the frontier held ~150,000 URLs; started every 5 s they took all the stream's
    time and the fetch threads fetched 0.53-0.57 of the politeness bound (docs/benchmarks.md).
    Early micro-batches (``early_flush_s``) are not delayed. 1 keeps ``flush_interval_s``
    unless a micro-batch takes longer than it."""
    early_flush_s: Annotated[float, Range(0, None)] = 1.0
    """Start a micro-batch this many seconds after the last one started, before
    ``flush_interval_s``, once a shard's hosts that ran dry were given new links enough to make
    the next micro-batch at least 1.5 times as fast by politeness (a mirror found one level late,
    every host of a level done); and at once, without waiting these seconds, once a shard
    finished every URL it was given (its rows wait for the merge: a site's seeds done, a one-host
    site's level done, the end of a stream). Its threads would otherwise wait for the interval
    (issue 30; batchcrawl.fetch.idle.next_faster). Checked every 0.25 s. 0 disables both; a value
    at or above ``flush_interval_s`` never starts one early."""
    direct_links: bool = False
    """A shard queues the links it finds to the page's own host at once, before the merge, when
    that host has no committed ``hosts`` row from before the stream, is no probable trap, not held
    and under its ``urls_per_round`` (batchcrawl.fetch.directlinks; exactly once: the driver leases
    them at the next micro-batch). A deep site's hosts then run dry only at its end, not at every
    micro-batch. Opt-in: a URL takes the depth of the path it was found by first, which is not
    always its shortest (links from other hosts wait for the merge), so where ``filters.max_depth``
    binds, a stream may filter a URL a round would fetch. Ignored with ``generate.budget =
    "star"`` (budgets change with in-degree)."""


@dataclass(frozen=True)
class StoreSection:
    """``[store]``: the crawl directory's fact files (docs/design.md §3, "Fact compaction")."""

    compact_facts_min_files: Annotated[int, Range(2, None)] = 64
    """Merge the small files of a fact table (``fetchlists``, ``fetched``, ``links``, ``edges``)
    once this many are due (small and old enough), in the commit of a round or stream checkpoint:
    the number of files then grows with the data, not with the rounds and checkpoints (Nutch's
    segment merge)."""
    compact_facts_target_rows: Positive = 1_000_000
    """Rows of a merged fact file; a file with fewer rows is small (merged again later)."""
    compact_facts_min_age_rounds: Annotated[int, Range(0, None)] = 4
    """Only files of rounds (stream checkpoints) at least this many rounds old are merged: the
    newest rounds keep their own files (``export`` and ``extract`` of a round just done read
    them), and a file is not rewritten in the checkpoint after it was written."""


@dataclass(frozen=True)
class GcSection:
    """``[gc]``: removing old generations (docs/design.md §3, "Retention")."""

    auto: bool = True
    """After each commit of ``round``, ``crawl`` and ``crawl --stream``, expire the generations
    outside the time-travel window and delete the files only they used (Iceberg's
    ``expire_snapshots`` as a routine): kept are the newest ``crawl.keep_generations`` and every
    generation younger than ``keep_seconds`` (the time-travel window); then delete what a killed
    attempt at the round just committed left in its round's and generation's folders (files no
    kept generation names, last written before this process took the crawl lock). Older temp
    files and orphans elsewhere are left to ``batchcrawl gc``. False keeps every generation
    until ``batchcrawl gc`` runs."""
    keep_seconds: Annotated[float, Range(0, None)] = 3600.0
    """The automatic expiry keeps every generation committed less than this many seconds ago,
    besides the newest ``crawl.keep_generations`` (0: the count alone). ``batchcrawl gc`` keeps
    the count alone. A read of a generation that expires meanwhile (``sql --generation``, a
    background ``crawl.duckdb`` refresh, up to ~30 s behind) meets a missing file: the refresh
    is skipped (the newer generation's writes the file); keep the window longer than such
    reads."""


@dataclass(frozen=True)
class ProgressSection:
    """``[progress]``: what ``round`` and ``crawl`` print while they run (on stderr)."""

    interval_s: Annotated[float, _above_zero] = 30.0
    """Seconds between progress lines when stderr is not a terminal (CI, Airflow logs); a
    terminal gets a live table instead."""


@dataclass(frozen=True)
class DedupSection:
    """``[dedup]``: exact duplicates across shards and rounds (content-seen DRUM, MRS §20.2.2),
    near-duplicates (SimHash, Manku et al. 2007) and spider traps."""

    skip_duplicate_links: bool = False
    """Do not follow the links of a page whose payload is a known duplicate (it is archived as a
    WARC revisit either way). Off by default: Nutch, Heritrix, StormCrawler and Common Crawl
    follow a duplicate's links, so a mirror whose home page duplicates another host's is still
    crawled (issue 30); on is BUbiNG's choice (Boldi et al. 2014, §4: a duplicate's links are
    those of its original), which saves the fetches of a mirror's pages."""
    near_hamming: Annotated[int, Range(0, 64)] = 3
    """Largest Hamming distance (bits of 64) at which two pages of a host are near-duplicates."""
    near_window: Positive = 256
    """Recent page fingerprints remembered per host for the near-duplicate check."""
    trap_min_pages: Positive = 20
    """Recent pages of a host needed before its near-duplicate share can flag it a trap."""
    trap_near_share: Annotated[float, Range(0, 1)] = 0.5
    """Share of a host's recent pages that are near-duplicates from which it is a probable trap."""
    trap_repeat_segments: Positive = 3
    """A path repeating one segment this often flags its host a probable trap."""
    trap_max_urls_per_host: Positive = 10
    """Per-host cap of generate for probable trap hosts (instead of ``generate.max_urls_per_host``)."""
    max_shard_digests: Annotated[int, Range(0, None)] = 20_000
    """Payload digests of its own recent captures each fetch worker keeps (~400 bytes each), the
    fetch-time duplicate check within a round and since the last ``content`` load (earlier
    rounds' payloads come from ``max_seen_digests``); a duplicate of an older capture is found at
    update time. 20,000 covers a shard's round at ~250 pages/s for 80 s (docs/benchmarks.md)."""
    max_seen_digests: Annotated[int, Range(0, None)] = 100_000
    """Payload digests of earlier rounds each fetch worker loads for the fetch-time duplicate
    check (held as Arrow columns, about 115 bytes each:
    :class:`~batchcrawl.frontier.content.SeenDigests`): the ``content`` rows with the newest first
    capture (``fetch_time``). A duplicate of an older payload is found at update time instead (named query
    ``duplicates``), as one fetched by another shard in the same round: its WARC record stays a
    response and its links are followed."""


@dataclass(frozen=True)
class ExtractSection:
    """``[extract]``: text, language and page metadata of HTML captures (issue 32,
    :mod:`batchcrawl.extract`)."""

    at_fetch: bool = False
    """Extract each HTML page's text and languages in the fetch worker as it is fetched
    (:mod:`batchcrawl.extract.atfetch`): the round (or micro-batch) commits the ``text`` rows and WET
    files with its other files, the same rows ``batchcrawl extract`` makes, which then skips them.
    Off by default: it costs fetch-worker CPU per page (``scripts/bench_extract.py --at-fetch``,
    docs/benchmarks.md), which ``batchcrawl extract`` spends later, on any machine, instead."""


@dataclass(frozen=True)
class Config:
    """The whole configuration: one frozen section object per TOML table."""

    crawl: CrawlSection = field(default_factory=CrawlSection)
    network: NetworkSection = field(default_factory=NetworkSection)
    politeness: PolitenessSection = field(default_factory=PolitenessSection)
    robots: RobotsSection = field(default_factory=RobotsSection)
    frontier: FrontierSection = field(default_factory=FrontierSection)
    generate: GenerateSection = field(default_factory=GenerateSection)
    recrawl: RecrawlSection = field(default_factory=RecrawlSection)
    sitemaps: SitemapsSection = field(default_factory=SitemapsSection)
    fetch: FetchSection = field(default_factory=FetchSection)
    filters: FiltersSection = field(default_factory=FiltersSection)
    round: RoundSection = field(default_factory=RoundSection)
    stream: StreamSection = field(default_factory=StreamSection)
    progress: ProgressSection = field(default_factory=ProgressSection)
    store: StoreSection = field(default_factory=StoreSection)
    gc: GcSection = field(default_factory=GcSection)
    dedup: DedupSection = field(default_factory=DedupSection)
    extract: ExtractSection = field(default_factory=ExtractSection)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Plain nested dict (TOML/JSON-serializable)."""
        return dataclasses.asdict(self)

    def replace(self, **overrides: Mapping[str, Any]) -> Config:
        """A copy with ``{section: {key: value}}`` overrides applied and validated."""
        return _merge(self, [(dict(overrides), "replace()")])


SECTIONS: dict[str, type] = {
    f.name: typing.cast(typing.Callable[[], object], f.default_factory)().__class__
    for f in dataclasses.fields(Config)
}


#: Settings a crawl.toml (or ``--set``, or the environment) may still name but that no longer do
#: anything: ``(section, key)`` -> why. They are accepted and ignored, so a crawl started by an
#: older version still opens.
#:
#: * ``fetch.shard_grace_s`` (deprecated by issue 30): ended every other shard's fetch this many
#:   seconds after the first shard's run was over; a site whose hosts all route to one shard then
#:   fetched about a second's worth of pages per round. A shard's fetch now ends by its own work
#:   only (its time limit or its own tail, ``fetch.tail_*``).
#: Settings that were renamed: ``(section, old key)`` -> new key. The old name is still read (as the
#: new one), so a crawl.toml written by an older version opens with the same value.
RENAMED_KEYS: dict[tuple[str, str], str] = {
    ("fetch", "warc_rotate_bytes"): "warc_max_bytes",  # issue 35: rotation by size in a stream
}

RETIRED_KEYS: dict[tuple[str, str], str] = {
    ("fetch", "shard_grace_s"): "ignored since issue 30: a shard's fetch ends by its own work",
}


def _field_types(section: str) -> dict[str, Any]:
    return typing.get_type_hints(SECTIONS[section], include_extras=True)


def _split_hint(hint: Any) -> tuple[Any, tuple[Any, ...]]:
    """``Annotated[T, *rules]`` -> ``(T, rules)``; any other hint -> ``(hint, ())``."""
    if typing.get_origin(hint) is Annotated:
        base, *rules = typing.get_args(hint)
        return base, tuple(rules)
    return hint, ()


def _origin_line(path: str, text: str, section: str, key: str) -> str:
    """Best-effort ``file:line`` of ``key`` inside ``[section]`` of a TOML text."""
    current = None
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        m = re.match(r"^\[([^\]]+)\]", stripped)
        if m:
            current = m.group(1).strip()
            continue
        if current == section and re.match(rf"^{re.escape(key)}\s*=", stripped):
            return f"{path}:{lineno}"
    return path


def _top_level_line(path: str, text: str, key: str) -> str:
    """Best-effort ``file:line`` of ``key`` written before the first ``[section]`` of a TOML text
    (a key outside any section)."""
    for lineno, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("["):
            break
        if re.match(
            rf"^(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=", stripped
        ):
            return f"{path}:{lineno}"
    return path


def _outside_sections(key: str, where: str) -> ConfigError:
    """The error for ``key`` written outside any section (before the first ``[section]`` header
    of a file), naming the sections that have a key of that name."""
    homes = [name for name in SECTIONS if key in _field_types(name)]
    homes += [s for (s, old) in (*RENAMED_KEYS, *RETIRED_KEYS) if old == key and s not in homes]
    if len(homes) == 1:
        hint = f"move it under [{homes[0]}], the section that has a key of that name"
    elif homes:
        hint = f"move it under the section it is meant for ({', '.join(f'[{h}]' for h in homes)} "
        hint += "have a key of that name)"
    else:
        hint = f"no section has a key of that name; known sections: {', '.join(SECTIONS)}"
    return ConfigError(
        f"{key} (from {where}): a key outside any section (written before the first [section] "
        f"header); {hint}"
    )


def _coerce(section: str, key: str, value: Any, origin: str, from_string: bool) -> Any:
    """Check ``value`` against the declared type of ``section.key``; strings from the environment or
    ``--set`` are parsed as TOML values first (falling back to a bare string)."""
    hint, rules = _split_hint(_field_types(section)[key])
    if from_string and isinstance(value, str):
        try:
            value = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            pass
    where = f"{section}.{key} (from {origin})"
    base = typing.get_origin(hint) or hint
    if base is Literal:
        choices = typing.get_args(hint)
        if value not in choices:
            raise ConfigError(f"{where}: expected one of {', '.join(choices)}, got {value!r}")
    elif base is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
    elif base is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
    elif base is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            bounds = " ".join(r.describe() for r in rules if isinstance(r, Range))
            raise ConfigError(f"{where}: expected a number{' ' if bounds else ''}{bounds}, "
                              f"got {value!r}")  # fmt: skip
        value = float(value)
        if not math.isfinite(value):  # nan passes every comparison; inf means nothing here
            raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    elif base is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
    elif base is list and typing.get_args(hint) and typing.get_args(hint)[0] is not str:
        if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
            raise ConfigError(f"{where}: expected an array of tables ([[{section}.{key}]]), "
                              f"got {value!r}")  # fmt: skip
        value = [dict(v) for v in value]
    elif base is list:
        if isinstance(value, str) and from_string:
            value = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
        value = list(value)
    elif base is dict:
        if isinstance(value, str) and from_string:
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise ConfigError(f"{where}: expected a table of strings, got {value!r}")
        value = dict(value)
    else:  # pragma: no cover - every declared type is handled above
        raise TypeError(f"unsupported config type {hint!r}")
    own_min = any(isinstance(rule, Range) and rule.min is not None for rule in rules)
    if base in (int, float) and value < 0 and not own_min:  # a Range names its own lower bound
        raise ConfigError(f"{where}: expected a value >= 0, got {value!r}")
    for rule in rules:
        if isinstance(rule, Range):
            rule.check(value, where)
        else:
            rule(value, where)
    return value


Layer = tuple[Mapping[str, Any], str]


def _merge(
    base: Config,
    layers: Iterable[tuple[Mapping[str, Any], str]],
    *,
    texts: Mapping[str, str] | None = None,
    from_string: bool = False,
) -> Config:
    sections = {name: dataclasses.asdict(getattr(base, name)) for name in SECTIONS}
    for data, origin in layers:
        if not isinstance(data, Mapping):
            raise ConfigError(f"{origin}: expected a table of sections, got {data!r}")
        for section, values in data.items():
            if section not in SECTIONS and not isinstance(values, Mapping):
                where = origin
                if texts and origin in texts:
                    where = _top_level_line(origin, texts[origin], section)
                raise _outside_sections(section, where)
            if section not in SECTIONS:
                raise ConfigError(
                    f"{origin}: unknown section [{section}]; known sections: {', '.join(SECTIONS)}"
                )
            if not isinstance(values, Mapping):
                raise ConfigError(f"{origin}: [{section}] must be a table, got {values!r}")
            known = _field_types(section)
            for key, value in values.items():
                if (section, key) in RETIRED_KEYS:
                    continue
                where = origin
                if texts and origin in texts:
                    where = _origin_line(origin, texts[origin], section, key)
                key = RENAMED_KEYS.get((section, key), key)
                if key not in known:
                    raise ConfigError(
                        f"{section}.{key} (from {where}): unknown key; keys of [{section}]: "
                        f"{', '.join(known)}"
                    )
                sections[section][key] = _coerce(section, key, value, where, from_string)
    return Config(**{name: SECTIONS[name](**vals) for name, vals in sections.items()})


def parse_toml(text: str, origin: str) -> dict[str, Any]:
    """Parse TOML ``text``; syntax errors become :class:`ConfigError` naming ``origin`` and line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin}: not valid TOML: {exc}") from None


def env_overrides(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """``BATCHCRAWL_SECTION__KEY=value`` variables as ``{section: {key: value}}`` (lower-cased).

    Variables with the prefix but no ``__`` raise :class:`ConfigError` (a typo must not pass
    silently). ``BATCHCRAWL_CONFIG`` is reserved for the CLI and ignored here.
    """
    out: dict[str, dict[str, str]] = {}
    for name, value in environ.items():
        if not name.startswith(ENV_PREFIX) or name == ENV_PREFIX + "CONFIG":
            continue
        rest = name[len(ENV_PREFIX) :].lower()
        if "__" not in rest:
            raise ConfigError(
                f"environment variable {name}: expected {ENV_PREFIX}SECTION__KEY "
                f"(two underscores between section and key)"
            )
        section, key = rest.split("__", 1)
        out.setdefault(section, {})[key] = value
    return out


def set_overrides(pairs: Iterable[str]) -> dict[str, dict[str, str]]:
    """``--set section.key=value`` strings as ``{section: {key: value}}``.

    Raises :class:`ConfigError` for a pair without ``=`` or without a ``section.`` prefix.
    """
    out: dict[str, dict[str, str]] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        section, dot, key = name.strip().partition(".")
        if not sep or not dot or not section or not key:
            raise ConfigError(f"--set {pair!r}: expected section.key=value, e.g. fetch.shards=4")
        out.setdefault(section, {})[key.strip()] = value.strip()
    return out


def load_config(
    *,
    files: Iterable[tuple[str, str]] = (),
    environ: Mapping[str, str] | None = None,
    sets: Iterable[str] = (),
    flags: Mapping[str, Mapping[str, Any]] | None = None,
) -> Config:
    """Build the :class:`Config` from its layers, lowest precedence first.

    Parameters
    ----------
    files
        ``(origin, toml_text)`` pairs, e.g. ``("CRAWL/crawl.toml", text)``; later files win.
    environ
        Environment (``os.environ`` by default); ``BATCHCRAWL_SECTION__KEY`` variables apply.
    sets
        ``--set section.key=value`` strings.
    flags
        Explicit CLI flags as ``{section: {key: value}}``; already typed.

    Raises
    ------
    ConfigError
        Unknown section or key, wrong type, value out of range; the message names the origin.
    """
    files = list(files)
    texts = dict(files)
    layers: list[tuple[Mapping[str, Any], str, bool]] = [
        (parse_toml(text, origin), origin, False) for origin, text in files
    ]
    env = os.environ if environ is None else environ
    for section, values in env_overrides(env).items():
        for key, value in values.items():
            var = f"{ENV_PREFIX}{section.upper()}__{key.upper()}"
            layers.append(({section: {key: value}}, f"environment variable {var}", True))
    for section, values in set_overrides(sets).items():
        for key, value in values.items():
            layers.append(({section: {key: value}}, f"--set {section}.{key}", True))
    if flags:
        layers.append(({s: dict(v) for s, v in flags.items() if v}, "command-line flag", False))
    cfg = Config()
    for data, origin, from_string in layers:
        cfg = _merge(cfg, [(data, origin)], texts=texts, from_string=from_string)
    return cfg


def to_toml(cfg: Config) -> str:
    """Serialize a config as TOML (used to write ``CRAWL/crawl.toml`` at init). Arrays of tables
    (``politeness.hosts``, ``politeness.groups``) are written as ``[[section.key]]`` tables after
    their section's keys, so a user adds one by appending a table; empty ones are left out."""
    lines: list[str] = []
    for section, values in cfg.to_dict().items():
        lines.append(f"[{section}]")
        tables = {k: v for k, v in values.items() if isinstance(v, list) and v
                  and all(isinstance(x, dict) for x in v)}  # fmt: skip
        hints = _field_types(section)
        for key, value in values.items():
            if key in tables or (not value and _is_table_array(hints[key])):
                continue
            lines.append(f"{key} = {toml_value(value)}")
        lines.append("")
        for key, entries in tables.items():
            for entry in entries:
                lines.append(f"[[{section}.{key}]]")
                lines.extend(f"{k} = {toml_value(v)}" for k, v in entry.items())
                lines.append("")
    return "\n".join(lines)


def _is_table_array(hint: Any) -> bool:
    """Whether a field's type is a list of tables (``[[section.key]]`` in TOML)."""
    base, _ = _split_hint(hint)
    args = typing.get_args(base)
    return typing.get_origin(base) is list and bool(args) and args[0] is not str


def toml_value(value: Any) -> str:
    """One value as TOML text (a boolean, number, string, list of those, or a table of strings)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return (
            "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
        )
    raise TypeError(f"cannot write {value!r} as TOML")


def loopback_test_config(**overrides: Mapping[str, Any]) -> Config:
    """A config for tests, demos and benchmarks: only ``*.test`` names resolve (to 127.0.0.1), no DNS
    server is asked, and only 127.0.0.0/8 may be contacted (docs/design.md §10). The loopback webs
    are our own servers, so a ``Crawl-delay`` above ``politeness.max_crawl_delay_s`` is capped
    (``politeness.long_crawl_delay = "cap"``): tests shorten the sample web's delays with it."""
    base = Config().replace(
        network={
            "resolve": {"*.test": "127.0.0.1"},
            "system_dns": False,
            "allow_networks": ["127.0.0.0/8"],
        },
        politeness={"long_crawl_delay": "cap"},
    )
    return base.replace(**overrides) if overrides else base
