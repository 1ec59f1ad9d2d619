"""Host patterns (batchcrawl.scope.hostpatterns), the one syntax of network.resolve and the filter
host/domain lists: the resolver and the filter chain must read every pattern the same way."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchcrawl.config import NetworkSection
from batchcrawl.errors import ConfigError
from batchcrawl.fetch.resolver import Resolver
from batchcrawl.scope.filters import RejectHosts
from batchcrawl.scope.hostpatterns import HostPatternMap, HostPatterns

labels = st.sampled_from(["a", "b", "xn--bcher-kva", "test", "org", "c-d"])
names = st.lists(labels, min_size=1, max_size=4).map(".".join)
patterns = st.one_of(names, names.map(lambda n: "*." + n), st.just("*"))


def test_most_specific_pattern_wins():
    m = HostPatternMap({"*": 0, "*.test": 1, "*.a.test": 2, "b.a.test": 3}, "k")
    assert [
        m.get(h) for h in ("b.a.test", "c.b.a.test", "c.a.test", "a.test", "test", "x.org")
    ] == [
        3,
        2,
        2,
        1,
        0,
        0,
    ]


def test_patterns_are_normalized_like_hosts():
    m = HostPatterns(["*.Bücher.TEST.", "EXAMPLE.org"], "k")
    assert m.patterns == ("*.xn--bcher-kva.test", "example.org")
    assert m.matches("a.xn--bcher-kva.test") and m.matches("example.org")


def test_same_pattern_with_two_values_is_a_config_error():
    with pytest.raises(ConfigError, match=r"network\.resolve: 'A.test'.*another value"):
        HostPatternMap({"a.test": "127.0.0.1", "A.test": "127.0.0.2"}, "network.resolve")
    assert HostPatterns(["a.test", "A.test"], "k").patterns == ("a.test",)  # a set: harmless


@pytest.mark.parametrize("pattern", ["*.127.0.0.1", "a.test:80", "h.*.test", "a*.test"])
def test_resolver_and_filters_refuse_the_same_bad_patterns(pattern):
    with pytest.raises(ConfigError, match="network.resolve"):
        Resolver(NetworkSection(resolve={pattern: "127.0.0.1"}, system_dns=False))
    with pytest.raises(ConfigError, match="filters.deny_hosts"):
        RejectHosts([pattern])


@given(st.lists(patterns, min_size=1, max_size=5, unique=True), names)
def test_resolver_and_filters_match_the_same_names(pats, name):
    resolver = Resolver(NetworkSection(resolve=dict.fromkeys(pats, "127.0.0.1"), system_dns=False))
    deny = HostPatterns(pats, "filters.deny_hosts")
    assert (resolver.lookup_override(name) is not None) == deny.matches(name)
    # and a wildcard never matches its own name
    for p in pats:
        if p.startswith("*."):
            assert HostPatterns([p], "k").matches(p[2:]) is False
