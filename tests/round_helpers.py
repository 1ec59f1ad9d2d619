"""Helpers for the round integration tests (test_round, test_crash, test_distributed,
test_pydoc_crawl): a small sample web served on loopback, a crawl builder, checks over the server
log (robots.txt first, politeness gaps), checks over committed generations, process helpers,
and a round runner that can kill itself at a chosen step (run as a script).

Script use::

    python tests/round_helpers.py CRAWL ROUNDS [KILL_AT] [--scheduler ADDRESS] [--stream]
        [--no-duckdb]

runs up to ``ROUNDS`` rounds of ``CRAWL`` with the config in its ``crawl.toml`` (embedded
LocalCluster unless ``--scheduler``), printing each round's JSON summary on stdout. With
``KILL_AT`` (one of :data:`KILL_POINTS`) the process SIGKILLs itself when
:func:`batchcrawl.round.run_rounds` reports that step starting (``on_step``), in the last round.
It prints ``STEP <name>`` (flushed) as each step starts, so a test can also kill it from outside.
With ``--nth K`` it kills itself at the K-th start of ``KILL_AT`` in the run instead (pipelined
rounds, where round N+1 fetches while round N commits: :data:`PIPELINE_KILL_POINTS` too).
With ``--stream`` it runs :func:`batchcrawl.stream.run_stream` instead, and ``KILL_AT`` (one of
:data:`STREAM_KILL_POINTS`) kills it at the ``ROUNDS``-th start of that step of a micro-batch.
With ``--no-duckdb`` importing DuckDB fails in the script's process (the driver).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from batchcrawl.config import Config, loopback_test_config, to_toml  # noqa: E402
from batchcrawl.store.crawldir import CrawlDir, Manifest  # noqa: E402
from batchcrawl.testing import webserver  # noqa: E402
from batchcrawl.testing.webserver import MultiHostServer, RequestLogEntry  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
#: Steps of a round, in order, as ``run_rounds(on_step=...)`` reports them.
KILL_POINTS = ("generate", "fetch", "update", "compact", "commit")
#: Steps only pipelined rounds report (``round.pipeline``: round N+1 selected while N fetches).
PIPELINE_KILL_POINTS = ("preselect",)
#: Steps of a stream's micro-batch, as ``run_stream(on_step=...)`` reports them.
STREAM_KILL_POINTS = ("take", "update", "commit")
#: Clock tolerance of the politeness checks, seconds: the server stamps a request when its head is
#: read, the crawler times its delay from the end of the previous response, so a true gap is never
#: shorter than the delay; this only absorbs the millisecond rounding of the log.
GAP_SLACK_S = 0.002


# -- configuration and crawl building ---------------------------------------------------------------
def round_config(**overrides: dict[str, Any]) -> Config:
    """Loopback-only config for round tests: 2 shards on 2 worker processes, host delay 0.05 s,
    no IP delay and 8 fetches at once per IP (every ``*.test`` host is on 127.0.0.1), short
    timeouts, Crawl-delay honoured up to 0.3 s. ``overrides``: ``{section: {key: value}}``."""
    cfg = loopback_test_config(
        politeness={
            "host_delay_s": 0.05,
            "ip_delay_s": 0.0,
            "ip_concurrency": 8,
            "max_crawl_delay_s": 0.3,
        },
        fetch={
            "shards": 2,
            "threads": 4,
            "connect_timeout_s": 2.0,
            "read_timeout_s": 2.0,
            "total_timeout_s": 5.0,
            "time_limit_s": 120.0,
        },
        frontier={"buckets": 4},
        round={"workers": 2, "threads_per_worker": 1},
    )
    return cfg.replace(**overrides) if overrides else cfg


def hosts_on_two_shards(cfg: Config, prefix: str) -> tuple[str, str]:
    """Two host names ``{prefix}{i}.test`` that ``cfg``'s ring routes to different shards."""
    from batchcrawl.engine.shard import host_shard
    from batchcrawl.ring import HashRing

    ring = HashRing(cfg.fetch.shards, cfg.fetch.ring_vnodes)
    names = [f"{prefix}{i}.test" for i in range(40)]
    a = names[0]
    b = next(h for h in names if host_shard(h, None, cfg, ring) != host_shard(a, None, cfg, ring))
    return a, b


