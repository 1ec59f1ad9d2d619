"""Benchmark batchcrawl against a peer crawler (Scrapy) on one web served by nginx (not a test).

Generates the sample web (``SampleWeb(H, N)``, as ``bench_round.py`` does: Zipf host sizes,
robots.txt with Crawl-delay on some hosts, 404/500 robots, redirects, a spider trap cut after 50
years, links to real off-site sites), writes it as static files
(:mod:`servers.staticweb`) and serves them with nginx on 127.0.0.1
(:mod:`servers.nginx`: private prefix, no root needed, stopped on exit and Ctrl-C).
Then each crawler of ``--crawlers`` crawls it from every host's home page for T seconds, one after
the other, and one JSON line per crawler is printed::

    {"crawler", "version", "seconds", "pages", "distinct_pages", "pages_per_s", "cpu_s",
     "cpu_ms_per_page", "peak_rss_mb", "politeness_violations", "politeness_bound",
     "bound_share", "robots_denied_requests", ...}

* **batchcrawl**: ``batchcrawl init`` (the config of ``bench_round.py``: ``loopback_test_config``,
  2 workers, 2 shards, ``politeness.host_delay_s = D``) then the real ``batchcrawl crawl CRAWL
  --max-seconds T`` (batch rounds on the embedded LocalCluster) in a subprocess: the round
  fetching at T ends its fetch and commits (SIGTERM only 60 s after T; ``committed_pages`` counts
  the distinct URLs the committed rounds keep; ``rounds`` the rounds committed). With
  ``--stream``: ``batchcrawl crawl --stream --max-seconds T`` (``rounds``: the micro-batches).
* **scrapy** (if importable; ``pip install scrapy``): ``scripts/scrapy_peer.py``, a minimal
  broad-crawl spider (``ROBOTSTXT_OBEY``, ``DOWNLOAD_DELAY = D``, a DNS resolver that knows only
  the generated hosts; see its docstring for every setting), also sent SIGTERM at T (Scrapy's
  graceful stop). ``dns_refused`` counts the names its resolver refused (0: no off-site name was
  even looked up), ``offsite_filtered`` the off-site links Scrapy dropped.

Every count comes from nginx's access log, the same way for every crawler, over the window from
the crawler's launch to launch + T (start-up included, shutdown excluded):

* ``pages``: requests answered (any status) except robots.txt; ``distinct_pages``: distinct
  ``(host, target)`` among them; ``pages_per_s`` = distinct_pages / seconds.
* ``politeness_violations``: consecutive requests to one host (robots.txt included) whose start
  times are closer than max(D, the host's Crawl-delay capped at batchcrawl's
  ``politeness.max_crawl_delay_s``), 2 ms tolerance (``$msec - $request_time``, ms resolution).
* ``politeness_bound`` / ``bound_share`` (D > 0): the most pages any polite crawler could fetch in
  ``seconds`` (:meth:`SampleWeb.politeness_bound`, as in ``bench_round.py``) and the share of it
  reached. ``first_request_s``: seconds from the launch to the first request (start-up, which
  the bound counts as crawl time). ``robots_denied_requests``: requests robots.txt forbids (RFC 9309: a 5xx robots.txt
  forbids everything).
* ``web_ceiling`` / ``ceiling_share``: the most distinct URLs any polite crawler could fetch from
  this web in ``seconds`` (:meth:`SampleWeb.crawl_ceiling`: per host, min(URLs reachable from the
  seeds, 1 + T / polite delay); also at D = 0) and the share reached. The 50,000-page web runs out
  at ~41,400 URLs in 120 s (345 pages/s): measure higher rates on ``--pages 200000``.
* ``cpu_s``: user + system CPU of the crawler's whole process tree over its whole life (children
  that exited included: ``RUSAGE_CHILDREN`` around the wait); ``peak_rss_mb``: the largest summed
  RSS of the tree, sampled every 0.5 s; ``rss_at_peak_mb`` splits that peak by process role
  (``driver``: scheduler, nannies and client; ``worker``: the Dask workers together; ``refresh``:
  the crawl.duckdb child; :func:`process_role`), ``file_at_peak_mb`` how much of it was
  file-backed (shared libraries' pages: pyarrow's alone are ~60 MiB in each Python process, held
  once by the machine but counted in every process's RSS), ``peak_pss_mb`` the largest summed
  PSS (the same pages divided among the processes that map them: the tree's memory counted once),
  ``role_peak_rss_mb`` gives each role's own peak (one process).
* ``cpu_ms_per_page_by_role``: the tree's CPU per page split by process role (each process's
  user + system CPU at its last sample; ``unsampled``: the rest of ``cpu_s``, processes that
  lived less than a sample or CPU after the last one); ``fetch_cpu_ms_per_page`` (batchcrawl): the
  fetch threads' CPU per page by phase, from the committed rounds' summaries (``fetch_cpu_s``:
  fetch, parse, simhash, links, warc; what the workers spend besides them is the update steps,
  the actors' bookkeeping and Dask).

Example (issue 16 item 4)::

    python scripts/bench_peers.py --hosts 500 --pages 50000 --seconds 120 --host-delay-s 0
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

import batchcrawl
from batchcrawl.config import Config, load_config, loopback_test_config, to_toml
from batchcrawl.errors import BatchcrawlError
from batchcrawl.testing.sampleweb import DISALLOWED_PREFIX, SampleWeb
from batchcrawl.testing.webserver import politeness_violations

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/servers/

from servers.nginx import NginxServer, parse_access_log, pick_port  # noqa: E402
from servers.staticweb import write_static_web  # noqa: E402

HERE = Path(__file__).resolve().parent
CRAWLERS = ("batchcrawl", "scrapy")
#: Seconds a crawler gets after its stop signal before its process group is killed.
STOP_GRACE_S = 120.0


def process_role(proc: psutil.Process, root_pid: int, root_cmd: str) -> str:
    """A short name for one process of a crawler's tree, from its command line: ``driver`` (the
    root: scheduler and nannies live there), ``worker`` (a Dask worker), ``refresh`` (the
    crawl.duckdb refresh child), ``schemas`` (the start-up child deriving the table schemas),
    ``forkserver``/``resource_tracker`` (multiprocessing's helpers), ``fork`` (a child of the
    driver between its fork and its exec, command line ``root_cmd``, the root's), else the
    program's base name."""
    if proc.pid == root_pid:
        return "driver"
    cmd = " ".join(proc.cmdline())
    if cmd == root_cmd:  # forked, not yet exec'd: its RSS counts the driver's pages again
        return "fork"
    # spawn_main first: every spawned child's command line carries the driver's warning filter
    # "-W ignore:resource_tracker:UserWarning" (console.signals.TRACKER_WARNINGS), so the workers
    # were counted as the resource tracker
    for needle, role in (
        ("spawn_main", "worker"),
        ("resource_tracker import", "resource_tracker"),
        ("forkserver", "forkserver"),
        ("store.schemas", "schemas"),
        ("duckdb", "refresh"),
    ):
        if needle in cmd:
            return role
    return os.path.basename(cmd.split(" ", 1)[0]) or "?"


class TreeRss(threading.Thread):
    """Samples the summed RSS of process ``pid`` and its descendants every ``interval_s``.

    ``peak``: the largest summed RSS (bytes); ``at_peak``: ``{role: bytes}`` of that sample
    (:func:`process_role`, summed per role, ``worker`` over all workers); ``file_at_peak``: how
    much of that sample's RSS was file-backed (``RssFile`` + ``RssShmem``: shared libraries'
    pages, which every process counts again although the machine holds them once; the rest is
    each process's own anonymous memory); ``pss_peak``: the largest summed PSS (each shared page
    divided among the processes that map it: the tree's memory counted once; bytes);
    ``role_peaks``: the largest RSS each role reached in any sample (bytes)."""

    def __init__(self, pid: int, interval_s: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval_s, self.peak = pid, interval_s, 0
        self.at_peak: dict[str, int] = {}
        self.file_at_peak = 0
        self.pss_peak = 0
        self.role_peaks: dict[str, int] = {}
        self.cpu: dict[int, tuple[str, float]] = {}  # pid -> (role, CPU seconds at last sample)
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        try:
            root_cmd = " ".join(root.cmdline())
        except psutil.Error:
            return
        while not self.stop.wait(self.interval_s):
            total, shared, pss, by_role = 0, 0, 0, {}
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:  # the root exited
                return
            for p in tree:
                try:  # the role each time: a forked child execs another program
                    mem = p.memory_info()
                    rss = mem.rss
                    role = process_role(p, self.pid, root_cmd)
                    times = p.cpu_times()
                    self.cpu[p.pid] = (role, times.user + times.system)
                except psutil.Error:  # exited between listing and reading
                    continue
                total += rss
                shared += mem.shared
                pss += _pss(p.pid)
                by_role[role] = by_role.get(role, 0) + rss
                self.role_peaks[role] = max(self.role_peaks.get(role, 0), rss)
            if total > self.peak:
                self.peak, self.at_peak, self.file_at_peak = total, by_role, shared
            self.pss_peak = max(self.pss_peak, pss)


def _pss(pid: int) -> int:
    """Process ``pid``'s proportional set size in bytes (``/proc/PID/smaps_rollup``), 0 when it
    cannot be read (exited, or a kernel without the file)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            for line in fh:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


@dataclass
class Run:
    """One crawler process: its launch (wall clock, s), the counted seconds, CPU and memory."""

    launched: float
    seconds: float
    cpu_s: float
    peak_rss_mb: float
    returncode: int
    #: ``{role: MiB}`` at the tree's peak and each role's own peak (:class:`TreeRss`)
    rss_at_peak_mb: dict[str, float]
    #: MiB of the peak that were file-backed pages (shared libraries), counted once per process
    file_at_peak_mb: float
    #: the largest summed PSS, MiB (shared pages divided among the processes mapping them)
    peak_pss_mb: float
    role_peak_rss_mb: dict[str, float]
    #: ``{role: CPU seconds}`` of the sampled processes (:class:`TreeRss`)
    cpu_s_by_role: dict[str, float]


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_crawler(cmd: list[str], seconds: float, stop_after_s: float, out: Path) -> Run:
    """Run ``cmd`` in its own session (stdout/stderr to ``out``.stdout/.stderr); SIGTERM it at
    ``stop_after_s`` if still running, SIGKILL its group :data:`STOP_GRACE_S` later. Counted
    seconds: until it exited or ``seconds``, whichever comes first."""
    cpu0 = _cpu_children()
    with open(f"{out}.stdout", "wb") as so, open(f"{out}.stderr", "wb") as se:
        launched, t0 = time.time(), time.monotonic()
        proc = subprocess.Popen(cmd, stdout=so, stderr=se, start_new_session=True)
    sampler = TreeRss(proc.pid)
    sampler.start()
    ended = None
    try:
        try:
            proc.wait(timeout=stop_after_s)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        ended = time.monotonic()
    finally:
        if ended is None:  # Ctrl-C or an error here: take the whole tree down
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        sampler.stop.set()
        sampler.join()
    return Run(
        launched=launched,
        seconds=min(seconds, ended - t0),
        cpu_s=_cpu_children() - cpu0,
        peak_rss_mb=sampler.peak / 2**20,
        returncode=proc.returncode,
        rss_at_peak_mb={k: round(v / 2**20, 1) for k, v in sampler.at_peak.items()},
        file_at_peak_mb=round(sampler.file_at_peak / 2**20, 1),
        peak_pss_mb=round(sampler.pss_peak / 2**20, 1),
        role_peak_rss_mb={k: round(v / 2**20, 1) for k, v in sampler.role_peaks.items()},
        cpu_s_by_role=_by_role(sampler.cpu.values()),
    )


def _by_role(samples: Iterable[tuple[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for role, cpu_s in samples:
        out[role] = out.get(role, 0.0) + cpu_s
    return out


def robots_denied(entries: list[dict], web: SampleWeb) -> int:
    """Requests (robots.txt excluded) to URLs their host's robots.txt forbids."""
    n = 0
    for e in entries:
        kind = web.host(e["host"]).robots
        path = e["path"].split("?", 1)[0]
        n += kind == "500" or (kind == "disallow" and path.startswith(DISALLOWED_PREFIX))
    return n


def score(
    log: list[dict], run: Run, web: SampleWeb, host_delay_s: float, max_crawl_delay_s: float
) -> dict:
    """The log-derived figures of one crawler run (see the module docstring); Crawl-delays are
    capped at ``max_crawl_delay_s``."""
    t0, t1 = run.launched * 1000.0, (run.launched + run.seconds) * 1000.0
    window = [e for e in log if t0 <= e["t_ms"] <= t1]
    pages = [e for e in window if e["path"] != "/robots.txt"]
    distinct = len({(e["host"], e["path"]) for e in pages})
    violations = politeness_violations(
        window, lambda h: web.polite_delay(h, host_delay_s, max_crawl_delay_s), tolerance_ms=2.0
    )
    bound = web.politeness_bound(run.seconds, host_delay_s) if host_delay_s > 0 else None
    ceiling = web.crawl_ceiling(run.seconds, host_delay_s, max_crawl_delay_s)
    return {
        "seconds": round(run.seconds, 2),
        "pages": len(pages),
        "distinct_pages": distinct,
        "pages_per_s": round(distinct / max(run.seconds, 1e-9), 1),
        "cpu_s": round(run.cpu_s, 1),
        "cpu_ms_per_page": round(1000 * run.cpu_s / max(len(pages), 1), 2),
        "cpu_ms_per_page_by_role": {
            **{k: round(1000 * v / max(len(pages), 1), 3) for k, v in run.cpu_s_by_role.items()},
            "unsampled": round(
                1000 * (run.cpu_s - sum(run.cpu_s_by_role.values())) / max(len(pages), 1), 3
            ),
        },
        "peak_rss_mb": round(run.peak_rss_mb, 1),
        "rss_at_peak_mb": run.rss_at_peak_mb,
        "file_at_peak_mb": run.file_at_peak_mb,
        "peak_pss_mb": run.peak_pss_mb,
        "role_peak_rss_mb": run.role_peak_rss_mb,
        "politeness_violations": len(violations),
        "politeness_bound": bound,
        "bound_share": round(distinct / bound, 3) if bound else None,
        "web_ceiling": ceiling,
        "ceiling_share": round(distinct / ceiling, 3) if ceiling else None,
        "robots_denied_requests": robots_denied(pages, web),
        "robots_requests": len(window) - len(pages),
        "first_request_s": (
            round((min(e["t_ms"] for e in window) - t0) / 1000.0, 2) if window else None
        ),
    }


def batchcrawl_config(args: argparse.Namespace) -> Config:
    """The crawl's config: ``bench_round.py``'s (loopback resolver override, 2 workers, 2 shards,
    ``politeness.host_delay_s = D``) with the ``--set`` overrides."""
    base = loopback_test_config(
        politeness={"host_delay_s": args.host_delay_s, "ip_delay_s": 0.0, "ip_concurrency": 64},
        fetch={"shards": 2},
        round={"workers": 2},
        generate={"max_urls_per_host": 100_000},
    )
    return load_config(files=[("bench_peers", to_toml(base))], environ={}, sets=args.sets)


def crawl_batchcrawl(tmp: Path, web: SampleWeb, args: argparse.Namespace) -> tuple[Run, dict]:
    """``batchcrawl init`` + ``batchcrawl crawl`` in subprocesses; the run and its extra fields."""
    cfg = batchcrawl_config(args)
    (tmp / "batchcrawl.toml").write_text(to_toml(cfg), encoding="utf-8")
    (tmp / "seeds.txt").write_text("\n".join(web.seeds()) + "\n", encoding="utf-8")
    cli = [sys.executable, "-m", "batchcrawl.cli"]
    crawl = str(tmp / "crawl")
    subprocess.run(
        [*cli, "init", crawl, "--config", str(tmp / "batchcrawl.toml"),
         "--seeds", str(tmp / "seeds.txt")],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    # the crawl keeps the deadline itself (the round fetching at T ends its fetch and commits);
    # SIGTERM only if it overruns by more than a round's update and commit
    cmd = [*cli, "crawl", crawl, "--max-seconds", str(args.seconds)]
    if args.stream:
        cmd.append("--stream")
    run = run_crawler(cmd, args.seconds, args.seconds + 60.0, tmp / "batchcrawl")
    rounds, phases = 0, {}
    for line in Path(f"{tmp / 'batchcrawl'}.stdout").read_text().splitlines():
        if line.startswith("{"):
            rounds += 1
            for phase, cpu_s in json.loads(line).get("fetch_cpu_s", {}).items():
                phases[phase] = phases.get(phase, 0.0) + cpu_s
    sql = "SELECT count(DISTINCT url) AS n FROM fetched WHERE fetch_status IS NOT NULL"
    done = subprocess.run(
        [*cli, "sql", crawl, sql, "--format", "json"], capture_output=True, text=True, check=True
    )
    committed = json.loads(done.stdout)
    committed = committed[0]["n"] if isinstance(committed, list) else committed
    per_page = {k: round(1000 * v / max(committed, 1), 3) for k, v in sorted(phases.items())}
    return run, {"version": batchcrawl.__version__, "stream": args.stream, "rounds": rounds,
                 "committed_pages": committed, "fetch_cpu_ms_per_page": per_page}  # fmt: skip


def crawl_scrapy(tmp: Path, web: SampleWeb, args: argparse.Namespace) -> tuple[Run, dict]:
    """``scripts/scrapy_peer.py`` in a subprocess; the run and its extra fields."""
    job = {
        "seeds": web.seeds(),
        "hosts": [h.name for h in web.hosts],
        "seconds": args.seconds,
        "host_delay_s": args.host_delay_s,
    }
    (tmp / "scrapy-job.json").write_text(json.dumps(job), encoding="utf-8")
    out = tmp / "scrapy-result.json"
    cmd = [sys.executable, str(HERE / "scrapy_peer.py"), str(tmp / "scrapy-job.json"),
           "--out", str(out)]  # fmt: skip
    # SIGTERM at T (Scrapy's graceful stop: in-flight requests finish);
    # CLOSESPIDER_TIMEOUT counts from the spider's start, after the imports, so ends it later
    run = run_crawler(cmd, args.seconds, args.seconds, tmp / "scrapy")
    if not out.exists():
        raise BatchcrawlError(f"scrapy_peer.py wrote no result; see {tmp / 'scrapy'}.stderr")
    result = json.loads(out.read_text(encoding="utf-8"))
    stats = result["stats"]
    return run, {
        "version": result["version"],
        "responses_by_stats": stats.get("response_received_count", 0),
        "offsite_filtered": stats.get("offsite/filtered", 0),
        "dns_refused": len(result["dns_refused"]),
        "robots_forbidden_by_stats": stats.get("robotstxt/forbidden", 0),
        "finish_reason": stats.get("finish_reason"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--hosts", type=int, default=500)
    ap.add_argument("--pages", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=120.0, help="crawl time T per crawler")
    ap.add_argument("--host-delay-s", type=float, default=0.0, help="politeness delay D")
    ap.add_argument("--crawlers", default=",".join(CRAWLERS), help="comma-separated, in order")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (web, logs, crawl)")
    ap.add_argument(
        "--stream",
        action="store_true",
        help="batchcrawl crawls with `crawl --stream` instead of batch rounds",
    )
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.KEY=V",
                    help="batchcrawl config override (repeatable)")  # fmt: skip
    args = ap.parse_args(argv)
    crawlers = [c.strip() for c in args.crawlers.split(",") if c.strip()]
    unknown = sorted(set(crawlers) - set(CRAWLERS))
    if unknown:
        ap.error(f"--crawlers: unknown {unknown}; choose from {', '.join(CRAWLERS)}")
    if "scrapy" in crawlers and importlib.util.find_spec("scrapy") is None:
        print("bench_peers: Scrapy is not installed (pip install scrapy, or "
              "batchcrawl[peers]): skipping it", file=sys.stderr)  # fmt: skip
        crawlers.remove("scrapy")

    tmp = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    try:
        port = pick_port()
        web = SampleWeb(args.hosts, args.pages).bind(port)
        answers = write_static_web(web, tmp / "web")
        (tmp / "nginx").mkdir()
        nginx = NginxServer(tmp / "nginx", tmp / "web", port, answers.redirects, answers.statuses)
        runs = []
        with nginx:
            for name in crawlers:
                crawl = crawl_batchcrawl if name == "batchcrawl" else crawl_scrapy
                runs.append((name, *crawl(tmp, web, args)))
        log = list(parse_access_log(nginx.access_log))
        load = [round(x, 2) for x in os.getloadavg()]
        for name, run, extra in runs:
            line = {"crawler": name, "version": extra.pop("version")}
            cap = batchcrawl_config(args).politeness.max_crawl_delay_s
            line.update(score(log, run, web, args.host_delay_s, cap))
            line.update(extra)
            line.update({"exit_code": run.returncode, "hosts": args.hosts, "web_pages": args.pages,
                         "host_delay_s": args.host_delay_s, "load_avg_after": load})  # fmt: skip
            print(json.dumps(line), flush=True)
    except BatchcrawlError as exc:
        print(f"bench_peers: error: {exc}", file=sys.stderr)
        return exc.exit_code or 1
    except KeyboardInterrupt:  # the crawler's process group and nginx are down by now
        print("bench_peers: interrupted; the crawler and nginx were stopped", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"bench_peers: kept {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
