"""Per-host politeness settings and politeness groups (issue 31, item 3), read by selection and by
the fetch workers' workbench alike.

Two kinds of rule, both in ``[politeness]`` of the crawl's TOML config and both matched on the
host name, either by a glob (``match = "*.example.org"``, :func:`fnmatch.fnmatchcase`) or by a SURT
prefix (``surt = "org,example,"``: the host's labels reversed, each followed by a comma, so
``org,example,`` covers ``example.org`` and every subdomain of it). The first rule that matches a
host applies (rules are read in the order written):

* **host rules** (``[[politeness.hosts]]``), Heritrix's sheets: ``delay_s`` replaces
  ``politeness.host_delay_s`` as the host's floor (robots.txt ``Crawl-delay`` still raises it),
  ``urls_per_round`` replaces ``generate.max_urls_per_host``, ``enabled = false`` keeps the host's
  URLs queued but never selects them (counted ``disabled``);
* **groups** (``[[politeness.groups]]``), Scrapy's ``DOWNLOAD_SLOTS``: the matching hosts share one
  workbench entry -- one delay ``delay_s`` between the end of any fetch of the group and the start
  of the next, and at most ``concurrency`` fetches in flight -- instead of their IP address's
  entry (``politeness.ip_delay_s``, ``ip_concurrency``). ``by = "pattern"`` makes one group of all
  matching hosts, ``by = "domain"`` one per pay-level domain among them, ``by = "ip"`` one per
  address among them (the default for hosts no group matches, with the ``ip_*`` settings).

:func:`host_surt` and :class:`Matcher` are the matching; :func:`parse_host_rules` and
:func:`parse_group_rules` turn the config's tables into frozen rules (the config validates with
them); :class:`PolitenessPolicy` answers per host, memoized.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from batchcrawl.errors import ConfigError
from batchcrawl.urls import domain_of

__all__ = [
    "GroupRule",
    "HostRule",
    "Matcher",
    "PolitenessPolicy",
    "Slot",
    "host_surt",
    "policy_of",
    "parse_group_rules",
    "parse_host_rules",
]

_POLICIES: dict[tuple[str, int], PolitenessPolicy] = {}
#: the section object last asked for, per URLs-per-host default, and its policy
_LAST: dict[int, tuple[Any, PolitenessPolicy]] = {}
#: hosts whose answers a policy remembers before it starts over (bounded memory)
_MEMO = 1 << 16


def host_surt(host: str) -> str:
    """SURT form of a host (Heritrix's SURT prefixes, without scheme): labels reversed, each
    followed by a comma: ``www.example.org`` -> ``org,example,www,``."""
    return "".join(label + "," for label in reversed(host.split(".")))


@dataclass(frozen=True)
class Matcher:
    """Which hosts a rule covers: ``glob`` on the host name (``*.example.org``; case-insensitive,
    hosts are lower-case) or ``surt`` prefix of :func:`host_surt` (``org,example,``); one of the
    two."""

    glob: str | None = None
    surt: str | None = None

    def matches(self, host: str) -> bool:
        """Whether ``host`` (lower-case, as the frontier's ``host`` column) is covered."""
        if self.glob is not None:
            return fnmatch.fnmatchcase(host, self.glob)
        return host_surt(host).startswith(self.surt or "")

    def describe(self) -> str:
        """``match = "..."`` or ``surt = "..."``, for messages and group keys."""
        return f'match = "{self.glob}"' if self.glob is not None else f'surt = "{self.surt}"'


@dataclass(frozen=True)
class HostRule:
    """One ``[[politeness.hosts]]`` table. ``delay_s`` (seconds) and ``urls_per_round`` are None
    when the rule leaves the crawl-wide setting in force."""

    matcher: Matcher
    delay_s: float | None = None
    urls_per_round: int | None = None
    enabled: bool = True


@dataclass(frozen=True)
class GroupRule:
    """One ``[[politeness.groups]]`` table: ``name``, the hosts it covers, how they are grouped
    (``by``: ``pattern``, ``domain`` or ``ip``), the group's ``delay_s`` (seconds) and
    ``concurrency`` (fetches in flight, >= 1)."""

    name: str
    matcher: Matcher
    by: str = "pattern"
    delay_s: float = 1.0
    concurrency: int = 1


@dataclass(frozen=True)
class Slot:
    """The workbench entry a host belongs to: ``key`` (``ip:ADDRESS``, ``group:NAME``,
    ``group:NAME:DOMAIN`` or ``group:NAME:ADDRESS``), the least time between the end of one fetch
    of the entry and the start of the next (``delay_s``, seconds), and the most fetches in flight
    (``concurrency``)."""

    key: str
    delay_s: float
    concurrency: int


_HOST_KEYS = {"match", "surt", "delay_s", "urls_per_round", "enabled"}
_GROUP_KEYS = {"name", "match", "surt", "by", "delay_s", "concurrency"}


def _number(table: Mapping[str, Any], key: str, where: str, *, integer: bool, least: float) -> Any:
    value = table[key]
    ok = isinstance(value, int) if integer else isinstance(value, int | float)
    if isinstance(value, bool) or not ok or not math.isfinite(value) or value < least:
        kind = "an integer" if integer else "a finite number of seconds"
        raise ConfigError(f"{where}: {key} must be {kind} >= {least}, got {value!r}")
    return value if integer else float(value)


def _matcher(table: Mapping[str, Any], where: str) -> Matcher:
    glob, surt = table.get("match"), table.get("surt")
    if (glob is None) == (surt is None):
        raise ConfigError(
            f'{where}: give exactly one of match = "*.example.org" (a glob on the host) or '
            f'surt = "org,example," (a SURT prefix), got {dict(table)!r}'
        )
    value = glob if glob is not None else surt
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: match/surt must be a non-empty string, got {value!r}")
    if glob is not None:
        return Matcher(glob=value.lower())
    return Matcher(surt=value.lower().removeprefix("http://(").removeprefix("https://("))


def _table(entry: Any, known: set[str], where: str) -> Mapping[str, Any]:
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where}: expected a table, got {entry!r}")
    unknown = set(entry) - known
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}"
        )
    return entry


