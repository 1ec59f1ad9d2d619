"""The link sink's bounded memories: BUbiNG's URL cache of recently seen url keys
(:class:`KeyCache`) and a memo of outlink canonicalization (:class:`CanonicalMemo`), both bounded
in two generations (:class:`TwoGenerations`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sized
from typing import Generic, TypeVar

from batchcrawl.errors import InvalidURL
from batchcrawl.urls import canonicalize, canonicalize_serialized, domain_of, host_of, url_key

#: ``(url_key, canonical URL, host, pay-level domain)`` of one outlink
CanonicalHit = tuple[int, str, str, str]

C = TypeVar("C", bound=Sized)


class TwoGenerations(Generic[C]):
    """A bound in two generations, an LRU approximation with O(1) work and no lock: entries go
    into the current container, which is retired when it holds ``size // 2``; an entry found in
    the retired one is copied forward. So the last ``size // 2`` distinct entries are always held
    and at most ``size`` are; a size below 2 holds nothing. ``empty`` makes a new container
    (``set`` or ``dict``)."""

    __slots__ = ("_new", "_old", "_half", "_empty")

    def __init__(self, size: int, empty: Callable[[], C]) -> None:
        self._empty = empty
        self._new = empty()
        self._old = empty()
        self._half = size // 2

    def _current(self) -> C | None:
        """The container a new entry goes into, after retiring a full one; None if the size
        holds nothing."""
        if not self._half:
            return None
        if len(self._new) >= self._half:
            self._old, self._new = self._new, self._empty()
        return self._new

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def generations(self) -> tuple[C, C]:
        """The current and the retired container (for memory probes)."""
        return self._new, self._old


class KeyCache(TwoGenerations[set[int]]):
    """Bounded set of recently seen url keys (BUbiNG's URL cache, Boldi et al. 2014 §4.3), in
    two generations (:class:`TwoGenerations`) of at most ``size`` keys in all: each key costs a
    set slot (~45 bytes with the table's slack) where an ``OrderedDict`` LRU took ~105 and a
    ``move_to_end`` per hit. Not thread-safe by itself."""

    __slots__ = ()

    def __init__(self, size: int) -> None:
        super().__init__(size, set)

    def seen(self, key: int) -> bool:
        """True if ``key`` (a url key) was seen recently; records it either way."""
        if key in self._new:
            return True
        hit = key in self._old
        current = self._current()
        if current is not None:
            current.add(key)
        return hit


class CanonicalMemo(TwoGenerations[dict[str, CanonicalHit | None]]):
    """Memo of :func:`~batchcrawl.urls.canonicalize` for absolute outlink URLs: raw string ->
    ``(url_key, canonical URL, host, domain)``, or None when the URL is invalid. Outlinks as the
    page parser resolved them (WHATWG-serialized) and redirect targets (canonical) skip the
    second parse (:func:`~batchcrawl.urls.canonicalize_serialized`); a sitemap's ``<loc>``
    values, resolved by ``urljoin``, do not.

    A page's menu links repeat on every page of its host, so most outlinks were canonicalized
    moments ago; a dict lookup replaces the WHATWG parse, the percent-encoding pass, the hash and
    the host and pay-level domain lookups (each link's ``edges`` row needs its domain). Bounded by
    two generations (:class:`TwoGenerations`) of at most ``size`` (``fetch.canonical_memo_size``)
    entries in all; no lock: single dict reads and writes are atomic under the GIL and a lost
    update only costs a recomputation, since canonicalization is a pure function.
    """

    __slots__ = ()

    def __init__(self, size: int) -> None:
        super().__init__(size, dict)

    def canonical(self, raw: str, serialized: bool = True) -> CanonicalHit | None:
        """``(url_key(c), c, host_of(c), domain_of(host_of(c)))`` with ``c = canonicalize(raw)``,
        or None if ``raw`` is invalid. ``serialized``: ``raw`` is a WHATWG serialization (the
        parser's resolved links, canonical URLs); False for any other absolute URL."""
        try:
            return self._new[raw]  # the common case: one lookup
        except KeyError:
            pass
        try:
            hit = self._old[raw]
        except KeyError:
            hit = _canonical_hit(raw, serialized)
        current = self._current()
        if current is not None:
            current[raw] = hit
        return hit


def _canonical_hit(raw: str, serialized: bool) -> CanonicalHit | None:
    try:
        url = canonicalize_serialized(raw) if serialized else canonicalize(raw)
        host = sys.intern(host_of(url))  # one string per host for all its entries
        return (url_key(url), url, host, domain_of(host))
    except InvalidURL:
        return None
