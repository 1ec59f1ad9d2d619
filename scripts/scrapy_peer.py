"""The Scrapy side of ``scripts/bench_peers.py``: a minimal broad-crawl spider (not a test).

Run by bench_peers.py in its own process; needs ``pip install scrapy`` (or ``batchcrawl[peers]``),
never a dependency of batchcrawl itself. Reads a JSON job file ``{"seeds": [...], "hosts": [...],
"seconds": T, "host_delay_s": D}`` and writes a JSON result ``{"version", "stats",
"dns_refused"}`` to ``--out``.

Network (hard rule): :class:`LoopbackResolver` is Scrapy's DNS resolver (``DNS_RESOLVER``, called
``TWISTED_DNS_RESOLVER`` since Scrapy 2.14): it maps only the generated host names to 127.0.0.1
and fails every other name without asking any DNS server (the names it refused are reported).
``allowed_domains`` is the generated hosts, so off-site links are dropped before download
(stats ``offsite/filtered``); no proxy from the environment, no telnet console. The seeds and
links carry nginx's port, so nothing needs rewriting.

Settings, after Scrapy's "Broad Crawls" advice (docs/topics/broad-crawls.rst):
``CONCURRENT_REQUESTS = 100``, ``REACTOR_THREADPOOL_MAXSIZE = 20``, ``LOG_LEVEL = "INFO"``,
cookies and retries off, ``DOWNLOAD_TIMEOUT = 15``, breadth-first order (``DEPTH_PRIORITY = 1``
with FIFO queues), redirects kept (batchcrawl follows them too). Politeness as a Scrapy user gets
it: ``ROBOTSTXT_OBEY = True``, ``DOWNLOAD_DELAY = D`` with Scrapy's defaults for the rest
(randomised delay, ``CONCURRENT_REQUESTS_PER_DOMAIN = 8``; Scrapy does not read ``Crawl-delay``).
``CLOSESPIDER_TIMEOUT = T`` ends the crawl.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import HtmlResponse
from scrapy.settings import default_settings
from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

#: Scrapy's broad-crawl recommendations plus what the benchmark needs (see the module docstring).
BROAD_CRAWL_SETTINGS = {
    "CONCURRENT_REQUESTS": 100,
    "REACTOR_THREADPOOL_MAXSIZE": 20,
    "LOG_LEVEL": "INFO",
    "COOKIES_ENABLED": False,
    "RETRY_ENABLED": False,
    "DOWNLOAD_TIMEOUT": 15,
    "DEPTH_PRIORITY": 1,
    "SCHEDULER_DISK_QUEUE": "scrapy.squeues.PickleFifoDiskQueue",
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
    "ROBOTSTXT_OBEY": True,
    "TELNETCONSOLE_ENABLED": False,
    "HTTPPROXY_ENABLED": False,
    "USER_AGENT": "scrapy-peer (batchcrawl bench_peers.py; loopback only)",
}


@implementer(IResolverSimple)
class LoopbackResolver:
    """Resolves only the benchmark's host names, to 127.0.0.1; every other name fails at once.

    Built by Scrapy (``from_crawler(crawler, reactor)``); the names come from the setting
    ``PEER_HOSTS``. :attr:`refused` collects the names it refused (should stay empty: off-site
    links are filtered before download).
    """

    refused: list[str] = []

    def __init__(self, reactor, hosts: list[str]) -> None:
        self.reactor, self.hosts = reactor, frozenset(h.lower() for h in hosts)

    @classmethod
    def from_crawler(cls, crawler, reactor) -> LoopbackResolver:
        return cls(reactor, crawler.settings.getlist("PEER_HOSTS"))

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout=()) -> defer.Deferred:  # noqa: N802 - Twisted API
        if name.lower() in self.hosts:
            return defer.succeed("127.0.0.1")
        LoopbackResolver.refused.append(name)
        return defer.fail(DNSLookupError(f"{name}: not a benchmark host; nothing is resolved"))


class PeerSpider(scrapy.Spider):
    """Follows every ``<a href>`` and ``<img src>`` of every HTML page (as batchcrawl does)."""

    name = "peer"

    def __init__(self, seeds: list[str], hosts: list[str], **kwargs) -> None:
        super().__init__(**kwargs)
        self.start_urls, self.allowed_domains = seeds, hosts

    async def start(self):
        """The seeds, deduplicated like every other request (Scrapy's default start requests skip
        the duplicate filter, so each home page would be fetched again when a link finds it)."""
        for request in self.start_requests():
            yield request

    def start_requests(self):  # Scrapy < 2.13 calls this one directly
        for url in self.start_urls:
            yield scrapy.Request(url, callback=self.parse, dont_filter=False)

    def parse(self, response):
        if not isinstance(response, HtmlResponse):
            return
        for href in response.xpath("//a/@href | //img/@src").getall():
            yield response.follow(href, callback=self.parse)


def main(argv: list[str] | None = None) -> int:
    """Crawl the job's seeds for its seconds; write the result JSON."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("job", type=Path, help="JSON job file written by bench_peers.py")
    ap.add_argument("--out", type=Path, required=True, help="result JSON file")
    args = ap.parse_args(argv)
    job = json.loads(args.job.read_text(encoding="utf-8"))
    # the setting was renamed in Scrapy 2.14; setting the deprecated one would warn
    dns_key = (
        "TWISTED_DNS_RESOLVER"
        if hasattr(default_settings, "TWISTED_DNS_RESOLVER")
        else "DNS_RESOLVER"
    )
    settings = dict(BROAD_CRAWL_SETTINGS)
    settings.update({
        dns_key: f"{__name__}.LoopbackResolver",
        "PEER_HOSTS": job["hosts"],
        "DOWNLOAD_DELAY": job["host_delay_s"],
        "CLOSESPIDER_TIMEOUT": job["seconds"],
    })  # fmt: skip
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(PeerSpider)
    process.crawl(crawler, seeds=job["seeds"], hosts=job["hosts"])
    process.start()
    result = {
        "version": scrapy.__version__,
        "stats": crawler.stats.get_stats(),
        "dns_refused": LoopbackResolver.refused,
    }
    args.out.write_text(json.dumps(result, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
