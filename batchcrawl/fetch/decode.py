"""Content decoding with hard bounds: gzip (any number of members), deflate (zlib or raw), br.

A response body is decoded here, not by the HTTP client, so that a hostile encoding cannot cost more
than the crawl allows (issue 14, decoding bombs):

* **every stage's output is capped** — in a chain such as ``Content-Encoding: gzip, gzip`` the
  intermediate stream is bounded by the same ``limit`` as the final body, and no stage is ever
  flushed without a bound (``zlib``'s ``flush()`` has no output limit, so it is never called: the
  decoder drains with ``decompress(b"", max_length)`` instead);
* **output is produced in blocks** of at most :data:`BLOCK_BYTES` per call, passed down the chain one
  block at a time, so memory is a few blocks per stage whatever the ratio;
* **work is linear** in the input: concatenated gzip members are decoded by a fresh ``decompressobj``
  per member fed from a ``memoryview`` position, in slices sized by the previous member (at least
  :data:`MIN_SLICE_BYTES`), so what zlib copies into ``unused_data`` at a member's end is bounded by
  about twice that member's size — not the whole rest of the input (which made a body of 12 MB of
  empty members quadratic);
* **a deadline** (monotonic seconds) is checked on every step, also when a step produces nothing
  (empty stored blocks, empty members), so CPU-bound decoding stops with the fetch's deadline.

Trailing bytes after a complete gzip member that are not another member are ignored, as gzip(1),
browsers and urllib3 do. Sources: RFC 9110 §8.4 (content codings, listed in the order applied),
RFC 1950/1951/1952 (zlib, deflate, gzip), RFC 7932 (brotli).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Iterator

import brotli

from batchcrawl.errors import BatchcrawlError

#: Most bytes one decompress call may produce.
BLOCK_BYTES = 65536
#: Input slice bounds (bytes) handed to one decompress call.
MIN_SLICE_BYTES = 256
MAX_SLICE_BYTES = 65536

#: Exceptions a decoder raises on corrupt input.
CORRUPT = (zlib.error, brotli.error)


class UnsupportedCoding(BatchcrawlError, ValueError):
    """A ``Content-Encoding`` names a coding we cannot decode (the message names it)."""


class _Stop(Exception):
    """Internal: decoding stops here, ``reason`` is ``"length"`` or ``"time"``."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _Limits:
    __slots__ = ("per_stage", "deadline", "clock")

    def __init__(self, per_stage: int, deadline: float | None, clock: Callable[[], float]):
        self.per_stage = per_stage
        self.deadline = deadline
        self.clock = clock

    def tick(self) -> None:
        if self.deadline is not None and self.clock() >= self.deadline:
            raise _Stop("time")


class _Stage:
    """One content coding; produces at most ``per_stage + 1`` bytes in all (one more than the limit,
    so reaching the limit and exceeding it can be told apart)."""

    def __init__(self, limits: _Limits) -> None:
        self._limits = limits
        self._left = limits.per_stage + 1

    def _room(self) -> int:
        if self._left <= 0:
            raise _Stop("length")
        return min(BLOCK_BYTES, self._left)

    def check_full(self) -> None:
        """Stop once past the limit (after the block that went past it was passed on)."""
        if self._left <= 0:
            raise _Stop("length")

    def _emit(self, out: bytes) -> bytes:
        self._left -= len(out)
        return out

    def feed(self, data: bytes) -> Iterator[bytes]:  # pragma: no cover - interface
        raise NotImplementedError

    def finish(self) -> Iterator[bytes]:
        return iter(())


def _is_zlib_header(data: bytes) -> bool:
    """RFC 1950 §2.2: CM = 8 and the 16-bit header is a multiple of 31."""
    return (data[0] & 0x0F) == 8 and ((data[0] << 8) | data[1]) % 31 == 0


class _ZlibStage(_Stage):
    """gzip (members decoded one after another) or deflate (zlib-wrapped or raw: servers send
    both under that name, so the first two bytes decide)."""

    def __init__(self, limits: _Limits, gzip: bool) -> None:
        super().__init__(limits)
        self._gzip = gzip
        self._d: zlib._Decompress | None = None
        self._head = b""  # deflate: bytes kept until two are there to choose zlib or raw
        self._members = 0  # complete gzip members
        self._member_in = 0  # compressed bytes of the current member so far
        self._slice = MAX_SLICE_BYTES
        self._done = False  # end of a deflate stream, or garbage after the last gzip member

    def feed(self, data: bytes) -> Iterator[bytes]:
        if self._done:
            return
        if not self._gzip and self._d is None:
            data = self._head + data
            if len(data) < 2:
                self._head = data
                return
            self._head = b""
            wbits = zlib.MAX_WBITS if _is_zlib_header(data) else -zlib.MAX_WBITS
            self._d = zlib.decompressobj(wbits)
        yield from self._run(memoryview(data))

    def finish(self) -> Iterator[bytes]:
        if self._head:  # a one-byte deflate body: only raw deflate can be that short
            self._d = zlib.decompressobj(-zlib.MAX_WBITS)
            data, self._head = self._head, b""
            yield from self._run(memoryview(data))

    def _run(self, view: memoryview) -> Iterator[bytes]:
        pos, end = 0, len(view)
        full = False  # the last call filled its output: more may come without more input
        while not self._done and (pos < end or full):
            self._limits.tick()
            if self._d is None:  # gzip: the next member
                self._d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self._member_in = 0
            d = self._d
            piece = view[pos : pos + self._slice]
            room = self._room()
            try:
                out = d.decompress(piece, room)
            except zlib.error:
                if self._gzip and self._members and self._member_in == 0:
                    self._done = True  # not a member: trailing garbage after a complete one
                    return
                raise
            used = len(piece) - len(d.unconsumed_tail) - len(d.unused_data)
            pos += used
            self._member_in += used
            full = len(out) == room
            if out:
                yield self._emit(out)
            if d.eof:
                if not self._gzip:
                    self._done = True
                    return
                self._members += 1
                self._slice = min(MAX_SLICE_BYTES, max(MIN_SLICE_BYTES, 2 * self._member_in))
                self._d = None
                full = False
            elif not out and not used:
                return  # needs more input (or a stalled stream: the next feed decides)


