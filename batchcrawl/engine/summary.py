"""The JSON summary of a round or a stream micro-batch, and the fetch step's idle accounting (issue
16), from the shards' typed reports (:class:`~batchcrawl.engine.report.ShardReport`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from batchcrawl.engine.report import ShardReport
from batchcrawl.fetch.worker import ShardRun
from batchcrawl.frontier.runs import BucketFiles
from batchcrawl.frontier.update import UpdateResult
from batchcrawl.records import GIVEN_BACK
from batchcrawl.store.crawldir import ROUND_STEP


def compacted_count(updated: UpdateResult, compacted: list[BucketFiles]) -> int:
    """Buckets given a new base this round: inside the update tasks
    (``UpdateSummary.buckets_compacted``) plus by the compact step (``compacted``, its output for
    ``updated.buckets``: a bucket it did not compact is the same object)."""
    by_step = sum(1 for a, u in zip(compacted, updated.buckets, strict=True) if a is not u)
    return updated.summary.buckets_compacted + by_step


def fetch_idle(shard_results: list[ShardReport], step_s: float) -> dict[str, float]:
    """How much of a batch fetch step of ``step_s`` seconds left fetch threads without work
    (issue 16), from the shards' ``startup_s``, ``fetch_seconds``, ``idle_s``, ``tail_s``.

    A shard is idle (fewer than half its threads have work, :mod:`batchcrawl.fetch.idle`) before
    its worker starts (``startup_s``: fetch list read, hosts restored), during its run's
    ``idle_s``, and after its run until the step ends (writing its facts, waiting for the other
    shards). Returns ``share``: idle shard-seconds / (shards x ``step_s``), in [0, 1];
    ``startup_s``: the slowest shard's start-up; ``tail_s``: from the moment the last shard to
    stay busy dropped below half its threads until the step ended (shard clocks are taken to
    start with the step).
    """
    if not shard_results or step_s <= 0:
        return {"share": 0.0, "startup_s": 0.0, "tail_s": 0.0}
    busy = [r.fetch_seconds - r.idle_s for r in shard_results]
    idle = sum(step_s - b for b in busy)
    busy_end = max(r.startup_s + r.fetch_seconds - r.tail_s for r in shard_results)
    return {
        "share": round(min(1.0, max(0.0, idle / (len(shard_results) * step_s))), 4),
        "startup_s": max(r.startup_s for r in shard_results),
        "tail_s": max(0.0, step_s - busy_end),
    }


def fetch_by_shard(shard_results: list[ShardReport]) -> list[dict[str, float]]:
    """Each shard's part of a batch fetch step (the round summary's ``fetch_by_shard``; issue 16:
    where its idle seconds went): ``shard``, its start-up (fetch list read, hosts restored), its
    run's length, idle and tail seconds, and its whole call (what follows the run is writing its
    facts and hosts rows); seconds, rounded to milliseconds."""
    times = ("startup_s", "fetch_seconds", "idle_s", "tail_s", "seconds")
    return [
        {"shard": r.shard, **{k: round(getattr(r, k), 3) for k in times}} for r in shard_results
    ]


def _ended_early(shard_result: ShardReport) -> bool:
    """Whether a shard's fetch ended before its time limit: cut at its own slow tail (a shard's
    fetch ends by its own work only, issue 30)."""
    return bool(shard_result.counters.get("tail_cut"))


def attempt_counts(outcomes: Mapping[str, int]) -> dict[str, Any]:
    """What a round's or a stream's fetch ``outcomes`` (outcome value -> URLs) count as:
    ``attempts`` (every URL tried, robots-denied too), ``given_back`` (URLs a held host gave
    back unfetched, :data:`~batchcrawl.records.GIVEN_BACK_OUTCOMES`: no attempt and no error),
    ``responses`` (attempts a server answered) and ``errors`` (outcome -> attempts that failed)."""
    return {
        "attempts": sum(v for k, v in outcomes.items() if k not in GIVEN_BACK),
        "given_back": sum(v for k, v in outcomes.items() if k in GIVEN_BACK),
        "responses": sum(v for k, v in outcomes.items() if k in _RESPONSE_OUTCOMES),
        "errors": {k: v for k, v in outcomes.items() if k not in _NOT_ERRORS},
    }


def round_summary(
    rnd: int,
    generation: int,
    shard_results: list[ShardReport],
    update_summary: dict,
    gen_summary: dict,
    *,
    compacted: int,
    rerun_after_crash: bool,
    steps: dict[str, float],
    elapsed_s: float,
) -> dict[str, Any]:
    """The JSON summary of round (or stream micro-batch) ``rnd`` committed as ``generation``,
    from the shards' results (``counters``, ``outcomes``, ``unfetched``) and the step summaries."""
    counters: Counter = Counter()
    by_outcome: Counter = Counter()
    for r in shard_results:
        counters.update(r.counters)
        by_outcome.update(r.outcomes)
    outcomes = {k: int(v) for k, v in sorted(by_outcome.items()) if v}
    return {
        "step": ROUND_STEP,
        "round": rnd,
        "generation": generation,
        # what each counts (README): every attempt (robots-denied too), those answered by a
        # server, those whose content was stored (the frontier's ``fetched`` status); the URLs
        # a held host gave back unfetched are no attempt (a site that went down: "300 attempts,
        # 300 errors" were 5 connections and 295 URLs given back)
        **attempt_counts(outcomes),
        "stored": sum(v for k, v in outcomes.items() if k in _STORED_OUTCOMES),
        "new_urls": update_summary["links"].get("new_queued", 0),
        "outcomes": outcomes,
        "not_fetched": sum(r.unfetched for r in shard_results),
        # WARC files a stream keeps open across this checkpoint: shard -> [file, committed end in
        # bytes]; after a crash each is cut back to its end (batchcrawl.engine.warcopen)
        "warc_open": {str(r.shard): list(r.warc_open) for r in shard_results if r.warc_open},
        # spills of a shard's rows during its fetch (round.spill_pages, batchcrawl.fetch.spill;
        # the last one at its end); 0 when every shard stayed under the bound
        "spills": sum(r.spills for r in shard_results),
        "spill_s": round(sum(r.spill_s for r in shard_results), 3),
        # hosts rows the shard actors keep for their forgotten hosts (fetch.max_kept_host_rows,
        # after the round), and those of returning hosts read back from the hosts table instead
        "host_rows": {k: sum(r.host_rows.get(k, 0) for r in shard_results)
                      for k in ("kept", "read_back")},
        # a shard left URLs because its fetch reached fetch.time_limit_s (or the crawl's
        # --max-seconds), not because it was cut at its own tail
        "time_limit_hit": any(r.unfetched and not _ended_early(r) for r in shard_results),
        # shards whose fetch ended at its slow tail (fetch.tail_rate_ratio, fetch.tail_idle_s)
        "shards_tail_cut": sum(int(r.counters.get("tail_cut", 0)) for r in shard_results),
        "robots": {
            k: int(v) for k, v in counters.items() if k.startswith(("robots_state_", "robots_fetches"))
        },
        "links": {k: int(v) for k, v in counters.items() if k.startswith("links_")},
        # response header values rejected at the fetch boundary, by field (batchcrawl.fetch.fields;
        # the row's column is NULL and fetched.header_errors names the field)
        "header_rejected": {k.partition(":")[2]: int(v) for k, v in sorted(counters.items())
                            if k.startswith("header_rejected:")},
        # extract.at_fetch: the captures by text row reason (as batchcrawl extract counts them)
        **({"extract": extracted} if (extracted := {k[8:]: int(v) for k, v in counters.items()
                                                    if k.startswith("extract:")}) else {}),
        # the fetch threads' CPU seconds by phase, all shards (time.thread_time; the worker's
        # other threads -- event loop, actor executor, Dask tasks -- are not in them)
        "fetch_cpu_s": {k[4:-2]: round(float(v), 3) for k, v in counters.items()
                        if k.startswith("cpu_") and k.endswith("_s")},
        "generate": gen_summary,
        "update": update_summary,
        "compacted": compacted,
        "rerun_after_crash": rerun_after_crash,
        "seconds_by_step": {k: round(v, 3) for k, v in steps.items()},
        "elapsed_s": round(elapsed_s, 3),
    }  # fmt: skip


def outcome_counts(run: ShardRun) -> dict[str, int]:
    """Fetch attempts of ``run`` by outcome, from the rows themselves: the worker's counters also
    hold robots.txt states whose names can equal an outcome's (``robots_unavailable``)."""
    return dict(Counter(row["outcome"] for row in run.fetched))


_RESPONSE_OUTCOMES = frozenset(
    ("ok", "truncated", "redirect", "redirect_loop", "not_modified", "gone", "http_error",
     "server_error")
)  # fmt: skip
#: Outcomes after which the URL's status is ``fetched`` (frontier/update.py's transition table).
_STORED_OUTCOMES = frozenset(("ok", "truncated", "not_modified"))
#: Outcomes of URLs a held host gave back unfetched (counted ``given_back``, not as attempts).
#: Outcomes that are neither an error nor given back.
_NOT_ERRORS = frozenset(("ok", "redirect", "not_modified")) | GIVEN_BACK
