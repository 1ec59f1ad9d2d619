"""Arrow schemas of the crawl tables and the export tables, derived at run time from their one
definition in ``storage/`` (DuckDB DDL: ``schema.sql`` for the crawl directory, ``export.sql`` for
the data lake), and validation of tables before they are written.

DuckDB itself reads the DDL (so the SQL views and the Parquet files can never disagree on types);
nullability comes from ``duckdb_columns()``. A process that was handed the schemas derived
elsewhere (:func:`install`: the crawler's Dask workers, given them by the driver) never loads
DuckDB: loading it and reading the DDL cost a fetch worker ~50 MB of RSS (issue 16, item 3). A
crawl's driver derives them in a child process (:func:`derive_in_child`) for the same reason.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any, TypeAlias

import pyarrow as pa

from batchcrawl.errors import SchemaError

#: Rows :func:`conform` accepts: an Arrow table, columns by name, or one mapping per row.
TableData: TypeAlias = pa.Table | dict[str, list[Any]] | list[dict[str, Any]]

#: Tables of the crawl directory (``storage/schema.sql``).
TABLES = (
    "frontier", "hosts", "fetchlists", "fetched", "links", "edges", "content", "domainlinks",
    "indegree", "text",
)  # fmt: skip
#: Tables of the link graph store (``storage/schema.sql``), listed in its own manifest
#: (``graph/gen=G/graph.json``), not in the crawl's.
GRAPH_TABLES = ("graph_nodes",)
#: Tables the export writes to a data lake (``storage/export.sql``): the Common Crawl-style index.
EXPORT_TABLES = ("index",)
_DDL = {"schema.sql": TABLES + GRAPH_TABLES, "export.sql": EXPORT_TABLES}


def storage_dir() -> Path:
    """The ``storage/`` folder: packaged as ``batchcrawl/_storage`` in a wheel, or the repository's
    top-level ``storage/`` in a source checkout."""
    packaged = resources.files("batchcrawl") / "_storage"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "storage"


@functools.cache
def schema_sql(name: str = "schema.sql") -> str:
    """Text of ``storage/NAME`` (default: the crawl tables' DDL)."""
    return (storage_dir() / name).read_text(encoding="utf-8")


#: The schemas :func:`install` was given (None: derive them here, with DuckDB).
_installed: dict[str, pa.Schema] | None = None


@functools.cache
def _derived() -> dict[str, pa.Schema]:
    out: dict[str, pa.Schema] = {}
    for name, tables in _DDL.items():
        out.update(_read_ddl(schema_sql(name), tables))
    return out


def _schemas() -> dict[str, pa.Schema]:
    return _installed if _installed is not None else _derived()


def ddl_digest() -> str:
    """SHA-256 (hex) of the DDL files the schemas are derived from: two processes with the same
    digest derive the same schemas."""
    h = hashlib.sha256()
    for name in sorted(_DDL):
        h.update(name.encode() + b"\0" + schema_sql(name).encode("utf-8") + b"\0")
    return h.hexdigest()


def exported() -> dict[str, object]:
    """This process's schemas, to hand to another process's :func:`install`: ``{"ddl_digest":
    str, "schemas": {table: bytes}}`` (each schema in Arrow's IPC form: types, nullability,
    metadata)."""
    return {
        "ddl_digest": ddl_digest(),
        "schemas": {t: s.serialize().to_pybytes() for t, s in _schemas().items()},
    }


def install(given: dict[str, object]) -> bool:
    """Use the schemas of ``given`` (:func:`exported` of another process) instead of deriving them
    with DuckDB. Installed only when ``given`` was derived from the same DDL as this process's
    (:func:`ddl_digest`: a worker of another batchcrawl version derives its own); returns whether
    it was."""
    global _installed
    if given.get("ddl_digest") != ddl_digest():
        return False
    blobs = given["schemas"]
    assert isinstance(blobs, dict)
    _installed = {t: pa.ipc.read_schema(pa.py_buffer(b)) for t, b in blobs.items()}
    _required.cache_clear()
    return True


def prepare_without_duckdb() -> None:
    """Have this process's schemas ready without it loading DuckDB for them (a crawl's driver,
    before it hands them to its workers): nothing to do when they were installed (:func:`install`)
    or DuckDB is loaded here already (deriving them in this process then costs no memory);
    otherwise :func:`derive_in_child`.

    Raises
    ------
    batchcrawl.store.child.ChildFailed
        The child could not derive them.
    """
    if _installed is None and "duckdb" not in sys.modules:
        derive_in_child()


def derive_in_child() -> bool:
    """Derive the schemas in a child process (``python -m batchcrawl.store.schemas``) and
    :func:`install` them here, so that this process never loads DuckDB (a crawl's driver: about
    0.3 s once, against ~50 MB for as long as it runs). Returns whether they were installed.

    Raises
    ------
    batchcrawl.store.child.ChildFailed
        The child could not derive them (its message is in the exception).
    """
    from batchcrawl.store.child import run_module

    out = json.loads(run_module(__name__, b"", 120.0))
    given = {"ddl_digest": out["ddl_digest"],
             "schemas": {t: base64.b64decode(b) for t, b in out["schemas"].items()}}  # fmt: skip
    return install(given)


def _read_ddl(ddl: str, tables: tuple[str, ...]) -> dict[str, pa.Schema]:
    import duckdb  # here, not at the top: a process given its schemas (install) never loads it

    con = duckdb.connect(":memory:")
    try:
        con.execute(ddl)
        out: dict[str, pa.Schema] = {}
        for table in tables:
            arrow = con.sql(f'SELECT * FROM "{table}" LIMIT 0').to_arrow_table().schema
            nullable = dict(
                con.execute(
                    "SELECT column_name, is_nullable FROM duckdb_columns() WHERE table_name = ?",
                    [table],
                ).fetchall()
            )
            out[table] = pa.schema(
                [pa.field(f.name, f.type, nullable=bool(nullable[f.name])) for f in arrow]
            )
        return out
    finally:
        con.close()


def schema(table: str) -> pa.Schema:
    """Arrow schema of ``table`` (one of :data:`TABLES`, :data:`GRAPH_TABLES` or
    :data:`EXPORT_TABLES`).

    Raises
    ------
    SchemaError
        ``table`` is not a known table.
    """
    try:
        return _schemas()[table]
    except KeyError:
        known = ", ".join(TABLES + GRAPH_TABLES + EXPORT_TABLES)
        raise SchemaError(f"unknown table {table!r}; tables are {known}") from None


#: Columns of a ``fetchlists`` row that place it (which round, which shard) rather than describe the
#: URL; the other columns are a fetch item's.
FETCHLIST_PLACEMENT = ("round", "shard")


@functools.cache
def fetch_item_columns() -> tuple[str, ...]:
    """Columns of one fetch item, in schema order: the ``fetchlists`` columns without
    :data:`FETCHLIST_PLACEMENT`.

    The one list behind :class:`batchcrawl.records.FetchItem` (a test checks its fields against
    it), generate's candidate tables and the fetch lists a shard reads.
    """
    return tuple(n for n in schema("fetchlists").names if n not in FETCHLIST_PLACEMENT)


def empty(table: str) -> pa.Table:
    """A zero-row table with the schema of ``table``."""
    return schema(table).empty_table()


def conform(table: str, data: TableData) -> pa.Table:
    """Return ``data`` as an Arrow table with exactly the schema of ``table``.

    Columns are reordered and safely cast (e.g. int64 to uint64, timestamp units); missing nullable
    columns are filled with nulls.

    Raises
    ------
    SchemaError
        A column is unknown, a non-nullable column is missing or holds nulls, or a value cannot be
        cast safely. The message names the table and the column.
    """
    target = schema(table)
    if isinstance(data, list):
        data = pa.Table.from_pylist(data) if data else target.empty_table()
    elif isinstance(data, dict):
        data = pa.table(data) if data else target.empty_table()
    if data.schema.equals(target):  # already conforming (a table read back, or one conform made)
        _check_required(table, target, data)
        same = data.schema.metadata == target.metadata
        return data if same else data.replace_schema_metadata(target.metadata)
    given = {name: i for i, name in enumerate(data.column_names)}
    if len(given) < data.num_columns:
        twice = sorted({n for n in data.column_names if data.column_names.count(n) > 1})
        raise SchemaError(f"table {table}: column(s) {twice} given more than once")
    extra = set(given) - set(target.names)
    if extra:
        raise SchemaError(f"table {table}: unknown column(s) {sorted(extra)}")
    columns = []
    for f in target:
        if f.name in given:
            col = data.column(given[f.name])
            if col.type != f.type:
                # sub-millisecond precision is dropped on purpose (TIMESTAMP_MS columns)
                lossy_ok = pa.types.is_timestamp(f.type) and pa.types.is_timestamp(col.type)
                try:
                    col = col.cast(f.type, safe=not lossy_ok)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                    raise SchemaError(
                        f"table {table}: column {f.name} has type {col.type}, expected {f.type}: {exc}"
                    ) from None
        elif f.nullable:
            col = pa.nulls(data.num_rows, type=f.type)
        else:
            raise SchemaError(f"table {table}: required column {f.name} is missing")
        columns.append(col)
    out = pa.Table.from_arrays(columns, schema=target)
    _check_required(table, target, out)
    return out


def _check_required(table: str, target: pa.Schema, data: pa.Table) -> None:
    """Raise :class:`SchemaError` when a non-nullable column of ``target`` holds nulls in ``data``
    (whose columns are ``target``'s, in order)."""
    for i in _required(table):
        if data.column(i).null_count:
            raise SchemaError(
                f"table {table}: column {target.field(i).name} must not contain nulls"
            )


@functools.cache
def _required(table: str) -> tuple[int, ...]:
    """Indexes of ``table``'s non-nullable columns."""
    target = schema(table)
    return tuple(i for i, f in enumerate(target) if not f.nullable)


def _main() -> int:
    """Child process of :func:`derive_in_child`: print :func:`exported` as JSON (base64)."""
    given = exported()
    blobs = given["schemas"]
    assert isinstance(blobs, dict)
    schemas = {t: base64.b64encode(b).decode("ascii") for t, b in blobs.items()}
    sys.stdout.write(json.dumps({"ddl_digest": given["ddl_digest"], "schemas": schemas}))
    return 0


if __name__ == "__main__":
    # flushed, then ended without the C library's exit handlers: DuckDB's and Arrow's native
    # thread pools abort now and then in their teardown (batchcrawl.console.early._end_process)
    _code = _main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_code)
