"""A round killed by its environment (issue 13, 11a), through the real CLI in a subprocess:
a Dask worker process of the embedded LocalCluster killed mid-fetch, and a crawl directory on a
real, small, full filesystem. Each ends in one stderr line naming what failed, saying the last
generation is intact and what to do, with its documented exit code; a rerun then commits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import psutil
import pytest
from round_helpers import (
    HoldPages,
    cli_command,
    kill_group,
    new_crawl,
    round_config,
    sample_web,
    serve,
    subprocess_env,
)

from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.lock import LOCK_FILE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _fetching_child(pid: int, port: int) -> psutil.Process:
    """The child process of ``pid`` (a Dask worker) with a connection to ``port``."""
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if any(c.raddr and c.raddr.port == port for c in child.net_connections("tcp")):
                return child
        except psutil.NoSuchProcess:
            continue
    raise AssertionError("no child process is connected to the web server")


def kill_fetching_worker(proc: subprocess.Popen, app, port: int) -> tuple[str, str]:
    """Once ``app`` (a :class:`round_helpers.HoldPages`) holds a page request, SIGKILL the Dask
    worker process of ``proc`` connected to the web on ``port`` (like the OOM killer), release
    the page and return ``proc``'s (stdout, stderr); the whole group is killed if it hangs."""
    try:
        assert app.arrived.wait(90), "no page was fetched"
        _fetching_child(proc.pid, port).kill()
        app.release.set()
        return proc.communicate(timeout=150)
    finally:
        app.release.set()
        kill_group(proc)


def test_a_worker_killed_mid_fetch_ends_in_one_line_and_a_rerun_recovers(tmp_path):
    web = sample_web(hosts=4, pages=16, zipf_exponent=0.0, extras_every=0, links_per_page=4,
                     menu_links=2)  # fmt: skip
    app = HoldPages(web)
    cfg = round_config()  # 2 shards on 2 worker processes
    with serve(app) as server:
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        before = crawl.manifest()
        app.armed.set()
        proc = subprocess.Popen(
            cli_command("round", crawl.url), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=subprocess_env(), start_new_session=True,
        )  # fmt: skip
        out, err = kill_fetching_worker(proc, app, server.port)
        assert proc.returncode == 5, err[-3000:]
        assert out == ""
        # one line: no traceback, and not distributed's records of the lost worker either
        # ("broadcast to ... failed", "Restarting worker")
        lines = err.strip().splitlines()
        assert len(lines) == 1, err[-3000:]
        assert lines[0].startswith("batchcrawl: error: a Dask worker was lost during the round")
        assert f"the last generation ({before.generation}, round 0) is intact" in lines[0]
        assert "rerun" in lines[0]
        crawl = CrawlDir.open(crawl.url)
        assert crawl.manifest().generation == before.generation
        assert not os.path.exists(crawl.path(LOCK_FILE))
        app.armed.clear()
        again = subprocess.run(cli_command("round", crawl.url), capture_output=True, text=True,
                               env=subprocess_env(), timeout=150)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["round"] == 1


def _can_mount_tmpfs() -> bool:
    """A user and mount namespace (``unshare -rm``, no root needed where user namespaces are on)
    in which a small tmpfs can be mounted."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True)  # fmt: skip
    return probe.returncode == 0


def _tree_bytes(root) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)


@pytest.mark.skipif(not _can_mount_tmpfs(), reason="cannot mount a tmpfs in a user namespace")
def test_a_full_disk_ends_in_one_line_and_a_rerun_elsewhere_recovers(tmp_path):
    # real pages of 100 KB; the crawl is copied onto a tmpfs with 64 KB to spare: the round's
    # fetch lists fit, its WARC files do not
    web = sample_web(hosts=8, pages=16, page_bytes=100_000, extras_every=0)
    cfg = round_config(fetch={"warc_compress_level": 0})
    with serve(web):
        crawl = new_crawl(tmp_path / "crawl", cfg, web.seeds())
        before = crawl.manifest()
        size_kb = (_tree_bytes(crawl.root) + 64 * 1024) // 1024 + 4 * 64  # 4 KB blocks, ~64 files
        mnt, out = tmp_path / "mnt", tmp_path / "after"
        mnt.mkdir()
        round_cmd = " ".join(cli_command("round", mnt / "crawl"))
        script = (f"mount -t tmpfs -o size={size_kb}k tmpfs {mnt} && cp -a {crawl.root} {mnt}/crawl"
                  f" && {{ {round_cmd}; rc=$?; cp -a {mnt}/crawl {out}; exit $rc; }}")  # fmt: skip
        proc = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True,
                              text=True, env=subprocess_env(), timeout=200)  # fmt: skip
        err = proc.stderr
        assert proc.returncode == 3, err[-3000:]
        assert "Traceback" not in err and "processing" not in err, err[-3000:]
        lines = [ln for ln in err.strip().splitlines() if ln.startswith("batchcrawl:")]
        assert len(lines) == 1, err[-3000:]
        assert lines[0].startswith("batchcrawl: error: the crawl directory cannot take writes")
        assert "No space left on device" in lines[0]
        assert f"the last generation ({before.generation}, round 0) is intact" in lines[0]
        assert "free space" in lines[0]
        after = CrawlDir.open(str(out))
        assert after.manifest().generation == before.generation
        assert not os.path.exists(after.path(LOCK_FILE))
        again = subprocess.run(cli_command("round", out), capture_output=True, text=True,
                               env=subprocess_env(), timeout=150)  # fmt: skip
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["round"] == 1
