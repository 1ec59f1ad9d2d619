"""What the crawler's client hands every Dask worker process (issue 16, item 3: the tree's memory).

The table schemas: a process derives them from the DDL in ``storage/`` with DuckDB
(:mod:`batchcrawl.store.schemas`), and a fetch worker that did so carried DuckDB's library and
state (~50 MB of RSS; its share of the tree's PSS: ~20 MB per worker) for the rest of the crawl,
although fetch, generate and update tasks only read and write Parquet. The driver derives them
once and :func:`register` gives them to each worker, those that join or restart later included
(a Dask worker plugin); a worker of another batchcrawl version (another DDL) derives its own.
"""

from __future__ import annotations

from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from batchcrawl.store import schemas


class SchemasPlugin(WorkerPlugin):
    """Installs the driver's table schemas in a worker process (:func:`schemas.install`).

    This module imports only :mod:`batchcrawl.store.schemas` of the crawler, so unpickling the
    plugin in a worker loads nothing that would derive the schemas first.
    """

    name = "batchcrawl-schemas"

    def __init__(self, given: dict[str, object]) -> None:
        self.given = given

    def setup(self, worker: Any) -> None:
        """Dask calls this in each worker once it is registered (and on each worker that joins
        later); a DDL other than the driver's leaves the worker deriving its own."""
        schemas.install(self.given)


def register(client: Any) -> None:
    """Register :class:`SchemasPlugin` with this process's schemas on ``client``'s cluster
    (before any task or actor runs there; one call per client). A driver that has not loaded
    DuckDB derives them in a child process first (:func:`schemas.derive_in_child`), so that the
    crawl's driver does not load it either."""
    schemas.prepare_without_duckdb()
    client.register_plugin(SchemasPlugin(schemas.exported()), name=SchemasPlugin.name)
