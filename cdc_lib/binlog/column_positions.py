"""A table map without column names (binlog_row_metadata=MINIMAL or NO_LOG), named from the schema by position.

MySQL 8.0 and 8.4 log MINIMAL row metadata by default: a TABLE_MAP holds each column's binlog type and type
metadata (length prefix, DECIMAL precision and scale, fractional seconds, BIT width, ENUM/SET width), the
SIGNEDNESS of numeric columns and their charsets, but no names and no ENUM/SET labels; MariaDB's NO_LOG (its
default) holds no optional metadata at all. The binlog's columns are in the table's column order, so the schema
binlake holds for the table at that point of the binlog (information_schema at the snapshot, evolved by every DDL
statement it has read since) names them: column i is the schema's column i.

That is exact only while the schema is the table's. DDL that binlake did not read (a session with
sql_log_bin=0, a schema changed before the snapshot's binlog window) would shift or retype columns, so the mapping
is guarded: the column count must match, and each binlog column's type and type metadata must be what MySQL logs
for the schema column's type (`mismatch`); where the binlog carries signedness or a charset, it must agree too.
Any difference stops the table (SchemaChangeError) rather than mapping a value to the wrong column. What no guard
can see is two columns of the same type and width swapped or renamed; binlog_row_metadata=FULL rules that out,
and the docs say so (docs/servers.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pymysqlreplication.constants import FIELD_TYPE

from cdc_lib.errors import SchemaChangeError
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import ColumnInfo

#: The information_schema DATA_TYPEs each binlog column type is logged for (MySQL 8.x and MariaDB 10.5+).
SCHEMA_TYPES: dict[int, frozenset[str]] = {
    FIELD_TYPE.TINY: frozenset({"tinyint"}),
    FIELD_TYPE.SHORT: frozenset({"smallint"}),
    FIELD_TYPE.INT24: frozenset({"mediumint"}),
    FIELD_TYPE.LONG: frozenset({"int", "integer"}),
    FIELD_TYPE.LONGLONG: frozenset({"bigint"}),
    FIELD_TYPE.FLOAT: frozenset({"float"}),
    FIELD_TYPE.DOUBLE: frozenset({"double", "real", "double precision"}),
    FIELD_TYPE.NEWDECIMAL: frozenset({"decimal", "numeric"}),
    FIELD_TYPE.YEAR: frozenset({"year"}),
    FIELD_TYPE.DATE: frozenset({"date"}),
    FIELD_TYPE.NEWDATE: frozenset({"date"}),
    FIELD_TYPE.TIME: frozenset({"time"}),
    FIELD_TYPE.TIME2: frozenset({"time"}),
    FIELD_TYPE.DATETIME: frozenset({"datetime"}),
    FIELD_TYPE.DATETIME2: frozenset({"datetime"}),
    FIELD_TYPE.TIMESTAMP: frozenset({"timestamp"}),
    FIELD_TYPE.TIMESTAMP2: frozenset({"timestamp"}),
    FIELD_TYPE.VARCHAR: frozenset({"varchar", "varbinary"}),
    FIELD_TYPE.VAR_STRING: frozenset({"varchar", "varbinary"}),
    # CHAR and BINARY; ENUM and SET are logged as STRING too, and the library reads their real type from its metadata.
    FIELD_TYPE.STRING: frozenset({"char", "binary"}),
    FIELD_TYPE.ENUM: frozenset({"enum"}),
    FIELD_TYPE.SET: frozenset({"set"}),
    # MariaDB's JSON is LONGTEXT (information_schema says longtext); MySQL's has its own binlog type.
    FIELD_TYPE.BLOB: frozenset({"tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob",
                                "longblob", "json"}),
    FIELD_TYPE.JSON: frozenset({"json"}),
    FIELD_TYPE.BIT: frozenset({"bit"}),
    FIELD_TYPE.GEOMETRY: frozenset({"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
                                    "multipolygon", "geometrycollection", "geomcollection"}),
}
#: The length prefix MySQL logs for each BLOB/TEXT size (the table map's metadata byte).
BLOB_PREFIX = {"tinytext": 1, "tinyblob": 1, "text": 2, "blob": 2, "mediumtext": 3, "mediumblob": 3,
               "longtext": 4, "longblob": 4, "json": 4}
#: Schema types whose values are bytes: the binlog's charset for them is 'binary'.
BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_FRACTIONAL = frozenset({FIELD_TYPE.TIME2, FIELD_TYPE.DATETIME2, FIELD_TYPE.TIMESTAMP2})
_INTEGERS = frozenset({FIELD_TYPE.TINY, FIELD_TYPE.SHORT, FIELD_TYPE.INT24, FIELD_TYPE.LONG, FIELD_TYPE.LONGLONG})
_NUMERIC = _INTEGERS | {FIELD_TYPE.NEWDECIMAL, FIELD_TYPE.FLOAT, FIELD_TYPE.DOUBLE}


def unnamed(columns: Sequence[Any]) -> bool:
    """Whether a table map's columns came without names (or were named here before, from a schema)."""
    return any(getattr(column, "name", None) is None or getattr(column, "binlake_positional", False)
               for column in columns)


