"""A table map without column names (binlog_row_metadata=MINIMAL), named from the schema by position, and its guards.

The real bytes first: rust_mysql_common's minimal_row_metadata.000001 (MySQL 8.0, MINIMAL row metadata), whose
ASSERTED c5 is an INT UNSIGNED 3230202323, served by the MySQL protocol stub and read by the library as the sync
reads it. Then the mapping on the library's Column objects: the generated reader and the library take the same
names, signedness, charsets and ENUM/SET labels from the schema, and a table map that is not the schema's stops
the table instead of being mapped.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import closing
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pymysqlreplication.column import Column
from pymysqlreplication.constants import FIELD_TYPE, NONE_SOURCE
from pymysqlreplication.row_event import TableMapEvent, WriteRowsEvent

from cdc_lib.binlog.column_positions import mismatch, name_by_position
from cdc_lib.binlog.row_decoder import FastRows, RowImageReader, build_reader, prepare_columns
from cdc_lib.binlog.stream import open_stream
from cdc_lib.config.model import SourceConfig
from cdc_lib.errors import SchemaChangeError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from tests.mysql_stub import BinlogFile, MySQLStub, StubColumn, StubTable

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mysql-binlogs"
MINIMAL_ROW_METADATA = FIXTURES / "rust_mysql_common" / "minimal_row_metadata.000001"
T1 = StubTable("noria", "t1", (
    StubColumn("c1", "int", nullable=False), StubColumn("c2", "blob"), StubColumn("c3", "char(2)"),
    StubColumn("c4", "int"), StubColumn("c5", "int unsigned"),
), primary_key=("c1",))


def schema_of(table: StubTable) -> TableSchema:
    columns = tuple(
        ColumnInfo(name, data_type, column_type, nullable == "YES", precision, scale, fsp, default, charset, collation)
        for name, data_type, column_type, nullable, precision, scale, fsp, default, charset, collation
        in (column.information_schema() for column in table.columns)
    )
    return TableSchema(TableRef(table.database, table.name), columns, table.primary_key)


def file_events(path: Path, table: StubTable) -> Generator[Any, None, None]:
    """The library's events of a binlog file, streamed by the stub as a MySQL server sends them."""
    file = BinlogFile.read(path)
    with MySQLStub.serving([file], [table]) as stub:
        source = SourceConfig(host="127.0.0.1", port=stub.port, user=stub.user, password=stub.password,
                              server_id=4244, tables=())
        stream = open_stream(source, BinlogPosition(file.name, 4), events=None,
                             tables=[TableRef(table.database, table.name)])
        try:
            yield from stream
        finally:
            stream.close()


def minimal_write(table: StubTable) -> tuple[Any, Any]:
    """The file's TABLE_MAP and WRITE_ROWS events, the rows not read yet."""
    with closing(file_events(MINIMAL_ROW_METADATA, table)) as events:
        table_map = next(event for event in events if isinstance(event, TableMapEvent))
        write = next(event for event in events if isinstance(event, WriteRowsEvent))
    return table_map, write


def test_the_real_minimal_table_maps_int_unsigned_reads_as_the_asserted_value() -> None:
    """ASSERTED (rust_mysql_common): c5 = 3230202323; the library alone reads it signed, -1064764973, unnamed."""
    table_map, write = minimal_write(T1)
    # MINIMAL: no names; the SIGNEDNESS (c5 unsigned) and c3's collation 255 in the table map are kept.
    assert [column.name for column in table_map.columns] == [None] * 5
    assert [column.binlake_binlog_unsigned for column in table_map.columns] == [False, None, None, False, True]
    assert table_map.columns[2].collation_name == "utf8mb4_0900_ai_ci"
    prepare_columns(write.columns, schema_of(T1))
    (row,) = write.rows
    # The image is MINIMAL (c1, c3, c5 only): c2 and c4 are absent, which table_rows.require_full_images refuses.
    assert row["values"] == {"c1": 1, "c2": None, "c3": "a", "c4": None, "c5": 3230202323}
    assert row["none_sources"] == {"c2": NONE_SOURCE.COLS_BITMAP, "c4": NONE_SOURCE.COLS_BITMAP}


