"""What a crawl directory's committed WARC files must satisfy (issue 35 item 2), for the tests of
WARC files kept open across a stream's checkpoints: every committed ``fetched`` row's
``(warc_filename, warc_record_offset, warc_record_length)`` is one whole record inside its file,
``warcio check`` passes on every file, and the CDXJ beside each file indexes exactly its records."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence

from warcio.archiveiterator import ArchiveIterator

from batchcrawl import cdxj
from batchcrawl.engine.warcopen import committed_open_warcs
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir


def committed_locations(crawl: CrawlDir) -> dict[str, list[tuple[int, int]]]:
    """File -> the ``(offset, length)`` of every committed row pointing into it (current
    generation)."""
    cols = ["warc_filename", "warc_record_offset", "warc_record_length"]
    table = crawl.read_table("fetched", crawl.manifest().files("fetched"), columns=cols)
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for name, offset, length in zip(*(table.column(c).to_pylist() for c in cols), strict=True):
        if name is not None:
            out[name].append((offset, length))
    return dict(out)


def record_spans(path: str) -> dict[int, int]:
    """Offset -> length of every record of the WARC file ``path``, read with warcio's
    ArchiveIterator (raises on a torn record)."""
    spans: dict[int, int] = {}
    with open(path, "rb") as fh:
        it = ArchiveIterator(fh)
        for record in it:
            it.read_to_end(record)
            spans[it.get_record_offset()] = it.get_record_length()
    return spans


def check_committed_warcs(crawl: CrawlDir, also: Sequence[str] = ()) -> dict[str, int]:
    """Assert the module doc's conditions on every WARC file the committed rows point into and
    on the files ``also`` (relative to the crawl root); returns file -> size in bytes."""
    located = committed_locations(crawl)
    for name in also:
        located.setdefault(name, [])
    sizes: dict[str, int] = {}
    for name, spans in located.items():
        path = crawl.path(name)
        size = sizes[name] = os.path.getsize(path)
        past = [(o, n) for o, n in spans if o + n > size]
        assert not past, f"{name} ({size} bytes): rows point past its end: {past[:3]}"
        records = record_spans(path)
        assert sum(records.values()) == size, f"{name}: trailing bytes after its last record"
        wrong = [(o, n) for o, n in spans if records.get(o) != n]
        assert not wrong, f"{name}: rows not at a whole record: {wrong[:3]}"
        index = crawl.path(paths.warc_cdxj(name))
        if os.path.exists(index):
            with open(path, "rb") as fh:
                expected = sorted(cdxj.cdxj_lines(fh, name.rsplit("/", 1)[-1]))
            with open(index, encoding="utf-8") as fh:
                assert fh.read().splitlines() == expected, f"{index} does not index {name}"
    if located:
        check = subprocess.run(
            [sys.executable, "-m", "warcio.cli", "check", *(crawl.path(n) for n in located)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    return sizes


def files_by_shard(names: list[str]) -> dict[int, list[str]]:
    """WARC file names grouped by the shard in their name (``<crawl>-RRRRR-SS-<stamp>-NNNNN``),
    each group in the order the files were opened (by name: zero-padded round, then serial)."""
    out: dict[int, list[str]] = defaultdict(list)
    for name in sorted(names, key=lambda n: n.rsplit("/", 1)[-1]):
        out[int(name.rsplit("/", 1)[-1].split("-")[-3])].append(name)
    return dict(out)


def bytes_past_committed_end(crawl: CrawlDir) -> int:
    """Bytes the WARC files left open by the newest checkpoint hold past their committed ends
    (records of a micro-batch not committed yet)."""
    return sum(max(0, os.path.getsize(crawl.path(name)) - end)
               for name, end in committed_open_warcs(crawl).items())  # fmt: skip