def name_by_position(columns: Sequence[Any], schema: TableSchema, *,
                     against: str = "the schema binlake holds") -> None:
    """Name a nameless table map's columns from `schema` by position, and give them its signedness and labels.

    Idempotent per schema: the same columns named for another schema (after DDL) are named again.

    Raises:
        SchemaChangeError: the binlog's columns are not the schema's (count, type, type metadata, signedness or
            charset differ): the schema binlake holds is not the table's, and a mapping would be a guess.
    """
    if columns and getattr(columns[0], "binlake_named_for", None) is schema:
        return
    table = schema.table.name
    if len(columns) != len(schema.columns):
        raise _mismatched(table, against, f"the binlog has {len(columns)} columns, {against} has "
                                          f"{len(schema.columns)}")
    problems = [
        f"column {index + 1} ({info.name} {info.column_type}): {problem}"
        for index, (column, info) in enumerate(zip(columns, schema.columns, strict=True))
        if (problem := mismatch(column, info)) is not None
    ]
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise _mismatched(table, against, "; ".join(problems[:3]) + more)
    for column, info in zip(columns, schema.columns, strict=True):
        column.name = info.name
        column.binlake_positional = True
        if column.type in _NUMERIC:
            column.unsigned = info.unsigned
        members = info.set_members
        if column.type == FIELD_TYPE.ENUM:
            column.enum_values = ["", *members]  # index 0 is the empty string MySQL stores for an invalid value
        elif column.type == FIELD_TYPE.SET:
            column.set_values = list(members)
        if getattr(column, "collation_name", None) is None and info.data_type.lower() in BINARY_TYPES:
            column.collation_name = "binary"  # what MySQL logs for bytes (collation 63); the charset reads it so
        # Named anew: row_decoder.prepare_columns sets the charset again from the binlog's and the schema's.
        column.binlake_charset = None
    columns[0].binlake_named_for = schema


def mismatch(column: Any, info: ColumnInfo) -> str | None:
    """Why a binlog column cannot be the schema column `info`, or None when MySQL logs that type this way."""
    kind = column.type
    data_type = info.data_type.lower()
    logged_name = getattr(column, "binlake_binlog_name", None)
    if logged_name is not None and logged_name != info.name:
        return f"the binlog names it {logged_name}"
    expected = SCHEMA_TYPES.get(kind)
    if expected is None:
        return f"binlog type {kind} has no known schema type: it is not mapped by position"
    if data_type not in expected:
        return f"the binlog logs type {kind}, not one MySQL logs for {data_type}"
    if kind == FIELD_TYPE.NEWDECIMAL and (column.precision, column.decimals) != (info.numeric_precision,
                                                                              info.numeric_scale):
        return f"the binlog's DECIMAL is ({column.precision},{column.decimals})"
    if kind in _FRACTIONAL and column.fsp != (info.datetime_precision or 0):
        return f"the binlog has {column.fsp} fractional digits"
    if kind == FIELD_TYPE.BIT and column.bits != info.bit_width:
        return f"the binlog's BIT has {column.bits} bits"
    if kind == FIELD_TYPE.BLOB and column.length_size != BLOB_PREFIX.get(data_type):
        return f"the binlog's value has a {column.length_size}-byte length, another size of TEXT/BLOB"
    if kind == FIELD_TYPE.ENUM and column.size != (1 if len(info.set_members) < 256 else 2):
        return f"the binlog's ENUM takes {column.size} bytes, not what {len(info.set_members)} labels take"
    if kind == FIELD_TYPE.SET and column.size != _set_bytes(len(info.set_members)):
        return f"the binlog's SET takes {column.size} bytes, not what {len(info.set_members)} members take"
    logged_unsigned = getattr(column, "binlake_binlog_unsigned", None)
    if kind in _NUMERIC and logged_unsigned is not None and logged_unsigned != info.unsigned:
        return f"the binlog says {'UNSIGNED' if logged_unsigned else 'signed'}"
    return _charset_mismatch(column, info)


def _set_bytes(members: int) -> int:
    return (members + 7) // 8 if members <= 32 else 8


def _charset_mismatch(column: Any, info: ColumnInfo) -> str | None:
    """The binlog's charset (MINIMAL metadata logs it) against the schema's: bytes against text, or another charset."""
    collation = getattr(column, "collation_name", None)
    if not collation:
        return None
    logged = str(collation).split("_", 1)[0].lower()
    logged = "utf8mb3" if logged == "utf8" else logged
    if info.data_type.lower() in BINARY_TYPES:
        return None if logged == "binary" else f"the binlog logs text ({logged}) for bytes"
    schema_charset = (info.character_set or "").lower()
    schema_charset = "utf8mb3" if schema_charset == "utf8" else schema_charset
    if logged == "binary" and column.type in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING, FIELD_TYPE.BLOB) and \
            info.data_type.lower() != "json":
        return "the binlog logs bytes for text"
    if schema_charset and logged != "binary" and logged != schema_charset:
        return f"the binlog's charset is {logged}"
    return None


def _mismatched(table: str, against: str, detail: str) -> SchemaChangeError:
    return SchemaChangeError(
        "the binlog names no columns (binlog_row_metadata is MINIMAL or NO_LOG) and its columns are not "
        f"{against}, so they cannot be matched by position: {detail}",
        remedy=f"re-snapshot the table so binlake reads its schema again: binlake snapshot --table {table}; to have "
        "the binlog name its columns, SET GLOBAL binlog_row_metadata=FULL (and in my.cnf) before",
        table=table,
    )
