"""``batchcrawl extract`` on a real multilingual site (issue 32): the aptitude manual in nine
languages (Debian's ``aptitude-doc-*``), served on loopback by ``scripts/crawl_pydoc.py``'s
:func:`crawl_docs` under ``docs.test`` and crawled until nothing is due; then extracted by the
CLI on the embedded LocalCluster.

Ground truth: the language of each page from its manual's folder
(:func:`servers.manuals.language_label`, which leaves out pages a translation left in
English); the crawl's own ``fetched`` table for which captures are HTML 200 responses; the WARC
files for the response record ids. A copy of the crawl taken before the extract is extracted by a
process SIGKILLed after its third WARC file, then again: it must give the rows and WET bytes of
the clean run.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
import pytest
from click.testing import CliRunner
from round_helpers import REPO, subprocess_env
from servers.manuals import APTITUDE, APTITUDE_LANGUAGES, language_label
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.cli import main
from batchcrawl.extract import extract_crawl
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.sql import named_query, query

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(400),
    pytest.mark.skipif(
        not all((APTITUDE / lang / "index.html").is_file() for lang in APTITUDE_LANGUAGES),
        reason=f"{APTITUDE}/LANG is absent: install the Debian packages aptitude-doc-cs, -en, -es, "
        "-fi, -fr, -it, -ja, -nl, -ru (scripts/test.sh does)",
    ),
]


def _crawl_docs():
    spec = importlib.util.spec_from_file_location("crawl_pydoc", REPO / "scripts/crawl_pydoc.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.crawl_docs


@pytest.fixture(scope="module")
def manuals(tmp_path_factory):
    """(crawl extracted by the CLI, its summary, an unextracted copy of the crawl)."""
    site = tmp_path_factory.mktemp("site")
    for lang in APTITUDE_LANGUAGES:
        shutil.copytree(APTITUDE / lang, site / lang)
    links = "".join(
        f'<li><a href="{lang}/index.html">{lang}</a></li>' for lang in APTITUDE_LANGUAGES
    )
    (site / "index.html").write_text(f"<html><body><ul>{links}</ul></body></html>")
    work = tmp_path_factory.mktemp("manuals")
    run = _crawl_docs()(site, work, max_rounds=40)
    copy = work / "copy"
    shutil.copytree(run.crawl.root, copy)
    result = CliRunner().invoke(main, ["extract", run.crawl.url, "--workers", "2"])
    assert result.exit_code == 0, result.output
    return run.crawl, json.loads(result.stdout.strip().splitlines()[-1]), CrawlDir.open(str(copy))


def test_a_text_row_for_every_html_200_capture(manuals):
    crawl, summary, _ = manuals
    html = query(crawl, "SELECT warc_filename AS f, warc_record_offset AS o FROM fetched "
                        "WHERE fetch_status = 200 AND content_mime_type = 'text/html'").to_pylist()  # fmt: skip
    rows = query(crawl, "SELECT warc_filename AS f, warc_record_offset AS o, record_type, reason, "
                        "main_text_length FROM text").to_pylist()  # fmt: skip
    assert len(html) > 700
    assert {(r["f"], r["o"]) for r in rows} == {(r["f"], r["o"]) for r in html}
    assert len(rows) == len(html) == summary["rows"] and summary["damaged"] == []
    assert all(r["main_text_length"] > 0 for r in rows)  # revisits filled from their original
    assert summary["generation"] == crawl.manifest().generation
    with duckdb.connect(crawl.path("crawl.duckdb"), read_only=True) as con:  # the file's view too
        assert con.execute("SELECT count(*) FROM text").fetchall() == [(len(rows),)]


def test_the_language_is_right_on_98_percent_of_the_pages(manuals):
    crawl, _, _ = manuals
    rows = query(crawl, "SELECT url, content_languages FROM text").to_pylist()
    right = total = 0
    wrong = []
    for r in rows:
        path = urlsplit(r["url"]).path.lstrip("/")
        if path.count("/") != 1 or path.endswith("/"):
            continue  # the site's own index page
        truth = language_label(APTITUDE / path)
        if truth is None:
            continue
        total += 1
        got = (r["content_languages"] or "").split(",")[0]
        right += got == truth
        if got != truth:
            wrong.append((path, truth, got))
    assert total > 550
    assert right >= 0.98 * total, (right, total, wrong[:10])
    languages = {r["language"] for r in named_query_rows(crawl, "pages-per-language")}
    assert set(APTITUDE_LANGUAGES) <= languages
    per_host = named_query_rows(crawl, "languages-per-host")
    assert {r["host"] for r in per_host} == {"docs.test"}


def named_query_rows(crawl: CrawlDir, name: str) -> list[dict]:
    return query(crawl, named_query(name)).to_pylist()


def test_wet_records_point_at_their_responses_and_warcio_checks_them(manuals):
    crawl, _, _ = manuals
    wets = []
    for warc in sorted({r["f"] for r in query(crawl, "SELECT DISTINCT warc_filename AS f FROM "
                                                     "text").to_pylist()}):  # fmt: skip
        responses = {}
        with open(crawl.path(warc), "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "response":
                    h = rec.rec_headers
                    responses[h.get_header("WARC-Record-ID")] = h.get_header("WARC-Target-URI")
        wet = crawl.path(paths.wet_file(warc))
        with open(wet, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type == "conversion":
                    h = rec.rec_headers
                    assert responses[h.get_header("WARC-Refers-To")] == h.get_header(
                        "WARC-Target-URI"
                    )
        wets.append(wet)
    check = subprocess.run([sys.executable, "-m", "warcio.cli", "check", *wets],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]


def test_sigkill_mid_extract_then_rerun_gives_the_rows_of_one_clean_run(manuals):
    crawl, summary, copy = manuals
    before = copy.generations()
    proc = subprocess.run([sys.executable, str(REPO / "tests/extract_helpers.py"), copy.url, "3"],
                          capture_output=True, text=True, env=subprocess_env(), timeout=300)  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert proc.stdout.count("DONE ") == 3 and "FINISHED" not in proc.stdout
    assert copy.generations() == before  # nothing committed
    rerun = extract_crawl(copy)
    assert rerun["reused"] == 3 and rerun["warc_files"] == summary["warc_files"]
    order = "ORDER BY warc_filename, warc_record_offset"
    clean = query(crawl, f"SELECT * FROM text {order}")
    again = query(copy, f"SELECT * FROM text {order}")
    assert again.num_rows == clean.num_rows and again.equals(clean)
    for warc in {r["warc_filename"] for r in again.select(["warc_filename"]).to_pylist()}:
        wet = paths.wet_file(warc)
        assert Path(copy.path(wet)).read_bytes() == Path(crawl.path(wet)).read_bytes()
    assert extract_crawl(copy)["generation"] is None  # and a third run has nothing to do


def test_export_text_and_wet_with_the_index_languages_filled(manuals, tmp_path):
    crawl, _, _ = manuals
    dest = tmp_path / "lake"
    result = CliRunner().invoke(
        main, ["export", crawl.url, str(dest), "--tables", "text,wet,index"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    text = query(crawl, "SELECT * FROM text")
    assert summary["rows"]["text"] == text.num_rows and summary["wet_files"] > 0
    lake = duckdb.sql(
        f"SELECT * FROM read_parquet('{dest}/text/*/*/*.parquet', hive_partitioning = true)"
    ).to_arrow_table()
    assert lake.num_rows == text.num_rows
    assert set(lake.column("crawl").to_pylist()) == {"crawl"}
    wets = sorted(p for p in dest.glob("wet/crawl=crawl/round=*/*.warc.wet.gz"))
    assert len(wets) == summary["wet_files"]
    for row in lake.select(["wet_filename"]).to_pylist():
        assert row["wet_filename"] is None or (dest / row["wet_filename"]).is_file()
    index = duckdb.sql(
        f"SELECT url, content_languages FROM read_parquet('{dest}/index/*/*/*.parquet') "
        "WHERE subset = 'warc' AND content_mime_type = 'text/html'"
    ).fetchall()
    languages = {r["url"]: r["content_languages"] for r in text.to_pylist()}
    assert index and all(lang == languages[url] for url, lang in index)
    assert sum(lang is not None for _, lang in index) > 700


def test_report_draws_pages_per_language(manuals):
    from batchcrawl.config import loopback_test_config
    from batchcrawl.report import build_report, data, text_plots

    crawl, _, _ = manuals
    d = data.read_report_data(crawl, loopback_test_config())
    per_language = {r["language"]: r["pages"] for r in d.tables["pages-per-language"]}
    assert set(APTITUDE_LANGUAGES) <= set(per_language)
    fig = text_plots.languages(d)
    labels = {t.get_text() for t in fig.axes[0].get_yticklabels()}
    assert set(APTITUDE_LANGUAGES) <= labels
    html, _ = build_report(crawl, loopback_test_config())
    assert 'id="fig-languages"' in html
