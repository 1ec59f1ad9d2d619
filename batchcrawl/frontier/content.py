"""Content seen across shards and rounds: a DRUM keyed by payload digest (MRS §20.2.2).

Manning, Raghavan and Schütze's distributed crawler checks each fetched document's fingerprint
against a *content-seen* store **partitioned by fingerprint**, not by host: two hosts with the same
page live on different shards, so only a table keyed by the digest sees both. Here that table is
``content``: one row per payload digest with the first URL fetched with it (``url_key``, ``url``,
``round``, ``fetch_time``), split into the crawl's K buckets by ``digest_key`` (the project's one
64-bit hash of the digest string, :func:`batchcrawl.urls.hash64`) and stored like the frontier as a
base plus delta runs (:mod:`batchcrawl.frontier.keyset`, IRLbot's DRUM §5.1). The round's update
step runs :func:`update_content`: each bucket checks the round's digests against its keys (DRUM
*check+update*) and writes one run with the digests it did not know -- the first fetch wins, so a
digest's row never changes and the runs of a bucket never share a key -- and merges its runs into
a new base once they pass ``frontier.max_runs`` (as the frontier's compaction does).

Who learns what, when
---------------------
* A duplicate of content committed in an **earlier round** is known at fetch time: every shard
  loads the previous generation's table (:func:`load_seen`), sets ``fetched.duplicate_of``, writes
  a WARC ``revisit`` (identical-payload-digest) instead of a response and, with
  ``dedup.skip_duplicate_links`` (off by default), follows none of its links. Such a revisit
  never becomes a digest's row here (:func:`captures`): every revisit refers to a response.
* A duplicate fetched by **another shard in the same round** is known only here, at update time:
  the table names the first URL, and the named query ``duplicates`` lists every ``fetched`` row
  whose digest was first fetched elsewhere. Its WARC record stays a ``response`` (the shards do
  not talk to each other while fetching).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from batchcrawl.config import Config
from batchcrawl.frontier.keyset import KeySet, update_set
from batchcrawl.frontier.runs import Mapper
from batchcrawl.store import paths, schemas
from batchcrawl.store.crawldir import CrawlDir, FileEntry, Manifest
from batchcrawl.urls import hash64, hash64_many

KEY = "digest_key"
#: ``fetched`` columns a content row is made from.
FETCHED_COLUMNS = ["url_key", "url", "round", "fetch_time", "content_digest", "outcome", "content_length", "duplicate_of"]  # fmt: skip
#: Outcomes whose payload is the page itself (not a redirect body, error page or 304).
STORED_OUTCOMES = ("ok", "truncated")


def stored_fetches(fetched: pa.Table) -> pa.Table:
    """The rows of ``fetched`` whose payload goes through the content-seen check: outcome in
    :data:`STORED_OUTCOMES`, a digest and a non-empty payload."""
    keep = pc.and_(
        pc.is_in(fetched.column("outcome"), pa.array(STORED_OUTCOMES)),
        pc.fill_null(pc.greater(fetched.column("content_length"), 0), False),
    )
    return fetched.filter(pc.and_(keep, pc.is_valid(fetched.column("content_digest"))))


def captures(fetched: pa.Table) -> pa.Table:
    """The :func:`stored_fetches` of ``fetched`` archived as WARC ``response`` records: those
    without ``duplicate_of`` (a fetch the shard knew as a duplicate, of an earlier round's capture
    or of its own earlier one in this round, was archived as a ``revisit``).

    Only these may become a digest's ``content`` row, the capture later revisits refer to (WARC
    1.1 §6.7: a revisit's WARC-Refers-To names the record holding the payload). A shard's fetch
    threads finish out of order, so a revisit may carry an *earlier* ``fetch_time`` (the start of
    its request) than the response it refers to: a slow page started first and answered last
    (issue 30; seen in 2 of 14 replays of a small crawl). A digest fetched this round has at least
    one capture: a revisit refers to a response of an earlier round (then the digest is known
    already) or of its own shard this round."""
    t = stored_fetches(fetched)
    return t.filter(pc.is_null(t.column("duplicate_of")))


def content_rows(fetched: pa.Table) -> pa.Table:
    """The ``content`` rows a round's ``fetched`` rows (at least :data:`FETCHED_COLUMNS`) offer:
    :func:`captures` (responses, not revisits), one per digest -- the earliest ``fetch_time``
    wins (ties: smallest ``url_key``) -- sorted by ``digest_key``."""
    t = captures(fetched)
    digests = t.column("content_digest").to_pylist()
    t = pa.table(
        {
            KEY: pa.array(hash64_many(digests), pa.uint64()),
            "digest": t.column("content_digest"),
            "url_key": t.column("url_key"),
            "url": t.column("url"),
            "round": t.column("round"),
            "fetch_time": t.column("fetch_time"),
        }
    )
    return first_per_digest(t)


def first_per_digest(rows: pa.Table) -> pa.Table:
    """``content`` rows (any order, a digest possibly several times) reduced to one per digest --
    the earliest ``fetch_time`` wins (ties: smallest ``url_key``) -- sorted by ``digest_key``.
    The winner of a union is the winner of its parts' winners, so parts can be reduced first."""
    t = rows.sort_by([(KEY, "ascending"), ("fetch_time", "ascending"), ("url_key", "ascending")])
    keys = np.asarray(t.column(KEY).to_numpy(), dtype=np.uint64)
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    return schemas.conform("content", t.filter(pa.array(first)))


