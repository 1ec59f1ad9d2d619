"""Content signals in the export: each host's ``Content-Signal`` and the ``--exclude-signal`` filter.

A site says in robots.txt what its content may be used for (``Content-Signal: search=yes,
ai-train=no``; contentsignals.org, 2025). The crawl records the signal of the group that applies to
its agent per host (``hosts.content_signal``, :mod:`batchcrawl.fetch.contentsignal`); it never
changes what is fetched. The export carries it into the ``index`` table (column
``content_signal``) and can leave out hosts by it: ``batchcrawl export --exclude-signal
ai-train=no`` writes none of the rows of a host whose signal holds ``ai-train=no``, so a data lake
built for training holds only what its sites allow.

The signal used is the host's in the crawl's *current* generation (the newest robots.txt read):
a site that changes its mind is honoured for every round exported after the change, including
rounds fetched before it. A host without a signal is never excluded (no signal says nothing).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from batchcrawl.errors import BatchcrawlError
from batchcrawl.store.crawldir import CrawlDir, Manifest

__all__ = ["SignalFilterError", "excluded_hosts", "host_signals", "parse_signal_filter"]

_PAIR = re.compile(r"([a-z0-9][a-z0-9_.-]*)=(yes|no)")


class SignalFilterError(BatchcrawlError, ValueError):
    """A bad ``--exclude-signal`` value (exit code 2); the message says the expected form."""

    exit_code = 2


def parse_signal_filter(specs: Iterable[str]) -> tuple[str, ...]:
    """``["AI-Train=No", "search=no"]`` -> ``("ai-train=no", "search=no")``: normalized as
    ``hosts.content_signal`` stores pairs (lower case, no spaces), sorted, repeats dropped. A
    comma-separated value counts as several.

    Raises
    ------
    SignalFilterError
        A value that is not ``NAME=yes`` or ``NAME=no``.
    """
    out = set()
    for spec in specs:
        for part in spec.split(","):
            pair = "=".join(p.strip() for p in part.lower().split("=", 1))
            if not _PAIR.fullmatch(pair):
                raise SignalFilterError(
                    f"--exclude-signal {spec!r}: expected NAME=yes or NAME=no, as in robots.txt "
                    "Content-Signal lines, e.g. --exclude-signal ai-train=no"
                )
            out.add(pair)
    return tuple(sorted(out))


def host_signals(crawl: CrawlDir, manifest: Manifest) -> dict[str, str]:
    """``{host: content_signal}`` of the hosts of ``manifest``'s ``hosts`` listing that have a
    signal. The listing is read in manifest order, newest row winning by host (as the ``hosts``
    view reads it: :mod:`batchcrawl.frontier.hosts`), one Parquet row group at a time; memory holds
    the hosts that have a signal."""
    out: dict[str, str] = {}
    cols = ["host", "content_signal"]
    for group in crawl.iter_row_groups("hosts", manifest.files("hosts"), columns=cols):
        for host, signal in zip(*(group.column(c).to_pylist() for c in cols), strict=True):
            if signal is None:
                out.pop(host, None)  # a newer robots.txt without a signal
            else:
                out[host] = signal
    return out


def excluded_hosts(signals: Mapping[str, str], exclude: Iterable[str]) -> frozenset[str]:
    """The hosts whose signal (``name=value`` pairs joined by ``,``) holds one of the pairs of
    ``exclude`` (:func:`parse_signal_filter`)."""
    wanted = set(exclude)
    if not wanted:
        return frozenset()
    return frozenset(h for h, s in signals.items() if wanted & set(s.split(",")))
