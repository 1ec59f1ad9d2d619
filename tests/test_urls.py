"""Tests of batchcrawl.urls: the canonical URL form against the WHATWG URL tests and the Nutch, w3lib
and Heritrix normalizer suites, plus hypothesis properties and pinned url_key values.

Each external case gets a verdict from our documented policy (module docstring of
``batchcrawl.urls``): SAME (our canonical form equals the expected one, exactly or after
canonicalizing the expected URL too), REJECT (we raise InvalidURL), DIFFERENT (a documented policy
difference: the two forms must stay different) or SKIP (not comparable, with the reason). Counts
are printed to the terminal (also without ``-s``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import ada_url
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from batchcrawl.errors import BatchcrawlError, ConfigError, InvalidURL
from batchcrawl.urls import (
    _canonical_from_href,
    bucket_of,
    canonicalize,
    canonicalize_serialized,
    domain_of,
    host_of,
    parse_url_parts,
    surt,
    url_key,
    url_keys,
)

TESTDATA = Path(__file__).resolve().parents[1].parent / "shared" / "testdata"
WHATWG = TESTDATA / "whatwg-url" / "upstream"
NORM = TESTDATA / "url-normalization"


def _load(path: Path):
    if not path.exists():
        pytest.skip(
            f"test data {path} absent (expected in ../shared/testdata beside the repository)"
        )
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def _report(capsys, title: str, counts: Counter) -> None:
    line = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    with capsys.disabled():
        print(f"\n[{title}] {line}")


def _canon_or_none(url: str, base: str | None = None) -> str | None:
    try:
        return canonicalize(url, base)
    except InvalidURL:
        return None


# --- an independent reference of policy steps 3-7, applied to a WHATWG href ------------------------

_UNRESERVED = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ALLOWED_RAW = _UNRESERVED | set("!$&'()*+,;=:@/?")
_HEX = set("0123456789abcdefABCDEF")


def _ref_pct(part: str) -> str:
    out, i = [], 0
    while i < len(part):
        c = part[i]
        if c == "%" and len(part) >= i + 3 and part[i + 1] in _HEX and part[i + 2] in _HEX:
            ch = chr(int(part[i + 1 : i + 3], 16))
            out.append(ch if ch in _UNRESERVED else "%" + part[i + 1 : i + 3].upper())
            i += 3
            continue
        out.append(c if c in _ALLOWED_RAW else "".join(f"%{b:02X}" for b in c.encode()))
        i += 1
    return "".join(out)


def _reference(href: str) -> str | None:
    """Our policy applied to a WHATWG-serialized http(s) href; None if the URL must be rejected."""
    s = urlsplit(href)
    netloc = s.netloc.rpartition("@")[2]
    m = re.fullmatch(r"(\[[^\]]*\]|[^:]*)(?::(\d+))?", netloc)
    host, port = m.group(1), m.group(2)
    if not host.startswith("[") and host.endswith("."):
        host = host.rstrip(".")
        if re.search(r"(^|\.)(0x[0-9a-f]*|[0-9]+)$", host):
            # The shorter name reads as an IPv4 address: WHATWG parses it again (or rejects it).
            again = _ada(f"{s.scheme}://{host}{':' + port if port else ''}{s.path}", None)
            return None if again is None else _reference(again + (f"?{s.query}" if s.query else ""))
    query = _ref_pct(s.query) if s.query else ""
    return (
        f"{s.scheme}://{host}{':' + port if port else ''}{_ref_pct(s.path or '/')}"
        f"{'?' + query if query else ''}"
    )


def _ada(url: str, base: str | None) -> str | None:
    try:
        return ada_url.join_url(base, url) if base is not None else ada_url.normalize_url(url)
    except ValueError:
        return None


def _serialized_or_none(href: str) -> str | None:
    try:
        return canonicalize_serialized(href)
    except InvalidURL:
        return None


#: Pieces of references: dot segments, escapes (good, bad, of unreserved characters, lower-case),
#: userinfo, ports (default and not), trailing dots, IP literals, fragments, spaces, non-ASCII.
_PIECES = st.sampled_from(
    ["a", "B", "/", "//", ".", "..", "./", "../", "?", "#", "&", "=", "%41", "%7e", "%2F", "%zz",
     "%", " ", "\t", "~", "é", "日", "@", "user:pw@", ":80", ":8080", ":443", "h.test", "H.TEST.",
     "127.0.0.1", "0x7f.1", "[::1]", "http://", "https://", "HTTP://x.test", "mailto:a", "|", "{",
     "^", "`", '"', "<", ";"]
)  # fmt: skip
_BASES = st.sampled_from(
    ["http://h.test/a/b/c.html", "https://user@H.Test:443/dir/?q=1#f", "http://127.0.0.1:8000/",
     "http://xn--nxasmq6b.test./p%7e/", "http://[::1]/a?b"]
)  # fmt: skip


@settings(max_examples=2000, deadline=None)
@given(_BASES, st.lists(_PIECES, max_size=12).map("".join))
def test_a_serialized_href_canonicalizes_without_a_second_parse(base, ref):
    """For every href the WHATWG parser serializes (the page parser's resolved links), the
    string-only path gives canonicalize's result, or refuses it too."""
    href = _ada(ref, base)
    assume(href is not None)
    assert _serialized_or_none(href) == _canon_or_none(href)
    canonical = _canon_or_none(href)
    if canonical is not None:  # a canonical URL is serialized too (redirect targets)
        assert canonicalize_serialized(canonical) == canonical


def test_serialized_hrefs_of_the_whatwg_tests_canonicalize_without_a_second_parse(capsys):
    """Every href ada-url makes of the WHATWG URL tests' inputs: canonicalize_serialized agrees
    with canonicalize (both refuse a non-http(s) URL or a host of dots)."""
    cases = [c for c in _load(WHATWG / "urltestdata.json") if isinstance(c, dict)]
    counts: Counter = Counter()
    failures = []
    for c in cases:
        href = _ada(c["input"], c.get("base"))
        if href is None:
            counts["skip: ada-url refuses the input"] += 1
            continue
        want = _canon_or_none(href)
        if _serialized_or_none(href) == want:
            counts[f"SAME {'canonical' if want is not None else 'refused'}: pass"] += 1
        else:
            failures.append((href, want, _serialized_or_none(href)))
    counts["FAIL"] = len(failures)
    _report(capsys, f"serialized hrefs of WHATWG urltestdata.json, {len(cases)} cases", counts)
    assert not failures, failures[:10]
    assert counts["SAME canonical: pass"] > 100


def test_a_url_as_written_needs_the_full_canonicalization():
    """The string-only path is for serialized hrefs only: a URL as written keeps what the parse
    would have removed (the reason sitemap locations take canonicalize)."""
    written = "http://H.test:80/a/../b"
    assert canonicalize(written) == "http://h.test/b"
    assert canonicalize_serialized(written) != canonicalize(written)


# --- WHATWG URL tests --------------------------------------------------------------------------------


def test_whatwg_urltestdata(capsys) -> None:
    cases = [c for c in _load(WHATWG / "urltestdata.json") if isinstance(c, dict)]
    counts: Counter = Counter()
    failures = []
    for c in cases:
        inp, base = c["input"], c.get("base")
        got = _canon_or_none(inp, base)
        ada = _ada(inp, base)
        if c.get("failure"):
            if ada is not None:
                counts["skip: ada-url accepts a WPT failure case"] += 1
            elif got is None:
                counts["REJECT failure case: pass"] += 1
            else:
                failures.append((inp, base, "should fail", got))
            continue
        href = c["href"]
        if ada != href:
            counts["skip: ada-url differs from the WPT href"] += 1
            continue
        if c["protocol"] not in ("http:", "https:"):
            if got is None:
                counts["REJECT non-http(s) scheme: pass"] += 1
            else:
                failures.append((inp, base, "non-http scheme accepted", got))
            continue
        if not c["hostname"].strip("."):
            if got is None:
                counts["REJECT host of dots only: pass"] += 1
            else:
                failures.append((inp, base, "dots-only host accepted", got))
            continue
        expected = _reference(href)
        if expected is None and got is None:
            counts["REJECT host without its trailing dots is a bad IPv4: pass"] += 1
        elif got == expected:
            counts["SAME http(s) href: pass"] += 1
        else:
            failures.append((inp, base, expected, got))
    counts["FAIL"] = len(failures)
    _report(capsys, f"WHATWG urltestdata.json, {len(cases)} cases", counts)
    assert not failures, failures[:10]


def test_whatwg_toascii_hosts(capsys) -> None:
    cases = [c for c in _load(WHATWG / "toascii.json") if isinstance(c, dict)]
    counts: Counter = Counter()
    failures = []
    for c in cases:
        url = f"https://{c['input']}/x"  # how WPT's toascii.window.js checks hosts
        got = _canon_or_none(url)
        if (_ada(url, None) is None) != (c["output"] is None):
            counts["skip: ada-url differs from WPT"] += 1
        elif c["output"] is None:
            counts["REJECT: pass" if got is None else "FAIL"] += 1
            if got is not None:
                failures.append((c, got))
        elif not c["output"].rstrip("."):
            counts["REJECT host of dots only: pass" if got is None else "FAIL"] += 1
        elif got is not None and host_of(got) == c["output"].rstrip("."):
            counts["SAME host (trailing dots stripped): pass"] += 1
        else:
            failures.append((c, got))
    _report(capsys, f"WHATWG toascii.json, {len(cases)} hosts", counts)
    assert not failures, failures[:10]


# --- Nutch, w3lib, Heritrix --------------------------------------------------------------------------

_DEVIATION_CHARS = set("ßς\u200c\u200d")


def _nutch_verdict(c: dict) -> str:
    inp, exp, cfg = c["input"], c["expected"], c["config"]
    if exp is None:
        return "REJECT"
    if not exp.startswith(("http://", "https://")):
        return "REJECT"  # file:, ftp: and host-less "http:/"
    if "//" in urlsplit(inp.strip()).path:
        return "DIFFERENT"  # Nutch collapses '//' in paths; we keep empty segments
    if (
        cfg.get("NORM_HOST_IDN") == "toAscii"
        and not cfg.get("NORM_HOST_IDNA_2008")
        and _DEVIATION_CHARS & set(inp)
    ):
        return "DIFFERENT"  # IDNA 2003 maps ß -> ss; UTS #46 nontransitional (browsers) keeps ß
    return "SAME"


def _w3lib_verdict(c: dict) -> str:
    if c["kwargs"]:
        return "SKIP: option we do not offer (encoding, keep_fragments, query_separator, ...)"
    if isinstance(c["input"], dict) and "bytes_utf8" not in c["input"]:
        return "SKIP: non-UTF-8 bytes input (our API takes str)"
    inp = c["input"]["bytes_utf8"] if isinstance(c["input"], dict) else c["input"]
    s = urlsplit(inp.strip())
    if s.scheme not in ("http", "https"):
        return "REJECT"  # relative reference without base, or another scheme
    params = s.query.split("&") if s.query else []
    if params and (
        params != sorted(params)
        or any("=" not in p for p in params)
        or any(ch in s.query for ch in " +")
        or "%20" in s.query
    ):
        return "DIFFERENT"  # w3lib sorts and re-encodes the query; we keep it as written
    return "SAME"


_HERITRIX_ADOPTED = {"StripUserinfoRule"}


def _heritrix_verdict(c: dict) -> str:
    rule, inp, exp = c["rule"], c["input"], c["expected"]
    if inp == exp:
        return "SKIP: the rule leaves this input unchanged"
    if rule in _HERITRIX_ADOPTED and inp.startswith("http"):
        return "SAME"
    if rule == "FixupQueryString" and inp.endswith("?") and "&" not in inp:
        return "SAME"  # we drop an empty query only
    if rule == "LowercaseRule" and urlsplit(inp).path == urlsplit(inp).path.lower():
        return "SAME"  # we lower-case the host only
    if not inp.startswith(("http://", "https://")):
        return "REJECT"
    return "DIFFERENT"  # www stripping, session ids, regex rules, '?&' fix-ups: not our policy


def _input_of(c: dict) -> str:
    inp = c["input"]
    return inp["bytes_utf8"] if isinstance(inp, dict) else inp


def _run_suite(cases: list[dict], verdict, title: str, capsys) -> None:
    counts: Counter = Counter()
    failures = []
    for c in cases:
        v = verdict(c)
        if v.startswith("SKIP"):
            counts[v] += 1
            continue
        inp = _input_of(c)
        got = _canon_or_none(inp)
        if v == "REJECT":
            ok = got is None
        elif v == "SAME":
            # exact, or equivalent: the expected URL canonicalizes to ours (it keeps a Unicode host
            # or userinfo, which we turn into punycode or drop)
            ok = got is not None and (got == c["expected"] or got == _canon_or_none(c["expected"]))
            if ok:
                v += " exact" if got == c["expected"] else " equivalent"
        else:  # DIFFERENT: a documented policy difference keeps the two forms apart
            ok = got is not None and got != _canon_or_none(c["expected"])
        counts[f"{v}: {'pass' if ok else 'FAIL'}"] += 1
        if not ok:
            failures.append((v, inp, c["expected"], got))
    _report(capsys, f"{title}, {len(cases)} cases", counts)
    assert not failures, failures[:10]


def test_nutch_basic_normalizer(capsys) -> None:
    cases = _load(NORM / "nutch" / "nutch_basic_normalizer.json")
    _run_suite(cases, _nutch_verdict, "Nutch BasicURLNormalizer", capsys)


def test_w3lib_canonicalize_url(capsys) -> None:
    cases = _load(NORM / "w3lib" / "w3lib_canonicalize_url.json")["cases"]
    _run_suite(cases, _w3lib_verdict, "w3lib canonicalize_url", capsys)


def test_heritrix_rules(capsys) -> None:
    cases = _load(NORM / "heritrix" / "heritrix_canonicalize_rules.json")["cases"]
    _run_suite(cases, _heritrix_verdict, "Heritrix canonicalization rules", capsys)


# --- our own cases -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("HTTP://Example.COM", "http://example.com/"),
        ("http://example.com:80/a", "http://example.com/a"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("https://example.com:80/a", "https://example.com:80/a"),
        ("http://example.com:443/a", "http://example.com:443/a"),
        ("http://example.com/a/./b/../c", "http://example.com/a/c"),
        ("http://example.com/a#frag", "http://example.com/a"),
        ("http://user:pw@example.com/", "http://example.com/"),
        ("http://example.org./x", "http://example.org/x"),
        ("http://example.com/a?", "http://example.com/a"),
        ("http://example.com/%7euser/%41%62?q=%7e%2f%25", "http://example.com/~user/Ab?q=~%2F%25"),
        ("http://example.com/%c3%a9", "http://example.com/%C3%A9"),
        ("http://example.com/é", "http://example.com/%C3%A9"),
        ("http://example.com/a|b?x=[1]^", "http://example.com/a%7Cb?x=%5B1%5D%5E"),
        ("http://example.com/100%", "http://example.com/100%25"),
        ("http://bücher.de/", "http://xn--bcher-kva.de/"),
        ("http://0x7f.1/", "http://127.0.0.1/"),
        ("http://[0:0::1]:8080/", "http://[::1]:8080/"),
        ("  http://example.com/a\tb\n ", "http://example.com/ab"),
        ("http://example.com\\a\\b", "http://example.com/a/b"),
        ("http://example.com//a", "http://example.com//a"),
        ("http://example.com/a?b&&c=&", "http://example.com/a?b&&c=&"),
    ],
)
def test_canonical_examples(url: str, expected: str) -> None:
    assert canonicalize(url) == expected
    assert canonicalize(expected) == expected