def hosts_on_one_shard(cfg: Config, prefix: str, n: int = 2) -> list[str]:
    """``n`` host names ``{prefix}{i}.test`` that ``cfg``'s ring routes to one shard (the shard
    of ``{prefix}0.test``): a web whose every host is fetched by one shard, the others idle."""
    from batchcrawl.engine.shard import host_shard
    from batchcrawl.ring import HashRing

    ring = HashRing(cfg.fetch.shards, cfg.fetch.ring_vnodes)
    names = (f"{prefix}{i}.test" for i in range(1000))
    first = next(names)
    shard = host_shard(first, None, cfg, ring)
    same = [first] + [h for h in names if host_shard(h, None, cfg, ring) == shard][: n - 1]
    if len(same) < n:
        raise ValueError(f"fewer than {n} of 1000 names route to shard {shard}")
    return same


def hosts_by_shard(cfg: Config, prefix: str, n: int) -> dict[int, list[str]]:
    """At least ``n`` host names ``{prefix}{i}.test`` per shard of ``cfg``'s ring, by shard (in
    ``i`` order). Raises ``ValueError`` if 2,000 names do not give every shard ``n``."""
    from batchcrawl.engine.shard import host_shard
    from batchcrawl.ring import HashRing

    ring = HashRing(cfg.fetch.shards, cfg.fetch.ring_vnodes)
    names: dict[int, list[str]] = {s: [] for s in range(cfg.fetch.shards)}
    for i in range(2000):
        host = f"{prefix}{i}.test"
        names[host_shard(host, None, cfg, ring)].append(host)
        if min(len(v) for v in names.values()) >= n:
            return names
    raise ValueError(f"fewer than {n} of 2000 names route to some shard")


def new_crawl(path: str | os.PathLike, cfg: Config, seeds: Iterable[str]) -> CrawlDir:
    """Create a crawl at ``path`` with ``cfg`` as its ``crawl.toml`` and inject ``seeds``."""
    from batchcrawl.frontier.inject import inject

    crawl = CrawlDir.create(str(path), to_toml(cfg), buckets=cfg.frontier.buckets)
    inject(crawl, cfg, list(seeds))
    return crawl


def sample_web(**kwargs: Any):
    """A small :class:`~batchcrawl.testing.sampleweb.SampleWeb` without the spider trap: 6 hosts, 90
    pages, 2 KB bodies, 20 links a page, extras (redirects, dead links, files) on host 1."""
    from batchcrawl.testing.sampleweb import SampleWeb

    args: dict[str, Any] = {
        "hosts": 6,
        "pages": 90,
        "seed": 7,
        "trap": False,
        "page_bytes": 2000,
        "links_per_page": 20,
        "menu_links": 5,
        "extras_every": 10,
    }
    args.update(kwargs)
    return SampleWeb(**args)


class HoldPages:
    """The SampleWeb, plus: once armed, page requests (not robots.txt) set :attr:`arrived` and
    wait for :attr:`release` before being answered."""

    def __init__(self, web) -> None:
        self.web = web
        self.armed = threading.Event()
        self.arrived = threading.Event()
        self.release = threading.Event()

    def bind(self, port: int):
        self.web.bind(port)
        return self

    def __call__(self, host, path, headers):
        if self.armed.is_set() and path != "/robots.txt":
            self.arrived.set()
            self.release.wait(60)
        return self.web(host, path, headers)


@contextmanager
def serve(app: Any) -> Iterator[MultiHostServer]:
    """Serve ``app`` on 127.0.0.1 (ephemeral port); binds the app to the port if it can."""
    server = MultiHostServer(app)
    server.start()
    try:
        if hasattr(app, "bind"):
            app.bind(server.port)
        yield server
    finally:
        server.stop()


# -- what the crawl holds ---------------------------------------------------------------------------
def frontier_rows(crawl: CrawlDir, generation: int | None = None) -> list[dict[str, Any]]:
    """Every frontier row of a committed generation (default: the current one)."""
    manifest = crawl.manifest(generation)
    entries = manifest.tables.get("frontier", ())
    if not entries:
        return []
    return crawl.read_table("frontier", list(entries)).to_pylist()


