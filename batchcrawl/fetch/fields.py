"""Response header fields at the fetch boundary: every value a table keeps is typed and validated here.

A server may send anything in a header field. What reaches the ``fetched`` table (and, through the
update step, the frontier and the next request) is one of: a validated value in the form the
crawl stores and sends back, or NULL with the field's name in ``fetched.header_errors`` and a
``header_rejected:<field>`` counter. No value raises.

* ``Last-Modified`` (RFC 9110 §8.8.2) in any of the three HTTP-date forms of RFC 9110 §5.6.7
  (IMF-fixdate, RFC 850, asctime) is kept as an **IMF-fixdate**, the form a sender MUST generate:
  it goes back as ``If-Modified-Since``.
* ``ETag`` (RFC 9110 §8.8.3): a strong or weak entity-tag, kept as sent; an unquoted opaque value
  of visible characters (a common server error) is kept too, since it is compared as sent.
* ``Content-Type`` (RFC 9110 §8.3.1): ``type/subtype`` of tokens, lower-case, parameters dropped.
* ``Retry-After`` (RFC 9110 §10.2.3) on a 429 or 503: delay-seconds or an HTTP-date, as seconds
  from the response (see :func:`batchcrawl.fetch.directives.retry_after_s`), capped by the caller.
* ``Link`` (RFC 8288 §3): the target of ``rel="canonical"`` (RFC 6596), resolved against the URL.
* ``Date`` (RFC 9110 §6.6.1): validated only (an HTTP-date or rejected); nothing stores it.
* ``X-Robots-Tag``: :func:`batchcrawl.fetch.directives.x_robots_tag`, which never rejects.

``Location`` is validated by :func:`batchcrawl.urls.redirect_target` (the worker's redirect
step) and ``Content-Length`` by the HTTP layer (a bad one is a ``bad_response`` fetch error).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import ada_url

from batchcrawl.fetch.directives import RobotsDirectives, retry_after_s, x_robots_tag
from batchcrawl.httpdate import http_date, imf_fixdate

__all__ = [
    "ResponseFields",
    "entity_tag",
    "link_canonical",
    "media_type",
    "response_fields",
]

#: Longest header value read as a validator or media type (longer ones are rejected), characters.
MAX_VALUE_CHARS = 1024

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_MEDIA_TYPE = re.compile(rf"({_TOKEN})/({_TOKEN})", re.ASCII)
_ENTITY_TAG = re.compile(r'(?:W/)?"[\x21\x23-\x7e\x80-\xff]*"')
_OPAQUE = re.compile(r"[\x21\x23-\x2b\x2d-\x7e\x80-\xff]+")  # visible, no DQUOTE or comma
_LINK_VALUE = re.compile(r'\s*<([^>]*)>((?:[^,"]|"(?:[^"\\]|\\.)*")*)')
_LINK_PARAM = re.compile(rf'\s*;\s*({_TOKEN})\s*(?:=\s*("(?:[^"\\]|\\.)*"|[^;,\s]*))?', re.ASCII)


def entity_tag(value: str | None) -> str | None:
    """An ``ETag`` value (RFC 9110 §8.8.3) as sent, or None when absent, empty or unusable (space,
    control character, a stray quote or comma, over :data:`MAX_VALUE_CHARS`)."""
    if value is None:
        return None
    value = value.strip()
    if not value or len(value) > MAX_VALUE_CHARS:
        return None
    if _ENTITY_TAG.fullmatch(value) or _OPAQUE.fullmatch(value):
        return value
    return None


def media_type(value: str | None) -> str | None:
    """``type/subtype`` of a ``Content-Type`` value (RFC 9110 §8.3.1), lower-case, parameters
    dropped (cc-index ``content_mime_type``); None when absent or not two tokens."""
    if value is None:
        return None
    head = value.split(";", 1)[0].strip()
    if len(head) > MAX_VALUE_CHARS or not _MEDIA_TYPE.fullmatch(head):
        return None
    return head.lower()


def link_canonical(values: Iterable[str], base: str) -> str | None:
    """The absolute http(s) target of the first ``rel="canonical"`` link (RFC 6596) in ``Link``
    header values (RFC 8288 §3: ``<uri-reference>; rel="canonical"``, several links per value,
    comma-separated; ``rel`` may list several relation types), resolved against ``base``.
    None when there is none or its target does not resolve to an http(s) URL."""
    for value in values:
        pos = 0
        while True:
            m = _LINK_VALUE.match(value, pos)
            if m is None:
                break
            target, params = m.group(1), m.group(2)
            pos = m.end() + 1  # past the comma
            rels = [
                (p.group(2) or "").strip('"').lower().split()
                for p in _LINK_PARAM.finditer(params)
                if p.group(1).lower() == "rel"
            ]
            if rels and "canonical" in rels[0]:
                return _resolve(target.strip(), base)
    return None


def _resolve(target: str, base: str) -> str | None:
    try:
        url = ada_url.join_url(base, target)
    except ValueError:
        return None
    return url if url.startswith(("http:", "https:")) else None


@dataclass(frozen=True)
class ResponseFields:
    """The validated header fields of one response (see the module docstring).

    Attributes
    ----------
    content_mime_type, etag, last_modified
        As stored in ``fetched``; ``last_modified`` is an IMF-fixdate.
    retry_after_s
        Seconds (capped) a 429/503 asks to wait; None for other statuses or without a usable value.
    canonical_url
        Target of a ``Link: <...>; rel="canonical"`` header, absolute; None if none.
    robots
        ``X-Robots-Tag`` directives for our agent.
    rejected
        Names of the fields present but unusable, in a fixed order (``fetched.header_errors``).
    """

    content_mime_type: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    retry_after_s: float | None = None
    canonical_url: str | None = None
    robots: RobotsDirectives = RobotsDirectives()
    rejected: tuple[str, ...] = ()


def response_fields(
    headers: list[tuple[str, str]],
    *,
    status: int | None,
    url: str,
    agent: str,
    received: float,
    max_retry_after_s: float,
) -> ResponseFields:
    """Read and validate the header fields of one response.

    Parameters
    ----------
    headers
        Response header lines ``(name, value)`` as received (``FetchResult.response_headers``).
    status
        HTTP status; ``Retry-After`` is read for 429 and 503 only (RFC 9110 §10.2.3).
    url
        The URL requested (the base of a relative ``Link`` target).
    agent
        Robots product token (``X-Robots-Tag`` scoping).
    received
        Epoch seconds the response arrived (the origin of an HTTP-date ``Retry-After``).
    max_retry_after_s
        Cap of ``retry_after_s`` (``politeness.max_retry_after_s``), seconds.

    Never raises for any header value.
    """
    first: dict[str, str] = {}
    links: list[str] = []
    tags: list[str] = []
    for name, value in headers:
        lname = name.lower()
        first.setdefault(lname, value)
        if lname == "link":
            links.append(value)
        elif lname == "x-robots-tag":
            tags.append(value)
    rejected: list[str] = []

    def check(name: str, raw: str | None, got: object) -> None:
        if raw is not None and raw.strip() and got is None:
            rejected.append(name)

    ctype = media_type(first.get("content-type"))
    check("content_type", first.get("content-type"), ctype)
    etag = entity_tag(first.get("etag"))
    check("etag", first.get("etag"), etag)
    modified = http_date(first.get("last-modified"))
    check("last_modified", first.get("last-modified"), modified)
    check("date", first.get("date"), http_date(first.get("date")))
    wait = None
    if status in (429, 503):
        wait = retry_after_s(first.get("retry-after"), received)
        check("retry_after", first.get("retry-after"), wait)
    canonical = link_canonical(links, url) if links else None
    return ResponseFields(
        content_mime_type=ctype,
        etag=etag,
        last_modified=imf_fixdate(modified) if modified is not None else None,
        retry_after_s=None if wait is None else min(wait, max_retry_after_s),
        canonical_url=canonical,
        robots=x_robots_tag(tags, agent),
        rejected=tuple(rejected),
    )
