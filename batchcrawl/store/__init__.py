"""The crawl directory and everything stored in it: manifests and generations, the writer lock, gc,
table schemas, the DuckDB views, shuffle files. Imports nothing above it (config and errors only)."""

# registers the crawl.duckdb refresh as an after-commit hook of the crawl directory
# (batchcrawl.store.crawldir.AFTER_COMMIT): every process that can commit has it
from batchcrawl.store import views as _views  # noqa: E402, F401
