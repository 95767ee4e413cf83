"""A table's schema read from its TABLE_MAP alone, for decoding binlog files without a server (`decode`).

The sync reads a table's columns from information_schema; a binlog file read offline has only its TABLE_MAPs. Their
column types and metadata, and the optional metadata (binlog_row_metadata: MINIMAL gives SIGNEDNESS and charsets,
FULL also names, ENUM/SET labels, primary key), become the `ColumnInfo`s binlake's one type mapping
(`cdc_lib.model.types`) and row decoder (`table_rows.TableDecoder`) take. Lengths are in bytes, as the TABLE_MAP has
them (CHAR(128) in utf8mb4 shows as char(512)).
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.row_event import find_charset

from cdc_lib.binlog.row_decoder import column_charset
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo

_CHARACTER = frozenset({FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING, FIELD_TYPE.STRING, FIELD_TYPE.BLOB})
_NUMERIC = frozenset({FIELD_TYPE.TINY, FIELD_TYPE.SHORT, FIELD_TYPE.INT24, FIELD_TYPE.LONG, FIELD_TYPE.LONGLONG,
                      FIELD_TYPE.NEWDECIMAL, FIELD_TYPE.DECIMAL, FIELD_TYPE.FLOAT, FIELD_TYPE.DOUBLE})
_INTEGERS = {FIELD_TYPE.TINY: "tinyint", FIELD_TYPE.SHORT: "smallint", FIELD_TYPE.INT24: "mediumint",
             FIELD_TYPE.LONG: "int", FIELD_TYPE.LONGLONG: "bigint"}
_TEMPORALS = {FIELD_TYPE.TIME2: "time", FIELD_TYPE.TIME: "time", FIELD_TYPE.DATETIME2: "datetime",
              FIELD_TYPE.DATETIME: "datetime", FIELD_TYPE.TIMESTAMP2: "timestamp", FIELD_TYPE.TIMESTAMP: "timestamp"}
_BLOB_SIZES = {1: "tiny", 2: "", 3: "medium", 4: "long"}


def table_schema(event: Any) -> tuple[TableSchema, str, list[str]]:
    """A TABLE_MAP's table as a schema (`ColumnInfo` per column), how much metadata it had, and notes on what was
    not in it. Where the TABLE_MAP has no column names, the library's columns are named `@1`, `@2`, … and given the
    signedness and charsets of the optional metadata (python-mysql-replication applies those only with names)."""
    columns = event.columns
    metadata = event.optional_metadata
    notes: list[str] = []
    named = bool(metadata.column_name_list)
    level = "full" if named else "minimal"
    if not named:
        notes.append("no column names in the TABLE_MAP (binlog_row_metadata=MINIMAL): columns named by position "
                     "@1, @2, …")
        unsigned = list(metadata.unsigned_column_list or [])
        charsets = list(metadata.charset_collation_list or [])
        labelled = list(metadata.enum_and_set_collation_list or [])
        if not unsigned and any(column.type in _NUMERIC for column in columns):
            notes.append("no SIGNEDNESS metadata read: numbers decoded as signed, as mysqlbinlog does")
        unknown_charset = unlabelled = False
        for index, column in enumerate(columns):
            column.name = f"@{index + 1}"
            if unsigned:
                column.unsigned = bool(unsigned[index])
            if column.type in _CHARACTER or column.type in (FIELD_TYPE.ENUM, FIELD_TYPE.SET):
                ids = charsets if column.type in _CHARACTER else labelled
                if ids:
                    _, collation, _ = find_charset(str(ids.pop(0)), dbms=event.dbms)
                    column.collation_name = collation
                if not getattr(column, "collation_name", None):
                    column.collation_name = "binary"  # shown as bytes: no charset to decode with
                    column.binlake_charset_unknown = True
                    unknown_charset = True
            if _label_by_number(column):
                unlabelled = True
        if unknown_charset:
            notes.append("no charset metadata for some text columns: their values are shown as bytes")
        if unlabelled:
            notes.append("ENUM/SET without labels in the TABLE_MAP: an ENUM shows as its index, a SET as the values "
                         "of its bits (1,4 for 0b101), as mysqlbinlog shows them")
    null_bits = int.from_bytes(bytes(event.null_bitmask), "little")
    infos = tuple(_column_info(column, bool(null_bits >> index & 1)) for index, column in enumerate(columns))
    keys = tuple(infos[index].name for index in (metadata.simple_primary_key_list or []) if index < len(infos))
    return TableSchema(TableRef(event.schema, event.table), infos, keys), level, notes


def _column_info(column: Any, nullable: bool) -> ColumnInfo:
    code = column.type
    name = str(column.name)
    unsigned = " unsigned" if getattr(column, "unsigned", False) else ""
    charset = column_charset(column, None)
    binary = charset == "binary"
    text_charset = None if binary else charset

    def info(data_type: str, column_type: str, **more: Any) -> ColumnInfo:
        return ColumnInfo(name=name, data_type=data_type, column_type=column_type, nullable=nullable, **more)

    if code in _INTEGERS:
        return info(_INTEGERS[code], _INTEGERS[code] + unsigned)
    if code in (FIELD_TYPE.NEWDECIMAL, FIELD_TYPE.DECIMAL):
        precision, scale = getattr(column, "precision", 10), getattr(column, "decimals", 0)
        return info("decimal", f"decimal({precision},{scale}){unsigned}", numeric_precision=precision,
                    numeric_scale=scale)
    if code == FIELD_TYPE.FLOAT:
        return info("float", "float" + unsigned)
    if code == FIELD_TYPE.DOUBLE:
        return info("double", "double" + unsigned)
    if code == FIELD_TYPE.YEAR:
        return info("year", "year")
    if code in (FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE):
        return info("date", "date")
    if code in _TEMPORALS:
        fsp = getattr(column, "fsp", 0) or 0
        kind = _TEMPORALS[code]
        return info(kind, f"{kind}({fsp})" if fsp else kind, datetime_precision=fsp)
    if code in (FIELD_TYPE.VARCHAR, FIELD_TYPE.VAR_STRING):
        width = getattr(column, "max_length", 0)
        if binary:
            return info("varbinary", f"varbinary({width})")
        return info("varchar", f"varchar({width})", character_set=text_charset)
    if code == FIELD_TYPE.STRING:
        width = getattr(column, "max_length", 0)
        if getattr(column, "binlake_charset_unknown", False):
            # CHAR or BINARY, unknown which: its bytes as stored (BINARY's padding would add zeros to a CHAR).
            return info("varbinary", f"varbinary({width})")
        if binary:
            return info("binary", f"binary({width})")
        return info("char", f"char({width})", character_set=text_charset)
    if code in (FIELD_TYPE.ENUM, FIELD_TYPE.SET):
        kind = "enum" if code == FIELD_TYPE.ENUM else "set"
        labels = (getattr(column, "enum_values", None) or [""])[1:] if kind == "enum" else (
            getattr(column, "set_values", None) or [])
        quoted = ",".join("'" + str(label).replace("'", "''") + "'" for label in labels)
        return info(kind, f"{kind}({quoted})", character_set=text_charset)
    if code == FIELD_TYPE.BLOB:
        size = _BLOB_SIZES.get(getattr(column, "length_size", 2), "")
        if binary:
            return info(f"{size}blob", f"{size}blob")
        return info(f"{size}text", f"{size}text", character_set=text_charset)
    if code == FIELD_TYPE.JSON:
        return info("json", "json", character_set="utf8mb4")
    if code == FIELD_TYPE.BIT:
        return info("bit", f"bit({getattr(column, 'bits', 1)})")
    if code == FIELD_TYPE.GEOMETRY:
        return info("geometry", "geometry")
    return info(f"type {code}", f"type {code}")


def _label_by_number(column: Any) -> bool:
    """Give an ENUM or SET without labels (MINIMAL metadata) labels that are its numbers; whether it had none.

    python-mysql-replication reads an ENUM without labels as None, which would show a value as NULL.
    """
    if column.type == FIELD_TYPE.ENUM and not getattr(column, "enum_values", None):
        column.enum_values = ["", *(str(index) for index in range(1, 256 ** column.size))]
    elif column.type == FIELD_TYPE.SET and not getattr(column, "set_values", None):
        column.set_values = [str(1 << bit) for bit in range(8 * column.size)]
    else:
        return False
    column.binlake_unlabelled = True
    return True


def shown_type(info: ColumnInfo, column: Any) -> str:
    """A column's type as the decode shows it: an ENUM or SET labelled by number without its thousands of labels."""
    if getattr(column, "binlake_unlabelled", False):
        return f"{info.data_type} (no labels)"
    return info.column_type

