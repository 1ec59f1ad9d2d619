"""Every path of a crawl directory, in one place (docs/design.md §3).

All paths are relative to the crawl root and use ``/``. Functions build them; where a reader
(``gc``, ``export``, the round's crash detection) must recognise a path, the regular expression that
parses it is defined here too, next to the function that builds it::

    crawl.toml                                   CONFIG_FILE
    crawl.duckdb                                 DUCKDB_FILE
    _lock.json                                   LOCK_FILE
    _commits/000007.json                         commit_file(7)
    frontier/gen=7/bucket=042.parquet            bucket_base(7, 42): a bucket's base file
    frontier/gen=7/bucket=042.run.parquet        bucket_run(7, 42): a delta run written by gen 7
    frontier/gen=7/bucket=042.run.due.parquet    due_index(bucket_run(7, 42)): its due-time index
    hosts/gen=7/shard=03.parquet                 hosts_file(7, 3)
    fetchlists/round=7/shard=03.parquet          round_file("fetchlists", 7, 3)
    fetched/round=7/shard=03.parquet             round_file("fetched", 7, 3)
    links/round=7/shard=03.parquet               round_file("links", 7, 3)
    warc/round=7/shard=03-00000.warc.gz          warc_dir(7), warc_prefix(3) (+ the writer's serial)
"""

from __future__ import annotations

import re

CONFIG_FILE = "crawl.toml"
DUCKDB_FILE = "crawl.duckdb"
LOCK_FILE = "_lock.json"
COMMITS_DIR = "_commits"
#: Folders holding table data (what ``gc`` walks).
DATA_DIRS = ("frontier", "hosts", "fetchlists", "fetched", "links", "warc")
#: Tables written once per round and shard.
ROUND_TABLES = ("fetchlists", "fetched", "links")

#: ``_commits/`` file name -> generation (group 1).
COMMIT_RE = re.compile(r"^(\d{6,})\.json$")
#: ``.../round=N/...`` anywhere in a path -> round (group 1).
ROUND_RE = re.compile(r"(?:^|/)round=(\d+)/")
#: ``shard=SS`` in a file name -> shard (group 1).
SHARD_RE = re.compile(r"shard=(\d+)")
#: A frontier file -> generation (1), bucket (2), ``.run`` for a delta run (3, else None).
BUCKET_RE = re.compile(r"^frontier/gen=(\d+)/bucket=(\d+)(\.run)?\.parquet$")


def commit_file(generation: int) -> str:
    """``_commits/GGGGGG.json``: the manifest of ``generation`` (zero-padded to 6 digits)."""
    return f"{COMMITS_DIR}/{generation:06d}.json"


def bucket_base(generation: int, bucket: int) -> str:
    """``frontier/gen=G/bucket=BBB.parquet``: the base file of ``bucket`` written by ``generation``
    (init/inject/compaction; ``BBB`` zero-padded to at least 3 digits)."""
    return f"frontier/gen={generation}/bucket={bucket:03d}.parquet"


def bucket_run(generation: int, bucket: int) -> str:
    """``frontier/gen=G/bucket=BBB.run.parquet``: the delta run of ``bucket`` written by the update
    of ``generation`` (docs/design.md §4, log-structured buckets)."""
    return f"frontier/gen={generation}/bucket={bucket:03d}.run.parquet"


def due_index(data_rel: str) -> str:
    """``....due.parquet`` beside a frontier file: its due-time index (docs/design.md §4), the
    file's due-able rows sorted by ``next_fetch_time``."""
    if not data_rel.endswith(".parquet"):
        raise ValueError(f"{data_rel!r} is not a frontier Parquet file")
    return data_rel[: -len(".parquet")] + ".due.parquet"


def hosts_file(generation: int, shard: int) -> str:
    """``hosts/gen=G/shard=SS.parquet``."""
    return f"hosts/gen={generation}/shard={shard:02d}.parquet"


def round_dir(table: str, round: int) -> str:
    """``TABLE/round=R``: the folder of one round's files of a per-round table."""
    if table not in ROUND_TABLES:
        raise ValueError(f"{table!r} is not a per-round table ({', '.join(ROUND_TABLES)})")
    return f"{table}/round={round}"


def round_file(table: str, round: int, shard: int) -> str:
    """``TABLE/round=R/shard=SS.parquet`` for ``fetchlists``, ``fetched`` and ``links``."""
    return f"{round_dir(table, round)}/shard={shard:02d}.parquet"


def warc_dir(round: int) -> str:
    """``warc/round=R``: the folder of one round's WARC files."""
    return f"warc/round={round}"


def warc_prefix(shard: int) -> str:
    """``shard=SS``: the WARC file name prefix of a shard (the writer appends ``-NNNNN.warc.gz``)."""
    return f"shard={shard:02d}"


def parse_round(path: str) -> int | None:
    """The round of a ``.../round=N/...`` path, or None."""
    m = ROUND_RE.search(path)
    return int(m.group(1)) if m else None


def parse_shard(name: str) -> int | None:
    """The shard of a ``shard=SS...`` file name, or None."""
    m = SHARD_RE.search(name)
    return int(m.group(1)) if m else None
