"""Near-duplicate fingerprints of HTML pages: SimHash over word shingles with digits masked.

Charikar's SimHash ("Similarity estimation techniques from rounding algorithms", STOC 2002), as
Manku, Jain and Das Sarma use it for web crawling ("Detecting near-duplicates for web crawling",
WWW 2007): each feature (here a shingle of :data:`SHINGLE` consecutive words, MRS §19.6) is hashed
to 64 bits; bit ``i`` of the fingerprint is 1 when more features have bit ``i`` set than not.
Documents that share most shingles get fingerprints within a small Hamming distance.

Before shingling, every run of digits becomes ``0`` (BUbiNG's near-duplicate digest masks digits,
Boldi et al. 2016 §4.4): pages that differ only in dates, counters or session numbers -- calendars,
daily digests -- get the *same* fingerprint.

The visible text is the page parser's (:attr:`batchcrawl.fetch.parse.ParsedPage.visible_text`:
libxml2's tree without ``script``, ``style``, ``noscript`` and ``template``, serialized as UTF-8
text by libxml2 itself), so a fetched page is parsed once for its links and its fingerprint.
Words and digit masking are computed on the text's UTF-8 bytes (``bytes.translate``, one
``bytes.replace`` per distinct non-ASCII character to fold) or its code points with numpy, and
every shingle is hashed from one prefix sum over the words' bytes (:func:`shingle_hash` is a
polynomial hash, so a shingle's hash is the difference of two prefixes, then finalised):
:func:`text_simhash` costs about 0.2 ms for the text of a 20 KB page (3-5 ms with one Python string
and hash call per shingle). The tests check it against the plain definition, :func:`simhash` of
:func:`words` with :func:`shingle_hash` per shingle. Only the first :data:`MAX_TEXT_BYTES` bytes of
the visible text count (about 10,000 words), so a 10 MB page costs no more than a 64 KB one; pages
that differ only further on get the same fingerprint.

The definition is versioned (:data:`VERSION`, stored in ``fetched.simhash_version``): version 1
hashed each shingle with MurmurHash3; version 2 read the first 65,536 characters of a visible text
taken with regular expressions (every tag a space); fingerprints of different versions must not
be compared.
"""

from __future__ import annotations

import re

import numpy as np

from batchcrawl.fetch.parse import visible_text

#: Words per shingle (MRS §19.6 uses 4; 3 keeps short pages meaningful).
SHINGLE = 3
#: Version of the fingerprint definition, stored beside each fingerprint (``fetched.
#: simhash_version``). 1: MurmurHash3 of each shingle's bytes; 2: :func:`shingle_hash` of the
#: words of a visible text taken by regular expressions; 3: of the parser's visible text
#: (:func:`text_simhash`). Fingerprints of different versions are not comparable.
VERSION = 3
#: Bytes of UTF-8 visible text a page's fingerprint reads (the first ones, cut back to a whole
#: character): bounds the time and the numpy arrays of one page (about 40 bytes per byte of
#: text) whatever the body size (version 3).
MAX_TEXT_BYTES = 1 << 16
#: Multiplier of the polynomial shingle hash (odd, so invertible mod 2**64): 2**64 / golden ratio.
PRIME = 0x9E3779B97F4A7C15
_MASK64 = (1 << 64) - 1
_INV_PRIME = pow(PRIME, -1, 1 << 64)
_S33 = np.uint64(33)
_F1 = np.uint64(0xFF51AFD7ED558CCD)  # fmix64's multipliers
_F2 = np.uint64(0xC4CEB9FE1A85EC53)
_DIGITS = re.compile(r"\d+")
_WORD = re.compile(r"\w+")
_BITS = np.uint64(1) << np.arange(64, dtype=np.uint64)
#: ``\w`` and ``\d`` of Python's ``re`` for the ASCII code points (others are looked up one by one);
#: 256 entries so that a byte indexes them directly.
_ASCII_WORD = np.array([c < 128 and bool(_WORD.fullmatch(chr(c))) for c in range(256)])
_ASCII_DIGIT = np.array([c < 128 and bool(_DIGITS.fullmatch(chr(c))) for c in range(256)])
_SPACE, _ZERO = 32, 48
_COLUMN_BASE = np.arange(0, 8 * 256, 256, dtype=np.uint16)  # byte column c counts at 256 c + value
_COLUMN_TILE = np.resize(_COLUMN_BASE, 8 << 13)  # the bases of 8192 hashes' bytes, flat
_BYTE_BITS = (np.arange(256)[:, None] >> np.arange(8) & 1).astype(np.float64)  # (256, 8)
#: ``bytes.translate`` table for ASCII text: word bytes lower-cased, digits -> 0, others -> space.
_ASCII_FOLD = bytes(
    _ZERO if _ASCII_DIGIT[c] else ord(chr(c).lower()) if _ASCII_WORD[c] else _SPACE
    for c in range(256)
)
_POWERS_CACHED = 1 << 16  # bytes of words per page up to which the power tables are kept


