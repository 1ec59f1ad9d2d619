"""The plots of the crawl report, one function per figure, each from :class:`ReportData` rows.

:data:`FIGURES` lists them in page order with the title and the one-line reading guide shown
above each; :func:`draw` returns every figure as inline SVG.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from batchcrawl.report import plots
from batchcrawl.report.data import ReportData

_GOOD = ("ok", "truncated", "redirect", "not_modified")


@dataclass(frozen=True)
class Drawn:
    """One figure of the report: ``key`` (HTML id ``fig-KEY``), title, reading guide, SVG text."""

    key: str
    title: str
    guide: str
    svg: str


def _round_rates(d: ReportData) -> dict[int, float]:
    """Responses per second of each round's fetch phase (manifest), else of its request span."""
    rates = {}
    for r in d.tables["rounds"]:
        span = r["span_s"] or 0.0
        rates[r["round"]] = (r["attempts"] / span) if span > 0 else 0.0
    for s in d.rounds:
        fetch_s = (s.get("seconds_by_step") or {}).get("fetch")
        if fetch_s and s.get("pages") is not None:
            rates[s["round"]] = s["pages"] / fetch_s
    return rates


def rounds(d: ReportData) -> Figure:
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
    if per:
        ax2.legend(fontsize=7, loc="upper left")
    for ax in (ax1, ax2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=ax is ax2))
    return fig


def timeline(d: ReportData) -> Figure:
    fig, ax = plots.new_figure()
    rows = d.tables["fetch-timeline"]
    if not rows:
        plots.no_data(ax, "no fetch attempts yet")
        return fig
    by_round = defaultdict(list)
    for r in rows:
        by_round[r["round"]].append(r)
    for rnd, rs in sorted(by_round.items()):
        line = ax.plot([r["second"] for r in rs], [r["attempts"] for r in rs], ".-",
                       label=f"round {rnd}")  # fmt: skip
        failed = [r for r in rs if r["failed"]]
        if failed:
            ax.plot([r["second"] for r in failed], [r["failed"] for r in failed], "x",
                    color=line[0].get_color())  # fmt: skip
    ax.set(xlabel="seconds since the round's first request", ylabel="attempts / s")
    ax.legend(fontsize=7, ncols=min(4, len(by_round)), title="line: attempts, x: failed")
    return fig


def frontier(d: ReportData) -> Figure:
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
    ax.legend(fontsize=7, loc="upper left", reverse=True)
    return fig


def responses(d: ReportData) -> Figure:
    fig, (ax1, ax2) = plots.new_figure(1, 2)
    codes = d.tables["http-status"]
    if codes:
        labels = ["none" if r["fetch_status"] is None else str(r["fetch_status"]) for r in codes]
        colors = [_status_color(r["fetch_status"]) for r in codes]
        ax1.bar(labels, [r["attempts"] for r in codes], color=colors)
        ax1.set(title="HTTP status", xlabel="status (none: no response)", ylabel="attempts")
    else:
        plots.no_data(ax1, "no fetch attempts yet")
    mimes = d.tables["mime-types"][:12][::-1]
    if mimes:
        ax2.barh([plots.shorten(r["mime_type"]) for r in mimes], [r["responses"] for r in mimes],
                 color=plots.MAIN)  # fmt: skip
        ax2.set(title="MIME types", xlabel="responses")
    else:
        plots.no_data(ax2, "no responses yet")
    return fig


def _status_color(code: int | None) -> str:
    if code is None:
        return plots.OUTCOME_COLORS["network_error"]
    return {2: "#2e7d32", 3: "#1565c0", 4: "#ef6c00", 5: "#c62828"}.get(code // 100, plots.OTHER)


def hosts(d: ReportData) -> Figure:
    fig, (ax1, ax2) = plots.new_figure(1, 2, height_in=4.2)
    top = d.tables["top-hosts"][:15][::-1]
    if top:
        names = [plots.shorten(r["host"]) for r in top]
        ax1.barh(names, [r["ok"] for r in top], color=plots.OUTCOME_COLORS["ok"], label="ok")
        ax1.barh(names, [r["attempts"] - r["ok"] for r in top], left=[r["ok"] for r in top],
                 color=plots.OTHER, label="other")  # fmt: skip
        ax1.set(title="top hosts by fetch attempts", xlabel="attempts")
        ax1.legend(fontsize=7, loc="lower right")
    else:
        plots.no_data(ax1, "no fetch attempts yet")
    bad = d.tables["top-error-hosts"][:15][::-1]
    if bad:
        colors = [plots.OUTCOME_COLORS.get(r["top_outcome"], plots.OTHER) for r in bad]
        ax2.barh([plots.shorten(r["host"]) for r in bad], [r["failed"] for r in bad], color=colors)
        ax2.set(title="top hosts by failed attempts", xlabel="failed")
        kinds = sorted({r["top_outcome"] for r in bad})
        ax2.legend(handles=[Patch(color=plots.OUTCOME_COLORS.get(k, plots.OTHER), label=k)
                            for k in kinds], fontsize=7, loc="lower right",
                   title="most common", title_fontsize=7)  # fmt: skip
    else:
        plots.no_data(ax2, "no failed attempts")
    return fig


def depth(d: ReportData) -> Figure:
    fig, ax = plots.new_figure(height_in=3.0)
    rows = d.tables["depth-histogram"]
    if not rows:
        plots.no_data(ax, "the frontier is empty")
        return fig
    xs = [r["depth"] for r in rows]
    ax.bar(xs, [r["urls"] for r in rows], color="#90caf9", label="known URLs")
    ax.bar(xs, [r["fetched"] for r in rows], color=plots.OUTCOME_COLORS["ok"], width=0.5,
           label="fetched")  # fmt: skip
    ax.set(xlabel="depth (link hops from a seed)", ylabel="URLs")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7)
    return fig


