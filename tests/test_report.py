"""The crawl report (issue 15 item 2): data read through the named queries, one self-contained HTML
page with every figure as inline SVG, empty crawls, the ``batchcrawl report`` command and its exit
codes. tests/test_report_browser.py renders it in Chromium."""

from __future__ import annotations

import datetime as dt
import json
import re

import pytest
from click.testing import CliRunner
from crawl_helpers import T0, small_crawl

from batchcrawl.cli import main
from batchcrawl.config import Config
from batchcrawl.errors import ConfigError
from batchcrawl.report import build_report, write_report
from batchcrawl.report.data import read_report_data
from batchcrawl.report.figures import FIGURES
from batchcrawl.store.crawldir import CrawlDir

KEYS = [key for key, *_ in FIGURES]


def host_row(host: str, *, robots_status, fetched: bool, crawl_delay_s=None) -> dict:
    return {
        "host": host,
        "shard": 0,
        "host_delay_s": 2.0 if crawl_delay_s is None else crawl_delay_s,
        "robots_status": robots_status,
        "robots_fetch_time": T0 if fetched else None,
        "crawl_delay_s": crawl_delay_s,
        "pages_fetched": 1,
        "errors": 0,
    }


@pytest.fixture
def crawl(tmp_path) -> CrawlDir:
    """small_crawl (6 URLs, 5 fetch attempts on a.test and b.test) plus a generation with a hosts
    table: every robots.txt outcome once, a Crawl-delay of 3 s on b.test."""
    crawl = small_crawl(tmp_path / "c")
    hosts = [
        host_row("a.test", robots_status=200, fetched=True),
        host_row("b.test", robots_status=200, fetched=True, crawl_delay_s=3.0),
        host_row("c.test", robots_status=404, fetched=True),
        host_row("d.test", robots_status=503, fetched=True),
        host_row("e.test", robots_status=None, fetched=True),
        host_row("f.test", robots_status=None, fetched=False),
    ]
    m = crawl.manifest()
    crawl.commit(
        m,
        {**m.tables, "hosts": [crawl.write_table("hosts", "hosts/gen=2/shard=00.parquet", hosts)]},
        {
            "step": "round",
            "round": 1,
            "responses": 4,
            "stored": 4,
            "seconds_by_step": {"fetch": 2.0},
        },
        round=1,
    )
    return crawl


def test_report_data_reads_every_query_and_the_manifests(crawl):
    d = read_report_data(crawl, Config())
    assert (d.generation, d.round, d.host_delay_s) == (2, 1, Config().politeness.host_delay_s)
    robots = {(r["counted"], r["outcome"]): r["n"] for r in d.tables["robots-outcomes"]}
    assert robots == {
        ("hosts", "2xx: rules parsed"): 2,
        ("hosts", "4xx: allow all"): 1,
        ("hosts", "5xx: disallow all"): 1,
        ("hosts", "unreachable: disallow all"): 1,
        ("hosts", "not fetched yet"): 1,
        ("hosts", "Crawl-delay set"): 1,
    }
    gaps = {r["host"]: (r["min_gap_s"], r["host_delay_s"]) for r in d.tables["host-intervals"]}
    assert gaps == {"a.test": (1.0, 2.0), "b.test": (1.0, 3.0)}  # both closer than their delay
    # frontier per generation: init (empty), the round, the hosts commit (same frontier)
    assert [g["generation"] for g in d.frontier_by_generation] == [0, 1, 2]
    assert d.frontier_by_generation[0]["by_status"] == {}
    assert d.frontier_by_generation[2]["by_status"]["fetched"] == 3
    assert [(r["generation"], r["stored"]) for r in d.rounds] == [(1, 5), (2, 4)]


def test_older_generation_is_reported_as_it_was(crawl):
    d = read_report_data(crawl, Config(), generation=1)
    assert d.generation == 1 and d.tables["robots-outcomes"] == []
    assert [g["generation"] for g in d.frontier_by_generation] == [0, 1]


def _svgs(html: str) -> dict[str, str]:
    return dict(re.findall(r'<section class="plot" id="fig-([a-z]+)">(.*?)</section>', html, re.S))


