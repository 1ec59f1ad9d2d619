"""``batchcrawl export`` of a stream, whose WARC files hold the records of many rounds
(``fetch.warc_max_bytes``; :mod:`batchcrawl.engine.warcopen`).

Real streams (``batchcrawl crawl --stream`` subprocesses, a LocalCluster of 2 worker processes)
against a SampleWeb on loopback, exported in two steps (the rounds committed so far, then all):
each WARC file is copied once, into the folder of the round that opened it, never past its
committed end (a file the stream still has open is copied up to its last committed record), every
index row's ``(warc_filename, warc_record_offset, warc_record_length)`` is one whole record of a
file in DEST (read with warcio), and each robots.txt capture is in one round's index."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from round_helpers import (
    cli_command,
    group_members,
    helper_command,
    new_crawl,
    round_config,
    sample_web,
    serve,
    subprocess_env,
    wait_gone,
)
from warc_checks import committed_locations, record_spans

from batchcrawl.cdxj import scan
from batchcrawl.engine.warcopen import committed_open_warcs
from batchcrawl.export.lake import export_crawl, exported_rounds, warc_dest
from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
NAME = "crawl"  # the crawl directory's base name
TABLES = "fetched,index,warc"


def _config():
    # host delay 0.3 s: the 90-page web takes several seconds, a checkpoint every 0.5 s; one
    # WARC file per shard for the whole stream
    return round_config(stream={"flush_interval_s": 0.5}, politeness={"host_delay_s": 0.3},
                        fetch={"shards": 2, "warc_max_bytes": 1_000_000_000})  # fmt: skip


def _stream(crawl: CrawlDir) -> dict:
    done = subprocess.run(cli_command("crawl", crawl.url, "--stream"), capture_output=True,
                          text=True, env=subprocess_env(), timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _warc_entries(dest: Path) -> list[dict]:
    """The ``warc`` entries of every round's export manifest."""
    return [f for m in exported_rounds(str(dest), NAME).values()
            for f in m["tables"].get("warc", [])]  # fmt: skip


def _check_lake(crawl: CrawlDir, dest: Path, ends: dict[str, int]) -> None:
    """Every index row is a whole record of a file in DEST; each file is in its home round's
    folder, a byte prefix of its source no longer than its committed end (``ends``), whole
    records only; no (file, offset) is indexed twice; each source file was copied once."""
    index = ds.dataset(dest / "index", partitioning="hive").to_table().to_pylist()
    spans: dict[str, dict[int, int]] = {}
    seen = Counter()
    for row in index:
        rel = row["warc_filename"]
        if rel not in spans:
            assert (dest / rel).exists(), f"index row points at {rel}, not in DEST"
            spans[rel] = record_spans(str(dest / rel))
        assert spans[rel].get(row["warc_record_offset"]) == row["warc_record_length"], row
        seen[(rel, row["warc_record_offset"])] += 1
    assert [k for k, n in seen.items() if n > 1] == []
    copies = Counter(f["source"] for f in _warc_entries(dest) if f["copied"])
    assert copies and max(copies.values()) == 1, copies  # no file copied twice
    for src, end in ends.items():
        rel = warc_dest(NAME, -1, src)
        assert paths.parse_round(rel) == paths.parse_round(src)  # the round that opened it
        data = (dest / rel).read_bytes()
        assert len(data) <= end, f"{rel}: {len(data)} bytes past its committed end {end}"
        with open(crawl.path(src), "rb") as fh:
            assert fh.read(len(data)) == data, f"{rel} is not a prefix of {src}"
        assert sum(record_spans(str(dest / rel)).values()) == len(data)
    return index


def _robots_rows_once(crawl: CrawlDir, dest: Path, index: list[dict]) -> None:
    """Every capture of a DEST WARC file with no fetched row is one robots.txt row of the index."""
    located = committed_locations(crawl)
    robots = {(r["warc_filename"], r["warc_record_offset"]) for r in index
              if r["subset"] == "robotstxt"}  # fmt: skip
    expected = set()
    for src, rows in located.items():
        rel = warc_dest(NAME, -1, src)
        known = {o for o, _ in rows}
        with open(dest / rel, "rb") as fh:
            for cap in scan(fh, rel):
                if cap.offset not in known:
                    expected.add((rel, cap.offset))
    assert robots == expected and robots