def politeness(d: ReportData) -> Figure:
    fig, ax = plots.new_figure(height_in=3.6)
    rows = d.tables["host-intervals"]
    if not rows:
        plots.no_data(ax, "no host was fetched twice in a round")
        return fig
    rows = rows[:30]
    names = [plots.shorten(r["host"], 20) for r in rows]
    xs = range(len(rows))
    ax.bar(xs, [r["median_gap_s"] for r in rows], color="#90caf9", label="median gap")
    ax.plot(xs, [r["min_gap_s"] for r in rows], "v", color=plots.MAIN, label="shortest gap")
    delays = [r["host_delay_s"] for r in rows]
    if any(v is not None for v in delays):
        ax.plot(xs, [v if v is not None else float("nan") for v in delays], "_", markersize=18,
                color=plots.BAD, mew=2, label="host's effective delay")  # fmt: skip
    ax.axhline(d.host_delay_s, color=plots.BAD, ls="--", lw=1,
               label=f"configured delay {d.host_delay_s:g} s")  # fmt: skip
    ax.set_xticks(list(xs), names, rotation=35, ha="right", fontsize=7)
    ax.set(ylabel="seconds between request starts")
    ax.legend(fontsize=7, loc="upper right")
    return fig


def robots(d: ReportData) -> Figure:
    fig, (ax1, ax2) = plots.new_figure(1, 2, height_in=2.8)
    for ax, counted, title, unit, empty in (
        (ax1, "hosts", "robots.txt per host", "hosts", "no host state yet"),
        (
            ax2,
            "urls",
            "URLs not fetched because of robots.txt",
            "URLs",
            "robots.txt kept no URL out",
        ),
    ):
        rows = [r for r in d.tables["robots-outcomes"] if r["counted"] == counted and r["n"]]
        if not rows:
            plots.no_data(ax, empty)
            continue
        rows = rows[::-1]
        ax.barh([r["outcome"] for r in rows], [r["n"] for r in rows],
                color=[_robots_color(r["outcome"]) for r in rows])  # fmt: skip
        ax.set(title=title, xlabel=unit)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def _robots_color(outcome: str) -> str:
    if outcome.startswith("2xx") or outcome.startswith("4xx"):
        return plots.OUTCOME_COLORS["ok"]
    if outcome in plots.OUTCOME_COLORS:
        return plots.OUTCOME_COLORS[outcome]
    return plots.BAD if "disallow" in outcome else plots.OTHER


def storage(d: ReportData) -> Figure:
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
    ax.legend(fontsize=7, loc="upper left")
    return fig


#: ``(key, title, reading guide, function)`` of every figure, in page order.
FIGURES: tuple[tuple[str, str, str, Any], ...] = (
    ("rounds", "Rounds: speed and failures",
     "Responses per second of each round's fetch phase, and its failed attempts by outcome.", rounds),
    ("timeline", "Fetch attempts over time within each round",
     "A long thin tail is a few slow or Crawl-delay hosts holding the round open.", timeline),
    ("frontier", "Frontier by status per generation",
     "Known URLs after each committed step; queued is the work still to do.", frontier),
    ("responses", "HTTP status and MIME types", "What the servers answered.", responses),
    ("hosts", "Top hosts", "Where the pages came from, and where the failures are.", hosts),
    ("depth", "Depth", "Known and fetched URLs by link hops from a seed.", depth),
    ("politeness", "Politeness: gaps between requests to one host",
     "Per host (most fetched first): gaps between request starts within a round. "
     "No gap may fall below the host's effective delay.", politeness),
    ("robots", "robots.txt", "Outcome of each host's last robots.txt fetch (RFC 9309), and the "
     "URLs it kept from being fetched.", robots),
    ("storage", "Bytes stored", "Payload and WARC bytes written per round.", storage),
)  # fmt: skip


def draw(d: ReportData) -> list[Drawn]:
    """Every figure of :data:`FIGURES` drawn from ``d``, as inline SVG, in page order."""
    out = []
    with plots.style():
        for key, title, guide, make in FIGURES:
            out.append(Drawn(key, title, guide, plots.svg(make(d))))
    return out