@pytest.mark.parametrize(
    ("ref", "base", "expected"),
    [
        ("../d#x", "http://a.test/b/c/e", "http://a.test/b/d"),
        ("?q", "http://a.test/b", "http://a.test/b?q"),
        ("//Other.test", "https://a.test/x", "https://other.test/"),
        ("https://b.test/", "http://a.test/", "https://b.test/"),
        ("", "http://a.test/p#f", "http://a.test/p"),
    ],
)
def test_relative_resolution(ref: str, base: str, expected: str) -> None:
    assert canonicalize(ref, base) == expected


@pytest.mark.parametrize(
    ("url", "base", "match"),
    [
        ("mailto:a@b.test", None, "only http and https"),
        ("javascript:void(0)", "http://a.test/", "only http and https"),
        ("ftp://a.test/", None, "only http and https"),
        ("/relative", None, "cannot parse"),
        ("http://", None, "cannot parse"),
        ("http://a b/", None, "cannot parse"),
        ("x", "not a base", "cannot resolve"),
        ("http://.../", None, "no host"),
    ],
)
def test_invalid_urls(url: str, base: str | None, match: str) -> None:
    with pytest.raises(InvalidURL, match=match) as info:
        canonicalize(url, base)
    assert isinstance(info.value, BatchcrawlError) and isinstance(info.value, ValueError)
    assert repr(url) in str(info.value)


