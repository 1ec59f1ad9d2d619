"""Progress of running rounds and streams (docs/design.md §9): a live rich table on a terminal,
one INFO log line every ``progress.interval_s`` seconds otherwise (CI, Airflow), and a human summary
at the end (Scrapy's closing stats block).

Fed by :func:`batchcrawl.round.run_rounds` with snapshots ``{"round": N, "planned": {shard: urls},
"shards": {shard: counters}, "over": [shard, ...]}``, where each shard's counters are its fetch
worker's live counters (one per :class:`~batchcrawl.records.Outcome` value, ``links_new`` ...)
and ``over`` lists the shards whose fetch has ended (what they did not fetch is left for later);
optionally ``time_limit_s``, the fetch's time limit (``fetch.time_limit_s``, or less by the
crawl's deadline), and ``fetch_elapsed_s``, seconds since the fetch began. Counters, rate and clock
start again when the round number changes: a round never shows its predecessor's figures.
A stream (:mod:`batchcrawl.stream`) feeds :class:`StreamProgress` its own snapshot
(:meth:`batchcrawl.stream.Stream.snapshot`) after each micro-batch: totals since it started.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from batchcrawl.records import Outcome

log = logging.getLogger(__name__)

#: Outcomes that end an attempt (all but ``not_fetched``): one "page done" each.
DONE = tuple(o.value for o in Outcome if o is not Outcome.NOT_FETCHED)
#: Outcomes counted as errors in the display.
ERRORS = ("network_error", "server_error", "dns_error", "refused", "robots_unavailable",
          "host_unreachable", "rate_limited", "http_error", "gone", "redirect_loop")  # fmt: skip


def duration(seconds: float | None) -> str:
    """``75.2`` -> ``"1m15s"``, ``3700`` -> ``"1h01m"``, None -> ``"?"``."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Figures:
    """What one snapshot of a round shows: pages done and planned, rate, errors, queue per shard,
    pages left for later by shards whose fetch is over (a time limit or a slow tail cut), elapsed
    and estimated time left (seconds; None when not known yet).

    A shard whose fetch is over has an empty queue: a tail-cut shard's unfetched URLs were shown
    as still queued, and counted in the time left, until the round ended (issue 34).

    With the fetch's time limit in the snapshot (``time_limit_s``; ``fetch_elapsed_s``, else
    ``elapsed_s``, spent of it), no more time is left than the limit leaves, and the queued pages
    the rate will not fetch by then are counted left for later (``past_limit``, an estimate), not
    in the time left: with ``fetch.time_limit_s = 12`` a round said "~3m24s left" and stopped at
    12 s (a user's trial)."""

    def __init__(self, snap: Mapping[str, Any], elapsed_s: float) -> None:
        shards: Mapping[int, Mapping[str, float]] = snap.get("shards", {})
        planned: Mapping[int, int] = snap.get("planned", {})
        over = set(snap.get("over", ()))
        self.round = snap.get("round")
        done = {s: int(sum(c.get(k, 0) for k in DONE)) for s, c in shards.items()}
        self.done = sum(done.values())
        self.planned = sum(planned.values())
        unfetched = {s: max(0, n - done.get(s, 0)) for s, n in sorted(planned.items())}
        self.queue = {s: 0 if s in over else n for s, n in unfetched.items()}
        self.left_for_later = sum(n for s, n in unfetched.items() if s in over)
        self.errors = int(sum(c.get(k, 0) for c in shards.values() for k in ERRORS))
        self.links = int(sum(c.get("links_new", 0) for c in shards.values()))
        self.elapsed_s = elapsed_s
        self.rate = self.done / elapsed_s if elapsed_s > 0 else 0.0
        left = sum(self.queue.values())
        self.left_s = left / self.rate if self.rate > 0 else (0.0 if left <= 0 else None)
        #: the time left is the time limit's, not the rate's; queued pages it will not fetch
        self.by_limit, self.past_limit = False, 0
        limit_s = snap.get("time_limit_s")
        if limit_s is not None and left > 0:
            spent = snap.get("fetch_elapsed_s")
            limit_left = max(0.0, limit_s - (elapsed_s if spent is None else spent))
            if self.left_s is None or self.left_s > limit_left:
                self.by_limit, self.left_s = True, limit_left
                if self.rate > 0:
                    self.past_limit = max(0, left - int(self.rate * limit_left))
        self.left_for_later += self.past_limit

    def time_left(self) -> str:
        """``~18s left`` while pages are queued; once no shard has any, the fetch is over and
        what remains is the round's update and commit, which no rate predicts (a fresh-user
        trial, issue 34: "~0s left", then the round ran 2 s more)."""
        if self.left_s == 0.0 and self.planned:
            return "fetch over, update and commit follow"
        return f"~{duration(self.left_s)} left" + (" (time limit)" if self.by_limit else "")

    def name(self, of: int | None, first: int = 1) -> str:
        """``round 7``; with ``of`` (the rounds of this run, the first numbered ``first``):
        ``round 2 of 5`` when the run started at round 1, else ``round 7 (2 of 5)`` (a fresh-user
        trial, issue 34: ``crawl --rounds 3`` after one round logged "round 3 of 4")."""
        if not of:
            return f"round {self.round}"
        if first == 1:
            return f"round {self.round} of {of}"
        return f"round {self.round} ({int(self.round) - first + 1} of {of})"

    def line(self, of: int | None, first: int = 1) -> str:
        """One log line, e.g. ``round 2 of 5: 40/100 pages (3.2/s), 1 errors, queue 12 28,
        elapsed 12s, ~18s left`` (``of``, ``first``: :meth:`name`)."""
        queue = " ".join(str(n) for n in self.queue.values())
        later = (f" ({'~' if self.past_limit else ''}{self.left_for_later:,} left for later)"
                 if self.left_for_later else "")  # fmt: skip
        return (f"{self.name(of, first)}: {self.done:,}/{self.planned:,} "
                f"pages ({self.rate:,.1f}/s), {self.errors:,} errors, {self.links:,} new links, "
                f"queue per shard {queue or '-'}{later}, elapsed {duration(self.elapsed_s)}, "
                f"{self.time_left()}")  # fmt: skip

    def table(self, of: int | None, first: int = 1) -> Table:
        """The live table (a terminal)."""
        t = Table(title=f"batchcrawl {self.name(of, first)}",
                  show_header=False, title_justify="left")  # fmt: skip
        t.add_row("pages done / planned", f"{self.done:,} / {self.planned:,}")
        t.add_row("pages/s", f"{self.rate:,.1f}")
        t.add_row("errors", f"{self.errors:,}")
        t.add_row("new links", f"{self.links:,}")
        t.add_row("queue per shard", " ".join(f"{s}:{n:,}" for s, n in self.queue.items()) or "-")
        if self.left_for_later:
            t.add_row("left for later", f"{'~' if self.past_limit else ''}{self.left_for_later:,}")
        t.add_row("elapsed / left", f"{duration(self.elapsed_s)} / {self.time_left()}")
        return t


