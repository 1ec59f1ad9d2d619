"""Crash safety of a round (issue 5.3; docs/design.md §3 "Atomic rounds"): a process running a round on
its embedded LocalCluster is SIGKILLed at the start of generate, fetch, update and commit (by its
own ``on_step`` hook) and in the middle of fetching (by the web server, when the dead round's first
page request arrives); then the round is rerun.

After each kill: the last committed generation is whole (every file it names reads back with its
row count); the killed process's whole process group (its LocalCluster nannies and workers) is gone;
the rerun fetches every URL the dead round's fetch lists leased; and no two requests to one host,
the dead round's included, are closer than the host delay -- the dead round's last requests were
never persisted, so only the rerun's cool-down (a full delay per host before its first request)
keeps that. The host delay (2.5 s) is longer than the time from the kill to the rerun's first
request, so a rerun without the cool-down breaks it (checked by hand by disabling
``FetchWorker.cool_down``).

The rerun runs on a long-lived LocalCluster of the test process (a fresh :class:`Crawler`, as a
new ``batchcrawl round`` would start), so it starts within a second of the kill.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading

import pytest
from round_helpers import (
    fetched_rows,
    group_members,
    helper_command,
    new_crawl,
    orphan_table_rows,
    politeness_violations,
    read_every_file,
    robots_not_first,
    round_config,
    sample_web,
    serve,
    subprocess_env,
    wait_gone,
)

from batchcrawl.round import Crawler, dask_client
from batchcrawl.store.crawldir import CrawlDir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

DELAY_S = 2.5
KILLS = ("generate", "fetch", "mid-fetch", "update", "compact", "commit")


def crash_config():
    """Every host gets the same delay (Crawl-delay capped at it); one URL per host per round."""
    return round_config(
        politeness={"host_delay_s": DELAY_S, "max_crawl_delay_s": DELAY_S},
        generate={"max_urls_per_host": 1},
    )


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of the test process, for the rounds before the crash and the reruns."""
    with dask_client(crash_config()) as c:
        yield c


class KillOnPage:
    """The SampleWeb, plus: SIGKILL process ``pid`` when the first page (not robots.txt) request
    arrives after :meth:`arm` -- the killed round is then in the middle of fetching."""

    def __init__(self, web) -> None:
        self.web = web
        self.pid: int | None = None
        self.fired = threading.Event()
        self._lock = threading.Lock()

    def arm(self, pid: int) -> None:
        self.pid = pid

    def bind(self, port: int):
        self.web.bind(port)
        return self

    def ready(self) -> bool:
        """Whether the kill may happen now (called under the lock; subclasses narrow it)."""
        return True

    def __call__(self, host, path, headers):
        with self._lock:
            if self.pid is not None and path != "/robots.txt" and not self.fired.is_set():
                if self.ready():
                    os.kill(self.pid, signal.SIGKILL)
                    self.fired.set()
        return self.web(host, path, headers)


def with_crawler(crawl_url: str, client, run):
    """``run(crawler)`` on a fresh :class:`Crawler` whose shard actors are closed afterwards."""
    crawler = Crawler(crawl_url, client)
    try:
        return run(crawler)
    finally:
        crawler.close_actors()


