"""Crawl a real website others wrote, served on loopback: the Python HTML documentation (issue 5.5).

The Debian ``python3.11-doc`` docs (``/usr/share/doc/python3.11/html``, ~530 HTML pages, ~1,060
files) are served by :class:`servers.staticsite.DirectorySite` under ``docs.test`` (everything)
and ``docs-mirror.test`` (a partial mirror of ``/tutorial/``, linked from the primary's root
index), on 127.0.0.1 with an ephemeral port. The crawl is seeded with the primary's root and its
scope is an allow-list of those two host names (``filters.seed_scope = "none"``,
``filters.default = "reject"``, ``filters.allow_hosts``), so the docs' many links to
``docs.python.org``, GitHub and others are recorded as filtered and never requested; the address
policy allows 127.0.0.0/8 only and no DNS server is asked. No extension is denied, so images and
downloads linked by ``<a href>`` are fetched too. Rounds run on the embedded LocalCluster until
nothing is due; with ``--stream``, one stream (``batchcrawl crawl --stream``) until nothing is due.

Prints one JSON line on stdout::

    {"mode", "pages", "rounds", "seconds", "politeness_bound_s", "round_seconds", "reachable", "reachable_fetched", "missing",
     "fetched_beyond_links", "requests", "requests_off_site", "robots_not_first",
     "politeness_violations", "min_gap_s", "warc_files", "warc_check", "sql": {NAME: rows},
     "latency_s"}

* ``pages``: fetch attempts answered with a response; ``seconds``: wall time of the rounds (or the
  stream), LocalCluster start included; ``round_seconds``: the rounds' own elapsed time;
  ``rounds``: rounds, or a stream's checkpoints.
* ``politeness_bound_s``: the least time any polite crawler needs, the busiest host's requests
  (in the server's log) times ``host_delay_s``.
* ``reachable``: URLs :func:`servers.staticsite.reachable_pages` finds from the seed following
  ``<a href>``/``<area href>`` only (the ground truth); ``reachable_fetched``: how many of them
  the crawl fetched with status 200; ``missing``: the first few that it did not.
* ``fetched_beyond_links``: 200 answers outside the ground truth, found through other elements the
  crawler follows (``<link href>``: stylesheets, ``rel=search``/``index``).
* ``requests_off_site``: requests the server saw for any other host (always 0: a request that
  left loopback could not be seen here at all, which is why the crawl's ``fetched`` table is also
  checked for other hosts in the test).
* ``politeness_violations``: consecutive requests to one host in the server's log closer than
  ``host_delay_s``; ``min_gap_s`` the smallest gap seen.
* ``warc_check``: exit status of ``warcio check`` over every WARC file of the crawl.

Usage::

    python scripts/crawl_pydoc.py [--root DIR] [--crawl DIR] [--host-delay-s 0.02] [--stream]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batchcrawl.config import Config, loopback_test_config, to_toml
from batchcrawl.console.signals import StopRequest
from batchcrawl.frontier.inject import inject
from batchcrawl.round import run_rounds
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.sql import query
from batchcrawl.stream import run_stream
from batchcrawl.testing.webserver import MultiHostServer, RequestLogEntry

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/servers/

from servers.staticsite import PYTHON_DOCS, DirectorySite, reachable_pages  # noqa: E402

#: Host names of the served docs: the primary first, then the partial mirror.
HOSTS = ("docs.test", "docs-mirror.test")
#: Elements whose links define the ground truth (the crawler follows more: ``link``, frames).
TRUTH_TAGS = frozenset({"a", "area"})
#: Queries shown in the report (over the views of the last generation).
SQL = {
    "frontier_by_status": "SELECT status, coalesce(reason, '') AS reason, count(*) AS urls "
    "FROM frontier GROUP BY ALL ORDER BY urls DESC",
    "fetched_by_host": "SELECT url_host_name AS host, outcome, fetch_status, count(*) AS n "
    "FROM fetched GROUP BY ALL ORDER BY host, n DESC",
    "by_mime_type": "SELECT content_mime_type AS mime, count(*) AS n, sum(content_length) AS bytes "
    "FROM fetched WHERE outcome = 'ok' GROUP BY ALL ORDER BY n DESC LIMIT 8",
    "by_depth": "SELECT depth, count(*) AS urls FROM frontier WHERE status = 'fetched' "
    "GROUP BY ALL ORDER BY depth",
    "duplicates_across_hosts": "SELECT count(*) AS digests FROM (SELECT content_digest FROM "
    "fetched WHERE outcome = 'ok' GROUP BY content_digest "
    "HAVING count(DISTINCT url_host_name) > 1)",
}


@dataclass
class DocsCrawl:
    """What :func:`crawl_docs` did: the crawl, the served site, the server's request log."""

    crawl: CrawlDir
    cfg: Config
    site: DirectorySite
    port: int
    seeds: list[str]
    summaries: list[dict[str, Any]]
    seconds: float
    log: list[RequestLogEntry] = field(default_factory=list)


