"""The golden fetch crawl: a small sample web crawled by one :class:`FetchWorker` on a fixed wall
clock, normalized so that two crawls of the same web by the same code compare equal.

``tests/test_golden_fetch.py`` compares a fresh crawl with ``tests/golden/fetch_sampleweb.json``;
regenerate that file (only when a change of crawl output is intended, and say so in the commit) with

    PYTHONPATH=$PWD python3 tests/golden_fetch.py --write

What is normalized (see ``tests/golden/README.md``):

* the server's port (chosen by the OS) is replaced by ``PORT`` in URLs, headers and payloads; so
  payload digests and lengths are those of the normalized payload (each WARC record's own digest
  is checked against its raw payload first), and url keys are replaced by the normalized URL;
* wall-clock fields: the fetcher stamps ``FetchResult.started`` with ``time.time()`` (not
  injectable), so ``fetch_time``, ``download_s``, ``WARC-Date``, ``WARC-Refers-To-Date`` and the
  ``hosts`` rows' ``next_fetch_time`` / robots.txt times are dropped; the worker's own wall clock
  is fixed (:data:`WALL`), which fixes the WARC file names;
* WARC record ids (``uuid4``), ``WARC-Concurrent-To``/``WARC-Refers-To``, record offsets and
  lengths (compressed sizes follow the dates), the ``Date`` response header, the metadata
  records' ``fetchTimeMs``, the hosts' ``host_delay_s`` (it follows download times) and the CPU
  counters;
* row order: one fetch thread, no host delay; the hosts' interleaving still follows the real clock,
  so rows are sorted and the links' ``seq`` dropped (each host's own order is deterministic: the
  URL cache is off, so every page's links are emitted whatever came before).
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.dirfs import DirFileSystem
from warcio.archiveiterator import ArchiveIterator

from batchcrawl.config import loopback_test_config
from batchcrawl.fetch.warc import payload_digest
from batchcrawl.fetch.worker import FetchWorker
from batchcrawl.records import FetchItem
from batchcrawl.testing.sampleweb import SampleWeb
from batchcrawl.testing.webserver import MultiHostServer
from batchcrawl.urls import domain_of, host_of, url_key

GOLDEN = Path(__file__).parent / "golden" / "fetch_sampleweb.json"
#: the worker's wall clock (epoch seconds), fixed
WALL = 1_800_000_000.0
MAX_ROUNDS = 8

_DROP_FETCHED = {"fetch_time", "download_s", "warc_record_offset", "warc_record_length"}
_DROP_WARC = {
    "WARC-Date", "WARC-Record-ID", "WARC-Concurrent-To", "WARC-Refers-To", "WARC-Refers-To-Date",
    "WARC-Block-Digest", "WARC-Payload-Digest", "Content-Length", "WARC-Warcinfo-ID",
}  # fmt: skip
_DROP_HTTP = {"date", "content-length"}
_DROP_HOSTS = {
    "after_round",
    "next_fetch_time",
    "host_delay_s",
}  # host_delay_s follows download times


def sample_web() -> SampleWeb:
    """The golden web: 6 hosts, 60 pages, extras (redirects, dead links, duplicates, files) on
    hosts 1 and 6, robots.txt kinds allow/disallow/delay/404/500."""
    return SampleWeb(6, 60, seed=7, trap=False, page_bytes=1500, links_per_page=16,
                     menu_links=4, extras_every=5)  # fmt: skip


def _config():
    return loopback_test_config(
        crawl={"name": "golden"},
        # every delay 0 (no download-time factor, no Crawl-delay): the one thread takes the hosts in
        # the order they were released, not by the real clock's race between them
        politeness={"host_delay_s": 0.0, "ip_delay_s": 0.0, "max_crawl_delay_s": 0.0,
                    "adaptive_delay_factor": 0.0},
        fetch={"threads": 1, "connect_timeout_s": 2.0, "read_timeout_s": 2.0,
               "total_timeout_s": 5.0, "url_cache_size": 0, "tail_rate_ratio": 0.0,
               "tail_capacity_ratio": 0.0, "tail_idle_s": 0.0, "time_limit_s": 600.0},
        dedup={"skip_duplicate_links": False},
    )  # fmt: skip


def _item(url: str, depth: int) -> FetchItem:
    host = host_of(url)
    return FetchItem(url_key(url), url, host, domain_of(host), depth)


def crawl(workdir: str | Path) -> dict[str, Any]:
    """Crawl the golden web into ``workdir`` (rounds until no new in-scope link, at most
    :data:`MAX_ROUNDS`) and return the normalized rows, host rows, counters and WARC records."""
    web = sample_web()
    server = MultiHostServer(web).start()
    port = server.port
    web.bind(port)
    fs = DirFileSystem(str(workdir), fsspec.filesystem("file"))
    seeds = web.seeds()
    hosts = {host_of(u) for u in seeds}
    worker = FetchWorker(_config(), 0, fs, seed_hosts=hosts,
                         seed_domains={domain_of(h) for h in hosts}, wall=lambda: WALL)  # fmt: skip
    fetched: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    counters: list[dict[str, int]] = []
    host_rows: list[dict[str, Any]] = []
    queued = set(seeds)
    todo = [_item(u, 0) for u in sorted(seeds)]
    try:
        for rnd in range(1, MAX_ROUNDS + 1):
            if not todo:
                break
            run = worker.run(todo, rnd)
            assert not run.unfetched, run.unfetched
            fetched += run.fetched
            new_links = _columns_to_rows(run.links)
            links += new_links
            edges += _columns_to_rows(run.edges)
            counters.append({k: v for k, v in run.counters.items() if not k.startswith("cpu_")})
            host_rows += [{**r, "after_round": rnd} for r in worker.host_rows()]
            nxt = {}
            for row in new_links:
                url = row["dst_url"]
                if row["filter_reason"] is None and url not in queued:
                    nxt.setdefault(url, row["depth"])
            queued.update(nxt)
            todo = [_item(u, d) for u, d in sorted(nxt.items())]
    finally:
        worker.close()
        server.stop()
    return _normalize(port, workdir, fetched, links, edges, host_rows, counters)


def _columns_to_rows(cols: dict[str, list]) -> list[dict[str, Any]]:
    names = list(cols)
    return [dict(zip(names, values, strict=True)) for values in zip(*cols.values(), strict=True)]


def _normalize(port, workdir, fetched, links, edges, host_rows, counters) -> dict[str, Any]:
    mark = f":{port}"

    def text(value: Any) -> Any:
        return value.replace(mark, ":PORT") if isinstance(value, str) else value

    keys: dict[int, str] = {r["url_key"]: r["url"] for r in fetched}
    keys.update((r["dst_url_key"], r["dst_url"]) for r in links)
    keys.update((r["src_url_key"], r["dst_url"]) for r in ())

    def key(value: int | None) -> str | None:
        if value is None:
            return None
        assert value in keys, f"url key {value} of no known URL"
        return text(keys[value])

    records, digests = _warc_records(workdir, mark)
    out_fetched = []
    for row in fetched:
        r = {k: text(v) for k, v in row.items() if k not in _DROP_FETCHED}
        r["url_key"] = key(row["url_key"])
        if r.get("outcome") == "robots_unavailable" and r.get("retry_after_s") is not None:
            r["retry_after_s"] = "HELD"  # the host hold's jittered back-off (fetch/holds.py)
        for name in ("duplicate_of", "near_duplicate_of"):
            if r.get(name) is not None:
                r[name] = key(r[name])
        if r.get("content_digest") is not None:
            r["content_digest"], r["content_length"] = digests[row["content_digest"]]
        out_fetched.append(r)
    out_links = [
        {**{k: text(v) for k, v in r.items() if k != "seq"},
         "src_url_key": key(r["src_url_key"]), "dst_url_key": key(r["dst_url_key"]),
         "lastmod": None if r["lastmod"] is None else str(r["lastmod"])}
        for r in links
    ]  # fmt: skip
    out_edges = [
        {**r, "src_url_key": key(r["src_url_key"]), "dst_url_key": key(r["dst_url_key"])}
        for r in edges
    ]
    # each host's last row: which rounds list a host depends on when its politeness clock let the
    # worker forget it (a wall-clock race under load), not on what the row says
    last = {r["host"]: dict(r) for r in host_rows}
    for r in last.values():  # a held host's times follow its jittered back-off (fetch/holds.py)
        if r.get("held_reason") is not None:
            r["held_until"] = r["robots_expires"] = "HELD"
    out_hosts = [
        {k: text(v) for k, v in r.items() if k not in _DROP_HOSTS and "time" not in k}
        for r in last.values()
    ]
    return {
        "fetched": sorted(out_fetched, key=_sort_key),
        "links": sorted(out_links, key=_sort_key),
        "edges": sorted(out_edges, key=_sort_key),
        "hosts": sorted(out_hosts, key=_sort_key),
        "counters": counters,
        "warc": sorted(records, key=_sort_key),
    }


def _sort_key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def _warc_records(workdir, mark: str) -> tuple[list[dict[str, Any]], dict[str, tuple[str, int]]]:
    """Normalized WARC records of every file under ``workdir``, and ``{raw payload digest:
    (digest of the normalized payload, its length)}``."""
    records = []
    digests: dict[str, tuple[str, int]] = {}
    for path in sorted(Path(workdir).rglob("*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                payload = rec.content_stream().read()
                declared = rec.rec_headers.get_header("WARC-Payload-Digest")
                if rec.rec_type == "response":
                    assert declared == payload_digest(payload), (path, declared)
                norm = payload.replace(mark.encode(), b":PORT")
                if rec.rec_type == "metadata":  # the fetch's duration
                    norm = re.sub(rb"fetchTimeMs: \d+", b"fetchTimeMs: N", norm)
                sha = hashlib.sha1(norm).hexdigest()
                if declared is not None:
                    digests[declared] = (sha, len(norm))
                http = None
                if rec.http_headers is not None:
                    http = [
                        [k, v.replace(mark, ":PORT")]
                        for k, v in rec.http_headers.headers
                        if k.lower() not in _DROP_HTTP
                    ]
                    http.insert(0, rec.http_headers.statusline.replace(mark, ":PORT"))
                records.append({
                    "file": str(path.relative_to(workdir)),
                    "type": rec.rec_type,
                    "headers": [[k, v.replace(mark, ":PORT")] for k, v in rec.rec_headers.headers
                                if k not in _DROP_WARC],
                    "http": http,
                    "payload_sha1": sha,
                    "payload_length": len(norm),
                })  # fmt: skip
    return records, digests


def main(argv: list[str]) -> int:
    """``--write``: crawl and (re)write :data:`GOLDEN`; ``--check``: crawl and compare."""
    if argv not in (["--write"], ["--check"]):
        print("usage: golden_fetch.py --write | --check", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        data = crawl(tmp)
    if argv == ["--write"]:
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
        print(f"wrote {GOLDEN}: {len(data['fetched'])} fetched, {len(data['links'])} links, "
              f"{len(data['edges'])} edges, {len(data['warc'])} WARC records")  # fmt: skip
        return 0
    want = json.loads(GOLDEN.read_text())
    got = json.loads(json.dumps(data, sort_keys=True, default=str))
    return 0 if got == want else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
