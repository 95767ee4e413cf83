"""MySQL 9's VECTOR (and MariaDB 11.7's): refused by name on every path, never landed as bytes or dropped.

No fixture holds a VECTOR column and no server here has one; the binlog bytes below are built by hand from
MySQL's documentation (MYSQL_TYPE_VECTOR = 242; the value is a little-endian float32 array after a length, like
a BLOB's; the table map's metadata is the length's byte count)."""

from __future__ import annotations

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
