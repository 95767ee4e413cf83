"""The one type mapping: MySQL/MariaDB column → Delta (Spark) type, for snapshot and binlog alike.

The snapshot path reads each column with `jdbc_select_expression` and casts it to
`spark_type_ddl`; the binlog path turns decoded values into the same Python values
with `binlog_converter`. Both therefore land the same Delta schema and values.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from typing import Any

from cdc_lib.errors import KeyMappingError, TableError
from cdc_lib.model import charset_tables, charsets
from cdc_lib.model.json_text import MySqlJson, mysql_json_text

_UTC = dt.UTC
_ENUM_VALUES = re.compile(r"'((?:[^']|'')*)'")


@dataclass(frozen=True)
class ColumnInfo:
    """A source column as information_schema describes it."""

    name: str
    data_type: str  # e.g. "bigint", "varchar", "datetime"
    column_type: str  # e.g. "bigint(20) unsigned", "enum('a','b')"
    nullable: bool
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    datetime_precision: int | None = None
    column_default: str | None = None
    character_set: str | None = None  # CHARACTER_SET_NAME of a text column (None for others, or unknown)
    #: COLLATION_NAME of a text column: what the server compares it by (a row filter's text comparisons ask the
    #: server under it, docs/row-filters.md). None for others, or in a schema recorded before binlake read it.
    collation: str | None = None

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()

    @property
    def bit_width(self) -> int:
        match = re.search(r"\((\d+)\)", self.column_type)
        return int(match.group(1)) if match else 1

    @property
    def set_members(self) -> list[str]:
        return [value.replace("''", "'") for value in _ENUM_VALUES.findall(self.column_type)]

    def to_json(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        if data["collation"] is None:
            del data["collation"]  # a schema without collations is recorded as it was before they were read
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ColumnInfo:
        return cls(**data)


_STRING_TYPES = {
    "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json",
}
_BINARY_TYPES = {
    "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
    "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
    "multipolygon", "geometrycollection",
}


def spark_type_ddl(column: ColumnInfo, *, table: str | None = None) -> str:
    """Spark SQL DDL type name for a source column."""
    kind = column.data_type.lower()
    unsigned = column.unsigned
    if kind == "tinyint":
        return "smallint" if unsigned else "tinyint"
    if kind == "boolean":  # only a TINYINT(1) with a type override (cdc_lib.changes.columns) is typed so
        return "boolean"
    if kind == "smallint":
        return "int" if unsigned else "smallint"
    if kind == "mediumint":
        return "int"
    if kind in ("int", "integer"):
        return "bigint" if unsigned else "int"
    if kind == "bigint":
        return "decimal(20,0)" if unsigned else "bigint"
    if kind in ("decimal", "numeric"):
        precision, scale = column.numeric_precision or 10, column.numeric_scale or 0
        return f"decimal({precision},{scale})" if precision <= 38 else "string"
    if kind == "float":
        return "float"
    if kind in ("double", "real"):
        return "double"
    if kind == "bit":
        return "bigint" if column.bit_width < 64 else "decimal(20,0)"
    if kind == "year":
        return "smallint"
    if kind == "date":
        return "date"
    if kind == "datetime":
        return "timestamp_ntz"
    if kind == "timestamp":
        return "timestamp"
    if kind == "time":
        return "string"
    if kind in _STRING_TYPES:
        charsets.check_column(column.name, column.character_set, table=table)
        return "string"
    if kind in _BINARY_TYPES:
        return "binary"
    if kind == "vector":
        raise vector_refusal(column, table)
    raise TableError(
        f"column '{column.name}' has type {column.column_type}, which binlake cannot map",
        remedy="exclude the table or change the column type",
        table=table,
    )


def vector_refusal(column: ColumnInfo, table: str | None) -> TableError:
    """Why a VECTOR column (MySQL 9.0+, MariaDB 11.7+) refuses its table, by name (docs/types.md "VECTOR").

    Its exact Delta form would be `array<float>` (the stored little-endian float32 values), but neither path can
    be made exact and proven here: python-mysql-replication 1.0.17 neither reads a VECTOR column's table-map
    metadata (binlog type 242) nor its row values, and no MySQL 9 or MariaDB 11.7 server is at hand to prove what
    the JDBC snapshot reads. So the table is refused at validate / snapshot, and a followed table that gains one
    (ALTER TABLE … ADD v VECTOR(3)) stops at that DDL, rather than landing bytes or nothing.
    """
    return TableError(
        f"column '{column.name}' has type {column.column_type}, a VECTOR, which binlake does not map yet (its "
        "binlog values and its snapshot read are not proven exact)",
        remedy="remove the table from source.tables; to follow its other columns, move the vector into a table of "
        "its own (or keep it as VECTOR_TO_STRING(v) text in a JSON or TEXT column instead of a VECTOR)",
        table=table,
    )


def key_refusal(column: ColumnInfo) -> str | None:
    """Why the mapping of `column` cannot serve as a primary key (two source values would be one Delta value);
    None when distinct values stay distinct (docs/types.md "Keys").

    Zero and partial dates are judged value by value instead (`ZeroDateKeyError`, raised on both paths).
    """
    kind = column.data_type.lower()
    if kind in ("enum", "set") and "" in column.set_members:
        what = "the error value an invalid ENUM value is stored as" if kind == "enum" else "the empty set"
        return f"is {kind.upper()} with an empty member '', which shows as '' like {what}"
    if kind in _STRING_TYPES and column.character_set:
        collision = charset_collision(column.character_set)
        if collision is not None:
            return f"has character set {column.character_set}, in which {collision}"
    return None


def check_key_columns(columns: Sequence[ColumnInfo], primary_key: Sequence[str], *, table: str) -> None:
    """Refuse a table whose primary key the mapping cannot keep distinct (`key_refusal`), naming the column."""
    for column in columns:
        if column.name not in primary_key:
            continue
        problem = key_refusal(column)
        if problem is not None:
            kind = column.data_type.lower()
            change = (f"drop the member '' from the column's {kind.upper()} definition" if kind in ("enum", "set")
                      else f"ALTER TABLE {table} MODIFY {quote_identifier(column.name)} ... CHARACTER SET utf8mb4 "
                      "(or VARBINARY)")
            raise KeyMappingError(
                table, column.name, f"{problem}: as a key in Delta two source keys could become one",
                remedy=f"{change}, or remove the table from source.tables; then snapshot it: "
                f"binlake snapshot --table {table}",
            )


@cache
def charset_collision(charset: str) -> str | None:
    """Two codes of `charset` that decode to the same text, as an example; None when every code decodes apart.

    From the server's own tables (`charset_tables`): a single-byte charset's undefined bytes show as '?' (or U+FFFD), a
    multi-byte charset's unmapped codes as '?' and some codes as another code's character (sjis 0x815F as '\\',
    like 0x5C). The UTF charsets decode every code to its own text (a surrogate is refused by name).
    """
    name = charsets.canonical(charset)
    table = charset_tables.SINGLE_BYTE.get(name)
    if table is not None:
        seen: dict[str, int] = {}
        for code, text in enumerate(table):
            if text in seen:
                return f"bytes 0x{seen[text]:02X} and 0x{code:02X} both show as {text!r}"
            seen[text] = code
        return None
    entry = charset_tables.MULTI_BYTE.get(name)
    if entry is None:
        return None
    codec, _, fixed = entry
    shown: dict[str, int] = {}
    for first, last, text, step in fixed:
        if step:
            continue
        if last > first:
            return f"codes 0x{first:X} to 0x{last:X} all show as {text!r}"
        try:
            other = int.from_bytes(text.encode(codec), "big")
        except UnicodeEncodeError:
            other = shown.get(text, first)
        if other != first:
            return f"codes 0x{other:X} and 0x{first:X} both show as {text!r}"
        shown[text] = first
    return None


# Read as text over JDBC and parsed by Spark: java.sql dates use the hybrid Julian calendar and
# would shift values before 1582; Spark parses text in the proleptic Gregorian calendar like MySQL.
TEXT_TRANSFERRED_TEMPORALS = frozenset({"date", "datetime", "timestamp"})


def jdbc_select_expression(column: ColumnInfo) -> str:
    """SQL expression the snapshot reads for a column, so JDBC hands Spark an exact value."""
    quoted = quote_identifier(column.name)
    kind = column.data_type.lower()
    if kind in ("time", "enum", "set") or kind in TEXT_TRANSFERRED_TEMPORALS:
        return f"CAST({quoted} AS CHAR) AS {quoted}"
    if kind in ("bit", "year"):
        return f"CAST({quoted} AS UNSIGNED) AS {quoted}"
    if kind == "float":
        # JDBC reads FLOAT as 6-digit text; the widened double keeps the stored float32 exactly.
        return f"CAST({quoted} AS DOUBLE) AS {quoted}"
    if kind in ("decimal", "numeric") and (column.numeric_precision or 0) > 38:
        return f"CAST({quoted} AS CHAR) AS {quoted}"
    return quoted


def quote_identifier(name: str) -> str:
    """A MySQL or Spark SQL identifier: both quote with backticks and double a backtick inside."""
    return "`" + name.replace("`", "``") + "`"


def matched_on(names: Iterable[str], *, target: str = "t", source: str = "s") -> str:
    """A MERGE or join condition: each named (key) column of `target` equals the same column of `source`."""
    return " AND ".join(f"{target}.{quote_identifier(name)} = {source}.{quote_identifier(name)}" for name in names)


def copied_from(alias: str, names: Iterable[str]) -> dict[str, str]:
    """A MERGE clause's assignments that set each named column from the same column of `alias`."""
    return {quote_identifier(name): f"{alias}.{quote_identifier(name)}" for name in names}