def parse_host_rules(
    entries: Sequence[Any], origin: str = "politeness.hosts"
) -> tuple[HostRule, ...]:
    """``[[politeness.hosts]]`` tables -> :class:`HostRule` s, in order.

    Raises
    ------
    ConfigError
        A table with an unknown key, neither or both of ``match``/``surt``, a negative or
        non-numeric ``delay_s``, an ``urls_per_round`` that is not an integer >= 0, or an
        ``enabled`` that is not a boolean; the message names the table's index.
    """
    rules = []
    for i, entry in enumerate(entries):
        where = f"{origin}[{i}]"
        t = _table(entry, _HOST_KEYS, where)
        enabled = t.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"{where}: enabled must be true or false, got {enabled!r}")
        rules.append(HostRule(
            matcher=_matcher(t, where),
            delay_s=_number(t, "delay_s", where, integer=False, least=0) if "delay_s" in t else None,
            urls_per_round=(_number(t, "urls_per_round", where, integer=True, least=0)
                            if "urls_per_round" in t else None),
            enabled=enabled,
        ))  # fmt: skip
    return tuple(rules)


def parse_group_rules(
    entries: Sequence[Any], origin: str = "politeness.groups"
) -> tuple[GroupRule, ...]:
    """``[[politeness.groups]]`` tables -> :class:`GroupRule` s, in order.

    Raises
    ------
    ConfigError
        A table with an unknown key, no ``name`` or a name used twice, neither or both of
        ``match``/``surt``, ``by`` not one of ``pattern``, ``domain``, ``ip``, no ``delay_s`` or a
        negative one, a ``concurrency`` that is not an integer >= 1.
    """
    rules: list[GroupRule] = []
    for i, entry in enumerate(entries):
        where = f"{origin}[{i}]"
        t = _table(entry, _GROUP_KEYS, where)
        name = t.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f'{where}: every group needs a name = "...", got {name!r}')
        if any(r.name == name for r in rules):
            raise ConfigError(f"{where}: group name {name!r} is used twice; names must differ")
        by = t.get("by", "pattern")
        if by not in ("pattern", "domain", "ip"):
            raise ConfigError(f"{where}: by must be one of pattern, domain, ip, got {by!r}")
        if "delay_s" not in t:
            raise ConfigError(f"{where}: a group needs delay_s (seconds between its fetches)")
        rules.append(GroupRule(
            name=name, matcher=_matcher(t, where), by=by,
            delay_s=_number(t, "delay_s", where, integer=False, least=0),
            concurrency=_number(t, "concurrency", where, integer=True, least=1)
            if "concurrency" in t else 1,
        ))  # fmt: skip
    return tuple(rules)


def policy_of(politeness: Any, max_urls_per_host: int = 1000) -> PolitenessPolicy:
    """:meth:`PolitenessPolicy.from_config`, reused while the section is the same (the last few
    are kept: selection and routing ask once per bucket or per call; the same section object
    asked again is answered without serializing it)."""
    last = _LAST.get(max_urls_per_host)
    if last is not None and last[0] is politeness:
        return last[1]
    key = (json.dumps(dataclasses.asdict(politeness), sort_keys=True), max_urls_per_host)
    policy = _POLICIES.get(key)
    if policy is None:
        if len(_POLICIES) >= 8:
            _POLICIES.clear()
        policy = _POLICIES[key] = PolitenessPolicy.from_config(politeness, max_urls_per_host)
    _LAST[max_urls_per_host] = (politeness, policy)
    return policy


