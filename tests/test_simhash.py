"""SimHash fingerprints, per-host near-duplicate flags, trap flags and the generate throttle
(issue 17 item 3)."""

from __future__ import annotations

import random

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.fetch import simhash as simhash_mod
from batchcrawl.fetch.neardup import NearDuplicates, repeated_segments
from batchcrawl.fetch.parse import parse_page, visible_text
from batchcrawl.fetch.simhash import (
    MAX_TEXT_BYTES,
    PRIME,
    VERSION,
    hamming,
    page_simhash,
    shingle_hash,
    simhash,
    text_head,
    text_simhash,
    words,
)
from batchcrawl.frontier.traps import throttle


def _letters(n: int) -> str:
    out = ""
    while True:
        n, r = divmod(n, 26)
        out += chr(97 + r)
        if n == 0:
            return out + "x"


#: Pages of 300-500 distinct words (no digits, so masking leaves them as they are).
_DOC = st.lists(st.integers(0, 10**7), min_size=300, max_size=500, unique=True).map(
    lambda ns: [_letters(n) for n in ns]
)


def _html(tokens: list[str]) -> str:
    return "<html><body><p>" + " ".join(tokens) + "</p></body></html>"


@settings(max_examples=60, deadline=None)
@given(_DOC, st.integers(0, 10**6), st.data())
def test_small_edits_move_few_bits(tokens, seed, data):
    """Changing one word of a 300+ word page changes 3 of its 300+ shingles: the fingerprint
    stays close (Charikar: P[bit differs] = angle / pi, about 0.045 here, 3 bits expected)."""
    i = data.draw(st.integers(0, len(tokens) - 1))
    edited = list(tokens)
    edited[i] = "edited" + _letters(seed)
    assert hamming(page_simhash(_html(tokens)), page_simhash(_html(edited))) <= 14


@settings(max_examples=60, deadline=None)
@given(_DOC, st.lists(st.integers(0, 10**9), min_size=1, max_size=20), st.data())
def test_digit_changes_give_the_same_fingerprint(tokens, numbers, data):
    """Pages that differ only in their numbers (dates, counters) have identical fingerprints."""
    spots = data.draw(st.lists(st.integers(0, len(tokens)), min_size=len(numbers),
                               max_size=len(numbers)))  # fmt: skip
    a, b = list(tokens), list(tokens)
    for pos, n in sorted(zip(spots, numbers, strict=True), reverse=True):
        a.insert(pos, f"{n}")
        b.insert(pos, f"{(n * 7 + 3) % 10**6}-{n % 13}")
        b[pos] = b[pos].replace("-", "")  # one digit run each, as in a
    assert page_simhash(_html(a)) == page_simhash(_html(b))


@settings(max_examples=30, deadline=None)
@given(_DOC, _DOC)
def test_unrelated_pages_are_far(a, b):
    """Two pages sharing few shingles are far apart (about 32 bits expected)."""
    shared = len(set(zip(a, a[1:], a[2:], strict=False)) & set(zip(b, b[1:], b[2:], strict=False)))
    if shared < 10:
        assert hamming(simhash(words(" ".join(a))), simhash(words(" ".join(b)))) > 10


def test_visible_text_only():
    page = "<html><head><style>p{}</style><script>var x=1</script></head><body>Hi there</body>"
    assert words("<b>x</b>") == ["b", "x", "b"]  # words() takes text, not markup
    assert page_simhash(page) == simhash(["hi", "there"])


def test_the_fetch_parse_gives_the_text_the_fingerprint_reads():
    """parse_page's visible text (the worker's one parse) is visible_text's: scripts, styles,
    noscript, templates and comments left out with their tails kept, references decoded, in any
    charset the page declares; the fingerprint of either is the same."""
    markup = (
        "<html><head><title>T&eacute;st</title><style>p{}</style></head><body>"
        "<!-- hidden --><p>caf\u00e9 <a href=/x>link</a><script>var s='</p>'</script>tail"
        "<noscript><b>no</b>script</noscript> after<template><i>t</i></template> end 42</p>"
        "<a href=/y>second</a></body></html>"
    )
    expected = "Téstcafé linktail after end 42second"
    assert visible_text(markup) == expected
    for charset in ("utf-8", "iso-8859-1", "utf-16"):
        body = markup.encode(charset)
        page = parse_page(
            body, "http://h.test/", f"text/html; charset={charset}", visible_text=True
        )
        assert page.visible_text == expected.encode()
        assert [link.url for link in page.links] == ["http://h.test/x", "http://h.test/y"]
        assert text_simhash(page.visible_text) == page_simhash(markup)
    bare = parse_page(markup.encode(), "http://h.test/", "text/html")
    assert bare.visible_text is None and len(bare.links) == 2  # only when asked for
    assert (
        parse_page(b"\x89PNG", "http://h.test/", "image/png", visible_text=True).visible_text
        is None
    )


