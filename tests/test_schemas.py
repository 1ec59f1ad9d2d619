"""The table schemas in storage/ (batchcrawl.store.schemas): crawl tables and the export's index."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from batchcrawl.errors import SchemaError
from batchcrawl.records import FetchItem
from batchcrawl.store import schemas

#: Common Crawl's cc-index-table columns (cc-index-schema-flat.json) with their Arrow types, for the
#: columns batchcrawl fills; the oracle the DDL in storage/export.sql must match.
CC_WARC_LOCATION = {
    "url_surtkey": pa.string(),
    "fetch_time": pa.timestamp("ms"),
    "fetch_status": pa.int16(),
    "url_port": pa.int32(),
    "warc_filename": pa.string(),
    "warc_record_offset": pa.int32(),
    "warc_record_length": pa.int32(),
    "warc_segment": pa.string(),
}


def test_index_schema_is_read_from_storage_and_has_common_crawls_types():
    assert "index" in schemas.schema_sql("export.sql")
    index = schemas.schema("index")
    for name, type_ in CC_WARC_LOCATION.items():
        assert index.field(name).type == type_, name
    # Common Crawl's columns in its order, then batchcrawl's one extension (issue 31)
    assert index.names[0] == "url_surtkey" and index.names[-3:-1] == ["crawl", "subset"]
    assert index.names[-1] == "content_signal" and index.field("content_signal").nullable
    assert not index.field("url").nullable and index.field("url_query").nullable


def test_index_is_not_a_crawl_directory_table():
    assert "index" not in schemas.TABLES and schemas.EXPORT_TABLES == ("index",)


def test_conform_validates_index_rows():
    with pytest.raises(SchemaError, match="required column url_surtkey"):
        schemas.conform("index", {"url": ["http://a.test/"]})


def test_unknown_table_names_every_known_table():
    with pytest.raises(SchemaError, match="fetched.*index"):
        schemas.schema("indx")


def test_fetch_item_is_a_fetchlists_row_without_its_placement():
    columns = schemas.fetch_item_columns()
    assert [f.name for f in dataclasses.fields(FetchItem)] == list(columns)
    fetchlists = schemas.schema("fetchlists")
    assert list(schemas.FETCHLIST_PLACEMENT) + list(columns) == fetchlists.names
    # a field is nullable in the schema exactly when the item allows None (the validators of the
    # last capture): a fetch list row always makes an item
    for f in dataclasses.fields(FetchItem):
        assert fetchlists.field(f.name).nullable == (f.default is None), f.name
    required = [f.name for f in dataclasses.fields(FetchItem) if f.default is not None]
    row = {c: 1 for c in required} | {"url": "http://a.test/", "host": "a.test", "domain": "a.test"}
    table = schemas.conform("fetchlists", [row | {"round": 3, "shard": 0}])
    assert FetchItem(**table.select(list(columns)).to_pylist()[0]) == FetchItem(**row)


def test_conform_keeps_a_conforming_table_and_still_refuses_nulls_where_required():
    """The fast path (a table already of the schema) is the same check as the slow one."""
    t = schemas.conform("links", {"round": [1], "shard": [0], "seq": [1], "src_url_key": [7],
                                  "dst_url_key": pa.array([9], pa.uint64()), "dst_url": ["u"],
                                  "dst_host": ["h"], "dst_domain": ["h"], "depth": [1],
                                  "hops_out": [0], "tag": ["a"], "nofollow": [False]})  # fmt: skip
    assert schemas.conform("links", t) is t
    required = next(i for i, f in enumerate(t.schema) if not f.nullable)
    holed = t.set_column(required, t.schema.field(required),
                         pa.nulls(1, t.schema.field(required).type))  # fmt: skip
    assert holed.schema.equals(t.schema)
    with pytest.raises(SchemaError, match="must not contain nulls"):
        schemas.conform("links", holed)
    with pytest.raises(SchemaError, match="must not contain nulls"):  # the slow path too
        schemas.conform("links", holed.select(list(reversed(holed.column_names))))