@pytest.mark.parametrize(
    ("url", "suggested"),
    [
        ("h0003.test:38427/x", "http://h0003.test:38427/x"),
        ("localhost:8080", "http://localhost:8080"),
        ("127.0.0.1:8080/a?q", "http://127.0.0.1:8080/a?q"),
        ("example.com/path", "http://example.com/path"),
    ],
)
def test_a_url_without_scheme_is_named_so_with_the_url_to_write(url: str, suggested: str) -> None:
    """``h0003.test:38427/x`` parses (WHATWG) as scheme ``h0003.test``: the message says the
    scheme is missing and gives the URL to write, not ``has scheme 'h0003.test'``."""
    with pytest.raises(InvalidURL) as info:
        canonicalize(url)
    message = str(info.value)
    assert f"{url!r} is not an absolute http(s) URL" in message and "has scheme" not in message
    assert message.endswith(f"write it as {suggested}")
    canonicalize(suggested)  # the suggestion is a URL that can be crawled
    # a real scheme, or a relative reference resolved against a page, is not taken for a host
    for other in ("mailto:a@b.test", "com.example.app:/x", "a.b:c"):
        with pytest.raises(InvalidURL, match="has scheme"):
            canonicalize(other)
    with pytest.raises(InvalidURL, match="has scheme 'h0003.test'"):
        canonicalize("h0003.test:38427/x", "http://a.test/")


