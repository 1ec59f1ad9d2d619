"""Benchmark one fetch worker against a local sample web (not a test).

The sample web is served by a separate process (``scripts/serve_sample_web.py``), so the CPU time
measured here is the worker's alone. The worker fetches every page of the web with
``host_delay_s = 0`` (20 KB HTML pages with 60 links each by default) and prints one JSON line::

    {"pages", "seconds", "pages_per_s", "cpu_ms_per_page", "fetch_ms", "parse_ms", "simhash_ms",
     "links_ms", "warc_ms", "warc_bytes_per_page", "server_cpu_ms_per_page", "threads",
     "warc_compress_level"}

``cpu_ms_per_page`` is the worker process's CPU time (all threads) per page that got a response;
``fetch_ms``/``parse_ms``/``simhash_ms``/``links_ms``/``warc_ms`` split the fetch threads' CPU time
by phase;
``server_cpu_ms_per_page`` is the sample web's (Linux only): on 2 cores the server, not the worker,
limits ``pages_per_s``, and its CPU per page grows with the number of concurrent connections.
Target (issues 4, 16): <= 1.0 ms of worker CPU per page.

    python scripts/bench_fetch.py --hosts 50 --pages 5000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import fsspec
from fsspec.implementations.dirfs import DirFileSystem

from batchcrawl.config import loopback_test_config
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import FetchItem
from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key

HERE = Path(__file__).resolve().parent


def start_server(hosts: int, pages: int, seed: int) -> tuple[subprocess.Popen, dict]:
    """Start the sample web in its own process; return it and its JSON readiness line."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "serve_sample_web.py"), "--hosts", str(hosts), "--pages",
         str(pages), "--seed", str(seed), "--no-trap", "--seconds", "3600"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise SystemExit("sample web server did not start")
    return proc, json.loads(line)


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of another process (Linux ``/proc``), or None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--pages", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument(
        "--warc-compress-level",
        type=int,
        default=None,
        help="fetch.warc_compress_level (default: the config default)",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    proc, info = start_server(args.hosts, args.pages, args.seed)
    try:
        web = SampleWeb(args.hosts, args.pages, seed=args.seed, trap=False).bind(info["port"])
        level = {}
        if args.warc_compress_level is not None:
            level = {"warc_compress_level": args.warc_compress_level}
        cfg = loopback_test_config(
            politeness={"host_delay_s": 0.0, "ip_delay_s": 0.0, "adaptive_delay_factor": 0.0,
                        "max_crawl_delay_s": 0.0,
                        "ip_concurrency": args.threads},
            fetch={"threads": args.threads, **level},
            filters={"seed_scope": "none"},
        )  # fmt: skip
        items = []
        for spec in web.hosts:
            for url in web.allowed_pages(spec.name):
                c = canonicalize(url)
                h = host_of(c)
                items.append(FetchItem(url_key(c), c, h, domain_of(h), 1))
        with tempfile.TemporaryDirectory() as tmp:
            fs = DirFileSystem(tmp, fsspec.filesystem("file"))
            worker = FetchWorker(cfg, 0, fs)
            server0 = process_cpu_s(proc.pid)
            cpu0, t0 = time.process_time(), time.perf_counter()
            run = worker.run(items, round=1)
            cpu, seconds = time.process_time() - cpu0, time.perf_counter() - t0
            server1 = process_cpu_s(proc.pid)
            worker.close()
            warc_bytes = sum(fs.size(name) for name in run.warc_files)
        pages = sum(1 for r in run.fetched if r.get("fetch_status") is not None)
        c = run.counters
        per = 1000.0 / max(pages, 1)
        print(json.dumps({
            "pages": pages,
            "seconds": round(seconds, 3),
            "pages_per_s": round(pages / seconds, 1),
            "cpu_ms_per_page": round(cpu * per, 3),
            "fetch_ms": round(c["cpu_fetch_s"] * per, 3),
            "parse_ms": round(c["cpu_parse_s"] * per, 3),
            "simhash_ms": round(c["cpu_simhash_s"] * per, 3),
            "links_ms": round(c["cpu_links_s"] * per, 3),
            "warc_ms": round(c["cpu_warc_s"] * per, 3),
            "warc_bytes_per_page": round(warc_bytes / max(pages, 1)),
            "server_cpu_ms_per_page": (
                None if server0 is None or server1 is None else round((server1 - server0) * per, 3)
            ),
            "threads": args.threads,
            "warc_compress_level": cfg.fetch.warc_compress_level,
        }))  # fmt: skip
    finally:
        proc.kill()
        proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
