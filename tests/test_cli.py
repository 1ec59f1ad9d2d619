"""The batchcrawl CLI: commands, output formats, config layers, and exit codes."""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from crawl_helpers import small_crawl

from batchcrawl.cli import demo_stopped, main, stopped
from batchcrawl.config import Config, load_config
from batchcrawl.console.signals import Interrupted
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.lock import LOCK_FILE, WriterLock

REPO = Path(__file__).resolve().parents[1]


def run(*args, env=None, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env or {}, input=input)


@pytest.fixture
def crawl(tmp_path) -> CrawlDir:
    return small_crawl(tmp_path / "c")


# -- init ------------------------------------------------------------------------------------
def test_init_writes_effective_config_and_refuses_to_overwrite(tmp_path):
    target = tmp_path / "new"
    result = run(
        "init", target, "--set", "frontier.buckets=8", env={"BATCHCRAWL_FETCH__SHARDS": "3"}
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"crawl": str(target), "generation": 0, "buckets": 8}
    written = (target / "crawl.toml").read_text()
    cfg = load_config(files=[("crawl.toml", written)], environ={})
    assert cfg == Config().replace(frontier={"buckets": 8}, fetch={"shards": 3})
    assert CrawlDir.open(str(target)).manifest().buckets == 8

    again = run("init", target)
    assert again.exit_code == 3
    assert "already exists" in again.stderr
    assert (target / "crawl.toml").read_text() == written


def test_init_from_config_file_and_its_errors_name_file_and_line(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text("[frontier]\nbuckets = 16\n")
    result = run("init", tmp_path / "a", "--config", good)
    assert result.exit_code == 0, result.output
    assert tomllib.loads((tmp_path / "a" / "crawl.toml").read_text())["frontier"]["buckets"] == 16

    bad = tmp_path / "bad.toml"
    bad.write_text("[crawl]\nname = 'x'\n[fetch]\nthreads = -1\n")
    result = run("init", tmp_path / "b", "--config", bad)
    assert result.exit_code == 2
    assert f"{bad}:4" in result.stderr and "fetch.threads" in result.stderr
    assert not (tmp_path / "b").exists()


def test_init_into_an_export_exits_3_and_gc_is_never_reached(crawl, tmp_path):
    lake = tmp_path / "lake"
    assert run("export", crawl.url, lake, "--tables", "fetched,links").exit_code == 0
    before = sorted(p.relative_to(lake) for p in lake.rglob("*"))
    result = run("init", lake)
    assert result.exit_code == 3
    assert "not empty" in result.stderr and "fetched" in result.stderr
    assert not (lake / "crawl.toml").exists()
    assert sorted(p.relative_to(lake) for p in lake.rglob("*")) == before
    assert run("gc", lake).exit_code == 3


# -- sql -------------------------------------------------------------------------------------
def test_sql_formats(crawl):
    q = "SELECT status, count(*) AS n FROM frontier GROUP BY status ORDER BY status"
    as_json = run("sql", crawl.url, q, "--format", "json")
    assert as_json.exit_code == 0, as_json.output
    expected = [
        {"status": "error", "n": 1},
        {"status": "fetched", "n": 3},
        {"status": "gone", "n": 1},
        {"status": "queued", "n": 1},
    ]
    assert json.loads(as_json.stdout) == expected
    as_csv = run("sql", crawl.url, q, "--format", "csv")
    assert list(csv.DictReader(io.StringIO(as_csv.stdout))) == [
        {"status": r["status"], "n": str(r["n"])} for r in expected
    ]
    table = run("sql", crawl.url, q)
    assert table.exit_code == 0
    assert "fetched" in table.stdout and "status" in table.stdout


def test_sql_named_query_generation_and_listing(crawl):
    result = run("sql", crawl.url, "--query", "status-counts", "--format", "json")
    assert {r["status"]: r["urls"] for r in json.loads(result.stdout)}["fetched"] == 3
    old = run(
        "sql",
        crawl.url,
        "SELECT count(*) AS n FROM frontier",
        "--generation",
        "0",
        "--format",
        "json",
    )
    assert json.loads(old.stdout) == [{"n": 0}]
    listing = run("sql", crawl.url, "--list")
    assert "rounds" in listing.stdout.split()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["COPY frontier TO 'x.csv'"], 2, "refused COPY statement"),
        (["SELECT nope FROM frontier"], 2, "query failed"),
        (["--query", "nope"], 2, "no named query 'nope'"),
        ([], 2, "give either a statement"),
        (["SELECT 1", "--query", "rounds"], 2, "give either a statement"),
        (["SELECT 1", "--generation", "9"], 3, "generation 9 does not exist"),
    ],
)
def test_sql_errors(crawl, args, code, message):
    result = run("sql", crawl.url, *args)
    assert result.exit_code == code
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) <= 4  # a clear message, no traceback
    assert "Traceback" not in result.stderr


def test_not_a_crawl_dir_exits_3(tmp_path):
    result = run("status", tmp_path / "missing")
    assert result.exit_code == 3
    assert result.stderr.startswith("batchcrawl: error: ") and "batchcrawl init" in result.stderr


# -- status / gc -----------------------------------------------------------------------------
def test_status_json_and_table(crawl):
    result = run("status", crawl.url, "--format", "json")
    assert result.exit_code == 0, result.output
    st = json.loads(result.stdout)
    assert st["urls"]["total"] == 6 and st["fetched"]["attempts"] == 5
    table = run("status", crawl.url)
    assert table.exit_code == 0
    for title in ("URLs by status", "URLs by depth", "generations", "queued"):
        assert title in table.stdout
    # rich pads cells and titles to their column's width: the lines written to a pipe lose it
    lines = table.stdout.splitlines()
    assert len(lines) > 10 and not [ln for ln in lines if ln != ln.rstrip()], table.stdout


