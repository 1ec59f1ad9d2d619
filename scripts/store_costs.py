"""Per-URL and per-entry costs of a crawl directory's current generation (issue 35; not a test).

The measured inputs of docs/scale.md: prints one JSON line with the current manifest's size and,
per table, its entries (files), rows, bytes on disk and bytes per row, the manifest bytes per
entry (each entry's JSON, as the manifest or its file lists hold it), and for the frontier the
on-disk bytes per row of each column (Parquet column chunks, compressed) -- ``url_key`` is what
every update reads whole (the DRUM check, :func:`batchcrawl.frontier.runs.file_keys`).

    python scripts/store_costs.py CRAWL_DIR
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter

import pyarrow.parquet as pq

from batchcrawl.store import paths
from batchcrawl.store.crawldir import CrawlDir


def main(argv: list[str]) -> int:
    """Print the costs of the crawl at ``argv[0]``; returns the exit status."""
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    crawl = CrawlDir.open(argv[0])
    m = crawl.manifest()
    out: dict = {
        "generation": m.generation,
        "manifest_bytes": os.path.getsize(crawl.path(paths.commit_file(m.generation))),
        "list_files": len(m.list_files()),
        "tables": {},
    }
    for table, entries in m.tables.items():
        if not entries:
            continue
        rows = sum(e.rows for e in entries)
        size = sum(
            os.path.getsize(crawl.path(rel))
            for e in entries
            for rel in (e.path, e.due)
            if rel is not None
        )
        entry_json = sum(len(json.dumps(e.to_json())) for e in entries)
        out["tables"][table] = {
            "files": len(entries),
            "rows": rows,
            "bytes": size,
            "bytes_per_row": round(size / max(rows, 1), 2),
            "manifest_bytes_per_entry": round(entry_json / len(entries), 1),
        }
    columns: Counter = Counter()
    rows = 0
    for e in m.tables.get("frontier", ()):
        meta = pq.ParquetFile(crawl.path(e.path)).metadata
        rows += meta.num_rows
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            for c in range(rg.num_columns):
                col = rg.column(c)
                columns[col.path_in_schema] += col.total_compressed_size
    if rows:
        out["frontier_column_bytes_per_row"] = {
            k: round(v / rows, 2) for k, v in columns.most_common()
        }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
