"""The one crash-rerun rule of every driver (docs/design.md §3, §7, §8).

A round, a pipelined pair of rounds or a stream micro-batch that died before its commit left only
orphan files: the committed generation is whole and every URL it would have fetched is still due.
Its last requests were never persisted in the ``hosts`` table, so the rerun gives every host that
the dead run may have contacted a full politeness delay before its first fetch
(:meth:`~batchcrawl.fetch.worker.FetchWorker.cool_down`): the hosts of the rerun's own fetch lists,
and those of the fetch lists of any later uncommitted round (a dead pipelined crawl's round in
flight). A stream also cools every host it tops up for the first time when it took over the
writer lock of one that died (:attr:`~batchcrawl.store.lock.WriterLock.took_over`: a kill before
the stream's first WARC record leaves no file behind).

A stream that died also left its open WARC files (one per shard) holding records past the last
checkpoint: they are cut back to their committed end first (:func:`batchcrawl.engine.warcopen.
close_open_warcs`), and such a crash makes the rerun cold too -- the stream's later micro-batches
write into the file opened earlier, so they leave no WARC folder of their own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from batchcrawl.engine.warcopen import close_open_warcs
from batchcrawl.store.crawldir import CrawlDir
from batchcrawl.store.orphans import uncommitted_hosts, uncommitted_rounds

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rerun:
    """Whether the next round reruns a dead one.

    Attributes
    ----------
    cold
        Round ``round`` (or a later one) left files of a fetch that died before its commit.
    cool_hosts
        By shard: hosts of later uncommitted rounds' fetch lists, cooled down too.
    """

    round: int
    cold: bool
    cool_hosts: dict[int, list[str]] = field(default_factory=dict)


def crash_rerun(crawl: CrawlDir, rnd: int, who: str) -> Rerun:
    """The rule for round ``rnd`` (the next, uncommitted one) of ``crawl``
    (:func:`batchcrawl.store.orphans.uncommitted_rounds`: a batch round's fetch lists, a
    micro-batch's ``fetched`` or WARC files, or WARC files a stream left open). Cuts those open
    files back to their committed end (call it under the writer lock). Logs (INFO) that ``who``
    reruns it."""
    cut = close_open_warcs(crawl)
    if not uncommitted_rounds(crawl, rnd) and not cut:
        return Rerun(rnd, False)
    # INFO: the run that left it said so (a stop's line: "round N was not committed: rerun to do
    # it"; a lost worker's, a full disk's), and a process that died without a word left its lock,
    # whose takeover is a warning (store.lock); a stop and its rerun print nothing more (issue 34,
    # a fresh-user trial: every command after a Ctrl-C began with this warning)
    log.info("round %d was started before (a round, a pipelined round or a stream) and did not "
             "commit: %s reruns it, with a full politeness delay first for every host it may "
             "have contacted", rnd, who)  # fmt: skip
    return Rerun(rnd, True, uncommitted_hosts(crawl, rnd))
