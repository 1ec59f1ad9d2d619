"""The bounded content decoder (issue 14): stacked codings, gzip member layouts, bombs, deadlines."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import brotli
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.fetch.decode import CORRUPT, ContentDecoder, UnsupportedCoding, decode_all


def _raw_deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _gzip_members(data: bytes, cuts: list[int]) -> bytes:
    """``data`` as concatenated gzip members split at ``cuts`` (empty members included)."""
    points = sorted(c % (len(data) + 1) for c in cuts)
    bounds = [0, *points, len(data)]
    return b"".join(gzip.compress(data[a:b], 1) for a, b in zip(bounds, bounds[1:], strict=False))


#: name -> (Content-Encoding token, reference decoder: the standard library's one-shot function)
REFERENCE = {
    "gzip": ("gzip", gzip.decompress),
    "deflate-zlib": ("deflate", zlib.decompress),
    "deflate-raw": ("deflate", lambda d: zlib.decompress(d, -zlib.MAX_WBITS)),
    "br": ("br", brotli.decompress),
}


def _encode(name: str, data: bytes, member_cuts: list[int]) -> bytes:
    if name == "gzip":
        return _gzip_members(data, member_cuts)
    if name == "deflate-zlib":
        return zlib.compress(data)
    if name == "deflate-raw":
        return _raw_deflate(data)
    return brotli.compress(data)


def _feed(header: str, encoded: bytes, cuts: list[int], cap: int) -> tuple[bytes, str | None]:
    dec = ContentDecoder(header, limit=cap)
    out = b""
    points = sorted({c % (len(encoded) + 1) for c in cuts} | {0, len(encoded)})
    for a, b in zip(points, points[1:], strict=False):
        out += b"".join(dec.feed(encoded[a:b]))
    out += b"".join(dec.finish())
    return out[:cap], dec.truncated or ("length" if len(out) > cap else None)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(sorted(REFERENCE)), min_size=1, max_size=3),
    st.binary(max_size=3000) | st.text(max_size=1500).map(str.encode),
    st.lists(st.integers(0, 10_000), max_size=5),
    st.lists(st.integers(0, 10_000), max_size=8),
    st.integers(0, 4000),
)
def test_stacked_codings_decode_like_the_reference(names, plain, member_cuts, feed_cuts, cap):
    """Any stack of codings, any gzip member layout, any split of the input into reads: the output
    is what the standard decoders give, cut at ``cap``; ``truncated`` is ``"length"`` exactly when
    some stage's output (final or intermediate) is longer than ``cap``."""
    streams = [plain]
    for name in names:  # codings in the order applied
        streams.append(_encode(name, streams[-1], member_cuts))
    encoded = streams[-1]
    for name, stream, inner in zip(
        reversed(names), reversed(streams), reversed(streams[:-1]), strict=False
    ):
        assert REFERENCE[name][1](stream) == inner  # the reference agrees with the encoder
    header = ", ".join(REFERENCE[n][0] for n in names)
    out, truncated = _feed(header, encoded, feed_cuts, cap)
    too_long = any(len(s) > cap for s in streams[:-1])
    assert truncated == ("length" if too_long else None)
    assert plain.startswith(out)
    if not too_long:
        assert out == plain


def test_unsupported_and_identity_codings():
    with pytest.raises(UnsupportedCoding, match="compress") as info:
        ContentDecoder("gzip, compress", limit=10)
    assert isinstance(info.value, ValueError)
    assert decode_all("identity", b"abc", 10) == (b"abc", None)
    assert ContentDecoder("", limit=1).identity and ContentDecoder("identity", limit=1).identity


def test_trailing_garbage_after_a_gzip_member_is_ignored_but_a_corrupt_first_member_is_not():
    assert decode_all("gzip", gzip.compress(b"ab") + b"\0\0\0 junk", 100) == (b"ab", None)
    with pytest.raises(CORRUPT):
        decode_all("gzip", b"\x1f\x8b junk that is no gzip", 100)