# --- properties ----------------------------------------------------------------------------------------

_label = st.text(alphabet="abcXYZ019-éßж", min_size=1, max_size=8)
_host = st.one_of(
    st.lists(_label, min_size=1, max_size=4).map(".".join),
    st.just("EXAMPLE.com."),
    st.just("0x7f.1"),
    st.just("[::FFFF:1.2.3.4]"),
    st.just("127.0.0.1"),
    st.just("xn--bcher-kva.de"),
)
_segment = st.text(alphabet="aZ09.-_~%2eEf!$&'()*+,;=:@[]|^`{}\\ é/?#\t", max_size=12)
_url = st.builds(
    lambda scheme, user, host, port, path, query, frag: (
        f"{scheme}://{user}{host}{port}/{path}{query}{frag}"
    ),
    st.sampled_from(["http", "HTTPS", "https", "hTTp"]),
    st.sampled_from(["", "u:p@", "u%40x@"]),
    _host,
    st.sampled_from(["", ":80", ":443", ":8080", ":"]),
    _segment,
    st.one_of(st.just(""), _segment.map(lambda s: "?" + s)),
    st.one_of(st.just(""), _segment.map(lambda s: "#" + s)),
)


@settings(max_examples=400, deadline=None)
@given(_url)
@example("http://0x7f.1../")
@example("http://a/%2e%2E/%7e%2e%2E/x")
def test_canonicalize_is_idempotent_and_fast_path_agrees(url: str) -> None:
    got = _canon_or_none(url)
    assume(got is not None)
    assert canonicalize(got) == got
    assert got.isascii() and got.startswith(("http://", "https://")) and "#" not in got
    assert "@" not in got.split("/", 3)[2]
    # The quick path (taken for `got`) agrees with the full path.
    assert _canonical_from_href(ada_url.normalize_url(got), got) == got
    # Resolving an absolute URL against any base gives the same canonical form.
    assert canonicalize(url, "https://base.test/dir/page") == got


