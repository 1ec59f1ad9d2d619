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
* ``web_ceiling``: the most distinct URLs any polite crawler could fetch from this web in the
  run's seconds (:meth:`SampleWeb.crawl_ceiling`: per host, min(URLs a crawl from the seeds can
  reach, 1 + T / polite delay)); ``ceiling_share`` = distinct_pages / web_ceiling. A web smaller
  than T x the rate runs out: 500 hosts / 50,000 pages have a ceiling of ~41,400 URLs in 120 s
  at D = 0 (345 pages/s), so rates above that need a bigger web (``--pages 200000``).
* ``fetch_idle_share``: share of the fetch steps' shard-seconds in which fewer than half a shard's
  fetch threads had work (start-up, slow tail: :mod:`batchcrawl.fetch.idle`); ``wall_idle_share``
  the same over the whole run (other steps count as idle).
* ``fetch_share``: fetch-step seconds / round wall seconds (first step to last commit);
  ``overlapped_s``: seconds of each other step that ran while a round was fetching (pipelined
  rounds, ``--set round.pipeline=true``); ``peak_rss_mb``: the largest total RSS
  of this process and its Dask worker processes (sampled every 0.5 s); ``rss_by_process`` each
  process's peaks, CPU seconds (and system CPU alone) and minor page faults, ``cpu_ms_per_page``
  their CPU per response, ``worker_minor_faults_per_page`` the Dask workers' faults per response
  (malloc returning and re-faulting a page's buffers shows here: :mod:`batchcrawl.procmem`).

Issue 5 targets on a 2-core machine, T = 120, H = 500, N = 50,000: at D = 0, >= 600 distinct
pages/s; at D = 1.0, >= 90 % of the politeness bound and 0 violations; fetching >= 90 % of round time.

    python scripts/bench_round.py --hosts 500 --pages 50000 --host-delay-s 0 --seconds 120
    python scripts/bench_round.py ... --stream      # the same with crawl --stream

With ``--stream`` the fetch step is the whole run (``fetch_share`` 1) and ``rounds`` counts the
stream's checkpoints.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
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
from batchcrawl.pipeline import Deadline
from batchcrawl.round import Crawler, dask_client, run_rounds
from batchcrawl.store import schemas, views
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.stream import run_stream
from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.testing.webserver import politeness_violations

HERE = Path(__file__).resolve().parent


def _rollup(pid: int) -> dict[str, int]:
    """RSS, PSS and USS of ``pid`` in bytes, from ``/proc/PID/smaps_rollup`` (one cheap read;
    psutil's memory_full_info walks the whole smaps, ~25 ms for a 100 MB process)."""
    out = {"rss": 0, "pss": 0, "uss": 0}
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
        for line in f:
            name, _, rest = line.partition(":")
            if name in ("Rss", "Pss"):
                out[name.lower()] = int(rest.split()[0]) * 1024
            elif name in ("Private_Clean", "Private_Dirty"):
                out["uss"] += int(rest.split()[0]) * 1024
    return out


def process_role(proc: psutil.Process, driver_pid: int) -> str:
    """A process's role in the crawl's tree, from its parent and command line: ``driver`` (this
    process: client, in-process scheduler and, with LocalCluster(processes=True), the Nanny
    objects), ``nanny`` (a Nanny in its own process: ``dask nanny``/``dask worker``
    command lines), ``worker`` (a Dask worker process: multiprocessing's spawn child of a
    nanny), ``mp-helper`` (multiprocessing's resource tracker or fork server) or ``other``."""
    if proc.pid == driver_pid:
        return "driver"
    cmd = " ".join(proc.cmdline())
    if "resource_tracker" in cmd or "forkserver" in cmd:
        return "mp-helper"
    if "spawn_main" in cmd or "multiprocessing.popen" in cmd:
        return "worker"
    if "nanny" in cmd or "dask worker" in cmd or "dask-worker" in cmd:
        return "nanny"
    return "other"


class RssSampler(threading.Thread):
    """Samples the memory of this process and its children (not the web server) every 0.5 s.

    ``peak`` is the largest summed RSS (shared pages such as the Python and library text counted
    once per process); ``peak_pss`` the largest summed PSS (each shared page split between the
    processes mapping it: the tree's honest footprint) and ``peak_uss`` the largest summed USS
    (private pages only). ``roles`` has, per process, its role (:func:`process_role`) and its
    own peak RSS, PSS and USS.
    """

    def __init__(self, exclude_pid: int) -> None:
        super().__init__(daemon=True)
        self.exclude = exclude_pid
        self.peak = self.peak_pss = self.peak_uss = 0
        self.procs: dict[int, dict] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self.stop.wait(0.5):
            totals = {"rss": 0, "pss": 0, "uss": 0}
            for p in [me, *me.children(recursive=True)]:
                if p.pid == self.exclude:
                    continue
                try:
                    mem = _rollup(p.pid)
                    if p.pid not in self.procs:
                        self.procs[p.pid] = {"role": process_role(p, me.pid), "rss": 0,
                                             "pss": 0, "uss": 0}  # fmt: skip
                except (psutil.Error, OSError):
                    continue
                rec = self.procs[p.pid]
                try:
                    cpu = p.cpu_times()
                    rec["cpu_s"] = cpu.user + cpu.system  # the last sample: its CPU until then
                    rec["sys_s"] = cpu.system
                    rec["minflt"] = _minor_faults(p.pid)
                except (psutil.Error, OSError):
                    pass
                for k, v in mem.items():
                    totals[k] += v
                    rec[k] = max(rec[k], v)
            self.peak = max(self.peak, totals["rss"])
            self.peak_pss = max(self.peak_pss, totals["pss"])
            self.peak_uss = max(self.peak_uss, totals["uss"])

    def roles(self) -> list[dict]:
        """Per process (in start order): role, pid, peak RSS/PSS/USS in MB, CPU seconds (user +
        system, and system alone) and minor page faults, the last two at the last sample (up to
        0.5 s short of its end)."""
        return [
            {"role": r["role"], "pid": pid,
             **{f"peak_{k}_mb": round(r[k] / 2**20, 1) for k in ("rss", "pss", "uss")},
             "cpu_s": round(r.get("cpu_s", 0.0), 1), "sys_cpu_s": round(r.get("sys_s", 0.0), 1),
             "minor_faults": r.get("minflt", 0)}
            for pid, r in self.procs.items()
        ]  # fmt: skip


def _minor_faults(pid: int) -> int:
    """Minor page faults of process ``pid`` so far (``/proc/PID/stat`` field 10; 0 elsewhere)."""
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])
    except (OSError, ValueError, IndexError):
        return 0


