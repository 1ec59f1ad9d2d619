"""The monitor of a batch fetch run: it starts the fetch threads on a fetch list, watches them
about twice a second (progress, spilling rows, the idle meter, the tail rule, the time limit) and
gathers what the run produced when they end (Nutch's ``Fetcher`` run loop with its throughput
threshold)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

from batchcrawl.fetch.idle import IdleMeter, overlap_pays, tail_cut_pays
from batchcrawl.fetch.loop import FetchLoop
from batchcrawl.fetch.runstate import RunState, ShardRun, close_texts, new_shard_run
from batchcrawl.fetch.tail import TailDetector
from batchcrawl.records import FetchItem

#: seconds between two looks at the fetch threads
TICK_S = 0.5


def run_batch(
    loop: FetchLoop,
    run: RunState,
    items: list[FetchItem],
    started: float,
    *,
    progress: Callable[[Counter[str]], None] | None = None,
    spill: Callable[[ShardRun], None] | None = None,
) -> ShardRun:
    """Fetch ``items`` in ``run`` (its deadline set, its WARC writer open) and return
    ``run.out`` completed: unfetched URLs, WARC files, seconds, idle and tail seconds. ``items``
    is emptied once they are queued.
    ``started`` is the run's start on the worker's monotonic clock.

    Stops when every item is done, at the deadline, or in its tail: once the tail rule fires
    (:class:`~batchcrawl.fetch.tail.TailDetector`, ``fetch.tail_idle_s``; counter ``tail_cut``),
    at once, or with ``run.tail_release`` set, once that event is set (until then the run goes on
    fetching with counter ``tail_held`` 1: a shard ending early gives a round nothing while
    another shard still fetches, :meth:`batchcrawl.round.Crawler.wait_fetch`).
    ``progress`` gets a copy of the
    counters each tick; ``spill`` the rows gathered so far each time they pass
    ``round.spill_pages`` ``fetched`` rows. Raises the run's storage fault (``OSError``), if one
    stopped the threads, after closing the WARC writer.
    """
    parts, out = loop.parts, run.out
    cfg, wb = parts.cfg, parts.workbench
    pending = run.pending = loop.enqueue(run, items)
    items.clear()  # the workbench holds them now: each is freed once fetched, not at the run's end
    threads = loop.start(run, max(1, min(cfg.fetch.threads, max(pending, 1))), "fetch")
    fc = cfg.fetch
    tail = TailDetector(fc.tail_rate_ratio, fc.throughput_window_s, fc.tail_capacity_ratio)
    idle = IdleMeter(len(threads), started)
    held = False  # the tail rule fired; the run waits for run.tail_release to end
    try:
        while alive := [t for t in threads if t.is_alive()]:
            idle.observe(parts.clock(), wb.hosts_with_work(idle.need))
            if held and run.tail_release is not None:
                run.tail_release.wait(TICK_S)  # ends within a moment of the release
            else:
                alive[0].join(timeout=TICK_S)
            if progress is not None:
                with loop.lock:
                    progress(Counter(out.counters))
            if spill is not None and 0 < cfg.round.spill_pages <= len(out.fetched):
                spill(take_rows(loop, out))
            now = parts.clock()
            with loop.lock:
                done = pending - run.pending
            found = run.found_hosts or Counter()
            need = fc.tail_capacity_ratio or fc.tail_overlap_s
            capacity = wb.polite_capacity(found) if need else None
            working, waiting = capacity or (math.inf, 0.0)
            in_tail = tail.observe(now, done, working, waiting) or (
                0 < fc.tail_idle_s <= idle.in_tail_for(now)
            )
            if in_tail and not run.stop.is_set():  # only when the next round gains a host
                in_tail = tail_cut_pays((capacity or wb.polite_capacity(found))[1])
            elif capacity is not None and fc.tail_overlap_s and waiting > 0:
                in_tail = overlap_pays(working, waiting, *wb.politeness_left_s(found),
                                       fc.tail_overlap_s)  # fmt: skip
            if in_tail and not run.stop.is_set() and not held:
                held = True
                if run.tail_release is not None:
                    with loop.lock:
                        out.counters["tail_held"] = 1
            released = run.tail_release is None or run.tail_release.is_set()
            if now >= run.deadline or (held and released and not run.stop.is_set()):
                if now < run.deadline:
                    out.counters["tail_cut"] = 1
                loop.stop(run)
    finally:
        loop.stop(run)
        for t in threads:
            t.join()
        run.warc.close()
    if run.storage_fault is not None:
        raise run.storage_fault
    close_texts(run.texts, out)
    out.unfetched.extend(loop.drain())
    out.counters["not_fetched"] += len(out.unfetched)
    out.warc_files = list(run.warc.files)
    end = parts.clock()
    out.seconds = end - started
    out.idle_s = idle.finish(end)
    out.tail_s = idle.tail_s(end)
    return out


def take_rows(loop: FetchLoop, out: ShardRun) -> ShardRun:
    """The ``fetched``, ``links`` and ``edges`` rows of ``out`` so far; ``out`` gets fresh
    lists (under the loop's lock: fetch threads append to whatever ``out`` holds)."""
    fresh = new_shard_run()
    with loop.lock:
        rows = ShardRun(fetched=out.fetched, links=out.links, edges=out.edges)
        out.fetched, out.links, out.edges = fresh.fetched, fresh.links, fresh.edges
    return rows