def _move_log_handlers(old: Any, new: Any) -> list[tuple[logging.StreamHandler, Any]]:
    """Point every logging ``StreamHandler`` that writes to ``old`` at ``new``; the handlers moved,
    each with the stream to give back. A live table redirects ``sys.stderr`` to a proxy that
    prints above the table, but a handler made before it kept the real stream: its first line
    was glued to the table's bottom border (issue 34)."""
    loggers = [logging.getLogger()] + [
        lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)
    ]
    moved = []
    for lg in loggers:
        for h in lg.handlers:
            if isinstance(h, logging.StreamHandler) and h.stream is old and old is not new:
                moved.append((h, h.setStream(new)))
    return moved


class RoundProgress:
    """Context manager showing the progress of the running round.

    Parameters
    ----------
    enabled
        Draw a live table on stderr (a terminal); otherwise log one INFO line (logger
        ``batchcrawl.console.progress``) at most every ``interval_s`` seconds.
    interval_s
        Seconds between log lines without a terminal (``progress.interval_s``).
    rounds
        Rounds this run will do at most (shown as "round N of M"); None if not known.
    first_round
        The number of this run's first round (1: a new crawl).
    clock
        Monotonic clock, seconds (tests pass a fake one).
    """

    def __init__(self, enabled: bool, interval_s: float = 30.0, rounds: int | None = None,
                 clock: Callable[[], float] = time.monotonic, first_round: int = 1) -> None:  # fmt: skip
        self.enabled = enabled
        self.interval_s = interval_s
        self.rounds = rounds
        self.first_round = first_round
        self.clock = clock
        self._live: Live | None = None
        self._moved: list[tuple[logging.StreamHandler, Any]] = []
        self._round: Any = None
        self._t0 = clock()
        self._last_log = self._t0

    def __enter__(self) -> RoundProgress:
        if self.enabled:
            self._start(Table(title="batchcrawl: starting"))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()

    def _start(self, table: Table) -> None:
        """Draw the live table on stderr; log handlers print above it while it is drawn."""
        stderr = sys.stderr
        self._live = Live(table, console=Console(file=stderr), refresh_per_second=2,
                          transient=True)  # fmt: skip
        self._live.start(refresh=True)
        self._moved = _move_log_handlers(stderr, sys.stderr)

    def _stop(self) -> None:
        """Clear the live table (if drawn) and give back the streams it redirected: what is
        printed next (a round's JSON summary on stdout, a log line) lands on a line of its own."""
        live, self._live = self._live, None
        if live is None:
            return
        for handler, stream in self._moved:
            handler.setStream(stream)
        self._moved = []
        live.stop()

    def update(self, snap: Mapping[str, Any]) -> None:
        """A new snapshot of the running round (see the module docstring)."""
        now = self.clock()
        if snap.get("round") != self._round:  # a new round: its own clock and counters
            self._round, self._t0, self._last_log = snap.get("round"), now, now
        figures = Figures(snap, now - self._t0)
        if self.enabled:
            table = figures.table(self.rounds, self.first_round)
            if self._live is None:  # the round's first snapshot: done() cleared the last table
                self._start(table)
            else:
                self._live.update(table)
        elif now - self._last_log >= self.interval_s:
            self._last_log = now
            log.info("%s", figures.line(self.rounds, self.first_round))

    def done(self, summary: Mapping[str, Any], *, log_line: bool = True) -> None:
        """A round committed: the live table is cleared, then one INFO line (not with
        ``log_line=False``: the caller prints its own, as the demo does on stdout); the next
        snapshot starts the next round's figures, in a new table.

        The caller prints the round's JSON summary on stdout after this call: click writes it to
        the real stdout's buffer, past rich's redirect of ``sys.stdout`` (its proxy reports no
        encoding), so it was glued to the table's bottom border, its wrapped end erased by the
        next redraw and a stale copy of the table left above (a user trial on a terminal)."""
        self._stop()
        if log_line:
            log.info("round %s committed (generation %s): %s attempts, %s stored in %s",
                     summary.get("round"), summary.get("generation"), summary.get("attempts"),
                     summary.get("stored"), duration(summary.get("elapsed_s")))  # fmt: skip
        self._round = None