def test_the_real_minimal_table_map_refuses_a_schema_that_says_signed() -> None:
    signed = StubTable("noria", "t1", (*T1.columns[:4], StubColumn("c5", "int")), primary_key=("c1",))
    _, write = minimal_write(signed)
    with pytest.raises(SchemaChangeError, match=r"column 5 \(c5 int\): the binlog says UNSIGNED") as raised:
        prepare_columns(write.columns, schema_of(signed))
    assert raised.value.table == "noria.t1"
    assert "binlake snapshot --table noria.t1" in raised.value.remedy
    assert "binlog_row_metadata=FULL" in raised.value.remedy


# -- on the library's Column objects -----------------------------------------------------------------


def info(name: str, data_type: str, column_type: str, **extra: Any) -> ColumnInfo:
    return ColumnInfo(name, data_type, column_type, True, **extra)


ID = ColumnInfo("id", "int", "int(11)", False)


def nameless(kind: int, **metadata: Any) -> Column:
    """A table map column as the library parses MINIMAL metadata: a type and its metadata, no name."""
    defaults = {"name": None, "unsigned": False, "collation_name": None, "character_set_name": None,
                "enum_values": None, "set_values": None}
    return Column(type=kind, **{**defaults, **metadata})


def table(*columns: ColumnInfo) -> TableSchema:
    return TableSchema(TableRef.parse("db.t"), (ID, *columns), ("id",))


def decode(schema: TableSchema, columns: list[Column], image: bytes) -> list[tuple[Any, ...]]:
    reader = build_reader(schema, columns)
    assert isinstance(reader, RowImageReader), reader
    return reader.decode(image, 0, len(image))


def test_unsigned_comes_from_the_schema_for_both_readers() -> None:
    schema = table(info("n", "int", "int(10) unsigned"), info("b", "bigint", "bigint(20) unsigned"))
    columns = [nameless(FIELD_TYPE.LONG), nameless(FIELD_TYPE.LONG), nameless(FIELD_TYPE.LONGLONG)]
    image = b"\x00" + (7).to_bytes(4, "little") + (3230202323).to_bytes(4, "little") + (2**64 - 1).to_bytes(8, "little")
    assert decode(schema, columns, image) == [(7, 3230202323, Decimal(2**64 - 1))]
    # The library reads the same Column objects: names and signedness set on them.
    assert [(column.name, column.unsigned) for column in columns] == [("id", False), ("n", True), ("b", True)]


def test_charset_and_enum_set_labels_come_from_the_schema() -> None:
    schema = table(
        info("s", "varchar", "varchar(10)", character_set="latin1"),
        info("e", "enum", "enum('caf\u00e9','b''c')", character_set="latin1"),
        info("m", "set", "set('x','y','z')", character_set="utf8mb4"),
        info("raw", "varbinary", "varbinary(4)"),
    )
    columns = [nameless(FIELD_TYPE.LONG), nameless(FIELD_TYPE.VARCHAR, max_length=10),
               nameless(FIELD_TYPE.ENUM, size=1), nameless(FIELD_TYPE.SET, size=1),
               nameless(FIELD_TYPE.VARCHAR, max_length=4)]
    image = (b"\x00" + (1).to_bytes(4, "little") + b"\x03\x81\xe9a" + b"\x02" + b"\x05" + b"\x02\xff\x00")
    # latin1 is MySQL's cp1252 with 0x81 passed through; ENUM index 2 and SET bits 0 and 2 take the schema's labels.
    assert decode(schema, columns, image) == [(1, "\x81\u00e9a", "b'c", "x,z", b"\xff\x00")]
    assert columns[2].enum_values == ["", "caf\u00e9", "b'c"] and columns[3].set_values == ["x", "y", "z"]


def test_the_binlogs_own_collation_is_kept_and_checked() -> None:
    schema = table(info("s", "varchar", "varchar(10)", character_set="utf8mb4"))
    logged = [nameless(FIELD_TYPE.LONG), nameless(FIELD_TYPE.VARCHAR, max_length=40, collation_name="utf8mb4_bin")]
    prepare_columns(logged, schema)
    assert logged[1].binlake_charset == "utf8mb4"
    other = [nameless(FIELD_TYPE.LONG), nameless(FIELD_TYPE.VARCHAR, max_length=40, collation_name="latin1_swedish_ci")]
    with pytest.raises(SchemaChangeError, match=r"column 2 \(s varchar\(10\)\): the binlog's charset is latin1"):
        prepare_columns(other, schema)
    as_bytes = [nameless(FIELD_TYPE.LONG), nameless(FIELD_TYPE.VARCHAR, max_length=40, collation_name="binary")]
    with pytest.raises(SchemaChangeError, match="logs bytes for text"):
        prepare_columns(as_bytes, schema)


