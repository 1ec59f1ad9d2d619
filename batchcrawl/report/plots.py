"""Matplotlib plumbing of the crawl report: a figure, its SVG text, colours, number formats.

Figures are made with :class:`matplotlib.figure.Figure` directly (no ``pyplot``, so no global
state and no GUI backend) and written as SVG with text kept as text, to be inlined in the HTML.
"""

from __future__ import annotations

import io
from typing import Any

from matplotlib.figure import Figure

#: Width of every figure, inches (rendered at 100 % of the page column).
WIDTH_IN = 9.0
#: rcParams of every figure: SVG text stays text, ids are stable, no creation date.
RC = {
    "svg.fonttype": "none",
    "svg.hashsalt": "batchcrawl",
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
#: Colour of each fetch outcome (``batchcrawl.records.Outcome`` values); others get ``OTHER``.
OUTCOME_COLORS = {
    "ok": "#2e7d32",
    "truncated": "#81c784",
    "redirect": "#1565c0",
    "redirect_loop": "#0d47a1",
    "not_modified": "#64b5f6",
    "gone": "#ef6c00",
    "http_error": "#ffa726",
    "server_error": "#c62828",
    "network_error": "#8e0000",
    "dns_error": "#6d4c41",
    "robots_denied": "#6a1b9a",
    "robots_unavailable": "#ba68c8",
    "host_unreachable": "#d7a4df",
    "rate_limited": "#e57373",
    "refused": "#424242",
    "not_fetched": "#bdbdbd",
}
#: Colour of each frontier status.
STATUS_COLORS = {
    "queued": "#90caf9",
    "fetched": "#2e7d32",
    "redirect": "#1565c0",
    "gone": "#ef6c00",
    "error": "#c62828",
    "robots_denied": "#6a1b9a",
    "filtered": "#9e9e9e",
    "refused": "#424242",
}
OTHER = "#78909c"
#: Main colour for single-series plots, and the colour of failures.
MAIN = "#1565c0"
BAD = "#c62828"


def style():
    """Context manager applying :data:`RC` while figures are made and saved."""
    import matplotlib

    return matplotlib.rc_context(RC)


#: Counts spanning more than this ratio (largest / smallest non-zero) are drawn on a log scale.
LOG_RATIO = 20


def counts_scale(ax: Any, counts: list[int], axis: str) -> str:
    """Put ``ax``'s count ``axis`` (``"x"`` or ``"y"``) on a log scale when ``counts`` span more
    than :data:`LOG_RATIO`, so small bars stay visible; returns the title suffix that says so
    (``" (log scale)"``) or ``""``."""
    positive = [c for c in counts if c and c > 0]
    if not positive or max(positive) <= LOG_RATIO * min(positive):
        return ""
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    return " (log scale)"


def headroom(ax: Any, top: float, share: float = 0.08) -> None:
    """Let ``ax``'s y axis end ``share`` above ``top`` (the tallest bar), so that no bar touches
    the frame (a fresh-user trial, issue 34: the integer tick locator ended the axis at the
    tallest bar, which looked clipped). Nothing for ``top <= 0``."""
    if top > 0:
        ax.set_ylim(0, top * (1 + share))


def new_figure(rows: int = 1, cols: int = 1, height_in: float = 3.4) -> tuple[Figure, Any]:
    """A figure of ``rows`` x ``cols`` axes, :data:`WIDTH_IN` wide and ``height_in`` inches high.

    Returns ``(figure, axes)``; ``axes`` is one Axes for 1 x 1, else a numpy array of them. Call
    inside :func:`style` so the figure gets the report's look.
    """
    fig = Figure(figsize=(WIDTH_IN, height_in), layout="constrained")
    return fig, fig.subplots(rows, cols, squeeze=True)


def svg(fig: Figure) -> str:
    """The figure as an ``<svg>`` element (no XML prolog, no DOCTYPE), ready to inline in HTML."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]


def no_data(ax, message: str) -> None:
    """Mark an empty plot: the axes hidden, ``message`` in their middle."""
    ax.set_axis_off()
    ax.text(
        0.5,
        0.5,
        f"no data: {message}",
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="#616161",
    )


def human_bytes(n: float) -> str:
    """``1536`` -> ``'1.5 KiB'``: bytes with a binary prefix."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def byte_unit(largest: float) -> tuple[float, str]:
    """``(divisor, unit)`` to show byte counts up to ``largest`` on an axis: ``(1048576, 'MiB')``."""
    scale = 1.0
    for unit in ("B", "KiB", "MiB", "GiB"):
        if largest < 1024 * scale:
            return scale, unit
        scale *= 1024
    return scale, "TiB"


def shorten(text: str, width: int = 28) -> str:
    """``text`` cut to ``width`` characters with an ellipsis (long host names on an axis)."""
    return text if len(text) <= width else text[: width - 1] + "…"
