"""The plots of the crawl report in page order: :data:`FIGURES` gives each one's key, title and the
one-line reading guide shown above it; :func:`draw` returns every figure as inline SVG. The plots
themselves are in :mod:`~batchcrawl.report.crawl_plots` and :mod:`~batchcrawl.report.host_plots`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from batchcrawl.report import plots
from batchcrawl.report.crawl_plots import frontier, rounds, storage, timeline
from batchcrawl.report.data import ReportData
from batchcrawl.report.host_plots import depth, hosts, politeness, responses, robots
from batchcrawl.report.text_plots import languages


@dataclass(frozen=True)
class Drawn:
    """One figure of the report: ``key`` (HTML id ``fig-KEY``), title, reading guide, SVG text."""

    key: str
    title: str
    guide: str
    svg: str


#: ``(key, title, reading guide, function)`` of every figure, in page order.
FIGURES: tuple[tuple[str, str, str, Any], ...] = (
    ("rounds", "Rounds: speed and failures",
     "Responses per second of each round's fetch phase (of a stream's micro-batch: since the one "
     "before), and its failed attempts by outcome.", rounds),
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
    ("languages", "Languages of the extracted text",
     "Pages with text per language (CLD2, ISO 639-1), from batchcrawl extract; empty until it "
     "has run.", languages),
)  # fmt: skip


def draw(d: ReportData) -> list[Drawn]:
    """Every figure of :data:`FIGURES` drawn from ``d``, as inline SVG, in page order."""
    out = []
    with plots.style():
        for key, title, guide, make in FIGURES:
            out.append(Drawn(key, title, guide, plots.svg(make(d))))
    return out
