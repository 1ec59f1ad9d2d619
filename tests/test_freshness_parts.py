"""The freshness building blocks as pure functions: the fetch schedule (Nutch's Default and Adaptive
FetchSchedule), sitemap parsing (sitemaps.org) and response directives (X-Robots-Tag, Retry-After)."""

from __future__ import annotations

import gzip
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from batchcrawl.errors import ConfigError
from batchcrawl.fetch.directives import retry_after_s, x_robots_tag
from batchcrawl.fetch.sitemaps import MAX_URLS, parse_lastmod, parse_sitemap
from batchcrawl.frontier.schedule import FetchSchedule

DAY = 86400.0


# -- fetch schedule ---------------------------------------------------------------------------------
def test_fixed_schedule_uses_the_interval_whatever_changed() -> None:
    s = FetchSchedule(policy="fixed", interval_s=7 * DAY)
    for change in ("first", "changed", "unchanged"):
        assert s.after_fetch(1000.0, 3 * DAY, change) == (1000.0 + 7 * DAY, 7 * DAY)


def test_adaptive_schedule_shrinks_on_change_and_grows_when_unchanged() -> None:
    s = FetchSchedule(
        policy="adaptive", interval_s=10 * DAY, min_interval_s=DAY, max_interval_s=100 * DAY
    )
    assert s.after_fetch(0.0, None, "first") == (10 * DAY, 10 * DAY)
    assert s.after_fetch(0.0, 10 * DAY, "changed")[1] == pytest.approx(6 * DAY)
    assert s.after_fetch(0.0, 10 * DAY, "unchanged")[1] == pytest.approx(12 * DAY)


@given(
    prev=st.floats(min_value=1.0, max_value=1e9),
    changes=st.lists(st.sampled_from(["changed", "unchanged"]), max_size=60),
)
def test_adaptive_interval_stays_in_bounds(prev: float, changes: list[str]) -> None:
    s = FetchSchedule(policy="adaptive", min_interval_s=3600.0, max_interval_s=30 * DAY)
    interval = prev
    t = 0.0
    for change in changes:
        nxt, interval = s.after_fetch(t, interval, change)
        assert 3600.0 <= interval <= 30 * DAY
        assert nxt == pytest.approx(t + interval)
        t = nxt


def test_failure_backoff_doubles_and_is_capped() -> None:
    s = FetchSchedule(retry_backoff_s=60.0, min_interval_s=10.0, max_interval_s=1000.0)
    assert [s.after_failure(0.0, r) for r in (1, 2, 3, 4, 5, 99)] == [60, 120, 240, 480, 960, 1000]
    assert s.after_gone(5.0) == 5.0 + s.gone_interval_s


@pytest.mark.parametrize(
    "kwargs",
    [
        {"policy": "weekly"},
        {"interval_s": 0},
        {"min_interval_s": 10, "max_interval_s": 5},
        {"inc_rate": 1.0},
        {"dec_rate": -0.1},
    ],  # fmt: skip
)
def test_bad_schedule_settings_are_refused(kwargs) -> None:
    with pytest.raises(ConfigError):
        FetchSchedule(**kwargs)


# -- sitemaps ---------------------------------------------------------------------------------------
URLSET = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"
        xmlns:video="http://www.google.com/schemas/sitemap-video/1.1">
  <url><loc>http://h1.test/a</loc><lastmod>2024-05-17</lastmod><changefreq>Daily</changefreq>
       <priority>0.8</priority>
       <image:image><image:loc>http://h1.test/pic.jpg</image:loc></image:image>
       <video:video><video:content_loc>http://h1.test/v.mp4</video:content_loc></video:video></url>
  <url><loc> /b </loc><lastmod>not a date</lastmod><priority>7</priority></url>
  <url><lastmod>2024</lastmod></url>
