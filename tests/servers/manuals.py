"""Real documentation sites installed by Debian packages, labelled for the extract tests and
benchmarks (issue 32): the Python manual (``python3.11-doc``, Sphinx) and the aptitude manual in
nine languages (``aptitude-doc-*``, DocBook).

:func:`gold` splits a page into its main text and its navigation by the markup its generator
gives every page (checked by hand on a few pages of each); :func:`language_label` names a page's
language, leaving out the pages a translation left partly in English.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from pathlib import Path

import lxml.html

PYDOC = Path("/usr/share/doc/python3.11/html")
APTITUDE = Path("/usr/share/doc/aptitude/html")
#: Languages of the aptitude manuals (``aptitude-doc-LANG``; folder names, ISO 639-1).
APTITUDE_LANGUAGES = ("cs", "en", "es", "fi", "fr", "it", "ja", "nl", "ru")
#: A translated page with more than this share of its characters in words of the English page of
#: the same name is partly untranslated: :func:`language_label` leaves it out.
MIXED_SHARE = 0.3
_WORD = re.compile(r"\w+")


def words(text: str) -> Counter:
    """The words of ``text`` (``\\w+``, lower-cased) as a multiset."""
    return Counter(w.lower() for w in _WORD.findall(text or ""))


def gold(path: Path) -> tuple[str, str]:
    """``(main text, navigation text)`` of one page of either manual: Sphinx's
    ``div[role=main]`` and its ``div.related``, ``div.sphinxsidebar``, ``div.footer``; DocBook's
    ``body`` without and its ``div.navheader`` / ``div.navfooter``."""
    doc = lxml.html.fromstring(path.read_bytes())
    for bad in doc.xpath("//script|//style"):
        bad.drop_tree()
    if APTITUDE in path.parents:
        nav = doc.xpath("//div[@class='navheader' or @class='navfooter']")
        nav_text = " ".join(n.text_content() for n in nav)
        for n in nav:
            n.drop_tree()
        body = doc.xpath("//body")
        return (body[0].text_content() if body else ""), nav_text
    main = doc.xpath("//div[@role='main']")
    nav = doc.xpath("//div[@class='related' or @class='sphinxsidebar' or @class='footer']")
    return (main[0].text_content() if main else ""), " ".join(n.text_content() for n in nav)


def language_label(path: Path) -> str | None:
    """The language of one aptitude manual page: its folder's, or None (left out) for a
    translated page of which more than :data:`MIXED_SHARE` of the characters are in words of
    its English original (read by hand: English paragraphs under a translated title, a table of
    contents of untranslated pages, a screenshot of the English terminal). The original is the
    English page of the same name; for the ``ld-*`` pages (DocBook long descriptions of
    screenshots, named by generated ids) all of the English manual's."""
    lang = path.parent.name
    if lang == "en":
        return lang
    mine = words(gold(path)[0])
    english = _english_ld() if path.name.startswith("ld-") else _english(path.name)
    shared = sum(len(w) * n for w, n in (mine & english).items())
    total = sum(len(w) * n for w, n in mine.items())
    return None if shared > MIXED_SHARE * max(total, 1) else lang


@functools.cache
def _english(name: str) -> Counter:
    page = APTITUDE / "en" / name
    return words(gold(page)[0]) if page.exists() else Counter()


@functools.cache
def _english_ld() -> Counter:
    out: Counter = Counter()
    for page in sorted((APTITUDE / "en").glob("ld-*.html")):
        out |= _english(page.name)
    return out
