"""SimHash fingerprints, per-host near-duplicate flags, trap flags and the generate throttle
(issue 17 item 3)."""

from __future__ import annotations

import mmh3
import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.fetch.murmur import hash64_spans
from batchcrawl.fetch.neardup import NearDuplicates, repeated_segments
from batchcrawl.fetch.simhash import hamming, page_simhash, simhash, visible_text, words
from batchcrawl.frontier.traps import throttle
from batchcrawl.urls import hash64


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


def _reference_simhash(tokens: list[str], k: int = 3) -> int:
    """SimHash as first written: one string and one ``hash64`` per shingle, bits counted per hash."""
    if not tokens:
        return 0
    shingles = {" ".join(tokens[i : i + k]) for i in range(max(1, len(tokens) - k + 1))}
    fp = 0
    for bit in range(64):
        ones = sum((hash64(s) >> bit) & 1 for s in shingles)
        fp |= (2 * ones > len(shingles)) << bit
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
    """The numpy path (words as byte spans, murmur3 in lanes, bit counts by byte) gives exactly the
    fingerprint of the per-shingle definition, for ASCII and non-ASCII text."""
    tokens = words(visible_text(markup))
    assert page_simhash(markup, k) == _reference_simhash(tokens, k) == simhash(tokens, k)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=70), max_size=40))
def test_hash64_spans_equals_hash64(parts):
    buf = b"".join(parts)
    sizes = np.array([len(p) for p in parts], np.int64)
    starts = np.cumsum(sizes) - sizes
    got = hash64_spans(buf, starts, sizes).tolist()
    assert got == [mmh3.hash64(p, seed=0, signed=False)[0] for p in parts]
