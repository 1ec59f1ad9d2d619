"""Benchmark one fetch worker against a local sample web (not a test).

The sample web is served by a separate process (``scripts/serve_sample_web.py``), so the CPU time
measured here is the worker's alone. The worker fetches every page of the web with
``host_delay_s = 0`` (20 KB HTML pages with 60 links each by default) and prints one JSON line::

    {"pages", "seconds", "pages_per_s", "cpu_ms_per_page", "fetch_ms", "parse_ms", "simhash_ms",
     "links_ms", "warc_ms", "bookkeeping_ms", "warc_bytes_per_page", "server_cpu_ms_per_page",
     "threads",
     "warc_compress_level", "malloc_trim_threshold_bytes", "malloc_mmap_threshold_bytes",
     "peak_rss_mb"}

``cpu_ms_per_page`` is the worker process's CPU time (all threads) per page that got a response;
``fetch_ms`` (connect and transfer: urllib3, decoding), ``parse_ms`` (parse and link extraction:
lxml), ``simhash_ms``, ``links_ms`` (the link sink: canonicalization, URL cache, scope),
``warc_ms`` (WARC records: digests, headers, gzip) split the fetch threads' CPU time by phase;
``bookkeeping_ms`` is the rest of the worker's CPU per page (``cpu_ms_per_page`` minus the
phases: the workbench and visit states, rows and counters, robots.txt, the run's start and end,
threads waiting on locks, the garbage collector);
``server_cpu_ms_per_page`` is the sample web's (Linux only): on 2 cores the server, not the worker,
limits ``pages_per_s``, and its CPU per page grows with the number of concurrent connections.
Target (issues 4, 16): <= 1.0 ms of worker CPU per page.

The worker runs in this process, re-executed with the environment a crawl's Dask worker process
starts with (Dask's ``distributed.nanny.pre-spawn-environ`` and :func:`batchcrawl.procmem.
worker_environ`): the allocator settings change the CPU per page by 7-10 % (docs/benchmarks.md,
"Session 7"). ``--malloc-trim-threshold-bytes 0 --malloc-mmap-threshold-bytes 0`` gives Dask's
own. So :func:`main` replaces the calling process: run it as a script. The sample web's server
starts without these settings.

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

from batchcrawl import procmem
from batchcrawl.config import Config, loopback_test_config
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import FetchItem
from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.urls import canonicalize, domain_of, host_of, url_key

HERE = Path(__file__).resolve().parent


def start_server(hosts: int, pages: int, seed: int) -> tuple[subprocess.Popen, dict]:
    """Start the sample web in its own process; return it and its JSON readiness line."""
    env = {k: v for k, v in os.environ.items() if k not in (_REEXEC, *procmem.VARIABLES)}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "serve_sample_web.py"), "--hosts", str(hosts), "--pages",
         str(pages), "--seed", str(seed), "--no-trap", "--seconds", "3600"],
        stdout=subprocess.PIPE, text=True, env=env,  # the server keeps its own allocator
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


def peak_rss_mb() -> float | None:
    """This process's peak RSS in MB since its last ``exec`` (``VmHWM``; ``ru_maxrss`` would keep
    the peak of the process before the re-execution); None off Linux."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


#: The phases the fetch loop times (counters ``cpu_<phase>_s``, thread CPU seconds).
PHASES = ("fetch", "parse", "simhash", "links", "warc")
#: Set in the re-executed process, so that it does not re-execute again.
_REEXEC = "BATCHCRAWL_BENCH_FETCH_ENV"


def worker_process_environ(trim: int, mmap: int) -> dict[str, str]:
    """The environment variables a crawl's Dask worker process starts with when
    ``round.malloc_trim_threshold_bytes`` is ``trim`` and ``round.malloc_mmap_threshold_bytes``
    ``mmap`` (the rest of ``round`` at its defaults): :func:`batchcrawl.procmem.pre_spawn_environ`."""
    section = (
        Config()
        .replace(round={"malloc_trim_threshold_bytes": trim, "malloc_mmap_threshold_bytes": mmap})
        .round
    )
    return {k: str(v) for k, v in procmem.pre_spawn_environ(section).items()}


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
    for name in ("trim", "mmap"):
        ap.add_argument(
            f"--malloc-{name}-threshold-bytes",
            type=int,
            default=getattr(Config().round, f"malloc_{name}_threshold_bytes"),
            help=f"round.malloc_{name}_threshold_bytes of the worker's environment (0: Dask's)",
        )
    args = ap.parse_args(argv)
    if os.environ.get(_REEXEC) is None:  # glibc reads its tunables once, at start-up
        malloc = (args.malloc_trim_threshold_bytes, args.malloc_mmap_threshold_bytes)
        env = {**os.environ, **worker_process_environ(*malloc), _REEXEC: "1"}
        argv = sys.argv[1:] if argv is None else argv
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *argv], env)

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
            "bookkeeping_ms": round((cpu - sum(c[f"cpu_{k}_s"] for k in PHASES)) * per, 3),
            "warc_bytes_per_page": round(warc_bytes / max(pages, 1)),
            "server_cpu_ms_per_page": (
                None if server0 is None or server1 is None else round((server1 - server0) * per, 3)
            ),
            "threads": args.threads,
            "warc_compress_level": cfg.fetch.warc_compress_level,
            "malloc_trim_threshold_bytes": args.malloc_trim_threshold_bytes,
            "malloc_mmap_threshold_bytes": args.malloc_mmap_threshold_bytes,
            "peak_rss_mb": peak_rss_mb(),
        }))  # fmt: skip
    finally:
        proc.kill()
        proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
