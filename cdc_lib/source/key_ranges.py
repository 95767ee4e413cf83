"""Primary-key ranges: the one splitter behind the snapshot's JDBC partitions and reconciliation's chunks.

An integer key column is cut arithmetically between its MIN and MAX: two index
lookups, whatever the table's size, at the price of uneven ranges when the keys
are sparse or skewed. Both callers size the cut from `row_count`, which trusts
InnoDB's estimate for large tables rather than scanning an index with COUNT(*).
"""

from __future__ import annotations

import pymysql

from cdc_lib.model.tables import TableRef
from cdc_lib.model.types import ColumnInfo, quote_identifier
from cdc_lib.source.server import query

#: MySQL data types whose values are whole numbers that pymysql returns as `int` (any width, signed or not).
INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
#: From this many rows (as InnoDB estimates them) a table counts as large: its estimate is trusted.
LARGE_TABLE_ROWS = 50_000


def is_integer(column: ColumnInfo) -> bool:
    """Whether a key column can be cut arithmetically."""
    return column.data_type.lower() in INTEGER_TYPES


def table_sql(ref: TableRef) -> str:
    return f"{quote_identifier(ref.database)}.{quote_identifier(ref.table)}"


def row_count(connection: pymysql.connections.Connection, ref: TableRef) -> int:
    """InnoDB's own estimate when it says the table is large; an exact COUNT(*) for small or unanalysed tables.

    The count only sizes ranges, and COUNT(*) on a large table scans a whole index.
    """
    found = query(
        connection,
        "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (ref.database, ref.table),
    )
    estimate = int(found[0][0] or 0) if found else 0
    if estimate >= LARGE_TABLE_ROWS:
        return estimate
    return int(query(connection, f"SELECT COUNT(*) FROM {table_sql(ref)}")[0][0])


def integer_cuts(connection: pymysql.connections.Connection, ref: TableRef, column: str, *, ranges: int) -> list[int]:
    """Up to `ranges - 1` ascending cut points splitting [MIN, MAX] of an integer column into ranges of equal width.

    Range i holds the keys from cut i-1 (inclusive) to cut i (exclusive); the first and last are open-ended.
    An empty table has no cuts.
    """
    key = quote_identifier(column)
    low, high = query(connection, f"SELECT MIN({key}), MAX({key}) FROM {table_sql(ref)}")[0]
    if low is None or ranges <= 1:
        return []
    low, high = int(low), int(high)
    span = high - low + 1
    return sorted({low + span * index // ranges for index in range(1, ranges)} - {low})
