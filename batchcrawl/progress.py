"""Progress of running rounds: a live rich display on a terminal, plain log lines otherwise
(docs/design.md §9). Fed by :func:`batchcrawl.round.run_rounds` with the shard workers' live counters."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

log = logging.getLogger(__name__)

_ERRORS = ("network_error", "server_error", "dns_error", "refused", "robots_unavailable",
           "http_error", "gone", "redirect_loop")  # fmt: skip
_PAGES = ("ok", "truncated", "redirect", "redirect_loop", "not_modified", "gone", "http_error",
          "server_error")  # fmt: skip


class RoundProgress:
    """Context manager showing pages fetched, pages/s, errors and links found while a round runs.

    Parameters
    ----------
    enabled
        Draw a live table on stderr (a terminal); otherwise log one INFO line every
        ``log_every_s`` seconds.
    log_every_s
        Seconds between plain log lines when not on a terminal.
    """

    def __init__(self, enabled: bool, log_every_s: float = 10.0) -> None:
        self.enabled = enabled
        self.log_every_s = log_every_s
        self._live: Live | None = None
        self._t0 = time.monotonic()
        self._last_log = 0.0

    def __enter__(self) -> RoundProgress:
        if self.enabled:
            self._live = Live(self._table({}), console=Console(file=sys.stderr),
                              refresh_per_second=2, transient=True)  # fmt: skip
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, counters: dict[str, Any]) -> None:
        """New live counters of the running round (summed over shards)."""
        if self._live is not None:
            self._live.update(self._table(counters))
        elif time.monotonic() - self._last_log >= self.log_every_s:
            self._last_log = time.monotonic()
            pages, rate, errors = self._figures(counters)
            log.info("fetching: %d pages (%.1f/s), %d errors, %d new links", pages, rate, errors,
                     int(counters.get("links_new", 0)))  # fmt: skip

    def done(self, summary: dict[str, Any]) -> None:
        """A round committed: restart the rate clock."""
        log.info("round %s committed: %s pages in %ss", summary.get("round"),
                 summary.get("pages"), summary.get("elapsed_s"))  # fmt: skip
        self._t0 = time.monotonic()

    def _figures(self, counters: dict[str, Any]) -> tuple[int, float, int]:
        pages = int(sum(counters.get(k, 0) for k in _PAGES))
        errors = int(sum(counters.get(k, 0) for k in _ERRORS))
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        return pages, pages / elapsed, errors

    def _table(self, counters: dict[str, Any]) -> Table:
        pages, rate, errors = self._figures(counters)
        table = Table(title="batchcrawl round", show_header=False)
        table.add_row("pages fetched", f"{pages:,}")
        table.add_row("pages/s", f"{rate:,.1f}")
        table.add_row("errors", f"{errors:,}")
        table.add_row("robots.txt fetched", f"{int(counters.get('robots_fetches', 0)):,}")
        table.add_row("new links", f"{int(counters.get('links_new', 0)):,}")
        return table
