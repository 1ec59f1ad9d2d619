"""Pages per second per core of ``batchcrawl extract`` (issue 32) on a real site crawled on loopback.

Crawls a Debian documentation site served on 127.0.0.1 by ``scripts/crawl_pydoc.py``'s
:func:`crawl_docs` (``--site aptitude``: the aptitude manual in nine languages, the default;
``--site pydoc``: the Python manual), then extracts it twice from copies of the crawl:

* in this process (``extract_crawl`` without a cluster): ``cpu_s`` is this process's CPU time, so
  ``pages_per_cpu_s`` is pages per second per core, WARC reading, WET and Parquet writing included;
* on the embedded LocalCluster (``batchcrawl extract``'s path, ``--workers`` processes): wall time.

``html_200_captures`` counts the crawl's HTML 200 captures and ``with_text_row`` those that have a
``text`` row (issue 32: every one should).

Then, over the same HTML payloads, the CPU per page of each part: ``page_ms`` (Resiliparse:
parse, main text, visible text, metadata) and ``language_ms`` (CLD2).

The at-fetch CPU cost per page (issue 32 item 2, ``extract.at_fetch``): the site is crawled again
``--at-fetch-pairs`` times in pairs, once with ``at_fetch`` off and once on (the order alternating
from pair to pair, so drift in the machine's load falls on both sides), and each crawl's fetch
threads' CPU seconds (``fetch_cpu_s`` of its round summaries, all phases) are divided by its stored
captures: ``off_ms`` and ``on_ms`` per pair, their difference ``delta_ms``, its median, and
``extract_ms`` (the ``extract`` phase alone, ``cpu_extract_s``, per stored capture); and the
at-fetch crawl's HTML 200 captures and those with a ``text`` row (every one should have one).

Prints one JSON line. The machine may be shared: rates are as measured.
Usage: ``PYTHONPATH=. python3 scripts/bench_extract.py [--site aptitude|pydoc] [--workers 2]
[--at-fetch-pairs 2]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from batchcrawl.engine.cluster import cluster_url, dask_client
from batchcrawl.extract import extract_crawl
from batchcrawl.extract.language import identify
from batchcrawl.extract.page import PageSkipped, extract_page
from batchcrawl.extract.payload import read_payload
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.sql import query

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/servers/

from servers.manuals import APTITUDE, APTITUDE_LANGUAGES, PYDOC  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _crawl_pydoc():
    spec = importlib.util.spec_from_file_location("crawl_pydoc", REPO / "scripts/crawl_pydoc.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def site_root(site: str, work: Path) -> Path:
    """The folder to serve: the Python manual, or the nine aptitude manuals under one index."""
    if site == "pydoc":
        return PYDOC
    root = work / "site"
    for lang in APTITUDE_LANGUAGES:
        shutil.copytree(APTITUDE / lang, root / lang)
    links = "".join(f'<a href="{lang}/index.html">{lang}</a> ' for lang in APTITUDE_LANGUAGES)
    (root / "index.html").write_text(f"<html><body>{links}</body></html>")
    return root


def html_payloads(crawl: CrawlDir) -> list[bytes]:
    """The HTML 200 payloads of the crawl's WARC files."""
    out = []
    names = query(crawl, "SELECT DISTINCT warc_filename AS f FROM fetched WHERE fetch_status = 200 "
                         "AND content_mime_type = 'text/html'").to_pylist()  # fmt: skip
    for row in names:
        with open(crawl.path(row["f"]), "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response" and rec.http_headers.get_statuscode() == "200":
                    ctype = rec.http_headers.get_header("Content-Type") or ""
                    if ctype.startswith("text/html"):
                        out.append(read_payload(rec))
    return out


def fetch_cpu_per_page(run) -> tuple[float, float, int]:
    """(fetch-thread CPU ms per stored capture, all phases; of the ``extract`` phase; stored
    captures) of a :func:`crawl_docs` run, from its round summaries and ``fetched`` table."""
    cpu = sum(sum(s["fetch_cpu_s"].values()) for s in run.summaries)
    extract = sum(s["fetch_cpu_s"].get("extract", 0.0) for s in run.summaries)
    stored = query(run.crawl, "SELECT count(*) AS n FROM fetched "
                              "WHERE warc_filename IS NOT NULL").to_pylist()[0]["n"]  # fmt: skip
    return 1000 * cpu / stored, 1000 * extract / stored, stored


def covered(crawl: CrawlDir) -> tuple[int, int]:
    """(HTML 200 captures, those with a ``text`` row) of ``crawl``."""
    html_200 = query(crawl, "SELECT count(*) AS n FROM fetched WHERE fetch_status = 200 AND "
                            "content_mime_type = 'text/html'").to_pylist()[0]["n"]  # fmt: skip
    with_row = query(crawl, "SELECT count(*) AS n FROM text JOIN fetched USING (warc_filename, "
                            "warc_record_offset) WHERE fetched.fetch_status = 200 AND "
                            "fetched.content_mime_type = 'text/html'").to_pylist()[0]["n"]  # fmt: skip
    return html_200, with_row


def at_fetch_pairs(mod, site: Path, work: Path, pairs: int) -> dict:
    """Crawl ``site`` ``pairs`` times with ``extract.at_fetch`` off and on (alternating which
    goes first) and compare the fetch threads' CPU per page (see the module docstring)."""
    rows = []
    for i in range(pairs):
        got = {}
        for on in (False, True) if i % 2 == 0 else (True, False):
            run = mod.crawl_docs(site, work / f"pair{i}-{int(on)}", max_rounds=60, at_fetch=on)
            got[on] = (*fetch_cpu_per_page(run), covered(run.crawl) if on else None)
        (off_ms, _, off_n, _), (on_ms, ext_ms, on_n, cover) = got[False], got[True]
        rows.append({"off_ms": round(off_ms, 3), "on_ms": round(on_ms, 3),
                     "delta_ms": round(on_ms - off_ms, 3), "extract_ms": round(ext_ms, 3),
                     "pages": [off_n, on_n],
                     "html_200_with_text_row": list(cover)})  # fmt: skip
    deltas = sorted(r["delta_ms"] for r in rows)
    extracts = sorted(r["extract_ms"] for r in rows)
    return {
        "pairs": rows,
        "median_delta_cpu_ms_per_page": deltas[len(deltas) // 2] if deltas else None,
        "median_extract_ms_per_page": extracts[len(extracts) // 2] if extracts else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--site", choices=("aptitude", "pydoc"), default="aptitude")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--at-fetch-pairs",
        type=int,
        default=2,
        help="off/on crawl pairs measuring extract.at_fetch's CPU (0: none)",
    )
    args = ap.parse_args()
    mod = _crawl_pydoc()
    with tempfile.TemporaryDirectory(prefix="bench-extract-") as tmp:
        work = Path(tmp)
        site = site_root(args.site, work)
        run = mod.crawl_docs(site, work, max_rounds=60)
        copies = [work / "a", work / "b"]
        for c in copies:
            shutil.copytree(run.crawl.root, c)
        cpu0, wall0 = time.process_time(), time.monotonic()
        local = extract_crawl(CrawlDir.open(str(copies[0])))
        cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
        cfg = run.cfg.replace(round={"workers": args.workers})
        with dask_client(cfg) as client:
            wall1 = time.monotonic()
            extract_crawl(CrawlDir(cluster_url(str(copies[1]))), client)
            cluster_wall = time.monotonic() - wall1
        payloads = html_payloads(run.crawl)
        t0 = time.process_time()
        texts = []
        for p in payloads:
            try:
                texts.append(extract_page(p, None).main_text)
            except PageSkipped:
                continue
        page_cpu = time.process_time() - t0
        t0 = time.process_time()
        for text in texts:
            identify(text)
        lang_cpu = time.process_time() - t0
        html_200, with_row = covered(CrawlDir.open(str(copies[0])))
        at_fetch = at_fetch_pairs(mod, site, work, args.at_fetch_pairs)
    pages = local["rows"]
    print(json.dumps({
        "site": args.site,
        "pages": pages,
        "warc_files": local["warc_files"],
        "html_200_captures": html_200,
        "with_text_row": with_row,
        "cpu_s": round(cpu, 3),
        "pages_per_cpu_s": round(pages / cpu, 1),
        "in_process_wall_s": round(wall, 3),
        "cluster_workers": args.workers,
        "cluster_wall_s": round(cluster_wall, 3),
        "cluster_pages_per_s": round(pages / cluster_wall, 1),
        "page_ms": round(1000 * page_cpu / max(len(payloads), 1), 3),
        "language_ms": round(1000 * lang_cpu / max(len(texts), 1), 3),
        "at_fetch": at_fetch,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