class _BrotliStage(_Stage):
    def __init__(self, limits: _Limits) -> None:
        super().__init__(limits)
        self._d = brotli.Decompressor()

    def feed(self, data: bytes) -> Iterator[bytes]:
        view = memoryview(data)
        for pos in range(0, len(view), MAX_SLICE_BYTES):
            self._limits.tick()
            out = self._d.process(
                view[pos : pos + MAX_SLICE_BYTES], output_buffer_limit=self._room()
            )
            if out:
                yield self._emit(out)
            while not self._d.can_accept_more_data():
                self._limits.tick()
                out = self._d.process(b"", output_buffer_limit=self._room())
                if not out:
                    break
                yield self._emit(out)


class ContentDecoder:
    """Incremental, bounded decoder for one ``Content-Encoding`` value.

    Parameters
    ----------
    content_encoding
        The header value, e.g. ``"gzip"`` or ``"gzip, br"`` (codings in the order they were
        applied, RFC 9110 §8.4, so they are decoded in reverse).
    limit
        Bytes: the most any stage may output (the final body and every intermediate stream);
        usually ``fetch.max_body_bytes``. A stage that would output more stops decoding with
        :attr:`truncated` ``"length"``; the final output may hold ``limit + 1`` bytes (or one block
        more from brotli), so the caller cuts it at ``limit``.
    deadline
        ``clock()`` value (seconds) at which decoding stops with :attr:`truncated` ``"time"``;
        None for no deadline.

    Feed the encoded body with :meth:`feed` and end it with :meth:`finish`; both return an iterator
    of decoded blocks (each at most :data:`BLOCK_BYTES`) that must be consumed before the next call.
    Corrupt input raises one of :data:`CORRUPT` from the iteration.

    Raises
    ------
    UnsupportedCoding
        A coding other than gzip, x-gzip, deflate, br, identity.
    """

    def __init__(
        self,
        content_encoding: str,
        *,
        limit: int,
        deadline: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        limits = _Limits(limit, deadline, clock)
        names = [n.strip().lower() for n in content_encoding.split(",") if n.strip()]
        self._stages: list[_Stage] = []
        for name in reversed(names):
            if name in ("gzip", "x-gzip"):
                self._stages.append(_ZlibStage(limits, gzip=True))
            elif name == "deflate":
                self._stages.append(_ZlibStage(limits, gzip=False))
            elif name == "br":
                self._stages.append(_BrotliStage(limits))
            elif name != "identity":
                raise UnsupportedCoding(
                    f"Content-Encoding {content_encoding!r}: cannot decode {name!r} "
                    "(gzip, x-gzip, deflate, br and identity are supported)"
                )
        #: None while decoding may go on; ``"length"`` or ``"time"`` once a bound stopped it.
        self.truncated: str | None = None

    @property
    def identity(self) -> bool:
        """True when there is nothing to decode (no coding, or only ``identity``)."""
        return not self._stages

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Decode the next piece of the encoded body (any size, bytes)."""
        return self._guard(self._push(0, data))

    def finish(self) -> Iterator[bytes]:
        """The end of the encoded body: whatever the stages still hold, bounded as ever."""
        return self._guard(self._finish())

    def _push(self, i: int, data: bytes) -> Iterator[bytes]:
        if i == len(self._stages):
            if data:
                yield data
            return
        stage = self._stages[i]
        for piece in stage.feed(data):
            yield from self._push(i + 1, piece)
            stage.check_full()

    def _finish(self) -> Iterator[bytes]:
        for i, stage in enumerate(self._stages):
            for piece in stage.finish():
                yield from self._push(i + 1, piece)
                stage.check_full()

    def _guard(self, blocks: Iterator[bytes]) -> Iterator[bytes]:
        if self.truncated is not None:
            return
        try:
            yield from blocks
        except _Stop as stop:
            self.truncated = stop.reason


def decode_all(content_encoding: str, data: bytes, limit: int) -> tuple[bytes, str | None]:
    """Decode a whole body at once: ``(at most limit bytes, truncated)``; for tests and tools."""
    dec = ContentDecoder(content_encoding, limit=limit)
    out = b"".join(dec.feed(data))
    out += b"".join(dec.finish())
    truncated = dec.truncated or ("length" if len(out) > limit else None)
    return out[:limit], truncated
