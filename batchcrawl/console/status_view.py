"""The tables ``batchcrawl status`` prints, readable in an 80-column terminal.

:func:`status_tables` turns :func:`batchcrawl.store.status.crawl_status`'s dict into rich tables:
long values (the crawl URL) wrap instead of widening the table, numbers get thousands separators,
and the generations table keeps a fixed set of short columns (per-outcome error counts are summed;
``--format json`` keeps every field). Only the newest :data:`MAX_GENERATIONS` generations are shown.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from rich import box
from rich.table import Table

from batchcrawl.records import GIVEN_BACK
from batchcrawl.store.crawldir import STREAM_STEP

#: Generations shown in the table (the newest); older ones are counted in its caption.
MAX_GENERATIONS = 20
#: ``(header, key)`` of the generations table's columns, in order.
GENERATION_COLUMNS = (
    ("gen", "generation"),
    ("round", "round"),
    ("step", "step"),
    ("committed", "created"),
    ("stored", "stored"),
    ("errors", "errors"),
    ("new URLs", "new_urls"),
    ("secs", "elapsed_s"),
)


def _due(urls: dict[str, Any]) -> int | str:
    """The "due now" count, with how many of them wait for held hosts (a fresh-user trial read
    "due now 19" while rounds said nothing was due: their host was held)."""
    due, held = int(urls.get("due_now", 0)), int(urls.get("due_now_on_held_hosts", 0))
    return f"{due:,} ({held:,} on held hosts)" if held else due


def _table(title: str | None, headers: Iterable[str], numeric: Iterable[str] = ()) -> Table:
    """A compact table: no outer edge, a rule under the header, long cells fold onto new lines."""
    out = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                pad_edge=False, collapse_padding=True, min_width=len(title or ""))  # fmt: skip
    right = set(numeric)
    for h in headers:
        out.add_column(h, justify="right" if h in right else "left", overflow="fold")
    return out


def _num(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, int | float) and abs(v) >= 1_000_000:
        return _si(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def _si(v: float) -> str:
    """``123456789`` -> ``123.5M``: a count of a million or more, 4 significant digits at most
    (``G`` is 10^9, ``T`` 10^12); the exact value is in ``--format json``."""
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(v) >= div:
            return f"{v / div:.1f}{unit}"
    raise AssertionError("below a million")


def _when(iso: str | None) -> str:
    """``2026-11-30T20:23:59.990Z`` -> ``2026-11-30 20:23`` (UTC)."""
    return (iso or "").replace("T", " ")[:16]


def _errors(v: Any) -> Any:
    """A round summary's ``errors`` (outcome -> count) as one total."""
    return sum(v.values()) if isinstance(v, Mapping) else v


def _shares(title: str, header: str, counts: Mapping[str, int], unit: str) -> Table:
    total = sum(counts.values()) or 1
    t = _table(title, [header, unit, "share"], numeric=[unit, "share"])
    for k, v in counts.items():
        t.add_row(str(k), _num(v), f"{100 * v / total:.1f}%")
    return t


def _step(step: Any) -> str:
    """A generation's ``step`` as the table shows it: a stream's is a ``checkpoint`` (issue 34:
    status called a stream's checkpoints rounds)."""
    return "checkpoint" if step == STREAM_STEP else str(step or "")


def generations_table(generations: list[Mapping[str, Any]]) -> Table:
    """The newest :data:`MAX_GENERATIONS` generations, one row each, in 8 short columns; a
    round that stopped at its time limit gets ``*`` after its seconds."""
    shown = generations[-MAX_GENERATIONS:]
    hidden = len(generations) - len(shown)
    t = _table("generations", [h for h, _ in GENERATION_COLUMNS],
               numeric=["gen", "round", "stored", "errors", "new URLs", "secs"])  # fmt: skip
    for g in shown:
        secs = _num(g.get("elapsed_s")) + ("*" if g.get("time_limit_hit") else "")
        t.add_row(
            _num(g.get("generation")), _num(g.get("round")), _step(g.get("step")),
            _when(g.get("created")), _num(g.get("stored")), _num(_errors(g.get("errors"))),
            _num(g.get("new_urls")), secs,
        )  # fmt: skip
    notes = []
    if any(g.get("step") == STREAM_STEP for g in shown):
        notes.append("checkpoint: a stream's; its round is the micro-batch it ended")
    if any(g.get("time_limit_hit") for g in shown):
        notes.append("* fetch stopped at its time limit")
    if hidden:
        notes.append(f"{hidden} older generations: see --format json")
    t.caption = "\n".join(notes) or None
    t.caption_justify = "left"
    return t