def round_content(pieces: Iterable[pa.Table]) -> tuple[pa.Table, int, int]:
    """:func:`content_rows` of the ``fetched`` rows in ``pieces`` (e.g. one row group at a time:
    :meth:`~batchcrawl.store.crawldir.CrawlDir.iter_row_groups`), the number of their
    :func:`stored_fetches`, and the number of digests they hold only as revisits (known from
    an earlier round, so they offer no content row). Memory: the round's distinct digests plus
    about as many rows again: pieces are reduced, then folded into the result once they hold as
    many rows as it."""
    acc = schemas.empty("content")
    pending: list[pa.Table] = []
    pending_rows = stored = 0
    revisited: set[int] = set()  # digest keys of the revisits (a minority of the fetches)
    for piece in pieces:
        all_stored = stored_fetches(piece)
        stored += all_stored.num_rows
        revisits = all_stored.filter(pc.is_valid(all_stored.column("duplicate_of")))
        revisited.update(hash64_many(revisits.column("content_digest").to_pylist()))
        rows = content_rows(piece)
        pending.append(rows)
        pending_rows += rows.num_rows
        if pending_rows >= max(acc.num_rows, 65_536):
            acc = first_per_digest(pa.concat_tables([acc, *pending]))
            pending, pending_rows = [], 0
    if pending:
        acc = first_per_digest(pa.concat_tables([acc, *pending]))
    captured = set(acc.column(KEY).to_pylist()) if revisited else set()
    return acc, stored, len(revisited - captured)


#: The content-seen set: payload digests bucketed by ``digest_key`` (:mod:`.keyset`).
CONTENT = KeySet("content", KEY, paths.content_bucket)


@dataclass(frozen=True)
class ContentUpdate:
    """What :func:`update_content` did: the ``content`` listing to commit and its counts."""

    listing: list[FileEntry]
    new_digests: int
    known_digests: int
    duplicate_fetches: int

    def to_json(self) -> dict[str, int]:
        """The counts as the round summary's ``content`` object."""
        return {
            "new_digests": self.new_digests,
            "known_digests": self.known_digests,
            "duplicate_fetches": self.duplicate_fetches,
        }


def update_content(
    crawl: CrawlDir,
    manifest: Manifest,
    generation: int,
    fetched: pa.Table | Iterable[pa.Table],
    mapper: Mapper,
    cfg: Config,
) -> ContentUpdate:
    """Merge a round's ``fetched`` rows (all shards, at least :data:`FETCHED_COLUMNS`; a table,
    or pieces of it such as :meth:`~batchcrawl.store.crawldir.CrawlDir.iter_row_groups`) into the
    ``content`` table: one task per touched bucket through ``mapper`` (Dask in a round), each
    compacting its bucket past ``frontier.max_runs`` runs (:func:`.keyset.insert_bucket`).

    Memory: one piece of the facts and the round's distinct digests' rows
    (:func:`round_content`; the facts are partitioned by digest here, in the caller) plus one
    bucket's keys per task.
    """
    stored, fetches, revisit_only = round_content(
        [fetched] if isinstance(fetched, pa.Table) else fetched
    )
    done = update_set(crawl, manifest, CONTENT, generation, stored, cfg, mapper)
    new = done.new.num_rows
    known = stored.num_rows - new + revisit_only
    return ContentUpdate(done.listing, new, known, fetches - new)


