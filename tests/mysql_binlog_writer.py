"""A MySQL 8.x binlog *encoder* for tests: the bytes a MySQL server writes, from MySQL's documented format.

MariaDB, the one server the suite runs, never writes MySQL's TRANSACTION_PAYLOAD (compressed transactions) or
PARTIAL_UPDATE_ROWS (partial JSON) events, so tests and the MySQL-shaped fuzzer (bench/fuzz/mysql_fuzz.py) build
them here and serve them with the protocol stub (tests/mysql_stub.py). The module is written from MySQL's
documentation of the binlog format (the "Replication" and "Binary log" pages of the MySQL source documentation,
libbinlogevents, sql/rpl_record.cc, sql/json_binary.h, sql/json_diff.h) and deliberately imports nothing of
binlake's decoder (`cdc_lib.binlog`): it is the independent side of a differential test. What it checks itself
against is real bytes: tests/unit/test_mysql_binlog_writer.py re-encodes events of the real MySQL fixture files
(tests/fixtures/mysql-binlogs/) and decodes its own output with python-mysql-replication's parser.

What it writes:
- a file: the magic bytes, FORMAT_DESCRIPTION (8.0.27+ post-header lengths, CRC32 checksums), PREVIOUS_GTIDS, then
  transactions, and a ROTATE when the file is closed (`BinlogWriter.rotate`);
- a transaction: GTID (untagged, with its commit timestamps, transaction length and server version), QUERY
  `BEGIN`, TABLE_MAP and rows events (WRITE/UPDATE/DELETE_ROWS v2, PARTIAL_UPDATE_ROWS with JSON diffs), XID;
  or all but the GTID inside one TRANSACTION_PAYLOAD (zstd, or the "none" compression type);
- DDL: GTID + QUERY, no BEGIN/XID (an implicit commit);
- column types INT / BIGINT (signed and unsigned), VARCHAR (utf8mb4), DECIMAL, DATETIME(fsp), JSON (MySQL's
  binary JSON: objects, arrays, strings, ints, doubles, literals; small and large formats).
"""

from __future__ import annotations

import datetime as dt
import re
import struct
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from typing import Any

import zstandard

MAGIC = b"\xfebin"
HEADER_LENGTH = 19

# Event type codes (libbinlogevents/include/binlog_event.h, Log_event_type).
QUERY, ROTATE, FORMAT_DESCRIPTION, XID = 2, 4, 15, 16
TABLE_MAP, WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS = 19, 30, 31, 32
GTID, ANONYMOUS_GTID, PREVIOUS_GTIDS = 33, 34, 35
PARTIAL_UPDATE_ROWS, TRANSACTION_PAYLOAD = 39, 40

#: Post-header length of each event type 1..41, as MySQL 8.0.27 to 8.4 declares them in its FORMAT_DESCRIPTION
#: (Format_description_event's table: QUERY 13, ROTATE 8, FDE 98, TABLE_MAP 8, rows v1 8 and v2 10, GTID 42,
#: TRANSACTION_CONTEXT 18, VIEW_CHANGE 52, TRANSACTION_PAYLOAD 40, HEARTBEAT_V2 0).
POST_HEADER_LENGTHS = bytes([
    0, 13, 0, 8, 0, 0, 0, 0, 4, 0, 4, 0, 0, 0, 98, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0,
    10, 10, 10, 42, 42, 0, 18, 52, 0, 10, 40, 0,
])
CHECKSUM_CRC32 = 1

