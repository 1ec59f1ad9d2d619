"""Every path of a crawl directory, in one place (docs/design.md §3).

All paths are relative to the crawl root and use ``/``. Functions build them; where a reader
(``gc``, ``export``, the round's crash detection) must recognise a path, the regular expression that
parses it is defined here too, next to the function that builds it::

    crawl.toml                                   CONFIG_FILE
    crawl.duckdb                                 DUCKDB_FILE
    _lock.json                                   LOCK_FILE
    _commits/000007.json                         commit_file(7)
    _commits/lists/fetched-000007-9f3c...json    file_list("fetched", 7, "9f3c..."): a file list
    frontier/gen=7/bucket=042.parquet            bucket_base(7, 42): a bucket's base file
    frontier/gen=7/bucket=042.run.parquet        bucket_run(7, 42): a delta run written by gen 7
    frontier/gen=7/bucket=042.run.due.parquet    due_index(bucket_run(7, 42)): its due-time index
    hosts/gen=7/shard=03.parquet                 hosts_file(7, 3): a shard's full snapshot (older crawls)
    hosts/gen=7/shard=03.run.parquet             hosts_run(7, 3): the hosts shard 3 touched in gen 7
    hosts/gen=7/hosts.parquet                    hosts_base(7): the hosts table compacted by gen 7
    fetchlists/round=7/shard=03.parquet          round_file("fetchlists", 7, 3)
    fetched/round=7/shard=03.parquet             round_file("fetched", 7, 3)
    fetched/round=7/shard=03.parquet.tmp-spill1f..  spill_file("fetched", 7, 3, "1f.."): its spills
    links/round=7/shard=03.parquet               round_file("links", 7, 3)
    edges/round=7/shard=03.parquet               round_file("edges", 7, 3)
    fetched/rounds=3-9/tier=1-gen=12-part=00.parquet  compacted_file("fetched", 3, 9, 1, 12, 0)
    content/gen=7/bucket=042.run.parquet         content_bucket(7, 42, run=True)
    domainlinks/gen=7/bucket=042.run.parquet     domainlinks_bucket(7, 42, run=True)
    indegree/gen=7/indegree.parquet              indegree_file(7)
    graph/gen=7/graph.json                       graph_manifest(7): the link graph of gen 7
    graph/gen=7/nodes/part=042.parquet           graph_nodes(7, 42)
    graph/gen=7/out/part=042.bin                 graph_lists(7, "out", 42) (and "in")
    warc/round=7/news-00007-03-20261130201500-00000.warc.gz   warc_dir(7), warc_prefix("news", 7, 3, t) + serial
    warc/round=7/news-00007-03-20261130201500-00000.cdxj      warc_cdxj(...): its CDXJ index (fetch.warc_cdxj)
    warc/round=7/news-00007-03-20261130201500-00000.warc.wet.gz  wet_file(...): its plain text (extract)
    text/round=7/news-00007-03-20261130201500-00000.parquet   text_file(...): its text rows (extract)
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

# the database file's name is defined by the module that writes it (a leaf, run alone in a child,
# which also reads the commit files' names to publish the file)
from batchcrawl.store.duckdbfile import COMMIT_RE as COMMIT_RE
from batchcrawl.store.duckdbfile import DUCKDB_FILE as DUCKDB_FILE

CONFIG_FILE = "crawl.toml"
LOCK_FILE = "_lock.json"
COMMITS_DIR = "_commits"
#: Folders holding table data (what ``gc`` walks).
DATA_DIRS = (
    "frontier", "hosts", "fetchlists", "fetched", "links", "edges", "content", "domainlinks",
    "indegree", "warc", "graph", "text",
)  # fmt: skip
#: Tables written once per round and shard.
ROUND_TABLES = ("fetchlists", "fetched", "links", "edges")

#: ``.../round=N/...`` anywhere in a path -> round (group 1).
ROUND_RE = re.compile(r"(?:^|/)round=(\d+)/")
#: ``shard=SS`` in a file name -> shard (group 1).
SHARD_RE = re.compile(r"shard=(\d+)")
#: A frontier file -> generation (1), bucket (2), ``.run`` for a delta run (3, else None).
BUCKET_RE = re.compile(r"^frontier/gen=(\d+)/bucket=(\d+)(\.run)?\.parquet$")


def commit_file(generation: int) -> str:
    """``_commits/GGGGGG.json``: the manifest of ``generation`` (zero-padded to 6 digits)."""
    return f"{COMMITS_DIR}/{generation:06d}.json"


#: A file list under ``_commits/lists/`` -> table (1), generation that wrote it (2).
LIST_RE = re.compile(r"^_commits/lists/([a-z]+)-(\d{6,})-[0-9a-f]+\.json$")


def file_list(table: str, generation: int, token: str) -> str:
    """``_commits/lists/TABLE-GGGGGG-TOKEN.json``: an immutable list of ``table``'s file entries,
    written by the commit of ``generation`` (``token``: hex digits, unique per write) and named
    by its manifest and those after it (:class:`batchcrawl.store.crawldir.FileList`)."""
    if not token or any(c not in "0123456789abcdef" for c in token):
        raise ValueError(f"file list token {token!r}: hex digits only")
    return f"{COMMITS_DIR}/lists/{table}-{generation:06d}-{token}.json"


def bucket_base(generation: int, bucket: int) -> str:
    """``frontier/gen=G/bucket=BBB.parquet``: the base file of ``bucket`` written by ``generation``
    (init/inject/compaction; ``BBB`` zero-padded to at least 3 digits)."""
    return f"frontier/gen={generation}/bucket={bucket:03d}.parquet"


def bucket_run(generation: int, bucket: int) -> str:
    """``frontier/gen=G/bucket=BBB.run.parquet``: the delta run of ``bucket`` written by the update
    of ``generation`` (docs/design.md §4, log-structured buckets)."""
    return f"frontier/gen={generation}/bucket={bucket:03d}.run.parquet"


def content_bucket(generation: int, bucket: int, *, run: bool) -> str:
    """``content/gen=G/bucket=BBB[.run].parquet``: a base file or delta run of the content-seen
    table (payload digests, MRS §20.2.2), DRUM-bucketed by digest like the frontier by URL."""
    return f"content/gen={generation}/bucket={bucket:03d}{'.run' if run else ''}.parquet"


def domainlinks_bucket(generation: int, bucket: int, *, run: bool) -> str:
    """``domainlinks/gen=G/bucket=BBB[.run].parquet``: a base file or delta run of the
    pay-level-domain link pairs (:mod:`batchcrawl.frontier.indegree`)."""
    return f"domainlinks/gen={generation}/bucket={bucket:03d}{'.run' if run else ''}.parquet"


def indegree_file(generation: int) -> str:
    """``indegree/gen=G/indegree.parquet``: linking domains per pay-level domain (STAR)."""
    return f"indegree/gen={generation}/indegree.parquet"


def due_index(data_rel: str) -> str:
    """``....due.parquet`` beside a frontier file: its due-time index (docs/design.md §4), the
    file's due-able rows sorted by ``next_fetch_time``."""
    if not data_rel.endswith(".parquet"):
        raise ValueError(f"{data_rel!r} is not a frontier Parquet file")
    return data_rel[: -len(".parquet")] + ".due.parquet"