def load_seen(crawl: CrawlDir, files: list[str], max_digests: int) -> SeenDigests:
    """The committed ``content`` table (``files``: ``manifest.files("content")``) as a
    :class:`SeenDigests` map ``{digest: (url_key, url, fetch_time)}``, for the fetch workers'
    fetch-time check: at most ``max_digests`` entries (``dedup.max_seen_digests``), those first
    captured last (newest ``fetch_time``; ties: larger ``digest_key``), so a worker's memory does
    not grow with the crawl (about 115 bytes an entry)."""
    columns = [KEY, "digest", "url_key", "url", "fetch_time"]
    order = [("fetch_time", "descending"), (KEY, "descending")]
    t = crawl.read_table("content", [], columns=columns)
    for rel in files:  # one file at a time: the newest max_digests so far plus one file in memory
        t = pa.concat_tables([t, crawl.read_table("content", [rel], columns=columns)])
        if t.num_rows > max_digests:
            t = t.take(pc.sort_indices(t, sort_keys=order)[:max_digests])
    return SeenDigests(t)


class SeenDigests(Mapping[str, tuple[int, str, datetime]]):
    """A read-only map ``{digest: (url_key, url, fetch_time)}`` of ``content`` rows kept as Arrow
    columns sorted by ``digest_key``, looked up by binary search (``numpy.searchsorted``) on that
    key and confirmed on the digest itself, so a key collision never makes a false duplicate.

    A ``dict`` of the same rows held four Python objects and a tuple per entry, about 360 bytes:
    36 MB in each fetch worker at the default ``dedup.max_seen_digests`` of 100,000, besides the
    lists its construction went through. The columns take about 115 bytes an entry (two strings,
    three 8-byte values) and no Python object until a lookup hits; a lookup costs a
    :func:`~batchcrawl.urls.hash64` and a search, a few microseconds a page.

    Parameters
    ----------
    table
        ``content`` rows with the columns ``digest_key`` (uint64, :func:`hash64` of ``digest``,
        as the table stores it), ``digest``, ``url_key``, ``url`` and ``fetch_time``; digests
        unique. Rows whose ``digest_key`` is not their digest's hash are never found.
    """

    __slots__ = ("_keys", "_digests", "_url_keys", "_urls", "_times")

    def __init__(self, table: pa.Table) -> None:
        t = table.sort_by([(KEY, "ascending")])
        # one contiguous array per column (an empty one for a table without chunks)
        self._keys = t.column(KEY).to_numpy().astype(np.uint64, copy=False)
        self._digests = t.column("digest").combine_chunks()
        self._url_keys = t.column("url_key").to_numpy()
        self._urls = t.column("url").combine_chunks()
        self._times = t.column("fetch_time").combine_chunks()

    def _index(self, digest: object) -> int:
        """The row of ``digest``, or -1."""
        if not isinstance(digest, str):
            return -1
        keys = self._keys
        key = np.uint64(hash64(digest))
        i = int(np.searchsorted(keys, key))
        while i < len(keys) and keys[i] == key:  # equal keys: compare the digests
            if self._digests[i].as_py() == digest:
                return i
            i += 1
        return -1

    def _row(self, i: int) -> tuple[int, str, datetime]:
        return (int(self._url_keys[i]), self._urls[i].as_py(), self._times[i].as_py())

    def __getitem__(self, digest: str) -> tuple[int, str, datetime]:
        i = self._index(digest)
        if i < 0:
            raise KeyError(digest)
        return self._row(i)

    def get(self, digest: str, default: Any = None) -> Any:
        """The row of ``digest``, or ``default`` (one search instead of Mapping's two)."""
        i = self._index(digest)
        return default if i < 0 else self._row(i)

    def __contains__(self, digest: object) -> bool:
        return self._index(digest) >= 0

    def __iter__(self) -> Iterator[str]:
        return iter(self._digests.to_pylist())

    def __len__(self) -> int:
        return len(self._keys)
