"""Choose the main-text extractor and the language identifier by measurement (issue 32, item 4).

Two samples of real documentation sites installed by Debian packages (nothing is downloaded):

* ``python3.11-doc`` (``/usr/share/doc/python3.11/html``, Sphinx) and ``aptitude-doc-*``
  (``/usr/share/doc/aptitude/html/LANG``, DocBook, the same manual in nine languages).

**Main text.** Each page is labelled by the structure its generator gives it, checked by hand on
a few pages of each site: the *main text* is Sphinx's ``div[role=main]`` and DocBook's ``body``
without ``div.navheader`` / ``div.navfooter``; the *navigation* is Sphinx's ``div.related``,
``div.sphinxsidebar`` and ``div.footer`` and DocBook's nav header and footer. For each extractor
(trafilatura, resiliparse, jusText, readability-lxml) we report, over the words of each page
(``\\w+``, lower-cased, as multisets): recall of the main text, precision (extracted words that are
main text), and navigation kept (navigation-only words that the extractor kept / all of them), and
CPU milliseconds per page (``time.process_time``).

**Language.** Every page of the nine aptitude manuals, labelled with its folder's language; the
input is the page's main text (as above). Accuracy and pages per CPU second of py3langid, pycld2 and
lingua (all ship their models inside the package).

Usage: ``pip install -e '.[extract-bench]'``, then
``PYTHONPATH=. python3 scripts/bench_extract_libs.py [--pages N]`` prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import lxml.html

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/servers/

from servers.manuals import APTITUDE, PYDOC, gold, language_label, words  # noqa: E402


def ex_trafilatura(html: bytes, lang: str) -> str:
    import trafilatura

    return trafilatura.extract(html.decode("utf-8", "replace"), include_tables=True) or ""


def ex_resiliparse(html: bytes, lang: str) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    tree = HTMLTree.parse_from_bytes(html, "utf-8")
    return extract_plain_text(tree, main_content=True)


_JUSTEXT_LANG = {"en": "English", "fr": "French", "es": "Spanish", "it": "Italian",
                 "nl": "Dutch", "cs": "Czech", "fi": "Finnish", "ru": "Russian"}  # fmt: skip


def ex_justext(html: bytes, lang: str) -> str:
    import justext

    name = _JUSTEXT_LANG.get(lang)
    stop = justext.get_stoplist(name) if name else frozenset()
    paras = justext.justext(
        html, stop, **({} if name else {"stopwords_low": 0, "stopwords_high": 0})
    )
    return "\n".join(p.text for p in paras if not p.is_boilerplate)


def ex_readability(html: bytes, lang: str) -> str:
    from readability import Document

    summary = Document(html.decode("utf-8", "replace")).summary()
    return lxml.html.fromstring(summary).text_content()


EXTRACTORS = {
    "trafilatura": ex_trafilatura,
    "resiliparse": ex_resiliparse,
    "justext": ex_justext,
    "readability": ex_readability,
}


def sample(n: int) -> list[tuple[Path, str]]:
    pydoc = sorted(PYDOC.glob("library/*.html"))[
        :: max(1, len(list(PYDOC.glob("library/*.html"))) // n)
    ][:n]
    out = [(p, "en") for p in pydoc]
    for lang in ("en", "fr", "ru", "ja"):
        pages = sorted((APTITUDE / lang).glob("*.html"))
        out += [(p, lang) for p in pages[:: max(1, len(pages) // (n // 4 or 1))][: n // 4 or 1]]
    return out


def bench_main_text(pages: list[tuple[Path, str]]) -> dict:
    labelled = []
    for path, lang in pages:
        main, nav = gold(path)
        g, nv = words(main), words(nav)
        labelled.append((path.read_bytes(), lang, g, nv - g))
    out = {}
    for name, fn in EXTRACTORS.items():
        hit = total_gold = total_got = nav_kept = nav_total = 0
        cpu = 0.0
        for html, lang, g, nav_only in labelled:
            t0 = time.process_time()
            got = words(fn(html, lang))
            cpu += time.process_time() - t0
            hit += sum((got & g).values())
            total_gold += sum(g.values())
            total_got += sum(got.values())
            nav_kept += sum((got & nav_only).values())
            nav_total += sum(nav_only.values())
        out[name] = {
            "recall": round(hit / max(total_gold, 1), 3),
            "precision": round(hit / max(total_got, 1), 3),
            "nav_kept": round(nav_kept / max(nav_total, 1), 3),
            "cpu_ms_per_page": round(1000 * cpu / len(labelled), 2),
        }
    return out


def lang_py3langid():
    from py3langid.langid import LanguageIdentifier

    ident = LanguageIdentifier.from_model_file("data/model.npz.xz", norm_probs=True)
    return lambda text: ident.classify(text)[0]


def lang_pycld2():
    import pycld2

    def detect(text: str) -> str:
        _, _, details = pycld2.detect(text)
        return details[0][1]

    return detect


def lang_lingua():
    from lingua import LanguageDetectorBuilder

    det = LanguageDetectorBuilder.from_all_languages().build()

    def detect(text: str) -> str:
        got = det.detect_language_of(text)
        return got.iso_code_639_1.name.lower() if got else "un"

    return detect


IDENTIFIERS = {"py3langid": lang_py3langid, "pycld2": lang_pycld2, "lingua": lang_lingua}


def bench_language() -> dict:
    pages = []
    for folder in sorted(APTITUDE.iterdir()):
        for path in sorted(folder.glob("*.html")):
            main, _ = gold(path)
            pages.append((language_label(path), " ".join(main.split())))
    out = {"pages": len(pages), "mixed_left_out": sum(1 for lang, _ in pages if lang is None)}
    pages = [(lang, text) for lang, text in pages if lang is not None]
    for name, make in IDENTIFIERS.items():
        t0 = time.process_time()
        detect = make()
        load = time.process_time() - t0
        right = 0
        wrong: Counter = Counter()
        t0 = time.process_time()
        for lang, text in pages:
            got = detect(text)
            if got == lang:
                right += 1
            else:
                wrong[f"{lang}->{got}"] += 1
        cpu = time.process_time() - t0
        out[name] = {
            "accuracy": round(right / len(pages), 4),
            "pages_per_cpu_s": round(len(pages) / cpu, 1),
            "load_cpu_s": round(load, 2),
            "errors": dict(wrong.most_common(5)),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--pages", type=int, default=40, help="Python doc pages (plus as many aptitude)"
    )
    args = ap.parse_args()
    print(
        json.dumps({"main_text": bench_main_text(sample(args.pages)), "language": bench_language()})
    )


if __name__ == "__main__":
    main()