def test_near_duplicates_flag_the_earliest_page_of_the_host():
    nd = NearDuplicates(8, 3, trap_min_pages=4, trap_near_share=0.5, trap_repeat_segments=3)
    assert nd.observe("a.test", 1, "/x", 0b1111) is None
    assert nd.observe("a.test", 2, "/y", 0b1111 ^ 0b11) == 1  # 2 bits off
    assert nd.observe("b.test", 3, "/y", 0b1111) is None  # another host
    assert nd.observe("a.test", 4, "/z", 0xFFFF_0000) is None
    assert nd.trap("a.test") is None
    assert nd.observe("a.test", 5, "/w", 0b0111) == 1
    assert nd.trap("a.test") == "near"  # 2 of 4 recent pages are near-duplicates
    assert nd.trap("b.test") is None


def test_repeating_path_segments_flag_a_trap():
    assert repeated_segments("/a/b/a/b/a/c?x=a/a/a") == 3
    nd = NearDuplicates(8, 3, trap_min_pages=4, trap_near_share=0.5, trap_repeat_segments=3)
    nd.observe("a.test", 1, "/a/b/a/b", None)
    assert nd.trap("a.test") is None
    nd.observe("a.test", 2, "/a/b/a/b/a/b", None)
    assert nd.trap("a.test") == "path"


def test_throttle_keeps_the_first_urls_of_trap_hosts_only():
    t = pa.table({
        "host": ["t", "n", "t", "t", "n", "t"],
        "discovered_round": [1, 1, 0, 1, 1, 2],
        "discovered_seq": [5, 1, 9, 2, 2, 0],
        "url_key": pa.array([1, 2, 3, 4, 5, 6], pa.uint64()),
    })  # fmt: skip
    kept, held = throttle(t, {"t": "near"}, 2)
    assert held == 2
    assert kept.column("url_key").to_pylist() == [2, 3, 4, 5]  # t: round 0 seq 9, round 1 seq 2
    assert throttle(t, {}, 0) == (t, 0)


def _fmix64(k: int) -> int:
    """MurmurHash3's 64-bit finaliser, as ``MurmurHash3.cpp`` writes it."""
    m = (1 << 64) - 1
    k ^= k >> 33
    k = k * 0xFF51AFD7ED558CCD & m
    k ^= k >> 33
    k = k * 0xC4CEB9FE1A85EC53 & m
    return k ^ (k >> 33)


def _reference_shingle_hash(data: bytes) -> int:
    """The version-2 shingle hash by Horner's rule from the last byte (another computation of
    ``sum(b_i * P**i) mod 2**64`` than :func:`shingle_hash`'s)."""
    h = 0
    for b in reversed(data):
        h = (h * PRIME + b) % (1 << 64)
    return _fmix64(h ^ len(data))


def _reference_simhash(tokens: list[str], k: int = 3) -> int:
    """SimHash by the definition: one string and one hash per distinct shingle, bits counted per
    hash."""
    if not tokens:
        return 0
    shingles = {" ".join(tokens[i : i + k]) for i in range(max(1, len(tokens) - k + 1))}
    hashes = [_reference_shingle_hash(s.encode("utf-8", "surrogatepass")) for s in shingles]
    fp = 0
    for bit in range(64):
        ones = sum((h >> bit) & 1 for h in hashes)
        fp |= (2 * ones > len(hashes)) << bit
    return fp


#: Text mixing ASCII, non-ASCII letters and digits (Arabic-Indic, full-width), marks, punctuation.
_TEXT = st.lists(
    st.sampled_from(
        list("ab cD_9 0\t\n.,-é߀ßİﬁ٣０̇ 日本x") + ["&amp;", "<b>", "</p>", "<!-- c -->"]
    ),
    max_size=300,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT, st.integers(1, 4))
def test_vectorised_page_simhash_equals_the_per_shingle_definition(markup, k):
    """The numpy path (words as byte spans, shingle hashes from one prefix sum, bit counts by
    byte) gives exactly the fingerprint of the per-shingle definition, for ASCII and non-ASCII
    text."""
    tokens = words(visible_text(markup))
    assert page_simhash(markup, k) == _reference_simhash(tokens, k) == simhash(tokens, k)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_the_word_span_paths_agree_with_the_definition(text):
    """Both ways to non-ASCII words (one ``bytes.replace`` per distinct character to fold, and
    numpy on the code points) give :func:`words` joined by spaces, with each word's byte span."""
    low = text.lower()
    expected = " ".join(words(low)).encode("utf-8", "surrogatepass")
    sparse = simhash_mod._sparse_word_spans(low.encode("utf-8", "surrogatepass"))
    assert sparse is not None  # the alphabet has fewer characters to fold than the limit
    for joined, starts, ends in (sparse, simhash_mod._numpy_word_spans(low)):
        assert joined == expected
        assert [joined[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)] == [
            w.encode("utf-8", "surrogatepass") for w in words(low)
        ]


