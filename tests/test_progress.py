"""Progress of running rounds (issue 15 item 1): the figures of a snapshot, counters and rate
that start again with each round, log lines at most every ``progress.interval_s`` without a
terminal, the closing human summary; and, through a real subprocess whose stderr is a pipe, that
a progress line appears without ``-v`` and the JSON summaries stay alone on stdout."""

from __future__ import annotations

import json
import logging
import re
import subprocess

import pytest
from round_helpers import cli_command, new_crawl, round_config, sample_web, serve, subprocess_env

from batchcrawl.console.progress import (
    Figures,
    RoundProgress,
    StreamProgress,
    closing_summary,
    duration,
    fetch_hint,
    round_line,
    stream_closing_summary,
)
from batchcrawl.store import sql


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def snap(rnd, done_by_shard, planned_by_shard, errors=0):
    shards = {s: {"ok": n} for s, n in done_by_shard.items()}
    shards[0]["network_error"] = errors
    return {"round": rnd, "planned": planned_by_shard, "shards": shards}


def test_figures_count_done_planned_queue_rate_and_time_left():
    f = Figures(snap(3, {0: 10, 1: 30}, {0: 20, 1: 30}, errors=2), elapsed_s=10.0)
    assert (f.done, f.planned, f.errors) == (42, 50, 2)
    assert f.queue == {0: 8, 1: 0}
    assert f.rate == pytest.approx(4.2) and f.left_s == pytest.approx(8 / 4.2)
    line = f.line(of=5)
    assert line.startswith("round 3 of 5: 42/50 pages (4.2/s), 2 errors")
    assert "queue per shard 8 0" in line and "~2s left" in line
    # a run of 5 rounds that started after round 1 (crawl --rounds 5 on a crawl with one round)
    assert f.line(of=5, first=2).startswith("round 3 (2 of 5): 42/50 pages")
    assert f.line(of=None).startswith("round 3: 42/50 pages")
    assert Figures(snap(1, {0: 0}, {0: 5}), 3.0).left_s is None  # no rate yet: unknown
    assert [duration(x) for x in (None, 5.4, 75, 3700)] == ["?", "5s", "1m15s", "1h01m"]


def test_a_shard_whose_fetch_is_over_has_no_queue():
    """A tail-cut shard's unfetched URLs showed as queued until the round ended (issue 34)."""
    s = snap(3, {0: 10, 1: 5}, {0: 20, 1: 30})
    running = Figures(s, elapsed_s=5.0)
    assert running.queue == {0: 10, 1: 25} and running.left_for_later == 0
    cut = Figures({**s, "over": [1]}, elapsed_s=5.0)
    assert cut.queue == {0: 10, 1: 0} and cut.left_for_later == 25
    assert cut.left_s == pytest.approx(10 / 3.0)  # 15 pages in 5 s, 10 still queued
    assert "queue per shard 10 0 (25 left for later)" in cut.line(of=None)


def test_once_no_page_is_queued_the_line_says_the_fetch_is_over_not_zero_seconds_left():
    """A fresh-user trial (issue 34): "~0s left" while the round's update and commit ran 2 s on."""
    over = Figures({**snap(4, {0: 20, 1: 5}, {0: 20, 1: 30}), "over": [1]}, elapsed_s=6.0)
    assert over.queue == {0: 0, 1: 0}
    assert over.line(of=None).endswith("elapsed 6s, fetch over, update and commit follow")
    assert "0s left" not in over.line(of=None)
    done = Figures(snap(4, {0: 20}, {0: 20}), elapsed_s=4.0)
    assert done.line(of=None).endswith("fetch over, update and commit follow")