def status_tables(st: Mapping[str, Any]) -> list[Table]:
    """The rich tables of ``batchcrawl status`` for ``st`` (a
    :func:`~batchcrawl.store.status.crawl_status` result), each at most 80 columns wide."""
    overview = _table(None, ["", ""])
    overview.show_header = False
    overview.add_row("crawl", str(st["crawl"]))
    gens = st.get("generations") or []
    streamed = bool(gens) and gens[-1].get("step") == STREAM_STEP
    for name, value in (
        ("generation", st["generation"]),
        ("micro-batch (stream)" if streamed else "round", st["round"]),
        ("committed", _when(st["created"]) + " UTC"),
        ("buckets", st["buckets"]),
        ("URLs", st["urls"]["total"]),
        ("due now", _due(st["urls"])),
        ("hosts", st["hosts"]["total"]),
        ("domains", st["hosts"]["domains"]),
        ("fetch attempts", st["fetched"]["attempts"]),
        *([("given back by held hosts", given)] if (given := st["fetched"].get("given_back"))
          else []),
    ):  # fmt: skip
        overview.add_row(name, _num(value))
    outcomes = st["fetched"]["by_outcome"]
    depth = _table("URLs by depth", ["depth", "URLs"], numeric=["depth", "URLs"])
    for k, v in st["depth"].items():
        depth.add_row(str(k), _num(v))
    tables = [
        overview,
        _shares("URLs by status", "status", st["urls"]["by_status"], "URLs"),
        depth,
        _shares(
            "fetch attempts by outcome",
            "outcome",
            {k: v for k, v in outcomes.items() if k not in GIVEN_BACK},
            "attempts",
        ),
    ]
    if given:  # no attempt: their own table (a trial read the shares of both as one, 1,046 of 541)
        tables.append(
            _shares(
                "URLs given back by held hosts",
                "outcome",
                {k: v for k, v in outcomes.items() if k in GIVEN_BACK},
                "URLs",
            )
        )
    rejected = st["fetched"].get("header_rejected")
    if rejected:  # values a server sent that no table keeps (batchcrawl.fetch.fields)
        tables.append(_shares("header values rejected", "header field", rejected, "responses"))
    if st.get("traps"):
        tables.append(traps_table(st["traps"]))
    if st.get("held"):
        tables.append(held_table(st["held"]))
    return [*tables, generations_table(st["generations"])]


def held_table(held: list[Mapping[str, Any]], now: datetime | None = None) -> Table:
    """Hosts held by the crawl (``hosts.held_reason``, :mod:`batchcrawl.fetch.holds`): why, how
    long since the hold began, holds in a row (``held_failures``: each failed retry doubles the
    next), until when (``*``: over at ``now``, naive UTC; the host's next fetch probes it), URLs
    waiting. (A trial read the count of holds as failures, and an ended hold as in force.)"""
    now = now or datetime.now(UTC).replace(tzinfo=None)
    t = _table(
        "held hosts", ["host", "why", "held for", "holds", "until (UTC)", "queued"],
        numeric=["held for", "holds", "queued"],
    )  # fmt: skip
    over = False
    for r in held:
        ended = datetime.fromisoformat(str(r["until"])) <= now
        over |= ended
        t.add_row(
            str(r["host"]), str(r["reason"]), f"{_num(r['outage_s'])} s", _num(r["failures"]),
            _when(r["until"]) + ("*" if ended else ""), _num(r["queued"]),
        )  # fmt: skip
    if over:
        t.caption = "* hold over: the host's next fetch probes it"
        t.caption_justify = "left"
    return t


def traps_table(traps: list[Mapping[str, Any]]) -> Table:
    """Hosts flagged as probable spider traps (``hosts.trap``, :mod:`batchcrawl.fetch.neardup`)
    with their pages fetched and URLs still queued."""
    t = _table(
        "probable traps", ["host", "why", "fetched", "queued"], numeric=["fetched", "queued"]
    )
    for r in traps:
        t.add_row(str(r["host"]), str(r["trap"]), _num(r["pages_fetched"]), _num(r["queued"]))
    return t
