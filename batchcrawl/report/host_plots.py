"""Plots of what the servers answered and how they were treated: HTTP status and MIME types, top
hosts, depth, politeness gaps, robots.txt. One function per figure, each from
:class:`~batchcrawl.report.data.ReportData` rows, returning a matplotlib Figure.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from batchcrawl.report import plots
from batchcrawl.report.data import ReportData


def responses(d: ReportData) -> Figure:
    """Fetch attempts by HTTP status (none: no response) and responses by MIME type (top 12), each
    bar labelled with its count; on a log scale when the counts span more than
    :data:`~batchcrawl.report.plots.LOG_RATIO` (issue 34: a type with 3 responses beside one with
    1,200 was invisible)."""
    fig, (ax1, ax2) = plots.new_figure(1, 2)
    codes = d.tables["http-status"]
    if codes:
        labels = ["none" if r["fetch_status"] is None else str(r["fetch_status"]) for r in codes]
        colors = [_status_color(r["fetch_status"]) for r in codes]
        counts = [r["attempts"] for r in codes]
        bars = ax1.bar(labels, counts, color=colors)
        log = plots.counts_scale(ax1, counts, "y")
        ax1.bar_label(bars, labels=[f"{n:,}" for n in counts], fontsize=7, padding=1)
        ax1.set(title="HTTP status" + log, xlabel="status (none: no response)", ylabel="attempts")
    else:
        plots.no_data(ax1, "no fetch attempts yet")
    mimes = d.tables["mime-types"][:12][::-1]
    if mimes:
        counts = [r["responses"] for r in mimes]
        bars = ax2.barh([plots.shorten(r["mime_type"]) for r in mimes], counts, color=plots.MAIN)
        log = plots.counts_scale(ax2, counts, "x")
        ax2.bar_label(bars, labels=[f"{n:,}" for n in counts], fontsize=7, padding=2)
        ax2.set(title="MIME types" + log, xlabel="responses")
    else:
        plots.no_data(ax2, "no responses yet")
    return fig


def _status_color(code: int | None) -> str:
    if code is None:
        return plots.OUTCOME_COLORS["network_error"]
    return {2: "#2e7d32", 3: "#1565c0", 4: "#ef6c00", 5: "#c62828"}.get(code // 100, plots.OTHER)


def hosts(d: ReportData) -> Figure:
    """The 15 hosts with most fetch attempts (ok, redirect or 304, failed) and the 15 with most failed
    attempts, coloured by their most common failure."""
    fig, (ax1, ax2) = plots.new_figure(1, 2, height_in=4.2)
    top = d.tables["top-hosts"][:15][::-1]
    if top:
        names = [plots.shorten(r["host"]) for r in top]
        # ok, then redirects and 304s (answers, not failures: a fresh-user trial's recrawl of
        # 304s showed as "other"), then failed
        left = [0] * len(top)
        for label, ys, color in (
            ("ok", [r["ok"] for r in top], plots.OUTCOME_COLORS["ok"]),
            ("redirect, not modified", [r["attempts"] - r["ok"] - r["failed"] for r in top],
             plots.OUTCOME_COLORS.get("not_modified", plots.OTHER)),
            ("failed", [r["failed"] for r in top], plots.OUTCOME_COLORS["server_error"]),
        ):  # fmt: skip
            if any(ys):
                ax1.barh(names, ys, left=left, color=color, label=label)
                left = [a + b for a, b in zip(left, ys, strict=True)]
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
    """Known and fetched URLs by depth (link hops from a seed)."""
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
    """Per host (30 most fetched): median and shortest gap between request starts within a
    round, seconds, against the host's effective delay and the configured ``host_delay_s``."""
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
    # above the axes, not over them: it covered the tallest bar (issue 34)
    ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=4, frameon=False)
    return fig


def robots(d: ReportData) -> Figure:
    """Hosts by the outcome of their last robots.txt fetch, and URLs robots.txt kept out
    (denied, or robots.txt unavailable)."""
    fig, (ax1, ax2) = plots.new_figure(1, 2, height_in=2.8)
    for ax, counted, title, unit, empty in (
        (ax1, "hosts", "robots.txt per host", "hosts", "no host state yet"),
        (
            ax2,
            "urls",
            "URLs robots.txt kept out",  # with " (log scale)": the longer title was cut
            "URLs",
            "robots.txt kept no URL out",
        ),
    ):
        rows = [r for r in d.tables["robots-outcomes"] if r["counted"] == counted and r["n"]]
        if not rows:
            plots.no_data(ax, empty)
            continue
        rows = rows[::-1]
        counts = [r["n"] for r in rows]
        bars = ax.barh([r["outcome"] for r in rows], counts,
                       color=[_robots_color(r["outcome"]) for r in rows])  # fmt: skip
        # one robots_unavailable URL beside 130 denied ones was a bar no one could see
        log = plots.counts_scale(ax, counts, "x")
        ax.bar_label(bars, labels=[f"{n:,}" for n in counts], fontsize=7, padding=2)
        ax.set(title=title + log, xlabel=unit)
        if not log:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def _robots_color(outcome: str) -> str:
    if outcome.startswith("2xx") or outcome.startswith("4xx"):
        return plots.OUTCOME_COLORS["ok"]
    if outcome in plots.OUTCOME_COLORS:
        return plots.OUTCOME_COLORS[outcome]
    return plots.BAD if "disallow" in outcome else plots.OTHER