def test_the_time_left_ends_at_the_fetch_time_limit_and_the_rest_is_left_for_later():
    """A user's trial with fetch.time_limit_s=12: "74/5,061 pages (24.5/s) ... elapsed 3s,
    ~3m24s left", and the round stopped at 12 s. No more time is left than the limit allows; the
    pages the rate will not fetch by then are left for later."""
    s = {**snap(36, {0: 40, 1: 34}, {0: 2500, 1: 2561}), "time_limit_s": 12.0,
         "fetch_elapsed_s": 3.4}  # fmt: skip
    f = Figures(s, elapsed_s=3.0)
    assert f.left_s == pytest.approx(8.6)  # 12 - 3.4, not 4,987 pages at 24.7/s
    assert f.queue == {0: 2460, 1: 2527}  # still queued: the fetch goes on
    fetchable = int(f.rate * 8.6)
    assert f.left_for_later == 4987 - fetchable
    line = f.line(of=2, first=35)
    assert line.endswith("elapsed 3s, ~9s left (time limit)")
    assert f"(~{4987 - fetchable:,} left for later)" in line
    table = f.table(of=None)
    assert table.row_count == 7  # with a "left for later" row
    # without the fetch's elapsed time, the round's own clock counts from the fetch's start
    assert Figures({**s, "fetch_elapsed_s": None}, elapsed_s=3.0).left_s == pytest.approx(9.0)
    # a rate that ends in time says nothing of the limit
    quick = Figures({**snap(2, {0: 40}, {0: 50}), "time_limit_s": 12.0}, elapsed_s=4.0)
    assert quick.left_s == pytest.approx(1.0) and quick.left_for_later == 0
    assert quick.line(of=None).endswith("~1s left") and "left for later" not in quick.line(None)
    # no rate yet: the limit still bounds the time left, and nothing is guessed for later
    slow = Figures({**snap(2, {0: 0}, {0: 50}), "time_limit_s": 12.0}, elapsed_s=2.0)
    assert slow.left_s == pytest.approx(10.0) and slow.left_for_later == 0
    assert slow.line(of=None).endswith("~10s left (time limit)")
    # the control: without a limit, the rate's estimate as before
    free = Figures(snap(36, {0: 40, 1: 34}, {0: 2500, 1: 2561}), elapsed_s=3.0)
    assert free.left_s == pytest.approx(4987 / (74 / 3.0)) and free.left_for_later == 0


def test_lines_come_every_interval_and_each_round_starts_from_zero(caplog):
    clock = FakeClock()
    caplog.set_level(logging.INFO, logger="batchcrawl.console.progress")
    with RoundProgress(enabled=False, interval_s=30, rounds=2, clock=clock) as p:
        p.update(snap(1, {0: 1}, {0: 100}))
        clock.t += 10
        p.update(snap(1, {0: 20}, {0: 100}))  # before the interval: no line
        clock.t += 20
        p.update(snap(1, {0: 60}, {0: 100}))
        p.done({"round": 1, "generation": 2, "attempts": 100, "stored": 90, "elapsed_s": 41})
        clock.t += 5
        # round 2 starts; an actor that has not reset yet would still say 100 done
        p.update(snap(2, {0: 0}, {0: 10}))
        clock.t += 30
        p.update(snap(2, {0: 6}, {0: 10}))
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("round 1 of 2: 60/100 pages (2.0/s)")  # 60 in 30 s
    assert lines[1].startswith("round 1 committed (generation 2): 100 attempts, 90 stored")
    assert lines[2].startswith("round 2 of 2: 6/10 pages (0.2/s)")  # its own clock: 6 in 30 s
    assert len(lines) == 3


def test_closing_summary_adds_up_the_rounds():
    rounds = [
        {"round": 4, "generation": 6, "attempts": 10, "responses": 9, "stored": 7,
         "new_urls": 30, "not_fetched": 0, "errors": {"gone": 2, "network_error": 1}},
        {"round": 5, "generation": 7, "attempts": 20, "responses": 18, "stored": 15,
         "new_urls": 5, "not_fetched": 3, "errors": {"gone": 1}, "time_limit_hit": True},
    ]  # fmt: skip
    lines = closing_summary(rounds, elapsed_s=15.0)
    head = "batchcrawl: rounds 4-5 committed (last generation 7) in 15s, start-up included"
    assert lines[0] == head
    text = "\n".join(lines)
    assert lines[1] == ("  30 attempts (2.0/s), 27 responses, 22 stored, 4 errors "
                        "(gone 3, network_error 1), 35 new URLs")  # fmt: skip
    assert lines[2] == "  left for later 3 (time limit, last round)"
    assert len(lines) == 3 and "queued" not in text
    assert closing_summary([], 1.0) == []
    # a site that went down: 5 connections tried, 295 URLs given back by its held host
    down = [{"round": 6, "generation": 8, "attempts": 5, "given_back": 295, "responses": 0,
             "stored": 0, "new_urls": 0, "not_fetched": 0, "errors": {"network_error": 5}}]  # fmt: skip
    assert closing_summary(down, elapsed_s=2.0)[1] == (
        "  5 attempts (2.5/s), 0 responses, 0 stored, 5 errors (network_error 5), "
        "295 given back by held hosts, 0 new URLs"
    )
    # what is due waits for a held host: said, not "due now 295" after "nothing due"
    assert closing_summary(down, 2.0, (295, 295))[2].endswith(
        "due now 295 (all on held hosts, batchcrawl status)"
    )
    assert closing_summary(down, 2.0, (300, 295))[2].endswith(
        "due now 300 (295 on held hosts, batchcrawl status)"
    )
    assert closing_summary(down, 2.0, (7, 0))[2].endswith("due now 7 (batchcrawl status)")


