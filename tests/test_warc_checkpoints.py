"""WARC files rotated by size, not by micro-batch (issue 35 item 2; docs/design.md §8c): a stream
keeps one WARC file per shard open across its checkpoints until ``fetch.warc_max_bytes``, each
commit records the end of the records written so far, and the next start after a SIGKILL cuts the
open files back to it (:mod:`batchcrawl.engine.warcopen`).

Real streams (``batchcrawl crawl --stream`` subprocesses, a LocalCluster of 2 worker processes)
against a SampleWeb on loopback; the SIGKILLs hit the real process at each step of a checkpoint
(its own ``on_step`` hook: before the take, after the take's WARC checkpoint but before the merge,
before compaction, before the manifest is written) and mid-fetch (the test, once the open files hold
records past the committed end). Afterwards the rerun streams to the end, and every committed row
points at a whole record inside its file, ``warcio check`` passes on every file, and each CDXJ
indexes exactly its file's records (:mod:`warc_checks`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from round_helpers import (
    cli_command,
    group_members,
    helper_command,
    new_crawl,
    round_config,
    sample_web,
    serve,
    subprocess_env,
    wait_gone,
)
from warc_checks import bytes_past_committed_end, check_committed_warcs, files_by_shard

from batchcrawl.engine.warcopen import committed_open_warcs
from batchcrawl.store.crawldir import CrawlDir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _config(**fetch):
    # host delay 0.3 s: the 90-page web takes several seconds, a checkpoint every 0.5 s
    return round_config(stream={"flush_interval_s": 0.5}, politeness={"host_delay_s": 0.3},
                        fetch={"shards": 2, **fetch})  # fmt: skip


def _stream(crawl: CrawlDir, *extra: str) -> dict:
    done = subprocess.run(cli_command("crawl", crawl.url, "--stream", *extra), capture_output=True,
                          text=True, env=subprocess_env(), timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    summary["stderr"] = done.stderr
    return summary


@pytest.mark.parametrize("max_bytes", [1_000_000_000, 40_000])
def test_a_stream_writes_one_warc_file_per_shard_per_warc_max_bytes(tmp_path, max_bytes):
    web = sample_web()
    cfg = _config(warc_max_bytes=max_bytes)
    with serve(web):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        summary = _stream(crawl)
    assert summary["stopped_by"] == "nothing_due" and summary["checkpoints"] >= 3, summary
    sizes = check_committed_warcs(crawl)
    assert committed_open_warcs(crawl) == {}  # a clean stop closed every file
    by_shard = files_by_shard(list(sizes))
    assert sorted(by_shard) == [0, 1]
    for files in by_shard.values():
        total = sum(sizes[f] for f in files)
        # a file is closed once it reaches the size: all but the last are at least that big
        assert len(files) <= total // max_bytes + 1, (files, total)
        assert all(sizes[f] >= max_bytes for f in files[:-1])
    if max_bytes > sum(sizes.values()):
        assert all(len(files) == 1 for files in by_shard.values())  # not one per checkpoint
    else:
        assert max(len(files) for files in by_shard.values()) > 1  # rotated by size


#: (step, its N-th start) at which the stream SIGKILLs itself: the third take (right after the
#: second checkpoint), and after the second take -- its WARC checkpoint flushed records and wrote
#: a CDXJ that the crash leaves uncommitted -- before the merge, the compaction, the manifest.
SELF_KILLS = [("take", 3), ("update", 2), ("compact", 2), ("commit", 2)]


def _kill_mid_fetch(crawl: CrawlDir) -> subprocess.Popen:
    """A stream SIGKILLed by the test once its open files hold records written after the last
    checkpoint."""
    proc = subprocess.Popen(cli_command("crawl", crawl.url, "--stream"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=subprocess_env(),
                            start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    try:
        while not (committed_open_warcs(crawl) and bytes_past_committed_end(crawl) > 0):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.communicate()
    return proc


@pytest.mark.parametrize("kill_at", [*(f"{s}-{n}" for s, n in SELF_KILLS), "mid-fetch"])
def test_sigkill_at_each_point_of_a_checkpoint_leaves_every_warc_file_whole(tmp_path, kill_at):
    web = sample_web()
    cfg = _config()
    with serve(web):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        if kill_at == "mid-fetch":
            proc = _kill_mid_fetch(crawl)
        else:
            step, nth = kill_at.split("-")
            proc = subprocess.Popen(helper_command(crawl.url, int(nth), step, "--stream"),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=subprocess_env(), start_new_session=True)  # fmt: skip
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == -signal.SIGKILL, (out, err[-3000:])
        # the killed stream's workers (its process group) stop writing
        assert wait_gone(group_members(proc.pid), timeout_s=15) == []
        left_open = committed_open_warcs(crawl)
        assert left_open, "the killed stream had committed a checkpoint with open files"
        past = bytes_past_committed_end(crawl)
        if kill_at != "take-3":  # a take (or the test) flushed records past the last commit
            assert past > 0
        rerun = _stream(crawl)
    assert rerun["stopped_by"] == "nothing_due" and rerun["rerun_after_crash"] is True, rerun
    assert "cut back to its last committed record" in rerun["stderr"]
    check_committed_warcs(crawl, also=list(left_open))
    for name, end in left_open.items():  # cut back exactly, then closed for good
        assert os.path.getsize(crawl.path(name)) == end
    assert committed_open_warcs(crawl) == {}