def memory_probe(dask_worker=None) -> dict:
    """What holds memory inside this process (run on each Dask worker by ``--mem-probe``, and on
    the driver): RSS/PSS/USS, pyarrow's pool (bytes allocated vs the pool's backend), glibc's
    malloc arenas (``mallinfo2``: in use vs free but kept), Python objects (tracemalloc's traced
    total when tracing, FetchItem count) and the shard actors' fetch-worker structures (entries)."""
    import ctypes
    import gc
    import sys
    import tracemalloc

    out: dict = {"mem": {k: round(v / 2**20, 1) for k, v in _rollup(os.getpid()).items()}}
    mods = ("pyarrow", "duckdb", "lxml.etree", "numpy", "pandas", "distributed", "warcio")
    out["modules"] = [m for m in mods if m in sys.modules]
    if "pyarrow" in sys.modules:
        import pyarrow as pa

        pool = pa.default_memory_pool()
        out["arrow"] = {"backend": pool.backend_name,
                        "allocated_mb": round(pa.total_allocated_bytes() / 2**20, 1),
                        "pool_max_mb": round(pool.max_memory() / 2**20, 1)}  # fmt: skip

    class MallInfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                    "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]  # fmt: skip

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    mi = libc.mallinfo2()
    out["malloc_mb"] = {"in_use": round((mi.uordblks + mi.hblkhd) / 2**20, 1),
                        "free_kept": round(mi.fordblks / 2**20, 1),
                        "mmapped": round(mi.hblkhd / 2**20, 1)}  # fmt: skip
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        stats = snap.statistics("lineno")
        out["traced_mb"] = round(sum(s.size for s in stats) / 2**20, 1)
        out["traced_top"] = [
            [f"{s.traceback[0].filename.rsplit('/', 2)[-1]}:{s.traceback[0].lineno}",
             round(s.size / 2**20, 1)] for s in stats[:12]
        ]  # fmt: skip
    actors = dask_worker.state.actors if dask_worker is not None else {}  # client.run passes it
    for name, actor in actors.items():
        fw = getattr(actor, "worker", None)
        if fw is None:
            continue
        run = fw._batch
        sizes = dict(fw.state_sizes())
        sizes.update(url_cache=len(fw.url_cache),
                     canonical_memo=len(fw.sink.memo),
                     digests=len(fw.dedup.digests), content_seen=len(fw.dedup.seen),
                     workbench_items=len(fw.workbench))  # fmt: skip
        if run is not None:
            out_ = run.out
            sizes.update(fetched_rows=len(out_.fetched),
                         fetched_rows_mb=_deep_mb(out_.fetched),
                         link_rows=len(next(iter(out_.links.values()), [])),
                         link_cols_mb=_deep_mb(list(out_.links.values())),
                         edge_rows=len(next(iter(out_.edges.values()), [])),
                         edge_cols_mb=_deep_mb(list(out_.edges.values())))  # fmt: skip
        sizes.update(url_cache_mb=_deep_mb(fw.url_cache.generations()),
                     canonical_memo_mb=_deep_mb(fw.sink.memo.generations()),
                     digests_mb=_deep_mb([fw.dedup.digests]),
                     content_seen_mb=_deep_mb(fw.dedup.seen))  # fmt: skip
        out.setdefault("shards", {})[str(name)[:24]] = sizes
    if "batchcrawl.records" in sys.modules:
        from batchcrawl.records import FetchItem

        items = [o for o in gc.get_objects() if type(o) is FetchItem]
        out["fetch_items"] = {"count": len(items), "mb": _deep_mb(items)}
    return out


