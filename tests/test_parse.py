"""Tests of batchcrawl.fetch.parse: link extraction policy, encoding detection, robustness.

Shared suites (``../shared/testdata/link-extraction``) are compared per rule, as its README asks:
the cases whose policy differs from ours are listed below with the reason, and for them we assert
*our* documented behaviour instead.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import ada_url
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.fetch.parse import (
    detect_encoding,
    encoding_for_label,
    parse_page,
    prescan,
    refresh_url,
)

TESTDATA = Path(__file__).resolve().parents[1].parent / "shared" / "testdata" / "link-extraction"
needs_testdata = pytest.mark.skipif(
    not TESTDATA.is_dir(), reason=f"shared test data not found at {TESTDATA}"
)


def _load(rel: str):
    path = TESTDATA / rel
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


# --- Scrapy LinkExtractor suite -------------------------------------------------------------------

#: Extractor options that are Scrapy features, not link-extraction policy (allow/deny, restrict_*,
#: tags/attrs, process_value): such cases are not applicable to parse_page.
_DEFAULT_KWARGS = ({}, {"unique": True})
#: Default-option cases where our policy differs (module docstring of batchcrawl.fetch.parse), with the
#: links *we* return.
SCRAPY_DIFFERENCES = {
    "scrapy-test_ftp_links-1": ("ftp: is not crawlable: dropped as 'scheme'", []),
    "scrapy-test_ignored_extensions-1": (
        "extension filtering belongs to the scope filters, not the parser",
        [
            ("http://example.org/page.html", "asd", False),
            ("http://example.org/photo.jpg", "", False),
        ],
    ),
    "scrapy-test_deduplicates_by_canonical_url-1": (
        "links are de-duplicated by resolved URL; canonical de-duplication happens after "
        "batchcrawl.urls.canonicalize",
        [
            ("http://example.com/page.html?b=2&a=1", "1", False),
            ("http://example.com/page.html?a=1&b=2", "2", False),
        ],
    ),
}


def _scrapy_cases():
    data = _load("scrapy/scrapy_link_extractor.json")
    return data["cases"] if data else []


def _scrapy_applicable(case) -> bool:
    return case["extractor_kwargs"] in _DEFAULT_KWARGS and not case.get("needs_callable")


def _scrapy_run(case):
    if case.get("html_file"):
        body = (TESTDATA / "scrapy" / case["html_file"]).read_bytes()
    elif case.get("html_hex"):
        body = bytes.fromhex(case["html_hex"])
    else:
        body = case["html"].encode(case["encoding"] or "utf-8")
    ctype = "text/html" + (f"; charset={case['encoding']}" if case["encoding"] else "")
    page = parse_page(body, case["base_url"], ctype)
    return [(link.url, link.text or "", link.nofollow) for link in page.links]


_SCRAPY = [c for c in _scrapy_cases() if _scrapy_applicable(c)]


@needs_testdata
@pytest.mark.parametrize("case", _SCRAPY, ids=[c["id"] for c in _SCRAPY])
def test_scrapy_default_cases(case):
    got = _scrapy_run(case)
    if case["id"] in SCRAPY_DIFFERENCES:
        _, ours = SCRAPY_DIFFERENCES[case["id"]]
        assert got == ours
    else:
        expected = [(x["url"], x["text"], x["nofollow"]) for x in case["expected_links"]]
        assert got == expected


# --- Nutch parse-html suite -----------------------------------------------------------------------

#: Links Nutch emits by rules we do not have (img/source src, GET form actions).
NUTCH_ONLY_LINKS = {
    "nutch-domcontentutils-5": {"http://www.nutch.org/maps/logo.gif": "img src"},
    "nutch-domcontentutils-9": {"http://www.nutch.org/dummy.jsp": "GET form action"},
    "nutch-domcontentutils-13": {"http://www.nutch.org/test.gif": "img src"},
    "nutch-domcontentutils-14": {"http://www.nutch.org/movie.mp4": "video source src"},
}
#: (page, url) -> anchor text Nutch takes from <img alt>, which we do not.
NUTCH_ALT_TEXT = {("nutch-domcontentutils-13", "http://www.nutch.org/g2")}


def _nutch_cases():
    a = _load("nutch/nutch_domcontentutils_outlinks.json") or []
    b = _load("nutch/nutch_htmlparser_base_href.json") or []
    return a + b


_NUTCH = _nutch_cases()


def _whatwg(url: str) -> str:
    """Nutch serializes ``http://host`` without the empty path's ``/``; WHATWG adds it."""
    return ada_url.parse_url(url)["href"]


