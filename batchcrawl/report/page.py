"""The crawl report's HTML page: one self-contained file (inline CSS and SVG, no script, no
external resource), so it opens anywhere without a network."""

from __future__ import annotations

from html import escape

from batchcrawl.report.crawl_plots import stream_windows
from batchcrawl.report.data import ReportData
from batchcrawl.report.figures import Drawn
from batchcrawl.report.plots import human_bytes

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; color: #212121; margin: 0; background: #fafafa; }
main { max-width: 960px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 2px; }
h2 { font-size: 17px; margin: 0 0 2px; }
.meta { color: #616161; margin: 0 0 12px; overflow-wrap: anywhere; }
.cards { display: flex; flex-wrap: wrap; gap: 8px; margin: 0 0 12px; padding: 0; }
.cards li { list-style: none; background: #fff; border: 1px solid #e0e0e0; border-radius: 6px;
            padding: 6px 12px; min-width: 96px; }
.cards b { display: block; font-size: 18px; }
nav a { margin-right: 10px; white-space: nowrap; }
section.plot { background: #fff; border: 1px solid #e0e0e0; border-radius: 6px;
               padding: 12px 16px; margin: 16px 0; }
section.plot p { color: #616161; margin: 0 0 6px; }
section.plot svg { display: block; width: 100%; height: auto; }
"""


def _cards(d: ReportData) -> list[tuple[str, str]]:
    t = d.tables
    attempts = sum(r["attempts"] for r in t["rounds"])
    ok = sum(r["ok"] for r in t["rounds"])
    failed = sum(r["failed"] for r in t["rounds"])
    urls = sum(r["urls"] for r in t["status-counts"])
    warc = sum(r["warc_bytes"] for r in t["bytes-by-round"])
    micro = len(stream_windows(d))  # a stream's micro-batches are rounds of the tables too
    batch = len(t["rounds"]) - micro
    return [
        *((("rounds", str(batch)),) if batch or not micro else ()),
        *((("stream micro-batches", str(micro)),) if micro else ()),
        ("fetch attempts", f"{attempts:,}"),
        ("pages ok", f"{ok:,}"),
        # the rest of the attempts, so the cards add up (a fresh-user trial: "178 attempts / 90
        # pages ok / 0 failed" after a recrawl of 304s)
        *(
            (("redirects, not modified", f"{attempts - ok - failed:,}"),)
            if attempts - ok - failed
            else ()
        ),
        ("failed", f"{failed:,}"),
        ("known URLs", f"{urls:,}"),
        ("WARC stored", human_bytes(warc)),
        # robots.txt outages and rate limits (batchcrawl.fetch.holds), by reason
        *((f"held: {why}", f"{n:,}") for why, n in _held(t.get("held-hosts", [])).items()),
    ]


def _last(d: ReportData) -> str:
    """The last round of ``d``, named a micro-batch when a stream took it."""
    return f"{'micro-batch' if d.round in stream_windows(d) else 'round'} {d.round}"


def _held(rows: list[dict]) -> dict[str, int]:
    """Hosts held, by ``held_reason`` (rows of the ``held-hosts`` query)."""
    out: dict[str, int] = {}
    for r in rows:
        out[r["held_reason"]] = out.get(r["held_reason"], 0) + 1
    return out


def render(d: ReportData, drawn: list[Drawn]) -> str:
    """The report page for ``d`` with the ``drawn`` figures, as HTML text.

    Each figure is a ``<section class="plot" id="fig-KEY">`` holding its title, reading guide and
    inline ``<svg>``.
    """
    cards = "".join(f"<li><b>{escape(v)}</b>{escape(k)}</li>" for k, v in _cards(d))
    nav = " ".join(f'<a href="#fig-{f.key}">{escape(f.title)}</a>' for f in drawn)
    sections = "\n".join(
        f'<section class="plot" id="fig-{f.key}"><h2>{escape(f.title)}</h2>'
        f"<p>{escape(f.guide)}</p>\n{f.svg}</section>"
        for f in drawn
    )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>batchcrawl report: {escape(d.crawl)}</title><style>{_CSS}</style></head>\n"
        f"<body><main><h1>Crawl report</h1>"
        f'<p class="meta">{escape(d.crawl)} · generation {d.generation} · {_last(d)} · '
        f"committed {escape(d.created)}</p>"
        f'<ul class="cards">{cards}</ul><nav>{nav}</nav>\n{sections}\n</main></body></html>\n'
    )
