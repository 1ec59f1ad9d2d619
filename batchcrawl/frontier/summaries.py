"""Typed summaries of the frontier steps (docs/design.md §9): what a round's ``generate`` and
``update`` did, summed over buckets, and their JSON form (the keys ``batchcrawl round`` prints and
the Airflow DAG reads)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any


@dataclass
class UpdateSummary:
    """What update did to one bucket, or (summed with ``+``) to the frontier.

    Attributes
    ----------
    round : int
        The round whose facts were merged.
    buckets_rewritten, buckets_kept : int
        Buckets that got a new delta run (or a new base), and buckets left as they were.
    buckets_compacted : int
        Of the rewritten buckets, those whose runs and facts were merged into a new base at once
        (the compaction rule passed: :func:`batchcrawl.frontier.runs.add_run`, ``compact``).
    rows_written : int
        Changed and new rows merged (the rows of the new runs; a bucket compacted at once writes
        its whole base, counted here by its changed and new rows only).
    frontier_rows_before, frontier_rows_after : int
        Merged frontier rows before and after.
    fetched : Counter
        Fetch facts: ``in = applied + superseded + unknown``.
    links : Counter
        Links: ``in = nofollow + duplicate + known + new_queued + new_filtered:<reason>...``.
    status : Counter
        New status of each fetched URL applied.
    refiltered : int
        URLs that became ``filtered`` because the filters rejected them at generate.
    lastmod_due : int
        Fetched URLs made due now by a sitemap ``lastmod`` later than their last capture.
    delayed : int
        URLs over their domain's STAR budget whose ``next_fetch_time`` BEAST moved forward.
    """

    round: int = 0
    buckets_rewritten: int = 0
    buckets_kept: int = 0
    buckets_compacted: int = 0
    rows_written: int = 0
    frontier_rows_before: int = 0
    frontier_rows_after: int = 0
    fetched: Counter[str] = field(default_factory=Counter)
    links: Counter[str] = field(default_factory=Counter)
    status: Counter[str] = field(default_factory=Counter)
    refiltered: int = 0
    lastmod_due: int = 0
    delayed: int = 0

    def __add__(self, other: UpdateSummary) -> UpdateSummary:
        return UpdateSummary(
            round=max(self.round, other.round),
            buckets_rewritten=self.buckets_rewritten + other.buckets_rewritten,
            buckets_kept=self.buckets_kept + other.buckets_kept,
            buckets_compacted=self.buckets_compacted + other.buckets_compacted,
            rows_written=self.rows_written + other.rows_written,
            frontier_rows_before=self.frontier_rows_before + other.frontier_rows_before,
            frontier_rows_after=self.frontier_rows_after + other.frontier_rows_after,
            fetched=self.fetched + other.fetched,
            links=self.links + other.links,
            status=self.status + other.status,
            refiltered=self.refiltered + other.refiltered,
            lastmod_due=self.lastmod_due + other.lastmod_due,
            delayed=self.delayed + other.delayed,
        )

    def to_json(self) -> dict[str, Any]:
        """The summary as printed and committed (``step`` = ``update``)."""
        return {
            "step": "update",
            "round": self.round,
            "buckets_rewritten": self.buckets_rewritten,
            "buckets_kept": self.buckets_kept,
            "buckets_compacted": self.buckets_compacted,
            "rows_written": self.rows_written,
            "frontier_rows_before": self.frontier_rows_before,
            "frontier_rows_after": self.frontier_rows_after,
            "fetched": _plain(self.fetched),
            "links": _plain(self.links),
            "status": _plain(self.status),
            "refiltered": self.refiltered,
            "lastmod_due": self.lastmod_due,
            "delayed": self.delayed,
        }


def _plain(c: Counter[str]) -> dict[str, int]:
    return {k: int(v) for k, v in sorted(c.items()) if v}