def _nutch_expected(case):
    only = NUTCH_ONLY_LINKS.get(case["id"], {})
    out = []
    for link in case["expected_links"]:
        if link["url"] in only:
            continue
        text = "" if (case["id"], link["url"]) in NUTCH_ALT_TEXT else link["text"]
        out.append((_whatwg(link["url"]), text))
    return out


@needs_testdata
@pytest.mark.parametrize("case", _NUTCH, ids=[c["id"] for c in _NUTCH])
def test_nutch_outlinks(case):
    page = parse_page(case["html"].encode("utf-8"), case["base_url"], "text/html")
    # Nutch drops rel=nofollow links; we keep them flagged: compare the followable ones.
    got = [(link.url, link.text or "") for link in page.links if not link.nofollow]
    assert got == _nutch_expected(case)
    if "expected_title" in case:
        assert (page.title or "") == case["expected_title"]


_CHARSET = _load("nutch/nutch_htmlparser_charset.json") or []


@needs_testdata
@pytest.mark.parametrize("index", range(len(_CHARSET)), ids=[c["name"] for c in _CHARSET])
def test_nutch_charset_bytes(index):
    case = _CHARSET[index]
    body = (TESTDATA / "nutch" / "charset_bytes" / f"charset_{index}.html").read_bytes()
    page = parse_page(body, case["fetch_url"], case["content_type_header"])
    assert page.title == case["expected_title"]
    assert page.charset.replace("-be", "").replace("-le", "") == case["charset"]
    assert page.charset_source in ("bom", "meta")


@needs_testdata
def test_shared_suite_counts():
    """Print how much of each suite applies and agrees (run with -s to see it)."""
    scrapy = _scrapy_cases()
    applicable = [c for c in scrapy if _scrapy_applicable(c)]
    agree = [c for c in applicable if c["id"] not in SCRAPY_DIFFERENCES]
    for case in agree:
        expected = [(x["url"], x["text"], x["nofollow"]) for x in case["expected_links"]]
        assert _scrapy_run(case) == expected, case["id"]
    verbatim = [c for c in _NUTCH if c["id"] not in NUTCH_ONLY_LINKS]
    print(
        f"\nscrapy: {len(scrapy)} cases, {len(applicable)} use default extractor options, "
        f"{len(agree)} agree verbatim, {len(SCRAPY_DIFFERENCES)} documented differences"
        f"\nnutch outlinks: {len(_NUTCH)} pages, {len(verbatim)} agree (nofollow compared as "
        f"flag), {len(NUTCH_ONLY_LINKS)} agree after removing Nutch-only rules"
        f"\nnutch charset: {len(_CHARSET)} pages"
    )
    assert len(agree) == 10 and len(verbatim) == 12


# --- our own cases --------------------------------------------------------------------------------

PAGE = "http://example.com/dir/page.html"


def _links(html: str | bytes, url: str = PAGE, ctype: str | None = "text/html"):
    body = html.encode("utf-8") if isinstance(html, str) else html
    return parse_page(body, url, ctype)


def test_tags_and_link_rel_policy():
    page = _links(
        """<html><head>
        <link rel="stylesheet" href="/s.css"><link rel="icon" href="/f.ico">
        <link rel="preload" href="/p.js"><link rel="canonical" href="/canon">
        <link rel="alternate" hreflang="de" href="/de/"><link rel="next" href="?p=2">
        <link rel="alternate" type="application/rss+xml" href="/feed.xml">
        <link rel="alternate stylesheet" href="/alt.css">
        <meta http-equiv="Refresh" content="5; URL='/moved'">
        </head><body><a href="a.html">A</a><map><area href="/area" alt="x"></map>
        <iframe src="//other.test/frame"></iframe><img src="/img.png">
        <form action="/search"></form></body></html>"""
    )
    assert [(x.tag, x.url) for x in page.links] == [
        ("link", "http://example.com/canon"),
        ("link", "http://example.com/de/"),
        ("link", "http://example.com/dir/page.html?p=2"),
        ("meta_refresh", "http://example.com/moved"),
        ("a", "http://example.com/dir/a.html"),
        ("area", "http://example.com/area"),
        ("iframe", "http://other.test/frame"),
    ]
    assert page.dropped == {"link_rel": 5}