def stream_line(snap: Mapping[str, Any]) -> str:
    """One log line about a stream snapshot, e.g. ``stream: micro-batch 7, 1,234 pages (45.6/s),
    3 errors, 5,000 new URLs, queued per shard 12 30, 2 checkpoints (generation 9), elapsed 1m05s``
    (pages: attempts of the committed micro-batches; queued: URLs each shard has been given and
    not fetched yet, not to be mistaken for a held host's)."""
    elapsed = float(snap.get("elapsed_s", 0.0))
    attempts = int(snap.get("attempts", 0))
    rate = attempts / elapsed if elapsed > 0 else 0.0
    outcomes = snap.get("outcomes", {})
    errors = int(sum(outcomes.get(k, 0) for k in ERRORS))
    held = " ".join(str(n) for _, n in sorted(snap.get("held", {}).items()))
    return (f"stream: micro-batch {snap.get('micro_batch')}, {counted(attempts, 'pages')} "
            f"({rate:,.1f}/s), {counted(errors, 'errors')}, "
            f"{counted(int(snap.get('new_urls', 0)), 'new URLs')}, queued per shard "
            f"{held or '-'}, {snap.get('checkpoints', 0)} checkpoints (generation "
            f"{snap.get('generation')}), elapsed {duration(elapsed)}")  # fmt: skip


