"""The payload of a stored response record, decoded strictly.

warcio's ``content_stream()`` returns the still-encoded bytes when a ``Content-Encoding`` cannot be
undone (a silent fallback that would extract garbage as text); here the body is dechunked by
warcio and the content coding undone by the crawler's own bounded decoder
(:mod:`batchcrawl.fetch.decode`), and a body that does not decode raises.
"""

from __future__ import annotations

import io

from warcio.bufferedreaders import ChunkedDataReader

from batchcrawl.fetch.decode import CORRUPT, UnsupportedCoding, decode_all

#: Most payload bytes decoded per record (the fetcher's default ``fetch.max_body_bytes``).
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024


class PayloadError(ValueError):
    """A record's body cannot be decoded (a broken chunked encoding or content coding)."""


def read_payload(record, limit: int = MAX_PAYLOAD_BYTES) -> bytes:
    """The decoded payload of a warcio ``response`` ``record`` (at most ``limit`` bytes).

    Raises
    ------
    PayloadError
        The chunked transfer coding or the content coding is broken or unknown.
    """
    http = record.http_headers
    raw = record.raw_stream.read()
    if http is None:
        return decode_body(raw, "", "", limit)
    return decode_body(raw, http.get_header("Transfer-Encoding") or "",
                       http.get_header("Content-Encoding") or "", limit)  # fmt: skip


def decode_body(
    raw: bytes, transfer_encoding: str, content_encoding: str, limit: int = MAX_PAYLOAD_BYTES
) -> bytes:
    """``raw`` (an HTTP body as stored) with its transfer coding (``chunked``) and content coding
    (the ``Content-Encoding`` value, e.g. ``gzip``; empty or ``identity``: none) undone, at most
    ``limit`` bytes. The one decoding of ``batchcrawl extract`` (a stored record's headers) and of
    extraction at fetch time (the headers as the WARC record stores them), so both give the same
    bytes.

    Raises
    ------
    PayloadError
        The chunked transfer coding or the content coding is broken or unknown.
    """
    try:
        if "chunked" in transfer_encoding.lower():
            raw = ChunkedDataReader(io.BytesIO(raw)).read()
        coding = content_encoding.strip()
        if not coding or coding.lower() == "identity":
            return raw[:limit]
        body, _ = decode_all(coding, raw, limit)
        return body
    except (*CORRUPT, UnsupportedCoding, ValueError, EOFError) as exc:
        raise PayloadError(f"body cannot be decoded: {exc}") from None
