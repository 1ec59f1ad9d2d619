"""Resolver (override map, DNS cache) and AddressPolicy (allow/deny networks)."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.config import DEFAULT_DENY_NETWORKS, NetworkSection, loopback_test_config
from batchcrawl.errors import BatchcrawlError, ConfigError
from batchcrawl.fetch import resolver
from batchcrawl.fetch.resolver import NEGATIVE_TTL_S, AddressPolicy, DNSError, Resolver

DEFAULT = AddressPolicy(NetworkSection())
LOOPBACK = AddressPolicy(loopback_test_config().network)
ALLOW_10 = AddressPolicy(NetworkSection(allow_networks=["10.0.0.0/8"]))

# (policy name, address, allowed?)
POLICY_TABLE = [
    ("default", "8.8.8.8", True),
    ("default", "93.184.216.34", True),
    ("default", "2606:2800:220:1:248:1893:25c8:1946", True),
    ("default", "::ffff:8.8.8.8", True),
    ("default", "127.0.0.1", False),
    ("default", "127.8.9.10", False),
    ("default", "10.1.2.3", False),
    ("default", "172.16.0.1", False),
    ("default", "172.31.255.255", False),
    ("default", "172.32.0.1", True),
    ("default", "192.168.1.1", False),
    ("default", "169.254.169.254", False),  # cloud metadata
    ("default", "100.64.0.1", False),  # CGNAT
    ("default", "224.0.0.1", False),  # multicast
    ("default", "0.0.0.0", False),
    ("default", "255.255.255.255", False),
    ("default", "::1", False),
    ("default", "::", False),
    ("default", "fe80::1", False),
    ("default", "fc00::1", False),
    ("default", "fd12:3456::1", False),
    ("default", "ff02::1", False),
    ("default", "::ffff:127.0.0.1", False),  # IPv4-mapped loopback
    ("default", "::ffff:169.254.169.254", False),
    ("default", "64:ff9b::a00:1", False),  # NAT64 well-known prefix
    ("default", "not-an-ip", False),
    ("loopback", "127.0.0.1", True),
    ("loopback", "127.255.255.254", True),
    ("loopback", "::ffff:127.0.0.1", True),
    ("loopback", "::1", False),  # only 127.0.0.0/8 is allowed
    ("loopback", "8.8.8.8", False),
    ("loopback", "10.0.0.1", False),
    ("allow10", "10.1.1.1", True),  # allow wins over the default deny list
    ("allow10", "192.168.1.1", False),
    ("allow10", "8.8.8.8", False),  # non-empty allow list: nothing else
]
POLICIES = {"default": DEFAULT, "loopback": LOOPBACK, "allow10": ALLOW_10}


@pytest.mark.parametrize(("policy", "ip", "expected"), POLICY_TABLE)
def test_policy_table(policy, ip, expected):
    p = POLICIES[policy]
    assert p.allowed(ip) is expected
    reason = p.check(ip)
    assert (reason is None) is expected
    if reason is not None:
        assert isinstance(reason, str) and reason


ipv4 = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)


@given(ipv4)
def test_ipv4_mapped_ipv6_decides_like_the_ipv4_address(addr):
    mapped = ipaddress.IPv6Address(f"::ffff:{addr}")
    for policy in POLICIES.values():
        assert policy.allowed(str(mapped)) == policy.allowed(str(addr))


DENY_NETS = [ipaddress.ip_network(c) for c in DEFAULT_DENY_NETWORKS]


@given(ipv4)
def test_default_policy_refuses_exactly_the_denied_ipv4_networks(addr):
    denied = any(addr.version == n.version and addr in n for n in DENY_NETS)
    assert DEFAULT.allowed(addr) is not denied


@given(ipv4, st.sampled_from(["10.0.0.0/8", "127.0.0.0/8", "8.8.0.0/16", "192.168.7.0/24"]))
def test_allow_list_allows_exactly_its_members(addr, cidr):
    policy = AddressPolicy(NetworkSection(allow_networks=[cidr]))
    assert policy.allowed(addr) is (addr in ipaddress.ip_network(cidr))


# -- resolver --------------------------------------------------------------------------------------


def _never_called(*args, **kwargs):
    raise AssertionError(f"getaddrinfo must not be called (asked for {args!r})")


def _resolver(resolve: dict[str, str], system_dns: bool = False, **kw) -> Resolver:
    net = NetworkSection(resolve=resolve, system_dns=system_dns, dns_ttl_s=kw.pop("ttl", 3600.0))
    return Resolver(net, getaddrinfo=kw.pop("getaddrinfo", _never_called), **kw)


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("h1.test", "127.0.0.1"),
        ("a.b.c.test", "127.0.0.1"),
        ("H1.TEST.", "127.0.0.1"),  # case and the root dot are ignored
        ("special.test", "127.0.0.9"),  # exact beats wildcard
        ("x.deep.test", "127.0.0.5"),  # longer wildcard suffix wins
        ("exact.example", "127.0.0.7"),
        ("192.0.2.1", "192.0.2.1"),  # IP literals need no lookup
        ("[::1]", "::1"),
    ],
)
def test_override_map(host, expected):
    r = _resolver(
        {
            "*.test": "127.0.0.1",
            "special.test": "127.0.0.9",
            "*.deep.test": "127.0.0.5",
            "exact.example": "127.0.0.7",
        }
    )
    assert r.resolve(host) == expected


@pytest.mark.parametrize("host", ["test", "atest", "test.org", "sub.exact.example", "example"])
def test_names_outside_the_map_do_not_resolve_without_dns(host):
    r = _resolver({"*.test": "127.0.0.1", "exact.example": "127.0.0.7"})
    with pytest.raises(DNSError) as info:
        r.resolve(host)
    assert isinstance(info.value, BatchcrawlError)
    assert host.lower() in str(info.value)


def test_system_dns_false_never_asks_the_system_resolver():
    # "localhost" resolves on every system (from /etc/hosts) — so it raising proves no lookup ran,
    # with the real socket.getaddrinfo left in place.
    r = Resolver(NetworkSection(resolve={"*.test": "127.0.0.1"}, system_dns=False))
    with pytest.raises(DNSError, match="system_dns is false"):
        r.resolve("localhost")
    assert r.resolve("h.test") == "127.0.0.1"


class CountingLookup:
    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.calls: list[str] = []

    def __call__(self, host, port, type=0):  # noqa: A002 - getaddrinfo's keyword
        self.calls.append(host)
        if host not in self.answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (self.answers[host], 0))]


def test_system_dns_results_are_cached_for_the_ttl():
    now = [1000.0]
    lookup = CountingLookup({"www.example.org": "93.184.216.34"})
    r = _resolver({}, system_dns=True, ttl=300.0, getaddrinfo=lookup, clock=lambda: now[0])
    assert r.resolve("www.example.org") == "93.184.216.34"
    now[0] += 299.0
    assert r.resolve("WWW.example.org") == "93.184.216.34"
    assert lookup.calls == ["www.example.org"]
    now[0] += 2.0
    r.resolve("www.example.org")
    assert lookup.calls == ["www.example.org"] * 2


def test_failures_are_cached_briefly():
    now = [0.0]
    lookup = CountingLookup({})
    r = _resolver({}, system_dns=True, getaddrinfo=lookup, clock=lambda: now[0])
    for _ in range(3):
        with pytest.raises(DNSError):
            r.resolve("gone.example")
    assert lookup.calls == ["gone.example"]
    now[0] += NEGATIVE_TTL_S + 0.1
    with pytest.raises(DNSError):
        r.resolve("gone.example")
    assert lookup.calls == ["gone.example"] * 2


def test_override_is_consulted_before_dns():
    lookup = CountingLookup({"h.test": "8.8.8.8"})
    r = _resolver({"*.test": "127.0.0.1"}, system_dns=True, getaddrinfo=lookup)
    assert r.resolve("h.test") == "127.0.0.1"
    assert lookup.calls == []


@pytest.mark.parametrize("pattern", ["a*.test", "*x.test", "h.*.test"])
def test_bad_patterns_are_config_errors(pattern):
    with pytest.raises(ConfigError, match="network.resolve"):
        _resolver({pattern: "127.0.0.1"})


@given(st.from_regex(r"[a-z0-9-]{1,10}(\.[a-z0-9-]{1,10}){0,3}", fullmatch=True))
def test_wildcard_matches_exactly_the_subdomains(label_path):
    r = _resolver({"*.test": "127.0.0.1"})
    assert r.lookup_override(label_path + ".test") == "127.0.0.1"
    expected = "127.0.0.1" if label_path.endswith(".test") else None
    assert r.lookup_override(label_path) == expected


# -- IPv6 transition forms carrying IPv4 addresses (issue 14, item 6) ----------------------------


def _wrapped(v4: ipaddress.IPv4Address) -> dict[str, ipaddress.IPv6Address]:
    n = int(v4)
    public = int(ipaddress.IPv4Address("65.54.227.120"))  # a Teredo server address
    return {
        "6to4": ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1),
        "teredo-client": ipaddress.IPv6Address(
            (0x20010000 << 96) | (public << 64) | (n ^ 0xFFFFFFFF)
        ),
        "teredo-server": ipaddress.IPv6Address((0x20010000 << 96) | (n << 64) | 0xF7F7F7F7),
        "nat64": ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | n),
        "ipv4-compatible": ipaddress.IPv6Address(n),
    }


V4_DENIED = [
    net.network_address + (1 if net.num_addresses > 1 else 0)
    for net in DENY_NETS
    if net.version == 4 and int(net.network_address + 1) > 1
]


@pytest.mark.parametrize("v4", V4_DENIED, ids=str)
@pytest.mark.parametrize("form", sorted(_wrapped(ipaddress.IPv4Address("1.2.3.4"))))
def test_every_default_denied_ipv4_range_is_refused_inside_each_ipv6_form(form, v4, test_config):
    """Through a resolver override and the real fetcher: refused, no socket opened."""
    from batchcrawl.fetch.fetcher import Fetcher

    wrapped = _wrapped(v4)[form]
    assert AddressPolicy(NetworkSection()).check(wrapped) is not None
    network = {"resolve": {"wrapped.example": str(wrapped)}, "allow_networks": []}
    cfg = test_config.replace(network={**network, "system_dns": False})
    with Fetcher(cfg.fetch, cfg.crawl, Resolver(cfg.network), AddressPolicy(cfg.network)) as f:
        r = f.fetch("http://wrapped.example/")
    assert (r.error, r.ip, r.status) == ("refused", None, None)


@pytest.mark.parametrize("form", ["6to4", "teredo-client", "ipv4-compatible"])
def test_control_a_public_ipv4_inside_the_same_forms_is_allowed(form):
    """Policy check only (nothing is contacted): the refusal above comes from the embedded
    address, not from the form."""
    wrapped = _wrapped(ipaddress.IPv4Address("8.8.8.8"))[form]
    assert AddressPolicy(NetworkSection()).check(wrapped) is None


def test_allow_networks_never_allow_a_wrapped_loopback_address():
    """6to4 of 127.0.0.1 is a route through a relay, not 127.0.0.1: the loopback-only test policy
    refuses it (only IPv4-mapped addresses are the IPv4 address itself)."""
    policy = AddressPolicy(loopback_test_config().network)
    assert policy.check("2002:7f00:1::") is not None
    assert policy.check("::ffff:127.0.0.1") is None


@settings(deadline=None)
@given(st.lists(st.ip_addresses().map(str) | st.sampled_from(["", "x", "[::1]", "127.0.0.1"])))
def test_remembered_answers_are_the_checks_answers_and_the_memo_is_bounded(ips):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(resolver, "CHECKED_ADDRESSES", 4)
        policy = AddressPolicy(NetworkSection())
        for ip in ips + ips:  # every address asked twice: the second answer is remembered
            assert policy.check(ip) == DEFAULT._check(ip)
            assert len(policy._checked) <= 4