def format_time(value: dt.timedelta, fractional_digits: int) -> str:
    """MySQL's text form of a TIME value: [-]H+:MM:SS[.f…], hours may exceed 24."""
    total_micro = value.days * 86_400_000_000 + value.seconds * 1_000_000 + value.microseconds
    sign = "-" if total_micro < 0 else ""
    total_micro = abs(total_micro)
    seconds, micro = divmod(total_micro, 1_000_000)
    hours, remainder = divmod(seconds, 3600)
    minutes, secs = divmod(remainder, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}"
    if fractional_digits > 0:
        text += "." + f"{micro:06d}"[:fractional_digits]
    return text


def library_time(value: dt.timedelta) -> dt.timedelta:
    """python-mysql-replication's TIME2 value, corrected: it reads a negative time's fraction wrongly.

    MySQL stores -00:00:01.250000 as -2 s and a fraction of 0.75 s (the complement); the library negates
    the 2 s and subtracts the 0.75 s, giving -00:00:01.750000. A negative value with fraction f from it is
    therefore really its whole seconds plus (1 s - f). Non-negative and whole-second values are right.
    """
    micro = value // _MICROSECOND
    fraction = -micro % 1_000_000
    if micro >= 0 or not fraction:
        return value
    return -dt.timedelta(microseconds=-micro - fraction + (1_000_000 - fraction))


