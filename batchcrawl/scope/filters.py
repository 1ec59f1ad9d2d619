"""The scope filters: which URLs the crawl may fetch, and why the others are dropped.

A :class:`FilterChain` is an ordered list of small filters. Each answers :class:`Decision`
``ALLOW``, ``REJECT`` or ``ABSTAIN`` for one :class:`Candidate` (canonical URL, host, pay-level
domain, depth, hops out of the seed scope). The **first answer that is not ABSTAIN wins**; when every
filter abstains the configured default (``filters.default``) applies. Each filter is named for the
one decision it makes, as Heritrix's ``DecideRule`` classes are (``TooManyHopsDecideRule``,
``PathologicalPathDecideRule``, ...), and carries a ``reason``: a short stable name stored in the
frontier as ``status = 'filtered'``, ``reason = <reason>`` and counted (``filtered:<reason>``).

Order built by :meth:`FilterChain.from_config`
----------------------------------------------
1. Hard limits, REJECT-only (nothing overrides them, not even an allow list):
   ``url_length`` (:class:`RejectLongUrls`), ``max_depth`` (:class:`RejectTooDeep`),
   ``extension`` (:class:`RejectExtensions`), ``repeated_segments``
   (:class:`RejectRepeatedSegments`), ``query_params`` (:class:`RejectManyQueryParams`); cheapest
   first. When several apply, the first one in this order is the reason reported.
2. Deny lists, REJECT-only: ``deny_host`` (:class:`RejectHosts`), ``deny_domain``
   (:class:`RejectDomains`), ``deny_regex`` (:class:`RejectMatching`). A deny rule therefore always
   wins over any allow rule and over the seed scope.
3. Allow lists, ALLOW-only: :class:`AllowHosts`, :class:`AllowDomains`, :class:`AllowMatching`.
   They widen the scope beyond the seeds; they do not reset the hop count.
4. The seed scope (:class:`KeepToSeedScope`, only when ``filters.seed_scope`` is ``host`` or
   ``domain``): ALLOW when ``hops_out <= external_hops``, else REJECT with ``out_of_scope``. It
   never abstains, so with a seed scope the default is never reached; the default matters only with
   ``seed_scope = "none"`` (then ``default = "reject"`` plus allow lists is a pure allow-list crawl).
5. The default: ALLOW, or REJECT with reason ``default_reject``.

Where it runs
-------------
One chain, built once per process from the config, is applied at ``inject`` (seeds), in the fetch
worker on every discovered outlink and redirect target (hence the speed budget), and at
``generate`` (so a changed config takes effect on URLs already in the frontier). Rejected URLs
keep their row with ``status = 'filtered'`` and the reason.

A filter whose list is empty is not put in the chain at all, so an unused feature costs nothing.
Host and domain decisions are memoized per host/domain (bounded dicts); regular expressions run only
when configured. A chain of the default config checks a URL in a few microseconds.

Hops out of the seed scope
--------------------------
``hops_out`` counts consecutive links outside the seed scope (Heritrix's "transitive" hops; Nutch's
``db.ignore.external.links`` with a tolerance): :meth:`FilterChain.hops_out` gives 0 for a host (mode
``host``) or pay-level domain (mode ``domain``) of a seed, ``parent + 1`` otherwise, and always 0
with ``seed_scope = "none"``. A seed is in the seed scope by definition (hops 0), but the hard
limits and deny lists still apply to it (a seed named by a deny rule is stored as filtered). The
chain trusts the
``hops_out`` it is given (stored in the frontier), so ``check`` at generate needs no seed list;
:meth:`FilterChain.hops_out` does.

Patterns
--------
Host and domain patterns are an exact name (``example.org``), ``*.example.org`` (its subdomains at
any depth, not the name itself) or ``*``, read by :class:`~batchcrawl.scope.hostpatterns.HostPatterns`
exactly as ``network.resolve`` reads them (:mod:`batchcrawl.scope.hostpatterns`).
Regular expressions are Python ``re`` patterns searched (``re.search``, anywhere) in the canonical
URL, as Nutch's ``regex-urlfilter`` does.
"""

from __future__ import annotations

import enum
import re
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from batchcrawl.config import FiltersSection, SeedScope
from batchcrawl.errors import ConfigError
from batchcrawl.scope.hostpatterns import HostPatterns
from batchcrawl.urls import domain_of

