"""Script use: ``python tests/extract_helpers.py CRAWL N`` runs ``extract_crawl`` on CRAWL in this
process and SIGKILLs itself when the N-th WARC file's task has finished (its files written, before
the commit): the kill of tests/test_extract_crawl.py, at a point the test chooses, without timing."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from batchcrawl.extract import extract_crawl  # noqa: E402
from batchcrawl.store.crawldir import CrawlDir  # noqa: E402


def main(crawl_url: str, n: int) -> None:
    done = []

    def progress(result: dict) -> None:
        done.append(result)
        print(f"DONE {result['text']}", flush=True)
        if len(done) == n:
            os.kill(os.getpid(), signal.SIGKILL)

    extract_crawl(CrawlDir.open(crawl_url), progress=progress)
    print("FINISHED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
