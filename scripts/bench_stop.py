"""How long a stop takes: signal -> exit of ``round``, ``crawl`` and ``crawl --stream`` (issue 34).

Not a test (tests assert what a stop does, never how long it took: ``tests/test_stop_anytime.py``).
For each command, each signal and each moment after the start, a fresh crawl of a loopback sample
web (:class:`~batchcrawl.testing.sampleweb.SampleWeb`, 4 hosts, 400 pages, served by
:class:`~batchcrawl.testing.webserver.MultiHostServer`; the config of the tests,
``loopback_test_config``, 2 workers, 2 shards, host delay 0.2 s) is started as a real ``batchcrawl`` subprocess in
its own process group, sent the signal (SIGINT to the group, as a terminal's Ctrl-C; SIGTERM to
the process, as Airflow and Kubernetes), and timed:

* ``exit_s``: signal -> the command's exit (issue 34's target: 2 s; a stream takes its last
  checkpoint first);
* ``gone_s``: signal -> no process of its group left running (the Dask workers; zombies not
  counted);
* ``rc`` and ``stderr_lines`` (progress records not counted; target: at most 3).

One JSON line per run, then the largest ``exit_s`` per command. Usage::

    python scripts/bench_stop.py                               # 3 commands x 2 signals x 5 moments
    python scripts/bench_stop.py --commands stream --moments 1,3,6 --repeat 3
    python scripts/bench_stop.py --commands stream --moments 30 --hosts 50 --pages 20000 \
        --host-delay-s 0.05                                    # a larger frontier to checkpoint
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from batchcrawl.config import loopback_test_config, to_toml  # noqa: E402
from batchcrawl.frontier.inject import inject  # noqa: E402
from batchcrawl.store.crawldir import CrawlDir  # noqa: E402
from batchcrawl.testing.sampleweb import SampleWeb  # noqa: E402
from batchcrawl.testing.webserver import MultiHostServer  # noqa: E402

COMMANDS = {
    "round": ("round",),
    "crawl": ("crawl", "--rounds", "50"),
    "stream": ("crawl", "--stream", "--max-seconds", "120"),
}
SIGNALS = {"SIGINT": signal.SIGINT, "SIGTERM": signal.SIGTERM}


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies not counted: an orphan's exit
    status waits for init, which on some machines reaps only every second or two)."""
    for p in psutil.process_iter(["pid", "status"]):
        with contextlib.suppress(psutil.Error, OSError):
            if os.getpgid(p.info["pid"]) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                return True
    return False


def stop_once(tmp: Path, web: SampleWeb, command: str, signame: str, after_s: float,
              host_delay_s: float) -> dict:  # fmt: skip
    """One run: a fresh crawl, the command started, ``signame`` sent ``after_s`` seconds later."""
    cfg = loopback_test_config(
        politeness={"host_delay_s": host_delay_s, "ip_delay_s": 0.0, "ip_concurrency": 8,
                    "max_crawl_delay_s": 0.3},
        fetch={"shards": 2}, frontier={"buckets": 4}, round={"workers": 2},
    )  # fmt: skip
    crawl = CrawlDir.create(str(tmp / f"{command}-{signame}-{after_s}-{time.monotonic_ns()}"),
                            to_toml(cfg), buckets=cfg.frontier.buckets)  # fmt: skip
    inject(crawl, cfg, web.seeds())
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHCRAWL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    args = [COMMANDS[command][0], crawl.url, *COMMANDS[command][1:]]
    proc = subprocess.Popen([sys.executable, "-m", "batchcrawl.cli", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)  # fmt: skip
    time.sleep(after_s)
    if proc.poll() is not None:
        return {"command": command, "signal": signame, "after_s": after_s, "ended_before": True}
    sent = time.monotonic()
    if signame == "SIGINT":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    exit_s = time.monotonic() - sent
    while _group_alive(proc.pid) and time.monotonic() - sent < 60:
        time.sleep(0.01)
    lines = [ln for ln in err.splitlines()
             if ln.strip() and " INFO batchcrawl.console.progress: " not in ln]  # fmt: skip
    return {"command": command, "signal": signame, "after_s": after_s, "rc": proc.returncode,
            "exit_s": round(exit_s, 3), "gone_s": round(time.monotonic() - sent, 3),
            "stderr_lines": len(lines), "first_line": lines[0][:100] if lines else "",
            **_last_steps(out)}  # fmt: skip


def _last_steps(stdout: str) -> dict:
    """The stream's (or last round's) step seconds from its JSON summary on stdout: where a stop
    that takes a last checkpoint spends its time."""
    for line in reversed(stdout.splitlines()):
        with contextlib.suppress(ValueError):
            summary = json.loads(line)
            if isinstance(summary, dict) and "seconds_by_step" in summary:
                return {
                    "steps_s": summary["seconds_by_step"],
                    "last_batch_s": (summary.get("micro_batch_s") or {}).get("max"),
                }
    return {}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--signals", default="SIGINT,SIGTERM")
    ap.add_argument("--moments", default="0.2,0.5,1,1.5,3", help="seconds after the start")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--host-delay-s", type=float, default=0.2)
    ap.add_argument("--hosts", type=int, default=4)
    ap.add_argument("--pages", type=int, default=400)
    args = ap.parse_args()
    web = SampleWeb(hosts=args.hosts, pages=args.pages, seed=7, trap=False, page_bytes=2000, links_per_page=8,
                    menu_links=3, extras_every=0)  # fmt: skip
    server = MultiHostServer(web)
    server.start()
    web.bind(server.port)
    worst: dict[str, float] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-stop-") as tmp:
            for _ in range(args.repeat):
                for command in args.commands.split(","):
                    for signame in args.signals.split(","):
                        for moment in (float(m) for m in args.moments.split(",")):
                            row = stop_once(Path(tmp), web, command, signame, moment,
                                            args.host_delay_s)  # fmt: skip
                            print(json.dumps(row), flush=True)
                            if "exit_s" in row:
                                worst[command] = max(worst.get(command, 0.0), row["exit_s"])
    finally:
        server.stop()
    print(json.dumps({"worst_exit_s": worst}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
