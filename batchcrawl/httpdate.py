"""HTTP-dates (RFC 9110 §5.6.7): read in all three forms, written as IMF-fixdate.

A recipient must read IMF-fixdate (``Sun, 06 Nov 1994 08:49:37 GMT``), the obsolete RFC 850 form
(``Sunday, 06-Nov-94 08:49:37 GMT``) and ANSI C asctime (``Sun Nov  6 08:49:37 1994``); a sender
MUST generate IMF-fixdate. ``Last-Modified`` is stored in that form, so ``If-Modified-Since`` is
sent in it whatever form the server used (:mod:`batchcrawl.fetch.fields`).
"""

from __future__ import annotations

import calendar
import email.utils
import re
import time

__all__ = ["http_date", "imf_fixdate"]

_MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_abbr) if m}
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
_LONG_DAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)"
_TIME = r"(\d\d):(\d\d):(\d\d)"
_IMF = re.compile(rf"{_DAY}, (\d\d) ([A-Za-z]{{3}}) (\d{{4}}) {_TIME} GMT", re.ASCII | re.I)
_RFC850 = re.compile(rf"{_LONG_DAY}, (\d\d)-([A-Za-z]{{3}})-(\d\d) {_TIME} GMT", re.ASCII | re.I)
_ASCTIME = re.compile(rf"{_DAY} ([A-Za-z]{{3}}) ([ \d]\d) {_TIME} (\d{{4}})", re.ASCII | re.I)


def http_date(value: str | None, *, now: float | None = None) -> float | None:
    """An HTTP-date as epoch seconds (UTC), or None when absent or invalid.

    Day names are not checked against the date; a leap second (``:60``) reads as ``:59``; years
    outside 1900..9999 are invalid. An RFC 850 two-digit year more than 50 years after the year of
    ``now`` (epoch seconds; default the current time) is in the previous century (RFC 9110 §5.6.7).
    """
    if value is None:
        return None
    value = value.strip()
    if len(value) > 64:
        return None
    if m := _IMF.fullmatch(value):
        day, mon, year, hh, mm, ss = m.groups()
        year = int(year)
    elif m := _RFC850.fullmatch(value):
        day, mon, yy, hh, mm, ss = m.groups()
        this_year = time.gmtime(time.time() if now is None else now).tm_year
        year = this_year - this_year % 100 + int(yy)
        if year > this_year + 50:
            year -= 100
    elif m := _ASCTIME.fullmatch(value):
        mon, day, hh, mm, ss, year = m.groups()
        year = int(year)
    else:
        return None
    month = _MONTHS.get(mon.lower())
    day, hh, mm, ss = int(day), int(hh), int(mm), min(int(ss), 59)
    if month is None or not 1900 <= year <= 9999 or hh > 23 or mm > 59:
        return None
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    return float(calendar.timegm((year, month, day, hh, mm, ss, 0, 0, 0)))


def imf_fixdate(epoch_s: float) -> str:
    """``epoch_s`` (seconds, UTC) as an IMF-fixdate, e.g. ``Fri, 01 Nov 2019 20:00:00 GMT``;
    fractions of a second are dropped."""
    return email.utils.formatdate(int(epoch_s), usegmt=True)
