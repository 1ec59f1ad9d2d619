"""Read-only DuckDB SQL over one committed generation of a crawl (docs/design.md §9).

:func:`connect` opens an in-memory DuckDB with one view per crawl table (``frontier``, ``hosts``,
``fetchlists``, ``fetched``, ``links``) over exactly the files the generation's manifest names
(never a folder listing, so orphans of failed rounds are never read). An empty table becomes an empty
view typed from ``storage/schema.sql``. :func:`query` runs one read-only statement and returns Arrow;
named queries are the ``.sql`` files in ``storage/queries/`` (Common Crawl keeps its index queries as
files the same way).

:func:`refresh_duckdb` writes ``CRAWL/crawl.duckdb`` with the same views over paths relative to
the database file, so ``duckdb CRAWL/crawl.duckdb`` works without batchcrawl, from any working
directory, and a copied or moved crawl reads its own files (never the original's). Only local
crawls get one: a remote crawl (``s3://...``) skips it, since a DuckDB file cannot be updated in
place on an object store; use ``batchcrawl sql`` there. The views' SQL and the file's writer are in
:mod:`batchcrawl.store.views` (a running crawl writes the file from a child process).
"""

from __future__ import annotations

import contextlib
import logging
import re
import weakref
from collections.abc import Iterator
from itertools import dropwhile, takewhile
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from batchcrawl.errors import CrawlDirError, SQLError, first_line
from batchcrawl.store import duckdbfile, schemas, views
from batchcrawl.store.crawldir import DAMAGED_FILE_REMEDY
from batchcrawl.store.paths import DUCKDB_FILE

if TYPE_CHECKING:
    from batchcrawl.store.crawldir import CrawlDir, Manifest

log = logging.getLogger(__name__)

#: ``EXPLAIN [ANALYZE] [(options)]`` prefix; what follows is checked again.
_EXPLAIN_RE = re.compile(r"\s*EXPLAIN\s+(?:ANALY[SZ]E\s+)?(?:\([^)]*\)\s*)?", re.IGNORECASE)
#: PRAGMAs that only show things.
_SHOW_PRAGMAS = {
    "show_tables",
    "show_tables_expanded",
    "table_info",
    "show",
    "version",
    "database_size",
    "storage_info",
    "functions",
    "platform",
    "collations",
    "database_list",
    "metadata_info",
}


#: The connections :func:`connect` made (weakly held). A stop signal does not cut the main
#: thread's wait for a running query (DuckDB runs it on its own threads), so the CLI's stop-signal
#: watcher interrupts them (:func:`batchcrawl.console.signals.interrupt_queries`; issue 34: Ctrl-C
#: in ``sql`` ran on, or printed a ``Query interrupted`` traceback).
OPEN_CONNECTIONS: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()


def _create_views(con: duckdb.DuckDBPyConnection, crawl: CrawlDir, manifest: Manifest) -> None:
    """One view per crawl table over ``manifest``'s files, by absolute paths or URLs
    (:func:`batchcrawl.store.views.view_body`; empty views typed by schema.sql)."""
    bodies = {t: views.view_body(crawl, manifest, t) for t in schemas.TABLES}
    duckdbfile.create_views(con, bodies, schemas.schema_sql())


