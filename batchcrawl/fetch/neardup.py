"""Per-host near-duplicate flags and spider-trap suspicion, kept by the fetch worker.

Every host lives on one shard (the ring routes by host), so the worker that fetches a host sees all
of its pages and can compare each new page's SimHash (:mod:`batchcrawl.fetch.simhash`) with the
host's recent pages: within ``dedup.near_hamming`` bits of one of the last ``dedup.near_window``
pages, the page is a near-duplicate of the earliest such page (Manku et al., WWW 2007).

A host is a **probable trap** (Heritrix's and BUbiNG's heuristics, MRS §20.2.1 "spider traps") when

* ``near``: at least ``dedup.trap_min_pages`` recent pages were seen and at least
  ``dedup.trap_near_share`` of them are near-duplicates (calendars and digests whose pages differ
  only in digits), or
* ``path``: a fetched URL's path repeats one segment ``dedup.trap_repeat_segments`` times or more
  (``/a/b/a/b/a/...``: relative links that keep growing the path).

The flag is written to the ``hosts`` table (``trap``) and generate throttles such hosts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


def repeated_segments(path: str) -> int:
    """The largest number of times one non-empty segment occurs in ``path`` (``/a/b/a`` -> 2)."""
    counts: dict[str, int] = {}
    for seg in path.split("?", 1)[0].split("/"):
        if seg:
            counts[seg] = counts.get(seg, 0) + 1
    return max(counts.values(), default=0)


@dataclass
class _HostWindow:
    recent: deque[tuple[int, int]] = field(
        default_factory=deque
    )  # (fingerprint, url_key), oldest first
    flags: deque[bool] = field(default_factory=deque)  # near-duplicate or not, per recent page
    near_count: int = 0  # sum(flags)
    trap: str | None = None


class NearDuplicates:
    """Recent page fingerprints per host, near-duplicate lookup and trap flags.

    Parameters
    ----------
    window : int
        Pages remembered per host (``dedup.near_window``); a lookup costs one XOR + popcount each.
    max_hamming : int
        Largest Hamming distance (bits of 64) at which two pages are near-duplicates.
    trap_min_pages, trap_near_share, trap_repeat_segments
        The trap rules of the module docstring.

    Not thread-safe: the worker calls it under its lock.
    """

    def __init__(
        self,
        window: int,
        max_hamming: int,
        *,
        trap_min_pages: int,
        trap_near_share: float,
        trap_repeat_segments: int,
    ) -> None:
        self.window = window
        self.max_hamming = max_hamming
        self.trap_min_pages = trap_min_pages
        self.trap_near_share = trap_near_share
        self.trap_repeat_segments = trap_repeat_segments
        self._hosts: dict[str, _HostWindow] = {}

    def observe(self, host: str, url_key: int, path: str, fingerprint: int | None) -> int | None:
        """Record a page of ``host`` and return the ``url_key`` of the earliest remembered page
        within ``max_hamming`` bits of ``fingerprint`` (None: no such page, or no fingerprint)."""
        hw = self._hosts.setdefault(host, _HostWindow())
        if hw.trap is None and repeated_segments(path) >= self.trap_repeat_segments:
            hw.trap = "path"
        if fingerprint is None:
            return None
        near = None
        max_hamming = self.max_hamming
        for fp, k in hw.recent:  # simhash.hamming, inlined: run window times a page
            if (fp ^ fingerprint).bit_count() <= max_hamming and k != url_key:
                near = k
                break
        hw.recent.append((fingerprint, url_key))
        hw.flags.append(near is not None)
        hw.near_count += near is not None
        if len(hw.recent) > self.window:
            hw.recent.popleft()
            hw.near_count -= hw.flags.popleft()
        n = len(hw.flags)
        if (
            hw.trap is None
            and n >= self.trap_min_pages
            and hw.near_count >= self.trap_near_share * n
        ):
            hw.trap = "near"
        return near

    def trap(self, host: str) -> str | None:
        """Why ``host`` is a probable trap (``near``, ``path``), or None."""
        hw = self._hosts.get(host)
        return None if hw is None else hw.trap

    def restore(self, host: str, trap: str | None) -> None:
        """Reload a host's trap flag from its ``hosts`` row (the window starts empty)."""
        if trap is not None:
            self._hosts.setdefault(host, _HostWindow()).trap = trap

    def forget(self, host: str) -> None:
        """Drop a host's window (it left this worker)."""
        self._hosts.pop(host, None)
