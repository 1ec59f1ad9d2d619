"""The crawl engine: the stages every execution mode shares (docs/design.md §7a). A batch round
(:mod:`batchcrawl.round`), pipelined rounds (:mod:`batchcrawl.pipeline`) and a stream
(:mod:`batchcrawl.stream`) are thin drivers over them:

* :mod:`~batchcrawl.engine.select` -- one selection (buckets, leases, time fit, STAR/BEAST caps,
  refilter, trap throttle, counted drops);
* :mod:`~batchcrawl.engine.shard` -- the shard actor around a fetch worker, and its typed report
  (:mod:`~batchcrawl.engine.report`);
* :mod:`~batchcrawl.engine.merge` -- one merge-and-commit (update, content, in-degree, compaction,
  the summary, the commit listing);
* :mod:`~batchcrawl.engine.rerun` -- the one crash-rerun rule;
* :mod:`~batchcrawl.engine.cluster` -- the Dask client and the per-bucket task mapper.
"""
