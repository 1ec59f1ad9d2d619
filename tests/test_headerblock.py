"""The response header block parser gives what http.client's e-mail parser gives, for any block."""

from __future__ import annotations

import http.client
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from batchcrawl.fetch import headerblock
from batchcrawl.fetch.headerblock import Response, parse_headers

# Header lines as servers write them, and as hostile ones do: folded, colon-less, bare CR, empty
# names, From lines, Latin-1 bytes.
_name = st.sampled_from([b"Content-Type", b"X-A", b"set-cookie", b"From", b"", b" X", b"A B"])
_value = st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")) | st.sampled_from(
    [b"text/html", b" a  ", b"\tb", b"caf\xe9", b"x\ry", b""]
)
_line = st.one_of(
    st.builds(
        lambda n, v, end: n + b":" + v + end, _name, _value, st.sampled_from([b"\r\n", b"\n"])
    ),
    st.builds(lambda v: b" " + v + b"\r\n", _value),  # a continuation line
    st.sampled_from([b"no colon\r\n", b"From someone\r\n", b"X: y\r\r\n"]),
)


def _parsed(parse, data: bytes):
    """Fields, defect types and payload ("" for none) of ``parse`` on ``data``, and the bytes
    it consumed."""
    fp = io.BytesIO(data)
    msg = parse(fp)
    return (msg.items(), [type(d) for d in msg.defects], msg.get_payload() or ""), fp.tell()


@settings(max_examples=400, deadline=None)
@given(st.lists(_line, max_size=6), st.sampled_from([b"\r\n", b"\n", b""]), st.binary(max_size=8))
def test_parse_headers_gives_the_email_parsers_fields_defects_and_payload(lines, end, body):
    data = b"".join(lines) + end + body
    # the same message, and the same bytes left for the body
    assert _parsed(parse_headers, data) == _parsed(http.client.parse_headers, data)


def test_plain_fields_take_the_fast_path_and_odd_ones_the_email_parser(monkeypatch):
    folded_block = b"X-A: 1\r\n  more\r\n\r\n"
    expected = http.client.parse_headers(io.BytesIO(folded_block)).items()
    calls = []
    real = headerblock.email.parser.Parser

    class Spy(real):
        def parsestr(self, text, headersonly=False):
            calls.append(text)
            return super().parsestr(text, headersonly)

    monkeypatch.setattr(headerblock.email.parser, "Parser", Spy)
    msg = parse_headers(io.BytesIO(b"Content-Type: text/html\r\nX-A:  1 \r\nX-A: 2\r\n\r\nbody"))
    assert msg.items() == [("Content-Type", "text/html"), ("X-A", "1 "), ("X-A", "2")]
    assert calls == []
    assert parse_headers(io.BytesIO(folded_block)).items() == expected == [("X-A", "1\r\n  more")]
    assert len(calls) == 1


def test_limits_are_http_clients():
    with pytest.raises(http.client.LineTooLong):
        parse_headers(io.BytesIO(b"X: " + b"a" * 70000 + b"\r\n\r\n"))
    with pytest.raises(http.client.HTTPException, match="more than 100 headers"):
        parse_headers(io.BytesIO(b"X: a\r\n" * 101 + b"\r\n"))


class _Sock:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def makefile(self, mode):
        return io.BufferedReader(io.BytesIO(self.data))


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nhi",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
        b"HTTP/1.0 200 OK\r\nX:\r\n y\r\n\r\nhi",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
    ],
)
def test_response_reads_like_http_clients(raw):
    ours, theirs = Response(_Sock(raw)), http.client.HTTPResponse(_Sock(raw))
    ours.begin()
    theirs.begin()
    assert (ours.status, ours.version, ours.chunked, ours.length, ours.will_close) == (
        theirs.status, theirs.version, theirs.chunked, theirs.length, theirs.will_close,
    )  # fmt: skip
    assert ours.msg.items() == theirs.msg.items()
    assert ours.read() == theirs.read()
