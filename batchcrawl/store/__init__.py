"""The crawl directory and everything stored in it: manifests and generations, the writer lock, gc,
table schemas, the DuckDB views, shuffle files. Imports nothing above it (config and errors only)."""
