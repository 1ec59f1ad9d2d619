"""Near-duplicate fingerprints of HTML pages: SimHash over word shingles with digits masked.

Charikar's SimHash ("Similarity estimation techniques from rounding algorithms", STOC 2002), as
Manku, Jain and Das Sarma use it for web crawling ("Detecting near-duplicates for web crawling",
WWW 2007): each feature (here a shingle of :data:`SHINGLE` consecutive words, MRS §19.6) is hashed
to 64 bits; bit ``i`` of the fingerprint is 1 when more features have bit ``i`` set than not.
Documents that share most shingles get fingerprints within a small Hamming distance.

Before shingling, every run of digits becomes ``0`` (BUbiNG's near-duplicate digest masks digits,
Boldi et al. 2016 §4.4): pages that differ only in dates, counters or session numbers -- calendars,
daily digests -- get the *same* fingerprint.

The visible text is taken with regular expressions (``script``, ``style``, comments and tags
removed, entities unescaped): no second HTML parse per page.
"""

from __future__ import annotations

import html
import re

import numpy as np

from batchcrawl.urls import hash64_many

#: Words per shingle (MRS §19.6 uses 4; 3 keeps short pages meaningful).
SHINGLE = 3
_INVISIBLE = re.compile(
    r"<(script|style|noscript|template)\b.*?</\1\s*>|<!--.*?-->", re.IGNORECASE | re.DOTALL
)
_TAG = re.compile(r"<[^>]*>")
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"\w+")
_BITS = np.uint64(1) << np.arange(64, dtype=np.uint64)


def visible_text(markup: str) -> str:
    """The text a reader sees in ``markup`` (HTML as ``str``): tags, scripts, styles and comments
    removed, character references unescaped."""
    return html.unescape(_TAG.sub(" ", _INVISIBLE.sub(" ", markup)))


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` with each run of digits replaced by ``0``."""
    return _WORD.findall(_DIGITS.sub("0", text.lower()))


def simhash(tokens: list[str], k: int = SHINGLE) -> int:
    """The 64-bit SimHash (Charikar 2002) of the ``k``-word shingles of ``tokens``.

    Parameters
    ----------
    tokens : list of str
        Words in order (:func:`words`). Fewer than ``k`` words form one shingle; none gives 0.
    k : int
        Words per shingle.

    Returns
    -------
    int
        The fingerprint in ``[0, 2**64)``; each shingle counts once (a set, as in MRS §19.6).
    """
    if not tokens:
        return 0
    shingles = {" ".join(tokens[i : i + k]) for i in range(max(1, len(tokens) - k + 1))}
    hashes = hash64_many(sorted(shingles))
    bits = (hashes[:, None] & _BITS) != 0  # shape (shingles, 64)
    votes = 2 * bits.sum(axis=0, dtype=np.int64) - len(hashes)
    return int((_BITS * (votes > 0)).sum(dtype=np.uint64))


def page_simhash(markup: str) -> int:
    """:func:`simhash` of the digit-masked words of the visible text of an HTML page (``str``)."""
    return simhash(words(visible_text(markup)))


def hamming(a: int, b: int) -> int:
    """Number of bits in which two 64-bit fingerprints differ."""
    return (a ^ b).bit_count()