def connect(crawl: CrawlDir, generation: int | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the crawl's views over ``generation`` (default current).

    For a local crawl the connection is then locked down: file access is limited to the
    generation's own files (``allowed_paths`` with ``enable_external_access = false``) and the
    configuration is locked, so a statement cannot read other files, attach databases or install
    extensions. A remote crawl registers the crawl's fsspec filesystem with DuckDB instead (its
    access is limited by :func:`check_read_only` only).

    Raises
    ------
    CrawlDirError
        ``generation`` does not exist, or a file its manifest names is missing or unreadable.
    """
    return _connect(crawl, crawl.manifest(generation))


def _connect(crawl: CrawlDir, manifest: Manifest) -> duckdb.DuckDBPyConnection:
    """:func:`connect` for a manifest already read."""
    con = duckdb.connect(":memory:")
    OPEN_CONNECTIONS.add(con)
    if not crawl.local:
        con.register_filesystem(crawl.fs)
    try:
        _create_views(con, crawl, manifest)
    except duckdb.Error as exc:  # the views' SQL is ours: binding fails only on the files
        con.close()
        raise _unreadable(crawl, manifest.generation, exc) from None
    if crawl.local:
        paths = [crawl.full_url(rel) for t in schemas.TABLES for rel in manifest.files(t)]
        con.execute(
            "SET allowed_paths = " + "[" + ", ".join(duckdbfile.literal(p) for p in paths) + "]"
        )
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
    return con


def _unreadable(crawl: CrawlDir, generation: int, exc: duckdb.Error) -> CrawlDirError:
    return CrawlDirError(
        f"{crawl.url}: generation {generation} names a file that cannot be read "
        f"({first_line(exc)}); " + DAMAGED_FILE_REMEDY
    )


@contextlib.contextmanager
def reading_generation(crawl: CrawlDir, generation: int) -> Iterator[None]:
    """Inside, a DuckDB error about the data files of ``generation`` -- a read failed
    (``IOException``), or a file named in the message (``.parquet``) is truncated or garbled --
    raises :class:`CrawlDirError` naming it and the way back (exit code 3) instead of passing
    for an error of the statement. Statements on :func:`connect`'s connections cannot name files
    themselves, so a ``.parquet`` path in the message is one of the generation's.

    A refused read of a file outside the generation (``PermissionException``: the statement
    named one, ``read_parquet('/elsewhere.parquet')``) raises :class:`SQLError` (exit code 2).

    Raises
    ------
    CrawlDirError
        As above; other DuckDB errors pass through unchanged.
    SQLError
        The statement read a file outside the generation.
    """
    try:
        yield
    except duckdb.PermissionException as exc:
        # the lock-down of connect(): a statement named a file that is not the generation's
        # (issue 34: reported as a damaged crawl, exit 3, for read_parquet; read_csv said 2)
        raise SQLError(
            f"query refused: it reads a file outside the crawl's generation {generation} "
            f"({first_line(exc)}); query the views {', '.join(schemas.TABLES)} "
            f"(open other files with the DuckDB shell, e.g. duckdb {crawl.url}/{DUCKDB_FILE})"
        ) from None
    except duckdb.Error as exc:
        if not isinstance(exc, duckdb.IOException) and ".parquet" not in str(exc):
            raise
        raise _unreadable(crawl, generation, exc) from None


def check_read_only(sql: str) -> list[str]:
    """Split ``sql`` into statements and check each only reads.

    Allowed: ``SELECT`` (with ``WITH``, ``FROM``-first, ``VALUES``, ``DESCRIBE``, ``SHOW``,
    ``SUMMARIZE``), ``EXPLAIN [ANALYZE]`` of a SELECT, and the showing PRAGMAs
    (``PRAGMA show_tables``...). Refused: anything that writes, copies, attaches, installs/loads,
    sets, creates, or calls.

    Returns
    -------
    list[str]
        The statements' texts.

    Raises
    ------
    SQLError
        The text does not parse, is empty, or a statement is not read-only.
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise failed("query does not parse", exc) from None
    if not statements:
        raise SQLError("empty query: give one SELECT statement")
    for st in statements:
        if st.type == duckdb.StatementType.SELECT:
            continue
        if st.type == duckdb.StatementType.EXPLAIN and _explains_a_select(st.query):
            continue  # EXPLAIN ANALYZE runs its statement: only a SELECT may follow
        if st.type == duckdb.StatementType.PRAGMA:
            name = st.query.strip().split(None, 1)[1] if len(st.query.split()) > 1 else ""
            name = name.split("(")[0].split("=")[0].strip().rstrip(";").strip().lower()
            if name in _SHOW_PRAGMAS:
                continue
        raise SQLError(
            f"refused {_statement_kind(st)} statement {st.query.strip()[:60]!r}: batchcrawl sql "
            "is read-only (SELECT, WITH, FROM, VALUES, EXPLAIN, DESCRIBE, SHOW, SUMMARIZE and "
            "showing PRAGMAs such as PRAGMA version)"
        )
    return [st.query for st in statements]


#: A statement's leading keyword after comments: ``FORCE INSTALL`` or one word.
_LEADING_WORDS = re.compile(
    r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*((?:force\s+)?[a-z]+)", re.IGNORECASE | re.DOTALL
)


def _statement_kind(st: duckdb.Statement) -> str:
    """The statement's own leading keyword, upper case (``INSTALL``, ``PRAGMA``, ``CHECKPOINT``):
    DuckDB's statement type names INSTALL and LOAD both ``LOAD``, ``PRAGMA threads=1`` ``SET``
    and ``CHECKPOINT`` ``CALL`` (fresh-user trials); the type when no word leads."""
    words = _LEADING_WORDS.match(st.query)
    if words is None:
        return str(st.type).rsplit(".", 1)[-1]
    return " ".join(words.group(1).upper().split())


def _explains_a_select(text: str) -> bool:
    m = _EXPLAIN_RE.match(text)
    if not m:
        return False
    try:
        inner = duckdb.extract_statements(text[m.end() :])
    except duckdb.Error:
        return False
    return len(inner) == 1 and inner[0].type == duckdb.StatementType.SELECT