def hosts_file(generation: int, shard: int) -> str:
    """``hosts/gen=G/shard=SS.parquet``."""
    return f"hosts/gen={generation}/shard={shard:02d}.parquet"


def hosts_run(generation: int, shard: int) -> str:
    """``hosts/gen=G/shard=SS.run.parquet``: a delta run of the hosts table (the hosts one shard
    touched in one round; :mod:`batchcrawl.frontier.hosts`)."""
    return f"hosts/gen={generation}/shard={shard:02d}.run.parquet"


def hosts_base(generation: int) -> str:
    """``hosts/gen=G/hosts.parquet``: the hosts table merged by a compaction."""
    return f"hosts/gen={generation}/hosts.parquet"


def round_dir(table: str, round: int) -> str:
    """``TABLE/round=R``: the folder of one round's files of a per-round table."""
    if table not in ROUND_TABLES:
        raise ValueError(f"{table!r} is not a per-round table ({', '.join(ROUND_TABLES)})")
    return f"{table}/round={round}"


def round_file(table: str, round: int, shard: int) -> str:
    """``TABLE/round=R/shard=SS.parquet`` for ``fetchlists``, ``fetched``, ``links``, ``edges``."""
    return f"{round_dir(table, round)}/shard={shard:02d}.parquet"


def spill_file(table: str, round: int, shard: int, token: str) -> str:
    """``TABLE/round=R/shard=SS.parquet.tmp-spillTOKEN``: the spills of one shard's round of a
    fact table (``fetched``, ``links``, ``edges``; :mod:`batchcrawl.fetch.spill`), merged into
    :func:`round_file` when the shard's fetch ends and then removed. A temp name (``token``:
    letters and digits, unique per write): a shard killed mid-round leaves it to ``gc``, and no
    reader or rerun ever opens it."""
    if not token.isalnum():
        raise ValueError(f"spill token {token!r}: letters and digits only")
    return f"{round_file(table, round, shard)}{TMP_MARKER}spill{token}"


