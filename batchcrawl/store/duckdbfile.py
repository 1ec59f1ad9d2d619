"""Write a DuckDB database file of crawl views, from a job that names them (JSON-serializable):
what the child process of :mod:`batchcrawl.store.views` runs (``python -m
batchcrawl.store.duckdbfile``, the job on stdin). Imports nothing but DuckDB (no pyarrow, no numpy)
and nothing of batchcrawl, so the child runs this file by its path
(:data:`batchcrawl.store.child.STANDALONE`), without the package ``batchcrawl.store`` whose
``__init__`` loads pyarrow and numpy: the child's peak RSS is DuckDB's, ~85 MB instead of ~130 MB
(issue 33). The name of the database file and of the commit files are defined here;
:mod:`batchcrawl.store.paths` re-exports them.

:func:`publish_file` also renames the written file into place, so a child whose parent stopped
finishes the refresh alone (the parent, stopping, waits for it only briefly: issue 34)."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
from typing import Any

#: The crawl's DuckDB database file, at the crawl's root (:mod:`batchcrawl.store.paths`).
DUCKDB_FILE = "crawl.duckdb"
#: A file of ``_commits/`` -> its generation (group 1) (:mod:`batchcrawl.store.paths`).
COMMIT_RE = re.compile(r"^(\d{6,})\.json$")

#: Persisted in ``crawl.duckdb``: the crawl-relative paths ``files`` made absolute with the
#: directory of the database file. DuckDB has no function for that directory, but the default
#: ``temp_directory`` of a database file is ``<database file>.tmp``; when the user has changed it,
#: the paths stay relative and resolve from ``file_search_path`` (default: the working directory).
CRAWL_FILES_MACRO = (
    "CREATE OR REPLACE MACRO crawl_files(files) AS list_transform(files, lambda f: "
    f"CASE WHEN suffix(current_setting('temp_directory'), '/{DUCKDB_FILE}.tmp') "
    f"THEN current_setting('temp_directory')[:-{len(DUCKDB_FILE) + 5}] ELSE '' END || f)"
)


def ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


@functools.cache
def empty_selects(ddl: str, tables: tuple[str, ...]) -> dict[str, str]:
    """``SELECT CAST(NULL AS type) AS col, ... WHERE false`` for each of ``tables``, typed by the
    DDL text ``ddl`` (``storage/schema.sql``). Loads DuckDB."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.execute(ddl)
        out = {}
        for table in tables:
            cols = con.execute(
                "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ? "
                "ORDER BY column_index",
                [table],
            ).fetchall()
            body = ", ".join(f"CAST(NULL AS {typ}) AS {ident(name)}" for name, typ in cols)
            out[table] = f"SELECT {body} WHERE false"
        return out
    finally:
        con.close()


def write_file(job: dict[str, Any]) -> None:
    """Write a DuckDB database file at ``job["tmp"]`` holding the ``crawl_files`` macro and one
    view per table of ``job["views"]`` (table -> ``SELECT``, None for an empty view typed by
    ``job["ddl"]``), with paths resolved from ``job["search_path"]``. Loads DuckDB.

    Raises
    ------
    duckdb.Error
        A view does not bind (a file it names is missing or unreadable).
    """
    import duckdb

    con = duckdb.connect(job["tmp"])
    try:
        con.execute(CRAWL_FILES_MACRO)
        # views are bound when created: the temp file's name does not end in crawl.duckdb,
        # so the relative paths resolve from file_search_path (this session only)
        con.execute(f"SET file_search_path = {literal(job['search_path'])}")
        create_views(con, job["views"], job["ddl"])
        con.execute("CHECKPOINT")
    finally:
        con.close()


def publish_file(job: dict[str, Any]) -> bool:
    """:func:`write_file`, then rename ``job["tmp"]`` to ``job["final"]`` unless a generation
    newer than ``job["generation"]`` is committed in the local folder ``job["commits_dir"]`` by
    then (its own refresh writes the file: the file never goes back to an older generation). The
    temp file is removed whatever happens.

    Returns
    -------
    bool
        True when the file was renamed into place, False when a newer generation superseded it.

    Raises
    ------
    duckdb.Error, OSError
        As :func:`write_file`, or the rename failed.
    """
    tmp = job["tmp"]
    try:
        write_file(job)
        if superseded(job["commits_dir"], job["generation"]):
            return False
        os.replace(tmp, job["final"])
        return True
    finally:
        for leftover in (tmp, tmp + ".wal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def superseded(commits_dir: str, generation: int) -> bool:
    """True when the local folder ``commits_dir`` holds the commit of a generation newer than
    ``generation``."""
    try:
        names = os.listdir(commits_dir)
    except FileNotFoundError:
        return False
    return any(int(m.group(1)) > generation for m in map(COMMIT_RE.match, names) if m)


#: Views over a table view (``name: (table, SELECT)``), created after it on every connection and
#: in ``crawl.duckdb``: ``page_text``, one ``text`` row per URL, its newest capture that has text
#: (a refetch or a 304 revisit repeats a page; the named queries ``pages-per-language`` and
#: ``languages-per-host`` count pages, not captures).
DERIVED_VIEWS = {
    "page_text": (
        "text",
        "SELECT * FROM text QUALIFY row_number() OVER (PARTITION BY url_key ORDER BY "
        "content_languages IS NULL, main_text_length IS NULL, fetch_time DESC) = 1",
    ),
}


def create_views(con: Any, views: dict[str, str | None], ddl: str) -> None:
    """``CREATE OR REPLACE VIEW`` each table of ``views`` (table -> ``SELECT``, or None for an
    empty view typed by the DDL text ``ddl``) on the DuckDB connection ``con``, then the
    :data:`DERIVED_VIEWS` over those tables."""
    empty = empty_selects(ddl, tuple(t for t, body in views.items() if body is None))
    for table, body in views.items():
        con.execute(f"CREATE OR REPLACE VIEW {table} AS {body or empty[table]}")
    for name, (table, body) in DERIVED_VIEWS.items():
        if table in views:
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {body}")


def _main() -> int:
    """Child process: write and publish the ``crawl.duckdb`` of the JSON job on stdin
    (:func:`publish_file`); prints nothing (its parent may be gone: a stop does not wait)."""
    publish_file(json.loads(sys.stdin.buffer.read()))
    return 0


if __name__ == "__main__":
    # flushed, then ended without the C library's exit handlers: DuckDB's and Arrow's native
    # thread pools abort now and then in their teardown (batchcrawl.console.early._end_process;
    # not called: this module imports nothing of batchcrawl, see child.STANDALONE)
    _code = _main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_code)
