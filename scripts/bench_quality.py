"""Benchmark near-duplicate and trap detection on the sample web (issue 17 item 3; not a test).

Crawls the sample web (with its calendar spider trap and the planted copies of the extras hosts)
on loopback for a few rounds and prints one JSON line::

    {"rounds", "fetched_html", "planted_near_duplicates", "planted_detected", "planted_share",
     "trap_pages", "trap_pages_flagged", "trap_share", "trap_hosts_flagged", "normal_pages",
     "normal_false_positives", "false_positive_share", "false_trap_hosts",
     "calendar_fetches_by_round", "exact_duplicates_flagged", "simhash_us_per_page"}

``simhash_us_per_page``: the fingerprint of one sample page's visible text (`text_simhash`), which
the fetch worker's one parse of the page gives.

Planted near-duplicates are ``/dup/copy.html`` and ``/near/copy.html`` of each extras host (copies
of one of its pages); trap pages are the calendar pages (``/cal/YYYY/MM``) of the trap host, which
differ only in digits; normal pages are the content pages (``/`` and ``/sK/pI.html``).
``calendar_fetches_by_round`` shows the throttle once the trap host is flagged.

    python scripts/bench_quality.py --hosts 12 --pages 600 --rounds 6
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from batchcrawl.fetch.parse import visible_text  # noqa: E402
from batchcrawl.fetch.simhash import text_simhash  # noqa: E402


def crawl(root: Path, hosts: int, pages: int, rounds: int):
    from round_helpers import new_crawl, round_config, sample_web, serve

    from batchcrawl.round import run_rounds

    web = sample_web(hosts=hosts, pages=pages, trap=True, extras_every=3)
    cfg = round_config(generate={"max_urls_per_host": 40}, dedup={"trap_min_pages": 10})
    with serve(web):
        c = new_crawl(root / "crawl", cfg, web.seeds())
        run_rounds(c.url, cfg, rounds)
        body = web(web.hosts[0].name, "/", {}).body.decode()
    return web, c, body


def measure(web, c, sample_body: str, rounds: int) -> dict:
    rows = c.read_current(
        "fetched", ["url", "round", "simhash", "near_duplicate_of", "duplicate_of"]
    )
    rows = rows.to_pylist()
    kinds = [web.kind_of(r["url"]) for r in rows]
    html = [(r, k) for r, k in zip(rows, kinds, strict=True) if r["simhash"] is not None]
    planted = [r for r, k in html if k in ("duplicate", "near_duplicate")]
    trap = [r for r, k in html if k == "calendar"]
    normal = [r for r, k in html if k == "page"]
    hosts = c.read_current("hosts", ["host", "trap"]).to_pylist()
    flagged = {h["host"] for h in hosts if h["trap"]}
    text = visible_text(sample_body).encode()  # the fetch worker's parse gives it
    t0 = time.perf_counter()
    for _ in range(200):
        text_simhash(text)
    per_page = (time.perf_counter() - t0) / 200

    def share(xs):
        return round(sum(x["near_duplicate_of"] is not None for x in xs) / max(len(xs), 1), 4)

    return {
        "rounds": rounds,
        "fetched_html": len(html),
        "planted_near_duplicates": len(planted),
        "planted_detected": sum(r["near_duplicate_of"] is not None for r in planted),
        "planted_share": share(planted),
        "trap_pages": len(trap),
        "trap_pages_flagged": sum(r["near_duplicate_of"] is not None for r in trap),
        "trap_share": share(trap),
        "trap_hosts_flagged": sorted(flagged & {web.trap_host}),
        "normal_pages": len(normal),
        "normal_false_positives": sum(r["near_duplicate_of"] is not None for r in normal),
        "false_positive_share": share(normal),
        "false_trap_hosts": sorted(flagged - {web.trap_host}),
        "calendar_fetches_by_round": dict(sorted(Counter(r["round"] for r in trap).items())),
        "exact_duplicates_flagged": sum(r["duplicate_of"] is not None for r in rows),
        "simhash_us_per_page": round(per_page * 1e6, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=12)
    ap.add_argument("--pages", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        web, c, body = crawl(Path(tmp), args.hosts, args.pages, args.rounds)
        print(json.dumps(measure(web, c, body, args.rounds)))


if __name__ == "__main__":
    main()
