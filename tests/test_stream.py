"""``batchcrawl crawl --stream`` (batchcrawl.stream) on a real LocalCluster of 2 worker processes
against a SampleWeb served on loopback: the same URLs as batch rounds, politeness across
micro-batches, checkpoints readable while streaming, and real subprocesses stopped by SIGTERM or
killed by SIGKILL."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
from round_helpers import (
    by_host,
    cli_command,
    group_members,
    helper_command,
    new_crawl,
    politeness_violations,
    read_every_file,
    round_config,
    sample_delay,
    sample_web,
    serve,
    subprocess_env,
    wait_gone,
)
from warc_checks import bytes_past_committed_end

from batchcrawl.console.signals import StopRequest
from batchcrawl.round import run_rounds
from batchcrawl.store import paths, sql
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.stream import run_stream

MAX_ROUNDS = 12
# URLs given back unfetched because their host's robots.txt is unavailable are left out: rounds
# leave a held host off their fetch lists (batchcrawl.frontier.holds), while a stream may hand
# out its newly found URLs before the micro-batch that holds it commits (no request is made)
FETCHED_URLS = "SELECT DISTINCT url FROM fetched WHERE outcome <> 'robots_unavailable'"


def _fetched_urls(crawl: CrawlDir) -> set[str]:
    return set(sql.query(crawl, FETCHED_URLS).column("url").to_pylist())


def _stream_config(**overrides):
    return round_config(stream={"flush_interval_s": 0.5}, **overrides)


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """The same SampleWeb crawled to completion by rounds and by a stream; yields
    ``(web, cfg, batch crawl, stream crawl, stream summary, stream server log)``."""
    web = sample_web()
    cfg = _stream_config()
    base = tmp_path_factory.mktemp("stream")
    with serve(web) as server:  # one server: the URLs carry its port
        batch = new_crawl(base / "batch", cfg, web.seeds())
        run_rounds(batch.url, cfg, MAX_ROUNDS)
        before = len(server.log.entries())
        streamed = new_crawl(base / "stream", cfg, web.seeds())
        summary = run_stream(streamed.url, cfg, StopRequest(), max_seconds=120)
        entries = server.log.entries()[before:]
    return web, cfg, batch, streamed, summary, entries


def test_stream_to_completion_fetches_the_same_urls_as_rounds(both):
    _, _, batch, streamed, summary, _ = both
    assert summary["stopped_by"] == "nothing_due", summary
    urls = _fetched_urls(streamed)
    assert urls == _fetched_urls(batch)
    n = sql.query(streamed, "SELECT count(*) AS n FROM fetched")["n"][0].as_py()
    assert summary["attempts"] + summary["given_back"] == n  # given back: a row, no attempt
    # each URL fetched once: leases keep a URL in flight from being handed out again
    dup = sql.query(streamed, "SELECT url, count(*) AS n FROM fetched GROUP BY 1 HAVING n > 1")
    assert dup.num_rows == 0, dup.to_pylist()[:5]


def test_stream_commits_checkpoints_with_readable_files(both):
    _, _, batch, streamed, summary, _ = both
    gens = streamed.generations()
    assert summary["checkpoints"] >= 2 and gens[-1] == summary["generation"]
    for g in gens[-summary["checkpoints"] :]:
        m = streamed.manifest(g)
        assert m.summary["mode"] == "stream" and read_every_file(streamed, m) > 0
        assert m.summary["step"] == "stream"  # status shows it as a checkpoint, not a round
    # the last checkpoint holds the frontier rounds leave: same URLs in each status
    by_status = "SELECT status, count(*) AS n FROM frontier GROUP BY 1 ORDER BY 1"
    assert sql.query(streamed, by_status).to_pylist() == sql.query(batch, by_status).to_pylist()


def _digests(crawl: CrawlDir) -> set[str]:
    files = crawl.manifest().files("content")
    return set(crawl.read_table("content", files, columns=["digest"]).column("digest").to_pylist())


def test_stream_fills_the_content_seen_table_as_rounds_do(both):
    _, _, batch, streamed, summary, _ = both
    digests = _digests(streamed)
    assert digests and digests == _digests(batch)
    assert summary["content"]["new_digests"] == len(digests)


def test_stream_is_polite_across_micro_batches(both):
    web, cfg, _, _, summary, entries = both
    assert politeness_violations(entries, sample_delay(web, cfg)) == []
    # control: the check finds gaps when asked for a longer delay than kept
    assert politeness_violations(entries, lambda host: 1.0)
    assert max(len(v) for v in by_host(entries).values()) > 10
    assert summary["checkpoints"] >= 3, "the crawl spanned several micro-batches"


# -- the command in real subprocesses ----------------------------------------------------------------
def _start(crawl: CrawlDir, *extra: str, start_new_session: bool = False) -> subprocess.Popen:
    return subprocess.Popen(
        cli_command("crawl", crawl.url, "--stream", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
        start_new_session=start_new_session,
    )


def _wait_for_generation(crawl: CrawlDir, above: int, proc: subprocess.Popen) -> int:
    """Poll until a generation above ``above`` is committed (the stream's first checkpoint)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        gens = crawl.generations()
        if gens and gens[-1] > above:
            return gens[-1]
        time.sleep(0.1)
    raise AssertionError("no checkpoint within 120 s")


def _slow_config():
    # host delay 0.3 s: a 90-page web takes several seconds, so signals land mid-stream;
    # a progress line every 0.5 s (each micro-batch)
    return _stream_config(politeness={"host_delay_s": 0.3}, progress={"interval_s": 0.5})


def test_sigterm_checkpoints_exits_0_and_releases_the_lock_status_works_meanwhile(tmp_path):
    web = sample_web()
    cfg = _slow_config()
    with serve(web):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        start = crawl.manifest().generation
        proc = _start(crawl)
        try:
            _wait_for_generation(crawl, start, proc)
            # readers work during the stream: they read the last checkpoint
            status = subprocess.run(cli_command("status", crawl.url),
                                    capture_output=True, text=True, env=subprocess_env())  # fmt: skip
            assert status.returncode == 0, status.stderr
            rows = subprocess.run(cli_command("sql", crawl.url, FETCHED_URLS),
                                  capture_output=True, text=True, env=subprocess_env())  # fmt: skip
            assert rows.returncode == 0, rows.stderr
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
        summary = json.loads(out.strip().splitlines()[-1])
        assert summary["stopped_by"] == "SIGTERM"
        # progress lines while streaming, the human summary at the end (stderr, not stdout)
        assert "stream: micro-batch " in err and " pages (" in err, err
        assert "batchcrawl: stream stopped by SIGTERM: micro-batches " in err, err
        assert f"  {summary['attempts']:,} attempts (" in err
        assert summary["generation"] == crawl.manifest().generation
        assert not crawl.fs.exists(crawl.path("_lock.json"))
        assert summary["responses"] < len(web.reachable(max_depth=cfg.filters.max_depth))


#: Where the stream is SIGKILLed by its own ``on_step`` hook: the start of the second update
#: (mid-merge: the micro-batch's files written, its delta runs not) and of the second commit
#: (mid-commit: delta runs written, no manifest).
SELF_KILLS = {"mid_merge": "update", "mid_commit": "commit"}


@pytest.mark.parametrize("when", ["mid_fetch", "after_checkpoint", *SELF_KILLS])
def test_sigkill_keeps_the_last_checkpoint_and_a_rerun_completes_politely(tmp_path, when):
    web = sample_web()
    cfg = _slow_config()
    with serve(web) as server:
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        start = crawl.manifest().generation
        if when in SELF_KILLS:
            step = SELF_KILLS[when]
            proc = subprocess.Popen(helper_command(crawl.url, 2, step, "--stream"),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=subprocess_env(), start_new_session=True)  # fmt: skip
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == -signal.SIGKILL, (out, err[-3000:])
            steps = [line.split()[1:3] for line in out.splitlines() if line.startswith("STEP ")]
            assert steps[-1] == [step, "2"], out
            # the first checkpoint committed, the second micro-batch's files written, not it
            assert crawl.manifest().generation == start + 1
            pending = paths.round_dir("fetched", crawl.manifest().round + 1)
            assert crawl.fs.exists(crawl.path(pending))
        else:
            proc = _start(crawl, start_new_session=True)
            try:
                gen = _wait_for_generation(crawl, start, proc)
                if when == "mid_fetch":
                    _wait_for_generation(crawl, gen, proc)
                    time.sleep(0.2)  # between two checkpoints: fetching, not committing
            finally:
                proc.kill()
                proc.communicate()
        # the killed process's LocalCluster workers (its process group) stop fetching
        assert wait_gone(group_members(proc.pid), timeout_s=15) == []
        last = crawl.manifest()
        assert read_every_file(crawl, last) > 0
        status = subprocess.run(cli_command("status", crawl.url),
                                capture_output=True, text=True, env=subprocess_env())  # fmt: skip
        assert status.returncode == 0, status.stderr
        rerun = subprocess.run(cli_command("crawl", crawl.url, "--stream"), capture_output=True,
                               text=True, env=subprocess_env(), timeout=300)  # fmt: skip
        assert rerun.returncode == 0, rerun.stderr
        assert json.loads(rerun.stdout.strip().splitlines()[-1])["stopped_by"] == "nothing_due"
        entries = server.log.entries()
    truth = web.reachable(max_depth=cfg.filters.max_depth)
    answered = set(
        sql.query(crawl, "SELECT url FROM frontier WHERE status IN ('fetched', 'redirect', 'gone')")
        .column("url")
        .to_pylist()
    )
    assert answered and answered <= truth
    # the killed stream's unpersisted requests: the rerun waited a full delay first
    assert politeness_violations(entries, sample_delay(web, cfg)) == []


def test_rounds_after_a_sigkilled_stream_cool_every_host_down(tmp_path):
    # a stream writes no fetch list: the batch round knows the crash by the WARC files the last
    # checkpoint left open (engine.rerun.crash_rerun, engine.warcopen), and waits a full delay
    # before each host's first request
    web = sample_web()
    cfg = round_config(stream={"flush_interval_s": 3.0}, politeness={"host_delay_s": 0.3})
    with serve(web) as server:
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        proc = _start(crawl)
        try:
            _wait_for_generation(crawl, crawl.manifest().generation, proc)
            deadline = time.monotonic() + 60
            while not bytes_past_committed_end(crawl):  # a request answered after the checkpoint
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
        finally:
            proc.kill()
            proc.communicate()
        # the micro-batch being fetched at the kill answered requests and was never committed
        assert bytes_past_committed_end(crawl) > 0
        rerun = subprocess.run(cli_command("crawl", crawl.url, "--rounds", "1"),
                               capture_output=True, text=True, env=subprocess_env(),
                               timeout=300)  # fmt: skip
        assert rerun.returncode == 0, rerun.stderr
        entries = server.log.entries()
    summary = json.loads(rerun.stdout.splitlines()[0])
    assert summary["rerun_after_crash"] is True and summary["attempts"] > 0
    assert politeness_violations(entries, sample_delay(web, cfg)) == []