@settings(max_examples=200, deadline=None)
@given(_url, st.sampled_from(["a", "../b", "?q", "//h.test/p", "/x y", "#f"]))
def test_relative_results_are_canonical(base: str, ref: str) -> None:
    assume(_canon_or_none(base) is not None)
    got = _canon_or_none(ref, base)
    assume(got is not None)
    assert canonicalize(got) == got


# --- keys, hosts, domains ---------------------------------------------------------------------------

GOLDEN_KEYS = {
    "http://example.com/": 11571728257177965048,
    "https://www.example.org/a/b?c=d": 16317122142642662181,
    "http://h1.test:8080/page%20one": 14122598250004657639,
    "http://xn--bcher-kva.de/": 4908871797442694511,
}


def test_url_key_golden_values() -> None:
    for url, key in GOLDEN_KEYS.items():
        assert url_key(url) == key
        assert 0 <= key < 2**64
    assert url_keys(GOLDEN_KEYS).tolist() == list(GOLDEN_KEYS.values())
    assert url_keys([]).dtype == np.uint64


def test_url_key_is_stable_across_processes() -> None:
    code = (
        "import json, sys; from batchcrawl.urls import url_key; "
        "print(json.dumps({u: url_key(u) for u in json.loads(sys.argv[1])}))"
    )
    root = Path(__file__).resolve().parents[1]
    for hash_seed in ("1", "12345"):
        out = subprocess.run(
            [sys.executable, "-c", code, json.dumps(list(GOLDEN_KEYS))],
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
            env={"PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(root)},
        )
        assert json.loads(out.stdout) == GOLDEN_KEYS


def test_bucket_of() -> None:
    key = GOLDEN_KEYS["http://example.com/"]
    assert bucket_of(key, 64) == key % 64
    assert bucket_of(key, 1) == 0
    with pytest.raises(ConfigError, match="frontier.buckets"):
        bucket_of(key, 0)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://example.com/", "example.com"),
        ("http://h1.test:8080/a:b", "h1.test"),
        ("https://[::1]:8443/x", "[::1]"),
        ("http://127.0.0.1/", "127.0.0.1"),
        ("http://xn--bcher-kva.de", "xn--bcher-kva.de"),
    ],
)
def test_host_of(url: str, host: str) -> None:
    assert host_of(url) == host