class StreamProgress(RoundProgress):
    """:class:`RoundProgress` for ``crawl --stream``: the same live display on a terminal (one
    row, :func:`stream_line`) or one INFO line every ``interval_s`` seconds otherwise."""

    def __init__(self, enabled: bool, interval_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        super().__init__(enabled, interval_s, None, clock)

    def update(self, snap: Mapping[str, Any]) -> None:
        """A new snapshot of the stream (:meth:`batchcrawl.stream.Stream.snapshot`)."""
        now = self.clock()
        if self.enabled:
            t = Table(title="batchcrawl stream", show_header=False, title_justify="left")
            t.add_row(stream_line(snap))
            if self._live is None:
                self._start(t)
            else:
                self._live.update(t)
        elif now - self._last_log >= self.interval_s:
            self._last_log = now
            log.info("%s", stream_line(snap))


def round_line(summary: Mapping[str, Any]) -> str:
    """One committed round's JSON ``summary`` in one human line (``demo``), in the words of
    :func:`closing_summary`: ``round 2 committed in 5s: 120 attempts, 98 stored, 3 errors, 240
    new URLs`` (under 80 columns for rounds of up to ~100,000 attempts)."""
    errors = sum(int(v) for v in (summary.get("errors") or {}).values())
    return (f"round {summary.get('round')} committed in {duration(summary.get('elapsed_s'))}: "
            f"{counted(int(summary.get('attempts', 0)), 'attempts')}, "
            f"{int(summary.get('stored', 0)):,} stored, {counted(errors, 'errors')}, "
            f"{counted(int(summary.get('new_urls', 0)), 'new URLs')}")  # fmt: skip


def counted(n: int, noun: str) -> str:
    """``n`` with thousands separators and ``noun``, plural unless ``n`` is 1 (``"1 error"``,
    ``"1,200 attempts"``; a plural noun ends in "s": ``"new URLs"`` -> ``"1 new URL"``)."""
    return f"{n:,} {noun[:-1] if n == 1 and noun.endswith('s') else noun}"


def closing_summary(summaries: Sequence[Mapping[str, Any]], elapsed_s: float,
                    due: int | tuple[int, int] | None = None) -> list[str]:  # fmt: skip
    """The human summary printed on stderr at the end of ``round`` / ``crawl`` (Scrapy's stats
    dump, in a few lines): rounds and generations, attempts, responses, stored, errors by outcome,
    new URLs, pages/s over ``elapsed_s`` seconds, the URLs the last round left for later (its
    time limit; not the rounds' sum: a URL one round left, the next one selects again -- issue 34
    summed 2,017 where ``status`` counted 875 queued URLs) and, if given, ``due``: the frontier's
    URLs due at the end, as ``batchcrawl status`` counts them (``due now``;
    :func:`batchcrawl.store.status.due_urls`)."""
    if not summaries:
        return []
    total = {k: sum(int(s.get(k, 0)) for s in summaries)
             for k in ("attempts", "given_back", "responses", "stored", "new_urls")}  # fmt: skip
    total["not_fetched"] = int(summaries[-1].get("not_fetched", 0))
    errors: dict[str, int] = {}
    for s in summaries:
        for k, v in (s.get("errors") or {}).items():
            errors[k] = errors.get(k, 0) + int(v)
    first, last = summaries[0], summaries[-1]
    rounds = (f"round {first['round']}" if len(summaries) == 1
              else f"rounds {first['round']}-{last['round']}")  # fmt: skip
    # the command's time, the cluster's start included: the progress line's "committed ... in"
    # is the round's own (a trial read 5 s here against 4 s there as a contradiction)
    head = (f"batchcrawl: {rounds} committed (last generation {last['generation']}) in "
            f"{duration(elapsed_s)}, start-up included")  # fmt: skip
    why = left_for_later_why(summaries[-1:])
    if len(summaries) > 1:
        why = ", ".join(filter(None, [why, "last round"]))
    return [head, *_total_rows(total, errors, elapsed_s, why, due)]


def fetch_hint(summaries: Sequence[Mapping[str, Any]], crawl_url: str) -> str | None:
    """A line for stderr when at least half of the rounds' fetch attempts failed the same way,
    else None: no address for their host (outcome ``dns_error``: what to check, and how a web
    served on this machine, ``*.test`` hosts, is reached; issue 34: the README's crawl by hand
    gave "errors 20 (dns_error 20)" and exit 0 without a word why), or no connection
    (``network_error``: the site is down or refuses; a fresh-user trial crawled a web that had
    exited for 85 s without a word; ``host_unreachable`` URLs, given back by a host held after
    failures without an answer or an address, count with the larger of the two), or an address the address policy refuses (``refused``:
    a loopback or private address, denied by default; a fresh-user trial's first crawl of a
    site on this machine said only "refused 1"). Each says how to make those URLs due again
    (``batchcrawl requeue``) once the settings are fixed."""
    # the URLs given back count here: a down site's round is 5 attempts and 295 given back
    given = sum(int(s.get("given_back", 0)) for s in summaries)
    attempts = sum(int(s.get("attempts", 0)) for s in summaries) + given
    tried = "fetch attempts" if not given else "fetch attempts and URLs given back"
    failed = {k: sum(int((s.get("errors") or {}).get(k, 0)) for s in summaries)
              for k in ("dns_error", "network_error", "refused")}  # fmt: skip
    # given back by hosts held after such failures: they count with the larger kind (a summary
    # older than ``given_back`` has them among its errors)
    held = sum(int((s.get("outcomes") or s.get("errors") or {}).get("host_unreachable", 0))
               for s in summaries)  # fmt: skip
    failed[max(("network_error", "dns_error"), key=lambda k: failed[k])] += held
    kind, n = max(failed.items(), key=lambda kv: kv[1])
    if not n or 2 * n < attempts:
        return None
    requeued = "--status refused" if kind == "refused" else "--status error --status gone"
    again = f"; then make those URLs due again at once: batchcrawl requeue {crawl_url} {requeued}"
    if kind == "refused":
        return (
            f"batchcrawl: hint: {n:,} of {attempts:,} {tried} were refused by the address "
            "policy (refused: the host's address is in network.deny_networks; loopback and "
            "private networks are denied by default). To crawl a site on this machine or a "
            "private network, list its network in network.allow_networks (as configs/"
            f"local-web.toml does) in {crawl_url}/crawl.toml" + again
        )
    if kind == "network_error":
        return (
            f"batchcrawl: hint: {n:,} of {attempts:,} {tried} got no answer from their "
            "host (network_error: connection refused, reset or timed out; host_unreachable: "
            "not tried, its host held after such failures): check that the sites "
            "are up and reachable from this machine (a web served here, scripts/"
            "serve_sample_web.py, ends with its --seconds); each failed URL is retried after "
            "frontier.retry_backoff_s (doubled at each retry, frontier.max_retries times); a "
            "host that does not answer politeness.unreachable_failures times in a row is held "
            f"(batchcrawl sql {crawl_url} --query held-hosts), its other URLs waiting uncharged until "
            "it answers again"
        )
    return (
        f"batchcrawl: hint: {n:,} of {attempts:,} {tried} found no address for their host "
        "(dns_error): check the seed URLs' host names and this machine's DNS. A web served on "
        "this machine (scripts/serve_sample_web.py: *.test hosts) needs the [network] settings "
        "of configs/local-web.toml (network.resolve): give that file at init (batchcrawl init "
        f"CRAWL --config configs/local-web.toml), or copy its [network] table into "
        f"{crawl_url}/crawl.toml" + again
    )


def left_for_later_why(summaries: Sequence[Mapping[str, Any]]) -> str:
    """Why rounds left URLs of their fetch lists for later, from their summaries: the fetch time
    limit (``time_limit_hit``), a shard's slow tail cut (``shards_tail_cut``), or, in summaries
    committed before issue 30 retired it, the shard grace (``shards_ended_early``); several joined
    by commas."""
    reasons = [
        why
        for key, why in (
            ("time_limit_hit", "time limit"),
            ("shards_tail_cut", "slow tail cut"),
            ("shards_ended_early", "shard grace"),
        )  # fmt: skip
        if any(s.get(key) for s in summaries if s.get("not_fetched"))
    ]
    if reasons or not any(s.get("not_fetched") for s in summaries):
        return ", ".join(reasons)
    return "fetch ended"  # summaries of a version that did not record why


def stream_closing_summary(summary: Mapping[str, Any],
                           due: int | tuple[int, int] | None = None) -> list[str]:  # fmt: skip
    """The human summary of a stream's JSON ``summary`` (:func:`batchcrawl.stream.run_stream`),
    in the lines :func:`closing_summary` prints for rounds, headed by why the stream stopped, and,
    if given, ``due``: the frontier's URLs due at the end, as ``batchcrawl status`` counts them
    ("left for later" counts only what the shards held unfetched at the stop; a fresh-user
    trial read 9,456 there against 12,562 queued)."""
    first, last = summary["rounds"]
    elapsed = float(summary.get("elapsed_s", 0.0))
    batches = f"micro-batch {first}" if first == last else f"micro-batches {first}-{last}"
    n = int(summary["checkpoints"])
    head = (f"batchcrawl: stream stopped by {summary['stopped_by']}: {batches}, {n} "
            f"checkpoint{'' if n == 1 else 's'} (last generation {summary['generation']}) in "
            f"{duration(elapsed)}")  # fmt: skip
    total = {k: int(summary.get(k, 0)) for k in
             ("attempts", "given_back", "responses", "stored", "new_urls", "not_fetched")}  # fmt: skip
    errors = dict(summary.get("errors") or {})
    return [head, *_total_rows(total, errors, elapsed, "queued in the shards at the stop", due)]


def _total_rows(total: Mapping[str, int], errors: Mapping[str, int], elapsed_s: float,
                left_why: str, due: int | tuple[int, int] | None) -> list[str]:  # fmt: skip
    """The two lines under a closing summary's headline: what was fetched, and what is left (issue
    34: at most three lines in all; eight before, one per count)."""
    by = ", ".join(f"{k} {v:,}" for k, v in sorted(errors.items(), key=lambda kv: -kv[1]))
    rate = total["attempts"] / elapsed_s if elapsed_s > 0 else 0.0
    done = (f"  {counted(total['attempts'], 'attempts')} ({rate:,.1f}/s), "
            f"{counted(total['responses'], 'responses')}, {total['stored']:,} stored, "
            f"{counted(sum(errors.values()), 'errors')}" + (f" ({by})" if by else "")
            + (f", {total['given_back']:,} given back by held hosts"
               if total.get("given_back") else "")
            + f", {counted(total['new_urls'], 'new URLs')}")  # fmt: skip
    left = f"  left for later {total['not_fetched']:,}" + (f" ({left_why})" if left_why else "")
    if due is not None:  # with the URLs due on held hosts, which wait for the hold's end
        n, held = due if isinstance(due, tuple) else (due, 0)
        on_held = ("all" if held == n else f"{held:,}") + " on held hosts, " if held else ""
        left += f"; due now {n:,} ({on_held}batchcrawl status)"
    return [done, left]
