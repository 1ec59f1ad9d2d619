"""Benchmark whole rounds on the embedded default (not a test).

Generates the sample web (H hosts, N pages), serves it from its own process on loopback, and crawls
it with ``batchcrawl`` rounds on a LocalCluster until nothing is due or T seconds have passed.
Prints one JSON line::

    {"pages", "seconds", "pages_per_s", "distinct_pages", "politeness_violations",
     "politeness_bound", "bound_share", "peak_rss_mb", "fetch_share", "seconds_by_step", "rounds"}

* ``pages``: fetch attempts that got an HTTP response; ``distinct_pages``: distinct URLs among them.
* ``politeness_violations``: consecutive requests to one host, in the *server's* log, closer than
  max(D, the host's Crawl-delay capped at ``politeness.max_crawl_delay_s``).
* ``politeness_bound``: the most any polite crawler could fetch in the crawl's fetch time: the sum
  over hosts of min(allowed pages of the host, 1 + T_fetch / max(D, its Crawl-delay)).
* ``fetch_idle_share``: share of the fetch steps' shard-seconds in which fewer than half a shard's
  fetch threads had work (start-up, slow tail: :mod:`batchcrawl.fetch.idle`); ``wall_idle_share``
  the same over the whole run (other steps count as idle).
* ``fetch_share``: fetch-step seconds / round wall seconds (first step to last commit);
  ``overlapped_s``: seconds of each other step that ran while a round was fetching (pipelined
  rounds, ``--set round.pipeline=true``); ``peak_rss_mb``: the largest total RSS
  of this process and its Dask worker processes (sampled every 0.5 s).

Issue 5 targets on a 2-core machine, T = 120, H = 500, N = 50,000: at D = 0, >= 600 distinct
pages/s; at D = 1.0, >= 90 % of the politeness bound and 0 violations; fetching >= 90 % of round time.

    python scripts/bench_round.py --hosts 500 --pages 50000 --host-delay-s 0 --seconds 120
    python scripts/bench_round.py ... --stream      # the same with crawl --stream

With ``--stream`` the fetch step is the whole run (``fetch_share`` 1) and ``rounds`` counts the
stream's checkpoints.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import psutil

from batchcrawl.config import loopback_test_config
from batchcrawl.console.signals import StopRequest
from batchcrawl.errors import NothingDue
from batchcrawl.frontier.inject import inject
from batchcrawl.round import run_rounds
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.stream import run_stream
from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.testing.webserver import politeness_violations

HERE = Path(__file__).resolve().parent


class RssSampler(threading.Thread):
    """Samples the summed RSS of this process and its children (not the web server)."""

    def __init__(self, exclude_pid: int) -> None:
        super().__init__(daemon=True)
        self.exclude = exclude_pid
        self.peak = 0
        self.stop = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self.stop.wait(0.5):
            total = 0
            for p in [me, *me.children(recursive=True)]:
                if p.pid == self.exclude:
                    continue
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, total)


def run_batch(crawl_url: str, cfg, seconds: float) -> list[dict]:
    """Rounds (``batchcrawl crawl``'s driver, pipelined if ``round.pipeline``) until nothing is
    due or ``seconds`` have passed; their summaries."""
    try:
        return run_rounds(crawl_url, cfg, 1_000_000, max_seconds=seconds)
    except NothingDue:
        return []


def union_s(spans: list[tuple[float, float]]) -> float:
    """Length of the union of ``(start, end)`` intervals, seconds."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def overlap_s(span: tuple[float, float], spans: list[tuple[float, float]]) -> float:
    """Seconds of ``span`` covered by the (disjoint) ``spans``."""
    return sum(max(0.0, min(span[1], b) - max(span[0], a)) for a, b in spans)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--pages", type=int, default=50_000)
    ap.add_argument("--host-delay-s", type=float, default=0.0)
    ap.add_argument("--seconds", type=float, default=120.0)
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None, help="fetch threads per shard")
    ap.add_argument("--stream", action="store_true", help="crawl --stream instead of rounds")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.KEY=V")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        log_file = os.path.join(tmp, "server-log.jsonl")
        server = subprocess.Popen(
            [sys.executable, str(HERE / "serve_sample_web.py"), "--hosts", str(args.hosts),
             "--pages", str(args.pages), "--seconds", str(args.seconds * 3 + 600),
             "--log", log_file],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        info = json.loads(server.stdout.readline())
        web = SampleWeb(args.hosts, args.pages).bind(info["port"])
        overrides = {
            "politeness": {"host_delay_s": args.host_delay_s, "ip_delay_s": 0.0,
                           "ip_concurrency": 64},
            "fetch": {"shards": args.shards},
            "round": {"workers": args.workers},
            "generate": {"max_urls_per_host": 100_000},
        }  # fmt: skip
        if args.threads:
            overrides["fetch"]["threads"] = args.threads
        cfg = loopback_test_config(**overrides)
        from batchcrawl.config import load_config, to_toml

        cfg = load_config(files=[("bench", to_toml(cfg))], environ={}, sets=args.sets)
        crawl = CrawlDir.create(os.path.join(tmp, "crawl"), to_toml(cfg), cfg.frontier.buckets)
        inject(crawl, cfg, web.seeds())
        sampler = RssSampler(server.pid)
        sampler.start()
        summaries = []
        t0 = time.monotonic()
        if args.stream:
            summaries.append(run_stream(crawl.url, cfg, StopRequest(), max_seconds=args.seconds))
        else:
            summaries = run_batch(crawl.url, cfg, args.seconds)
        seconds = time.monotonic() - t0
        sampler.stop.set()
        server.terminate()
        server.wait()
        log = [json.loads(line) for line in open(log_file, encoding="utf-8")]
        from batchcrawl.store.sql import query

        distinct = query(crawl, "SELECT count(DISTINCT url) FROM fetched "
                                "WHERE fetch_status IS NOT NULL").column(0)[0].as_py()  # fmt: skip

    pol = cfg.politeness
    violations = politeness_violations(  # robots.txt requests obey the host delay too
        log, lambda host: web.polite_delay(host, pol.host_delay_s, pol.max_crawl_delay_s)
    )
    steps: Counter = Counter()
    for s in summaries:
        steps.update(s["seconds_by_step"])
    # the rounds' wall time: from the first step to the last commit (pipelined rounds overlap:
    # the sum of their elapsed_s would count the overlap twice)
    spans = [tuple(v) for s in summaries for v in s.get("step_spans_s", {}).values()]
    if args.stream:
        round_wall = sum(s["elapsed_s"] for s in summaries) or 1.0
    else:
        round_wall = (max(b for _, b in spans) - min(a for a, _ in spans)) if spans else 1.0
    fetch_s = round_wall if args.stream else steps["fetch"]  # a stream never stops fetching
    fetch_spans = [tuple(s["step_spans_s"]["fetch"]) for s in summaries] if not args.stream else []
    # seconds of each other step that ran while some round was fetching (pipelined rounds)
    overlapped: Counter = Counter()
    for s in summaries if not args.stream else ():
        for k, v in s["step_spans_s"].items():
            if k != "fetch":
                overlapped[k] += overlap_s(tuple(v), fetch_spans)
    bound = web.politeness_bound(fetch_s, max(args.host_delay_s, 1e-9))  # D = 0: no host cap
    pages = sum(s["responses"] for s in summaries)
    # issue 16: shard-seconds with fewer than half the fetch threads given work, over the fetch
    # steps and over the whole run (generate, update, compact and commit leave every thread idle)
    busy = (
        0.0
        if args.stream
        else sum((1 - s["fetch_idle_share"]) * s["seconds_by_step"]["fetch"] for s in summaries)
    )
    fetch_idle = None if args.stream else round(1 - busy / max(steps["fetch"], 1e-9), 3)
    print(json.dumps({
        "pages": pages,
        "seconds": round(seconds, 2),
        "pages_per_s": round(pages / seconds, 1),
        "distinct_pages": distinct,
        "distinct_pages_per_s": round(distinct / seconds, 1),
        "politeness_violations": len(violations),
        "politeness_bound": bound if args.host_delay_s > 0 else None,
        "bound_share": round(distinct / bound, 3) if bound and args.host_delay_s > 0 else None,
        "peak_rss_mb": round(sampler.peak / 2**20, 1),
        "fetch_share": round(fetch_s / round_wall, 3),
        "fetch_idle_share": fetch_idle,
        "wall_idle_share": None if args.stream else round(1 - busy / seconds, 3),
        "seconds_by_step": {k: round(v, 2) for k, v in steps.items()},
        # fetch steps' wall time (their union) and the other steps' seconds spent while a fetch
        # ran (pipelined rounds: round.pipeline); idle = neither
        "fetch_wall_s": None if args.stream else round(union_s(fetch_spans), 2),
        "overlapped_s": {k: round(v, 2) for k, v in overlapped.items()},
        "pipelined_rounds": sum(1 for s in summaries if s.get("pipelined")),
        "rounds": summaries[0]["checkpoints"] if args.stream else len(summaries),
        "per_round": None if args.stream else [
            {"responses": s["responses"], "elapsed_s": s["elapsed_s"],
             "fetch_s": s["seconds_by_step"]["fetch"],
             "fetch_startup_s": s["seconds_by_step"]["fetch_startup"],
             "fetch_tail_s": s["seconds_by_step"]["fetch_tail"],
             "fetch_idle_share": s["fetch_idle_share"], "not_fetched": s["not_fetched"]}
            for s in summaries
        ],
        "mode": "stream" if args.stream else "batch",
        "hosts": args.hosts,
        "host_delay_s": args.host_delay_s,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