def fetched_rows(crawl: CrawlDir, generation: int | None = None) -> list[dict[str, Any]]:
    """Every fetch attempt recorded by the committed generation (default: the current one)."""
    entries = crawl.manifest(generation).tables.get("fetched", ())
    return crawl.read_table("fetched", list(entries)).to_pylist() if entries else []


def orphan_table_rows(crawl: CrawlDir, table: str, round: int) -> list[dict[str, Any]]:
    """Rows of the uncommitted ``TABLE/round=R/*.parquet`` files a dead round left behind."""
    import pyarrow.parquet as pq

    folder = Path(crawl.path(f"{table}/round={round}"))
    rows: list[dict[str, Any]] = []
    for file in sorted(folder.rglob("*.parquet")) if folder.is_dir() else ():
        rows += pq.read_table(file).to_pylist()
    return rows


def read_every_file(crawl: CrawlDir, manifest: Manifest) -> int:
    """Read every table file ``manifest`` names (all rows, all columns); returns the row count.

    Raises whatever the Parquet reader raises on a missing or torn file.
    """
    total = 0
    for table, entries in manifest.tables.items():
        for entry in entries:
            t = crawl.read_table(table, [entry])
            assert t.num_rows == entry.rows, (table, entry.path, t.num_rows, entry.rows)
            total += t.num_rows
    return total


# -- server-log checks ------------------------------------------------------------------------------
def by_host(entries: Iterable[RequestLogEntry]) -> dict[str, list[RequestLogEntry]]:
    """Log entries grouped per host, each list in arrival order."""
    out: dict[str, list[RequestLogEntry]] = defaultdict(list)
    for e in entries:
        out[e.host].append(e)
    for lst in out.values():
        lst.sort(key=lambda e: e.t_ms)
    return dict(out)


def robots_not_first(entries: Iterable[RequestLogEntry]) -> list[str]:
    """Hosts whose first request in the log is not ``/robots.txt`` (RFC 9309 §2.4)."""
    return [h for h, lst in by_host(entries).items() if lst[0].path.split("?")[0] != "/robots.txt"]


def politeness_violations(
    entries: Iterable[RequestLogEntry],
    delay_of: Callable[[str], float],
    slack_s: float = GAP_SLACK_S,
) -> list[tuple[str, float, float]]:
    """Pairs of consecutive requests to one host closer than ``delay_of(host)`` seconds, robots.txt
    included (:func:`batchcrawl.testing.webserver.politeness_violations`); empty: polite."""
    return webserver.politeness_violations(entries, delay_of, tolerance_ms=slack_s * 1000.0)


def sample_delay(web: Any, cfg: Config) -> Callable[[str], float]:
    """The least gap a polite crawler keeps on each host of a SampleWeb (``host_delay_s`` raised
    by the host's ``Crawl-delay`` up to ``max_crawl_delay_s``)."""
    pol = cfg.politeness
    return lambda host: web.polite_delay(host, pol.host_delay_s, pol.max_crawl_delay_s)


# -- processes --------------------------------------------------------------------------------------
def alive(pids: Iterable[int]) -> list[int]:
    """The pids of ``pids`` that still run (zombies count as gone)."""
    import psutil

    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of ``proc`` (started with ``start_new_session=True``) if ``proc``
    still runs, and reap it: a test's ``finally`` never leaves a crawl and its workers behind."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_gone(pids: Iterable[int], timeout_s: float) -> list[int]:
    """Wait until every pid of ``pids`` has exited (or ``timeout_s``); returns those still alive."""
    import psutil

    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _, still = psutil.wait_procs(procs, timeout=timeout_s)
    return alive(p.pid for p in still)


def helper_command(crawl_url: str, rounds: int, kill_at: str | None = None, *extra: str) -> list:
    """argv running this file as the round-runner script."""
    args = [sys.executable, str(Path(__file__).resolve()), crawl_url, str(rounds)]
    return args + ([kill_at] if kill_at else []) + list(extra)