def test_closing_summary_leaves_for_later_what_the_last_round_left_and_counts_the_queue():
    """A URL the first round left, the second selects again: summing the rounds' not_fetched
    counted it twice (issue 34: 2,017 where `status` counted 875 queued)."""
    rounds = [
        {"round": 1, "generation": 2, "attempts": 10, "not_fetched": 50, "time_limit_hit": True},
        {"round": 2, "generation": 3, "attempts": 10, "not_fetched": 40, "time_limit_hit": True},
    ]  # fmt: skip
    text = "\n".join(closing_summary(rounds, elapsed_s=2.0, due=875))
    assert "left for later 40 (time limit, last round)" in text
    assert "; due now 875 (batchcrawl status)" in text


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        ({"time_limit_hit": True}, "time limit"),
        ({"shards_ended_early": 1}, "shard grace"),
        ({"shards_tail_cut": 1, "shards_ended_early": 1}, "slow tail cut, shard grace"),
        ({}, "fetch ended"),
    ],
)
def test_left_for_later_names_why_the_fetch_ended(flags, why):
    """A round whose shard was ended by fetch.shard_grace_s (or cut at its slow tail) did not hit
    its time limit: the closing summary names the cause the summaries record."""
    left = {"round": 1, "generation": 2, "attempts": 5, "not_fetched": 4, **flags}
    done = {"round": 2, "generation": 3, "attempts": 5, "not_fetched": 0, "time_limit_hit": True}
    text = "\n".join(closing_summary([done, left], elapsed_s=3.0))
    assert f"left for later 4 ({why}, last round)" in text
    assert "left for later 0\n" in "\n".join(closing_summary([done], elapsed_s=1.0)) + "\n"


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_progress_lines_appear_on_a_pipe_without_verbose(tmp_path):
    # one host, 0.3 s between its requests: the fetch lasts seconds, longer than the interval
    web = sample_web(hosts=1, pages=8, extras_every=0, links_per_page=3, menu_links=2)
    cfg = round_config(
        politeness={"host_delay_s": 0.3, "max_crawl_delay_s": 0.3},
        fetch={"shards": 1}, round={"workers": 1}, progress={"interval_s": 0.2},
    )  # fmt: skip
    with serve(web):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        proc = subprocess.run(
            cli_command("crawl", crawl.url, "--rounds", "2"), capture_output=True, text=True,
            env=subprocess_env(), timeout=150,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summaries = [json.loads(line) for line in proc.stdout.splitlines()]  # stdout: JSON only
    assert [s["round"] for s in summaries] == [1, 2]
    progress = [
        ln for ln in proc.stderr.splitlines() if " INFO batchcrawl.console.progress: round " in ln
    ]
    # round 1 fetches one seed and may end before the first snapshot; round 2 fetches 7 pages
    # 0.3 s apart, so its lines come for sure
    assert any(": round 2 of 2: " in ln and " pages (" in ln for ln in progress), proc.stderr
    assert any(": round 1 committed (generation 2)" in ln for ln in progress), proc.stderr
    assert "batchcrawl: rounds 1-2 committed (last generation 3)" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "\x1b" not in proc.stdout + proc.stderr  # no live table, no escape codes on a pipe


def stream_snap(elapsed_s, attempts, micro_batch=3, **extra):
    return {"elapsed_s": elapsed_s, "micro_batch": micro_batch, "generation": 5, "checkpoints": 2,
            "attempts": attempts, "stored": attempts, "new_urls": 40,
            "outcomes": {"ok": attempts - 1, "gone": 1}, "held": {0: 12, 1: 30}, "leased": 42,
            **extra}  # fmt: skip


def test_stream_lines_come_every_interval_with_the_stream_totals(caplog):
    clock = FakeClock()
    caplog.set_level(logging.INFO, logger="batchcrawl.console.progress")
    with StreamProgress(enabled=False, interval_s=30, clock=clock) as p:
        clock.t += 10
        p.update(stream_snap(10.0, 50))  # before the interval: no line
        clock.t += 25
        p.update(stream_snap(35.0, 140, micro_batch=7))
        clock.t += 5
        p.update(stream_snap(40.0, 160, micro_batch=8))  # 5 s after the last line: none
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "stream: micro-batch 7, 140 pages (4.0/s), 1 error, 40 new URLs, queued per shard 12 30, "
        "2 checkpoints (generation 5), elapsed 35s"
    ]


