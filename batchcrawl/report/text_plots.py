"""Plots of the text extracted by ``batchcrawl extract`` (issue 32): languages of the pages. One
function per figure, from :class:`~batchcrawl.report.data.ReportData` rows, returning a
matplotlib Figure."""

from __future__ import annotations

from matplotlib import colormaps
from matplotlib.figure import Figure

from batchcrawl.report import plots
from batchcrawl.report.data import ReportData

#: Languages drawn in their own colour on the per-host plot; the others are "other".
TOP_LANGUAGES = 8


def languages(d: ReportData) -> Figure:
    """Pages with extracted text per language (the first of ``content_languages``, CLD2), and
    the 15 hosts with most such pages, split by language. Before any extraction, one line of
    text in a figure as low as a line (it took 450 px to say "no data" twice: issue 34)."""
    per_language = d.tables.get("pages-per-language", [])
    if not per_language:
        fig, ax = plots.new_figure(1, 1, height_in=0.5)
        plots.no_data(ax, "no text extracted yet (run batchcrawl extract CRAWL)")
        return fig
    fig, (ax1, ax2) = plots.new_figure(1, 2, height_in=4.2)
    shown = per_language[:20][::-1]
    ax1.barh([r["language"] for r in shown], [r["pages"] for r in shown], color=plots.MAIN)
    ax1.set(title="pages per language", xlabel="pages")
    top = [r["language"] for r in per_language[:TOP_LANGUAGES]]
    per_host: dict[str, dict[str, int]] = {}
    for r in d.tables.get("languages-per-host", []):
        lang = r["language"] if r["language"] in top else "other"
        counts = per_host.setdefault(r["host"], {})
        counts[lang] = counts.get(lang, 0) + r["pages"]
    hosts = sorted(per_host, key=lambda h: (-sum(per_host[h].values()), h))[:15][::-1]
    left = [0] * len(hosts)
    colors = [colormaps["tab10"](i) for i in range(len(top))] + [plots.OTHER]
    for i, lang in enumerate([*top, "other"]):
        values = [per_host[h].get(lang, 0) for h in hosts]
        if any(values):
            ax2.barh([plots.shorten(h) for h in hosts], values, left=left, color=colors[i],
                     label=lang)  # fmt: skip
            left = [a + b for a, b in zip(left, values, strict=True)]
    ax2.set(title="top hosts by pages, per language", xlabel="pages")
    ax2.legend(fontsize=7, loc="lower right")
    return fig
