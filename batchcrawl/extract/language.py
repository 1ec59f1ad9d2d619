"""Languages of a page's text, as Common Crawl's ``content_languages`` (issue 32).

CLD2 (Compact Language Detector 2, through ``pycld2``): its model is compiled into the package,
nothing is downloaded at run time; it names up to three languages with their share of the text,
which is what Common Crawl publishes per capture. On the nine aptitude manuals it was as accurate
as py3langid and lingua and 10-100x faster (docs/extract.md, ``scripts/bench_extract_libs.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pycld2

#: Characters of text given to CLD2: its accuracy stops growing long before this, its time not.
MAX_CHARS = 20_000
#: CLD2's code for "no language found".
UNKNOWN = "un"


@dataclass(frozen=True)
class Languages:
    """Languages of one text, most of the text first: ``codes`` ISO 639-1 (CLD2's, e.g. ``en``;
    a few languages without one keep CLD2's code, e.g. ``zh-Hant``), ``shares`` the percent of
    the text in each (0-100). Empty when none was found. ``reliable``: CLD2's own verdict."""

    codes: tuple[str, ...]
    shares: tuple[int, ...]
    reliable: bool

    @property
    def top(self) -> str | None:
        """The language of most of the text, or None."""
        return self.codes[0] if self.codes else None

    @property
    def content_languages(self) -> str | None:
        """Comma-separated codes, as Common Crawl's ``content_languages`` column, or None."""
        return ",".join(self.codes) or None


def identify(text: str) -> Languages:
    """The languages of ``text`` (any length; the first :data:`MAX_CHARS` characters are read).

    Characters CLD2 refuses (C0/C1 controls, lone surrogates) are dropped first, so no text
    raises."""
    sample = _clean(text[:MAX_CHARS])
    if not sample.strip():
        return Languages((), (), False)
    reliable, _, details = pycld2.detect(sample)
    codes, shares = [], []
    for _name, code, percent, _score in details:
        if code != UNKNOWN and percent > 0:
            codes.append(code)
            shares.append(int(percent))
    return Languages(tuple(codes), tuple(shares), bool(reliable))


#: C0 controls (but tab, LF, CR), DEL and C1 controls: deleted before CLD2 reads the text.
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _clean(text: str) -> str:
    """``text`` without lone surrogates and control characters (CLD2 rejects both)."""
    return _CONTROLS.sub("", text.encode("utf-8", "ignore").decode("utf-8"))
