"""Measure conditional GET on the sample web with changing pages (not a test; issue 12).

Serves a :class:`~batchcrawl.testing.sampleweb.SampleWeb` on loopback behind a wrapper that gives
every page an ``ETag`` (hash of its body; ``--last-modified-share`` of the hosts send only
``Last-Modified``) and answers ``If-None-Match``/``If-Modified-Since`` with 304. It crawls until
nothing is due, changes ``--change-share`` of the pages, makes every known URL due again
(``inject --refetch``) and runs one more round. Prints one JSON line::

    {"refetches", "not_modified", "changed_200", "other", "bytes_200_refetched",
     "bytes_saved", "share_304"}

* ``bytes_saved``: payload bytes of the first capture of every URL answered 304 (what a refetch
  without validators would have downloaded again).

    python scripts/bench_freshness.py --hosts 6 --pages 90 --change-share 0.2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import zlib
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from round_helpers import fetched_rows, new_crawl, round_config, serve  # noqa: E402

from batchcrawl.frontier.inject import inject  # noqa: E402
from batchcrawl.round import run_rounds  # noqa: E402
from batchcrawl.testing.sampleweb import SampleWeb  # noqa: E402
from batchcrawl.testing.webserver import Response  # noqa: E402

LAST_MODIFIED = "Wed, 01 May 2024 12:00:00 GMT"


class Changing:
    """SampleWeb with validators; ``version`` bumps the body of the chosen share of pages."""

    def __init__(self, web: SampleWeb, change_share: float, lm_share: float) -> None:
        self.web, self.change, self.lm = web, change_share, lm_share
        self.version = 0

    def bind(self, port: int) -> None:
        self.web.bind(port)

    def _picked(self, key: str, share: float) -> bool:
        return zlib.crc32(key.encode()) % 1000 < share * 1000

    def __call__(self, host, path, headers):
        resp = self.web(host, path, headers)
        if resp.status != 200 or path == "/robots.txt":
            return resp
        body = resp.body
        changed = self.version and self._picked(host + path, self.change)
        if changed:
            body += f"<!-- v{self.version} -->".encode()
        if self._picked(host, self.lm):  # Last-Modified only
            lm = "Thu, 02 May 2024 12:00:00 GMT" if changed else LAST_MODIFIED
            if headers.get("If-Modified-Since") == lm:
                return Response(304, [])
            return Response(200, [*resp.headers, ("Last-Modified", lm)], body)
        etag = '"' + hashlib.sha1(body).hexdigest()[:16] + '"'
        if headers.get("If-None-Match") == etag:
            return Response(304, [("ETag", etag)])
        return Response(200, [*resp.headers, ("ETag", etag)], body)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=6)
    ap.add_argument("--pages", type=int, default=90)
    ap.add_argument("--change-share", type=float, default=0.2)
    ap.add_argument("--last-modified-share", type=float, default=0.3)
    args = ap.parse_args()
    web = SampleWeb(hosts=args.hosts, pages=args.pages, seed=7, trap=False, page_bytes=2000)
    app = Changing(web, args.change_share, args.last_modified_share)
    cfg = round_config()
    with tempfile.TemporaryDirectory() as tmp, serve(app):
        crawl = new_crawl(Path(tmp) / "crawl", cfg, web.seeds())
        first = run_rounds(crawl.url, cfg, 20)
        before = {r["url"]: r for r in fetched_rows(crawl) if r["outcome"] == "ok"}
        app.version = 1
        inject(crawl, cfg, list(before), refetch=True)
        run_rounds(crawl.url, cfg, 1)
        last = [r for r in fetched_rows(crawl) if r["round"] == len(first) + 1]
    outcomes = Counter(r["outcome"] for r in last)
    nm = [r for r in last if r["outcome"] == "not_modified"]
    ok = [r for r in last if r["outcome"] == "ok"]
    print(json.dumps({
        "refetches": len(last),
        "not_modified": len(nm),
        "changed_200": len(ok),
        "other": len(last) - len(nm) - len(ok),
        "outcomes": dict(outcomes),
        "bytes_200_refetched": sum(r["content_length"] or 0 for r in ok),
        "bytes_saved": sum(before[r["url"]]["content_length"] or 0 for r in nm),
        "share_304": round(len(nm) / max(1, len(last)), 3),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
