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
    try:
        if http is not None and "chunked" in (http.get_header("Transfer-Encoding") or "").lower():
            raw = ChunkedDataReader(io.BytesIO(raw)).read()
        coding = (http.get_header("Content-Encoding") or "").strip() if http is not None else ""
        if not coding or coding.lower() == "identity":
            return raw[:limit]
        body, _ = decode_all(coding, raw, limit)
        return body
    except (*CORRUPT, UnsupportedCoding, ValueError, EOFError) as exc:
        raise PayloadError(f"body cannot be decoded: {exc}") from None