#: Fact tables whose per-round files are merged by :mod:`batchcrawl.store.factcompact` (every
#: round writes one file per shard of each: without merging, a crawl of thousands of rounds is
#: tens of thousands of files).
COMPACTED_TABLES = ("fetchlists", "fetched", "links", "edges")
#: A merged fact file -> table (1), first round (2), last round (3), tier (4), generation (5).
COMPACTED_RE = re.compile(
    r"^(fetchlists|fetched|links|edges)/rounds=(\d+)-(\d+)/tier=(\d+)-gen=(\d+)-part=\d+\.parquet$"
)


def compacted_file(table: str, first: int, last: int, tier: int, generation: int, part: int) -> str:
    """``TABLE/rounds=A-B/tier=T-gen=G-part=PP.parquet``: rows of rounds ``first``..``last`` of a
    fact table (:data:`COMPACTED_TABLES`) merged from smaller files by the commit of
    ``generation``; ``tier`` counts the merges its rows went through (a round's own file is
    tier 0)."""
    if table not in COMPACTED_TABLES:
        raise ValueError(f"{table!r} is not a compacted fact table ({', '.join(COMPACTED_TABLES)})")
    return f"{table}/rounds={first}-{last}/tier={tier}-gen={generation}-part={part:02d}.parquet"


def fact_rounds(path: str) -> tuple[int, int, int] | None:
    """``(first round, last round, tier)`` of a fact file: a round's own file (tier 0) or a
    merged one; None for any other path."""
    m = COMPACTED_RE.match(path)
    if m:
        return int(m.group(2)), int(m.group(3)), int(m.group(4))
    r = parse_round(path)
    return None if r is None else (r, r, 0)


#: Directions of the link graph's adjacency lists: successors (out-links) and predecessors.
GRAPH_DIRECTIONS = ("out", "in")


def graph_dir(generation: int) -> str:
    """``graph/gen=G``: the link graph built from the edges of ``generation``."""
    return f"graph/gen={generation}"


def graph_manifest(generation: int) -> str:
    """``graph/gen=G/graph.json``: the graph's own manifest, written last (its files, partition
    offsets); the graph exists exactly when this file does, and lives as long as generation G."""
    return f"{graph_dir(generation)}/graph.json"


def graph_nodes(generation: int, part: int) -> str:
    """``graph/gen=G/nodes/part=PPP.parquet``: the nodes of one partition, sorted by url key."""
    return f"{graph_dir(generation)}/nodes/part={part:03d}.parquet"


def graph_lists(generation: int, direction: str, part: int) -> str:
    """``graph/gen=G/DIR/part=PPP.bin``: the coded adjacency lists of one partition's nodes,
    ``DIR`` being ``out`` (successors) or ``in`` (predecessors)."""
    if direction not in GRAPH_DIRECTIONS:
        raise ValueError(f"graph direction {direction!r}: use one of {GRAPH_DIRECTIONS}")
    return f"{graph_dir(generation)}/{direction}/part={part:03d}.bin"


def warc_dir(round: int) -> str:
    """``warc/round=R``: the folder of one round's WARC files."""
    return f"warc/round={round}"


