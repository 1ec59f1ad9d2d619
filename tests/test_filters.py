"""Tests of the scope filters (batchcrawl.scope.filters): each filter, wildcards, the chain's order, seed
scope and hops, properties, odd input, and the chain built from the default config."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.config import Config, FiltersSection, loopback_test_config
from batchcrawl.errors import BatchcrawlError, ConfigError
from batchcrawl.scope.filters import (
    REASONS,
    AllowDomains,
    AllowHosts,
    AllowMatching,
    Candidate,
    Decision,
    FilterChain,
    HostPatterns,
    KeepToSeedScope,
    RejectDomains,
    RejectExtensions,
    RejectHosts,
    RejectLongUrls,
    RejectManyQueryParams,
    RejectMatching,
    RejectRepeatedSegments,
    RejectTooDeep,
)
from batchcrawl.urls import canonicalize, domain_of, host_of

A, R, X = Decision.ALLOW, Decision.REJECT, Decision.ABSTAIN


def cand(url: str, depth: int = 0, hops_out: int = 0) -> Candidate:
    url = canonicalize(url)
    host = host_of(url)
    return Candidate(url, host, domain_of(host), depth, hops_out)


# --- each filter, table-driven -------------------------------------------------------------------

FILTER_CASES = [
    # (filter, url, depth, hops_out, expected)
    (RejectLongUrls(30), "http://a.test/123456789012", 0, 0, X),  # 26 chars
    (RejectLongUrls(25), "http://a.test/123456789012", 0, 0, R),
    (RejectLongUrls(26), "http://a.test/123456789012", 0, 0, X),
    (RejectTooDeep(2), "http://a.test/", 2, 0, X),
    (RejectTooDeep(2), "http://a.test/", 3, 0, R),
    (RejectTooDeep(0), "http://a.test/", 0, 0, X),
    (RejectExtensions(["jpg", ".PNG"]), "http://a.test/x.jpg", 0, 0, R),
    (RejectExtensions(["jpg"]), "http://a.test/x.JPG", 0, 0, R),
    (RejectExtensions(["png"]), "http://a.test/x.png?size=2", 0, 0, R),
    (RejectExtensions(["png"]), "http://a.test/x.PNG;v=2", 0, 0, R),
    (RejectExtensions(["png"]), "http://a.test/img?f=a.png", 0, 0, X),  # query not looked at
    (RejectExtensions(["png"]), "http://a.test/dir.png/page", 0, 0, X),  # not the last segment
    (RejectExtensions(["png"]), "http://a.test/x.png.html", 0, 0, X),
    (RejectExtensions(["png"]), "http://a.test/png", 0, 0, X),
    (RejectExtensions(["png"]), "http://a.png/", 0, 0, X),  # host is not the path
    (RejectExtensions(["png"]), "http://a.test/a;v=1.png", 0, 0, X),  # dot inside ;params
    (RejectRepeatedSegments(3), "http://a.test/a/b/a/b/a/b", 0, 0, X),  # 'a' 3 times
    (RejectRepeatedSegments(3), "http://a.test/a/b/a/b/a/b/a", 0, 0, R),  # 'a' 4 times
    (RejectRepeatedSegments(3), "http://a.test/x/a/a/a/a", 0, 0, R),
    (RejectRepeatedSegments(3), "http://a.test/x////////y", 0, 0, X),  # empty segments
    (RejectRepeatedSegments(3), "http://a.test/A/a/A/a/A/a", 0, 0, X),  # case-sensitive
    (RejectRepeatedSegments(1), "http://a.test/a/b/c/d/e", 0, 0, X),
    (RejectRepeatedSegments(1), "http://a.test/a/b/c/d/a", 0, 0, R),
    (RejectRepeatedSegments(3), "http://a.test/a?x=/a/a/a/a", 0, 0, X),  # query not a path
    (RejectManyQueryParams(2), "http://a.test/?a=1&b=2", 0, 0, X),
    (RejectManyQueryParams(2), "http://a.test/?a=1&b=2&c", 0, 0, R),
    (RejectManyQueryParams(2), "http://a.test/?a=1&&&&b=2", 0, 0, X),  # empty pieces
    (RejectManyQueryParams(0), "http://a.test/?a", 0, 0, R),
    (RejectManyQueryParams(0), "http://a.test/", 0, 0, X),
    (RejectHosts(["a.test"]), "http://a.test/", 0, 0, R),
    (RejectHosts(["a.test"]), "http://b.a.test/", 0, 0, X),
    (RejectHosts(["*.a.test"]), "http://b.a.test/", 0, 0, R),
    (RejectHosts(["*.a.test"]), "http://c.b.a.test/", 0, 0, R),
    (RejectHosts(["*.a.test"]), "http://a.test/", 0, 0, X),  # wildcard needs one label
    (RejectHosts(["*.a.test"]), "http://xa.test/", 0, 0, X),
    (RejectHosts(["*"]), "http://anything.example/", 0, 0, R),
    (RejectHosts(["[::1]"]), "http://[0:0::1]:8080/", 0, 0, R),
    (RejectHosts(["127.0.0.1"]), "http://127.0.0.1/", 0, 0, R),
    (RejectHosts(["Bücher.EXAMPLE."]), "http://xn--bcher-kva.example/", 0, 0, R),
    (RejectHosts(["*.bücher.example"]), "http://www.BÜCHER.example/", 0, 0, R),
    (RejectDomains(["example.org"]), "http://www.example.org/", 0, 0, R),
    (RejectDomains(["example.org"]), "http://example.org.evil.test/", 0, 0, X),
    (RejectDomains(["*.github.io"]), "http://user.github.io/", 0, 0, R),  # PSL private section
    (RejectDomains(["*.github.io"]), "http://github.io/", 0, 0, X),
    (RejectMatching([r"/calendar/", r"sessionid="]), "http://a.test/calendar/2024", 0, 0, R),
    (RejectMatching([r"/calendar/", r"sessionid="]), "http://a.test/?sessionid=1", 0, 0, R),
    (RejectMatching([r"^https://"]), "http://a.test/", 0, 0, X),
    (AllowHosts(["*.a.test"]), "http://b.a.test/", 0, 0, A),
    (AllowHosts(["*.a.test"]), "http://b.test/", 0, 0, X),
    (AllowDomains(["a.test"]), "http://x.y.a.test/", 0, 0, A),
    (AllowDomains(["a.test"]), "http://b.test/", 0, 0, X),
    (AllowMatching([r"\.test/docs/"]), "http://b.test/docs/x", 0, 0, A),
    (AllowMatching([r"\.test/docs/"]), "http://b.test/doc/x", 0, 0, X),
    (KeepToSeedScope(0), "http://a.test/", 0, 0, A),
    (KeepToSeedScope(0), "http://a.test/", 0, 1, R),
    (KeepToSeedScope(2), "http://a.test/", 5, 2, A),
    (KeepToSeedScope(2), "http://a.test/", 0, 3, R),
]


@pytest.mark.parametrize(
    "filt,url,depth,hops_out,expected",
    FILTER_CASES,
    ids=[f"{type(c[0]).__name__}-{c[1]}-{c[2]}-{c[3]}" for c in FILTER_CASES],
)
def test_filter_decides(filt, url, depth, hops_out, expected):
    assert filt.decide(cand(url, depth, hops_out)) is expected


def test_each_filter_class_makes_one_kind_of_decision():
    made: dict[str, set[Decision]] = {}
    for filt, _url, _depth, _hops, expected in FILTER_CASES:
        made.setdefault(type(filt).__name__, set()).add(expected)
    for name, decisions in made.items():
        if name.startswith("Reject"):
            assert decisions == {R, X}, name
        elif name.startswith("Allow"):
            assert decisions == {A, X}, name
        else:
            assert name == "KeepToSeedScope" and decisions == {A, R}


@pytest.mark.parametrize(
    "pattern",
    [
        "",
        "*",
        "**.a.test",
        "a.*.test",
        "*a.test",
        "a.test:80",
        "a.test/x",
        "u@a.test",
        "::1",
        "a b",
    ],
)
def test_bad_host_patterns_raise_config_error(pattern):
    if pattern == "*":  # the catch-all is valid
        assert HostPatterns([pattern], "k").matches("x.test")
        return
    with pytest.raises(ConfigError, match="filters.deny_hosts"):
        RejectHosts([pattern])


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("allow_regex", ["("], "bad regular expression"),
        ("max_depth", -1, "expected a value >= 0"),
        ("default", "maybe", "expected one of allow, reject"),
        ("seed_scope", "planet", "expected one of host, domain, none"),
    ],
)
def test_bad_filter_settings_are_refused_by_the_config(key, value, message):
    with pytest.raises(ConfigError, match=rf"filters\.{key} \(from replace\(\)\): {message}"):
        Config().replace(filters={key: value})


def test_bad_config_values_raise_config_error():
    with pytest.raises(ConfigError, match="deny_extensions"):
        RejectExtensions(["."])
    with pytest.raises(ConfigError, match="filters.default"):
        FilterChain([], Decision.ABSTAIN)
    with pytest.raises(ConfigError, match="seed_scope"):
        FilterChain([], Decision.ALLOW, seed_scope="planet")
    with pytest.raises(ConfigError, match="filters.allow_domains"):
        FilterChain.from_config(FiltersSection(allow_domains=["*.a.*"]))
    assert issubclass(ConfigError, BatchcrawlError) and issubclass(ConfigError, ValueError)


# --- the chain ------------------------------------------------------------------------------------


class Fixed:
    """A filter that always gives one answer (to test the chain alone)."""

    def __init__(self, decision: Decision, reason: str) -> None:
        self.decision, self.reason = decision, reason

    def decide(self, c: Candidate) -> Decision:
        return self.decision


@given(
    answers=st.lists(st.sampled_from([A, R, X]), max_size=6),
    default=st.sampled_from([A, R]),
)
def test_chain_first_non_abstain_wins_else_default(answers, default):
    chain = FilterChain([Fixed(d, f"r{i}") for i, d in enumerate(answers)], default)
    firsts = [(i, d) for i, d in enumerate(answers) if d is not X]
    if firsts:
        i, d = firsts[0]
        expected = None if d is A else f"r{i}"
    else:
        expected = None if default is A else "default_reject"
    assert chain.check("http://a.test/", "a.test", "a.test", 0, 0) == expected
    decision, reason = chain.decide(cand("http://a.test/"))
    assert decision is not X and reason == expected


def chain_of(seeds=("www.seed.test",), **filters) -> FilterChain:
    section = FiltersSection(**filters)
    return FilterChain.from_config(section, seed_hosts=seeds)


def check(chain: FilterChain, url: str, depth: int = 1, parent_hops: int = 0) -> str | None:
    url = canonicalize(url)
    host = host_of(url)
    domain = domain_of(host)
    return chain.check(url, host, domain, depth, chain.hops_out(host, domain, parent_hops))


CHAIN_CASES = [
    # (filters config, url, depth, parent hops_out, expected reason)
    ({}, "http://www.seed.test/a", 1, 0, None),
    ({}, "http://cdn.seed.test/a", 1, 0, None),  # same pay-level domain
    ({}, "http://other.test/a", 1, 0, "out_of_scope"),
    ({"seed_scope": "host"}, "http://cdn.seed.test/a", 1, 0, "out_of_scope"),
    ({"external_hops": 1}, "http://other.test/a", 1, 0, None),
    ({"external_hops": 1}, "http://other.test/a", 2, 1, "out_of_scope"),
    ({"external_hops": 1}, "http://www.seed.test/back", 3, 1, None),  # back in scope: hops 0
    ({"seed_scope": "none"}, "http://other.test/a", 1, 7, None),
    ({"seed_scope": "none", "default": "reject"}, "http://other.test/a", 1, 0, "default_reject"),
    (
        {"seed_scope": "none", "default": "reject", "allow_domains": ["other.test"]},
        "http://x.other.test/a",
        1,
        0,
        None,
    ),
    ({"default": "reject"}, "http://www.seed.test/a", 1, 0, None),  # seed scope allows
    ({"allow_hosts": ["*.other.test"]}, "http://x.other.test/a", 1, 0, None),  # allow widens
    ({"allow_regex": [r"//other\.test/ok"]}, "http://other.test/ok", 1, 0, None),
    ({"allow_regex": [r"//other\.test/ok"]}, "http://other.test/no", 1, 0, "out_of_scope"),
    # deny lists win over allow lists and the seed scope
    ({"deny_hosts": ["www.seed.test"]}, "http://www.seed.test/a", 1, 0, "deny_host"),
    (
        {"deny_hosts": ["*.other.test"], "allow_hosts": ["x.other.test"]},
        "http://x.other.test/",
        1,
        0,
        "deny_host",
    ),
    ({"deny_domains": ["seed.test"]}, "http://cdn.seed.test/a", 1, 0, "deny_domain"),
    ({"deny_regex": ["/private/"]}, "http://www.seed.test/private/a", 1, 0, "deny_regex"),
    # hard limits win over everything, and come first among themselves
    ({"allow_hosts": ["*"], "max_depth": 2}, "http://www.seed.test/a", 3, 0, "max_depth"),
    ({"max_url_length": 23, "max_depth": 0}, "http://www.seed.test/abc", 1, 0, "url_length"),
    ({"max_depth": 0, "deny_hosts": ["*"]}, "http://www.seed.test/a.jpg", 1, 0, "max_depth"),
    ({"deny_hosts": ["*"]}, "http://www.seed.test/a.jpg", 1, 0, "extension"),
    ({"deny_extensions": []}, "http://www.seed.test/a.jpg", 1, 0, None),
    ({"deny_hosts": ["*"]}, "http://www.seed.test/t/t/t/t", 1, 0, "repeated_segments"),
    ({"max_query_params": 1}, "http://www.seed.test/?a&b", 1, 0, "query_params"),
]


@pytest.mark.parametrize("filters,url,depth,parent_hops,expected", CHAIN_CASES)
def test_chain_order_and_scope(filters, url, depth, parent_hops, expected):
    assert check(chain_of(**filters), url, depth, parent_hops) == expected


def test_hops_out():
    by_domain = chain_of(seeds=["www.seed.test"])
    assert by_domain.hops_out("www.seed.test", "seed.test", 5) == 0
    assert by_domain.hops_out("cdn.seed.test", "seed.test", 5) == 0
    assert by_domain.hops_out("x.test", "x.test", 0) == 1
    assert by_domain.hops_out("x.test", "x.test", 2) == 3
    by_host = chain_of(seeds=["www.seed.test"], seed_scope="host")
    assert by_host.hops_out("cdn.seed.test", "seed.test", 0) == 1
    assert by_host.hops_out("www.seed.test", "seed.test", 4) == 0
    explicit = FilterChain.from_config(FiltersSection(), seed_domains=["seed.test"])
    assert explicit.hops_out("a.seed.test", "seed.test", 3) == 0
    assert chain_of(seeds=[], seed_scope="none").hops_out("x.test", "x.test", 3) == 0


def test_hops_out_without_seeds_fails_loudly_but_check_works():
    chain = FilterChain.from_config(FiltersSection())  # e.g. at generate: hops come stored
    assert chain.check("http://a.test/", "a.test", "a.test", 0, 0) is None
    assert chain.check("http://a.test/", "a.test", "a.test", 0, 1) == "out_of_scope"
    with pytest.raises(ConfigError, match="seed_hosts"):
        chain.hops_out("a.test", "a.test", 0)


def test_memoized_host_decisions_stay_right():
    patterns = HostPatterns(["*.a.test", "b.test"], "filters.deny_hosts")
    for _ in range(2):  # second pass answers from the memo
        assert [patterns.matches(h) for h in ("x.a.test", "a.test", "b.test", "x.b.test")] == [
            True,
            False,
            True,
            False,
        ]


# --- properties -----------------------------------------------------------------------------------

label = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
segment = st.from_regex(r"[A-Za-z0-9_~-]{1,12}", fullmatch=True)  # no dot: no extension


@st.composite
def seed_site_urls(draw):
    """A seed host, and a URL on its pay-level domain with distinct path segments."""
    domain = draw(label) + ".test"
    seed = draw(st.sampled_from(["", "www."])) + domain
    host = draw(st.sampled_from(["", "www.", "cdn.", "a.b."])) + domain
    segments = draw(st.lists(segment, max_size=8, unique=True))
    params = draw(st.lists(segment, max_size=5))
    query = "?" + "&".join(params) if params else ""
    return seed, canonicalize(f"http://{host}/{'/'.join(segments)}{query}")


@given(site=seed_site_urls(), depth=st.integers(0, 20), parent_hops=st.integers(0, 5))
def test_in_scope_url_within_limits_is_allowed_by_default_config(site, depth, parent_hops):
    seed, url = site
    chain = FilterChain.from_config(Config().filters, seed_hosts=[seed])
    host = host_of(url)
    domain = domain_of(host)
    hops = chain.hops_out(host, domain, parent_hops)
    assert hops == 0
    assert chain.check(url, host, domain, depth, hops) is None


@given(
    site=seed_site_urls(),
    deny=st.sampled_from(["deny_hosts", "deny_domains", "deny_regex"]),
    external_hops=st.integers(0, 3),
    default=st.sampled_from(["allow", "reject"]),
    scope=st.sampled_from(["host", "domain", "none"]),
)
def test_a_deny_rule_always_wins(site, deny, external_hops, default, scope):
    seed, url = site
    host = host_of(url)
    domain = domain_of(host)
    rule = {"deny_hosts": host, "deny_domains": domain, "deny_regex": "^http://"}[deny]
    section = FiltersSection(
        default=default,
        seed_scope=scope,
        external_hops=external_hops,
        allow_hosts=[host],
        allow_domains=[domain],
        allow_regex=["."],
        **{deny: [rule]},
    )
    chain = FilterChain.from_config(section, seed_hosts=[seed, host])
    expected = {
        "deny_hosts": "deny_host",
        "deny_domains": "deny_domain",
        "deny_regex": "deny_regex",
    }
    assert chain.check(url, host, domain, 0, chain.hops_out(host, domain, 0)) == expected[deny]


EVERYTHING_ON = FiltersSection(
    default="reject",
    seed_scope="host",
    external_hops=1,
    allow_hosts=["*.a.test", "[::1]"],
    deny_hosts=["*.b.test"],
    allow_domains=["c.test"],
    deny_domains=["*.d.test"],
    allow_regex=["ok"],
    deny_regex=["no"],
    max_depth=3,
    max_url_length=80,
    max_repeated_segments=1,
    max_query_params=1,
)
ODD_URLS = [
    "",
    "http://",
    "http://a.test",  # no path (not canonical)
    "http://[::1]:8080/a.JPG",
    "http://[fe80::1]",
    "http://xn--bcher-kva.example/ü/ü/ü",
    "http://a.test/?&&&;;",
    "http://a.test/.",
    "http://a.test/a.",
    "http://a.test/;.png",
    "/just/a/path.png",
    "\x00\ud800?/.",
    "https://例え.テスト/パス?クエリ=値&x",
]


@pytest.mark.parametrize("url", ODD_URLS)
def test_no_filter_raises_on_odd_input(url):
    chain = FilterChain.from_config(EVERYTHING_ON, seed_hosts=["a.test"])
    for host in ("", "[::1]", "例え.テスト", "a.test"):
        reason = chain.check(url, host, host, 2, 0)
        assert reason is None or reason in REASONS


@settings(max_examples=200)
@given(
    url=st.text(max_size=120),
    host=st.text(max_size=30),
    domain=st.text(max_size=30),
    depth=st.integers(0, 1 << 31),
    hops=st.integers(0, 1 << 31),
)
def test_no_filter_raises_on_any_text(url, host, domain, depth, hops):
    chain = FilterChain.from_config(EVERYTHING_ON, seed_hosts=["a.test"])
    c = Candidate(url, host, domain, depth, hops)
    for filt in chain.filters:
        assert filt.decide(c) in (A, R, X)
    reason = chain.check(url, host, domain, depth, hops)
    assert reason is None or reason in REASONS
    assert isinstance(chain.hops_out(host, domain, hops), int)


# --- the default configuration is sane --------------------------------------------------------------


@pytest.mark.parametrize("config", [Config(), loopback_test_config()], ids=["default", "loopback"])
def test_default_config_chain(config):
    seeds = [host_of(canonicalize("http://www.site.test/"))]
    chain = FilterChain.from_config(config.filters, seed_hosts=seeds)
    assert check(chain, "http://www.site.test/", depth=0) is None  # the seed itself
    assert check(chain, "http://www.site.test/about/team.html", depth=1) is None
    assert check(chain, "http://blog.site.test/2024/05/post?page=2&sort=new", depth=5) is None
    assert check(chain, "http://www.site.test/a", depth=20) is None
    assert check(chain, "http://www.site.test/a", depth=21) == "max_depth"
    assert check(chain, "https://www.example.com/", depth=1) == "out_of_scope"
    assert check(chain, "http://www.site.test/logo.PNG", depth=1) == "extension"
    assert check(chain, "http://www.site.test/file.zip", depth=1) == "extension"
    assert check(chain, "http://www.site.test/" + "x" * 2100, depth=1) == "url_length"
    assert check(chain, "http://www.site.test/a/b/a/b/a/b/a/b", depth=1) == "repeated_segments"
    many = "&".join(f"p{i}=1" for i in range(21))
    assert check(chain, f"http://www.site.test/?{many}", depth=1) == "query_params"
    assert check(chain, "http://www.site.test/?" + many.rsplit("&", 1)[0], depth=1) is None


def test_default_config_chain_needs_seeds_only_for_hops():
    chain = FilterChain.from_config(Config().filters)
    with pytest.raises(ConfigError, match="seed_scope"):
        chain.hops_out("www.site.test", "site.test", 0)


def test_reasons_cover_every_rejecting_filter():
    chain = FilterChain.from_config(
        FiltersSection(default="reject", deny_hosts=["x"], deny_domains=["x"], deny_regex=["x"]),
        seed_hosts=["a.test"],
    )
    rejecting = {f.reason for f in chain.filters if type(f).__name__.startswith("Reject")}
    assert rejecting | {"out_of_scope", "default_reject"} == set(REASONS)