def docs_config(
    *,
    host_delay_s: float = 0.02,
    ip_concurrency: int = 16,
    threads: int = 16,
    shards: int = 2,
    workers: int = 2,
    flush_interval_s: float = 5.0,
    at_fetch: bool = False,
) -> Config:
    """Loopback-only config keeping the crawl on :data:`HOSTS` (an allow-list scope).

    Parameters
    ----------
    host_delay_s
        Least gap between two requests to one host, seconds.
    ip_concurrency
        Fetches in flight at once to 127.0.0.1 (both hosts share it).
    threads, shards, workers
        Fetch threads per shard, fetch shards, LocalCluster worker processes.
    flush_interval_s
        Seconds between a stream's micro-batches (``stream.flush_interval_s``).
    at_fetch
        Extract text and languages at fetch time (``extract.at_fetch``).
    """
    return loopback_test_config(
        politeness={"host_delay_s": host_delay_s, "ip_delay_s": 0.0,
                    "ip_concurrency": ip_concurrency},
        fetch={"threads": threads, "shards": shards, "connect_timeout_s": 5.0,
               "read_timeout_s": 10.0, "total_timeout_s": 30.0, "time_limit_s": 600.0},
        filters={"seed_scope": "none", "default": "reject", "allow_hosts": list(HOSTS),
                 "deny_extensions": [], "max_depth": 100},
        frontier={"buckets": 8},
        round={"workers": workers, "threads_per_worker": 1},
        stream={"flush_interval_s": flush_interval_s},
        extract={"at_fetch": at_fetch},
    )  # fmt: skip


def crawl_docs(
    root: Path,
    workdir: Path,
    *,
    max_rounds: int = 100,
    stream: bool = False,
    **settings: Any,
) -> DocsCrawl:
    """Serve ``root`` under :data:`HOSTS`, crawl it from the primary's ``/`` until nothing is due
    (at most ``max_rounds`` rounds, or one stream if ``stream``), stop the server. ``settings``
    go to :func:`docs_config`.

    Raises
    ------
    StaticSiteError
        ``root`` is not a directory.
    """
    site = DirectorySite(Path(root), list(HOSTS))
    with MultiHostServer(site, host="127.0.0.1", port=0) as server:
        site.bind(server.port)
        cfg = docs_config(**settings)
        seeds = [server.base_url(HOSTS[0]) + "/"]
        crawl = CrawlDir.create(str(workdir / "crawl"), to_toml(cfg), buckets=cfg.frontier.buckets)
        inject(crawl, cfg, seeds)
        started = time.monotonic()
        if stream:
            summaries = [run_stream(crawl.url, cfg, StopRequest())]
        else:
            summaries = run_rounds(crawl.url, cfg, max_rounds)
        seconds = time.monotonic() - started
        log = server.log.entries()
        port = server.port
    return DocsCrawl(crawl, cfg, site, port, seeds, summaries, seconds, log)


def gaps(log: list[RequestLogEntry]) -> dict[str, list[float]]:
    """Seconds between consecutive requests to each host, in the server's log."""
    times: dict[str, list[float]] = defaultdict(list)
    for e in log:
        times[e.host].append(e.t_ms / 1000.0)
    return {h: [b - a for a, b in zip(sorted(t), sorted(t)[1:], strict=False)] for h, t in
            times.items()}  # fmt: skip


