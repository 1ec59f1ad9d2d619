"""The HTTP response header block, parsed without ``email.parser`` when it is well formed.

``http.client`` reads a response's header lines (RFC 9112 §5) and hands them to the standard
library's e-mail parser (``email.parser.Parser``, RFC 5322 rules, universal newlines, continuation
lines, defect tracking), which costs more CPU than the rest of the exchange. Almost every server
sends plain ``Name: value`` lines; for those the result is built here directly, one
``HTTPMessage`` field per line exactly as the e-mail parser's ``compat32`` policy stores it (name
as sent, value without leading blanks and line end). Any other block -- a continuation line, a
line without a colon, a bare CR, a ``From `` line -- goes to the e-mail parser as before, so the
fields, defects and errors urllib3 and http.client see are the same either way.

:class:`Response` is ``http.client.HTTPResponse`` with that parser: its ``begin`` runs the standard
library's own code object (status line, 1xx skipping, framing, keep-alive) with
:func:`parse_headers` in place of ``http.client.parse_headers``, so it follows the running
Python's ``http.client`` and never changes the module for anyone else.
"""

from __future__ import annotations

import email.parser
import http.client
import re
import types
from typing import IO

#: The limits of ``http.client`` (bytes per header line, header lines per response).
MAX_LINE_BYTES = 65536
MAX_HEADERS = 100

#: A field line the e-mail parser would store as ``(name, value)`` unchanged: a token-ish name
#: (the e-mail parser's header characters, printable ASCII but ``:``), a colon, a value without
#: CR or LF, one line end.
_PLAIN_FIELD = re.compile(rb"[\x21-\x39\x3b-\x7e]+:[^\r\n]*\r?\n\Z")


def read_header_lines(fp: IO[bytes]) -> list[bytes]:
    """The header lines of a response up to and including the empty line (or EOF), read from the
    buffered socket file ``fp`` with ``http.client``'s limits.

    Raises
    ------
    http.client.LineTooLong, http.client.HTTPException
        A line over :data:`MAX_LINE_BYTES`, more than :data:`MAX_HEADERS` lines.
    """
    lines = []
    while True:
        line = fp.readline(MAX_LINE_BYTES + 1)
        if len(line) > MAX_LINE_BYTES:
            raise http.client.LineTooLong("header line")
        lines.append(line)
        if len(lines) > MAX_HEADERS:
            raise http.client.HTTPException(f"got more than {MAX_HEADERS} headers")
        if line in (b"\r\n", b"\n", b""):
            return lines


def parse_headers(
    fp: IO[bytes], _class: type[http.client.HTTPMessage] = http.client.HTTPMessage
) -> http.client.HTTPMessage:
    """``http.client.parse_headers`` with a fast path: read the header block from ``fp`` and
    return it as ``_class`` (an ``HTTPMessage``), the same fields the e-mail parser would give."""
    lines = read_header_lines(fp)
    fields = lines[:-1]  # the last is the empty line (or EOF)
    if not all(_PLAIN_FIELD.match(line) for line in fields):
        parser = email.parser.Parser(_class=_class)
        return parser.parsestr(b"".join(lines).decode("iso-8859-1"))
    msg = _class()
    for line in fields:
        name, _, value = line.decode("iso-8859-1").partition(":")
        msg[name] = value.lstrip(" \t").rstrip("\r\n")
    return msg


class Response(http.client.HTTPResponse):
    """``http.client.HTTPResponse`` whose header block is parsed by :func:`parse_headers`."""

    begin = types.FunctionType(
        http.client.HTTPResponse.begin.__code__,
        {**vars(http.client), "parse_headers": parse_headers},
        "begin",
        http.client.HTTPResponse.begin.__defaults__,
        http.client.HTTPResponse.begin.__closure__,
    )