def test_frameset():
    page = _links('<frameset><frame src="top.html"><frame src="/bottom"></frameset>')
    assert [(x.tag, x.url) for x in page.links] == [
        ("frame", "http://example.com/dir/top.html"),
        ("frame", "http://example.com/bottom"),
    ]


@pytest.mark.parametrize(
    ("base", "expected_base"),
    [
        ("http://other.test/x/", "http://other.test/x/"),
        ("../up/", "http://example.com/up/"),  # relative base resolves against the page URL
        ("//cdn.test/", "http://cdn.test/"),
        ("javascript:void(0)", PAGE),  # not http(s): ignored
        ("http://[bad/", PAGE),  # unparsable: ignored
    ],
)
def test_base_href(base, expected_base):
    page = _links(f'<head><base href="{base}"><base href="/second/"></head><a href="l">x</a>')
    assert page.base_url == expected_base
    assert page.links[0].url == ada_url.join_url(expected_base, "l")


def test_base_after_links_still_applies():
    page = _links('<a href="l">x</a><base href="http://b.test/">')
    assert page.links[0].url == "http://b.test/l"


def test_bad_hrefs_dropped_and_counted():
    page = _links(
        """<a href="javascript:go()">j</a><a href="mailto:a@b.test">m</a>
        <a href="data:text/html,hi">d</a><a href="tel:+1">t</a><a href="ftp://f.test/">f</a>
        <a href="http://[oops/">bad</a><a href="http://x.test:port/">bad port</a>
        <a href="">empty</a><a href="   ">blank</a><a>no href</a><a href="ok">ok</a>"""
    )
    assert [x.url for x in page.links] == ["http://example.com/dir/ok"]
    assert page.dropped == {"scheme": 5, "invalid": 2, "empty": 2}


def test_nofollow_rel_and_robots_meta():
    page = _links('<a href="/a" rel="external NoFollow">a</a><a href="/b">b</a>')
    assert [(x.url, x.nofollow) for x in page.links] == [
        ("http://example.com/a", True),
        ("http://example.com/b", False),
    ]
    assert not page.robots_nofollow and not page.robots_noindex
    page = _links('<meta name="ROBOTS" content="noindex,nofollow"><a href="/a">a</a>')
    assert page.robots_noindex and page.robots_nofollow
    assert all(x.nofollow for x in page.links)
    page = _links('<meta name="robots" content="none">')
    assert page.robots_noindex and page.robots_nofollow
    page = _links('<meta name="batchcrawl" content="noindex"><meta name="otherbot" content="none">')
    assert page.robots_noindex and not page.robots_nofollow
    page = _links('<meta name="mybot" content="nofollow">', ctype="text/html")
    assert not page.robots_nofollow
    page = parse_page(
        b'<meta name="mybot" content="nofollow">', PAGE, "text/html", robots_agent="MyBot"
    )
    assert page.robots_nofollow


def test_duplicates_keep_first_and_followable_wins():
    page = _links('<a href="/x" rel="nofollow">1</a><a href="/x">2</a><a href="/x#f">3</a>')
    assert [(x.url, x.text, x.nofollow) for x in page.links] == [
        ("http://example.com/x", "1", False),
        ("http://example.com/x#f", "3", False),
    ]


def test_title_and_anchor_text():
    page = _links("<title>  A \n title </title><a href='/x'>foo<b>bar</b> <i>baz</i></a>")
    assert page.title == "A title"
    assert page.links[0].text == "foobar baz"
    assert _links("<p>no title</p>").title is None


@pytest.mark.parametrize(
    ("content", "url"),
    [
        ("0; url=http://a.test/", "http://a.test/"),
        ("0;URL = 'http://a.test/q'", "http://a.test/q"),
        ('3, url="/x" ', "/x"),
        ("0; http://a.test/", "http://a.test/"),
        ("1.5;url=/y", "/y"),
        ("5", None),
        ("", None),
        ("soon; url=/z", None),
    ],
)
def test_refresh_url(content, url):
    assert refresh_url(content) == url


@pytest.mark.parametrize(
    "ctype", ["image/png", "application/pdf", "text/plain", "application/json", "text/xml"]
)
def test_non_html_not_parsed(ctype):
    page = _links('<a href="/x">x</a>', ctype=ctype)
    assert page.links == [] and not page.is_html and page.charset is None