def warc_prefix(crawl_name: str, round: int, shard: int, wall_s: float) -> str:
    """WARC file name prefix unique across crawls, rounds, shards and reruns, in the spirit of
    Common Crawl's ``CC-MAIN-<timestamp>-<serial>-<host>.warc.gz``:
    ``<crawl>-<round:05d>-<shard:02d>-<YYYYmmddHHMMSS UTC>``; the writer appends ``-<seq:05d>``.
    Characters other than ``A-Z a-z 0-9 _ . -`` in the crawl name become ``-``."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "-", crawl_name) or "crawl"
    stamp = datetime.fromtimestamp(wall_s, UTC).strftime("%Y%m%d%H%M%S")
    return f"{safe}-{round:05d}-{shard:02d}-{stamp}"


#: The shard in a WARC file name made from :func:`warc_prefix` (the crawl name may hold ``-``).
WARC_SHARD_RE = re.compile(r"-\d{5,}-(\d{2,})-\d{14}-\d+\.warc(?:\.gz)?$")


def parse_warc_shard(warc_rel: str) -> int | None:
    """The shard of a WARC file named by :func:`warc_prefix` (``.../c-00007-03-20261205064337-
    00000.warc.gz`` -> 3), or None for another name."""
    m = WARC_SHARD_RE.search(warc_rel)
    return int(m.group(1)) if m else None


def warc_cdxj(warc_rel: str) -> str:
    """The CDXJ index beside a WARC file: ``X.warc.gz`` (or ``X.warc``) -> ``X.cdxj`` (pywb's
    and cdxj-indexer's naming; written at crawl time when ``fetch.warc_cdxj`` is on, and beside
    each exported WARC file)."""
    for ext in (".warc.gz", ".warc"):
        if warc_rel.endswith(ext):
            return warc_rel[: -len(ext)] + ".cdxj"
    return warc_rel + ".cdxj"


def wet_file(warc_rel: str) -> str:
    """The WET file beside a WARC file (Common Crawl's naming): ``X.warc.gz`` ->
    ``X.warc.wet.gz``, the plain text of its HTML captures (:mod:`batchcrawl.extract.wet`)."""
    if not warc_rel.endswith(".warc.gz"):
        raise ValueError(f"{warc_rel!r} is not a .warc.gz file")
    return warc_rel[: -len(".gz")] + ".wet.gz"


def text_file(round: int, warc_rel: str) -> str:
    """``text/round=R/<WARC name without .warc.gz>.parquet``: the ``text`` rows extracted from one
    WARC file of round ``round`` (one file per WARC file, so one extract task per WARC file)."""
    name = warc_rel.rsplit("/", 1)[-1]
    if not name.endswith(".warc.gz"):
        raise ValueError(f"{warc_rel!r} is not a .warc.gz file")
    return f"text/round={round}/{name[: -len('.warc.gz')]}.parquet"


def parse_round(path: str) -> int | None:
    """The round of a ``.../round=N/...`` path, or None."""
    m = ROUND_RE.search(path)
    return int(m.group(1)) if m else None


def parse_shard(name: str) -> int | None:
    """The shard of a ``shard=SS...`` file name, or None."""
    m = SHARD_RE.search(name)
    return int(m.group(1)) if m else None


#: Marker in the names of temp files that an interrupted write may leave behind (``gc`` removes
#: them; :mod:`batchcrawl.store.atomic` makes them).
TMP_MARKER = ".tmp-"
_TMP = r"(?:\.tmp-[0-9A-Za-z]+)?"
_WARC_NAME = (
    r"(?:shard=\d{2,}-\d{5,}"  # shard=SS-NNNNN (before unique names)
    r"|[A-Za-z0-9_.-]+-\d{5,}-\d{2,}-\d{14}-\d{5,})"  # CRAWL-ROUND-SHARD-YYYYmmddHHMMSS-SEQ
)
_MERGED = r"rounds=\d+-\d+/tier=\d+-gen=\d+-part=\d{2,}\.parquet"  # compacted_file()
#: The paths (relative to the crawl root) a crawl writes, by folder (temp files of atomic writes
#: included); ``gc`` deletes nothing else, so files it did not write are never touched.
LAYOUT = {
    "frontier": rf"frontier/gen=\d+/bucket=\d{{3,}}(?:\.run)?(?:\.due)?\.parquet{_TMP}",
    "hosts": rf"hosts/gen=\d+/(?:shard=\d{{2,}}(?:\.run)?|hosts)\.parquet{_TMP}",
    "fetchlists": rf"fetchlists/(?:round=\d+/shard=\d{{2,}}\.parquet|{_MERGED}){_TMP}",
    "fetched": rf"fetched/(?:round=\d+/shard=\d{{2,}}\.parquet|{_MERGED}){_TMP}",
    "links": rf"links/(?:round=\d+/shard=\d{{2,}}\.parquet|{_MERGED}){_TMP}",
    "edges": rf"edges/(?:round=\d+/shard=\d{{2,}}\.parquet|{_MERGED}){_TMP}",
    "content": rf"content/gen=\d+/bucket=\d{{3,}}(?:\.run)?\.parquet{_TMP}",
    "domainlinks": rf"domainlinks/gen=\d+/bucket=\d{{3,}}(?:\.run)?\.parquet{_TMP}",
    "indegree": rf"indegree/gen=\d+/indegree\.parquet{_TMP}",
    "graph": (
        rf"graph/gen=\d+/(?:graph\.json|nodes/part=\d{{3,}}\.parquet"
        rf"|(?:out|in)/part=\d{{3,}}\.bin){_TMP}"
    ),
    "warc": rf"warc/round=\d+/{_WARC_NAME}(?:\.warc\.gz|\.warc\.wet\.gz|\.cdxj){_TMP}",
    "text": rf"text/round=\d+/{_WARC_NAME}\.parquet{_TMP}",
    COMMITS_DIR: rf"{COMMITS_DIR}/(?:\d{{6,}}|lists/[a-z]+-\d{{6,}}-[0-9a-f]+)\.json{_TMP}",
    "": r"(?:crawl\.duckdb\.tmp-[0-9A-Za-z]+(?:\.wal)?|_lock\.json\.(?:tmp|stale)-[0-9A-Za-z]+)",
}
LAYOUT_RE = {folder: re.compile(pattern) for folder, pattern in LAYOUT.items()}
PARTITION_DIR_RE = re.compile(r"(?:gen=\d+|round=\d+|rounds=\d+-\d+)")