@contextlib.contextmanager
def killed_helper(argv: list):
    """The round-runner script ``argv`` in its own session; on leaving, it and every process of
    its group are gone (SIGKILL), whatever the block did."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=subprocess_env(), start_new_session=True)  # fmt: skip
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in group_members(proc.pid):
            os.kill(pid, signal.SIGKILL)


def steps_until_killed(proc) -> tuple[str, list[str]]:
    """Wait for the helper to be SIGKILLed; its stdout and the steps it announced (``STEP x``)."""
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL, (out, err[-3000:])
    return out, [line.split()[1] for line in out.splitlines() if line.startswith("STEP ")]


@pytest.mark.parametrize("kill_at", KILLS)
def test_sigkilled_round_is_rerun_whole_and_polite(kill_at, client, tmp_path):
    web = sample_web(hosts=4, pages=12, zipf_exponent=0.0, extras_every=0, links_per_page=6,
                     menu_links=3)  # fmt: skip
    app = KillOnPage(web)
    cfg = crash_config()
    with serve(app) as server:
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        with_crawler(crawl.url, client, lambda c: c.run_round(cfg))  # round 1, committed
        before = crawl.manifest()
        assert before.round == 1
        step = None if kill_at == "mid-fetch" else kill_at
        with killed_helper(helper_command(crawl.url, 1, step)) as proc:
            if kill_at == "mid-fetch":
                app.arm(proc.pid)
            out, steps = steps_until_killed(proc)
            assert steps[-1] == ("fetch" if kill_at == "mid-fetch" else kill_at), out
            # -- the last committed generation is intact ----------------------------------------
            crawl = CrawlDir.open(crawl.url)
            assert crawl.manifest().generation == before.generation
            assert read_every_file(crawl, crawl.manifest()) == read_every_file(crawl, before)
            leased = {r["url"] for r in orphan_table_rows(crawl, "fetchlists", 2)}
            if kill_at == "generate":
                assert leased == set()
            else:
                assert leased, "the dead round wrote its fetch lists"
            # -- rerun at once --------------------------------------------------------------------
            summary = with_crawler(crawl.url, client, lambda c: c.run_round(cfg))
            entries = server.log.entries()
            leftovers = wait_gone(group_members(proc.pid), timeout_s=10)
    assert leftovers == [], "LocalCluster processes outlived the killed round"
    assert summary["round"] == 2 and summary["rerun_after_crash"] == (kill_at != "generate")
    after = crawl.manifest()
    assert after.generation == before.generation + 1 and after.round == 2
    read_every_file(crawl, after)
    fetched_again = {f["url"] for f in fetched_rows(crawl) if f["round"] == 2}
    assert leased <= fetched_again, f"leased by the dead round, lost: {leased - fetched_again}"
    if kill_at == "mid-fetch":
        assert app.fired.is_set()
    assert robots_not_first(entries) == []
    assert politeness_violations(entries, lambda host: DELAY_S) == []


# -- pipelined rounds (round.pipeline: round N+1 fetches while round N is updated and committed) ---
#: (step, K): SIGKILL at the K-th start of the step in the run. The run after round 1 goes
#: generate 2, fetch 2, preselect 3, fetch 3, update 2, compact 2, commit 2, preselect 4, fetch 4,
#: update 3, ...: during the pre-selection of round 3 (round 2 fetching); as round 3's lists are
#: handed out; during round 3's fetch before commit 2 (update 2, commit 2); during update 3 with
#: round 4 fetching (round 2 committed).
PIPELINE_KILLS = (("preselect", 1), ("fetch", 2), ("update", 1), ("commit", 1), ("update", 2))


def pipeline_config():
    """:func:`crash_config` with pipelined rounds: a pre-selection of 2 of the 4 hosts is fetched."""
    return crash_config().replace(round={"pipeline": True, "pipeline_min_busy_share": 0.25})


@pytest.mark.parametrize(("kill_at", "nth"), PIPELINE_KILLS)
def test_sigkilled_pipelined_rounds_rerun_whole_and_polite(kill_at, nth, client, tmp_path):
    from round_helpers import frontier_rows

    from batchcrawl.pipeline import run_pipelined
    from batchcrawl.store.gc import gc, referenced_files

    # 4 pages a host, one a round: rounds 2, 3 and 4 each hold one URL of every host with one left
    web = sample_web(hosts=4, pages=16, zipf_exponent=0.0, extras_every=0, links_per_page=6,
                     menu_links=3)  # fmt: skip
    cfg = pipeline_config()
    with serve(web) as server:
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        with_crawler(crawl.url, client, lambda c: c.run_round(cfg))  # round 1, committed
        with killed_helper(helper_command(crawl.url, 50, kill_at, "--nth", str(nth))) as proc:
            out, steps = steps_until_killed(proc)
            assert steps[-1] == kill_at and steps.count(kill_at) == nth, out
            # -- the last committed generation is whole; the dead run's rounds are orphans ------
            crawl = CrawlDir.open(crawl.url)
            manifest = crawl.manifest()
            assert manifest.round == (2 if (kill_at, nth) == ("update", 2) else 1)
            read_every_file(crawl, manifest)
            dead = manifest.round + 1
            leased = {r["url"] for r in orphan_table_rows(crawl, "fetchlists", dead)}
            ahead = {r["url"] for r in orphan_table_rows(crawl, "fetchlists", dead + 1)}
            assert leased, "the dead run's round in flight wrote its fetch lists"
            # the last pre-selection was fetched (not dropped by the fallback rule) iff "fetch"
            # followed it; round 3's always is (one URL of each of the 4 hosts left)
            last = len(steps) - 1 - steps[::-1].index("preselect") if "preselect" in steps else -1
            ahead_fetched = steps[last + 1 : last + 2] == ["fetch"]
            if (kill_at, nth) != ("preselect", 1):
                assert ahead_fetched or (kill_at, nth) == ("update", 2), out
                assert bool(ahead) == ahead_fetched, out
            assert not leased & ahead, "a URL leased by two rounds in flight"
            # -- rerun at once, to the end --------------------------------------------------------
            summaries = with_crawler(crawl.url, client, lambda c: run_pipelined(c, cfg, 50))
            entries = server.log.entries()
            leftovers = wait_gone(group_members(proc.pid), timeout_s=10)
    assert leftovers == [], "LocalCluster processes outlived the killed run"
    assert summaries[0]["round"] == dead and summaries[0]["rerun_after_crash"]
    assert [s["round"] for s in summaries] == list(range(dead, dead + len(summaries)))
    assert len(summaries) < 50, "the rerun ended because nothing was due"
    after = crawl.manifest()
    read_every_file(crawl, after)
    # the same URL set as an uninterrupted crawl: every reachable page, each fetched once
    fetched = fetched_rows(crawl)
    urls = [f["url"] for f in fetched]
    assert len(urls) == len(set(urls)), "a URL fetched twice in the committed crawl"
    assert leased | ahead <= set(urls), (
        f"leased by the dead run, lost: {(leased | ahead) - set(urls)}"
    )
    status = {r["url"]: r["status"] for r in frontier_rows(crawl)}
    truth = web.reachable(max_depth=cfg.filters.max_depth)
    assert {u for u in truth if status.get(u) not in ("fetched", "redirect", "gone")} == set()
    assert robots_not_first(entries) == []
    assert politeness_violations(entries, lambda host: DELAY_S) == []
    # gc removes what the dead run left and the rerun did not overwrite (e.g. its WARC files)
    gc(crawl, keep=after.generation + 1, tmp_min_age_s=0.0)
    keep = referenced_files(crawl, list(range(after.generation + 1)))
    for table in ("fetchlists", "fetched", "links", "edges", "warc"):
        left = {p for p in crawl.fs.find(crawl.path(table))} if crawl.fs.exists(
            crawl.path(table)) else set()  # fmt: skip
        rel = {p[len(crawl.path("")) :].lstrip("/") for p in left}
        assert rel <= keep, (table, sorted(rel - keep)[:5])