def words(text: str) -> list[str]:
    """Lower-cased words of ``text`` with each run of digits replaced by ``0``."""
    return _WORD.findall(_DIGITS.sub("0", text.lower()))


def shingle_hash(data: bytes) -> int:
    """The 64-bit hash of one shingle's UTF-8 bytes ``b_0 .. b_{n-1}`` (fingerprint version 2).

    A polynomial hash ``sum(b_i * P**i) mod 2**64`` (``P`` = :data:`PRIME`, odd), XOR the length
    ``n``, passed through MurmurHash3's 64-bit finaliser ``fmix64`` (Appleby, ``MurmurHash3.cpp``)
    so that every output bit depends on every input bit. The polynomial form lets
    :func:`page_simhash` hash all shingles of a page from one prefix sum over its words' bytes (a
    shingle's hash is a difference of two prefixes), instead of hashing each shingle's bytes.
    """
    h = 0
    for i, b in enumerate(data):
        h += b * pow(PRIME, i, 1 << 64)
    return _fmix64_int((h & _MASK64) ^ len(data))


def _fmix64_int(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    return k ^ (k >> 33)


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
        The fingerprint in ``[0, 2**64)``: bit ``i`` is 1 when more than half of the distinct
        shingles' hashes have bit ``i`` set. A shingle is its words joined by one space, hashed
        with :func:`shingle_hash`; each distinct shingle counts once (a set, as in MRS §19.6).
    """
    encoded = [t.encode("utf-8", "surrogatepass") for t in tokens]
    sizes = np.fromiter(map(len, encoded), np.int64, len(encoded))
    starts = np.cumsum(sizes + 1) - sizes - 1  # one space between words
    return _shingle_simhash(b" ".join(encoded), starts, starts + sizes, k)


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``P**i`` and ``P**-i`` mod 2**64 for ``i < n`` (cached up to :data:`_POWERS_CACHED`)."""
    if n <= len(_POW):
        return _POW[:n], _INV_POW[:n]
    return _power_table(PRIME, n), _power_table(_INV_PRIME, n)


def _power_table(base: int, n: int) -> np.ndarray:
    out = np.full(n, base, np.uint64)
    out[0] = 1
    return np.cumprod(out, out=out)  # uint64 products wrap: arithmetic mod 2**64


def _shingle_hashes(buf: bytes, starts: np.ndarray, ends: np.ndarray, k: int) -> np.ndarray:
    """:func:`shingle_hash` of ``buf[starts[i] : ends[i + k - 1]]`` for every shingle, at once:
    with ``S[j] = sum_{i<j} b_i P**i``, the shingle ``[s, e)`` hashes to ``(S[e] - S[s]) P**-s``."""
    n = len(starts)
    first = starts[: max(1, n - k + 1)]
    last = ends[k - 1 :] if n >= k else ends[n - 1 :]  # fewer than k words: one shingle
    data = np.frombuffer(buf, np.uint8)
    pow_, inv_pow = _powers(len(data))
    prefix = np.zeros(len(data) + 1, np.uint64)
    np.cumsum(data * pow_, out=prefix[1:])
    h: np.ndarray = (prefix[last] - prefix[first]) * inv_pow[first]
    h ^= (last - first).astype(np.uint64)
    h ^= h >> _S33
    h *= _F1
    h ^= h >> _S33
    h *= _F2
    h ^= h >> _S33
    return h


def _shingle_simhash(buf: bytes, starts: np.ndarray, ends: np.ndarray, k: int) -> int:
    """SimHash of the shingles ``buf[starts[i] : ends[i + k - 1]]`` (word byte spans, in order)."""
    if len(starts) == 0:
        return 0
    hashes = np.sort(_shingle_hashes(buf, starts, ends, k))
    hashes = hashes[np.append(True, hashes[1:] != hashes[:-1])]  # a set: equal shingles count once
    # Bit counts: how often each value occurs in each byte column (one bincount), times its bits.
    data = hashes.astype("<u8", copy=False).view(np.uint8)
    n = len(data)
    base = _COLUMN_TILE[:n] if n <= len(_COLUMN_TILE) else np.resize(_COLUMN_BASE, n)
    counts = np.bincount(np.add(data, base), minlength=8 * 256).reshape(8, 256)
    # ones[8 * c + j]: bit j of byte c, bit 8c + j of the hash (exact in float64: counts < 2**53)
    ones = (counts.astype(np.float64) @ _BYTE_BITS).ravel()
    return int((_BITS * (2 * ones > len(hashes))).sum(dtype=np.uint64))


def _word_spans(data: bytes) -> tuple[bytes, np.ndarray, np.ndarray]:
    """:func:`words` of ``data`` (UTF-8 text) joined by single spaces (UTF-8) and each word's byte
    span, without one Python string per word: ASCII text by one ``bytes.translate``; other text by
    that and one
    ``bytes.replace`` per distinct non-ASCII character to fold (:func:`_sparse_word_spans`: 2-3x
    faster than numpy on the code points on the Python documentation's and aptitude's manuals in
    English, Japanese and Russian), or, with many of those, on its code points with numpy. All
    give the same spans (tests/test_simhash.py)."""
    if data.isascii():
        return _squeezed_spans(data.translate(_ASCII_FOLD))
    text = data.decode("utf-8", "surrogatepass").lower()
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= 2 * len(text):  # not mostly 3-byte characters (CJK): see MAX_SPARSE_FOLDS
        spans = _sparse_word_spans(data)
        if spans is not None:
            return spans
    return _numpy_word_spans(text)


#: Distinct non-ASCII characters to fold (punctuation, symbols, digits) up to which a page takes
#: :func:`_sparse_word_spans` (one ``bytes.replace`` each); a page with more (a table of symbols),
#: or whose UTF-8 is over 2 bytes per character on average (mostly CJK: the set of its characters
#: costs more than numpy's pass), takes :func:`_numpy_word_spans`.
MAX_SPARSE_FOLDS = 48
#: ``_ASCII_FOLD`` for the ASCII bytes; bytes of UTF-8 sequences (128-255) kept as they are.
_ASCII_FOLD_KEEP_HIGH = _ASCII_FOLD[:128] + bytes(range(128, 256))
_FOLDED: dict[str, str] = {}  # a non-ASCII code point -> itself (a word character), 0 or a space
_FOLDED_MAX = 1 << 16


def _fold_char(c: str) -> str:
    """A lower-cased non-ASCII character as :func:`words` reads it: ``0`` for a digit (``\\d``),
    itself for another word character (``\\w``), else a space (memoised)."""
    folded = _FOLDED.get(c)
    if folded is None:
        folded = "0" if _DIGITS.fullmatch(c) else c if _WORD.fullmatch(c) else " "
        if len(_FOLDED) < _FOLDED_MAX:
            _FOLDED[c] = folded
    return folded


def _sparse_word_spans(data: bytes) -> tuple[bytes, np.ndarray, np.ndarray] | None:
    """:func:`_word_spans` of lower-cased text given as UTF-8 ``data`` whose non-ASCII characters
    have at most :data:`MAX_SPARSE_FOLDS` distinct ones to fold (else None). The ASCII bytes are folded by one ``bytes.translate``; each distinct non-ASCII
    character that is not kept (:func:`_fold_char`) is replaced by as many spaces or zeros as it
    has bytes (``bytes.replace``: a UTF-8 sequence only matches at a character's start); then the
    bytes are squeezed like ASCII text, which turns those runs into one space or one ``0``. The
    distinct characters come from the bytes >= 0x80 alone, which are the non-ASCII characters'
    sequences in order."""
    octets = np.frombuffer(data, np.uint8)
    high = octets[octets >= 0x80].tobytes().decode("utf-8", "surrogatepass")
    folds = [(c, f) for c in set(high) if (f := _fold_char(c)) != c]
    if len(folds) > MAX_SPARSE_FOLDS:
        return None
    folded = data.translate(_ASCII_FOLD_KEEP_HIGH)
    for c, f in folds:
        sequence = c.encode("utf-8", "surrogatepass")
        folded = folded.replace(sequence, f.encode("ascii") * len(sequence))
    return _squeezed_spans(folded)


def _numpy_word_spans(text: str) -> tuple[bytes, np.ndarray, np.ndarray]:
    """:func:`_word_spans` of lower-cased ``text``, computed on its code points with numpy."""
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), np.uint32)
    low = np.minimum(cps, 127)
    word, digit = _ASCII_WORD[low], _ASCII_DIGIT[low]
    high = np.flatnonzero(cps > 127)
    if len(high):  # \w and \d of the few distinct non-ASCII code points, asked of re itself
        values, inverse = np.unique(cps[high], return_inverse=True)
        chars = [chr(c) for c in values.tolist()]
        word[high] = np.array([bool(_WORD.fullmatch(c)) for c in chars])[inverse]
        digit[high] = np.array([bool(_DIGITS.fullmatch(c)) for c in chars])[inverse]
    prev_word = np.concatenate([[False], word[:-1]])
    prev_digit = np.concatenate([[False], digit[:-1]])
    keep = word & ~(digit & prev_digit)  # a run of digits keeps its first character, as "0"
    begins = (word & ~prev_word)[keep]
    if not begins.any():
        return b"", np.zeros(0, np.int64), np.zeros(0, np.int64)
    kept = np.where(digit, np.uint32(_ZERO), cps)[keep]
    slot = np.arange(len(kept)) + np.cumsum(begins) - 1  # one space before every word but the first
    n_words = int(begins.sum())
    out = np.full(len(kept) + n_words - 1, _SPACE, np.uint32)
    out[slot] = kept
    size = 1 + (out > 0x7F) + (out > 0x7FF) + (out > 0xFFFF)  # UTF-8 bytes per code point
    offset = np.cumsum(size) - size
    joined = out.tobytes().decode("utf-32-le", "surrogatepass").encode("utf-8", "surrogatepass")
    starts = offset[slot[begins]]
    ends = np.append(starts[1:] - 1, len(joined))
    return joined, starts.astype(np.int64), ends.astype(np.int64)