def _deep_mb(obj, sample: int = 200) -> float:
    """Approximate size in MB of a container of containers/scalars: its own size plus, for the
    first ``sample`` elements (keys and values), their deep sizes scaled to the full length."""
    import sys

    def deep(o, depth=0) -> int:
        n = sys.getsizeof(o)
        if depth > 3:
            return n
        if isinstance(o, dict):
            return n + sum(deep(k, depth + 1) + deep(v, depth + 1) for k, v in o.items())
        if isinstance(o, (list, tuple, set, frozenset)):
            return n + sum(deep(x, depth + 1) for x in o)
        if hasattr(o, "__dict__"):
            return n + deep(vars(o), depth + 1)
        return n

    def scaled(c) -> float:
        items = list(c.items())[:sample] if isinstance(c, dict) else list(c)[:sample]
        if not items:
            return sys.getsizeof(c)
        part = sum(deep(x) for x in items)
        return sys.getsizeof(c) + part * len(c) / len(items)

    for _ in range(5):  # the fetch threads keep appending: retry a sample they changed
        try:
            if isinstance(obj, list) and obj and all(isinstance(x, (list, dict)) for x in obj[:8]):
                total = sum(scaled(x) for x in obj) if len(obj) <= 64 else scaled(obj)
            else:
                total = scaled(obj)
            return round(total / 2**20, 1)
        except RuntimeError:
            continue
    return -1.0