_MICROSECOND = dt.timedelta(microseconds=1)


# Types python-mysql-replication 1.0 already decodes to the value Spark stores.
_PASSTHROUGH = frozenset(
    {"tinyint", "smallint", "mediumint", "int", "integer", "float", "double", "real", "char", "varchar",
     "date", "datetime", "enum"}
)


def binlog_converter(column: ColumnInfo) -> Callable[[Any], Any] | None:
    """A function turning a non-NULL python-mysql-replication value into the value Spark stores.

    None means the reader's value is already right; the caller skips NULLs.
    """
    kind = column.data_type.lower()
    target = spark_type_ddl(column)
    if kind in _PASSTHROUGH or (kind == "bigint" and target == "bigint"):
        return None
    if kind in ("decimal", "numeric"):
        return None if target != "string" else (lambda value: format(Decimal(value), "f"))
    if target == "decimal(20,0)" and kind in ("bigint", "bit"):
        if kind == "bit":
            return lambda value: Decimal(_bit_to_int(value))
        return lambda value: Decimal(int(value))
    if kind == "bit":
        return _bit_to_int
    if kind == "year":
        # The library adds 1900 to the stored byte, so YEAR 0000 (stored as 0) comes out as 1900, no valid YEAR.
        return lambda value: 0 if value == 1900 else value
    if kind == "timestamp":
        return timestamp_to_utc
    if kind == "time":
        digits = column.datetime_precision or 0
        return lambda value: format_time(library_time(value), digits) if isinstance(value, dt.timedelta) else str(value)
    if kind == "set":
        members = column.set_members
        return lambda value: _set_text(value, members)
    if kind == "json":
        return _json_text
    if target == "string":
        return as_text
    if kind == "binary":
        # The binlog drops BINARY(n)'s trailing zero bytes; MySQL returns the value padded to n.
        width = column.bit_width
        return lambda value: as_binary(value).ljust(width, b"\x00")
    if target == "binary":
        return as_binary
    if target == "float" or target == "double":
        return float
    return int


def _bit_to_int(value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, bytes):
        return int.from_bytes(value, "big")
    return int(str(value), 2)


def timestamp_to_utc(value: Any) -> dt.datetime | None:
    """A TIMESTAMP the library read, as an aware UTC datetime (None for anything else)."""
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=_UTC) if value.tzinfo is None else value.astimezone(_UTC)
    return None


def as_text(value: Any) -> str:
    """A string column's value as text; bytes not valid UTF-8 are kept as surrogates (surrogateescape)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="surrogateescape")
    return str(value)


def as_binary(value: Any) -> bytes:
    """A binary column's value as bytes (text the library decoded is encoded back as it came)."""
    if isinstance(value, bytes):
        return value
    return str(value).encode("utf-8", errors="surrogateescape")


def _set_text(value: Any, members: list[str]) -> str:
    if isinstance(value, (set, frozenset, list, tuple)):
        chosen = {as_text(item) for item in value}
        return ",".join(member for member in members if member in chosen)
    if isinstance(value, int):
        return ",".join(member for index, member in enumerate(members) if value & (1 << index))
    return as_text(value)


def _json_text(value: Any) -> str:
    # MariaDB's JSON is LONGTEXT: the value is the text. MySQL's is binary JSON, decoded (`json_binary`) and printed
    # as the server prints it, so both paths land CAST(col AS CHAR)'s text.
    if isinstance(value, MySqlJson):
        return mysql_json_text(value.document)
    if isinstance(value, (bytes, str)):
        return as_text(value)
    return mysql_json_text(value)
