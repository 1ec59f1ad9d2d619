"""The character encoding of an HTML body (HTML Standard §13.2.3 "determining the character
encoding", without the heuristics): BOM, then the HTTP ``charset``, then the ``<meta>`` prescan of
the first :data:`PRESCAN_BYTES` bytes, then UTF-8. Labels map to Python codecs with w3lib's
WHATWG-style table (``latin1`` and ``ascii`` -> cp1252, ``gbk`` -> gb18030 ...). Used by the page
parser (:mod:`batchcrawl.fetch.parse`)."""

from __future__ import annotations

import codecs
import re

from w3lib.encoding import resolve_encoding

PRESCAN_BYTES = 1024
DEFAULT_ENCODING = "utf-8"
#: byte order marks and the codec each selects
BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
)
_CHARSET_PARAM = re.compile(r";\s*charset\s*=\s*[\"']?([^\"';\s]+)", re.IGNORECASE)
#: Python codecs narrower than the WHATWG decoder of the encoding they name: the Encoding Standard
#: (§10.1.1) decodes GBK with the gb18030 decoder, a superset (w3lib up to 2.5 resolved the
#: ``gbk`` and ``gb2312`` labels to gb18030; 2.6 resolves them to Python's gbk, which fails on
#: the bytes gb18030 adds)
_WHATWG_DECODER = {"gbk": "gb18030"}


def detect_encoding(body: bytes, content_type: str | None) -> tuple[str, str, int]:
    """The encoding to decode an HTML body with (HTML Standard §13.2.3.1, without the heuristics).

    Parameters
    ----------
    body
        The body bytes.
    content_type
        HTTP ``Content-Type`` value or None.

    Returns
    -------
    (codec, source, bom_length)
        Python codec name (``codecs.lookup(...).name``), where it came from (``bom``, ``http``,
        ``meta``, ``default``) and the number of BOM bytes to skip.
    """
    for bom, name in BOMS:
        if body.startswith(bom):
            return name, "bom", len(bom)
    if content_type:
        m = _CHARSET_PARAM.search(content_type)
        if m:
            codec = encoding_for_label(m.group(1))
            if codec is not None:
                return codec, "http", 0
    codec = prescan(body[:PRESCAN_BYTES])
    if codec is not None:
        return codec, "meta", 0
    return DEFAULT_ENCODING, "default", 0


def encoding_for_label(label: str | bytes) -> str | None:
    """Python codec name for a charset label (WHATWG-style aliases via w3lib), or None if unknown."""
    if isinstance(label, bytes):
        label = label.decode("ascii", errors="replace")
    label = label.strip().strip("\"'").lower()
    if not label:
        return None
    if label == "x-user-defined":
        return "cp1252"
    try:
        resolved = resolve_encoding(label)
    except (LookupError, ValueError):
        return None
    if resolved is None:
        return None
    name = codecs.lookup(resolved).name
    return _WHATWG_DECODER.get(name, name)


_WS = b" \t\n\x0c\r"
_WS_SLASH = _WS + b"/"


def prescan(data: bytes) -> str | None:
    """WHATWG "prescan a byte stream to determine its encoding" over ``data`` (the first 1024 bytes).

    Returns the Python codec name named by the first usable ``<meta charset>`` or ``<meta
    http-equiv=content-type content="...charset=...">``, or None. A UTF-16 label means UTF-8 (the
    bytes could be read as ASCII, so they are not UTF-16); ``x-user-defined`` means cp1252.
    """
    n = len(data)
    pos = 0
    while pos < n:
        if data.startswith(b"<!--", pos):
            end = data.find(b"-->", pos + 2)
            if end == -1:
                return None
            pos = end + 3
            continue
        if data[pos : pos + 5].lower() == b"<meta" and pos + 5 < n and data[pos + 5] in _WS_SLASH:
            pos, codec = _prescan_meta(data, pos + 6)
            if codec is not None:
                return codec
            continue
        if data[pos] == 0x3C and pos + 1 < n:  # '<'
            nxt = data[pos + 1]
            is_letter = 0x61 <= (nxt | 0x20) <= 0x7A
            if nxt == 0x2F and pos + 2 < n and 0x61 <= (data[pos + 2] | 0x20) <= 0x7A:
                is_letter = True
                pos += 1
            if is_letter:
                pos += 1
                while pos < n and data[pos] not in _WS and data[pos] != 0x3E:
                    pos += 1
                while True:
                    pos, attr = _get_attribute(data, pos)
                    if attr is None:
                        break
                continue
            if nxt in (0x21, 0x2F, 0x3F):  # '<!', '</', '<?'
                end = data.find(b">", pos)
                if end == -1:
                    return None
                pos = end + 1
                continue
        pos += 1
    return None


