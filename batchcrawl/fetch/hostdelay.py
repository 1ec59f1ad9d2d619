"""The politeness delay of one host (:func:`host_delay`) and the argument checks every part of the
workbench (:mod:`batchcrawl.fetch.workbench`) applies to seconds it is given."""

from __future__ import annotations

import math

from batchcrawl.errors import BatchcrawlError

__all__ = ["WorkbenchError", "check_seconds", "host_delay"]


class WorkbenchError(BatchcrawlError, ValueError):
    """A workbench call got a bad argument: a negative or NaN delay, an unknown host without an IP,
    a visit state that is not held by the caller, or one from another workbench."""


def check_seconds(name: str, value: float | None, *, optional: bool = False) -> None:
    """Check that ``value`` is a number of seconds ``>= 0`` (None allowed when ``optional``).

    Raises
    ------
    WorkbenchError
        ``value`` is not a number, is NaN or is negative.
    """
    if value is None and optional:
        return
    if not isinstance(value, int | float) or isinstance(value, bool) or math.isnan(value):
        raise WorkbenchError(f"{name}: expected a number of seconds, got {value!r}")
    if value < 0:
        raise WorkbenchError(f"{name}: expected seconds >= 0, got {value!r}")


def host_delay(
    *,
    host_delay_s: float,
    crawl_delay_s: float | None = None,
    max_crawl_delay_s: float = 30.0,
    adaptive_delay_factor: float = 0.0,
    last_download_s: float | None = None,
    cap_crawl_delay: bool = True,
) -> float:
    """Seconds to wait after one fetch from a host ends before the next may start.

    ``max(host_delay_s, min(crawl_delay_s, max_crawl_delay_s), adaptive_delay_factor *
    last_download_s)``: politeness as a pure function with bounds, after Heritrix's
    ``DispositionProcessor`` (``minDelayMs``, ``respectCrawlDelayUpToSeconds``, ``delayFactor``) and
    BUbiNG's per-host delay. robots.txt ``Crawl-delay`` may raise the delay (up to
    ``max_crawl_delay_s``, or without bound when ``cap_crawl_delay`` is False:
    ``politeness.long_crawl_delay`` ``slow`` and ``skip``) but never lowers it below the floor
    ``host_delay_s``.

    Parameters
    ----------
    host_delay_s
        Our floor, seconds (config ``politeness.host_delay_s``).
    crawl_delay_s
        The host's robots.txt ``Crawl-delay`` for our agent, seconds; None when it gives none.
    max_crawl_delay_s
        ``Crawl-delay`` is honoured up to this many seconds.
    adaptive_delay_factor
        The delay is at least this factor times ``last_download_s`` (0 disables).
    last_download_s
        Duration of the host's last download, seconds; None when nothing was downloaded yet.
    cap_crawl_delay
        Cap ``crawl_delay_s`` at ``max_crawl_delay_s`` (``politeness.long_crawl_delay = "cap"``).

    Returns
    -------
    float
        The delay, seconds, ``>= host_delay_s``.

    Raises
    ------
    WorkbenchError
        An argument is negative or NaN.
    """
    check_seconds("host_delay_s", host_delay_s)
    check_seconds("crawl_delay_s", crawl_delay_s, optional=True)
    check_seconds("max_crawl_delay_s", max_crawl_delay_s)
    check_seconds("adaptive_delay_factor", adaptive_delay_factor)
    check_seconds("last_download_s", last_download_s, optional=True)
    delay = host_delay_s
    if crawl_delay_s is not None:
        delay = max(
            delay, min(crawl_delay_s, max_crawl_delay_s) if cap_crawl_delay else crawl_delay_s
        )
    if last_download_s is not None and adaptive_delay_factor > 0:
        delay = max(delay, adaptive_delay_factor * last_download_s)
    return delay
