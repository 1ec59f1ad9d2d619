"""What a crawl holds: URLs by status, hosts, depths, fetch outcomes, rounds (like Nutch's
``readdb -stats``). The numbers come from the named queries in ``storage/queries`` run over one
generation, and the per-round figures from the manifests' summaries.
"""

from __future__ import annotations

import threading
from typing import Any

from batchcrawl.records import GIVEN_BACK
from batchcrawl.store import sql
from batchcrawl.store.crawldir import CrawlDir

#: Summary keys of a round's manifest copied into the ``rounds`` list when present.
ROUND_SUMMARY_KEYS = (
    "attempts",
    "responses",
    "stored",
    "errors",
    "new_urls",
    "elapsed_s",
    "time_limit_hit",
)


def due_urls(crawl: CrawlDir, generation: int | None = None,
             timeout_s: float | None = None) -> int | None:  # fmt: skip
    """URLs of ``crawl``'s frontier due now (:func:`due_counts`' first number), or None when the
    count ran out of ``timeout_s``."""
    counts = due_counts(crawl, generation, timeout_s)
    return None if counts is None else counts[0]


def due_counts(crawl: CrawlDir, generation: int | None = None,
               timeout_s: float | None = None) -> tuple[int, int] | None:  # fmt: skip
    """URLs of ``crawl``'s frontier due now at ``generation`` (default current): queued and error
    URLs whose ``next_fetch_time`` has come and fetched and gone ones the ``[recrawl]`` schedule
    (or ``inject --refetch``) made due (the named query ``due-now``; the rule of
    :func:`batchcrawl.frontier.due.due_time`): the number :func:`crawl_status` gives under
    ``urls.due_now``, for the closing summaries of ``crawl``. (Until a fresh-user trial they
    counted ``queued`` URLs only, and a stream stopped with 332 refetches due said "queued 0".)
    Returns ``(due now, of them on hosts held now)``: URLs a held host waits with are due but
    not fetched until its hold ends (a trial read "due now 417" after "nothing due", all 417 on
    a host that was down).

    The query reads the whole frontier (seconds for tens of millions of URLs): with
    ``timeout_s`` it is interrupted after that many seconds and None is returned (a stopping
    command must end within 2 s, issue 34)."""
    import duckdb

    manifest = crawl.manifest(generation)
    con = sql.connect(crawl, manifest.generation)
    fired = threading.Event()

    def interrupt() -> None:
        fired.set()
        con.interrupt()

    timer = None if timeout_s is None else threading.Timer(timeout_s, interrupt)
    try:
        if timer is not None:
            timer.start()
        with sql.reading_generation(crawl, manifest.generation):
            due = _due_counts(con)
    except duckdb.InterruptException:
        if not fired.is_set():  # not the timer's: a second stop signal's
            raise
        return None
    finally:
        if timer is not None:
            timer.cancel()
        con.close()
    return due


def _due_counts(con: Any) -> tuple[int, int]:
    """``(due now, of them on hosts held now)`` on the crawl connection ``con`` (the named query
    ``due-now``, summed over its statuses)."""
    rows = con.execute(sql.named_query("due-now")).fetchall()
    return sum(int(r[1]) for r in rows), sum(int(r[2]) for r in rows)


#: Response header values rejected at the fetch boundary (``fetched.header_errors``, a
#: comma-separated list of field names; :mod:`batchcrawl.fetch.fields`), counted by field.
_HEADER_REJECTED = """
    SELECT field, count(*) AS n
    FROM (SELECT unnest(string_split(header_errors, ',')) AS field
          FROM fetched WHERE header_errors IS NOT NULL)
    GROUP BY field ORDER BY n DESC, field
"""