</urlset>"""


def test_urlset_takes_pages_not_extension_locs() -> None:
    sm = parse_sitemap(URLSET, "http://h1.test/sitemap.xml")
    assert sm.kind == "urlset" and sm.error is None and not sm.truncated
    assert [u.loc for u in sm.urls] == ["http://h1.test/a", "http://h1.test/b"]
    a, b = sm.urls
    assert a.lastmod == parse_lastmod("2024-05-17T00:00:00Z")
    assert (a.changefreq, a.priority) == ("daily", 0.8)
    assert (b.lastmod, b.priority) == (None, None)


def test_gzip_bom_prefixes_and_unclosed_tags_are_read() -> None:
    messy = (
        b"\xef\xbb\xbf \n<?xml version='1.0'?><sm:urlset xmlns:sm='http://www.sitemaps.org/schemas/sitemap/0.9'>"
        b"<sm:url><sm:loc>http://h1.test/x</sm:loc></sm:url><sm:url><sm:loc>http://h1.test/y</sm:loc>"
    )
    for body in (messy, gzip.compress(messy)):
        sm = parse_sitemap(body, "http://h1.test/s.xml.gz")
        assert [u.loc for u in sm.urls] == ["http://h1.test/x", "http://h1.test/y"]


def test_index_text_rss_atom() -> None:
    index = parse_sitemap(
        b"<sitemapindex><sitemap><loc>s1.xml</loc><lastmod>2024-01-02T03:04:05+01:00</lastmod>"
        b"</sitemap><sitemap><loc>http://h1.test/s2.xml.gz</loc></sitemap></sitemapindex>",
        "http://h1.test/sitemaps/index.xml",
    )
    assert index.kind == "index" and index.urls == []
    assert [s.loc for s in index.sitemaps] == [
        "http://h1.test/sitemaps/s1.xml",
        "http://h1.test/s2.xml.gz",
    ]
    assert index.sitemaps[0].lastmod == 1704161045.0
    text = parse_sitemap(
        b"http://h1.test/1\n\njunk line\nhttps://h1.test/2\r\n", "http://h1.test/s.txt"
    )
    assert text.kind == "text" and [u.loc for u in text.urls] == [
        "http://h1.test/1",
        "https://h1.test/2",
    ]
    rss = parse_sitemap(
        b"<rss><channel><item><link>http://h1.test/r</link></item></channel></rss>",
        "http://h1.test/f",
    )
    assert [u.loc for u in rss.urls] == ["http://h1.test/r"]
    atom = parse_sitemap(
        b'<feed xmlns="http://www.w3.org/2005/Atom"><entry><link href="/p"/><updated>2024-01-01T00:00:00Z'
        b"</updated></entry></feed>",
        "http://h1.test/atom",
    )
    assert [(u.loc, u.lastmod) for u in atom.urls] == [("http://h1.test/p", 1704067200.0)]


def test_limits_and_garbage() -> None:
    many = (
        b"<urlset>"
        + b"".join(b"<url><loc>http://h1.test/%d</loc></url>" % i for i in range(MAX_URLS + 5))
        + b"</urlset>"
    )
    sm = parse_sitemap(many, "http://h1.test/s.xml")
    assert len(sm.urls) == MAX_URLS and sm.truncated
    bomb = gzip.compress(b"<urlset>" + b" " * 5_000_000 + b"</urlset>")
    cut = parse_sitemap(bomb, "http://h1.test/s.xml", max_bytes=100_000)
    assert cut.truncated and cut.urls == []
    for junk in (b"", b"<html><body>hi</body></html>", b"\x1f\x8bnot gzip", b"<"):
        out = parse_sitemap(junk, "http://h1.test/s.xml")
        assert out.urls == [] and (out.error is not None or out.kind == "unknown")


def test_entities_are_not_expanded() -> None:
    xxe = (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
           b"<urlset><url><loc>http://h1.test/&x;</loc></url></urlset>")  # fmt: skip
    sm = parse_sitemap(xxe, "http://h1.test/s.xml")
    assert all("root:" not in u.loc for u in sm.urls)


@given(st.binary(max_size=300))
def test_parse_sitemap_never_raises(body: bytes) -> None:
    parse_sitemap(body, "http://h1.test/s.xml")


# -- directives -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "noindex", "nofollow"),
    [
        (["noindex"], True, False),
        (["NoFollow"], False, True),
        (["none"], True, True),
        (["noarchive, nofollow"], False, True),
        (["otherbot: noindex, nofollow"], False, False),
        (["batchcrawl: noindex"], True, False),
        (["otherbot: none", "nofollow"], False, True),
        (["max-snippet: 20, noindex"], True, False),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST"], False, False),
        ([""], False, False),
    ],
)
def test_x_robots_tag(values, noindex, nofollow) -> None:
    d = x_robots_tag(values, "BatchCrawl")
    assert (d.noindex, d.nofollow) == (noindex, nofollow)


def test_retry_after_both_forms_and_bad_values() -> None:
    now = 1_700_000_000.0
    assert retry_after_s("120", now) == 120.0
    assert retry_after_s("Wed, 15 Nov 2023 22:14:20 GMT", now) == pytest.approx(1_700_086_460 - now)
    assert retry_after_s("Wed, 15 Nov 2000 22:14:20 GMT", now) == 0.0
    for bad in (None, "", "-5", "soon", "1.5e3", "Wed, 99 Foo"):
        assert retry_after_s(bad, now) is None
    assert not math.isnan(retry_after_s("0", now))
