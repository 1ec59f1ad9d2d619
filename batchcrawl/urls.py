"""Canonical URLs, their 64-bit keys, hosts, pay-level domains and SURT keys.

Every URL that enters the crawl (seeds, outlinks, redirect targets) goes through
:func:`canonicalize` once; everything downstream (the frontier's ``url_key``, DRUM buckets, the shard
ring, WARC ``WARC-Target-URI``) sees only the canonical form. Two URLs are "the same URL" for the
crawl exactly when their canonical forms are equal strings (BUbiNG's BURL normalization plays the
same role).

The canonical form (our policy)
-------------------------------
1. Parse with the WHATWG URL Standard parser (ada-url), the parser browsers use: this strips
   leading/trailing C0 controls and spaces and removes tabs/newlines, turns ``\\`` into ``/`` in
   http(s) paths, lower-cases scheme and host, converts IDN hosts to punycode (UTS #46,
   nontransitional, so ``straße.de`` -> ``xn--strae-oqa.de``), percent-decodes the host,
   normalizes IPv4 (``0x7f.1`` -> ``127.0.0.1``) and IPv6 (compressed, in brackets), drops the
   default port of the URL's own scheme only (``http:80``, ``https:443``; ``https://h:80/`` keeps
   ``:80``), removes dot segments (also ``%2e``/``%2E`` ones), makes an empty path ``/`` and
   percent-encodes spaces, controls and non-ASCII as UTF-8.
2. Only ``http`` and ``https`` are accepted; anything else raises
   :class:`~batchcrawl.errors.InvalidURL`.
3. The fragment is dropped (never sent to a server; RFC 9110 §4.2.4).
4. The userinfo (``user:pass@``) is dropped: credentials must not be stored in the frontier or in
   WARC files, and the same page is otherwise crawled twice (Nutch ``BasicURLNormalizer`` and
   Heritrix ``StripUserinfoRule`` do the same for http(s)).
5. Trailing dots of a domain host are removed (``example.org.`` -> ``example.org``): the same DNS
   name, so the same politeness queue and the same shard (Nutch ``NORM_HOST_TRIM_TRAILING_DOT``).
6. An empty query (``/a?``) is dropped (Heritrix ``FixupQueryString``, w3lib); RFC 3986 §6.2.3
   allows either, and servers treat both alike.
7. Percent-encoding in path and query is normalized (RFC 3986 §6.2.2.1-2): escapes of unreserved
   characters (``A-Z a-z 0-9 - . _ ~``) are decoded, other escapes are upper-cased (``%c3`` ->
   ``%C3``), reserved characters and ``%25`` stay encoded, a ``%`` that does not start a valid escape
   becomes ``%25``, and characters RFC 3986 does not allow in a path or query that WHATWG leaves
   raw (``[ ] | ^ ` { } \\``) are encoded, so the result is a valid RFC 3986 URI and ``|``/``%7C``
   agree.

How this differs from Nutch's, w3lib's and Heritrix's normalizers, and why, is in
``docs/benchmarks.md``, "Comparisons with other crawlers" (the tests run the cases that agree).

Keys
----
:func:`url_key` is the unsigned 64-bit MurmurHash3 (x64 128-bit variant, first 64 bits, seed 0) of
the canonical URL's UTF-8 bytes. It is the stable, cross-process, cross-platform key of a URL: it
is stored in Parquet (``frontier.url_key``) and must never change (never use Python's ``hash()``).
:func:`bucket_of` maps a key to its DRUM bucket (IRLbot §5).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import ada_url
import mmh3
import numpy as np
from publicsuffixlist import PublicSuffixList

from batchcrawl.errors import ConfigError, InvalidURL

__all__ = [
    "bucket_ids",
    "bucket_of",
    "hash64",
    "hash64_many",
    "canonicalize",
    "domain_of",
    "host_of",
    "parse_url_parts",
    "redirect_target",
    "surt",
    "url_key",
    "url_keys",
]

# An already-canonical URL in the common shape (lower-case ASCII host, no userinfo, no fragment, no
# trailing host dot, no empty query, only RFC 3986 pchar/query characters and upper-case escapes).
_FAST_SHAPE = re.compile(
    r"https?://[a-z0-9](?:[a-z0-9.\-]*[a-z0-9\-])?(?::[0-9]{1,5})?"
    r"/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*(?:\?[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]+)?"
)
# A ``%`` that is not an upper-case escape, or an escape of an unreserved character.
_BAD_ESCAPE = re.compile(r"%(?![0-9A-F]{2})|%(?:[46][1-9A-F]|[57][0-9A]|3[0-9]|2[DE]|5F|7E)")
# What the percent-encoding normalizer must look at in a path or query.
_PCT_TOKEN = re.compile(r"%([0-9A-Fa-f]{2})|[^A-Za-z0-9\-._~!$&'()*+,;=:@/?]")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_IPV4 = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}")
# An absolute URL written without its scheme: a dotted host name, ``localhost`` or an IPv6 literal,
# then an optional port and path (``h0003.test:38427/x``, ``example.com/a``). WHATWG reads the
# first as scheme ``h0003.test`` and refuses the second; both are better told to add ``http://``.
_NO_SCHEME = re.compile(
    r"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\.?|localhost|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?"
    r"(?:[/?#].*)?",
    re.DOTALL,
)


def _pct_repl(m: re.Match[str]) -> str:
    hx = m.group(1)
    if hx is not None:
        code = int(hx, 16)
        return chr(code) if code in _UNRESERVED else "%" + hx.upper()
    ch = m.group(0)
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8"))


def _normalize_pct(part: str) -> str:
    """Percent-encoding normalization of a WHATWG-serialized path or query (RFC 3986 §6.2.2)."""
    return _PCT_TOKEN.sub(_pct_repl, part)


def canonicalize(url: str, base: str | None = None) -> str:
    """Return the canonical form of an http(s) URL (see the module docstring for the policy).

    Parameters
    ----------
    url : str
        An absolute URL, or a relative reference when ``base`` is given (e.g. an ``href`` value).
    base : str or None
        The URL ``url`` is resolved against (the page URL, or its ``<base href>``); WHATWG URL
        Standard "basic URL parser" with a base. Need not be canonical.

    Returns
    -------
    str
        The canonical URL (ASCII only, ``http`` or ``https``, no fragment, no userinfo).
        ``canonicalize(canonicalize(u)) == canonicalize(u)``.

    Raises
    ------
    InvalidURL
        The URL does not parse (WHATWG), does not resolve against ``base``, has a scheme other than
        http/https, or has no host.

    Notes
    -----
    An input that is already canonical (the common case for stored URLs) takes a quick path of one
    regex match and one ada-url parse (about 2-3 µs).
    """
    if base is None:
        if _canonical_shape(url):
            try:
                if ada_url.normalize_url(url) == url:
                    return url
            except ValueError:
                pass  # not valid after all: the full path below raises InvalidURL with the reason
        try:
            href = ada_url.normalize_url(url)
        except ValueError:
            _refuse_without_scheme(url)
            raise InvalidURL(
                f"cannot parse URL {url!r} (WHATWG URL Standard); write it as an absolute "
                "http(s) URL with scheme and host, e.g. https://example.com/path"
            ) from None
        if not href.startswith(("http://", "https://")):
            _refuse_without_scheme(url)
    else:
        try:
            href = ada_url.join_url(base, url)
        except ValueError:
            raise InvalidURL(
                f"cannot resolve URL {url!r} against base {base!r} (WHATWG URL Standard); "
                "the base must be an absolute URL and the reference must be valid"
            ) from None
    return _canonical_from_href(href, url)


def canonicalize_serialized(href: str) -> str:
    """:func:`canonicalize` of an absolute URL that the WHATWG URL parser serialized, without
    parsing it again: ``ada_url.join_url`` or ``normalize_url`` output (a link extractor's
    resolved hrefs), or a canonical URL.

    The WHATWG serialization of an http(s) URL parses back to itself, so the parse that
    :func:`canonicalize` starts with would return ``href`` unchanged; only the policy's string
    steps are left (fragment, userinfo, trailing dots, percent-encoding). That costs about
    0.6 us against 2.5 us per link (docs/benchmarks.md, "Issue 33, 2026-12-06"). For any other
    string (``http://h:80/a/../b``, a URL as written) the result is not canonical: use
    :func:`canonicalize`.

    Raises
    ------
    InvalidURL
        ``href`` is not http(s) or has no host.
    """
    return href if _canonical_shape(href) else _canonical_from_href(href, href)


def _canonical_shape(url: str) -> bool:
    """Whether ``url`` has the shape of a canonical URL (lower-case host, no fragment or userinfo,
    only canonical escapes): canonical as it is if it is also a WHATWG serialization."""
    return bool(_FAST_SHAPE.fullmatch(url)) and ("%" not in url or _BAD_ESCAPE.search(url) is None)


def _refuse_without_scheme(url: str) -> None:
    """Raise :class:`InvalidURL` suggesting ``http://`` + ``url`` when ``url`` (given without a
    base) is a host, maybe a port and a path with the scheme left out, and adding ``http://``
    makes it a URL that can be crawled; return otherwise."""
    text = url.strip()
    if "://" in text or _NO_SCHEME.fullmatch(text) is None:
        return
    fixed = "http://" + text
    try:
        canonicalize(fixed)
    except InvalidURL:
        return
    raise InvalidURL(
        f"URL {url!r} is not an absolute http(s) URL: it has no scheme; write it as {fixed}"
    )


def _canonical_from_href(href: str, original: str) -> str:
    """Apply steps 2-7 of the policy to a WHATWG-serialized ``href``."""
    scheme, sep, rest = href.partition("://")
    if scheme not in ("http", "https") or not sep:
        raise InvalidURL(
            f"URL {original!r} has scheme {href.split(':', 1)[0]!r}; only http and https URLs "
            "can be crawled"
        )
    slash = rest.find("/")  # WHATWG always serializes a path for http(s)
    authority, tail = rest[:slash], rest[slash:]
    at = authority.rfind("@")  # WHATWG encodes '@' inside userinfo, so the last one ends it
    if at >= 0:
        authority = authority[at + 1 :]
    hash_at = tail.find("#")
    if hash_at >= 0:
        tail = tail[:hash_at]
    if authority.startswith("["):
        close = authority.index("]") + 1
        host, port = authority[:close], authority[close + 1 :]
    else:
        host, _, port = authority.partition(":")
        if host.endswith("."):
            stripped = host.rstrip(".")
            if not stripped:
                raise InvalidURL(f"URL {original!r} has no host name (only dots)")
            # A shorter name may now read as an IPv4 address (``0x7f.1..``): parse it again.
            return canonicalize(f"{scheme}://{stripped}{':' + port if port else ''}{tail}")
    if not host:
        raise InvalidURL(f"URL {original!r} has no host")
    path, _, query = tail.partition("?")
    if _PCT_TOKEN.search(path):
        path = _normalize_pct(path)
    if query and _PCT_TOKEN.search(query):
        query = _normalize_pct(query)
    port_part = ":" + port if port else ""
    query_part = "?" + query if query else ""
    return f"{scheme}://{host}{port_part}{path}{query_part}"


def hash64(text: str) -> int:
    """The project's one 64-bit hash: ``mmh3.hash64(text.encode("utf-8"), seed=0,
    signed=False)[0]``, the first 64 bits of MurmurHash3 x64-128 with seed 0, unsigned, in
    ``[0, 2**64)``. Identical in every process, Python version and machine (never Python's
    ``hash()``); stored on disk as ``url_key`` and used for ring positions, so it must never change.
    """
    return mmh3.hash64(text.encode("utf-8"), seed=0, signed=False)[0]


# Octets of a header value that cannot stand in a URL as they are: controls, space, DEL, non-ASCII.
_NOT_URL_OCTET = re.compile(rb"[^\x21-\x7e]")


def redirect_target(location: str, base: str) -> str:
    """Canonical URL a ``Location`` header value points to, resolved against ``base``.

    The value is taken as the octets the server sent: http.client hands header values over decoded
    as Latin-1, so ``location.encode("latin-1")`` gives the wire bytes back. Every octet that cannot
    stand in a URL as it is (controls, space, DEL, non-ASCII) is percent-encoded *as received*,
    then the reference is resolved and canonicalized (:func:`canonicalize`). Raw UTF-8 therefore
    becomes its own escapes (``/fa/اع`` sent as UTF-8 -> ``/fa/%D8%A7%D8%B9``), never Latin-1
    mojibake re-encoded (``%C3%98%C2%A7...``), and a raw space becomes ``%20``. Browsers do the
    same (WHATWG URL Standard: the percent-encode sets apply to the bytes of the input). Leading and
    trailing whitespace is dropped (RFC 9110 §5.5: it is not part of a field value).

    Parameters
    ----------
    location : str
        The header value as the HTTP client returns it (``FetchResult.header("Location")``).
    base : str
        Absolute URL of the response that carried it.

    Raises
    ------
    InvalidURL
        The target does not parse, is not http(s) or has no host.
    """
    try:
        raw = location.encode("latin-1")
    except UnicodeEncodeError:  # text that never came off the wire: take its UTF-8 octets
        raw = location.encode("utf-8")
    raw = raw.strip(b" \t\r\n\x0b\x0c")
    ref = _NOT_URL_OCTET.sub(lambda m: b"%%%02X" % m.group()[0], raw).decode("ascii")
    if not ref:
        raise InvalidURL(f"empty Location {location!r} (redirect from {base})")
    return canonicalize(ref, base)


def hash64_many(texts: Iterable[str]) -> np.ndarray:
    """:func:`hash64` of many strings; ``numpy.ndarray`` of ``uint64``, shape ``(n,)``."""
    h = mmh3.hash64
    return np.fromiter((h(t.encode("utf-8"), seed=0, signed=False)[0] for t in texts), np.uint64)


def url_key(canonical: str) -> int:
    """Stable 64-bit key of a canonical URL (frontier column ``url_key``): :func:`hash64`.

    Parameters
    ----------
    canonical : str
        A canonical URL (output of :func:`canonicalize`); the key of a non-canonical spelling is a
        different key.
    """
    return hash64(canonical)


def url_keys(canonicals: Iterable[str]) -> np.ndarray:
    """:func:`url_key` of many canonical URLs at once.

    Parameters
    ----------
    canonicals : iterable of str, length n
        Canonical URLs.

    Returns
    -------
    numpy.ndarray of uint64, shape (n,)
    """
    return hash64_many(canonicals)


def bucket_of(key: int, buckets: int) -> int:
    """DRUM bucket of a URL key: ``key % buckets`` (IRLbot §5, "DRUM"; docs/design.md §4).

    Parameters
    ----------
    key : int
        A :func:`url_key` (unsigned 64-bit).
    buckets : int
        Number of frontier buckets K (``frontier.buckets``), at least 1, fixed at crawl init.

    Raises
    ------
    ConfigError
        ``buckets`` is less than 1.
    """
    return key % _checked(buckets)


def _checked(buckets: int) -> int:
    if buckets < 1:
        raise ConfigError(f"frontier.buckets must be at least 1, got {buckets!r}")
    return buckets


def bucket_ids(keys: np.ndarray, buckets: int) -> np.ndarray:
    """:func:`bucket_of` vectorized: ``uint64`` keys, shape ``(n,)`` -> ``int64`` bucket ids.

    Raises
    ------
    ConfigError
        ``buckets`` is less than 1.
    """
    return (np.asarray(keys, dtype=np.uint64) % np.uint64(_checked(buckets))).astype(np.int64)


def host_of(canonical: str) -> str:
    """Host of a canonical URL, without port: lower-case, punycode; IPv6 in brackets; never a
    trailing dot (``www.example.com.`` and ``www.example.com`` are one host).

    Parameters
    ----------
    canonical : str
        A canonical URL (no userinfo, as :func:`canonicalize` makes it). Not re-validated.

    Raises
    ------
    InvalidURL
        ``canonical`` has no ``scheme://`` prefix.
    """
    start = canonical.find("://")
    if start < 0:
        raise InvalidURL(f"{canonical!r} is not a canonical URL; pass it through canonicalize()")
    start += 3
    end = canonical.find("/", start)
    authority = canonical[start:] if end < 0 else canonical[start:end]
    if authority.startswith("["):
        return authority[: authority.find("]") + 1]
    colon = authority.find(":")
    host = authority if colon < 0 else authority[:colon]
    return host.rstrip(".") if host.endswith(".") else host


@functools.cache
def _psl() -> PublicSuffixList:
    return PublicSuffixList()  # bundled list; ICANN and private sections


@functools.lru_cache(maxsize=1 << 17)
def domain_of(host: str) -> str:
    """Pay-level domain of a host: the registrable domain by the Public Suffix List.

    ``PublicSuffixList().privatesuffix(host)`` (IRLbot's "pay-level domain", used for per-domain
    budgets and optionally for sharding). The list's private section is included, so each
    ``*.github.io`` or ``*.blogspot.com`` site is its own domain (different owners). Decisions where
    the list has no answer:

    * unknown top-level label (``h1.test``, ``x.internal``): the PSL default rule ``*`` makes the
      last label a public suffix, so ``a.h1.test`` -> ``h1.test``;
    * an IP address (``127.0.0.1``, ``[::1]``): the address itself;
    * a host that is itself a public suffix (``co.uk``, ``github.io``) or a single label
      (``localhost``): the host itself.

    Parameters
    ----------
    host : str
        A host as :func:`host_of` returns it (lower-case, punycode). Memoized per host.

    Raises
    ------
    InvalidURL
        ``host`` is empty.
    """
    if not host:
        raise InvalidURL("empty host has no domain; pass host_of(canonical_url)")
    if host.startswith("[") or _IPV4.fullmatch(host):
        return host
    return _psl().privatesuffix(host) or host


def parse_url_parts(canonical: str) -> tuple[str, str]:
    """``(host_of(canonical), domain_of(host))`` of a canonical URL."""
    host = host_of(canonical)
    return host, domain_of(host)


def surt(canonical: str) -> str:
    """SURT key of a URL, as Common Crawl's ``url_surtkey`` (``com,example)/path?q``).

    The one SURT function of the crawl: the index (``export/ccindex``) and CDXJ (``export/cdxj``)
    keys both come from here. Uses the ``surt`` package (Internet Archive canonicalization:
    lower-cases the whole URL, sorts the query, decodes some escapes) with its ``www`` stripping
    replaced by a stricter one: a leading ``www``/``www<digits>`` label is dropped only when what is
    left is still a registrable host with a dot (not a public suffix by the Public Suffix List).
    So ``www.example.com`` -> ``com,example)/``, but ``www.com`` -> ``com,www)/`` and
    ``www3288.com`` -> ``com,www3288)/`` (the package maps both to ``com)/``). A sort/lookup key
    for CDX indexes, not an identity: two canonical URLs may share a SURT.

    Parameters
    ----------
    canonical : str
        A canonical URL.

    Raises
    ------
    ValueError
        The ``surt`` package cannot take the URL apart.
    """
    # imported here: the package imports tldextract and requests, 85 ms and 7 MB of every
    # process (each CLI command's start, the driver), though only CDXJ and index writers use it
    import surt as _surt

    key: str = _surt.surt(canonical, host_massage=False)
    host, sep, rest = key.partition(")")
    if not sep:
        return key
    name, colon, port = host.partition(":")
    labels = name.split(",")
    if len(labels) >= 3 and _WWW_LABEL.fullmatch(labels[-1]):
        left = ".".join(reversed(labels[:-1]))
        if _psl().privatesuffix(left) is not None:
            name = ",".join(labels[:-1])
    return f"{name}{colon}{port}{sep}{rest}"


_WWW_LABEL = re.compile(r"www[0-9]*")
