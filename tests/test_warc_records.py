"""The WARC records the writer assembles are byte for byte what warcio's RecordBuilder makes.

``batchcrawl.fetch.warc`` puts each record's fields, digests and lengths together itself and hands
warcio's writer complete records (cheaper than the builder's look-ups and digest pass); this test
builds the same records through warcio's ``create_warc_record`` / ``create_revisit_record`` and
compares the serialized bytes, for every kind of record a fetch writes.
"""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.warcwriter import WARCWriter

from batchcrawl.fetch.warcrecords import (
    EMPTY_DIGEST,
    NOT_MODIFIED_PROFILE,
    WARC_VERSION,
    Records,
    _Latin1Headers,
    payload_digest,
)


class _Builder(WARCWriter):
    NO_PAYLOAD_DIGEST_TYPES = (*WARCWriter.NO_PAYLOAD_DIGEST_TYPES, "metadata")


def _warcio(make) -> bytes:
    """The bytes of the record ``make(builder)`` builds, serialized by warcio's own writer."""
    out = io.BytesIO()
    builder = _Builder(out, gzip=False, warc_version=WARC_VERSION)
    builder.write_record(make(builder))
    return out.getvalue()


def _ours(*args, **kw) -> bytes:
    records = Records()
    records.add(*args, **kw)
    return bytes(records.buf.getbuffer())


_text = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=10)
_headers = st.lists(
    st.tuples(st.sampled_from(["Content-Type", "X-A", "Server"]), _text), max_size=4
)


@settings(max_examples=60, deadline=None)
@given(_headers, st.binary(max_size=3000), st.booleans())
def test_every_record_kind_matches_warcios_builder(headers, body, truncated):
    common = [("WARC-Date", "2025-01-01T00:00:00.000001Z"), ("WARC-Target-URI", "http://h.test/")]
    d = dict(common)

    def http(status="200 OK"):
        return _Latin1Headers(status, list(headers), protocol="HTTP/1.1")

    request = [("WARC-Type", "request"), ("WARC-Record-ID", "<urn:a>"), *common]
    assert _ours(
        "request", [*request, ("WARC-Payload-Digest", EMPTY_DIGEST)],
        http=_Latin1Headers("GET / HTTP/1.1", list(headers), is_http_request=True),
    ) == _warcio(lambda b: b.create_warc_record(
        d["WARC-Target-URI"], "request", warc_headers_dict=dict(request),
        http_headers=_Latin1Headers("GET / HTTP/1.1", list(headers), is_http_request=True),
    ))  # fmt: skip

    digest = payload_digest(body)
    response = [("WARC-Type", "response"), ("WARC-Record-ID", "<urn:b>"), *common]
    if truncated:
        response.append(("WARC-Truncated", "length"))
    response.append(("WARC-Payload-Digest", digest))
    assert _ours("response", list(response), http=http(), payload=body) == _warcio(
        lambda b: b.create_warc_record(
            "http://h.test/", "response", payload=io.BytesIO(body), length=len(body),
            warc_headers_dict=dict(response), http_headers=http(),
        )
    )  # fmt: skip

    revisit = [("WARC-Type", "revisit"), ("WARC-Record-ID", "<urn:c>"), *common]
    refers = ("http://h.test/old", "2024-01-01T00:00:00.000000Z")
    identical = [
        ("WARC-Profile", "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"),
        ("WARC-Refers-To-Target-URI", refers[0]), ("WARC-Refers-To-Date", refers[1]),
        ("WARC-Payload-Digest", digest),
    ]  # fmt: skip
    assert _ours("revisit", [*revisit, *identical], http=http()) == _warcio(
        lambda b: b.create_revisit_record(
            "http://h.test/", digest, *refers, http_headers=http(), warc_headers_dict=dict(revisit)
        )
    )
    not_modified = [*revisit, ("WARC-Profile", NOT_MODIFIED_PROFILE),
                    ("WARC-Refers-To-Target-URI", refers[0])]  # fmt: skip
    assert _ours("revisit", list(not_modified), http=http("304 Not Modified")) == _warcio(
        lambda b: b.create_warc_record(
            "http://h.test/", "revisit", warc_headers_dict=dict(not_modified),
            http_headers=http("304 Not Modified"),
        )
    )  # fmt: skip

    for rec_type in ("metadata", "warcinfo"):
        fields = [("WARC-Type", rec_type), ("WARC-Record-ID", "<urn:d>"), *common]
        assert _ours(rec_type, list(fields), payload=body) == _warcio(
            lambda b, f=fields, t=rec_type: b.create_warc_record(
                "http://h.test/", t, payload=io.BytesIO(body), length=len(body),
                warc_headers_dict=dict(f),
            )
        )  # fmt: skip