def test_a_page_with_many_symbols_to_fold_takes_the_numpy_path():
    """Past MAX_SPARSE_FOLDS distinct characters to fold the replace path declines (a table of
    symbols would cost one pass of the text each); the fingerprint is the definition's."""
    symbols = [chr(0x2190 + i) for i in range(simhash_mod.MAX_SPARSE_FOLDS + 1)]  # arrows
    text = " ".join(f"w{i}{s}x" for i, s in enumerate(symbols * 3))
    assert simhash_mod._sparse_word_spans(text.lower().encode()) is None
    assert page_simhash(text) == _reference_simhash(words(text))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_shingle_hash_is_the_finalised_polynomial(data):
    assert shingle_hash(data) == _reference_shingle_hash(data)


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 2**32), st.integers(8000, 10000))
def test_long_pages_read_the_first_bytes_only(seed, n):
    """A page's fingerprint reads the first MAX_TEXT_BYTES bytes of its visible text, cut back to
    a whole character (multi-byte characters straddle the limit): what follows changes nothing."""
    rnd = random.Random(seed)
    tokens = [rnd.choice(["ab", "Cd", "é9", "日本語", "9"]) for _ in range(n)]
    text = " ".join(f"{t}{i * 7919}" for i, t in enumerate(tokens)).encode()
    assert len(text) > MAX_TEXT_BYTES
    head = text_head(text)
    assert text.startswith(head) and MAX_TEXT_BYTES - 4 < len(head) <= MAX_TEXT_BYTES
    fp = text_simhash(text)
    assert fp == _reference_simhash(words(head.decode()))  # decodes: no character was cut
    assert text_simhash(text + b" more words here") == fp
    for room in range(4):  # bytes left for a 3-byte character: it goes whole or not at all
        shifted = b"x" * (MAX_TEXT_BYTES - room) + "日本".encode()
        kept = "日".encode() if room == 3 else b""
        assert text_head(shifted) == b"x" * (MAX_TEXT_BYTES - room) + kept
    assert page_simhash(f"<p>{text.decode()}</p>") == fp  # the same text as markup


def test_fingerprint_definition_is_pinned_to_its_version():
    """A change of the fingerprint definition must come with a new VERSION (fingerprints stored
    in fetched.simhash are only comparable within one version): pinned values of version 3."""
    assert VERSION == 3
    assert shingle_hash(b"") == 0
    assert shingle_hash(b"the quick fox") == 0x279DDBD34252F68F
    page = "<p>The quick brown fox, 2024-01-31, jumps over the lazy dog.</p>"
    assert page_simhash(page) == 0xF2460CE82E0E0155
    # version 3: the parser's text, where tags without whitespace between them join words
    joined = "<p>The quick <b>brown</b> fox</p><p>jumps<script>x=1</script></p><p>over</p>"
    assert visible_text(joined) == "The quick brown foxjumpsover"
    assert page_simhash(joined) == 0xB02699298A10440D


def test_fingerprints_of_another_version_stay_apart_in_a_crawl(tmp_path):
    """A crawl continued across the version change: the fetched file written before
    ``simhash_version`` existed (version-1 fingerprints) still reads, through the SQL views and
    read_current, with the version NULL, so a query comparing fingerprints of one version can
    tell them apart; the new rows carry VERSION."""
    import pyarrow.parquet as pq
    from crawl_helpers import fetched_row

    from batchcrawl.store import schemas, sql
    from batchcrawl.store.crawldir import CrawlDir, FileEntry

    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=1)
    old = schemas.conform("fetched", [{**fetched_row(1), "simhash": 7}]).drop_columns(
        ["simhash_version"]
    )  # the layout before version 2
    with crawl.open_output("fetched/round=1/shard=00.parquet") as fh:
        pq.write_table(old, fh)
    new = crawl.write_table(
        "fetched",
        "fetched/round=2/shard=00.parquet",
        [{**fetched_row(2, round=2), "simhash": 9, "simhash_version": VERSION}],
    )
    entries = [FileEntry("fetched/round=1/shard=00.parquet", 1), new]
    crawl.commit(crawl.manifest(), {"fetched": entries}, {"step": "test"}, round=2)
    got = sql.query(crawl, "SELECT round, simhash, simhash_version FROM fetched ORDER BY round")
    assert got.to_pylist() == [
        {"round": 1, "simhash": 7, "simhash_version": None},
        {"round": 2, "simhash": 9, "simhash_version": VERSION},
    ]
    same = sql.query(crawl, f"SELECT count(*) AS n FROM fetched WHERE simhash_version = {VERSION}")
    assert same.to_pylist() == [{"n": 1}]
    table = crawl.read_current("fetched", ["round", "simhash_version"])
    assert table.column("simhash_version").to_pylist() == [None, VERSION]