__all__ = [
    "REASONS",
    "AllowDomains",
    "AllowHosts",
    "AllowMatching",
    "Candidate",
    "Decision",
    "Filter",
    "FilterChain",
    "HostPatterns",
    "KeepToSeedScope",
    "RejectDomains",
    "RejectExtensions",
    "RejectHosts",
    "RejectLongUrls",
    "RejectManyQueryParams",
    "RejectMatching",
    "RejectRepeatedSegments",
    "RejectTooDeep",
]

#: Every reason a chain built by :meth:`FilterChain.from_config` can return (counter names).
REASONS = (
    "url_length",
    "max_depth",
    "extension",
    "repeated_segments",
    "query_params",
    "deny_host",
    "deny_domain",
    "deny_regex",
    "out_of_scope",
    "default_reject",
)


class Decision(enum.Enum):
    """A filter's answer for one URL."""

    ALLOW = "allow"
    REJECT = "reject"
    ABSTAIN = "abstain"


@dataclass(slots=True)
class Candidate:
    """One URL as the filters see it. Treat as immutable.

    Attributes
    ----------
    url : str
        Canonical URL (:func:`batchcrawl.urls.canonicalize`).
    host : str
        Its host, :func:`batchcrawl.urls.host_of` (lower case, punycode, IPv6 in brackets).
    domain : str
        Its pay-level domain, :func:`batchcrawl.urls.domain_of`.
    depth : int
        Link hops from a seed (seeds: 0).
    hops_out : int
        Consecutive hops outside the seed scope (:meth:`FilterChain.hops_out`; seeds: 0).
    """

    url: str
    host: str
    domain: str
    depth: int
    hops_out: int


class Filter(Protocol):
    """What a chain needs of a filter: ``decide`` and the ``reason`` reported on REJECT."""

    reason: str

    def decide(self, c: Candidate) -> Decision: ...


# --- 1. hard limits (REJECT-only) ---------------------------------------------------------------


class RejectLongUrls:
    """REJECT a canonical URL longer than ``max_chars`` characters (``filters.max_url_length``).

    Parameters
    ----------
    max_chars : int
        Longest URL allowed, characters (>= 0).
    """

    reason = "url_length"

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars

    def decide(self, c: Candidate) -> Decision:
        """REJECT if ``len(c.url) > max_chars``, else ABSTAIN."""
        return Decision.REJECT if len(c.url) > self.max_chars else Decision.ABSTAIN


class RejectExtensions:
    """REJECT a URL whose last path segment ends in a listed extension (``filters.deny_extensions``).

    The extension is what follows the last ``.`` of the last path segment, with any ``;params``
    removed, compared case-insensitively (``/a/Photo.JPG;v=2`` has ``jpg``). The query is not looked
    at (``/img?f=a.png`` has no extension), as in Nutch's ``suffix-urlfilter``.

    Parameters
    ----------
    extensions : iterable of str
        Extensions without the dot (a leading dot is tolerated), any case.
    """

    reason = "extension"

    def __init__(self, extensions: Iterable[str]) -> None:
        exts = set()
        for ext in extensions:
            e = ext.strip().lower().lstrip(".")
            if not e or "/" in e:
                raise ConfigError(
                    f"filters.deny_extensions: {ext!r} is not an extension; write e.g. 'jpg'"
                )
            exts.add(e)
        self.extensions = frozenset(exts)

    def decide(self, c: Candidate) -> Decision:
        """REJECT if the last path segment's extension is listed, else ABSTAIN."""
        url = c.url
        end = url.find("?")
        if end < 0:
            end = len(url)
        slash = url.rfind("/", 0, end)  # a canonical URL always has a path
        semi = url.find(";", slash, end)
        if semi >= 0:
            end = semi
        dot = url.rfind(".", slash, end)
        if dot < 0:
            return Decision.ABSTAIN
        return (
            Decision.REJECT if url[dot + 1 : end].lower() in self.extensions else Decision.ABSTAIN
        )