def cli_command(*args: Any) -> list[str]:
    """argv running ``batchcrawl`` (``python -m batchcrawl.cli``) with ``args``."""
    return [sys.executable, "-m", "batchcrawl.cli", *(str(a) for a in args)]


def subprocess_env() -> dict[str, str]:
    """The environment for crawl subprocesses: the repository first on ``PYTHONPATH``, and no
    ``BATCHCRAWL_*`` variable of the caller leaking into the crawl's config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATCHCRAWL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


# -- the script -------------------------------------------------------------------------------------
class _NoDuckDB:
    """A meta path finder that refuses DuckDB (``--no-duckdb``)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name.split(".")[0] in ("duckdb", "_duckdb"):
            raise ImportError(f"{name}: DuckDB must not be imported in this process")


def main(argv: list[str]) -> int:
    """Run rounds of a crawl, optionally SIGKILLing this process at a step (see module doc)."""
    import argparse

    from batchcrawl.cli import load_crawl_config
    from batchcrawl.errors import NothingDue
    from batchcrawl.round import run_rounds

    ap = argparse.ArgumentParser()
    ap.add_argument("crawl")
    ap.add_argument("rounds", type=int)
    ap.add_argument(
        "kill_at",
        nargs="?",
        choices=sorted(set(KILL_POINTS + PIPELINE_KILL_POINTS + STREAM_KILL_POINTS)),
    )
    ap.add_argument(
        "--nth",
        type=int,
        default=None,
        help="kill at the NTH start of KILL_AT in the run (pipelined rounds)",
    )
    ap.add_argument("--scheduler", default=None)
    ap.add_argument("--stream", action="store_true")
    ap.add_argument(
        "--no-duckdb",
        action="store_true",
        help="make importing DuckDB fail in this process (its child processes are not affected)",
    )
    args = ap.parse_args(argv)
    if args.no_duckdb:
        sys.meta_path.insert(0, _NoDuckDB())
    crawl = CrawlDir.open(args.crawl)
    cfg = load_crawl_config(crawl, environ={})
    if args.stream:
        return _stream(crawl, cfg, args)
    state = {"round": 0}
    seen: dict[str, int] = defaultdict(int)

    def on_step(step: str) -> None:
        seen[step] += 1
        if step == "generate":
            state["round"] += 1
        print(f"STEP {step} {state['round']} {time.time():.3f}", flush=True)
        if step == args.kill_at and (
            seen[step] == args.nth if args.nth else state["round"] == args.rounds
        ):
            os.kill(os.getpid(), signal.SIGKILL)

    def on_round(summary: dict[str, Any]) -> None:
        print(json.dumps(summary, default=str), flush=True)

    try:
        run_rounds(
            crawl.url, cfg, args.rounds, scheduler=args.scheduler, on_round=on_round,
            on_step=on_step,
        )  # fmt: skip
    except NothingDue:
        print("NOTHING_DUE", flush=True)
        return 75
    return 0


def _stream(crawl: CrawlDir, cfg: Config, args: Any) -> int:
    """``--stream``: stream to the end, SIGKILLing this process at the ``args.rounds``-th start
    of step ``args.kill_at``; print the JSON summary."""
    from batchcrawl.console.signals import StopRequest
    from batchcrawl.stream import run_stream

    seen: dict[str, int] = defaultdict(int)

    def on_step(step: str) -> None:
        seen[step] += 1
        print(f"STEP {step} {seen[step]} {time.time():.3f}", flush=True)
        if step == args.kill_at and seen[step] == args.rounds:
            os.kill(os.getpid(), signal.SIGKILL)

    summary = run_stream(crawl.url, cfg, StopRequest(), scheduler=args.scheduler,
                         on_step=on_step)  # fmt: skip
    print(json.dumps(summary, default=str), flush=True)
    return 0


def group_members(pgid: int) -> list[int]:
    """Live processes (zombies excluded) in process group ``pgid``."""
    import psutil

    out = []
    for p in psutil.process_iter(["pid", "status"]):
        try:
            if os.getpgid(p.pid) == pgid and p.info["status"] != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
