"""What one HTTP fetch came to: its :class:`~batchcrawl.records.Outcome`, redirect target, media
type and ``Retry-After`` wait (pure functions of a :class:`~batchcrawl.records.FetchResult`).

The fetch loop (:mod:`batchcrawl.fetch.loop`) uses them to release a host with the right delay,
the page processor (:mod:`batchcrawl.fetch.pages`) to fill a ``fetched`` row.
"""

from __future__ import annotations

from batchcrawl.errors import InvalidURL
from batchcrawl.fetch.directives import retry_after_s
from batchcrawl.records import FetchResult, Outcome
from batchcrawl.urls import redirect_target

RETRY_STATUSES = frozenset({408, 425, 429})
#: Outcomes that do not count as a host error (the host answered).
HOST_OK = frozenset(
    {Outcome.OK, Outcome.TRUNCATED, Outcome.REDIRECT, Outcome.REDIRECT_LOOP, Outcome.NOT_MODIFIED,
     Outcome.GONE, Outcome.HTTP_ERROR}
)  # fmt: skip


def classify(result: FetchResult) -> Outcome:
    """The :class:`~batchcrawl.records.Outcome` of one HTTP fetch.

    Network errors (``result.error``) win; then the status: 2xx is ``ok`` (``truncated`` when the body
    was cut at the size or time limit), 304 ``not_modified``, other 3xx ``redirect`` if a Location is
    given, 404/410 ``gone``, 408/425/429 and 5xx ``server_error`` (transient), other 4xx and odd
    statuses ``http_error`` (permanent for this URL). RFC 9110 §15 for the status classes.
    """
    if result.error == "refused":
        return Outcome.REFUSED
    if result.error == "dns":
        return Outcome.DNS_ERROR
    if result.error is not None or result.status is None:
        return Outcome.NETWORK_ERROR
    status = result.status
    if 200 <= status < 300:
        return Outcome.TRUNCATED if result.truncated else Outcome.OK
    if status == 304:
        return Outcome.NOT_MODIFIED
    if 300 <= status < 400:
        return Outcome.REDIRECT if result.header("Location") else Outcome.HTTP_ERROR
    if status in (404, 410):
        return Outcome.GONE
    if status >= 500 or status in RETRY_STATUSES:
        return Outcome.SERVER_ERROR
    return Outcome.HTTP_ERROR


def location_target(result: FetchResult, base: str) -> str | None:
    """Canonical target of a 3xx's ``Location`` (:func:`~batchcrawl.urls.redirect_target`,
    RFC 9110 §10.2.2) resolved against ``base``, or None when it is missing or unusable."""
    try:
        return redirect_target(result.header("Location") or "", base)
    except InvalidURL:
        return None


def mime_type(content_type: str | None) -> str | None:
    """``Content-Type`` without parameters, lower-case (cc-index ``content_mime_type``)."""
    if not content_type:
        return None
    return content_type.split(";", 1)[0].strip().lower() or None


def retry_after(result: FetchResult, now_s: float, cap_s: float) -> float | None:
    """Seconds a 429/503 asks us to wait (``Retry-After``, RFC 9110 §10.2.3), at most ``cap_s``
    (``politeness.max_retry_after_s``); None for other statuses and absent or bad values.
    ``now_s`` (epoch seconds) dates an HTTP-date value when the response has no finish time."""
    if result.status not in (429, 503):
        return None
    wait = retry_after_s(result.header("Retry-After"), result.finished or now_s)
    return None if wait is None else min(wait, cap_s)