def _empty_stored_blocks(n: int) -> bytes:
    """``n`` non-final, empty stored deflate blocks (RFC 1951 §3.2.4): 5 bytes each, no output."""
    return b"\x00\x00\x00\xff\xff" * n


def _gzip_member(deflate: bytes, plain_crc: int, plain_len: int) -> bytes:
    import struct

    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    return header + deflate + struct.pack("<II", plain_crc, plain_len & 0xFFFFFFFF)


def _zeros_deflate(mib: int) -> tuple[bytes, int]:
    """Raw deflate of ``mib`` MiB of zeros (final block included) and its CRC-32."""
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = c.compress(b"\0" * 2**20) + c.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(mib):
        crc = zlib.crc32(b"\0" * 2**20, crc)
    return block * mib + b"\x03\x00", crc


def hostile_inner_member(empty_blocks: int, zeros_mib: int) -> bytes:
    """The issue-14 bomb's inner member: empty stored blocks, then deflated zeros."""
    zeros, crc = _zeros_deflate(zeros_mib)
    return _gzip_member(_empty_stored_blocks(empty_blocks) + zeros, crc, zeros_mib * 2**20)


@pytest.mark.parametrize("empty_blocks", [0, 20_000, 400_000])
def test_stacked_bomb_stops_every_stage_at_the_cap(empty_blocks):
    """gzip, gzip: an inner member of empty stored blocks (0.1 MB, or 2 MB: more than the cap)
    then 256 MiB of zeros. Every stage, flush included, stops at the cap: peak memory stays a few
    times the cap, far below the 256 MiB the bomb inflates to."""
    cap = 1_000_000
    wire = gzip.compress(hostile_inner_member(empty_blocks, 256), 9)
    assert len(wire) < 400_000
    tracemalloc.start()
    try:
        out, truncated = decode_all("gzip, gzip", wire, cap)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert truncated == "length"
    assert out == b"\0" * len(out) and len(out) <= cap
    assert len(out) == (0 if 5 * empty_blocks > cap else cap)
    assert peak < 6 * cap


def test_empty_members_decode_in_linear_time_per_member(monkeypatch):
    """12 MB of 20-byte empty gzip members inside a gzip: each member costs the same small work
    (zlib copies at most a slice, not the rest of the input), measured as the number of bytes the
    decoder hands to zlib, which must stay a small multiple of the input."""
    inner = gzip.compress(b"") * 200_000  # 4 MB of empty members
    fed = 0
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *a):
            self._d = real(*a)

        def decompress(self, data, max_length=0):
            nonlocal fed
            fed += len(data)
            return self._d.decompress(data, max_length)

        def __getattr__(self, name):
            return getattr(self._d, name)

    monkeypatch.setattr(zlib, "decompressobj", Counting)  # counts, decodes for real
    out, truncated = decode_all("gzip", inner, 10_000_000)
    assert (out, truncated) == (b"", None)
    assert fed < 20 * len(inner)  # the quadratic decoder handed zlib ~len(inner)**2 / 40 bytes


def test_deadline_stops_cpu_bound_decoding():
    """A decoder past its deadline stops with truncated="time" even when no byte comes out."""
    now = [0.0]

    def clock():
        now[0] += 1.0  # every check moves the clock one second
        return now[0]

    dec = ContentDecoder("gzip", limit=10**9, deadline=50.0, clock=clock)
    assert b"".join(dec.feed(gzip.compress(b"") * 1000)) == b""
    assert dec.truncated == "time" and now[0] == 50.0


def test_control_without_deadline_the_same_members_decode_completely():
    dec = ContentDecoder("gzip", limit=10**9)
    assert b"".join(dec.feed(gzip.compress(b"") * 1000 + gzip.compress(b"end"))) == b"end"
    assert dec.truncated is None


def test_bomb_of_one_member_is_bounded_per_block():
    dec = ContentDecoder("gzip", limit=5_000_000)
    sizes = [len(b) for b in dec.feed(gzip.compress(b"\0" * 20_000_000))]
    assert max(sizes) <= 65536 and sum(sizes) == 5_000_001 and dec.truncated == "length"