class RejectRepeatedSegments:
    """REJECT a path in which one segment occurs more than ``max_repeats`` times (spider traps such
    as ``/a/b/a/b/a/b/a/b``; Heritrix ``PathologicalPathDecideRule``, Nutch's repeated-segment regex).

    Empty segments (from ``//`` or a trailing ``/``) are not counted; segments are compared as
    written (case-sensitive, escapes as in the canonical URL).

    Parameters
    ----------
    max_repeats : int
        Most occurrences of one segment allowed (>= 0; ``filters.max_repeated_segments``).
    """

    reason = "repeated_segments"

    def __init__(self, max_repeats: int) -> None:
        self.max_repeats = max_repeats

    def decide(self, c: Candidate) -> Decision:
        """REJECT if some non-empty segment occurs more than ``max_repeats`` times, else ABSTAIN."""
        url = c.url
        limit = self.max_repeats
        end = url.find("?")
        if end < 0:
            end = len(url)
        # ``scheme://host/p1/p2``: the path has ``count("/") - 2`` slashes, one per segment.
        if url.count("/", 0, end) - 2 <= limit:
            return Decision.ABSTAIN
        segments = url[:end].split("/")[3:]
        # A segment occurring k times adds k - 1 to the duplicates; k > limit needs >= limit.
        if len(segments) - len(set(segments)) < limit:
            return Decision.ABSTAIN
        counts: dict[str, int] = {}
        for segment in segments:
            if segment:
                n = counts.get(segment, 0) + 1
                if n > limit:
                    return Decision.REJECT
                counts[segment] = n
        return Decision.ABSTAIN


class RejectManyQueryParams:
    """REJECT a URL with more than ``max_params`` query parameters (``filters.max_query_params``).

    Parameters are the non-empty ``&``-separated pieces of the query (``?a=1&&b`` has two).

    Parameters
    ----------
    max_params : int
        Most parameters allowed (>= 0).
    """

    reason = "query_params"

    def __init__(self, max_params: int) -> None:
        self.max_params = max_params

    def decide(self, c: Candidate) -> Decision:
        """REJECT if the query has more than ``max_params`` non-empty parameters, else ABSTAIN."""
        url = c.url
        q = url.find("?")
        if q < 0 or url.count("&", q) + 1 <= self.max_params:
            return Decision.ABSTAIN
        n = sum(1 for piece in url[q + 1 :].split("&") if piece)
        return Decision.REJECT if n > self.max_params else Decision.ABSTAIN


class RejectTooDeep:
    """REJECT a URL more than ``max_depth`` link hops from a seed (``filters.max_depth``; Heritrix
    ``TooManyHopsDecideRule``).

    Parameters
    ----------
    max_depth : int
        Deepest depth allowed (>= 0; seeds have depth 0).
    """

    reason = "max_depth"

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth

    def decide(self, c: Candidate) -> Decision:
        """REJECT if ``c.depth > max_depth``, else ABSTAIN."""
        return Decision.REJECT if c.depth > self.max_depth else Decision.ABSTAIN


# --- 2./3. host, domain and regex lists -----------------------------------------------------------


class _PatternRule:
    """Answer ``answer`` when a candidate's ``field`` (``host`` or ``domain``) matches one of the
    host patterns of the setting ``setting``, else ABSTAIN. Subclasses set the three names."""

    reason: str
    setting: str
    field: str
    answer: Decision

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = HostPatterns(patterns, self.setting)

    def decide(self, c: Candidate) -> Decision:
        """``answer`` if the candidate's ``field`` matches, else ABSTAIN."""
        return self.answer if self.patterns.matches(getattr(c, self.field)) else Decision.ABSTAIN


class _RegexRule:
    """Answer ``answer`` when one of the regular expressions is found in the canonical URL, else
    ABSTAIN (patterns were already checked by the config's ``Regexes`` type)."""

    reason: str
    answer: Decision

    def __init__(self, patterns: Iterable[str]) -> None:
        self.regexes = tuple(re.compile(p) for p in patterns)

    def decide(self, c: Candidate) -> Decision:
        """``answer`` if some pattern is found in ``c.url``, else ABSTAIN."""
        url = c.url
        return self.answer if any(rx.search(url) for rx in self.regexes) else Decision.ABSTAIN


class RejectHosts(_PatternRule):
    """REJECT a URL whose host matches a pattern (``filters.deny_hosts``: ``name``, ``*.name``,
    ``*``)."""

    reason, setting, field, answer = "deny_host", "filters.deny_hosts", "host", Decision.REJECT


