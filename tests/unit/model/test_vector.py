"""MySQL 9's VECTOR (and MariaDB 11.7's): refused by name on every path, never landed as bytes or dropped.

No fixture holds a VECTOR column and no server here has one; the binlog bytes below are built by hand from
MySQL's documentation (MYSQL_TYPE_VECTOR = 242; the value is a little-endian float32 array after a length, like
a BLOB's; the table map's metadata is the length's byte count)."""

from __future__ import annotations

import struct

import pytest
from pymysqlreplication.column import Column

from cdc_lib.binlog.row_decoder import build_reader
from cdc_lib.errors import TableError
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo, spark_type_ddl

MYSQL_TYPE_VECTOR = 242
VECTOR = ColumnInfo("v", "vector", "vector(3)", True)


def test_a_vector_column_refuses_its_table_by_name_with_a_remedy() -> None:
    with pytest.raises(TableError, match=r"column 'v' has type vector\(3\), a VECTOR") as raised:
        spark_type_ddl(VECTOR, table="db.t")
    assert "source.tables" in raised.value.remedy and raised.value.table == "db.t"


def test_a_vector_rows_event_stops_its_table_by_name_in_the_row_decoder() -> None:
    # A table that gained a VECTOR column while followed: the schema change stops it first (describe_table maps
    # every column); should a rows event reach the decoder anyway, building its reader names the column too.
    schema = TableSchema(TableRef.parse("db.t"), (ColumnInfo("id", "int", "int(11)", False), VECTOR), ("id",))
    columns = [Column(type=3, name="id", unsigned=False), Column(type=MYSQL_TYPE_VECTOR, name="v", length_size=4)]
    with pytest.raises(TableError, match="a VECTOR"):
        build_reader(schema, columns)


def table_map_event(types: bytes, metadata: bytes, names: list[str]) -> bytes:
    """A TABLE_MAP event (type 19) for db.t as MySQL 8.0+ writes it, charsets and names in its optional metadata."""
    body = (struct.pack("<Q", 77)[:6] + b"\x01\x00" + b"\x02db\x00" + b"\x01t\x00" + bytes([len(types)]) + types
            + bytes([len(metadata)]) + metadata + b"\xff")  # column types, their metadata, all nullable
    names_field = b"".join(bytes([len(name)]) + name.encode() for name in names)
    body += b"\x03\x03\xfc\xff\x00"  # COLUMN_CHARSET: utf8mb4_0900_ai_ci (255) for the one character column
    body += b"\x04" + bytes([len(names_field)]) + names_field  # COLUMN_NAME
    header = struct.pack("<IBIIIH", 0, 19, 1, 19 + len(body) + 4, 0, 0)
    return header + body + b"\0\0\0\0"


def test_a_vector_columns_table_map_metadata_keeps_the_other_columns_right() -> None:
    """python-mysql-replication reads no metadata for type 242, so every later column's metadata, the null bitmap
    and the column names came out shifted; binlake's Column reads VECTOR's one byte (replication_library)."""
    from types import SimpleNamespace

    from pymysql.protocol import MysqlPacket
    from pymysqlreplication.packet import BinLogPacketWrapper
    from pymysqlreplication.row_event import TableMapEvent

    # id INT, v VECTOR(3) (metadata: a 4-byte length), name VARCHAR(100) utf8mb4 (metadata: 400 bytes at most)
    raw = table_map_event(bytes([3, MYSQL_TYPE_VECTOR, 15]), b"\x04" + struct.pack("<H", 400), ["id", "v", "name"])
    tables: dict[int, object] = {}
    connection = SimpleNamespace(charset="utf8mb4", _get_dbms=lambda: "mysql")
    wrapper = BinLogPacketWrapper(
        MysqlPacket(b"\x00" + raw, "utf8"), tables, connection, (9, 0, 0), True, frozenset({TableMapEvent}),
        None, None, None, None, False, False, False, True, False,
    )
    columns = wrapper.event.columns
    assert [column.name for column in columns] == ["id", "v", "name"]
    assert columns[1].type == MYSQL_TYPE_VECTOR and columns[1].length_size == 4
    assert columns[2].max_length == 400