def test_report_is_one_self_contained_page_with_every_figure(crawl):
    html, gen = build_report(crawl, Config())
    assert gen == 2
    sections = _svgs(html)
    assert list(sections) == KEYS
    for key, body in sections.items():
        assert body.count("<svg") == 1 and "</svg>" in body, key
    # every plot of this crawl has data, but for the URLs robots.txt kept out (there are none)
    # and the languages (no extract has run: tests/test_extract_crawl.py draws them)
    assert re.findall(r"no data: [^<]*", html) == [
        "no data: robots.txt kept no URL out",
        "no data: no text extracted yet (run batchcrawl extract CRAWL)",
    ]
    # ... said in one line, not in two empty plots 4.2 inches high (450 px)
    height = re.search(r'<svg[^>]*height="([0-9.]+)pt"', sections["languages"])
    assert height and float(height.group(1)) <= 0.5 * 72, sections["languages"][:300]
    # nothing to fetch: no script, no stylesheet or image link, no URL in src/href/url()
    assert not re.search(r"<script|<link|<img|<iframe|@import", html, re.I)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html, re.I)
    assert not re.search(r"url\(\s*['\"]?(https?:|//)", html, re.I)
    assert re.findall(r'xlink:href="([^"]*)"', html) == [] or all(
        ref.startswith("#") for ref in re.findall(r'xlink:href="([^"]*)"', html)
    )
    # the politeness figure names the configured delay, the robots one its outcomes
    assert "configured delay 2 s" in sections["politeness"]
    assert "5xx: disallow all" in sections["robots"] and "a.test" in sections["hosts"]


def test_report_of_a_new_crawl_says_there_is_no_data(tmp_path):
    crawl = CrawlDir.create(str(tmp_path / "new"), "", buckets=2)
    html, gen = build_report(crawl, Config())
    assert gen == 0 and list(_svgs(html)) == KEYS
    for key, body in _svgs(html).items():
        assert "no data:" in body, key


def test_report_command_writes_the_file_and_prints_json(crawl, tmp_path):
    out = tmp_path / "sub" / "r.html"
    out.parent.mkdir()
    result = CliRunner().invoke(main, ["report", crawl.url, "--out", str(out)])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary == {"report": str(out), "generation": 2, "bytes": out.stat().st_size}
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    older = CliRunner().invoke(main, ["report", crawl.url, "--out", str(out), "--generation", "1"])
    assert older.exit_code == 0 and json.loads(older.stdout)["generation"] == 1


def test_report_command_exit_codes(crawl, tmp_path):
    missing = CliRunner().invoke(main, ["report", str(tmp_path / "nope")])
    assert missing.exit_code == 3
    no_gen = CliRunner().invoke(main, ["report", crawl.url, "--generation", "9"])
    assert no_gen.exit_code == 3 and "generation 9 does not exist" in no_gen.stderr
    blocker = tmp_path / "file"
    blocker.write_text("x")
    bad_out = CliRunner().invoke(main, ["report", crawl.url, "--out", str(blocker / "r.html")])
    assert bad_out.exit_code == 2 and "report output" in bad_out.stderr
    # a fresh-user trial (/dev/null/x.html): not "does not exist; mkdir -p", which fails too
    assert f"{blocker} is a file, not a folder" in bad_out.stderr and "mkdir" not in bad_out.stderr
    with pytest.raises(ConfigError, match="report output"):
        write_report(crawl, Config(), str(blocker / "r.html"))
    # a folder that does not exist is not created (issue 34: a mistyped --out left one behind)
    typo = tmp_path / "reprots" / "r.html"
    no_folder = CliRunner().invoke(main, ["report", crawl.url, "--out", str(typo)])
    assert no_folder.exit_code == 2, no_folder.output
    assert f"the folder {typo.parent} does not exist" in no_folder.stderr
    assert not typo.parent.exists()
    # a folder as --out is refused before the report is built, naming a file to write instead
    folder_out = CliRunner().invoke(main, ["report", crawl.url, "--out", str(tmp_path)])
    assert folder_out.exit_code == 2, folder_out.output
    assert f"is a folder; name a file in it, e.g. {tmp_path / 'report.html'}" in folder_out.stderr
    assert "IsADirectoryError" not in folder_out.stderr
    # a folder whose file system takes no new files: what failed, in words, and what to do
    proc_out = CliRunner().invoke(main, ["report", crawl.url, "--out", "/proc/report.html"])
    assert proc_out.exit_code == 2, proc_out.output
    assert (
        "cannot be written (No such file or directory); name a file in a folder you can "
        "write to" in proc_out.stderr
    ), proc_out.stderr
    assert "Error" not in proc_out.stderr


def test_gaps_follow_the_fetch_times(tmp_path):
    """Control for the politeness numbers: moving one request moves the shortest gap."""
    crawl = small_crawl(tmp_path / "c")
    before = read_report_data(crawl, Config()).tables["host-intervals"]
    assert before[0]["host"] == "a.test" and before[0]["min_gap_s"] == 1.0
    m = crawl.manifest()
    rows = crawl.read_table("fetched", list(m.tables["fetched"])).to_pylist()
    for r in rows:
        if r["url"] == "http://a.test/p2":
            r["fetch_time"] = T0 + dt.timedelta(seconds=2, milliseconds=250)
    entry = crawl.write_table("fetched", "fetched/round=1/shard=01.parquet", rows)
    crawl.commit(m, {**m.tables, "fetched": [entry]}, {"step": "edit"}, round=1)
    after = read_report_data(crawl, Config()).tables["host-intervals"]
    assert after[0]["min_gap_s"] == 0.25