def test_gc_keep_flag_overrides_config(crawl):
    crawl.commit(crawl.manifest(), {}, {"step": "noop"})
    result = run("gc", crawl.url, "--keep", "2", "--set", "crawl.keep_generations=1")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kept_generations"] == [1, 2]
    result = run("gc", crawl.url, "--set", "crawl.keep_generations=1")
    assert json.loads(result.stdout)["kept_generations"] == [2]
    assert crawl.generations() == [2]
    assert not os.path.exists(crawl.path(LOCK_FILE))


def test_bad_set_and_env_exit_2_naming_the_source(crawl):
    result = run("status", crawl.url, "--set", "fetch.shards=0")
    assert result.exit_code == 2 and "--set fetch.shards" in result.stderr
    result = run("gc", crawl.url, env={"BATCHCRAWL_ROUND__WORKERS": "many"})
    assert result.exit_code == 2 and "BATCHCRAWL_ROUND__WORKERS" in result.stderr


@pytest.mark.parametrize("command", [["status"], ["sql", "SELECT count(*) FROM frontier"]])
def test_a_bad_setting_does_not_stop_a_command_that_only_reads(crawl, command):
    """A typo in the environment (or crawl.toml) is a warning for ``status`` and ``sql``, which
    use no setting: the crawl can still be looked at; a bad ``--set`` given to them still fails."""
    env = {"BATCHCRAWL_FETCH__SHARDZ": "4"}
    result = run(command[0], crawl.url, *command[1:], env=env)
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("batchcrawl: warning: ") and "SHARDZ" in result.stderr
    assert f"({command[0]} reads the crawl without it)" in result.stderr
    result = run(command[0], crawl.url, *command[1:], "--set", "fetch.shards=0", env=env)
    assert result.exit_code == 2 and "--set fetch.shards" in result.stderr


def test_locked_crawl_exits_4_in_a_real_process(crawl):
    """A writer command run as a real process while this process holds the lock."""
    with WriterLock(crawl, owner="test holder", heartbeat_s=3600):
        proc = subprocess.run(
            [sys.executable, "-m", "batchcrawl.cli", "gc", crawl.url, "--keep", "1"],
            capture_output=True,
            text=True,
            cwd=REPO,
        )
    assert proc.returncode == 4
    assert "locked by test holder" in proc.stderr
    assert crawl.generations() == [0, 1]  # nothing collected


# -- crawl --stream usage ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["crawl", "{c}", "--rounds", "3", "--stream"],
        ["crawl", "{c}", "--time-limit", "3", "--stream"],
        ["crawl", "{c}", "--max-seconds", "0"],
    ],
)
def test_stream_flags_mixed_with_round_flags_are_usage_errors(crawl, args):
    result = run(*[a.format(c=crawl.url) for a in args])
    assert result.exit_code == 2, result.output


def test_round_flags_are_validated(crawl):
    result = run("round", crawl.url, "--workers", "0")
    assert result.exit_code == 2
    result = run("export", crawl.url, "out", "--rounds", "5..2")
    assert result.exit_code == 2 and "--rounds '5..2'" in result.stderr


def test_help_lists_every_command_and_exit_codes_are_documented():
    result = run("--help")
    for command in ("init", "inject", "round", "crawl", "status", "sql", "export", "gc", "demo"):
        assert command in result.stdout
    import re

    import batchcrawl.cli as cli_module

    documented = {int(c) for c in re.findall(r"^(\d+) ", cli_module.__doc__, re.MULTILINE)}
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    in_readme = {int(c) for c in re.findall(r"^\| (\d+) \|", readme, re.MULTILINE)}
    assert documented == in_readme == {0, 1, 2, 3, 4, 5, 75, 130, 143}
    from batchcrawl import errors

    codes = {
        cls.exit_code
        for cls in vars(errors).values()
        if isinstance(cls, type) and issubclass(cls, errors.BatchcrawlError)
    }
    assert codes <= documented