def _squeezed_spans(folded: bytes) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Word spans of folded text (word characters lower-cased, digits ``0``, others spaces, as
    UTF-8): repeated spaces and zeros are dropped, then the words are the runs between spaces."""
    a = np.frombuffer(folded, np.uint8)
    run = (a == _SPACE) | (a == _ZERO)  # a space or 0 right after the same byte is dropped
    keep = np.ones(len(a), bool)
    keep[1:] = ~(run[1:] & (a[1:] == a[:-1]))
    joined = a[keep].tobytes().strip(b" ")
    spaces = np.flatnonzero(np.frombuffer(joined, np.uint8) == _SPACE)
    if not joined:
        return b"", np.zeros(0, np.int64), np.zeros(0, np.int64)
    starts = np.append(0, spaces + 1)
    ends = np.append(spaces, len(joined))
    return joined, starts, ends


def text_simhash(text: bytes, k: int = SHINGLE) -> int:
    """The fingerprint of a page whose visible text is ``text`` (UTF-8, as
    :attr:`~batchcrawl.fetch.parse.ParsedPage.visible_text` gives it): :func:`simhash` of the
    digit-masked words of its first :data:`MAX_TEXT_BYTES` bytes (cut back to a whole character),
    ``simhash(words(head(text)), k)``, computed with numpy (module docstring)."""
    joined, starts, ends = _word_spans(text_head(text))
    return _shingle_simhash(joined, starts, ends, k)


def text_head(text: bytes) -> bytes:
    """The first :data:`MAX_TEXT_BYTES` bytes of UTF-8 ``text``, without a cut character at the
    end (UTF-8 continuation bytes are ``10xxxxxx``, RFC 3629 §3)."""
    if len(text) <= MAX_TEXT_BYTES:
        return text
    end = MAX_TEXT_BYTES
    while end > 0 and text[end] & 0xC0 == 0x80:
        end -= 1
    return text[:end]


def page_simhash(markup: str, k: int = SHINGLE) -> int:
    """:func:`text_simhash` of the visible text of an HTML page given as ``str`` (parsed here:
    :func:`~batchcrawl.fetch.parse.visible_text`). The fetch worker does not call it: its parse
    already gives the visible text."""
    return text_simhash(visible_text(markup).encode("utf-8", "surrogatepass"), k)


_POW = _power_table(PRIME, _POWERS_CACHED)
_INV_POW = _power_table(_INV_PRIME, _POWERS_CACHED)


def hamming(a: int, b: int) -> int:
    """Number of bits in which two 64-bit fingerprints differ."""
    return (a ^ b).bit_count()
