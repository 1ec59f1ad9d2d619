"""Crawl real documentation sites served on loopback, in every execution mode (issue 30, item 5).

Three real sites others wrote, from Debian packages, each served by
:class:`servers.staticsite.DirectorySite` on 127.0.0.1 (an ephemeral port) under
``*.test`` host names that the crawler's own resolver override maps to loopback:

* ``pydoc`` (``python3.11-doc``, ``/usr/share/doc/python3.11/html``): a **mirror pair**, the whole
  tree under ``docs.test`` and again under ``docs-mirror.test`` (``mirror_prefix="/"``), the
  mirror's root linked from the primary's root index. Both hosts may route to one shard.
* ``aptitude`` (``aptitude-doc-{cs,en,es,fi,fr,it,ja,nl,ru}``, ``/usr/share/doc/aptitude/html``): a
  **multilingual** site, one host per language (``en.aptitude.test``, ...), each seeded at its root.
* ``pgdoc`` (``postgresql-doc-15``, ``/usr/share/doc/postgresql-doc-15/html``): a **single host**,
  large (~1,170 files) and deep (set -> part -> chapter -> section, and next/prev chains).

Each site is crawled, from a fresh crawl directory, in each of three modes, all through the
command line as a user runs it: ``round`` (one ``batchcrawl round`` process per round until it
exits 75, nothing due: what Airflow does), ``crawl`` (``batchcrawl crawl``) and ``stream``
(``batchcrawl crawl --stream``). One row per site and mode:

* ``reachable``: pages :func:`~servers.staticsite.reachable_pages` finds from the seeds
  over the files (lxml, ``<a>``/``<area>`` links: independent of the crawler's parser);
  ``fetched``: how many of those the crawl fetched with status 200;
* ``requests``: requests in the server's log (robots.txt, stylesheets and 404s included);
* ``seconds``: wall time of the mode (process and cluster start-ups included);
* ``bound_s``: the politeness bound, the busiest host's requests in the server's log times the
  host delay (the least time any polite crawler making those requests needs); ``ratio``:
  ``seconds / bound_s``; ``target``: ``1.15 x bound + 10 s`` for ``crawl`` and ``stream``,
  ``1.6 x bound + 10 s`` for ``round`` (issue 30's "done when");
* ``violations``: consecutive requests to one host in the server's log closer than the host
  delay; ``robots_first``: every host's first request was ``/robots.txt``.

The machine's load shows in ``seconds``: say when it was shared. Usage::

    python scripts/bench_sites.py                          # every site, every mode, 0.05 s
    python scripts/bench_sites.py --site pgdoc --mode crawl --host-delay-s 0.1
    python scripts/bench_sites.py --json                   # one JSON line per row instead
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batchcrawl.config import Config, load_config, loopback_test_config, to_toml
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.sql import query
from batchcrawl.testing.webserver import MultiHostServer, RequestLogEntry, Response

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # tests/servers/

from servers.staticsite import PYTHON_DOCS, DirectorySite  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODES = ("round", "crawl", "stream")
#: ``batchcrawl round``'s exit status when no URL is due
NOTHING_DUE = 75
#: Elements whose links define the ground truth (the crawler follows more: ``<link href>``)
TRUTH_TAGS = frozenset({"a", "area"})
APTITUDE_DOCS = Path("/usr/share/doc/aptitude/html")
APTITUDE_LANGS = ("cs", "en", "es", "fi", "fr", "it", "ja", "nl", "ru")
POSTGRES_DOCS = Path("/usr/share/doc/postgresql-doc-15/html")


@dataclass(frozen=True)
class Part:
    """One :class:`DirectorySite` of a site: ``root`` served under ``hosts`` (primary first;
    the others mirror ``mirror_prefix``), crawled from ``seeds`` (paths on the primary)."""

    root: Path
    hosts: tuple[str, ...]
    mirror_prefix: str = "/"
    seeds: tuple[str, ...] = ("/",)


@dataclass(frozen=True)
class Site:
    """A real site: its parts and the Debian package(s) that install them."""

    name: str
    parts: tuple[Part, ...]
    packages: str

    @property
    def hosts(self) -> list[str]:
        """Every host name of the site."""
        return [h for p in self.parts for h in p.hosts]

    def missing(self) -> list[Path]:
        """Roots not installed."""
        return [p.root for p in self.parts if not (p.root / "index.html").is_file()]


SITES = {
    "pydoc": Site(
        "pydoc", (Part(PYTHON_DOCS, ("docs.test", "docs-mirror.test")),), "python3.11-doc"
    ),
    "aptitude": Site(
        "aptitude",
        tuple(Part(APTITUDE_DOCS / lang, (f"{lang}.aptitude.test",)) for lang in APTITUDE_LANGS),
        " ".join(f"aptitude-doc-{lang}" for lang in APTITUDE_LANGS),
    ),
    "pgdoc": Site("pgdoc", (Part(POSTGRES_DOCS, ("pg.test",)),), "postgresql-doc-15"),
}


class SiteApp:
    """The server app of a :class:`Site`: each request goes to the :class:`DirectorySite` of its
    host (404 for any other host)."""

    def __init__(self, site: Site) -> None:
        self.parts = [DirectorySite(p.root, list(p.hosts), mirror_prefix=p.mirror_prefix)
                      for p in site.parts]  # fmt: skip
        self.by_host = {h: d for d in self.parts for h in d.hosts}

    def bind(self, port: int) -> None:
        """Use ``port`` in the primaries' injected mirror links."""
        for d in self.parts:
            d.bind(port)

    def __call__(self, host: str, path: str, headers: Mapping[str, str]) -> Response:
        part = self.by_host.get(host)
        if part is None:
            return Response(404, [("Content-Type", "text/plain")], b"no such host\n")
        return part(host, path, headers)


