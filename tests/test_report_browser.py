"""The crawl report in a real browser (issue 15 item 3): a SampleWeb crawled on loopback, its report
written by ``batchcrawl report``, opened in headless Chromium; every plot must have drawn (coloured
data marks in its screenshot area), the page must load nothing and log nothing. Controls show that
the checks fail on an emptied plot, a console error and an outside resource."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from browser_helpers import chromium, ink, probe, screenshot
from click.testing import CliRunner
from round_helpers import new_crawl, round_config, sample_web, serve

from batchcrawl.cli import main
from batchcrawl.report.figures import FIGURES
from batchcrawl.round import run_rounds

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(300),
    pytest.mark.skipif(
        chromium() is None,
        reason="Chromium is not installed (Debian package chromium; scripts/test.sh installs it)",
    ),
]

KEYS = [f"fig-{key}" for key, *_ in FIGURES]
#: Least share of coloured pixels in a plot's area for it to count as drawn (the thinnest plot,
#: lines over time, has about 1 %; an empty or axes-only plot has 0).
MIN_INK = 0.003


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The report of a SampleWeb (6 hosts, 90 pages, robots.txt variants, dead links) after 3
    rounds, written by the CLI."""
    work = tmp_path_factory.mktemp("report")
    web = sample_web()
    cfg = round_config()
    with serve(web):
        crawl = new_crawl(work / "crawl", cfg, web.seeds())
        run_rounds(crawl.url, cfg, 3)
    # the text and languages of the captures too, so the languages plot has data to draw
    extracted = CliRunner().invoke(main, ["extract", crawl.url, "--workers", "1"])
    assert extracted.exit_code == 0, extracted.output
    out = work / "report.html"
    result = CliRunner().invoke(main, ["report", crawl.url, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["report"] == str(out)
    return out


def test_every_plot_draws_in_chromium_without_errors(report, tmp_path):
    seen = probe(report, tmp_path)
    assert [f["id"] for f in seen.figures] == KEYS
    assert all(f["svg"] and f["w"] > 600 and f["h"] > 150 for f in seen.figures), seen.figures
    assert seen.errors == [] and seen.console == []
    assert seen.resources == []  # self-contained: the page fetched nothing
    assert seen.width <= 1000  # no horizontal overflow at this width
    png = tmp_path / "report.png"
    assert screenshot(report, png, seen.height, tmp_path) == []  # no console output
    drawn = {f["id"]: ink(png, f) for f in seen.figures}
    assert all(v >= MIN_INK for v in drawn.values()), drawn
    assert "no data:" not in report.read_text(encoding="utf-8")
    shutil.copy(png, report.with_suffix(".png"))  # kept beside the report for a look


def test_checks_fail_on_an_empty_plot_a_console_error_and_an_outside_resource(report, tmp_path):
    """Control: the same page with its politeness plot emptied (same size, nothing drawn), a
    console.error and an image from outside is caught by every check."""
    html = report.read_text(encoding="utf-8")
    section = re.search(
        r'(<section class="plot" id="fig-politeness">.*?)(<svg.*?</svg>)', html, re.S
    )
    svg = section.group(2)
    size = re.match(r'<svg[^>]*?(width="[^"]*" height="[^"]*" viewBox="[^"]*")', svg).group(1)
    broken = html.replace(svg, f'<svg xmlns="http://www.w3.org/2000/svg" {size}></svg>', 1)
    broken = broken.replace(
        "</main>",
        '<img src="http://outside.example/x.png" alt=""><script>console.error("boom")</script></main>',
    )
    page = tmp_path / "broken.html"
    page.write_text(broken, encoding="utf-8")
    seen = probe(page, tmp_path)
    assert "error: boom" in seen.errors
    assert "resource: http://outside.example/x.png" in seen.errors
    assert seen.resources == ["http://outside.example/x.png"]
    png = tmp_path / "broken.png"
    assert any("boom" in line for line in screenshot(page, png, seen.height, tmp_path))
    drawn = {f["id"]: ink(png, f) for f in seen.figures}
    assert drawn.pop("fig-politeness") < MIN_INK / 10
    assert all(v >= MIN_INK for v in drawn.values()), drawn