def query(crawl: CrawlDir, sql: str, generation: int | None = None) -> pa.Table:
    """Run read-only ``sql`` over ``generation`` (default current) and return the last statement's
    result as an Arrow table (:func:`query_each` gives every statement's).

    Raises
    ------
    SQLError
        The statement is refused (see :func:`check_read_only`) or fails in DuckDB.
    CrawlDirError
        ``generation`` does not exist.
    """
    results = query_each(crawl, sql, generation)
    return results[-1] if results else pa.table({})


def query_each(crawl: CrawlDir, sql: str, generation: int | None = None) -> list[pa.Table]:
    """Run the read-only statements of ``sql`` (``;``-separated) over ``generation`` (default
    current), in order, on one connection; each one's result as an Arrow table.

    Raises
    ------
    SQLError
        A statement is refused (see :func:`check_read_only`), or fails in DuckDB: one line,
        DuckDB's first, and what to do (:func:`failed`).
    CrawlDirError
        ``generation`` does not exist.
    """
    statements = check_read_only(sql)
    con = None
    try:
        manifest = crawl.manifest(generation)
        con = _connect(crawl, manifest)
        with reading_generation(crawl, manifest.generation):
            return [con.sql(text).to_arrow_table() for text in statements]
    except duckdb.InterruptException:
        raise  # a stop signal's (console.signals.stop_behind): not an error of the statement
    except duckdb.Error as exc:
        raise failed("query failed", exc) from None
    finally:
        if con is not None:
            con.close()


def failed(what: str, exc: duckdb.Error) -> SQLError:
    """``what`` (``"query failed"``) with DuckDB's error ``exc`` in one line, and a hint: DuckDB's
    messages go on with the statement and a caret under it, or candidate names, over 2-4 lines
    (issue 34). Where it points (``LINE 1: ...``) is kept as a column number."""
    text = str(exc)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    head = lines[0] if lines else type(exc).__name__
    where = ""
    for i, ln in enumerate(lines[1:], 1):
        m = re.match(r"LINE (\d+): ", ln)
        if m and i + 1 < len(lines) and "^" in lines[i + 1]:
            column = lines[i + 1].index("^") - m.end() + 1
            where = f" (line {m.group(1)}, column {column})"
    hint = next((ln.strip() for ln in lines[1:] if ln.startswith("Candidate")), "")
    hint = f"; {hint}" if hint else ""
    return SQLError(
        f"{what}: {head}{where}{hint}; check the statement (batchcrawl sql CRAWL "
        f'"DESCRIBE frontier" lists a view\'s columns; views: {", ".join(schemas.TABLES)})'
    )


def queries_dir() -> Path:
    """Folder of the named queries (``storage/queries``)."""
    return schemas.storage_dir() / "queries"


def named_queries() -> list[str]:
    """Names of the named queries (file names without ``.sql``), sorted."""
    return sorted(p.stem for p in queries_dir().glob("*.sql"))


def named_query_descriptions() -> dict[str, str]:
    """``{name: description}`` of the named queries, sorted by name: the description is each
    file's leading ``--`` comment, its lines joined by spaces (a comment wrapped over several
    lines is one description; empty if the file starts with no comment)."""
    out = {}
    for name in named_queries():
        text = (queries_dir() / f"{name}.sql").read_text(encoding="utf-8")
        lines = dropwhile(lambda ln: not ln, (ln.strip() for ln in text.splitlines()))
        about = (ln[2:].strip() for ln in takewhile(lambda ln: ln.startswith("--"), lines))
        out[name] = " ".join(a for a in about if a)
    return out


def named_query(name: str) -> str:
    """Text of named query ``name`` (``storage/queries/NAME.sql``).

    Raises
    ------
    SQLError
        No such query; the message lists the names there are.
    """
    path = queries_dir() / f"{name}.sql"
    if not name or "/" in name or not path.is_file():
        raise SQLError(f"no named query {name!r}; named queries: {', '.join(named_queries())}")
    return path.read_text(encoding="utf-8")


def refresh_duckdb(crawl: CrawlDir, manifest: Manifest) -> str | None:
    """Write ``CRAWL/crawl.duckdb`` with views over ``manifest``'s files, by paths relative to
    the database file (``cp -a CRAWL COPY`` or ``mv``: the copy reads its own files), in this
    process (:func:`batchcrawl.store.views.refresh_file`). Remote crawls are skipped (returns
    None).

    Returns
    -------
    str or None
        Path of the DuckDB file written.
    """
    return views.refresh_file(crawl, manifest)