class PolitenessPolicy:
    """Per-host answers of the ``[politeness]`` section: the host's delay floor, its URLs per
    round, whether it is enabled, and its workbench entry (:class:`Slot`). Answers are memoized
    per host (a policy is immutable: a changed config makes a new one).

    Parameters
    ----------
    host_delay_s, ip_delay_s, ip_concurrency
        The crawl-wide floor of a host's delay, and the default entry of an IP address (seconds,
        seconds, fetches in flight).
    host_rules, group_rules
        Parsed rules (:func:`parse_host_rules`, :func:`parse_group_rules`), first match wins.
    max_urls_per_host
        ``generate.max_urls_per_host``: URLs per round of a host no rule sets.
    """

    def __init__(
        self,
        *,
        host_delay_s: float,
        ip_delay_s: float,
        ip_concurrency: int,
        host_rules: Sequence[HostRule] = (),
        group_rules: Sequence[GroupRule] = (),
        max_urls_per_host: int = 1000,
    ) -> None:
        self.host_delay_s = host_delay_s
        self.ip_delay_s = ip_delay_s
        self.ip_concurrency = ip_concurrency
        self.host_rules = tuple(host_rules)
        self.group_rules = tuple(group_rules)
        self.max_urls_per_host = max_urls_per_host
        self._host_memo: dict[str, HostRule | None] = {}
        self._group_memo: dict[str, GroupRule | None] = {}

    @classmethod
    def from_config(cls, politeness: Any, max_urls_per_host: int = 1000) -> PolitenessPolicy:
        """The policy of a ``PolitenessSection`` (and ``generate.max_urls_per_host``)."""
        return cls(
            host_delay_s=politeness.host_delay_s,
            ip_delay_s=politeness.ip_delay_s,
            ip_concurrency=politeness.ip_concurrency,
            host_rules=parse_host_rules(politeness.hosts),
            group_rules=parse_group_rules(politeness.groups),
            max_urls_per_host=max_urls_per_host,
        )

    def host_rule(self, host: str) -> HostRule | None:
        """The first ``[[politeness.hosts]]`` rule covering ``host``, or None (memoized)."""
        return _first_match(self._host_memo, self.host_rules, host)

    def group_rule(self, host: str) -> GroupRule | None:
        """The first ``[[politeness.groups]]`` rule covering ``host``, or None (memoized)."""
        return _first_match(self._group_memo, self.group_rules, host)

    def delay_floor_s(self, host: str) -> float:
        """The host's floor delay, seconds: its rule's ``delay_s``, else ``host_delay_s``."""
        rule = self.host_rule(host)
        return self.host_delay_s if rule is None or rule.delay_s is None else rule.delay_s

    def urls_per_round(self, host: str) -> int:
        """Most URLs of ``host`` on one round's fetch lists: its rule's ``urls_per_round``, else
        ``generate.max_urls_per_host``."""
        rule = self.host_rule(host)
        if rule is None or rule.urls_per_round is None:
            return self.max_urls_per_host
        return rule.urls_per_round

    def enabled(self, host: str) -> bool:
        """False when the host's rule says ``enabled = false``."""
        rule = self.host_rule(host)
        return rule is None or rule.enabled

    def route(self, host: str, domain: str, ip: str | None) -> str | None:
        """The shard route name of a grouped host (:func:`batchcrawl.ring.route_name`): the group
        for ``by = "pattern"``, the pay-level ``domain`` for ``by = "domain"``, the address (or the
        host while its address is unknown) for ``by = "ip"``; None for a host in no group."""
        rule = self.group_rule(host)
        if rule is None:
            return None
        if rule.by == "pattern":
            return f"group:{rule.name}"
        return domain if rule.by == "domain" else (ip or host)

    def slot(self, host: str, ip: str, domain: str | None = None) -> Slot:
        """The workbench entry of ``host`` at address ``ip`` (``domain``: its pay-level domain,
        needed by ``by = "domain"`` groups; computed from the host when None)."""
        rule = self.group_rule(host)
        if rule is None:
            return Slot(f"ip:{ip}", self.ip_delay_s, self.ip_concurrency)
        if rule.by == "pattern":
            key = f"group:{rule.name}"
        elif rule.by == "ip":
            key = f"group:{rule.name}:{ip}"
        else:
            key = f"group:{rule.name}:{domain_of(host) if domain is None else domain}"
        return Slot(key, rule.delay_s, rule.concurrency)


#: A politeness rule kind :func:`_first_match` looks up.
_R = TypeVar("_R", HostRule, GroupRule)


def _first_match(memo: dict[str, _R | None], rules: Sequence[_R], host: str) -> _R | None:
    """The first of ``rules`` whose ``matcher`` matches ``host`` (None if none), memoized in
    ``memo`` (cleared when it holds :data:`_MEMO` hosts)."""
    if host not in memo:
        if len(memo) >= _MEMO:
            memo.clear()
        memo[host] = next((r for r in rules if r.matcher.matches(host)), None)
    return memo[host]
