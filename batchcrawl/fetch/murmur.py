""":func:`batchcrawl.urls.hash64` of many byte spans of one buffer at once, in numpy.

MurmurHash3 x64_128 (Austin Appleby, ``MurmurHash3.cpp``, public domain) with seed 0, first 64-bit
half: the same value as ``mmh3.hash64(data, seed=0, signed=False)[0]``. One Python call per string
costs about 0.3 us; a page's few thousand SimHash shingles are hashed here with about a hundred
numpy operations instead. Lanes are processed column-wise: the ``j``-th 16-byte block of every
span at once, then every tail, then the finalisation.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
_F1 = np.uint64(0xFF51AFD7ED558CCD)
_F2 = np.uint64(0xC4CEB9FE1A85EC53)
_N1 = np.uint64(0x52DCE729)
_N2 = np.uint64(0x38495AB5)
_FIVE = np.uint64(5)
_S33 = np.uint64(33)
#: Masks keeping the low ``n`` bytes of a little-endian word, ``n`` in 0..8.
_LOW_BYTES = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(k: np.ndarray) -> np.ndarray:
    k ^= k >> _S33
    k *= _F1
    k ^= k >> _S33
    k *= _F2
    k ^= k >> _S33
    return k


def _mix_k1(k1: np.ndarray) -> np.ndarray:
    k1 *= _C1
    k1 = _rotl(k1, 31)
    k1 *= _C2
    return k1


def _mix_k2(k2: np.ndarray) -> np.ndarray:
    k2 *= _C2
    k2 = _rotl(k2, 33)
    k2 *= _C1
    return k2


def hash64_spans(buf: bytes | np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """64-bit MurmurHash3 (x64_128, seed 0, first half) of ``buf[starts[i] : starts[i] + lengths[i]]``.

    Parameters
    ----------
    buf : bytes or numpy.ndarray of uint8, shape (n_bytes,)
        The bytes the spans point into.
    starts, lengths : numpy.ndarray of int64, shape (n,)
        Byte offset and length of each span; every span lies inside ``buf``.

    Returns
    -------
    numpy.ndarray of uint64, shape (n,)
        Equal to ``mmh3.hash64(span, seed=0, signed=False)[0]`` (:func:`batchcrawl.urls.hash64`
        of the span's text) for every span.
    """
    data = np.frombuffer(buf, np.uint8) if not isinstance(buf, np.ndarray) else buf
    padded = np.concatenate([data, np.zeros(16, np.uint8)])  # tail loads may read past the end
    words = sliding_window_view(padded, 8)  # words[o]: the 8 bytes at offset o

    def load(offsets: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(words[offsets]).view("<u8").ravel()

    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    n = len(starts)
    h1 = np.zeros(n, np.uint64)
    h2 = np.zeros(n, np.uint64)
    blocks = lengths >> 4
    for j in range(int(blocks.max(initial=0))):
        lanes = np.flatnonzero(blocks > j)
        off = starts[lanes] + 16 * j
        a1, a2 = h1[lanes], h2[lanes]
        a1 ^= _mix_k1(load(off))
        a1 = _rotl(a1, 27)
        a1 += a2
        a1 = a1 * _FIVE + _N1
        a2 ^= _mix_k2(load(off + 8))
        a2 = _rotl(a2, 31)
        a2 += a1
        a2 = a2 * _FIVE + _N2
        h1[lanes], h2[lanes] = a1, a2
    tail = lengths & 15
    off = starts + (blocks << 4)
    # A tail shorter than 9 (or 1) bytes leaves k2 (k1) zero, and mixing zero is a no-op: no branch.
    h2 ^= _mix_k2(load(off + 8) & _LOW_BYTES[np.maximum(tail - 8, 0)])
    h1 ^= _mix_k1(load(off) & _LOW_BYTES[np.minimum(tail, 8)])
    length = lengths.astype(np.uint64)
    h1 ^= length
    h2 ^= length
    h1 += h2
    h2 += h1
    return _fmix(h1) + _fmix(h2)