def test_unknown_content_type_sniffed():
    assert _links('  <a href="/x">x</a>', ctype=None).links
    assert not _links("%PDF-1.7 <a href=/x>", ctype=None).is_html
    assert _links("application/xhtml+xml", ctype="Application/XHTML+XML; charset=utf-8").is_html


# --- encoding -------------------------------------------------------------------------------------

TEXT = "Привет, мир"


def test_bom_beats_http_beats_meta_beats_default():
    html = f'<meta charset="koi8-r"><title>{TEXT}</title>'
    assert detect_encoding(b"\xef\xbb\xbf" + html.encode(), "text/html; charset=cp1251")[:2] == (
        "utf-8",
        "bom",
    )
    page = parse_page(html.encode("cp1251"), PAGE, 'text/html; charset="windows-1251"')
    assert (page.charset, page.charset_source, page.title) == ("cp1251", "http", TEXT)
    page = parse_page(html.encode("koi8-r"), PAGE, "text/html")
    assert (page.charset, page.charset_source, page.title) == ("koi8-r", "meta", TEXT)
    page = parse_page(f"<title>{TEXT}</title>".encode(), PAGE, "text/html; charset=bogus")
    assert (page.charset, page.charset_source, page.title) == ("utf-8", "default", TEXT)
    utf16 = "\ufeff<title>x</title>".encode("utf-16-le")
    assert parse_page(utf16, PAGE, "text/html").title == "x"


def test_invalid_bytes_replaced():
    page = parse_page(b"<title>a\xff\xfeb</title><a href='/\xff'>x</a>", PAGE, "text/html")
    assert page.title == "a\ufffd\ufffdb"
    assert page.links[0].url == "http://example.com/%EF%BF%BD"


@pytest.mark.parametrize(
    ("head", "codec"),
    [
        (b'<meta charset="ISO-8859-1">', "cp1252"),  # WHATWG: latin1 means windows-1252
        (b"<meta http-equiv=content-type content='text/html;charset=Shift_JIS'>", "cp932"),
        (b'<meta content="text/html; charset=gbk" http-equiv="Content-Type">', "gb18030"),
        (b'<meta content="text/html; charset=koi8-r">', None),  # content without the pragma
        (b'<meta charset="utf-16le">', "utf-8"),  # a prescan can never find UTF-16
        (b'<meta charset="x-user-defined">', "cp1252"),
        (b"<!-- <meta charset=koi8-r> --><meta charset=cp1251>", "cp1251"),
        (b"<!-- <meta charset=koi8-r>", None),
        (b'<div title="<meta charset=koi8-r>"><meta charset="big5">', "big5hkscs"),
        (b"<meta charset=bogus><meta charset=euc-kr>", "cp949"),
        (b"<meta name=x charset=utf-8 charset=koi8-r>", "utf-8"),  # first attribute wins
        (b"<script>x</script></p x=1><?pi?><!doctype html><META CHARSET=koi8-u>", "koi8-u"),
        (b"<meta/charset='windows-1250'>", "cp1250"),
        (b"<meta", None),
    ],
)
def test_prescan(head, codec):
    assert prescan(head) == codec


def test_prescan_only_reads_first_1024_bytes():
    body = b"<html>" + b" " * 1100 + b'<meta charset="koi8-r">'
    assert detect_encoding(body, "text/html")[1] == "default"


def test_encoding_for_label():
    assert encoding_for_label(" UTF8 ") == "utf-8"
    assert encoding_for_label(b"latin1") == "cp1252"
    assert encoding_for_label("no-such-charset") is None
    # the Encoding Standard decodes GBK (labels gbk, gb2312, ...) with the gb18030 decoder,
    # whatever codec the installed w3lib resolves them to (2.6: Python's narrower gbk)
    for label in ("gbk", "GB2312", "x-gbk", "gb18030"):
        assert encoding_for_label(label) == "gb18030", label
    euro_in_gb18030 = "€".encode("gb18030")  # a byte pair gb18030 has and Python's gbk has not
    assert euro_in_gb18030.decode(encoding_for_label("gbk")) == "€"
    assert encoding_for_label("") is None


