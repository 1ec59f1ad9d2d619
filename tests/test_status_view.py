"""``batchcrawl status`` at 80 columns (issue 15 item 6): long values wrap, big counts shorten,
the generations table keeps short columns; ``--format json`` keeps every field."""

from __future__ import annotations

import io
import json

from click.testing import CliRunner
from crawl_helpers import small_crawl
from rich.console import Console
from rich.table import Table

from batchcrawl.cli import main
from batchcrawl.console.status_view import MAX_GENERATIONS, status_tables

LONG_URL = "s3://a-very-long-bucket-name/projects/2026/november/the-big-crawl-of-everything/run-1"


def render(tables, width: int = 80) -> list[str]:
    buf = io.StringIO()
    console = Console(file=buf, width=width, soft_wrap=False, color_system=None)
    for t in tables:
        console.print(t)
    return buf.getvalue().splitlines()


def big_status(generations: int = 25) -> dict:
    gens = [
        {"generation": g, "round": g // 2, "step": "round", "created": "2026-11-30T20:23:59.990Z",
         "stored": 123_456_789, "attempts": 135_802_468, "new_urls": 987_654_321,
         "errors": {"robots_denied": 12_345_678, "gone": 1, "network_error": 3},
         "elapsed_s": 86_399.25, "time_limit_hit": g % 2 == 0}
        for g in range(generations)
    ]  # fmt: skip
    return {
        "crawl": LONG_URL,
        "generation": generations - 1,
        "round": 12,
        "buckets": 4096,
        "created": "2026-11-30T20:23:59.990Z",
        "urls": {"total": 9_876_543_210, "by_status": {"queued": 9_876_543_200, "gone": 10}},
        "hosts": {"total": 12_345_678, "domains": 1_234_567},
        "depth": {str(i): 10**i for i in range(12)},
        "fetched": {
            "attempts": 5,
            "given_back": 5_000_000,
            "by_outcome": {"ok": 5, "robots_unavailable": 5_000_000},
        },
        "generations": gens,
    }


def test_status_of_a_big_crawl_fits_80_columns_without_cutting_anything():
    lines = render(status_tables(big_status()))
    assert max(len(line) for line in lines) <= 80
    text = "\n".join(lines)
    assert "…" not in text  # no header or cell cut with an ellipsis
    assert LONG_URL in "".join(line.strip() for line in lines)  # wrapped, whole
    assert "9.9G" in text and "123.5M" in text and "4,096" in text
    # generations: the newest MAX_GENERATIONS, errors summed, time limit marked
    rows = [line.split() for line in lines if line.strip().endswith(("*", "86,399.2"))]
    assert len(rows) == MAX_GENERATIONS and rows[-1][0] == "24"
    assert "12.3M" in rows[-1] and rows[-1][-1] == "86,399.2*"
    assert "5 older generations: see --format json" in text
    # URLs a held host gave back are no attempt: a line of their own
    given = [ln.split()[-1] for ln in lines if ln.strip().startswith("given back by held hosts")]
    assert given == ["5.0M"]
    # and their own table: the attempts' shares add up to the attempts (a trial: 1,046 of 541)
    at = next(i for i, ln in enumerate(lines) if "URLs given back by held hosts" in ln)
    assert any("robots_unavailable" in ln and "100.0%" in ln for ln in lines[at : at + 6])
    attempts_at = next(i for i, ln in enumerate(lines) if "fetch attempts by outcome" in ln)
    assert not any("robots_unavailable" in ln for ln in lines[attempts_at:at])


def test_the_width_check_can_fail():
    """Control: a table with every summary key as a column, as status printed before, does not
    fit 80 columns: rich cuts its headers with ellipses."""
    st = big_status()
    wide = Table()
    keys = sorted({k for g in st["generations"] for k in g})
    for k in keys:
        wide.add_column(k)
    for g in st["generations"]:
        wide.add_row(*(str(g[k]) for k in keys))
    assert "…" in "\n".join(render([wide]))


def test_status_command_at_80_columns_and_json_keeps_everything(tmp_path):
    crawl = small_crawl(tmp_path / "c")
    table = CliRunner().invoke(main, ["status", crawl.url], env={"COLUMNS": "80"})
    assert table.exit_code == 0, table.output
    lines = table.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    for title in ("URLs by status", "URLs by depth", "generations", "queued", "fetch attempts"):
        assert title in table.stdout
    js = CliRunner().invoke(main, ["status", crawl.url, "--format", "json"])
    gens = json.loads(js.stdout)["generations"]
    assert gens[-1]["stored"] == 5 and gens[-1]["elapsed_s"] == 6.5


def test_a_streams_generations_are_checkpoints_not_rounds():
    """Issue 34: status called a stream's checkpoints rounds."""
    st = big_status(4)
    for g in st["generations"][2:]:
        g["step"] = "stream"
    lines = render(status_tables(st))
    text = "\n".join(lines)
    assert max(len(line) for line in lines) <= 80
    assert "micro-batch (stream)" in text
    rows = [ln.split() for ln in lines if "2026-11-30 20:23" in ln and ln.split()[0] in "23"]
    assert [r[2] for r in rows] == ["checkpoint", "checkpoint"], text
    assert "checkpoint: a stream's; its round is the micro-batch it ended" in text
    plain = render(status_tables(big_status(4)))
    assert "micro-batch" not in "\n".join(plain) and "checkpoint" not in "\n".join(plain)


def test_held_hosts_table_names_holds_and_marks_a_hold_that_is_over():
    """A fresh-user trial read ``held_failures`` (holds in a row) as failures, and a hold whose
    time had passed as in force: the column says holds, and an ended hold is marked."""
    from datetime import datetime

    from batchcrawl.console.status_view import held_table

    held = [
        {"host": "down.test", "reason": "unreachable", "since": "2026-12-07T10:00:00",
         "until": "2026-12-07T10:02:00", "failures": 2, "outage_s": 95.0, "queued": 40},
        {"host": "slow.test", "reason": "rate_limit", "since": "2026-12-07T10:00:00",
         "until": "2026-12-07T11:00:00", "failures": 1, "outage_s": 95.0, "queued": 3},
    ]  # fmt: skip
    text = "\n".join(render([held_table(held, now=datetime(2026, 12, 7, 10, 30))]))
    assert "holds" in text and "failures" not in text
    assert "2026-12-07 10:02*" in text and "2026-12-07 11:00*" not in text
    assert "* hold over: the host's next fetch probes it" in text
    assert "hold over" not in "\n".join(render([held_table(held, now=datetime(2026, 12, 7, 9, 0))]))