class StepPeaks(threading.Thread):
    """This process's (the driver's) peak RSS in MB per round and step (``"r3 update"``), sampled
    every ``every_s`` seconds from ``/proc/self/statm``; :meth:`on_step` is the round's
    ``on_step`` callback."""

    def __init__(self, every_s: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.every_s, self.step, self.round = every_s, "start", 0
        self.peaks: Counter = Counter()
        self.stop = threading.Event()
        self.page = os.sysconf("SC_PAGE_SIZE")

    def on_step(self, step: str) -> None:
        self.round += step == "generate"
        self.step = f"r{self.round} {step}"

    def run(self) -> None:
        with open("/proc/self/statm") as fh:
            while not self.stop.wait(self.every_s):
                fh.seek(0)
                mb = int(fh.read().split()[1]) * self.page / 2**20
                self.peaks[self.step] = max(self.peaks[self.step], round(mb, 1))


class Prober(threading.Thread):
    """Runs :func:`memory_probe` on every Dask worker every ``every_s`` seconds and keeps, per
    worker, the probe taken at its largest RSS."""

    def __init__(self, client, every_s: float, trace: str | None) -> None:
        super().__init__(daemon=True)
        self.client, self.every_s = client, every_s
        self.peaks: dict[str, dict] = {}
        self.stop = threading.Event()
        if trace:
            import tracemalloc

            if trace in ("driver", "all"):
                tracemalloc.start(1)
            if trace in ("workers", "all"):
                client.run(tracemalloc.start, 1)

    def run(self) -> None:
        while not self.stop.wait(self.every_s):
            try:
                found = self.client.run(memory_probe)
            except Exception as e:  # the cluster is closing: keep what was found
                print(f"probe: {e!r}", file=sys.stderr)
                return
            found["driver"] = memory_probe()
            for addr, p in found.items():
                if p["mem"]["rss"] >= self.peaks.get(addr, {"mem": {"rss": -1}})["mem"]["rss"]:
                    self.peaks[addr] = p


def run_batch(
    crawl_url: str,
    cfg,
    seconds: float,
    probe_s: float = 0.0,
    trace: bool = False,
    probes: dict | None = None,
) -> list[dict]:
    """Rounds (``batchcrawl crawl``'s driver, pipelined if ``round.pipeline``) until nothing is
    due or ``seconds`` have passed; their summaries. With ``probe_s`` > 0, ``probes`` gets each
    process's :func:`memory_probe` at its peak (the rounds then run sequentially on this script's
    own client, which the prober needs)."""
    if probe_s <= 0:
        try:
            return run_rounds(crawl_url, cfg, 1_000_000, max_seconds=seconds)
        except NothingDue:
            return []
    summaries = []
    deadline = Deadline.after(seconds)
    with dask_client(cfg) as client, views.background_refresh():  # as run_rounds
        prober = Prober(client, probe_s, trace)
        prober.start()
        steps = StepPeaks()
        steps.start()
        crawler = Crawler(crawl_url, client, deadline=deadline)
        try:
            while deadline.allows_a_round():
                try:
                    summaries.append(
                        crawler.run_round(deadline.round_cfg(cfg), on_step=steps.on_step)
                    )
                except NothingDue:
                    break
        finally:
            prober.stop.set()
            steps.stop.set()
            prober.join()
            steps.join()
            probes.update(prober.peaks)
            probes["driver_rss_by_step_mb"] = dict(steps.peaks)
            crawler.close_actors()
    return summaries


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
    ap.add_argument(
        "--mem-probe",
        type=float,
        default=0.0,
        metavar="S",
        help="every S seconds, probe what holds memory in each process (mem_probe), and the "
        "driver's peak RSS per round step (mem_probe.driver_rss_by_step_mb)",
    )
    ap.add_argument(
        "--tracemalloc",
        choices=("driver", "workers", "all"),
        default=None,
        help="with --mem-probe: trace Python allocations there (slow)",
    )
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.KEY=V")
    ap.add_argument(
        "--dump",
        metavar="DIR",
        default=None,
        help="also write the round summaries (summaries.json) and the server's request log "
        "(server-log.jsonl) there, to look into a run",
    )
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
        # as `batchcrawl init` and `inject` in their own processes: this process, the crawl's
        # driver, does not load DuckDB for them (schemas and crawl.duckdb from child processes)
        schemas.derive_in_child()
        with views.background_refresh():
            crawl = CrawlDir.create(os.path.join(tmp, "crawl"), to_toml(cfg), cfg.frontier.buckets)
            inject(crawl, cfg, web.seeds())
        del web  # ~20 MB for 500 hosts / 50,000 pages: the harness's, not the crawler's memory
        gc.collect()
        sampler = RssSampler(server.pid)
        sampler.start()
        summaries = []
        probes: dict = {}
        t0, t0_unix = time.monotonic(), time.time()
        if args.stream:
            summaries.append(run_stream(crawl.url, cfg, StopRequest(), max_seconds=args.seconds))
        else:
            summaries = run_batch(
                crawl.url, cfg, args.seconds, args.mem_probe, args.tracemalloc, probes
            )
        seconds = time.monotonic() - t0
        sampler.stop.set()
        server.terminate()
        server.wait()
        log = [json.loads(line) for line in open(log_file, encoding="utf-8")]
        if args.dump:
            os.makedirs(args.dump, exist_ok=True)
            shutil.copy(log_file, os.path.join(args.dump, "server-log.jsonl"))
            with open(os.path.join(args.dump, "summaries.json"), "w", encoding="utf-8") as fh:
                json.dump({"t0_unix": t0_unix, "summaries": summaries}, fh, default=str)
        from batchcrawl.store.sql import query

        distinct = query(crawl, "SELECT count(DISTINCT url) FROM fetched "
                                "WHERE fetch_status IS NOT NULL").column(0)[0].as_py()  # fmt: skip

    web = SampleWeb(args.hosts, args.pages).bind(info["port"])  # deterministic: the same web
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
    ceiling = web.crawl_ceiling(seconds, pol.host_delay_s, pol.max_crawl_delay_s,
                                cfg.filters.max_depth)  # fmt: skip
    pages = sum(s["responses"] for s in summaries)
    phase_cpu: Counter = Counter()
    for s in summaries:
        phase_cpu.update(s.get("fetch_cpu_s", {}))
    # issue 16: shard-seconds with fewer than half the fetch threads given work, over the fetch
    # steps and over the whole run (generate, update, compact and commit leave every thread idle)
    busy = (
        0.0
        if args.stream
        else sum((1 - s["fetch_idle_share"]) * s["seconds_by_step"]["fetch"] for s in summaries)
    )
    fetch_idle = None if args.stream else round(1 - busy / max(steps["fetch"], 1e-9), 3)
    roles = sampler.roles()
    print(json.dumps({
        "pages": pages,
        "seconds": round(seconds, 2),
        "pages_per_s": round(pages / seconds, 1),
        "distinct_pages": distinct,
        "distinct_pages_per_s": round(distinct / seconds, 1),
        "politeness_violations": len(violations),
        "politeness_bound": bound if args.host_delay_s > 0 else None,
        "bound_share": round(distinct / bound, 3) if bound and args.host_delay_s > 0 else None,
        "web_ceiling": ceiling,
        "ceiling_share": round(distinct / ceiling, 3) if ceiling else None,
        "peak_rss_mb": round(sampler.peak / 2**20, 1),
        "peak_pss_mb": round(sampler.peak_pss / 2**20, 1),
        "peak_uss_mb": round(sampler.peak_uss / 2**20, 1),
        "rss_by_process": roles,
        # CPU of the crawl's processes (driver, Dask workers; not the sample web) per response
        "cpu_ms_per_page": round(1000 * sum(r["cpu_s"] for r in roles) / max(pages, 1), 2),
        "worker_cpu_ms_per_page": round(
            1000 * sum(r["cpu_s"] for r in roles if r["role"] == "worker") / max(pages, 1), 2
        ),
        # the fetch threads' CPU by phase (thread time; the rest of the workers' CPU is their
        # other threads: event loop, actor executor, Dask tasks, and the fetch loop around them)
        "fetch_thread_ms_by_phase": {
            k: round(1000 * v / max(pages, 1), 3) for k, v in sorted(phase_cpu.items())
        },
        "worker_minor_faults_per_page": round(
            sum(r["minor_faults"] for r in roles if r["role"] == "worker") / max(pages, 1), 1
        ),
        "mem_probe": probes or None,
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
             "fetch_idle_share": s["fetch_idle_share"], "not_fetched": s["not_fetched"],
             "shards_tail_cut": s.get("shards_tail_cut"), "spills": s.get("spills"),
             "spill_s": s.get("spill_s"), "selected": s["generate"]["selected"],
             "capped_time": s["generate"]["not_selected"].get("capped_time", 0)}
            for s in summaries
        ],
        "mode": "stream" if args.stream else "batch",
        "hosts": args.hosts,
        "host_delay_s": args.host_delay_s,
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