class RejectDomains(_PatternRule):
    """REJECT a URL whose pay-level domain matches a pattern (``filters.deny_domains``:
    ``example.org``; ``*.github.io`` matches every ``x.github.io`` domain)."""

    reason, setting, field, answer = (
        "deny_domain",
        "filters.deny_domains",
        "domain",
        Decision.REJECT,
    )


class RejectMatching(_RegexRule):
    """REJECT a URL in which one of the Python ``re`` patterns of ``filters.deny_regex`` is found."""

    reason, answer = "deny_regex", Decision.REJECT


class AllowHosts(_PatternRule):
    """ALLOW a URL whose host matches a pattern (``filters.allow_hosts``)."""

    reason, setting, field, answer = "allow_host", "filters.allow_hosts", "host", Decision.ALLOW


class AllowDomains(_PatternRule):
    """ALLOW a URL whose pay-level domain matches a pattern (``filters.allow_domains``)."""

    reason, setting, field, answer = (
        "allow_domain",
        "filters.allow_domains",
        "domain",
        Decision.ALLOW,
    )


class AllowMatching(_RegexRule):
    """ALLOW a URL in which one of the Python ``re`` patterns of ``filters.allow_regex`` is found."""

    reason, answer = "allow_regex", Decision.ALLOW


# --- 4. seed scope ------------------------------------------------------------------------------


class KeepToSeedScope:
    """Keep the crawl to its seeds' scope plus ``external_hops`` links out (Heritrix
    ``TransclusionDecideRule`` / Nutch ``db.ignore.external.links``).

    Answers ALLOW when ``c.hops_out <= external_hops`` and REJECT (``out_of_scope``) otherwise; it
    never abstains. ``c.hops_out`` comes from :meth:`FilterChain.hops_out`.

    Parameters
    ----------
    external_hops : int
        Hops outside the seed scope tolerated (>= 0; ``filters.external_hops``).
    """

    reason = "out_of_scope"

    def __init__(self, external_hops: int) -> None:
        self.external_hops = external_hops

    def decide(self, c: Candidate) -> Decision:
        """ALLOW within ``external_hops`` of the seed scope, else REJECT."""
        return Decision.ALLOW if c.hops_out <= self.external_hops else Decision.REJECT


# --- the chain ----------------------------------------------------------------------------------