def crawl_status(crawl: CrawlDir, generation: int | None = None) -> dict[str, Any]:
    """Statistics of ``crawl`` at ``generation`` (default current).

    Returns
    -------
    dict
        JSON-serializable::

            {"crawl": url, "generation": 7, "round": 3, "buckets": 64, "created": iso,
             "urls": {"total": n, "by_status": {"queued": n, ...}, "due_now": n,
                      "due_now_on_held_hosts": n},
             "hosts": {"total": n, "domains": n},
             "depth": {"0": n, "1": n, ...},
             "fetched": {"attempts": n, "given_back": n, "by_outcome": {"ok": n, ...},
                         "header_rejected": {"last_modified": n, ...}},
             "traps": [{"host": h, "trap": "near", "pages_fetched": n, "queued": n}, ...],
             "held": [{"host": h, "reason": "robots_unavailable", "since": iso, "until": iso,
                       "failures": n, "outage_s": s, "queued": n}, ...],
             "generations": [{"generation": g, "round": r, "step": ..., "created": iso,
                              "stored": n, "elapsed_s": s, ...}, ...]}

        ``generations`` lists every committed generation up to the one shown, oldest first, with
        the summary keys of :data:`ROUND_SUMMARY_KEYS` its step recorded.

    Raises
    ------
    CrawlDirError
        ``generation`` does not exist.
    """
    manifest = crawl.manifest(generation)
    con = sql.connect(crawl, manifest.generation)
    try:
        with sql.reading_generation(crawl, manifest.generation):
            by_status = dict(con.execute(sql.named_query("status-counts")).fetchall())
            due_now, due_held = _due_counts(con)
            depth = {
                str(d): n
                for d, n, _fetched in con.execute(sql.named_query("depth-histogram")).fetchall()
            }
            counts = con.execute(
                "SELECT count(DISTINCT host), count(DISTINCT domain) FROM frontier"
            ).fetchone()
            assert counts is not None  # an aggregate without GROUP BY gives one row
            hosts, domains = counts
            traps = [
                {"host": h, "trap": t, "pages_fetched": n, "queued": q}
                for h, t, n, q in con.execute(sql.named_query("probable-traps")).fetchall()
            ]
            held = [
                {"host": h, "reason": r, "since": since.isoformat(), "until": until.isoformat(),
                 "failures": k, "outage_s": round(float(s), 3), "queued": q}
                for h, r, since, until, k, s, q, _ in con.execute(
                    sql.named_query("held-hosts")
                ).fetchall()
            ]  # fmt: skip
            by_outcome = dict(
                con.execute(
                    "SELECT outcome, count(*) AS n FROM fetched GROUP BY outcome"
                    " ORDER BY n DESC, outcome"
                ).fetchall()
            )
            header_rejected = dict(con.execute(_HEADER_REJECTED).fetchall())
    finally:
        con.close()
    generations = []
    for gen in crawl.generations():
        if gen > manifest.generation:
            break
        m = manifest if gen == manifest.generation else crawl.manifest(gen)
        row = {
            "generation": m.generation,
            "round": m.round,
            "step": m.summary.get("step"),
            "created": m.created,
        }
        row.update({k: m.summary[k] for k in ROUND_SUMMARY_KEYS if k in m.summary})
        generations.append(row)
    return {
        "crawl": crawl.url,
        "generation": manifest.generation,
        "round": manifest.round,
        "buckets": manifest.buckets,
        "created": manifest.created,
        "urls": {
            "total": sum(by_status.values()),
            "by_status": by_status,
            "due_now": due_now,
            "due_now_on_held_hosts": due_held,
        },
        "hosts": {"total": hosts, "domains": domains},
        "depth": depth,
        "fetched": {
            "attempts": sum(v for k, v in by_outcome.items() if k not in GIVEN_BACK),
            # URLs a held host gave back unfetched (by_outcome keeps their outcomes)
            "given_back": sum(v for k, v in by_outcome.items() if k in GIVEN_BACK),
            "by_outcome": by_outcome,
            "header_rejected": header_rejected,
        },
        "traps": traps,
        "held": held,
        "generations": generations,
    }