def test_stream_closing_summary_says_why_it_stopped():
    summary = {"stopped_by": "SIGTERM", "rounds": [3, 9], "generation": 11, "checkpoints": 6,
               "attempts": 30, "responses": 27, "stored": 22, "new_urls": 35, "not_fetched": 4,
               "errors": {"gone": 3, "network_error": 1}, "elapsed_s": 15.0}  # fmt: skip
    lines = stream_closing_summary(summary)
    assert lines[0] == ("batchcrawl: stream stopped by SIGTERM: micro-batches 3-9, 6 checkpoints "
                        "(last generation 11) in 15s")  # fmt: skip
    assert lines[1:] == ["  30 attempts (2.0/s), 27 responses, 22 stored, 4 errors "
                         "(gone 3, network_error 1), 35 new URLs",
                         "  left for later 4 (queued in the shards at the stop)"]  # fmt: skip
    one = stream_closing_summary({**summary, "rounds": [3, 3], "checkpoints": 1}, due=1234)
    assert one[0].startswith("batchcrawl: stream stopped by SIGTERM: micro-batch 3, 1 checkpoint ")
    assert one[-1] == (
        "  left for later 4 (queued in the shards at the stop); due now 1,234 (batchcrawl status)"
    )
    assert len(one) == 3  # issue 34: a stopped stream says it in at most three lines


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_crawl_max_seconds_ends_the_fetch_and_commits_the_round_in_progress(tmp_path):
    """``crawl --max-seconds T`` (rounds): one host, 0.5 s apart, 40 pages: round 2 cannot finish
    in T = 6 s. The crawl ends its fetch by itself and commits it (what bench_peers relies on);
    the pages left stay due for the next run."""
    web = sample_web(hosts=1, pages=40, extras_every=0, links_per_page=40, menu_links=2)
    cfg = round_config(
        politeness={"host_delay_s": 0.5, "max_crawl_delay_s": 0.5},
        fetch={"shards": 1}, round={"workers": 1},
    )  # fmt: skip
    with serve(web):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        proc = subprocess.run(
            cli_command("crawl", crawl.url, "--max-seconds", "6"), capture_output=True,
            text=True, env=subprocess_env(), timeout=150,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summaries = [json.loads(line) for line in proc.stdout.splitlines()]
    assert summaries and summaries[-1]["time_limit_hit"], summaries
    assert crawl.manifest().round == summaries[-1]["round"]  # the cut round is committed
    due = sql.query(crawl, "SELECT count(*) AS n FROM frontier WHERE status = 'queued'")
    assert due["n"][0].as_py() > 0  # left for the next run, not lost


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_single_round_says_its_number_alone_and_ends_in_three_lines(tmp_path):
    """``batchcrawl round`` runs one round: its progress says "round 1", not "round 1 of 1" (the
    fourth round of a crawl said "round 4 of 4", issue 34), and its closing summary is three
    lines."""
    web = sample_web(hosts=1, pages=8, extras_every=0, links_per_page=8, menu_links=2)
    cfg = round_config(politeness={"host_delay_s": 0.4, "max_crawl_delay_s": 0.4},
                       fetch={"shards": 1}, round={"workers": 1})  # fmt: skip
    with serve(web):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        for _ in range(2):  # the second round fetches the pages the seed linked (several seconds)
            proc = subprocess.run(
                cli_command("-v", "round", crawl.url, "--set", "progress.interval_s=0.3"),
                capture_output=True, text=True, env=subprocess_env(), timeout=150,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
    progress = re.findall(r"progress: (round \d+[^:]*): \d+/", proc.stderr)  # "4/8 pages"
    assert progress and set(progress) == {"round 2"}, proc.stderr[-3000:]
    summary = proc.stderr[proc.stderr.index("batchcrawl: round 2 committed") :].splitlines()
    assert len(summary) == 3 and "attempts" in summary[1], summary


def test_fetch_hint_when_most_attempts_found_no_address():
    """The README's crawl by hand without configs/local-web.toml: every seed a dns_error (issue
    34). The hint names the setting and the file; a crawl with a few dns errors gets none."""
    failed = [{"round": 1, "attempts": 20, "errors": {"dns_error": 20}}]
    hint = fetch_hint(failed, "news")
    assert hint is not None and "20 of 20" in hint and "configs/local-web.toml" in hint
    assert "news/crawl.toml" in hint and "network.resolve" in hint
    assert fetch_hint([{"round": 1, "attempts": 20, "errors": {"dns_error": 3}}], "news") is None
    assert fetch_hint([{"round": 1, "attempts": 0, "errors": {}}], "news") is None
    down = [{"round": 1, "attempts": 30, "errors": {"network_error": 20, "dns_error": 2}},
            {"round": 2, "attempts": 15, "errors": {"network_error": 15}}]  # fmt: skip
    hint = fetch_hint(down, "news")
    assert hint is not None and "35 of 45" in hint and "network_error" in hint
    assert "check that the sites are up" in hint and "frontier.retry_backoff_s" in hint
    # a site held unreachable: 5 tried, 295 given back without a request; the hint still shows
    held = [{"round": 3, "attempts": 300, "errors": {"network_error": 5, "host_unreachable": 295}}]
    hint = fetch_hint(held, "docs")
    assert hint is not None and "300 of 300" in hint and "host_unreachable" in hint
    assert "batchcrawl sql docs --query held-hosts" in hint
    # the same round as summaries count it now: 5 attempts, 295 URLs given back
    held = [{"round": 3, "attempts": 5, "given_back": 295, "errors": {"network_error": 5},
             "outcomes": {"network_error": 5, "host_unreachable": 295}}]  # fmt: skip
    hint = fetch_hint(held, "docs")
    assert hint is not None and "300 of 300 fetch attempts and URLs given back" in hint
    # a host name that does not resolve: one URL charged, the others given back (fetch.holds)
    unresolved = [{"round": 1, "attempts": 20, "errors": {"dns_error": 2, "host_unreachable": 18}}]
    hint = fetch_hint(unresolved, "docs")
    assert hint is not None and "20 of 20" in hint and "network.resolve" in hint


def test_fetch_hint_when_the_address_policy_refused_most_attempts():
    """A fresh-user trial: a seed on 127.0.0.1 with the default config said only "1 errors
    (refused 1)", and after the config was fixed nothing was due. The hint names the setting,
    the file and the requeue that makes those URLs due again (every one, not only the seeds); a
    dns_error hint requeues the URLs that a failed lookup leaves in error or gone."""
    hint = fetch_hint([{"round": 1, "attempts": 1, "errors": {"refused": 1}}], "cip")
    assert hint is not None and "1 of 1" in hint and "network.allow_networks" in hint
    assert "cip/crawl.toml" in hint and hint.endswith("batchcrawl requeue cip --status refused")
    dns = fetch_hint([{"round": 1, "attempts": 4, "errors": {"dns_error": 4}}], "cip")
    assert dns is not None
    assert dns.endswith("batchcrawl requeue cip --status error --status gone")


def test_round_line_says_a_round_in_one_short_line():
    summary = {"round": 2, "generation": 3, "attempts": 1200, "responses": 1100, "stored": 980,
               "new_urls": 2400, "not_fetched": 5, "errors": {"gone": 2, "dns_error": 1},
               "elapsed_s": 65.0, "stage_seconds": {"fetch": 60.0}}  # fmt: skip
    line = round_line(summary)
    assert line == ("round 2 committed in 1m05s: 1,200 attempts, 980 stored, 3 errors, "
                    "2,400 new URLs")  # fmt: skip
    assert len(line) <= 80


def test_log_lines_print_above_the_live_table(monkeypatch):
    """A log handler made before the live table wrote to the real stderr, past the table's
    redirect: its first line was glued to the table's bottom border (issue 34, demo)."""
    import io

    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich: a terminal (the live table redirects stderr)
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("batchcrawl.test_live_glue")
    logger.addHandler(handler)
    try:
        with RoundProgress(enabled=True) as progress:
            progress.update(snap(1, {0: 3}, {0: 10}))
            assert handler.stream is not out  # rich's proxy, which prints above the table
            logger.warning("a line of its own")
        assert handler.stream is out
    finally:
        logger.removeHandler(handler)
    text = out.getvalue()
    assert "a line of its own" in text
    before = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text[: text.index("a line of its own")])
    assert before == "" or before.endswith(("\n", "\r")), repr(before[-80:])


def run_in_terminal(argv: list[str], cols: int, rows: int, timeout_s: float) -> tuple[int, bytes]:
    """Run ``argv`` with stdin, stdout and stderr on one pseudo-terminal of ``cols`` x ``rows``
    (as in a tmux pane); its exit code and every byte it wrote."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import termios
    import time

    from round_helpers import kill_group

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = {k: v for k, v in subprocess_env().items()
           if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")}  # fmt: skip
    env.update(TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)  # fmt: skip
    os.close(slave)
    out = bytearray()
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not data:
                    break
                out += data
        return proc.wait(10), bytes(out)
    finally:
        os.close(master)
        if proc.poll() is None:
            kill_group(proc)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_json_summaries_stay_whole_under_the_live_table_on_a_terminal(tmp_path):
    """On a terminal (120 x 50, stdout and stderr both on it) the live table redirects
    ``sys.stdout``, but click writes the JSON summary to the real stdout's buffer past the
    redirect: it was glued to the table's bottom border, the next redraw (as many rows up as the
    table, while the JSON wraps over ~20) erased its end, and a stale copy of the table stayed
    above it (a user trial). Fed to a terminal emulator, the final screen and its scrollback hold
    each round's JSON line whole, from the first column, its INFO line too, and no table."""
    pyte = pytest.importorskip("pyte")
    cols, rows = 120, 50
    web = sample_web(hosts=2, pages=30, extras_every=0, links_per_page=10, menu_links=2)
    cfg = round_config(politeness={"host_delay_s": 0.1, "max_crawl_delay_s": 0.1},
                       fetch={"shards": 1}, round={"workers": 1})  # fmt: skip
    with serve(web):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        code, out = run_in_terminal(cli_command("crawl", crawl.url, "--rounds", "2"), cols, rows,
                                    timeout_s=150)  # fmt: skip
    text = out.decode("utf-8", "replace")
    assert code == 0, text[-3000:]
    assert "\x1b[" in text  # the live table was drawn: a terminal indeed
    screen = pyte.HistoryScreen(cols, rows, history=2000)
    pyte.ByteStream(screen).feed(out)
    lines = ["".join(row[x].data for x in range(cols)) for row in screen.history.top]
    lines += screen.display
    summaries = []
    for i, line in enumerate(lines):
        if '{"step": "round"' not in line:
            continue
        assert line.startswith('{"step": "round"'), f"glued to something: {line!r}"
        whole = ""  # the JSON wraps over rows of `cols` characters: join them till it parses
        for row in lines[i:]:
            whole += row
            try:
                summaries.append(json.loads(whole.rstrip()))
                break
            except json.JSONDecodeError:
                continue
        else:
            raise AssertionError(f"a JSON summary cut short: {whole.rstrip()[-300:]!r}")
    assert [s["round"] for s in summaries] == [1, 2], "\n".join(lines)
    screen_text = "\n".join(lines)
    for n in (1, 2):
        assert f"INFO batchcrawl.console.progress: round {n} committed (generation {n + 1})" in (
            screen_text
        ), screen_text
    assert "pages done / planned" not in screen_text and "└" not in screen_text, screen_text
    assert "batchcrawl: rounds 1-2 committed (last generation 3)" in screen_text


def test_a_count_of_one_is_singular():
    """A fresh-user trial read "1 attempts (0.6/s), 1 errors (refused 1)"."""
    lines = closing_summary([{"round": 1, "generation": 2, "attempts": 1, "responses": 1,
                              "stored": 0, "new_urls": 1, "errors": {"refused": 1}}], 2.0)  # fmt: skip
    assert "1 attempt (0.5/s), 1 response, 0 stored, 1 error (refused 1), 1 new URL" in lines[1]
    line = round_line({"round": 1, "attempts": 2, "stored": 1, "errors": {}, "new_urls": 0,
                       "elapsed_s": 1.0})  # fmt: skip
    assert line.endswith(": 2 attempts, 1 stored, 0 errors, 0 new URLs"), line