def test_a_column_count_that_differs_stops_the_table() -> None:
    schema = table(info("v", "int", "int(11)"))
    with pytest.raises(SchemaChangeError, match="the binlog has 3 columns, the schema binlake holds has 2") as raised:
        prepare_columns([nameless(FIELD_TYPE.LONG)] * 3, schema)
    assert raised.value.table == "db.t" and "binlake snapshot --table db.t" in raised.value.remedy
    with pytest.raises(SchemaChangeError, match="has 1 columns"):
        FastRows(schema).images(SimpleNamespace(columns=[nameless(FIELD_TYPE.LONG)], number_of_columns=1,
                                                columns_present_bitmap=b"\x01"))


@pytest.mark.parametrize(
    ("column", "schema_column", "reason"),
    [
        (nameless(FIELD_TYPE.LONG), info("x", "varchar", "varchar(4)"), "logs type 3, not one MySQL logs for varchar"),
        (nameless(FIELD_TYPE.LONG), info("x", "bigint", "bigint(20)"), "not one MySQL logs for bigint"),
        (nameless(FIELD_TYPE.VARCHAR, max_length=4), info("x", "char", "char(4)"), "not one MySQL logs for char"),
        (nameless(FIELD_TYPE.STRING, max_length=4), info("x", "enum", "enum('a')"), "not one MySQL logs for enum"),
        (nameless(FIELD_TYPE.BLOB, length_size=2), info("x", "json", "json"), "2-byte length"),
        (nameless(FIELD_TYPE.BLOB, length_size=2), info("x", "mediumtext", "mediumtext"), "2-byte length"),
        (nameless(FIELD_TYPE.NEWDECIMAL, precision=10, decimals=2),
         info("x", "decimal", "decimal(10,3)", numeric_precision=10, numeric_scale=3), "DECIMAL is (10,2)"),
        (nameless(FIELD_TYPE.DATETIME2, fsp=3), info("x", "datetime", "datetime(6)", datetime_precision=6),
         "3 fractional digits"),
        (nameless(FIELD_TYPE.TIMESTAMP2, fsp=0), info("x", "datetime", "datetime"), "not one MySQL logs for datetime"),
        (nameless(FIELD_TYPE.BIT, bits=3, bytes=1), info("x", "bit", "bit(8)"), "BIT has 3 bits"),
        (nameless(FIELD_TYPE.ENUM, size=2), info("x", "enum", "enum('a','b')"), "ENUM takes 2 bytes"),
        (nameless(FIELD_TYPE.SET, size=1), info("x", "set", "set(" + ",".join(f"'m{n}'" for n in range(9)) + ")"),
         "SET takes 1 bytes, not what 9 members take"),
        (nameless(FIELD_TYPE.LONG, binlake_binlog_unsigned=False), info("x", "int", "int(10) unsigned"),
         "the binlog says signed"),
        (nameless(FIELD_TYPE.VARCHAR, max_length=4, collation_name="utf8mb4_bin"),
         info("x", "varbinary", "varbinary(4)"), "logs text (utf8mb4) for bytes"),
        (nameless(FIELD_TYPE.JSON, length_size=4), info("x", "longtext", "longtext"),
         "not one MySQL logs for longtext"),
        (nameless(242), info("x", "vector", "vector(2)"), "no known schema type"),
        # A FULL table map read by a stream that ignored its names (the server said MINIMAL when it connected).
        (nameless(FIELD_TYPE.LONG, binlake_binlog_name="y"), info("x", "int", "int(11)"), "the binlog names it y"),
    ],
)
def test_a_binlog_column_that_is_not_the_schemas_stops_the_table(column: Column, schema_column: ColumnInfo,
                                                                 reason: str) -> None:
    assert reason in (mismatch(column, schema_column) or "")
    columns = [nameless(FIELD_TYPE.LONG), column]
    with pytest.raises(SchemaChangeError, match="cannot be matched by position") as raised:
        name_by_position(columns, table(schema_column))
    assert reason in raised.value.cause
    # Nothing was named: the library would not read the rows under a guessed name either.
    assert [getattr(c, "name", None) for c in columns] == [None, None]