# --- robustness -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"   ",
        b"\x00\x00\x00",
        b"<",
        b"<<<>>>",
        b"<a href=",
        b"\xff\xfe\x00<\x00a",
        b"<?xml version='1.0' encoding='bogus'?><a href='/x'>x</a>",
        b"<meta charset=",
        b"<a href='" + b"x" * 100_000,
    ],
)
def test_malformed_never_raises(body):
    page = parse_page(body, PAGE, "text/html")
    assert isinstance(page.links, list)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from(
                [
                    b"<a href='",
                    b"'>",
                    b"<base href=",
                    b"<meta charset=",
                    b"<!--",
                    b"-->",
                    b"<frame src=",
                    b"<meta http-equiv=refresh content='0;url=",
                    b"<link rel=next href=",
                    b"</a>",
                    b"\xef\xbb\xbf",
                    b"<title>",
                    b"&amp;",
                    b'"',
                    b"javascript:",
                    b"//",
                ]
            ),
        ),
        max_size=30,
    )
)
def test_fuzz_links_are_http_and_unique(chunks):
    page = parse_page(b"".join(chunks), PAGE, None)
    urls = [x.url for x in page.links]
    assert len(urls) == len(set(urls))
    assert all(u.startswith(("http://", "https://")) for u in urls)
    assert all(ada_url.check_url(u) for u in urls)


# --- anchor_text=False ----------------------------------------------------------------------------

_ANCHOR_PAGE = """<html><head><title>T</title><base href="/base/">
<link rel="next" href="?p=2"><link rel="stylesheet" href="/s.css">
<meta http-equiv="refresh" content="0; url=/moved"></head><body>
<a href="/x" rel="nofollow">first <b>bold</b></a><a href="/x">second</a><a href="/x#f"> frag </a>
<a href="rel">  many   words <i>and <em>nested</em></i> tail</a><a href="/empty"></a>
<map><area href="/area" alt="alt text"></map><a href="javascript:go()">js</a>
<iframe src="//other.test/frame"></iframe><a href="/img"><img src="/i.png" alt="img alt"></a>
</body></html>"""


def _without_text(page):
    return [dataclasses.replace(link, text=None) for link in page.links]


def test_anchor_text_false_gives_the_same_links_without_text():
    """anchor_text=False: every Link.text is None, everything else (links in order, tags,
    nofollow, dropped counts, base, title, charset) as with anchor text."""
    body = _ANCHOR_PAGE.encode()
    full = parse_page(body, PAGE, "text/html")
    bare = parse_page(body, PAGE, "text/html", anchor_text=False)
    # control: with anchor text, the page has some to drop
    assert [x.text for x in full.links if x.tag in ("a", "area")] == [
        "first bold", "frag", "many words and nested tail", "", "", "",
    ]  # fmt: skip
    assert all(x.text is None for x in bare.links)
    assert bare.links == _without_text(full)
    assert [(x.tag, x.url, x.nofollow) for x in bare.links] == [
        ("link", "http://example.com/base/?p=2", False),
        ("meta_refresh", "http://example.com/moved", False),
        ("a", "http://example.com/x", False),
        ("a", "http://example.com/x#f", False),
        ("a", "http://example.com/base/rel", False),
        ("a", "http://example.com/empty", False),
        ("area", "http://example.com/area", False),
        ("iframe", "http://other.test/frame", False),
        ("a", "http://example.com/img", False),
    ]
    for name in ("charset", "charset_source", "robots_noindex", "robots_nofollow", "base_url",
                 "title", "is_html", "dropped"):  # fmt: skip
        assert getattr(bare, name) == getattr(full, name), name


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=12),
            st.sampled_from(
                [
                    "<a href='/a'>", "<a href=b rel=nofollow>", "<a href='/a#x'>", "</a>",
                    "<area href='/r'>", "<b>", "</b>", "<base href='/d/'>", "<link rel=next href=n>",
                    "<meta name=robots content=nofollow>", "<frame src=f>", "<title>", "</title>",
                    "<a href='javascript:x'>", "<!--", "-->", "<a>",
                ]
            ),
        ),
        max_size=25,
    )
)  # fmt: skip
def test_anchor_text_false_same_links_for_any_markup(chunks):
    body = "".join(chunks).encode("utf-8")
    full = parse_page(body, PAGE, "text/html")
    bare = parse_page(body, PAGE, "text/html", anchor_text=False)
    assert all(x.text is None for x in bare.links)
    assert bare.links == _without_text(full)
    assert (bare.dropped, bare.base_url, bare.robots_nofollow) == (
        full.dropped, full.base_url, full.robots_nofollow,
    )  # fmt: skip