# Column type codes (include/field_types.h).
MYSQL_TYPE_LONG, MYSQL_TYPE_LONGLONG, MYSQL_TYPE_VARCHAR = 3, 8, 15
MYSQL_TYPE_DATETIME2, MYSQL_TYPE_JSON, MYSQL_TYPE_NEWDECIMAL = 18, 245, 246
MYSQL_TYPE_ENUM, MYSQL_TYPE_SET, MYSQL_TYPE_BLOB, MYSQL_TYPE_STRING = 247, 248, 252, 254
#: TABLE_MAP optional metadata field types (Table_map_event::Optional_metadata_field_type).
SIGNEDNESS, DEFAULT_CHARSET, COLUMN_CHARSET, COLUMN_NAME = 1, 2, 3, 4
SET_STR_VALUE, ENUM_STR_VALUE, SIMPLE_PRIMARY_KEY = 5, 6, 8
ENUM_AND_SET_DEFAULT_CHARSET, COLUMN_VISIBILITY = 10, 12
#: TABLE_MAP flag MySQL always sets (TM_BIT_LEN_EXACT_F).
TM_BIT_LEN_EXACT_F = 1
UTF8MB4_0900_AI_CI = 255
#: Common-header flag of a QUERY that needs no `USE db` to be replayed (MySQL sets it on BEGIN).
LOG_EVENT_SUPPRESS_USE_F = 0x8
#: Rows event flag of the last rows event of a statement.
STMT_END_F = 1
#: value_options bit of PARTIAL_UPDATE_ROWS (binlog_row_value_options=PARTIAL_JSON).
PARTIAL_JSON_UPDATES = 1
#: JSON diff operations (enum_json_diff_operation).
JSON_REPLACE, JSON_INSERT, JSON_REMOVE = 0, 1, 2
#: TRANSACTION_PAYLOAD header fields and compression types.
PAYLOAD_SIZE, COMPRESSION_TYPE, UNCOMPRESSED_SIZE = 1, 2, 3
ZSTD, NO_COMPRESSION = 0, 255


def packed_int(value: int) -> bytes:
    """MySQL's length-encoded integer (net_store_length)."""
    if value < 251:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