def _prescan_meta(data: bytes, pos: int) -> tuple[int, str | None]:
    seen: set[bytes] = set()
    got_pragma = False
    need_pragma: bool | None = None
    charset: str | None = None
    while True:
        pos, attr = _get_attribute(data, pos)
        if attr is None:
            break
        name, value = attr
        if name in seen:
            continue
        seen.add(name)
        if name == b"http-equiv":
            if value.lower() == b"content-type":
                got_pragma = True
        elif name == b"content":
            if charset is None:
                label = _charset_from_content(value)
                if label is not None:
                    charset = encoding_for_label(label) or ""
                    need_pragma = True
        elif name == b"charset":
            charset = encoding_for_label(value) or ""
            need_pragma = False
    if need_pragma is None or (need_pragma and not got_pragma) or not charset:
        return pos, None
    if charset.startswith("utf-16"):
        charset = "utf-8"
    return pos, charset


def _get_attribute(data: bytes, pos: int) -> tuple[int, tuple[bytes, bytes] | None]:
    """WHATWG "get an attribute" (prescan); returns the new position and (name, value) or None."""
    n = len(data)
    while pos < n and data[pos] in _WS_SLASH:
        pos += 1
    if pos >= n or data[pos] == 0x3E:
        return pos, None
    start = pos
    while pos < n:
        c = data[pos]
        if c == 0x3D and pos > start:  # '='
            break
        if c in _WS or c == 0x2F or c == 0x3E:
            return pos, (data[start:pos].lower(), b"")
        pos += 1
    name = data[start:pos].lower()
    while pos < n and data[pos] in _WS:
        pos += 1
    if pos >= n or data[pos] != 0x3D:
        return pos, (name, b"")
    pos += 1
    while pos < n and data[pos] in _WS:
        pos += 1
    if pos >= n:
        return pos, (name, b"")
    quote = data[pos]
    if quote in (0x22, 0x27):
        end = data.find(bytes([quote]), pos + 1)
        if end == -1:
            return n, (name, data[pos + 1 :].lower())
        return end + 1, (name, data[pos + 1 : end].lower())
    if quote == 0x3E:
        return pos, (name, b"")
    start = pos
    while pos < n and data[pos] not in _WS and data[pos] != 0x3E:
        pos += 1
    return pos, (name, data[start:pos].lower())


def _charset_from_content(value: bytes) -> bytes | None:
    """HTML Standard "extracting a character encoding from a meta element" (``content`` value)."""
    pos = 0
    low = value.lower()
    n = len(low)
    while True:
        i = low.find(b"charset", pos)
        if i == -1:
            return None
        pos = i + 7
        while pos < n and low[pos] in _WS:
            pos += 1
        if pos < n and low[pos] == 0x3D:
            break
    pos += 1
    while pos < n and low[pos] in _WS:
        pos += 1
    if pos >= n:
        return None
    if low[pos] in (0x22, 0x27):
        end = low.find(bytes([low[pos]]), pos + 1)
        return low[pos + 1 : end] if end != -1 else None
    start = pos
    while pos < n and low[pos] not in _WS and low[pos] != 0x3B:
        pos += 1
    return low[start:pos] or None