def test_entry_point_module_runs():
    proc = subprocess.run(
        [sys.executable, "-m", "batchcrawl.cli", "--version"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert proc.returncode == 0 and "batchcrawl" in proc.stdout


# -- inject (batchcrawl.frontier.inject is written separately) ----------------------------------------
def test_init_with_seeds_and_inject_from_stdin(tmp_path):
    pytest.importorskip("batchcrawl.frontier.inject")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://a.test/\nhttp://b.test/x\n")
    target = tmp_path / "c"
    result = run("init", target, "--seeds", seeds, "--set", "frontier.buckets=2")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert isinstance(out["inject"], dict)
    crawl = CrawlDir.open(str(target))
    assert crawl.read_current("frontier").num_rows == 2
    result = run("inject", target, "-", input="http://c.test/\n")
    assert result.exit_code == 0, result.output
    assert crawl.read_current("frontier").num_rows == 3
    assert not os.path.exists(crawl.path(LOCK_FILE))


# -- damaged input gets one line and an exit code ---------------------------------------------
def test_bad_seed_lines_are_summarized_on_stderr_with_line_numbers(tmp_path):
    seeds = tmp_path / "seeds.txt"
    bad = ["a b", "relative/path", "http://", "ftp://x.test/", "::", "also bad", "x y z"]
    seeds.write_text("http://a.test/\n" + "\n".join(bad) + "\nhttp://b.test/\n")
    result = subprocess.run(
        [sys.executable, "-m", "batchcrawl.cli", "init", str(tmp_path / "c"), "--seeds", seeds],
        capture_output=True, text=True, env=os.environ,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["inject"]["bad_lines"] == 7
    err = result.stderr.splitlines()
    assert err[0].startswith(f"batchcrawl: warning: {seeds}: 7 of 9 lines were not injected")
    assert f"{seeds}:2: " in err[1] and "one URL per line" in err[1]
    assert f"{seeds}:3: " in err[2] and "absolute http(s) URL" in err[2]
    assert len([e for e in err if e.startswith(f"  {seeds}:")]) == 5
    assert "and 2 more" in err[-1]
    assert "base=" not in result.stderr  # a Python argument means nothing on the command line


def test_only_bad_seed_lines_do_not_claim_good_lines_are_in():
    from batchcrawl.cli import seed_warnings

    bad = [{"line": 1, "reason": "URL 'ftp://x' has scheme 'ftp'"}]
    only_bad = {"source": "s.txt", "lines": 2, "skipped": 1, "bad_lines": 1,
                "bad_line_list": bad, "seeds_known": 0, "committed": False}  # fmt: skip
    first = seed_warnings(only_bad)[0]
    assert "good lines are in" not in first and "none of its lines" in first
    some_good = {**only_bad, "lines": 3, "committed": True}
    assert "the good lines are in" in seed_warnings(some_good)[0]


def test_a_seed_file_without_one_crawlable_url_is_bad_input(tmp_path):
    """``init --seeds`` and ``inject`` with only bad lines: exit 2 (bad input) after the JSON
    summary, the reasons on stderr as errors; ``init`` says the crawl exists without seeds."""
    seeds = tmp_path / "bad.txt"
    seeds.write_text("not a url\nftp://x.test/\n")
    result = run("init", str(tmp_path / "c"), "--seeds", str(seeds))
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["inject"]["bad_lines"] == 2
    assert f"batchcrawl: error: {seeds}: 2 of 2 lines were not injected" in result.stderr
    assert "was created without seeds" in result.stderr.splitlines()[-1]
    result = run("inject", str(tmp_path / "c"), str(seeds))
    assert result.exit_code == 2 and json.loads(result.stdout)["seeds_new"] == 0
    result = run("inject", str(tmp_path / "c"), "-", input="http://a.test/\nnot a url\n")
    assert result.exit_code == 0 and "batchcrawl: warning:" in result.stderr


def test_an_empty_seed_file_warns_and_injects_nothing(tmp_path):
    seeds = tmp_path / "empty.txt"
    seeds.write_text("# only a comment\n\n")
    crawl = small_crawl(tmp_path / "c")
    result = run("inject", crawl.url, seeds)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["seeds_new"] == 0
    assert "warning" in result.stderr and "no seed URL" in result.stderr
    result = run("inject", crawl.url, "-", input="")
    assert "no seed URL in it (0 lines" in result.stderr


def test_a_seed_file_with_nothing_new_commits_no_generation(tmp_path):
    """Known, bad or no seeds leave the frontier as it is: no new generation, and stderr says so."""
    crawl = small_crawl(tmp_path / "c")
    known = "http://known.test/"
    assert json.loads(run("inject", crawl.url, "-", input=known).stdout)["committed"] is True
    before = crawl.generations()
    for text in (f"{known}\n", "not a url\n", "", f"{known}\nftp://x.test/\n"):
        result = run("inject", crawl.url, "-", input=text)
        assert result.exit_code == (2 if text == "not a url\n" else 0), result.output
        out = json.loads(result.stdout)
        assert out["committed"] is False and out["generation"] == before[-1], out
    assert crawl.generations() == before
    assert "no generation was committed" in result.stderr
    result = run("inject", crawl.url, "-", input="http://new.test/\n")
    assert json.loads(result.stdout)["committed"] is True
    assert crawl.generations() == [*before, before[-1] + 1]


def test_a_byte_order_mark_and_a_huge_line_in_a_seed_file(tmp_path):
    """Notepad's UTF-8 byte order mark is not part of the first URL; a megabyte line is a bad
    line, not a frontier row, and its reason does not repeat it."""
    seeds = tmp_path / "seeds.txt"
    huge = "http://a.test/" + "x" * 3_000_000
    seeds.write_bytes(b"\xef\xbb\xbfhttp://bom.test/\n" + huge.encode() + b"\nhttp://b.test/\n")
    result = run("init", str(tmp_path / "c"), "--seeds", str(seeds))
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["generation"] == out["inject"]["generation"] == 1
    assert out["inject"]["seeds_new"] == 2 and out["inject"]["bad_lines"] == 1
    (bad,) = out["inject"]["bad_line_list"]
    assert bad["line"] == 2 and len(bad["reason"]) < 200 and "3,000,014 characters" in bad["reason"]
    crawl = CrawlDir.open(str(tmp_path / "c"))
    urls = sorted(crawl.read_current("frontier", ["url"]).column("url").to_pylist())
    assert urls == ["http://b.test/", "http://bom.test/"]
    result = run("inject", crawl.url, "-", input="\ufeffhttp://c.test/\n")  # stdin too
    assert json.loads(result.stdout)["seeds_new"] == 1


def test_undecodable_seed_lines_are_reported_and_the_rest_injected(tmp_path):
    seeds = tmp_path / "seeds.bin"
    seeds.write_bytes(b"http://a.test/\n\xff\xfe\x00junk\nhttp://b.test/\n")
    result = run("init", str(tmp_path / "c"), "--seeds", str(seeds))
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)["inject"]
    assert out["seeds_new"] == 2
    assert out["bad_line_list"] == [
        {"line": 2, "reason": "not valid UTF-8; seed files are UTF-8 text"}
    ]


def test_binary_config_file_is_a_config_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe[fetch]\n")
    result = run("init", str(tmp_path / "c"), "--config", str(bad))
    assert result.exit_code == 2 and "not a UTF-8 TOML file" in result.stderr
    assert not (tmp_path / "c").exists()


def test_damaged_newest_manifest_names_the_way_back(crawl):
    newest = crawl.generations()[-1]
    Path(crawl.path(f"_commits/{newest:06d}.json")).write_bytes(b"\x00\x00garbage")
    result = run("status", crawl.url)
    assert result.exit_code == 3
    assert "not valid JSON" in result.stderr and ".damaged" in result.stderr
    assert "Traceback" not in result.output


def test_missing_data_file_is_a_crawl_directory_error(crawl):
    victim = crawl.manifest().files("frontier")[0]
    os.remove(crawl.path(victim))
    for args in (("status", crawl.url), ("sql", crawl.url, "SELECT count(*) FROM frontier")):
        result = run(*args)
        assert result.exit_code == 3, (args, result.output)
        assert "cannot be read" in result.stderr


def test_export_refuses_a_destination_inside_the_crawl_and_bad_protocols(crawl):
    result = run("export", crawl.url, os.path.join(crawl.url, "lake"))
    assert result.exit_code == 2 and "inside the crawl directory" in result.stderr
    result = run("export", crawl.url, "nosuchproto://x")
    assert result.exit_code == 2 and "Protocol not known" in result.stderr


def test_export_refuses_the_crawl_through_a_symlink_or_a_file_url(crawl, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(os.path.abspath(crawl.url), target_is_directory=True)
    abs_root = Path(os.path.abspath(crawl.url))
    for dest in (link, link / "lake", f"file://{abs_root}/x", f"local://{abs_root}"):
        result = run("export", crawl.url, dest)
        assert result.exit_code == 2, (dest, result.output)
        assert "inside the crawl directory" in result.stderr
    assert not (abs_root / "x").exists() and not (abs_root / "fetched" / "crawl=c").exists()
    # control: a folder beside the crawl, given as a file:// URL, is a fine destination
    result = run("export", crawl.url, f"file://{tmp_path}/lake", "--tables", "fetched")
    assert result.exit_code == 0, result.output


def test_report_refuses_to_write_inside_the_crawl(crawl, tmp_path):
    """--out crawl.toml or a manifest would wreck the crawl (and gc would delete any other file
    there): refused before anything is written, through symlinks and file:// URLs too."""
    link = tmp_path / "link"
    link.symlink_to(os.path.abspath(crawl.url), target_is_directory=True)
    newest = crawl.generations()[-1]
    manifest = Path(crawl.path(f"_commits/{newest:06d}.json"))
    saved = {p: p.read_bytes() for p in (manifest, Path(crawl.path("crawl.toml")))}
    for out in (crawl.path("crawl.toml"), str(manifest), link / "r.html",
                f"file://{os.path.abspath(crawl.url)}/r.html", crawl.url):  # fmt: skip
        result = run("report", crawl.url, "--out", str(out))
        assert result.exit_code == 2, (out, result.output)
        assert "inside the crawl directory" in result.stderr
    assert {p: p.read_bytes() for p in saved} == saved
    assert not Path(crawl.path("r.html")).exists()
    assert run("report", crawl.url, "--out", "-").exit_code == 2
    assert run("status", crawl.url).exit_code == 0
    result = run("report", crawl.url, "--out", str(tmp_path / "r.html"))  # control: beside it
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r.html").read_bytes().startswith(b"<!DOCTYPE html>")


def test_a_bucket_count_other_than_the_crawls_is_refused_not_ignored(tmp_path):
    """frontier.buckets is fixed by init: --set or the environment asking for another count is
    a usage error on every command (it was silently ignored); the crawl's own count is fine."""
    target = tmp_path / "c"
    assert run("init", target, "--set", "frontier.buckets=4").exit_code == 0
    for args, env in (((("--set", "frontier.buckets=32")), None),
                      ((), {"BATCHCRAWL_FRONTIER__BUCKETS": "8"})):  # fmt: skip
        for command in ("status", "gc", "compact"):
            result = run(command, target, *args, env=env)
            assert "has 4 DRUM buckets, fixed when it was created" in result.stderr
            if command == "status" and env:  # only reads, uses no setting: a warning
                assert result.exit_code == 0 and "batchcrawl: warning:" in result.stderr
            else:
                assert result.exit_code == 2, (command, result.output)
    assert run("status", target, "--set", "frontier.buckets=4").exit_code == 0


def test_empty_crawl_argument_is_a_usage_error(tmp_path):
    result = run("init", "")
    assert result.exit_code == 2 and "must not be empty" in result.output


def test_export_rounds_that_do_not_exist_exit_2_naming_them(crawl, tmp_path):
    result = run("export", crawl.url, tmp_path / "lake", "--rounds", "2..5")
    assert result.exit_code == 2
    assert "rounds 2..5 do not exist" in result.stderr and "rounds 1..1" in result.stderr
    assert not (tmp_path / "lake").exists()


def test_verbose_flag_is_accepted_after_the_subcommand(crawl):
    before = run("-v", "status", crawl.url, "--format", "json")
    after = run("status", crawl.url, "--format", "json", "-vv")
    assert before.exit_code == after.exit_code == 0, after.output
    assert json.loads(before.stdout) == json.loads(after.stdout)


def test_sql_csv_renders_list_and_struct_columns_as_json(crawl):
    q = "SELECT 'a.test' AS host, ['s1', 's2'] AS sitemaps, {'k': 1} AS st, NULL::INT[] AS n"
    result = run("sql", crawl.url, q, "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert rows == [["host", "sitemaps", "st", "n"], ["a.test", '["s1", "s2"]', '{"k": 1}', ""]]


def test_sql_csv_quotes_only_the_fields_that_need_it(crawl):
    """A URL copied out of the CSV is the URL (issue 34, a fresh-user trial: every string was
    quoted, and ``"http://a.test/"`` pasted into a seed file was refused)."""
    q = "SELECT 'http://a.test/x?a=1' AS url, 'a, b' AS comma, 'say \"hi\"' AS quote, true AS ok, 7 AS n"
    result = run("sql", crawl.url, q, "--format", "csv")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines == ["url,comma,quote,ok,n", 'http://a.test/x?a=1,"a, b","say ""hi""",true,7']


@pytest.mark.parametrize("target", ["/proc/batchcrawl-x", "/sys/batchcrawl-x", "/dev/null/x"])
def test_init_where_nothing_can_be_written_is_one_line_exit_3(target):
    proc = subprocess.run([sys.executable, "-m", "batchcrawl.cli", "init", target],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.splitlines() == [
        f"batchcrawl: error: {target}: cannot create a crawl here "
        + proc.stderr.split("cannot create a crawl here ", 1)[1].strip()
    ]
    assert "manifest" not in proc.stderr and "Traceback" not in proc.stderr


def test_unwritable_crawl_directory_is_one_line_exit_3_and_gc_dry_run_needs_no_lock(crawl):
    """A file where a table folder must be stands in for a read-only or full file system (the
    tests run as root, for whom permissions do not stop a write)."""
    import shutil

    shutil.rmtree(crawl.path("frontier"))
    Path(crawl.path("frontier")).write_text("in the way")
    proc = subprocess.run([sys.executable, "-m", "batchcrawl.cli", "inject", crawl.url, "-"],
                          input="http://a.test/new\n", capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 3, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "the last generation is intact" in lines[0], proc.stderr
    assert CrawlDir.open(crawl.url).generations() == [0, 1]
    assert not os.path.exists(crawl.path(LOCK_FILE))
    with WriterLock(crawl, owner="someone else"):
        dry = run("gc", crawl.url, "--dry-run")
        assert dry.exit_code == 0, dry.output
        assert json.loads(dry.stdout)["dry_run"] is True
        assert run("gc", crawl.url).exit_code == 4


# -- sql output for people --------------------------------------------------------------------
def test_sql_table_stops_at_a_row_limit_and_counts_the_rest(crawl):
    q = "SELECT range AS i FROM range(250)"
    default = run("sql", crawl.url, q)
    assert default.exit_code == 0, default.output
    lines = default.stdout.splitlines()
    assert "249" not in default.stdout and " 99 " in default.stdout
    assert lines[-1].startswith("... 150 more rows (250 in all)")
    three = run("sql", crawl.url, q, "--limit", "3")
    assert three.stdout.splitlines()[-1].startswith("... 247 more rows")
    everything = run("sql", crawl.url, q, "--all")
    assert "249" in everything.stdout and "more rows" not in everything.stdout
    # csv and json give every row unless --limit, which notes the rest on stderr
    assert len(json.loads(run("sql", crawl.url, q, "--format", "json").stdout)) == 250
    cut = run("sql", crawl.url, q, "--format", "json", "--limit", "5")
    assert len(json.loads(cut.stdout)) == 5 and "245 more rows" in cut.stderr
    both = run("sql", crawl.url, q, "--all", "--limit", "3")
    assert both.exit_code == 2


def test_sql_wide_results_print_one_block_per_row(crawl):
    q = "SELECT url, repeat('x', 120) AS long_text, 7 AS n FROM frontier ORDER BY url LIMIT 2"
    result = run("sql", crawl.url, q, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("-[ row 1 ]") and any(ln.startswith("-[ row 2 ]") for ln in lines)
    assert "long_text | " + "x" * 120 in lines  # nothing cut
    assert "n         | 7" in lines
    narrow = run("sql", crawl.url, "SELECT 1 AS a, 2 AS b", env={"COLUMNS": "80"})
    assert "-[ row" not in narrow.stdout  # a narrow result stays a table


def test_sql_list_shows_each_named_query_with_its_description(crawl):
    from batchcrawl.store.sql import named_queries, queries_dir

    lines = run("sql", crawl.url, "--list").stdout.splitlines()
    # stdout is not a terminal: 80 columns, a long description continued on indented lines
    assert all(len(ln) <= 80 for ln in lines), [ln for ln in lines if len(ln) > 80]
    listing: list[str] = []
    for ln in lines:
        if ln.startswith(" "):
            listing[-1] += " " + ln.strip()
        else:
            listing.append(ln)
    assert [ln.split()[0] for ln in listing] == named_queries()
    for line in listing:
        name, about = line.split(None, 1)
        text = (queries_dir() / f"{name}.sql").read_text().splitlines()
        block = itertools.takewhile(lambda ln: ln.startswith("--"), text)
        # the whole leading comment, not its first line cut off mid-sentence
        assert about.split() == " ".join(ln[2:] for ln in block).split()
        assert about.rstrip()[-1] in ".)", about  # every description ends as a sentence


def test_demo_headline_counts_what_status_counts(tmp_path):
    """The demo's closing line says how many URLs are `fetched` exactly as `status` does, and the
    round summaries name their counters for what they count."""
    target = tmp_path / "demo"
    env = {**os.environ, "BATCHCRAWL_ROUND__WORKERS": "1"}
    cmd = [sys.executable, "-m", "batchcrawl.cli"]
    proc = subprocess.run([*cmd, "demo", str(target), "--hosts", "3", "--pages", "30",
                           "--rounds", "2"], capture_output=True, text=True, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # one human line per round on stdout, no JSON (issue 34: a 2,200-character JSON line each)
    assert not any(ln.startswith("{") for ln in proc.stdout.splitlines()), proc.stdout
    rounds = re.findall(r"^round (\d+) committed in \S+: ([\d,]+) attempts, ([\d,]+) stored",
                        proc.stdout, re.MULTILINE)  # fmt: skip
    assert [int(r[0]) for r in rounds] == [1, 2], proc.stdout
    st = json.loads(subprocess.run([*cmd, "status", str(target), "--format", "json"],
                                   capture_output=True, text=True, env=env, check=True).stdout)  # fmt: skip
    fetched = st["urls"]["by_status"]["fetched"]
    attempts = sum(int(r[1].replace(",", "")) for r in rounds)
    assert f"{fetched:,} URLs fetched and stored, from {attempts:,} fetch attempts" in proc.stdout
    assert attempts == st["fetched"]["attempts"]
    # round lines, tables and the headline fit an 80-column terminal (stdout is a pipe: rich's
    # width is 80); the commands to copy and the line naming the crawl are left whole, however
    # long the crawl's path
    lines = proc.stdout.splitlines()
    shown = [ln for ln in lines if str(target) not in ln]
    assert shown and all(len(ln) <= 80 for ln in shown), [ln for ln in shown if len(ln) > 80]
    for name in ("status-counts", "top-hosts", "fetch-errors"):
        assert f"batchcrawl sql {target} --query {name}" in lines, proc.stdout
    assert f"The crawl is in {target}. Explore it with:" in lines, proc.stdout
    assert not [ln for ln in lines if ln != ln.rstrip()], proc.stdout  # rich's padding


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_demo_stopped_after_a_round_names_the_crawl_it_keeps(tmp_path, signum):
    """A stop signal once the demo committed a round: exit 128 + signal and one line naming the
    crawl, what it keeps and how to look at it, not "rerun it" (rerunning the demo creates a new
    crawl beside it: the sample web ended with the stopped process)."""
    target = tmp_path / "demo"
    env = {**os.environ, "BATCHCRAWL_ROUND__WORKERS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "batchcrawl.cli", "demo", str(target), "--hosts", "3", "--pages",
         "400", "--rounds", "30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        first = proc.stdout.readline()  # written once round 1 committed
        assert first.startswith("round 1 committed"), (first, proc.stderr.read())
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 128 + signum, err
    last = err.strip().splitlines()[-1]
    kept = CrawlDir.open(str(target)).manifest()
    rounds = "round 1" if kept.round == 1 else f"rounds 1-{kept.round}"
    assert last == (
        f"batchcrawl: stopped by {signal.Signals(signum).name}: the demo crawl {target} keeps "
        f"{rounds} (last generation {kept.generation}): batchcrawl status {target}; its sample "
        "web ended with the demo, so `batchcrawl demo` starts a new crawl rather than continuing "
        "this one"
    ), err
    assert not (target / "_lock.json").exists()


def test_a_stop_after_every_asked_round_committed_leaves_nothing_to_rerun(tmp_path):
    """A ``round`` (one round asked) stopped while its cluster closed, after its commit: the
    message says what was committed and that nothing is left, not "round N+1 was not
    committed: rerun"; a multi-round run stopped half way still names the round to rerun."""
    from types import SimpleNamespace

    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=2)
    m = crawl.manifest()
    before = SimpleNamespace(round=m.round - 1)  # as if this run committed the current round
    done = stopped(crawl, before, Interrupted(signal.SIGTERM), rounds=1)
    assert done.exit_code == 143
    assert str(done) == (f"stopped by SIGTERM after this run committed round {m.round} (last "
                         f"generation {m.generation}): nothing is left to rerun")  # fmt: skip
    none = stopped(crawl, SimpleNamespace(round=m.round), KeyboardInterrupt(), rounds=1)
    assert str(none) == (f"stopped by SIGINT before round {m.round + 1} began: nothing committed "
                         f"by this run (last generation {m.generation}, round {m.round})")  # fmt: skip
    assert none.exit_code == 130  # (a stop while waiting for a --scheduler: no file written)
    started = crawl.path(paths.round_file("fetchlists", m.round + 1, 0))
    crawl.fs.makedirs(started.rsplit("/", 1)[0], exist_ok=True)
    crawl.fs.pipe_file(started, b"partial")  # the next round wrote a fetch list, then the stop
    half = stopped(crawl, before, Interrupted(signal.SIGINT), rounds=3)
    assert f"round {m.round + 1} was not committed: rerun" in str(half)
    none = stopped(crawl, SimpleNamespace(round=m.round), KeyboardInterrupt(), rounds=1)
    assert "nothing committed by this run" in str(none) and "gc" in str(none)


def test_demo_stopped_before_its_crawl_exists_says_so(tmp_path):
    stop = demo_stopped(str(tmp_path / "none"), Interrupted(signal.SIGTERM))
    assert stop.exit_code == 143
    assert str(stop) == f"stopped by SIGTERM before the demo crawl {tmp_path / 'none'} was created"
    early = demo_stopped(None, Interrupted(signal.SIGINT))
    assert str(early) == "stopped by SIGINT before the demo crawl was created: nothing was changed"
    crawl = CrawlDir.create(str(tmp_path / "new"), "", buckets=2)
    empty = demo_stopped(crawl.url, KeyboardInterrupt())
    assert empty.exit_code == 130
    assert f"has no committed round (remove it: rm -r {crawl.url})" in str(empty)


def test_demo_help_shows_crawl_as_optional_and_json_on_request():
    result = run("demo", "--help")
    assert result.exit_code == 0
    assert "demo [OPTIONS] [CRAWL]" in result.stdout and "--json" in result.stdout


@pytest.mark.parametrize("args", [["sql", "SELECT url FROM frontier", "--all", "--format", "csv"],
                                  ["status", "--format", "json"]])  # fmt: skip
def test_a_reader_that_closed_the_pipe_is_not_an_error(crawl, args):
    """``batchcrawl sql ... | head -1``: the reader goes away; the command stops quietly with exit
    0 (as cat, grep and git do with SIGPIPE), not with a "the step did not commit" error."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # no reader at all: the first write fails with EPIPE, every time
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "batchcrawl.cli", *args[:1], crawl.url, *args[1:]],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def _truncate(path: str) -> None:
    data = Path(path).read_bytes()
    Path(path).write_bytes(data[: len(data) // 2])


def _empty(path: str) -> None:
    Path(path).write_bytes(b"")


def _scramble(path: str) -> None:
    data = bytearray(Path(path).read_bytes())
    mid = len(data) // 2
    data[mid - 200 : mid + 200] = os.urandom(400)
    data[4:40] = os.urandom(36)
    Path(path).write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_truncate, _empty, _scramble])
@pytest.mark.parametrize("table", ["frontier", "fetched"])
def test_damaged_data_file_is_a_crawl_directory_error_and_nothing_is_committed(
    crawl, tmp_path, damage, table
):
    """A truncated, empty or garbled Parquet file named by the current generation is reported as
    the crawl directory's fault (exit 3, the file and the way back named), by every command that
    reads it, and a writing command commits nothing on top of it."""
    victim = crawl.manifest().files(table)[0]
    damage(crawl.path(victim))
    before = crawl.generations()
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://h9.test/\n")
    commands = [
        ("status", crawl.url),
        ("sql", crawl.url, f"SELECT count(*) FROM {table}"),
        ("inject", crawl.url, str(seeds)),
    ]
    for args in commands:
        result = run(*args)
        if args[0] == "inject" and table == "fetched":
            assert result.exit_code == 0, result.output  # inject does not read fetched
            continue
        assert result.exit_code == 3, (args, result.output)
        assert "cannot be read" in result.stderr and "--generation" in result.stderr, args
        assert "Traceback" not in result.output
    if table == "frontier":
        assert crawl.generations() == before


def test_round_on_a_damaged_frontier_file_stops_with_a_crawl_directory_error(crawl):
    """The damaged file is read inside a Dask task of the round's generate step: the error
    reaches the command line as the same one-line crawl directory error, and nothing commits."""
    _truncate(crawl.path(crawl.manifest().files("frontier")[0]))
    before = crawl.generations()
    result = run("round", crawl.url, "--workers", "1", "--time-limit", "5")
    assert result.exit_code == 3, result.output
    assert "bucket=" in result.stderr and "the file is damaged" in result.stderr
    assert crawl.generations() == before


def test_round_reads_the_due_time_index_once(crawl, monkeypatch):
    """`round` finds whether anything is due before it imports the round driver and Dask; the
    driver's own check (for library callers) read every bucket's due-time index a second time."""
    import batchcrawl.round
    from batchcrawl.engine import duecheck

    calls = []
    real = duecheck.nothing_due_now

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(duecheck, "nothing_due_now", counted)
    monkeypatch.setattr(batchcrawl.round, "nothing_due_now", counted)
    result = run("round", crawl.url, "--workers", "1", "--time-limit", "5")
    assert result.exit_code == 0, result.output
    assert len(calls) == 1


def test_sql_prints_each_statements_result_or_refuses_clearly(crawl):
    """``sql CRAWL "SELECT 1; SELECT 2"`` printed only the last result (issue 34)."""
    result = run("sql", crawl.url, "SELECT 11 AS first_one; SELECT 22 AS second_one")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "first_one" in out and "11" in out and "second_one" in out and "22" in out
    assert out.index("first_one") < out.index("second_one")
    refused = run("sql", crawl.url, "SELECT 1; SELECT 2", "--format", "csv")
    assert refused.exit_code == 2 and "give one statement" in refused.stderr


@pytest.mark.parametrize("statement", ["SELEC 1", "SELECT nope FROM frontier", "SELECT 1 +"])
def test_a_duckdb_error_is_one_line_with_a_hint(crawl, statement):
    result = run("sql", crawl.url, statement)
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("batchcrawl: "), result.stderr
    assert "DESCRIBE frontier" in lines[0]


def test_python_dash_m_batchcrawl_runs_the_command(tmp_path):
    """``python -m batchcrawl`` is the command for a checkout on ``PYTHONPATH`` (a fresh-user
    trial: "No module named batchcrawl.__main__")."""
    url = str(tmp_path / "crawl")
    proc = subprocess.run([sys.executable, "-m", "batchcrawl", "init", url], capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["generation"] == 0
    usage = subprocess.run([sys.executable, "-m", "batchcrawl", "--help"], capture_output=True,
                           text=True, timeout=120)  # fmt: skip
    assert usage.returncode == 0 and usage.stdout.startswith("Usage: batchcrawl "), usage.stdout


def test_seeds_dropped_by_the_url_filters_are_said_on_the_stderr_line(tmp_path):
    seeds = tmp_path / "seeds.txt"
    long_url = "http://long.test/" + "a" * 10_007  # 10,024 characters: over filters.max_url_length
    seeds.write_text("http://a.test/\nnot a url\n" + long_url + "\n")
    result = run("init", str(tmp_path / "c"), "--seeds", str(seeds))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["inject"]["filtered"] == {"url_length": 1}
    first = result.stderr.splitlines()[0]
    assert first.startswith(
        f"batchcrawl: warning: {seeds}: 2 of 3 lines were not injected: 1 bad line, "
        "1 dropped by the URL filters (url_length 1); "
    )
    seeds.write_text("http://b.test/\n" + long_url.replace("long", "long2") + "\n")
    result = run("inject", str(tmp_path / "c"), str(seeds))
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        f"batchcrawl: warning: {seeds}: of 2 new seeds, 1 dropped by the URL filters "
        "(url_length 1); those are in the frontier as filtered and are not crawled "
        "(see [filters] in crawl.toml)",
        f"  {seeds}:2: dropped by the URL filters (url_length); see [filters] in crawl.toml",
    ]


def test_seed_warnings_count_every_line_not_injected_and_name_the_filtered_ones(tmp_path):
    """Issue: "5 of 11 lines were not injected" for a file where 9 of 11 went in nowhere (blank
    lines and the filtered seed were not counted), and the 10,000-character seed the URL filters
    dropped (line 7) was never named."""
    seeds = tmp_path / "bad.txt"
    long_url = "http://long.test/" + "a" * 9_983
    lines = ["http://a.test/", "", "garbage here", " h1.test:8080/x", "ftp://x", "http://",
             long_url, "   ", "javascript:", "", "http://b.test/"]  # fmt: skip
    seeds.write_text("\n".join(lines) + "\n")
    result = run("init", str(tmp_path / "c"), "--seeds", str(seeds))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["inject"]
    assert summary["filtered_line_list"] == [{"line": 7, "reason": "url_length"}]
    err = result.stderr.splitlines()
    assert err[0] == (
        f"batchcrawl: warning: {seeds}: 9 of 11 lines were not injected: 5 bad lines, "
        "1 dropped by the URL filters (url_length 1), 3 blank or comment lines skipped; "
        "fix them and inject the file again (the good lines are in, repeats are skipped)"
    )
    listed = [e for e in err if e.startswith(f"  {seeds}:")]
    assert len(listed) == 5  # the same cap as before: bad and filtered lines together
    assert f"  {seeds}:7: dropped by the URL filters (url_length); see [filters] in crawl.toml" in (
        listed
    )
    assert err[-1] == "  ... and 1 more (bad_line_list, filtered_line_list in the JSON summary)"


def test_a_refetch_with_a_bad_line_says_the_known_urls_were_made_due(tmp_path):
    """A fresh-user trial: a `sql --format csv` file (its "url" header a bad line) given to
    `inject --refetch` said "3 of 3 lines were not injected: 1 bad line, 2 already in the crawl"
    although the two known URLs were made due again (`"refetch": 2`)."""
    crawl_dir = tmp_path / "c"
    assert run("init", str(crawl_dir)).exit_code == 0
    first = tmp_path / "seeds.txt"
    first.write_text("http://a.test/\nhttp://b.test/\n")
    assert run("inject", str(crawl_dir), str(first)).exit_code == 0
    csv = tmp_path / "hdr.csv"
    csv.write_text("url\nhttp://a.test/\nhttp://b.test/\n")
    result = run("inject", str(crawl_dir), str(csv), "--refetch")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["refetch"] == 2
    assert result.stderr.splitlines()[0] == (
        f"batchcrawl: warning: {csv}: 1 of 3 lines were not injected: 1 bad line (2 known URLs "
        "made due again by --refetch); fix them and inject the file again (the good lines are "
        "in, repeats are skipped)"
    )


def test_sql_help_names_every_view():
    """The help listed five of the ten views (issue 34, 4th trial)."""
    from batchcrawl.store import schemas

    text = " ".join(run("sql", "--help").stdout.split())
    for view in schemas.TABLES:
        assert re.search(rf"\b{view}\b", text), view


def test_a_stream_stopped_before_its_first_checkpoint_names_micro_batches(tmp_path):
    """A stream stopped before its first checkpoint said "round 11 was not committed" (issue 34,
    4th trial): a stream's rounds are micro-batches."""
    from types import SimpleNamespace

    crawl = CrawlDir.create(str(tmp_path / "c"), "", buckets=2)
    m = crawl.manifest()
    none = stopped(crawl, SimpleNamespace(round=m.round), KeyboardInterrupt(), stream=True)
    assert str(none) == (f"stopped by SIGINT before micro-batch {m.round + 1} began: nothing "
                         f"committed by this run (last generation {m.generation}, micro-batch "
                         f"{m.round})")  # fmt: skip
    two = stopped(crawl, SimpleNamespace(round=m.round - 2), KeyboardInterrupt(), stream=True)
    assert f"committed micro-batches {m.round - 1}-{m.round}" in str(two), str(two)