def _bitmap(bits: Sequence[bool]) -> bytes:
    """A row event bitmap: bit i of the whole is bit i % 8 of byte i // 8 (least significant first)."""
    data = bytearray((len(bits) + 7) // 8)
    for index, bit in enumerate(bits):
        if bit:
            data[index // 8] |= 1 << (index % 8)
    return bytes(data)


def _msb_bitmap(bits: Sequence[bool]) -> bytes:
    """An optional-metadata bitmap (SIGNEDNESS): most significant bit first."""
    data = bytearray((len(bits) + 7) // 8)
    for index, bit in enumerate(bits):
        if bit:
            data[index // 8] |= 0x80 >> (index % 8)
    return bytes(data)


# -- binary JSON (sql/json_binary.h) -----------------------------------------------------------------

J_SMALL_OBJECT, J_LARGE_OBJECT, J_SMALL_ARRAY, J_LARGE_ARRAY, J_LITERAL = 0x00, 0x01, 0x02, 0x03, 0x04
J_INT16, J_UINT16, J_INT32, J_UINT32, J_INT64, J_UINT64, J_DOUBLE, J_STRING = (
    0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C)
J_NULL, J_TRUE, J_FALSE = 0x00, 0x01, 0x02


def json_key_order(keys: Sequence[str]) -> list[str]:
    """An object's keys in the order MySQL stores them: by length in bytes, then bytewise."""
    return sorted(keys, key=lambda key: (len(key.encode()), key.encode()))


def _varlen(value: int) -> bytes:
    """A string length in binary JSON: 7 bits a byte, least significant first, high bit = more follows."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _scalar(value: Any) -> tuple[int, bytes]:
    """A non-container value's type and bytes (not inlined)."""
    if value is None:
        return J_LITERAL, bytes([J_NULL])
    if value is True or value is False:
        return J_LITERAL, bytes([J_TRUE if value else J_FALSE])
    if isinstance(value, int):
        if -(1 << 15) <= value < 1 << 15:
            return J_INT16, struct.pack("<h", value)
        if -(1 << 31) <= value < 1 << 31:
            return J_INT32, struct.pack("<i", value)
        if -(1 << 63) <= value < 1 << 63:
            return J_INT64, struct.pack("<q", value)
        return J_UINT64, struct.pack("<Q", value)
    if isinstance(value, float):
        return J_DOUBLE, struct.pack("<d", value)
    if isinstance(value, str):
        raw = value.encode()
        return J_STRING, _varlen(len(raw)) + raw
    raise TypeError(f"no binary JSON for {type(value).__name__}")


def _inlined(type_code: int, large: bool) -> bool:
    return type_code in (J_LITERAL, J_INT16, J_UINT16) or (large and type_code in (J_INT32, J_UINT32))


def _container(value: dict[str, Any] | list[Any], large: bool) -> bytes:
    """An object's or array's bytes (without its type byte) in the small (2-byte offsets) or large format."""
    width = 4 if large else 2
    if isinstance(value, dict):
        keys = json_key_order(list(value))
        items = [value[key] for key in keys]
        encoded_keys = [key.encode() for key in keys]
    else:
        items, encoded_keys = list(value), []
    count = len(items)
    header = 2 * width + len(encoded_keys) * (width + 2) + count * (1 + width)
    offset = header + sum(len(key) for key in encoded_keys)
    key_entries = bytearray()
    key_offset = header
    for key in encoded_keys:
        key_entries += key_offset.to_bytes(width, "little") + struct.pack("<H", len(key))
        key_offset += len(key)
    value_entries = bytearray()
    values = bytearray()
    for item in items:
        type_code, data = _encoded(item, large)
        if _inlined(type_code, large):
            value_entries += bytes([type_code]) + data.ljust(width, b"\0")
        else:
            value_entries += bytes([type_code]) + (offset + len(values)).to_bytes(width, "little")
            values += data
    size = offset + len(values)
    if not large and size >= 1 << 16:
        raise OverflowError("the small format holds less than 64 KiB")
    return (count.to_bytes(width, "little") + size.to_bytes(width, "little") + bytes(key_entries)
            + bytes(value_entries) + b"".join(encoded_keys) + bytes(values))


def _encoded(value: Any, large: bool) -> tuple[int, bytes]:
    if isinstance(value, dict | list):
        is_object = isinstance(value, dict)
        if not large:
            try:
                return (J_SMALL_OBJECT if is_object else J_SMALL_ARRAY), _container(value, False)
            except OverflowError:
                pass  # MySQL uses the large format only for what the small one cannot hold
        return (J_LARGE_OBJECT if is_object else J_LARGE_ARRAY), _container(value, True)
    return _scalar(value)


def binary_json(value: Any) -> bytes:
    """A JSON document (dict, list, str, int, float, True/False, None) as MySQL stores it: a type byte, then the
    value. Objects take MySQL's key order whatever the dict's order."""
    type_code, data = _encoded(value, False)
    return bytes([type_code]) + data


# -- column types and values -------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """A column of a table, by its SQL type: int, int unsigned, bigint, bigint unsigned, decimal(p,s),
    datetime(fsp), json, and in utf8mb4 varchar(n), char(n), text, enum('a',...), set('a',...)."""

    name: str
    sql_type: str
    nullable: bool = True

    @property
    def kind(self) -> str:
        return re.split(r"[\s(]", self.sql_type, maxsplit=1)[0].lower()

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.sql_type.lower()

    @property
    def arguments(self) -> list[int]:
        return [int(n) for n in re.findall(r"\d+", self.sql_type)]

    @property
    def labels(self) -> list[str]:
        """An ENUM's or SET's values, in their order."""
        return [label.replace("''", "'") for label in re.findall(r"'((?:[^']|'')*)'", self.sql_type)]

    @property
    def type_code(self) -> int:
        return {"int": MYSQL_TYPE_LONG, "bigint": MYSQL_TYPE_LONGLONG, "varchar": MYSQL_TYPE_VARCHAR,
                "decimal": MYSQL_TYPE_NEWDECIMAL, "datetime": MYSQL_TYPE_DATETIME2, "json": MYSQL_TYPE_JSON,
                "text": MYSQL_TYPE_BLOB, "char": MYSQL_TYPE_STRING, "enum": MYSQL_TYPE_STRING,
                "set": MYSQL_TYPE_STRING}[self.kind]

    @property
    def _pack_length(self) -> int:
        """Bytes of an ENUM's index or a SET's bit mask."""
        if self.kind == "enum":
            return 1 if len(self.labels) < 256 else 2
        size = (len(self.labels) + 7) // 8
        return 8 if size > 4 else size

    @property
    def metadata(self) -> bytes:
        """The column's TABLE_MAP metadata (Field::save_field_metadata)."""
        if self.kind == "varchar":
            return struct.pack("<H", 4 * self.arguments[0])  # the most bytes a value takes in utf8mb4
        if self.kind == "char":
            # The real type and the byte length; a length past 255 keeps its two high bits in the first byte.
            length = 4 * self.arguments[0]
            return bytes([MYSQL_TYPE_STRING ^ ((length & 0x300) >> 4), length & 0xFF])
        if self.kind in ("enum", "set"):
            return bytes([MYSQL_TYPE_ENUM if self.kind == "enum" else MYSQL_TYPE_SET, self._pack_length])
        if self.kind == "text":
            return bytes([2])  # TEXT: a 2-byte length
        if self.kind == "decimal":
            precision, scale = (self.arguments + [10, 0])[:2]
            return bytes([precision, scale])
        if self.kind == "datetime":
            return bytes([(self.arguments + [0])[0]])
        if self.kind == "json":
            return bytes([4])  # the length prefix takes 4 bytes
        return b""

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "bigint", "decimal")

    @property
    def character(self) -> bool:
        return self.kind in ("varchar", "char", "text")

    def encode(self, value: Any) -> bytes:
        """A non-NULL value as a row image holds it (Field::pack)."""
        if self.kind == "int":
            return struct.pack("<I" if self.unsigned else "<i", value)
        if self.kind == "bigint":
            return struct.pack("<Q" if self.unsigned else "<q", value)
        if self.kind in ("varchar", "char", "text"):
            raw = value.encode()
            if self.kind == "char":
                raw = raw.rstrip(b" ")  # CHAR is stored without its trailing spaces
            wide = self.kind == "text" or 4 * self.arguments[0] >= 256
            return (struct.pack("<H", len(raw)) if wide else bytes([len(raw)])) + raw
        if self.kind == "enum":
            return (self.labels.index(value) + 1).to_bytes(self._pack_length, "little")
        if self.kind == "set":
            chosen = set(value.split(",")) if value else set()
            mask = sum(1 << index for index, label in enumerate(self.labels) if label in chosen)
            return mask.to_bytes(self._pack_length, "little")
        if self.kind == "decimal":
            precision, scale = (self.arguments + [10, 0])[:2]
            return decimal_bytes(value, precision, scale)
        if self.kind == "datetime":
            return datetime_bytes(value, (self.arguments + [0])[0])
        if self.kind == "json":
            document = binary_json(value)
            return struct.pack("<I", len(document)) + document
        raise ValueError(self.sql_type)


_DIGITS_TO_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_bytes(value: Decimal, precision: int, scale: int) -> bytes:
    """DECIMAL(precision, scale) in MySQL's binary form (decimal2bin): groups of nine digits in four big-endian
    bytes, the leftover digits in fewer, the integer part's leftovers first and the fraction's last; a negative
    number has every byte inverted; the first bit is flipped so that the bytes sort as the numbers do."""
    negative = value < 0
    with localcontext() as context:
        context.prec = 100  # DECIMAL holds 65 digits; the default context rounds at 28
        digits = format(abs(value).quantize(Decimal(1).scaleb(-scale)), "f")
    integer, _, fraction = digits.partition(".")
    integer_digits = precision - scale
    integer = integer.lstrip("0").rjust(integer_digits, "0")
    if len(integer) > integer_digits:
        raise ValueError(f"{value} does not fit DECIMAL({precision},{scale})")
    fraction = fraction.ljust(scale, "0")
    out = bytearray()
    lead = integer_digits % 9
    if lead:
        out += int(integer[:lead]).to_bytes(_DIGITS_TO_BYTES[lead], "big")
    for start in range(lead, integer_digits, 9):
        out += int(integer[start:start + 9]).to_bytes(4, "big")
    for start in range(0, scale - scale % 9, 9):
        out += int(fraction[start:start + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fraction[scale - scale % 9:]).to_bytes(_DIGITS_TO_BYTES[scale % 9], "big")
    if negative:
        out = bytearray(byte ^ 0xFF for byte in out)
    out[0] ^= 0x80
    return bytes(out)


def datetime_bytes(value: dt.datetime, fsp: int) -> bytes:
    """DATETIME(fsp) in MySQL 5.6.4+'s form (DATETIME2): 40 bits big-endian (sign, year*13+month, day, hour,
    minute, second) offset by 2^39, then the fraction in fsp/2 rounded-up bytes, big-endian."""
    year_month = value.year * 13 + value.month
    packed = ((((year_month << 5) | value.day) << 17) | (value.hour << 12) | (value.minute << 6) | value.second)
    out = (packed + (1 << 39)).to_bytes(5, "big")
    if fsp:
        width = (fsp + 1) // 2
        fraction = value.microsecond // 10 ** (6 - 2 * width)
        out += fraction.to_bytes(width, "big")
    return out


@dataclass(frozen=True)
class Table:
    """A table as a TABLE_MAP describes it."""

    table_id: int
    database: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...]

    @property
    def json_columns(self) -> list[Column]:
        return [column for column in self.columns if column.kind == "json"]


def table_map(table: Table, *, column_names: bool = True, charset: str = "auto") -> bytes:
    """A TABLE_MAP body (Table_map_log_event): post-header (table id, flags), then database, table, column count,
    types, metadata, nullability, and the optional metadata, in the order MySQL writes it: SIGNEDNESS (numeric
    columns), DEFAULT_CHARSET or COLUMN_CHARSET (character columns), and with binlog_row_metadata=FULL
    (`column_names`) COLUMN_NAME, ENUM_AND_SET_DEFAULT_CHARSET, SET_STR_VALUE, ENUM_STR_VALUE, SIMPLE_PRIMARY_KEY,
    COLUMN_VISIBILITY. `charset` "column" writes COLUMN_CHARSET where every column has the same collation (which
    MySQL writes as DEFAULT_CHARSET) — a decoder must read both."""
    columns = table.columns
    metadata = b"".join(column.metadata for column in columns)
    body = bytearray(table.table_id.to_bytes(6, "little") + struct.pack("<H", TM_BIT_LEN_EXACT_F))
    for text in (table.database, table.name):
        raw = text.encode()
        body += bytes([len(raw)]) + raw + b"\0"
    body += packed_int(len(columns)) + bytes(column.type_code for column in columns)
    body += packed_int(len(metadata)) + metadata
    body += _bitmap([column.nullable for column in columns])
    optional = bytearray()

    def field_(kind: int, value: bytes) -> None:
        optional.extend(bytes([kind]) + packed_int(len(value)) + value)

    def strings(values: Sequence[str]) -> bytes:
        return b"".join(packed_int(len(value.encode())) + value.encode() for value in values)

    numeric = [column for column in columns if column.numeric]
    if numeric:
        field_(SIGNEDNESS, _msb_bitmap([column.unsigned for column in numeric]))
    characters = [column for column in columns if column.character]
    if characters:
        if charset == "column":
            field_(COLUMN_CHARSET, b"".join(packed_int(UTF8MB4_0900_AI_CI) for _ in characters))
        else:  # every column is utf8mb4_0900_ai_ci: the default, no exceptions
            field_(DEFAULT_CHARSET, packed_int(UTF8MB4_0900_AI_CI))
    if column_names:
        field_(COLUMN_NAME, strings([column.name for column in columns]))
        labelled = [column for column in columns if column.kind in ("enum", "set")]
        if labelled:
            field_(ENUM_AND_SET_DEFAULT_CHARSET, packed_int(UTF8MB4_0900_AI_CI))
        for kind, field_type in (("set", SET_STR_VALUE), ("enum", ENUM_STR_VALUE)):
            chosen = [column for column in columns if column.kind == kind]
            if chosen:
                field_(field_type, b"".join(packed_int(len(c.labels)) + strings(c.labels) for c in chosen))
        names = [column.name for column in columns]
        if table.primary_key:
            field_(SIMPLE_PRIMARY_KEY, b"".join(packed_int(names.index(key)) for key in table.primary_key))
        field_(COLUMN_VISIBILITY, _msb_bitmap([True] * len(columns)))
    return bytes(body + optional)


def _image(table: Table, row: dict[str, Any], present: Sequence[bool],
           partial: dict[str, bytes] | None = None) -> bytes:
    """A row image of the `present` columns: their NULL bitmap, then each non-NULL value; a column in `partial`
    holds its JSON diff vector instead of its value."""
    partial = partial or {}
    columns = [column for column, here in zip(table.columns, present, strict=True) if here]
    nulls = [row[column.name] is None and column.name not in partial for column in columns]
    values = b"".join(
        (partial[column.name] if column.name in partial else column.encode(row[column.name]))
        for column, null in zip(columns, nulls, strict=True) if not null
    )
    return _bitmap(nulls) + values


@dataclass(frozen=True)
class JsonDiff:
    """One diff of a partial JSON update: the operation, the path text as MySQL logs it, the new value."""

    operation: int
    path: str
    value: Any = None


def diff_vector(diffs: Sequence[JsonDiff]) -> bytes:
    """A partial JSON column in an after image (Json_diff_vector::write_binary): the vector's length in 4 bytes,
    then each diff: operation, packed-length path, and (not for REMOVE) packed-length binary JSON value."""
    out = bytearray()
    for diff in diffs:
        path = diff.path.encode()
        out += bytes([diff.operation]) + packed_int(len(path)) + path
        if diff.operation != JSON_REMOVE:
            value = binary_json(diff.value)
            out += packed_int(len(value)) + value
    return struct.pack("<I", len(out)) + bytes(out)


def rows_event(event_type: int, table: Table, rows: Sequence[Any], *, last: bool = True,
               before: Sequence[str] | None = None, after: Sequence[str] | None = None) -> bytes:
    """A rows event body (v2): table id, flags, extra-data length (2: none), column count, the columns-present
    bitmap(s), then the rows. WRITE and DELETE rows are dicts; UPDATE rows are (before, after); PARTIAL_UPDATE_ROWS
    rows are (before, after, {json column: [JsonDiff, ...]}) and their after image starts with value_options and,
    when a column of the row is partial, the partial-bits bitmap over the table's JSON columns (rpl_record.cc
    pack_row). Every column is present (binlog_row_image=FULL) unless `before` / `after` name the columns of the
    image (a rows event's one image is `before`)."""
    names = [column.name for column in table.columns]
    first = [name in before for name in names] if before is not None else [True] * len(names)
    second = [name in after for name in names] if after is not None else [True] * len(names)
    body = bytearray(table.table_id.to_bytes(6, "little") + struct.pack("<HH", STMT_END_F if last else 0, 2))
    # A full image's bitmap has every bit set, the padding bits of its last byte too (bitmap_set_all).
    every = b"\xff" * ((len(names) + 7) // 8)
    body += packed_int(len(names)) + (_bitmap(first) if before is not None else every)
    if event_type in (UPDATE_ROWS, PARTIAL_UPDATE_ROWS):
        body += _bitmap(second) if after is not None else every
    for row in rows:
        if event_type in (WRITE_ROWS, DELETE_ROWS):
            body += _image(table, row, first)
        elif event_type == UPDATE_ROWS:
            old, new = row
            body += _image(table, old, first) + _image(table, new, second)
        else:
            old, new, diffs = row
            body += _image(table, old, first)
            vectors = {name: diff_vector(column_diffs) for name, column_diffs in diffs.items()}
            if vectors:
                body += packed_int(PARTIAL_JSON_UPDATES)
                body += _bitmap([column.name in vectors for column in table.json_columns])
            else:
                body += packed_int(0)
            body += _image(table, new, second, vectors)
    return bytes(body)


#: MySQL 8's default sql_mode (ONLY_FULL_GROUP_BY, STRICT_TRANS_TABLES, NO_ZERO_IN_DATE, NO_ZERO_DATE,
#: ERROR_FOR_DIVISION_BY_ZERO, NO_ENGINE_SUBSTITUTION) as Q_SQL_MODE_CODE holds it.
DEFAULT_SQL_MODE = 0x45A00020


def query(database: str, sql: str, *, thread_id: int = 7) -> bytes:
    """A QUERY body: thread id, exec time, database length, error code, status-variables length, the status
    variables MySQL 8 writes for a plain session (Q_FLAGS2, Q_SQL_MODE, Q_CATALOG_NZ "std", Q_CHARSET: client,
    connection and server collations, Q_DEFAULT_COLLATION_FOR_UTF8MB4), database, NUL, statement."""
    status = (bytes([0]) + struct.pack("<I", 0)
              + bytes([1]) + struct.pack("<Q", DEFAULT_SQL_MODE)
              + bytes([6, 3]) + b"std"
              + bytes([4]) + struct.pack("<HHH", 255, 255, 255)
              + bytes([18]) + struct.pack("<H", 255))
    raw_db = database.encode()
    return (struct.pack("<IIBHH", thread_id, 0, len(raw_db), 0, len(status)) + status + raw_db + b"\0"
            + sql.encode())


def xid(number: int) -> bytes:
    return struct.pack("<Q", number)


def gtid(server_uuid: str, gno: int, *, sequence: int, committed_us: int, transaction_length: int,
         server_version: int = 80036, last_committed: int | None = None, flags: int = 1) -> bytes:
    """A GTID body (Gtid_event): flags (1: may have been committed in parallel), SID, GNO, the logical clock
    (type 2, last_committed, sequence_number), the immediate commit timestamp (7 bytes; its top bit clear: the
    original equals it), the transaction's length (packed), the immediate server version (top bit clear).
    An ANONYMOUS_GTID has the same body with a zero SID and GNO."""
    committed = sequence - 1 if last_committed is None else last_committed
    return (bytes([flags]) + uuid.UUID(server_uuid).bytes + struct.pack("<q", gno) + bytes([2])
            + struct.pack("<qq", committed, sequence) + committed_us.to_bytes(7, "little")
            + packed_int(transaction_length) + struct.pack("<I", server_version))


def previous_gtids(sets: Sequence[tuple[str, Sequence[tuple[int, int]]]]) -> bytes:
    """PREVIOUS_GTIDS: the number of SIDs, then each SID with its intervals [start, end) (end exclusive)."""
    out = bytearray(struct.pack("<q", len(sets)))
    for server_uuid, intervals in sets:
        out += uuid.UUID(server_uuid).bytes + struct.pack("<q", len(intervals))
        for start, end in intervals:
            out += struct.pack("<qq", start, end)
    return bytes(out)


def format_description(server_version: str, created: int) -> bytes:
    """FORMAT_DESCRIPTION without its checksum: binlog version 4, server version (50 bytes), creation time,
    header length, post-header lengths, checksum algorithm (CRC32)."""
    return (struct.pack("<H", 4) + server_version.encode().ljust(50, b"\0") + struct.pack("<I", created)
            + bytes([HEADER_LENGTH]) + POST_HEADER_LENGTHS + bytes([CHECKSUM_CRC32]))


def rotate(position: int, next_file: str) -> bytes:
    return struct.pack("<Q", position) + next_file.encode()


def frame(event_type: int, body: bytes, *, server_id: int, log_pos: int, timestamp: int, flags: int = 0,
          checksum: bool = True) -> bytes:
    """An event: the 19-byte common header (timestamp, type, server id, size, log_pos = the event's end, flags),
    the body, and the CRC32 of both when the binlog has checksums."""
    size = HEADER_LENGTH + len(body) + (4 if checksum else 0)
    head = struct.pack("<IBIIIH", timestamp, event_type, server_id, size, log_pos, flags)
    event = head + body
    return event + struct.pack("<I", zlib.crc32(event)) if checksum else event


def transaction_payload(inner: Sequence[tuple[int, bytes]], *, server_id: int, timestamp: int,
                        compression: int = ZSTD) -> bytes:
    """A TRANSACTION_PAYLOAD body: the TLV header (compression type, uncompressed size, payload size, end mark;
    each value a packed integer with its packed length) and the inner events compressed together. Inner events
    carry no checksum and log_pos 0 (Transaction_payload_event; binlog_transaction_compression=ON)."""
    raw = b"".join(frame(kind, body, server_id=server_id, log_pos=0, timestamp=timestamp, checksum=False,
                         flags=LOG_EVENT_SUPPRESS_USE_F if kind == QUERY else 0)
                   for kind, body in inner)
    payload = zstandard.ZstdCompressor(level=3).compress(raw) if compression == ZSTD else raw

    def tlv(kind: int, value: int) -> bytes:
        encoded = packed_int(value)
        return packed_int(kind) + packed_int(len(encoded)) + encoded

    return (tlv(COMPRESSION_TYPE, compression) + tlv(UNCOMPRESSED_SIZE, len(raw)) + tlv(PAYLOAD_SIZE, len(payload))
            + b"\0" + payload)


# -- a binlog --------------------------------------------------------------------------------------


@dataclass
class BinlogWriter:
    """Binlog files as a MySQL 8.x server with GTIDs on, binlog_format=ROW, binlog_row_image=FULL and CRC32
    checksums writes them. Call `transaction`/`ddl` to append, `rotate` to close a file and open the next;
    `files` holds (name, bytes) of each file, the open one last."""

    server_uuid: str = "4b0f4ee2-7a1d-11ef-9a6a-0242ac120002"
    server_id: int = 1
    server_version: str = "8.4.3"
    base_name: str = "binlog"
    first_number: int = 1
    #: The first transaction's GNO; the files' PREVIOUS_GTIDS hold 1..first_gno-1.
    first_gno: int = 1
    timestamp: int = 1_764_000_000
    column_names: bool = True
    files: list[tuple[str, bytearray]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.gno = self.first_gno
        self.xid = 100
        self._open(self.first_number)

    @property
    def name(self) -> str:
        return self.files[-1][0]

    @property
    def position(self) -> int:
        return len(self.files[-1][1])

    @property
    def executed(self) -> str:
        """Executed_Gtid_Set after what was written, as MySQL prints it (`uuid:1`, `uuid:1-5`)."""
        last = self.gno - 1
        return "" if last < 1 else f"{self.server_uuid}:1" if last == 1 else f"{self.server_uuid}:1-{last}"

    def _open(self, number: int) -> None:
        self.files.append((f"{self.base_name}.{number:06d}", bytearray(MAGIC)))
        self._append(FORMAT_DESCRIPTION, format_description(self.server_version, self.timestamp))
        done = [(self.server_uuid, [(1, self.gno)])] if self.gno > 1 else []
        self._append(PREVIOUS_GTIDS, previous_gtids(done))

    def _append(self, event_type: int, body: bytes, flags: int = 0) -> None:
        data = self.files[-1][1]
        size = HEADER_LENGTH + len(body) + 4
        data += frame(event_type, body, server_id=self.server_id, log_pos=len(data) + size, timestamp=self.timestamp,
                      flags=flags)

    def _version_number(self) -> int:
        major, minor, patch = (int(part) for part in re.findall(r"\d+", self.server_version)[:3])
        return major * 10000 + minor * 100 + patch

    def _group(self, events: list[tuple[int, bytes]]) -> None:
        """A GTID, then `events`; the GTID carries the group's length in bytes (its own included)."""
        rest = sum(HEADER_LENGTH + len(body) + 4 for _, body in events)
        length = 0
        for _ in range(3):  # the length's own packed size is part of the length
            body = gtid(self.server_uuid, self.gno, sequence=self.gno, committed_us=self.timestamp * 1_000_000,
                        transaction_length=length, server_version=self._version_number())
            length = HEADER_LENGTH + len(body) + 4 + rest
        self._append(GTID, gtid(self.server_uuid, self.gno, sequence=self.gno,
                                committed_us=self.timestamp * 1_000_000, transaction_length=length,
                                server_version=self._version_number()))
        for event_type, event_body in events:
            begin = event_type == QUERY and event_body.endswith(b"\0BEGIN")
            self._append(event_type, event_body, LOG_EVENT_SUPPRESS_USE_F if begin else 0)
        self.gno += 1
        self.timestamp += 1

    def transaction(self, database: str, changes: Sequence[tuple[int, Table, Sequence[Any]]], *,
                    compressed: bool = False, compression: int = ZSTD) -> None:
        """One row transaction: per change (event type, table, rows) a statement, its TABLE_MAP and rows event
        (rows as `rows_event` takes them); compressed,
        everything after the GTID goes into one TRANSACTION_PAYLOAD."""
        inner: list[tuple[int, bytes]] = [(QUERY, query(database, "BEGIN"))]
        for event_type, table, rows in changes:  # each a statement: its table map, its rows, STMT_END_F
            inner.append((TABLE_MAP, table_map(table, column_names=self.column_names)))
            inner.append((event_type, rows_event(event_type, table, rows)))
        inner.append((XID, xid(self.xid)))
        self.xid += 1
        if compressed:
            inner = [(TRANSACTION_PAYLOAD, transaction_payload(inner, server_id=self.server_id,
                                                               timestamp=self.timestamp, compression=compression))]
        self._group(inner)

    def ddl(self, database: str, sql: str) -> None:
        """A DDL statement: GTID and QUERY, no BEGIN or XID (it commits by itself)."""
        self._group([(QUERY, query(database, sql))])

    def rotate(self) -> None:
        """Close the open file with a ROTATE naming the next, and open that one."""
        number = int(self.name.rsplit(".", 1)[1]) + 1
        self._append(ROTATE, rotate(4, f"{self.base_name}.{number:06d}"))
        self._open(number)
