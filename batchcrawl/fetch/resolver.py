"""Name resolution and the address policy, applied after resolving and before connecting.

A fetch worker resolves each host once and caches the address (IRLbot and BUbiNG both keep a DNS
cache per crawler; docs/design.md §6). The ``[network] resolve`` override map answers first — it is how
tests, demos and private deployments name hosts without a DNS server (``*.test = 127.0.0.1``) —
then, only if ``system_dns`` is true, the system resolver. The :class:`AddressPolicy` then decides
whether the address may be contacted at all (no loopback, private, link-local or cloud-metadata
addresses by default: the server-side request forgery guard every public crawler needs).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from batchcrawl.config import NetworkSection
from batchcrawl.errors import BatchcrawlError
from batchcrawl.scope.hostpatterns import HostPatternMap

#: Seconds an unresolvable name is remembered (never longer than ``dns_ttl_s``).
NEGATIVE_TTL_S = 60.0

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class DNSError(BatchcrawlError):
    """A host name does not resolve (not in the override map and, if asked, not in DNS).

    ``host`` holds the name. Fetches turn it into ``error="dns"`` / ``Outcome.DNS_ERROR``.
    """

    def __init__(self, host: str, detail: str) -> None:
        super().__init__(f"host {host!r} does not resolve: {detail}")
        self.host = host


def _normalize_host(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


class Resolver:
    """Resolve host names to one IP address string, with a per-host TTL cache.

    Parameters
    ----------
    network
        ``[network]`` section: ``resolve`` patterns, ``system_dns`` and ``dns_ttl_s`` are used.
    clock
        Monotonic clock in seconds (injected for tests).
    getaddrinfo
        The system lookup, ``socket.getaddrinfo`` by default; only ever called when
        ``network.system_dns`` is true.

    Patterns are read by :class:`~batchcrawl.scope.hostpatterns.HostPatternMap`, as the filters
    read theirs: ``"*.test"`` matches every name *ending in* ``.test`` (any depth) but not ``test``
    itself; an exact match wins over any wildcard, a longer wildcard suffix over a shorter one,
    and ``"*"`` alone matches every name. IP literals (``127.0.0.1``, ``[::1]``) resolve to
    themselves without any lookup.

    Raises
    ------
    ConfigError
        A pattern that is not ``name``, ``*.name`` or ``*``.
    """

    def __init__(
        self,
        network: NetworkSection,
        clock: Callable[[], float] = time.monotonic,
        *,
        getaddrinfo: Callable[..., list[Any]] = socket.getaddrinfo,
    ) -> None:
        self._overrides = HostPatternMap(network.resolve, "network.resolve")
        self._system_dns = network.system_dns
        self._ttl_s = network.dns_ttl_s
        self._negative_ttl_s = min(NEGATIVE_TTL_S, network.dns_ttl_s)
        self._clock = clock
        self._getaddrinfo = getaddrinfo
        self._cache: dict[str, tuple[str | None, float, str]] = {}
        self._lock = threading.Lock()

    def lookup_override(self, host: str) -> str | None:
        """The address the override map gives ``host`` (normalized: lower-case, no final dot),
        or None when no pattern matches. Never asks DNS."""
        name = _normalize_host(host)
        return self._overrides.get(f"[{name}]" if ":" in name else name)

    def resolve(self, host: str) -> str:
        """One IP address (string) for ``host``.

        Parameters
        ----------
        host
            Host name as in a URL (case and a trailing dot are ignored), or an IP literal.

        Returns
        -------
        str
            The address to connect to, e.g. ``"127.0.0.1"`` or ``"2001:db8::1"``.

        Raises
        ------
        DNSError
            The name matches no override pattern and either ``system_dns`` is false or the
            system resolver fails. Failures are cached for ``min(60 s, dns_ttl_s)``.
        """
        name = _normalize_host(host)
        now = self._clock()
        with self._lock:
            hit = self._cache.get(name)
        if hit is not None and hit[1] > now:
            if hit[0] is None:
                raise DNSError(name, hit[2] + " (cached)")
            return hit[0]
        ip, detail = self._resolve_uncached(name)
        ttl = self._ttl_s if ip is not None else self._negative_ttl_s
        with self._lock:
            self._cache[name] = (ip, now + ttl, detail)
        if ip is None:
            raise DNSError(name, detail)
        return ip

    def _resolve_uncached(self, name: str) -> tuple[str | None, str]:
        try:
            return str(ipaddress.ip_address(name)), "literal"
        except ValueError:
            pass
        ip = self.lookup_override(name)
        if ip is not None:
            return ip, "override"
        if not self._system_dns:
            return None, "not in network.resolve and network.system_dns is false"
        try:
            infos = self._getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            return None, f"system resolver: {exc}"
        for _family, _type, _proto, _canon, sockaddr in infos:
            return str(sockaddr[0]), "dns"
        return None, "system resolver returned no address"

    @property
    def cached_count(self) -> int:
        """Host names in the cache (answers and cached failures)."""
        with self._lock:
            return len(self._cache)

    def forget(self, host: str) -> None:
        """Drop ``host`` from the cache (the next :meth:`resolve` looks it up again)."""
        with self._lock:
            self._cache.pop(_normalize_host(host), None)


#: Address strings whose :meth:`AddressPolicy.check` answer is remembered.
CHECKED_ADDRESSES = 65536
_UNCHECKED = object()


class AddressPolicy:
    """Which resolved addresses may be contacted (checked after DNS, before connecting).

    Parameters
    ----------
    network
        ``[network]`` section: ``allow_networks`` and ``deny_networks`` (CIDR strings).

    Rules, in order: an address inside ``allow_networks`` is allowed (even when a deny network
    covers it); if ``allow_networks`` is non-empty, every other address is refused; otherwise an
    address inside ``deny_networks`` is refused and the rest allowed. IPv4-mapped IPv6 addresses
    (``::ffff:127.0.0.1``) are unmapped first, so they cannot smuggle an IPv4 address past the
    IPv4 rules. An IPv6 address that carries IPv4 addresses (6to4, Teredo, NAT64,
    IPv4-compatible: see :func:`embedded_ipv4`) is allowed only when the IPv6 address *and* every
    embedded IPv4 address are (so ``2002:7f00:1::``, 6to4 for 127.0.0.1, is refused by default).
    Anything that is not an IP address is refused (fail closed).

    The answer for an address string is remembered (up to :data:`CHECKED_ADDRESSES` of them,
    then the memo starts over): the fetcher checks the address of every request, and parsing it
    and testing it against every network cost more than the rest of the request set-up.
    """

    def __init__(self, network: NetworkSection) -> None:
        self._allow = [ipaddress.ip_network(c, strict=False) for c in network.allow_networks]
        self._deny = [ipaddress.ip_network(c, strict=False) for c in network.deny_networks]
        self._checked: dict[str, str | None] = {}  # address string -> check()'s answer

    def check(self, ip: str | IPAddress) -> str | None:
        """None when ``ip`` may be contacted, else the reason it is refused (a short sentence
        naming the network that decided)."""
        if isinstance(ip, str):
            # a dict read or write is atomic under the GIL; a race only repeats the check
            answer = self._checked.get(ip, _UNCHECKED)
            if answer is _UNCHECKED:
                if len(self._checked) >= CHECKED_ADDRESSES:
                    self._checked = {}
                answer = self._checked[ip] = self._check(ip)
            return cast("str | None", answer)
        return self._check(ip)

    def _check(self, ip: str | IPAddress) -> str | None:
        try:
            addr = ip if not isinstance(ip, str) else ipaddress.ip_address(ip.strip("[]"))
        except ValueError:
            return f"{ip!r} is not an IP address"
        if addr.version == 6 and addr.ipv4_mapped is not None:
            addr = addr.ipv4_mapped
        if addr.version == 6:
            for inner in embedded_ipv4(addr):
                refused = self._check_one(inner)
                if refused is not None:
                    return f"{addr} embeds {inner}: {refused}"
        return self._check_one(addr)

    def _check_one(self, addr: IPAddress) -> str | None:
        for net in self._allow:
            if addr.version == net.version and addr in net:
                return None
        if self._allow:
            return f"{addr} is outside network.allow_networks"
        for net in self._deny:
            if addr.version == net.version and addr in net:
                return f"{addr} is inside denied network {net}"
        return None

    def allowed(self, ip: str | IPAddress) -> bool:
        """True when :meth:`check` finds no reason to refuse ``ip``."""
        return self.check(ip) is None


#: RFC 6052 §2.1 NAT64 well-known prefix; RFC 4291 §2.5.5.1 IPv4-compatible addresses live in ::/96.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def embedded_ipv4(addr: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries by a transition mechanism (empty list if none).

    * 6to4, ``2002::/16`` (RFC 3056): bits 16-47;
    * Teredo, ``2001::/32`` (RFC 4380): the server and the (obfuscated) client address;
    * NAT64 well-known prefix ``64:ff9b::/96`` (RFC 6052): the last 32 bits;
    * IPv4-compatible ``::a.b.c.d`` (RFC 4291 §2.5.5.1, deprecated): the last 32 bits (``::`` and
      ``::1`` are not IPv4-compatible addresses).

    IPv4-mapped addresses (``::ffff:a.b.c.d``) are left to the caller: they *are* the IPv4
    address, not a route to it.
    """
    out: list[ipaddress.IPv4Address] = []
    if addr.sixtofour is not None:
        out.append(addr.sixtofour)
    if addr.teredo is not None:
        out.extend(addr.teredo)
    low = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr in _NAT64 or (addr in _IPV4_COMPATIBLE and int(addr) > 1):
        out.append(low)
    return out
