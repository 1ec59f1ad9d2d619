"""Host patterns: ``name``, ``*.name`` and ``*``, the one syntax of every host list in a config.

Used by the filter chain (``filters.allow_hosts``, ``deny_hosts``, ``allow_domains``,
``deny_domains``; :mod:`batchcrawl.scope.filters`) and by the resolver's override map
(``network.resolve``; :mod:`batchcrawl.fetch.resolver`), so both read a pattern the same way:

* ``example.org`` matches only that name;
* ``*.example.org`` matches every name ending in ``.example.org``, at any depth, but not
  ``example.org`` itself: a wildcard stands for at least one label, as in TLS certificates and DNS
  wildcards (RFC 4592 §2.1.1);
* ``*`` matches every name.

Patterns are normalized like hosts (:func:`batchcrawl.urls.canonicalize`: lower case, IDN to
punycode, no trailing dot); a ``*`` anywhere else, a wildcard over an IP address (``*.0.0.1``), a
port or a path is a :class:`~batchcrawl.errors.ConfigError` naming the config key. When several
patterns match, the most specific wins: an exact name, then the longest ``*.`` suffix, then ``*``.
A lookup costs O(labels of the name), with a bounded per-name memo.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Generic, TypeVar

from batchcrawl.errors import ConfigError, InvalidURL
from batchcrawl.urls import canonicalize, host_of

V = TypeVar("V")
_MEMO_LIMIT = 1 << 16  # names remembered before the memo is cleared
_IPV4 = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")
_MISS = object()


def normalize_pattern(pattern: str, key: str) -> str:
    """``pattern`` normalized like a host: ``*``, ``*.name`` or ``name`` (punycode, lower case).

    Parameters
    ----------
    pattern
        A host pattern as written in a config.
    key
        Config key named in the error message, e.g. ``"filters.deny_hosts"``.

    Raises
    ------
    ConfigError
        ``pattern`` is not a name, ``*.`` and a name, or ``*``.
    """
    p = pattern.strip()
    if p == "*":
        return p
    wildcard = p.startswith("*.")
    name = p[2:] if wildcard else p
    bad = not name or "*" in name or any(ch in name for ch in "/?#@ ")
    if not bad and ":" in name and not (name.startswith("[") and name.endswith("]")):
        bad = True  # a port, or an IPv6 address without brackets
    if not bad:
        try:
            canonical = canonicalize(f"http://{name}/")
        except InvalidURL:
            bad = True
        else:
            name = host_of(canonical)
            bad = canonical != f"http://{name}/"
            if wildcard and (name.startswith("[") or _IPV4.fullmatch(name)):
                bad = True  # an address has no subdomains
    if bad:
        raise ConfigError(
            f"{key}: {pattern!r} is not a host pattern; write a name ('example.org'), a wildcard "
            f"for its subdomains ('*.example.org') or '*'"
        )
    return "*." + name if wildcard else name


class HostPatternMap(Generic[V]):
    """Host patterns, each with a value; :meth:`get` gives the value of the most specific match.

    Parameters
    ----------
    patterns
        Pattern -> value (e.g. ``network.resolve``: ``{"*.test": "127.0.0.1"}``).
    key
        Config key named in error messages.

    Raises
    ------
    ConfigError
        A pattern is not ``name``, ``*.name`` or ``*``, or two patterns that normalize to the same
        one have different values.
    """

    def __init__(self, patterns: Mapping[str, V], key: str) -> None:
        normalized: dict[str, V] = {}
        for pattern, value in patterns.items():
            p = normalize_pattern(pattern, key)
            if p in normalized and normalized[p] != value:
                raise ConfigError(
                    f"{key}: {pattern!r} repeats pattern {p!r} with another value; keep one"
                )
            normalized[p] = value
        self.patterns = tuple(normalized)
        self._catch_all: V | None = normalized.get("*")
        self._exact = {p: v for p, v in normalized.items() if not p.startswith("*")}
        self._suffixes = {p[2:]: v for p, v in normalized.items() if p.startswith("*.")}
        self._memo: dict[str, object] = {}

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def get(self, name: str) -> V | None:
        """The value of the most specific pattern matching ``name``, or None.

        ``name`` is a host as :func:`batchcrawl.urls.host_of` gives it (lower case, punycode, IPv6
        in brackets).
        """
        hit = self._memo.get(name, _MISS)
        if hit is _MISS:
            hit = self._match(name)
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[name] = hit
        return hit  # type: ignore[return-value]

    def _match(self, name: str) -> V | None:
        exact = self._exact.get(name, _MISS)
        if exact is not _MISS:
            return exact  # type: ignore[return-value]
        if self._suffixes and not name.startswith("["):
            dot = name.find(".")
            while dot >= 0:  # left to right: the first suffix found is the longest
                value = self._suffixes.get(name[dot + 1 :], _MISS)
                if value is not _MISS:
                    return value  # type: ignore[return-value]
                dot = name.find(".", dot + 1)
        return self._catch_all


class HostPatterns(HostPatternMap[bool]):
    """A set of host (or domain) patterns (the filter lists).

    Parameters
    ----------
    patterns
        ``name``, ``*.name`` or ``*``.
    key
        Config key named in error messages, e.g. ``"filters.deny_hosts"``.
    """

    def __init__(self, patterns: Iterable[str], key: str) -> None:
        super().__init__(dict.fromkeys(patterns, True), key)

    def matches(self, name: str) -> bool:
        """True if ``name`` (a host as :func:`batchcrawl.urls.host_of` gives it) matches a pattern."""
        return self.get(name) is True