def site_config(site: Site, host_delay_s: float, shards: int, workers: int, threads: int,
                flush_interval_s: float) -> Config:  # fmt: skip
    """Loopback-only config keeping the crawl on ``site``'s hosts (an allow-list scope, no
    extension denied); every ``*.test`` name resolves to 127.0.0.1 and no DNS server is asked."""
    return loopback_test_config(
        politeness={"host_delay_s": host_delay_s, "ip_delay_s": 0.0, "ip_concurrency": 32},
        fetch={"threads": threads, "shards": shards, "connect_timeout_s": 5.0,
               "read_timeout_s": 10.0, "total_timeout_s": 30.0, "time_limit_s": 600.0},
        filters={"seed_scope": "none", "default": "reject", "allow_hosts": site.hosts,
                 "deny_extensions": [], "max_depth": 100},
        frontier={"buckets": 8},
        round={"workers": workers, "threads_per_worker": 1},
        stream={"flush_interval_s": flush_interval_s},
    )  # fmt: skip


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from batchcrawl.cli import main; main()", *args]


def _run(cmd: list[str], ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if done.returncode not in ok:
        raise RuntimeError(f"{' '.join(cmd[3:])} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


def crawl_mode(crawl_dir: Path, mode: str, max_rounds: int) -> tuple[int, dict[str, Any]]:
    """Crawl the initialised ``crawl_dir`` in ``mode`` until nothing is due; returns the rounds
    run (``round`` and ``crawl``) or the stream's checkpoints, and the stream's summary
    (``{}`` for the other modes)."""
    if mode == "round":
        for n in range(1, max_rounds + 1):
            if _run(_cli("round", str(crawl_dir)), ok=(0, NOTHING_DUE)).returncode == NOTHING_DUE:
                return n - 1, {}
        return max_rounds, {}
    args = ["crawl", str(crawl_dir)] + (["--stream"] if mode == "stream" else [])
    args += [] if mode == "stream" else ["--rounds", str(max_rounds)]
    out = _run(_cli(*args)).stdout
    lines = [json.loads(ln) for ln in out.splitlines() if ln.startswith("{")]
    if mode == "stream":
        last = lines[-1] if lines else {}
        return int(last.get("checkpoints", 0)), last
    return len(lines), {}


def reachable(site: Site, port: int) -> set[str]:
    """The ground truth: pages reachable by ``<a>``/``<area>`` links from the seeds."""
    out: set[str] = set()
    for d, p in zip(SiteApp(site).parts, site.parts, strict=True):
        out |= d.reachable(p.seeds, port=port, tags=TRUTH_TAGS)
    return out


def log_figures(log: list[RequestLogEntry], delay_s: float) -> dict[str, Any]:
    """Requests per host, politeness violations (gaps under ``delay_s``), the smallest gap, and
    the hosts whose first request was not ``/robots.txt``, from a server's request log."""
    times: dict[str, list[float]] = defaultdict(list)
    first: dict[str, str] = {}
    for e in sorted(log, key=lambda e: e.t_ms):
        times[e.host].append(e.t_ms / 1000.0)
        first.setdefault(e.host, e.path)
    gaps = [b - a for t in times.values() for a, b in zip(t, t[1:], strict=False)]
    return {
        "per_host": Counter({h: len(t) for h, t in times.items()}),
        "violations": sum(g < delay_s for g in gaps),
        "min_gap_s": round(min(gaps), 4) if gaps else None,
        "robots_not_first": sorted(h for h, p in first.items() if p != "/robots.txt"),
    }


def bench(site: Site, mode: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Serve ``site``, crawl it in ``mode`` from a fresh crawl directory, return its row."""
    app = SiteApp(site)
    delay = args.host_delay_s
    with MultiHostServer(app, host="127.0.0.1", port=0) as server:
        app.bind(server.port)
        cfg = site_config(site, delay, args.shards, args.workers, args.threads,
                          args.flush_interval_s)  # fmt: skip
        cfg = load_config(files=[("bench", to_toml(cfg))], environ={}, sets=args.set)
        crawl_dir = workdir / f"{site.name}-{mode}"
        (workdir / f"{site.name}-{mode}.toml").write_text(to_toml(cfg), encoding="utf-8")
        seeds = [server.base_url(p.hosts[0]) + s for p in site.parts for s in p.seeds]
        (workdir / f"{site.name}-{mode}.seeds").write_text("\n".join(seeds) + "\n")
        _run(_cli("init", "--config", str(workdir / f"{site.name}-{mode}.toml"),
                  "--seeds", str(workdir / f"{site.name}-{mode}.seeds"), str(crawl_dir)))  # fmt: skip
        started = time.monotonic()
        rounds, summary = crawl_mode(crawl_dir, mode, args.max_rounds)
        seconds = time.monotonic() - started
        log = server.log.entries()
        port = server.port
    truth = reachable(site, port)
    crawl = CrawlDir.open(str(crawl_dir))
    ok = {r["url"] for r in query(crawl, "SELECT url FROM fetched WHERE fetch_status = 200")
          .to_pylist()}  # fmt: skip
    figures = log_figures(log, delay)
    bound = max(figures["per_host"].values(), default=0) * delay
    target = (1.6 if mode == "round" else 1.15) * bound + 10.0
    return {
        "site": site.name, "mode": mode, "hosts": len(site.hosts), "host_delay_s": delay,
        "reachable": len(truth), "fetched": len(truth & ok), "missing": sorted(truth - ok)[:5],
        "requests": len(log), "rounds": rounds, "seconds": round(seconds, 1),
        "bound_s": round(bound, 1), "ratio": round(seconds / bound, 2) if bound else None,
        "target_s": round(target, 1), "within_target": seconds <= target,
        "violations": figures["violations"], "min_gap_s": figures["min_gap_s"],
        "robots_first": not figures["robots_not_first"],
        **({"stream": {k: summary.get(k) for k in STREAM_KEYS}} if summary else {}),
    }  # fmt: skip


#: The stream summary's figures a stream row carries (``--json``): where its time went
STREAM_KEYS = (
    "elapsed_s",
    "latency_s",
    "host_gaps_s",
    "micro_batch_s",
    "seconds_by_step",
    "early_flushes",
    "direct_links",
)

COLUMNS = ("site", "mode", "hosts", "fetched", "reachable", "requests", "rounds", "seconds",
           "bound_s", "ratio", "target_s", "within_target", "violations", "robots_first")  # fmt: skip


def table_line(row: Mapping[str, Any]) -> str:
    """One Markdown table row of :data:`COLUMNS`."""
    return "| " + " | ".join(str(row[c]) for c in COLUMNS) + " |"


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, crawl each chosen site in each chosen mode, print the table; returns 0
    when every row reached every reachable page, with no violation, robots.txt first, within
    its target, else 1 (2 for a site whose package is not installed)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--site", default=",".join(SITES), help=f"comma-separated of {list(SITES)}")
    ap.add_argument("--mode", default=",".join(MODES), help=f"comma-separated of {list(MODES)}")
    ap.add_argument("--host-delay-s", type=float, default=0.05)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    ap.add_argument("--threads", type=int, default=16, help="fetch threads per shard")
    ap.add_argument("--flush-interval-s", type=float, default=5.0, help="stream micro-batches")
    ap.add_argument("--max-rounds", type=int, default=60)
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                    help="override a crawl setting (repeatable)")  # fmt: skip
    ap.add_argument("--workdir", type=Path, default=None, help="keep the crawls here")
    ap.add_argument("--json", action="store_true", help="one JSON line per row")
    args = ap.parse_args(argv)
    sites = [s.strip() for s in args.site.split(",") if s.strip()]
    modes = [m.strip() for m in args.mode.split(",") if m.strip()]
    bad = [s for s in sites if s not in SITES] + [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown site or mode {bad}: sites {list(SITES)}, modes {list(MODES)}")
    for name in sites:
        if SITES[name].missing():
            print(f"{name}: {SITES[name].missing()[0]} is absent; install it with "
                  f"`apt-get install -y {SITES[name].packages}`", file=sys.stderr)  # fmt: skip
            return 2
    if not args.json:
        print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS), flush=True)
    good = True
    with tempfile.TemporaryDirectory(prefix="bench-sites-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for name in sites:
            for mode in modes:
                row = bench(SITES[name], mode, workdir, args)
                print(json.dumps(row) if args.json else table_line(row), flush=True)
                good &= (row["fetched"] == row["reachable"] and row["violations"] == 0
                         and row["robots_first"] and row["within_target"])  # fmt: skip
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
