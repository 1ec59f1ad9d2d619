"""Consistent hashing of hosts to fetch shards, with virtual nodes.

Karger et al., "Consistent Hashing and Random Trees" (STOC 1997) §4, as used by UbiCrawler
(Boldi, Codenotti, Santini, Vigna 2004, §3 "assignment function") to split hosts among agents:
each shard owns ``vnodes`` points on a 64-bit ring; a name (host, pay-level domain or IP, per
``generate.route_by``) goes to the shard owning the first point at or after the name's hash,
wrapping around. Adding a shard moves only the names the new shard's points take over (about
``1/(n+1)`` of them, all to the new shard); removing one moves only that shard's names. With
modular hashing (``key % n``, :func:`modular_shard`) growing 4 -> 5 shards moves about 80 % of the
names instead. Many virtual nodes per shard even out the load (docs/design.md §5).

Hashes (stable across processes and machines; never Python's ``hash()``):

* a name's key is :func:`ring_key`: :func:`batchcrawl.urls.hash64` of the name
  (the same function as :func:`batchcrawl.urls.url_key`, applied to the name);
* point ``i`` of shard ``s`` sits at ``mmh3.hash64(f"{s}#{i}".encode(), seed=seed,
  signed=False)[0]``; ``seed`` varies the placement of the points only, never the names' keys.
  Ties between points are broken by shard id, so every process builds the same ring.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence

import mmh3
import numpy as np

from batchcrawl.errors import BatchcrawlError
from batchcrawl.urls import bucket_ids, hash64, hash64_many

__all__ = [
    "HashRing",
    "RingError",
    "modular_shard",
    "modular_shards",
    "ROUTE_MODES",
    "ring_key",
    "route_name",
    "ring_keys",
]


class RingError(BatchcrawlError, ValueError):
    """Invalid ring arguments: no shards, duplicate shard ids, ``vnodes < 1``, a bad seed, or adding
    a shard that is present / removing one that is absent."""

    exit_code = 2


def ring_key(name: str) -> int:
    """Position of a name on the ring: unsigned 64-bit murmur3 (seed 0) of its UTF-8 bytes.

    Parameters
    ----------
    name : str
        Host (lower-case, punycode), pay-level domain or IP address, as routed by generate.
    """
    return hash64(name)


def ring_keys(names: Iterable[str]) -> np.ndarray:
    """:func:`ring_key` of many names; ``numpy.ndarray`` of ``uint64``, shape ``(n,)``."""
    return hash64_many(names)


#: What the ring hashes to route a URL (``generate.partition_by``).
ROUTE_MODES = ("host", "domain", "ip")


def route_name(host: str, domain: str, ip: str | None, mode: str, group: str | None = None) -> str:
    """The name a URL's shard is chosen by (the one routing rule of generate and the shard
    workers): its ``host``, its pay-level ``domain``, or its host's ``ip`` (``mode = "ip"``; a host
    whose IP is not known yet is routed by its host name, so its URLs stay together). A host in a
    politeness group is routed by ``group`` instead (:meth:`PolitenessPolicy.route
    <batchcrawl.politeness.PolitenessPolicy.route>`), so one fetch worker holds the group's delay.

    Raises
    ------
    RingError
        ``mode`` is not one of :data:`ROUTE_MODES`.
    """
    if group is not None:
        return group
    if mode == "host":
        return host
    if mode == "domain":
        return domain
    if mode == "ip":
        return ip or host
    raise RingError(f"partition mode must be one of {ROUTE_MODES}, got {mode!r}")


def modular_shard(key: int, shards: int) -> int:
    """Modular hashing ``key % shards``: the baseline consistent hashing improves on.

    Parameters
    ----------
    key : int
        A :func:`ring_key` (unsigned 64-bit).
    shards : int
        Number of shards, at least 1; shard ids are ``0 .. shards-1``.
    """
    if shards < 1:
        raise RingError(f"shards must be at least 1, got {shards!r}")
    return key % shards


def modular_shards(keys: np.ndarray, shards: int) -> np.ndarray:
    """Vectorized :func:`modular_shard`: ``uint64`` keys, shape ``(n,)`` -> ``int64`` shard ids."""
    if shards < 1:
        raise RingError(f"shards must be at least 1, got {shards!r}")
    return bucket_ids(keys, shards)


class HashRing:
    """An immutable consistent-hash ring of shard ids with ``vnodes`` points each.

    Parameters
    ----------
    shards : sequence of int, or int
        Shard ids (distinct, non-negative), or a count ``n`` meaning ``range(n)``
        (``fetch.shards``).
    vnodes : int
        Points (virtual nodes) per shard, at least 1 (``fetch.ring_vnodes``; 100 keeps the busiest
        of 4 shards within about 10 % of an even share).
    seed : int
        Murmur3 seed of the point placement, ``0 <= seed < 2**32``. Every process of one crawl must
        use the same seed (and shards and vnodes) to agree on the assignment.

    Raises
    ------
    RingError
        No shards, duplicate or negative shard ids, ``vnodes < 1`` or a seed out of range.
    """

    __slots__ = ("_shards", "_vnodes", "_seed", "_pos", "_owner", "_pos_list", "_owner_list")

    def __init__(self, shards: Sequence[int] | int, vnodes: int = 100, seed: int = 0) -> None:
        if isinstance(shards, int):
            if shards < 1:
                raise RingError(f"a ring needs at least 1 shard, got shards={shards!r}")
            ids = tuple(range(shards))
        else:
            ids = tuple(int(s) for s in shards)
            if not ids:
                raise RingError("a ring needs at least 1 shard, got an empty sequence")
            if len(set(ids)) != len(ids):
                raise RingError(f"shard ids must be distinct, got {list(ids)!r}")
            if min(ids) < 0:
                raise RingError(f"shard ids must be non-negative, got {list(ids)!r}")
        if vnodes < 1:
            raise RingError(f"vnodes (fetch.ring_vnodes) must be at least 1, got {vnodes!r}")
        if not 0 <= seed < 2**32:
            raise RingError(f"seed must be in [0, 2**32), got {seed!r}")
        self._shards = tuple(sorted(ids))
        self._vnodes = vnodes
        self._seed = seed
        hash64 = mmh3.hash64
        pos = np.fromiter(
            (
                hash64(f"{s}#{i}".encode(), seed=seed, signed=False)[0]
                for s in self._shards
                for i in range(vnodes)
            ),
            dtype=np.uint64,
            count=len(self._shards) * vnodes,
        )
        owner = np.repeat(np.asarray(self._shards, dtype=np.int64), vnodes)
        order = np.lexsort((owner, pos))  # by position, ties by shard id
        self._pos = pos[order]
        self._owner = owner[order]
        self._pos_list = self._pos.tolist()
        self._owner_list: list[int] = self._owner.tolist()

    @property
    def shards(self) -> tuple[int, ...]:
        """Shard ids on the ring, ascending."""
        return self._shards

    @property
    def vnodes(self) -> int:
        """Points per shard."""
        return self._vnodes

    @property
    def seed(self) -> int:
        """Murmur3 seed of the point placement."""
        return self._seed

    def __repr__(self) -> str:
        return f"HashRing(shards={list(self._shards)!r}, vnodes={self._vnodes}, seed={self._seed})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HashRing):
            return NotImplemented
        return (self._shards, self._vnodes, self._seed) == (
            other._shards,
            other._vnodes,
            other._seed,
        )

    def __hash__(self) -> int:
        return hash((self._shards, self._vnodes, self._seed))

    def shard_for_key(self, key: int) -> int:
        """Shard owning a ring position: the first point at or after ``key``, wrapping around.

        Parameters
        ----------
        key : int
            Unsigned 64-bit position (:func:`ring_key` of a name).
        """
        i = bisect.bisect_left(self._pos_list, key)
        return self._owner_list[i if i < len(self._pos_list) else 0]

    def shard_for(self, name: str) -> int:
        """Shard of a name (host, pay-level domain or IP): ``shard_for_key(ring_key(name))``."""
        return self.shard_for_key(ring_key(name))

    def assign_keys(self, keys: np.ndarray) -> np.ndarray:
        """Vectorized :meth:`shard_for_key`.

        Parameters
        ----------
        keys : numpy.ndarray of uint64, shape (n,)

        Returns
        -------
        numpy.ndarray of int64, shape (n,)
            Shard id of each key.
        """
        idx = np.searchsorted(self._pos, np.asarray(keys, dtype=np.uint64), side="left")
        idx[idx == len(self._pos)] = 0
        return self._owner[idx]

    def assign(self, names: Iterable[str]) -> dict[str, int]:
        """Shard of each name, as ``{name: shard}`` (duplicates collapse)."""
        names = list(names)
        return dict(zip(names, self.assign_keys(ring_keys(names)).tolist(), strict=True))

    def with_shard(self, shard: int) -> HashRing:
        """A new ring with ``shard`` added (same vnodes and seed); the other points do not move.

        Raises
        ------
        RingError
            ``shard`` is already on the ring.
        """
        if shard in self._shards:
            raise RingError(f"shard {shard!r} is already on the ring {self!r}")
        return HashRing((*self._shards, shard), vnodes=self._vnodes, seed=self._seed)

    def without_shard(self, shard: int) -> HashRing:
        """A new ring with ``shard`` removed; its names go to the shards owning the next points.

        Raises
        ------
        RingError
            ``shard`` is not on the ring, or it is the last shard.
        """
        if shard not in self._shards:
            raise RingError(f"shard {shard!r} is not on the ring {self!r}")
        if len(self._shards) == 1:
            raise RingError(f"cannot remove shard {shard!r}: it is the last shard of {self!r}")
        rest = tuple(s for s in self._shards if s != shard)
        return HashRing(rest, vnodes=self._vnodes, seed=self._seed)
