"""Plots of the crawl's progress: rounds (speed, failures), attempts over time within a round, the
frontier by status per generation, bytes stored. One function per figure, each from
:class:`~batchcrawl.report.data.ReportData` rows, returning a matplotlib Figure.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from batchcrawl.report import plots
from batchcrawl.report.data import ReportData

#: Outcomes that are not failures (the ``failed`` columns of the named queries agree).
_GOOD = ("ok", "truncated", "redirect", "not_modified")


def _start_s(summary: dict) -> float | None:
    """Epoch seconds a micro-batch started (its take, which ends the rows it holds): its commit
    time ``created`` less its ``elapsed_s`` (counted from the take to its summary, written just
    before the commit)."""
    created, elapsed = summary.get("created"), summary.get("elapsed_s")
    if not created or elapsed is None:
        return None
    return dt.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() - elapsed


def _same_stream(before: dict | None, after: dict) -> bool:
    """Whether the micro-batch ``after`` was taken by the stream that took ``before``, the
    generation committed just before it: ``before`` left WARC files open (a stream's last
    micro-batch closes them) and ``after`` is no rerun after a crash (a new stream)."""
    return (before is not None and before.get("mode") == "stream"
            and bool(before.get("warc_open")) and not after.get("rerun_after_crash"))  # fmt: skip


def stream_windows(d: ReportData) -> dict[int, float]:
    """Wall seconds each stream micro-batch with requests covered, by round.

    A micro-batch holds the rows fetched from the previous micro-batch's take to its own, so its
    window runs from the previous one's start to its own (:func:`_start_s`, from the manifests),
    when the generation before it is a micro-batch of the same stream (:func:`_same_stream`).
    Otherwise -- the first micro-batch of a stream, or the manifest before it expired -- it is
    :attr:`~batchcrawl.report.data.ReportData.flush_interval_s`, the interval a micro-batch is
    given. Never shorter than the span of its own requests (``rounds.span_s``).

    Micro-batches are the rounds whose kept manifest says ``mode = "stream"`` and the rounds
    with requests, without a kept manifest and without fetch lists (a stream writes none).
    """
    by_gen = {s.get("generation"): s for s in d.rounds}
    by_round = {s.get("round"): s for s in d.rounds}
    windows = {}
    for r in d.tables["rounds"]:
        s = by_round.get(r["round"])
        if s is None and r["round"] in d.fetchlist_rounds:
            continue  # a batch round whose manifest expired
        if s is not None and s.get("mode") != "stream":
            continue
        window = d.flush_interval_s
        if s is not None and _same_stream(by_gen.get(s["generation"] - 1), s):
            start, before = _start_s(s), _start_s(by_gen[s["generation"] - 1])
            if start is not None and before is not None and start > before:
                window = start - before
        windows[r["round"]] = max(window, r["span_s"] or 0.0)
    return windows


def _round_rates(d: ReportData) -> dict[int, float]:
    """Responses per second of each round (1/s): of a batch round's fetch phase (manifest), else
    of its request span; of a stream micro-batch over the wall time it covered
    (:func:`stream_windows`), never over its own request span: a micro-batch of 4 requests to
    fresh hosts spans 3 ms, and was drawn at 1,333/s beside real rates of ~17/s (a user's trial).
    Responses from the manifest, else attempts (``rounds``)."""
    rates = {}
    for r in d.tables["rounds"]:
        span = r["span_s"] or 0.0
        rates[r["round"]] = (r["attempts"] / span) if span > 0 else 0.0
    summaries = {}
    for s in d.rounds:
        summaries[s.get("round")] = s
        fetch_s = (s.get("seconds_by_step") or {}).get("fetch")
        if fetch_s and s.get("responses") is not None:
            rates[s["round"]] = s["responses"] / fetch_s
    attempts = {r["round"]: r["attempts"] for r in d.tables["rounds"]}
    for rnd, window in stream_windows(d).items():
        pages = summaries.get(rnd, {}).get("responses")
        rates[rnd] = (attempts[rnd] if pages is None else pages) / window if window > 0 else 0.0
    return rates


def rounds(d: ReportData) -> Figure:
    """Per round: responses per second of its fetch phase (1/s; from the manifest, else over
    the span of its request starts), of a stream micro-batch over the wall time it covered
    (:func:`stream_windows`); and its failed attempts stacked by outcome."""
    fig, (ax1, ax2) = plots.new_figure(1, 2)
    rates = _round_rates(d)
    if not rates:
        plots.no_data(ax1, "no round fetched yet")
        plots.no_data(ax2, "no round fetched yet")
        return fig
    xs = sorted(rates)
    ax1.bar(xs, [rates[x] for x in xs], color=plots.MAIN)
    ax1.set(title="pages/s per round", xlabel="round", ylabel="responses / s")
    per = defaultdict(dict)
    for r in d.tables["outcomes-by-round"]:
        if r["outcome"] not in _GOOD:
            per[r["outcome"]][r["round"]] = r["attempts"]
    bottom = [0] * len(xs)
    for outcome in sorted(per):
        ys = [per[outcome].get(x, 0) for x in xs]
        color = plots.OUTCOME_COLORS.get(outcome, plots.OTHER)
        ax2.bar(xs, ys, bottom=bottom, label=outcome, color=color)
        bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
    ax2.set(title="failed attempts per round", xlabel="round", ylabel="attempts")
    plots.headroom(ax1, max(rates.values()))
    plots.headroom(ax2, max(bottom, default=0))
    if not per:  # a 0..1 axis with no bar said nothing (fresh-user trial)
        plots.no_data(ax2, "no failed attempts")
    if per:  # beside the axes, not over them: it covered the tallest bar (issue 34, 2nd trial)
        ax2.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=ax is ax2))
    return fig


#: Most lines of the timeline plot: more rounds (a stream's micro-batches) are grouped.
MAX_TIMELINE_LINES = 8


def round_groups(rounds: list[int], most: int = MAX_TIMELINE_LINES) -> list[list[int]]:
    """``rounds`` (sorted) in at most ``most`` groups of consecutive rounds, as equal in size as
    they can be (the earlier groups one larger)."""
    size, extra = divmod(len(rounds), most) if len(rounds) > most else (1, 0)
    groups, i = [], 0
    while i < len(rounds):
        n = size + (1 if len(groups) < extra else 0)
        groups.append(rounds[i : i + n])
        i += n
    return groups


#: A gap longer than this (seconds of wall time) between two requests breaks a timeline line.
TIMELINE_BREAK_S = 3


def time_unit(longest_s: float) -> tuple[float, str]:
    """``(divisor, unit)`` to show spans up to ``longest_s`` seconds on an axis: ``(60, 'min')``."""
    for scale, unit in ((86400.0, "days"), (3600.0, "hours"), (60.0, "min")):
        if longest_s >= 3 * scale:
            return scale, unit
    return 1.0, "s"


def timeline(d: ReportData) -> Figure:
    """Fetch attempts per second (1/s) over time; failed attempts as crosses.

    Up to :data:`MAX_TIMELINE_LINES` rounds: one line per round, against seconds since that
    round's first request, so rounds compare shape to shape. More rounds (a stream's ~1 s
    micro-batches, which shrank to dots at x = 0 on their own clocks, issue 34) are drawn against
    wall time since the crawl's first request (``crawl_second``), in that many colours of
    consecutive rounds; a line breaks where no request was made for :data:`TIMELINE_BREAK_S`.
    """
    fig, ax = plots.new_figure()
    rows = d.tables["fetch-timeline"]
    if not rows:
        plots.no_data(ax, "no fetch attempts yet")
        return fig
    by_round = defaultdict(list)
    for r in rows:
        by_round[r["round"]].append(r)
    groups = round_groups(sorted(by_round))
    wall = len(groups) < len(by_round)
    key = "crawl_second" if wall else "second"
    scale, unit = time_unit(max(r[key] for r in rows)) if wall else (1.0, "s")
    for group in groups:
        attempts: dict[int, int] = defaultdict(int)
        failed: dict[int, int] = defaultdict(int)
        for rnd in group:
            for r in by_round[rnd]:
                attempts[r[key]] += r["attempts"]
                failed[r[key]] += r["failed"]
        xs: list[float] = []
        ys: list[float] = []
        last = None
        for t in sorted(attempts):
            if last is not None and t - last > TIMELINE_BREAK_S:
                xs.append(float("nan"))
                ys.append(float("nan"))
            xs.append(t / scale)
            last = t
            ys.append(attempts[t])
        label = f"round {group[0]}" if len(group) == 1 else f"rounds {group[0]}-{group[-1]}"
        line = ax.plot(xs, ys, ".-", label=label)
        fails = [t for t in sorted(failed) if failed[t]]
        if fails:
            ax.plot([t / scale for t in fails], [failed[t] for t in fails], "x",
                    color=line[0].get_color())  # fmt: skip
    xlabel = (f"{unit} since the crawl's first request" if wall
              else "seconds since the round's first request")  # fmt: skip
    ax.set(xlabel=xlabel, ylabel="attempts / s")
    # beside the axes, not over them: it sat over a stream's last rounds at 14-24 s (issue 34)
    ax.legend(fontsize=7, title="line: attempts, x: failed", title_fontsize=7,
              loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)  # fmt: skip
    return fig


def frontier(d: ReportData) -> Figure:
    """Known URLs stacked by status after each kept generation (at most
    :data:`~batchcrawl.report.data.MAX_GENERATIONS`)."""
    fig, ax = plots.new_figure()
    gens = d.frontier_by_generation
    if not any(g["by_status"] for g in gens):
        plots.no_data(ax, "the frontier is empty")
        return fig
    statuses = sorted({s for g in gens for s in g["by_status"]},
                      key=lambda s: (list(plots.STATUS_COLORS).index(s)
                                     if s in plots.STATUS_COLORS else 99, s))  # fmt: skip
    xs = [g["generation"] for g in gens]
    bottom = [0] * len(gens)
    for status in statuses:
        ys = [g["by_status"].get(status, 0) for g in gens]
        ax.bar(xs, ys, bottom=bottom, label=status,
               color=plots.STATUS_COLORS.get(status, plots.OTHER))  # fmt: skip
        bottom = [b + y for b, y in zip(bottom, ys, strict=True)]
    ax.set(xlabel="generation", ylabel="URLs")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    # beside the axes, not over them: it covered the first bar (a fresh-user trial)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False, reverse=True)
    return fig


def storage(d: ReportData) -> Figure:
    """Payload bytes and WARC bytes written per round, and the running WARC total (axis in
    B, KiB, MiB ... whichever fits the largest value)."""
    fig, ax = plots.new_figure(height_in=3.0)
    rows = d.tables["bytes-by-round"]
    if not rows:
        plots.no_data(ax, "nothing stored yet")
        return fig
    xs = [r["round"] for r in rows]
    scale, unit = plots.byte_unit(max(max(r["content_bytes"], r["warc_bytes_total"]) for r in rows))
    ax.bar([x - 0.2 for x in xs], [r["content_bytes"] / scale for r in rows], width=0.4,
           color="#90caf9", label="payload bytes")  # fmt: skip
    ax.bar([x + 0.2 for x in xs], [r["warc_bytes"] / scale for r in rows], width=0.4,
           color=plots.MAIN, label="WARC bytes (gzip)")  # fmt: skip
    ax.plot(xs, [r["warc_bytes_total"] / scale for r in rows], "o-", color=plots.BAD,
            label="WARC bytes, running total")  # fmt: skip
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="round", ylabel=unit)
    plots.headroom(ax, max(max(r["content_bytes"], r["warc_bytes"], r["warc_bytes_total"])
                           for r in rows) / scale)  # fmt: skip
    # above the axes, not over them: it covered the tallest bar (issue 34, a fresh-user trial)
    ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=3, frameon=False)
    return fig