def test_host_of_rejects_non_url() -> None:
    with pytest.raises(InvalidURL, match="canonicalize"):
        host_of("example.com/a")


@pytest.mark.parametrize(
    ("host", "domain"),
    [
        ("www.example.co.uk", "example.co.uk"),
        ("a.b.example.com", "example.com"),
        ("h1.test", "h1.test"),
        ("a.h1.test", "h1.test"),
        ("co.uk", "co.uk"),
        ("localhost", "localhost"),
        ("127.0.0.1", "127.0.0.1"),
        ("[::1]", "[::1]"),
        ("foo.github.io", "foo.github.io"),
        ("a.b.xn--p1ai", "b.xn--p1ai"),
    ],
)
def test_domain_of(host: str, domain: str) -> None:
    assert domain_of(host) == domain


def test_domain_of_empty_host() -> None:
    with pytest.raises(InvalidURL):
        domain_of("")


def test_parse_url_parts() -> None:
    assert parse_url_parts("https://www.example.co.uk:8443/x") == (
        "www.example.co.uk",
        "example.co.uk",
    )


@pytest.mark.parametrize(
    ("url", "key"),
    [
        ("http://www.example.com/a/B?z=1&a=2", "com,example)/a/b?a=2&z=1"),
        ("http://h1.test:8080/x", "test,h1:8080)/x"),
        ("https://example.com/", "com,example)/"),
        ("https://www3288.com/", "com,www3288)/"),
        ("https://www.com/", "com,www)/"),
        ("http://www.co.uk/", "uk,co,www)/"),
        ("http://www7.example.co.uk/", "uk,co,example)/"),
        ("http://wwwx.example.com/", "com,example,wwwx)/"),
        ("http://www.www.example.com/", "com,example,www)/"),
        ("http://www.h1.test/", "test,h1)/"),
    ],
)
def test_surt(url: str, key: str) -> None:
    assert surt(url) == key


_LABEL = st.sampled_from(
    ["www", "www1", "www3288", "wwwx", "example", "co", "uk", "com", "h1", "a"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_LABEL, min_size=1, max_size=5))
def test_surt_drops_at_most_a_leading_www_label_and_only_before_a_registrable_host(labels):
    from publicsuffixlist import PublicSuffixList

    host = ".".join(labels)
    rest = ".".join(labels[1:])
    droppable = (
        re.fullmatch(r"www[0-9]*", labels[0]) is not None
        and "." in rest
        and PublicSuffixList().privatesuffix(rest) is not None
    )
    key_host = surt(f"http://{host}/").split(")", 1)[0]
    assert key_host == ",".join(reversed(labels[1:] if droppable else labels))


@pytest.mark.parametrize(
    "url", ["http://www.example.com./x", "http://www.example.com.:8080/", "HTTP://A.TEST../"]
)
def test_trailing_dot_hosts_are_stored_dotless(url):
    canonical = canonicalize(url)
    assert not host_of(canonical).endswith(".")
    assert host_of(url.lower()) == host_of(canonical)  # also for a URL that was never canonical


def test_the_cli_and_the_crawl_processes_load_the_surt_package_only_to_write_keys():
    """The ``surt`` package imports tldextract and requests: 85 ms of every command's start and
    7 MB of each crawl process (issue 33's memory by import). Importing the CLI, the round driver
    and the fetch worker leaves it out; the first SURT key loads it."""
    code = (
        "import sys\n"
        "import batchcrawl.cli, batchcrawl.round, batchcrawl.fetch.worker, batchcrawl.engine.shard\n"
        "print(sorted(m for m in ('surt', 'tldextract', 'requests') if m in sys.modules))\n"
        "from batchcrawl.urls import surt\n"
        "print(surt('http://www.example.com/a?b=1'), 'surt' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["[]", "com,example)/a?b=1 True"], out.stderr
