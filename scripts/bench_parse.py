"""Micro-benchmark of batchcrawl.fetch.parse.parse_page (and, with --warc, the WARC writer).

Builds a synthetic ~20 KB HTML page with 60 links (the fetch worker's budget case) and prints
microseconds of CPU per page. No network. Usage::

    python scripts/bench_parse.py [--pages 2000] [--warc]
"""

from __future__ import annotations

import argparse
import time

from batchcrawl.fetch.parse import parse_page


def synthetic_page(n_links: int = 60, target_bytes: int = 20_000) -> bytes:
    """A realistic-ish page: head with meta/link tags, a nav list of links, paragraphs of text."""
    head = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<title>Benchmark page</title><link rel='stylesheet' href='/static/site.css'>"
        "<link rel='canonical' href='/bench/page.html'><meta name='robots' content='index'>"
        "</head><body><nav><ul>"
    )
    links = "".join(
        f"<li><a href='/section-{i % 7}/article-{i}.html?ref=nav' class='nav-item'>"
        f"Article number {i}</a></li>"
        for i in range(n_links - 1)
    )
    para = (
        "<p>Lorem ipsum dolor sit amet, <b>consectetur</b> adipiscing elit, sed do eiusmod "
        "tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam.</p>\n"
    )
    page = head + links + "</ul></nav><main>"
    while len(page) < target_bytes - 200:
        page += para
    page += "</main></body></html>"
    return page.encode("utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pages", type=int, default=2000)
    ap.add_argument("--warc", action="store_true", help="also time WarcWriter.write_fetch")
    args = ap.parse_args()
    body = synthetic_page()
    url = "http://bench.test/bench/page.html"
    page = parse_page(body, url, "text/html; charset=utf-8")
    print(f"page: {len(body)} bytes, {len(page.links)} links extracted")
    for _ in range(50):
        parse_page(body, url, "text/html; charset=utf-8")
    t0 = time.process_time()
    for _ in range(args.pages):
        parse_page(body, url, "text/html; charset=utf-8")
    parse_us = (time.process_time() - t0) / args.pages * 1e6
    print(f"parse_page: {parse_us:.1f} us CPU/page over {args.pages} pages")
    if args.warc:
        import fsspec

        from batchcrawl.fetch.warc import WarcWriter
        from batchcrawl.records import FetchResult

        fs = fsspec.filesystem("memory")
        result = FetchResult(
            url=url,
            ip="127.0.0.1",
            status=200,
            reason="OK",
            http_version="HTTP/1.1",
            request_line="GET /bench/page.html HTTP/1.1",
            request_headers=[("Host", "bench.test"), ("User-Agent", "batchcrawl/0.1")],
            response_headers=[("Content-Type", "text/html; charset=utf-8")],
            raw_body=body,
            body=body,
            started=1_700_000_000.0,
            finished=1_700_000_000.1,
        )
        outlinks = [link.url for link in page.links]
        with WarcWriter(fs, "/bench/warc", "bench", 10**12, "bench") as writer:
            t0 = time.process_time()
            for _ in range(args.pages):
                writer.write_fetch(result, outlinks=outlinks)
            warc_us = (time.process_time() - t0) / args.pages * 1e6
        print(f"write_fetch (request+response+metadata, gzip): {warc_us:.1f} us CPU/page")
        print(f"parse + WARC: {parse_us + warc_us:.1f} us CPU/page")


if __name__ == "__main__":
    main()