class FilterChain:
    """An ordered chain of filters: the first non-ABSTAIN answer wins, else ``default``.

    Parameters
    ----------
    filters : sequence of Filter
        Objects with ``decide(Candidate) -> Decision`` and a ``reason`` str, in order.
    default : Decision
        ALLOW or REJECT: the answer when every filter abstains (REJECT reports ``default_reject``).
    seed_scope : str
        ``"host"``, ``"domain"`` or ``"none"``: what :meth:`hops_out` compares with the seeds.
    seed_hosts, seed_domains : iterable of str
        Hosts (``host_of``) and pay-level domains (``domain_of``) of the seeds. In ``domain`` mode
        the domains of ``seed_hosts`` are in scope too.

    Raises
    ------
    ConfigError
        ``default`` is ABSTAIN, or ``seed_scope`` is unknown.
    """

    def __init__(
        self,
        filters: Sequence[Filter],
        default: Decision,
        *,
        seed_scope: SeedScope = "none",
        seed_hosts: Iterable[str] = (),
        seed_domains: Iterable[str] = (),
    ) -> None:
        if default is Decision.ABSTAIN or not isinstance(default, Decision):
            raise ConfigError(f"filters.default: expected allow or reject, got {default!r}")
        if seed_scope not in typing.get_args(SeedScope):  # a caller that skipped the config
            raise ConfigError(
                f"filters.seed_scope: expected one of {', '.join(typing.get_args(SeedScope))}, "
                f"got {seed_scope!r}"
            )
        self.filters = tuple(filters)
        self.default = default
        self.seed_scope = seed_scope
        hosts = frozenset(seed_hosts)
        if seed_scope == "host":
            self._scope = hosts
        elif seed_scope == "domain":
            self._scope = frozenset(seed_domains) | {domain_of(h) for h in hosts if h}
        else:
            self._scope = frozenset()
        self._default_reason = None if default is Decision.ALLOW else "default_reject"
        self._decides = tuple((f.decide, f.reason) for f in self.filters)

    @classmethod
    def from_config(
        cls,
        filters: FiltersSection,
        seed_hosts: Iterable[str] = (),
        seed_domains: Iterable[str] = (),
    ) -> FilterChain:
        """The chain described by the ``[filters]`` section, in the order of the module docstring.

        Parameters
        ----------
        filters : FiltersSection
            The ``[filters]`` section of the crawl's config.
        seed_hosts, seed_domains : iterable of str
            The seeds' hosts and pay-level domains (needed by :meth:`hops_out`, not by
            :meth:`check`).

        Raises
        ------
        ConfigError
            A bad pattern, regular expression, extension, choice or negative limit.
        """
        chain: list[Filter] = [
            RejectLongUrls(filters.max_url_length),
            RejectTooDeep(filters.max_depth),
        ]
        if filters.deny_extensions:
            chain.append(RejectExtensions(filters.deny_extensions))
        chain.append(RejectRepeatedSegments(filters.max_repeated_segments))
        chain.append(RejectManyQueryParams(filters.max_query_params))
        for patterns, make in (
            (filters.deny_hosts, RejectHosts),
            (filters.deny_domains, RejectDomains),
            (filters.deny_regex, RejectMatching),
            (filters.allow_hosts, AllowHosts),
            (filters.allow_domains, AllowDomains),
            (filters.allow_regex, AllowMatching),
        ):
            if patterns:
                chain.append(make(patterns))
        if filters.seed_scope != "none":
            chain.append(KeepToSeedScope(filters.external_hops))
        return cls(
            chain,
            Decision.ALLOW if filters.default == "allow" else Decision.REJECT,
            seed_scope=filters.seed_scope,
            seed_hosts=seed_hosts,
            seed_domains=seed_domains,
        )

    def decide(self, c: Candidate) -> tuple[Decision, str | None]:
        """``(decision, reason)`` for one candidate: ``reason`` names the filter that rejected it
        (``"default_reject"`` for the default), None when allowed. Never ABSTAIN."""
        for decide, reason in self._decides:
            d = decide(c)
            if d is Decision.ABSTAIN:
                continue
            return (d, None) if d is Decision.ALLOW else (d, reason)
        return self.default, self._default_reason

    def check(self, url: str, host: str, domain: str, depth: int, hops_out: int) -> str | None:
        """None if the URL is in scope, else the reason it is not (``filtered:<reason>``).

        Parameters
        ----------
        url : str
            Canonical URL.
        host, domain : str
            Its host and pay-level domain (``batchcrawl.urls.host_of`` / ``domain_of``).
        depth : int
            Link hops from a seed (seeds: 0).
        hops_out : int
            Hops outside the seed scope, from :meth:`hops_out` (seeds: 0).
        """
        c = Candidate(url, host, domain, depth, hops_out)
        for decide, reason in self._decides:
            d = decide(c)
            if d is not Decision.ABSTAIN:
                return None if d is Decision.ALLOW else reason
        return self._default_reason

    def in_seed_scope(self, host: str, domain: str) -> bool:
        """True if ``host`` (mode ``host``) or ``domain`` (mode ``domain``) belongs to a seed;
        always True with ``seed_scope = "none"``."""
        if self.seed_scope == "domain":
            return domain in self._scope
        if self.seed_scope == "host":
            return host in self._scope
        return True

    def hops_out(self, host: str, domain: str, parent_hops_out: int) -> int:
        """Hops out of the seed scope of a link to ``host`` found on a page ``parent_hops_out``
        hops out: 0 inside the scope (or with ``seed_scope = "none"``), ``parent_hops_out + 1``
        otherwise.

        Raises
        ------
        ConfigError
            The chain has a seed scope but was built without seeds (every link would be out of
            scope): pass ``seed_hosts``/``seed_domains``, or set ``filters.seed_scope = "none"``.
        """
        if self.seed_scope == "none":
            return 0
        if not self._scope:
            raise ConfigError(
                f"filters.seed_scope is {self.seed_scope!r} but the filter chain has no seed "
                f"{self.seed_scope}s; build it with seed_hosts=/seed_domains=, or set "
                f"filters.seed_scope = 'none'"
            )
        if self.in_seed_scope(host, domain):
            return 0
        return parent_hops_out + 1
