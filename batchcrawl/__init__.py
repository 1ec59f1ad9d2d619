"""batchcrawl: a batch-cycle web crawler on Dask and Parquet.

Rounds of inject -> generate -> fetch -> update -> commit over a DRUM-bucketed Parquet frontier
(IRLbot), fetched by host-sharded workers that keep a BUbiNG workbench. See docs/design.md.
"""

__version__ = "0.1.0"