@pytest.mark.parametrize(
    ("column", "schema_column"),
    [
        (nameless(FIELD_TYPE.TINY), info("x", "tinyint", "tinyint(1)")),
        (nameless(FIELD_TYPE.INT24), info("x", "mediumint", "mediumint(8) unsigned")),
        (nameless(FIELD_TYPE.DOUBLE, size=8), info("x", "double", "double")),
        (nameless(FIELD_TYPE.FLOAT, size=4), info("x", "float", "float")),
        (nameless(FIELD_TYPE.NEWDECIMAL, precision=12, decimals=3),
         info("x", "decimal", "decimal(12,3)", numeric_precision=12, numeric_scale=3)),
        (nameless(FIELD_TYPE.YEAR), info("x", "year", "year(4)")),
        (nameless(FIELD_TYPE.DATE), info("x", "date", "date")),
        (nameless(FIELD_TYPE.TIME2, fsp=0), info("x", "time", "time")),
        (nameless(FIELD_TYPE.DATETIME2, fsp=6), info("x", "datetime", "datetime(6)", datetime_precision=6)),
        (nameless(FIELD_TYPE.TIMESTAMP2, fsp=2), info("x", "timestamp", "timestamp(2)", datetime_precision=2)),
        (nameless(FIELD_TYPE.STRING, max_length=8), info("x", "char", "char(2)", character_set="utf8mb4")),
        (nameless(FIELD_TYPE.STRING, max_length=16, collation_name="binary"), info("x", "binary", "binary(16)")),
        (nameless(FIELD_TYPE.BLOB, length_size=2), info("x", "text", "text", character_set="utf8mb4")),
        (nameless(FIELD_TYPE.BLOB, length_size=4), info("x", "longblob", "longblob")),
        (nameless(FIELD_TYPE.BLOB, length_size=4), info("x", "longtext", "longtext", character_set="utf8mb4")),
        (nameless(FIELD_TYPE.JSON, length_size=4), info("x", "json", "json")),
        (nameless(FIELD_TYPE.BIT, bits=8, bytes=1), info("x", "bit", "bit(8)")),
        (nameless(FIELD_TYPE.GEOMETRY, length_size=4), info("x", "point", "point")),
        (nameless(FIELD_TYPE.LONG, binlake_binlog_unsigned=True), info("x", "int", "int(10) unsigned")),
        (nameless(FIELD_TYPE.LONG, binlake_binlog_name="x"), info("x", "int", "int(11)")),
    ],
)
def test_what_mysql_logs_for_each_schema_type_is_mapped(column: Column, schema_column: ColumnInfo) -> None:
    assert mismatch(column, schema_column) is None
    columns = [nameless(FIELD_TYPE.LONG), column]
    name_by_position(columns, table(schema_column))
    assert [c.name for c in columns] == ["id", "x"]


def test_the_same_table_map_is_named_again_for_the_schema_after_ddl() -> None:
    """A table map's Column objects are reused while its bytes are the same; a RENAME COLUMN does not change them."""
    columns = [nameless(FIELD_TYPE.LONG), nameless(FIELD_TYPE.LONG)]
    before = table(info("old", "int", "int(11)"))
    after = table(info("new", "int", "int(11) unsigned"))
    prepare_columns(columns, before)
    assert [(c.name, c.unsigned) for c in columns] == [("id", False), ("old", False)]
    prepare_columns(columns, after)
    assert [(c.name, c.unsigned) for c in columns] == [("id", False), ("new", True)]
    image = b"\x00" + (1).to_bytes(4, "little") + (2**32 - 1).to_bytes(4, "little")
    assert decode(after, columns, image) == [(1, 2**32 - 1)]


def test_a_table_map_with_names_is_not_touched() -> None:
    columns = [Column(type=FIELD_TYPE.LONG, name="id", unsigned=False), Column(type=FIELD_TYPE.LONG, name="v",
                                                                                 unsigned=False)]
    prepare_columns(columns, table(info("v", "int", "int(10) unsigned")))
    # Names from the binlog: matched by name as always (the binlog's signedness stands).
    assert [(c.name, c.unsigned) for c in columns] == [("id", False), ("v", False)]
    assert not hasattr(columns[1], "binlake_positional")