def test_a_stream_exported_while_a_file_is_open_then_after_it_closed(tmp_path):
    """Step 1 exports the round a SIGKILLed stream committed while its files were open and held
    uncommitted records: only the committed prefix is copied. The rerun cuts the files back and
    closes them; step 2 exports every round and copies no file again."""
    web = sample_web()
    dest = tmp_path / "lake"
    with serve(web):
        crawl = new_crawl(tmp_path / NAME, _config(), web.seeds())
        # killed after the third take flushed records past the second checkpoint's commit
        proc = subprocess.Popen(helper_command(crawl.url, 3, "update", "--stream"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=subprocess_env(), start_new_session=True)  # fmt: skip
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == -signal.SIGKILL, (out, err[-3000:])
        assert wait_gone(group_members(proc.pid), timeout_s=15) == []
        left_open = committed_open_warcs(crawl)
        assert left_open
        past = {n: os.path.getsize(crawl.path(n)) - e for n, e in left_open.items()}
        assert sum(past.values()) > 0, past

        first = export_crawl(crawl, str(dest), tables=TABLES)
        assert first["exported"] == list(range(1, crawl.manifest().round + 1))
        # the open files the committed rows point into, copied up to their committed end
        open_used = {n: e for n, e in left_open.items() if n in committed_locations(crawl)}
        assert open_used
        assert sorted(first["warc_open"]) == sorted(warc_dest(NAME, 0, n) for n in open_used)
        assert first["bytes"] == sum(open_used.values())
        _check_lake(crawl, dest, open_used)

        rerun = _stream(crawl)
    assert rerun["rerun_after_crash"] is True and committed_open_warcs(crawl) == {}
    ends = {n: os.path.getsize(crawl.path(n)) for n in committed_locations(crawl)}
    assert all(os.path.getsize(crawl.path(n)) == e for n, e in left_open.items())  # cut back
    second = export_crawl(crawl, str(dest), tables=TABLES)
    assert second["skipped"] == first["exported"] and second["exported"]
    assert second["warc_open"] == []
    # the files of step 1 were whole already: only the rerun's new files are copied
    assert second["bytes"] == sum(e for n, e in ends.items() if n not in open_used)
    index = _check_lake(crawl, dest, ends)
    _robots_rows_once(crawl, dest, index)


def test_a_clean_stream_exported_in_two_steps_copies_each_file_once(tmp_path):
    web = sample_web()
    dest = tmp_path / "lake"
    with serve(web):
        crawl = new_crawl(tmp_path / NAME, _config(), web.seeds())
        summary = _stream(crawl)
    assert summary["checkpoints"] >= 3, summary
    last = crawl.manifest().round
    ends = {n: os.path.getsize(crawl.path(n)) for n in committed_locations(crawl)}
    rounds_of = defaultdict(set)
    for r, name in zip(*(crawl.read_current("fetched", columns=["round", "warc_filename"])
                         .column(c).to_pylist() for c in ("round", "warc_filename")),
                       strict=True):  # fmt: skip
        if name:
            rounds_of[name].add(r)
    assert max(len(v) for v in rounds_of.values()) > 1  # files shared by rounds
    first = export_crawl(crawl, str(dest), tables=TABLES, rounds=(1, last // 2))
    second = export_crawl(crawl, str(dest), tables=TABLES)
    assert second["skipped"] == first["exported"]
    assert first["bytes"] + second["bytes"] == sum(ends.values())  # each file once, whole
    spans = exported_rounds(str(dest), NAME)[1]["warc_spans"]
    more = export_crawl(crawl, str(dest), tables="links", rounds=(1, 1))  # a table added later
    assert more["exported"] == [1] and more["bytes"] == 0
    assert exported_rounds(str(dest), NAME)[1]["warc_spans"] == spans
    index = _check_lake(crawl, dest, ends)
    _robots_rows_once(crawl, dest, index)