def warc_files(crawl: CrawlDir) -> list[str]:
    """Local paths of the WARC files the ``fetched`` table points to."""
    rows = query(crawl, "SELECT DISTINCT warc_filename AS f FROM fetched "
                        "WHERE warc_filename IS NOT NULL ORDER BY f").to_pylist()  # fmt: skip
    return [crawl.path(r["f"]) for r in rows]


def warcio_check(files: list[str]) -> subprocess.CompletedProcess:
    """``warcio check FILES`` (the warcio command line's own validation)."""
    exe = shutil.which("warcio")
    cmd = [exe] if exe else [sys.executable, "-m", "warcio.cli"]
    return subprocess.run([*cmd, "check", *files], capture_output=True, text=True, timeout=300)


def report(run: DocsCrawl) -> dict[str, Any]:
    """The figures of a docs crawl (see the module docstring)."""
    truth = reachable_pages(run.site.root, ["/"], list(HOSTS), port=run.port, tags=TRUTH_TAGS)
    ok = {r["url"] for r in query(run.crawl, "SELECT url FROM fetched WHERE fetch_status = 200")
          .to_pylist()}  # fmt: skip
    delay = run.cfg.politeness.host_delay_s
    all_gaps = [g for lst in gaps(run.log).values() for g in lst]
    first = {}
    for e in run.log:
        first.setdefault(e.host, e.path)
    files = warc_files(run.crawl)
    check = warcio_check(files)
    per_host: dict[str, int] = defaultdict(int)
    for e in run.log:
        per_host[e.host] += 1
    streamed = run.summaries and run.summaries[0].get("step") == "stream"
    return {
        "mode": "stream" if streamed else "batch",
        "pages": sum(s["responses"] for s in run.summaries),
        "rounds": run.summaries[0]["checkpoints"] if streamed else len(run.summaries),
        "seconds": round(run.seconds, 2),
        "politeness_bound_s": round(max(per_host.values(), default=0) * delay, 2),
        "round_seconds": round(sum(s["elapsed_s"] for s in run.summaries), 2),
        "reachable": len(truth),
        "reachable_fetched": len(truth & ok),
        "missing": sorted(truth - ok)[:10],
        "fetched_beyond_links": len(ok - truth),
        "requests": len(run.log),
        "requests_off_site": sum(e.host not in HOSTS for e in run.log),
        "robots_not_first": sorted(h for h, p in first.items() if p != "/robots.txt"),
        "politeness_violations": sum(g < delay for g in all_gaps),
        "min_gap_s": round(min(all_gaps), 4) if all_gaps else None,
        "warc_files": len(files),
        "warc_check": check.returncode,
        "sql": {name: query(run.crawl, text).to_pylist() for name, text in SQL.items()},
        # a stream's discovery-to-fetch latency (p50, p95 seconds; batchcrawl.engine.latency)
        "latency_s": run.summaries[0].get("latency_s") if streamed else None,
    }


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, crawl, print the JSON report; returns the exit status."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--root", type=Path, default=PYTHON_DOCS, help="the docs folder")
    ap.add_argument("--crawl", type=Path, default=None, help="work folder (default: a temp dir)")
    ap.add_argument("--host-delay-s", type=float, default=0.02)
    ap.add_argument("--ip-concurrency", type=int, default=16)
    ap.add_argument("--threads", type=int, default=16, help="fetch threads per shard")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    ap.add_argument("--max-rounds", type=int, default=100)
    ap.add_argument("--stream", action="store_true", help="one stream instead of rounds")
    ap.add_argument("--flush-interval-s", type=float, default=5.0, help="stream micro-batches")
    args = ap.parse_args(argv)
    if not args.root.is_dir():
        print(f"{args.root} is not a directory: install the docs with "
              "`apt-get install -y python3.11-doc` or pass --root", file=sys.stderr)  # fmt: skip
        return 2
    with tempfile.TemporaryDirectory(prefix="crawl-pydoc-") as tmp:
        workdir = args.crawl or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        run = crawl_docs(
            args.root, workdir, max_rounds=args.max_rounds, host_delay_s=args.host_delay_s,
            ip_concurrency=args.ip_concurrency, threads=args.threads, shards=args.shards,
            workers=args.workers, stream=args.stream, flush_interval_s=args.flush_interval_s,
        )  # fmt: skip
        print(json.dumps(report(run), default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
