"""Decoding rows events straight from their bytes, with a decoder generated per table map.

python-mysql-replication decodes each value through several method calls and builds a dict per
row; that was ~90% of binlake's read time. Once the library has parsed a rows event's header, the
rest of the event is plain bytes: per row image a null bitmap, then each present column back to
back. For each distinct table map (column types, metadata, signedness, charsets) and the table's
`TableSchema`, `build_reader` generates one Python function that walks those bytes with
precompiled structs and yields each image as a tuple in schema order, holding exactly the values
the library path yields after binlake's conversions (`cdc_lib.model.types.binlog_converter`).

Whatever it does not cover answers None instead, and the caller decodes with the library: a
column type without a reader (MySQL's partial JSON, GEOMETRY, pre-5.6 temporals),
column names that differ from the schema (a table map without names is named by position first, the same
way for both paths: `prepare_columns`), a row image that is not FULL, or bytes that do not parse
to the event's exact end. Correctness therefore never depends on coverage. (MariaDB's JSON is
LONGTEXT in the binlog and takes the fast path.)
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import logging
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from types import CodeType
from typing import Any

from pymysqlreplication.constants import BINLOG, FIELD_TYPE

from cdc_lib.binlog import json_binary
from cdc_lib.binlog.column_positions import name_by_position, unnamed
from cdc_lib.binlog.replication_library import rows_decoded, unread_bytes
from cdc_lib.changes.events import Row
from cdc_lib.model import charsets
from cdc_lib.model.json_text import MySqlJson
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import (
    ColumnInfo,
    as_binary,
    as_text,
    binlog_converter,
    format_time,
    spark_type_ddl,
    timestamp_to_utc,
)

log = logging.getLogger(__name__)

_ROWS_EVENTS = frozenset({
    BINLOG.WRITE_ROWS_EVENT_V1, BINLOG.UPDATE_ROWS_EVENT_V1, BINLOG.DELETE_ROWS_EVENT_V1,
    BINLOG.WRITE_ROWS_EVENT_V2, BINLOG.UPDATE_ROWS_EVENT_V2, BINLOG.DELETE_ROWS_EVENT_V2,
})
_UPDATES = frozenset({BINLOG.UPDATE_ROWS_EVENT_V1, BINLOG.UPDATE_ROWS_EVENT_V2})
_DELETES = frozenset({BINLOG.DELETE_ROWS_EVENT_V1, BINLOG.DELETE_ROWS_EVENT_V2})
_STRUCT_CODES = {
    FIELD_TYPE.TINY: ("b", "B", 1), FIELD_TYPE.SHORT: ("h", "H", 2), FIELD_TYPE.LONG: ("i", "I", 4),
    FIELD_TYPE.LONGLONG: ("q", "Q", 8),
}
_DIGITS_TO_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_UTC_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_NAIVE_EPOCH = dt.datetime(1970, 1, 1)
_CACHED_SET_TEXTS = 4096
# DECIMAL holds at most 65 digits: scaling by a power of ten in this context never rounds.
_EXACT = decimal.Context(prec=100)


@dataclass(frozen=True)
class Unsupported:
    """Why a table map is decoded by the library instead."""

    reason: str


@dataclass
class RowImageReader:
    """Decodes the row images of one table map; `decode(data, start, end)` returns them in order.

    `decode_keys` reads every image for its key columns only, and `decode_updates` an update's before images so
    and its after images whole: the other columns of those images are stepped over by their lengths, never made
    into values (`FastRows.images`, `old_keys_only`). Both are None for a table without a primary key.
    """

    decode: Callable[[bytes, int, int], list[Row]]
    width: int
    source: str
    decode_keys: Callable[[bytes, int, int], list[Row]] | None = None
    decode_updates: Callable[[bytes, int, int], list[Row]] | None = None


class _Code:
    """Python source of a generated decoder, with the objects it refers to."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.names: dict[str, Any] = {"Decimal": Decimal, "datetime": dt.datetime, "date": dt.date,
                                      "timedelta": dt.timedelta, "from_bytes": int.from_bytes,
                                      "exact": _EXACT}

    def bind(self, name: str, value: Any) -> str:
        self.names[name] = value
        return name

    def emit(self, indent: int, *lines: str) -> None:
        self.lines.extend("    " * indent + line for line in lines)


@dataclass
class _Column:
    """How to read one binlog column: a struct code, or lines of source; then what to make of the value."""

    index: int
    struct_code: str | None = None
    size: int = 0
    lines: list[str] = field(default_factory=list)
    post: str | None = None  # an expression of {v}, applied to non-None values
    post_may_see_none: bool = False
    #: How to step over the value without reading it: its fixed size in bytes, or lines of source.
    skip_size: int | None = None
    skip: list[str] = field(default_factory=list)

    def skip_lines(self) -> list[str]:
        if self.struct_code:
            return [f"p += {self.size}"]
        if self.skip_size is not None:
            return [f"p += {self.skip_size}"]
        if not self.skip:
            raise AssertionError(f"column {self.index} has no way to be stepped over")
        return self.skip


def build_reader(schema: TableSchema, columns: Sequence[Any]) -> RowImageReader | Unsupported:
    """A decoder for rows events whose table map has `columns` (the library's Column objects).

    Returns `Unsupported` when any column has a type or shape this module does not decode, or
    when the binlog's column names are not the schema's (the library path then reports it).
    """
    prepare_columns(columns, schema)
    names = [getattr(column, "name", None) for column in columns]
    if len(names) != len(schema.columns) or set(names) != set(schema.column_names) or len(set(names)) != len(names):
        return Unsupported("the binlog's columns differ from the table schema")
    info_by_name = {info.name: info for info in schema.columns}
    code = _Code()
    specs = []
    for index, column in enumerate(columns):
        spec = _column_spec(index, column, info_by_name[column.name], code)
        if isinstance(spec, Unsupported):
            return spec
        specs.append(spec)
    order = [names.index(name) for name in schema.column_names]
    width = len(columns)
    keys = frozenset(names.index(name) for name in schema.primary_key)
    every = frozenset(range(width))
    _emit_decoder(code, "decode", specs, order, [every])
    if keys:
        _emit_decoder(code, "decode_keys", specs, order, [keys])
        _emit_decoder(code, "decode_updates", specs, order, [keys, every])
    source = "\n".join(code.lines)
    namespace = dict(code.names)
    exec(_compiled(source, f"<row decoder {schema.table.name}>"), namespace)  # noqa: S102 - our own source
    return RowImageReader(decode=namespace["decode"], width=width, source=source,
                          decode_keys=namespace.get("decode_keys"), decode_updates=namespace.get("decode_updates"))


def _emit_decoder(code: _Code, name: str, specs: list[_Column], order: list[int],
                  images: list[frozenset[int]]) -> None:
    """A function `name(data, pos, end)` reading groups of row images, each image with its own columns decoded
    (`images`: one set for every image, or a before and an after set for an update's pairs)."""
    code.emit(0, f"def {name}(data, pos, end):", "    out = []", "    append = out.append", "    while pos < end:")
    for number, decoded in enumerate(images):
        if number:
            code.emit(2, "if pos >= end:", "    raise ValueError('an update ends after its before image')")
        _emit_image(code, specs, order, decoded)
    code.emit(1, "if pos != end:", "    raise ValueError('row images end past the event')", "return out")


def _emit_image(code: _Code, specs: list[_Column], order: list[int], decoded: frozenset[int]) -> None:
    """The loop body reading one row image at `pos` into a tuple in schema order; columns outside `decoded` are
    stepped over (None in the tuple). Leaves `pos` at the next image."""
    width = len(specs)
    null_bytes = (width + 7) // 8
    # The server sets the bitmap's unused high bits; only the columns' own bits say NULL.
    if null_bytes == 1:
        code.emit(2, f"nulls = data[pos] & {(1 << width) - 1}")
    else:
        code.emit(2, f"nulls = from_bytes(data[pos:pos + {null_bytes}], 'little') & {(1 << width) - 1}")
    code.emit(2, f"p = pos + {null_bytes}", "if not nulls:")
    _emit_columns(code, specs, 3, nullable=False, decoded=decoded)
    code.emit(2, "else:")
    _emit_columns(code, specs, 3, nullable=True, decoded=decoded)
    values = ", ".join(f"v{index}" if index in decoded else "None" for index in order)
    code.emit(2, f"append(({values}{',' if width == 1 else ''}))", "pos = p")


@functools.lru_cache(maxsize=1024)
def _compiled(source: str, filename: str) -> CodeType:
    """The decoder's source compiled once per process: each batch builds its tables' readers anew, and compiling
    was ~1 ms a table, the read's largest cost per changed table (bench/NOTES.md "Many tables in one batch").
    A code object is immutable; the names it reads come from each reader's own namespace."""
    return compile(source, filename, "exec")


def _emit_columns(code: _Code, specs: list[_Column], indent: int, *, nullable: bool,
                  decoded: frozenset[int]) -> None:
    """Read the `decoded` columns and step over the others; without nulls, adjacent fixed-width numbers share one
    struct unpack, and adjacent fixed-width columns stepped over one addition."""
    run: list[_Column] = []
    stepped = 0

    def flush() -> None:
        if not run:
            return
        fmt = "<" + "".join(spec.struct_code or "" for spec in run)
        unpack = code.bind(f"unpack_{run[0].index}_{len(run)}_{int(nullable)}", struct.Struct(fmt).unpack_from)
        targets = "".join(f"v{spec.index}, " for spec in run)
        code.emit(indent, f"{targets}= {unpack}(data, p)", f"p += {struct.calcsize(fmt)}")
        for spec in run:
            if spec.post:
                code.emit(indent, f"v{spec.index} = " + spec.post.replace("{v}", f"v{spec.index}"))
        run.clear()

    def step() -> None:
        nonlocal stepped
        if stepped:
            code.emit(indent, f"p += {stepped}")
            stepped = 0

    for spec in specs:
        if spec.index not in decoded:
            flush()
            if nullable:
                step()
                code.emit(indent, f"if not nulls & {1 << spec.index}:",
                          *("    " + line for line in spec.skip_lines()))
            elif spec.struct_code or spec.skip_size is not None:
                stepped += spec.size if spec.struct_code else spec.skip_size or 0
            else:
                step()
                code.emit(indent, *spec.skip_lines())
            continue
        step()
        if spec.struct_code and not nullable:
            run.append(spec)
            continue
        flush()
        inner = indent
        if nullable:
            code.emit(indent, f"if nulls & {1 << spec.index}:", f"    v{spec.index} = None", "else:")
            inner += 1
        if spec.struct_code:
            unpack = code.bind(f"unpack_{spec.index}", struct.Struct("<" + spec.struct_code).unpack_from)
            code.emit(inner, f"v{spec.index}, = {unpack}(data, p)", f"p += {spec.size}")
        else:
            code.emit(inner, *(line.replace("{v}", f"v{spec.index}") for line in spec.lines))
        if spec.post:
            post = spec.post.replace("{v}", f"v{spec.index}")
            if spec.post_may_see_none:
                post = f"None if v{spec.index} is None else {post}"
            code.emit(inner, f"v{spec.index} = {post}")
    flush()
    step()


def _column_spec(index: int, column: Any, info: ColumnInfo, code: _Code) -> _Column | Unsupported:
    kind = column.type
    convert = binlog_converter(info)
    spec = _Column(index)

    def apply(converter: Callable[[Any], Any] | None, *, may_see_none: bool = False) -> None:
        if converter is not None:
            spec.post = code.bind(f"convert_{index}", converter) + "({v})"
            spec.post_may_see_none = may_see_none

    if kind in _STRUCT_CODES:
        signed_code, unsigned_code, size = _STRUCT_CODES[kind]
        spec.struct_code, spec.size = (unsigned_code if column.unsigned else signed_code), size
        unsigned_bigint = info.data_type.lower() == "bigint" and spark_type_ddl(info) == "decimal(20,0)"
        if kind == FIELD_TYPE.LONGLONG and unsigned_bigint:
            spec.post = "Decimal({v})"  # what binlake's converter makes of a BIGINT UNSIGNED
        else:
            apply(convert)
    elif kind == FIELD_TYPE.INT24:
        spec.lines = [f"{{v}} = from_bytes(data[p:p + 3], 'little', signed={not column.unsigned})", "p += 3"]
        spec.skip_size = 3
        apply(convert)
    elif kind in (FIELD_TYPE.FLOAT, FIELD_TYPE.DOUBLE):
        spec.struct_code, spec.size = ("f", 4) if kind == FIELD_TYPE.FLOAT else ("d", 8)
        apply(convert)
    elif kind == FIELD_TYPE.YEAR:
        spec.struct_code, spec.size = "B", 1
        # YEAR is stored as the offset from 1900, except YEAR 0000, stored as 0 (1900 is no valid YEAR).
        spec.post = "({v} + 1900 if {v} else 0)"
        if convert is not None:
            spec.post = code.bind(f"convert_{index}", convert) + "({v} + 1900 if {v} else 0)"
    elif kind == FIELD_TYPE.NEWDECIMAL:
        spec.lines = _decimal_lines(column.precision, column.decimals)
        spec.skip_size = _decimal_size(column.precision, column.decimals)
        apply(convert)
    elif kind in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING, FIELD_TYPE.BLOB):
        prefix = column.length_size if kind == FIELD_TYPE.BLOB else (2 if column.max_length > 255 else 1)
        if prefix not in (1, 2, 3, 4):
            return Unsupported(f"column {column.name} has a {prefix}-byte length prefix")
        charset = getattr(column, "binlake_charset", None)
        if charset is None:
            return Unsupported(f"column {column.name} has no known character set")
        spec.lines = [f"n = {_little_endian('p', prefix)}", f"p += {prefix} + n"]
        spec.skip = list(spec.lines)
        if charset == "binary":
            spec.lines.append("{v} = data[p - n:p]")
            if convert is not as_binary:
                apply(convert)
        else:
            if charset in _UTF8:  # a surrogate code point fails here; the library path then names it
                spec.lines.append("{v} = data[p - n:p].decode('utf-8')")
            else:
                decode = code.bind(f"decode_{index}", charsets.decoder(charset))
                spec.lines.append(f"{{v}} = {decode}(data[p - n:p])")
            if convert is not as_text:
                apply(convert)
    elif kind == FIELD_TYPE.DATE:
        spec.lines = ["n = data[p] | data[p + 1] << 8 | data[p + 2] << 16", "p += 3",
                      "{v} = date(n >> 9, n >> 5 & 15, n & 31) if n >> 9 and n >> 5 & 15 and n & 31 else None"]
        spec.skip_size = 3
        apply(convert, may_see_none=True)
    elif kind == FIELD_TYPE.DATETIME2:
        spec.lines = ["n = from_bytes(data[p:p + 5], 'big')", "p += 5", *_fraction_lines(column.fsp),
                      "ym = n >> 22 & 0x1FFFF",
                      "try:",
                      "    {v} = datetime(ym // 13, ym % 13, n >> 17 & 31, n >> 12 & 31, n >> 6 & 63, n & 63, us)",
                      "except ValueError:",
                      "    {v} = " + code.bind("invalid_datetime", _invalid_datetime) + "(us)"]
        spec.skip_size = 5 + (column.fsp + 1) // 2
        apply(convert, may_see_none=True)
    elif kind == FIELD_TYPE.TIMESTAMP2:
        epoch = _UTC_EPOCH if convert is timestamp_to_utc else _NAIVE_EPOCH
        # A zero TIMESTAMP is stored as 0 s; the earliest real one is 1 s past the epoch. It becomes None,
        # as on the library path and in the snapshot.
        spec.lines = ["n = from_bytes(data[p:p + 4], 'big', signed=True)", "p += 4", *_fraction_lines(column.fsp),
                      f"{{v}} = {code.bind(f'epoch_{index}', epoch)} + timedelta(0, n, us) if n else None"]
        spec.skip_size = 4 + (column.fsp + 1) // 2
        if convert is not timestamp_to_utc:
            apply(convert, may_see_none=True)
    elif kind == FIELD_TYPE.TIME2:
        # The whole value at once: a negative TIME2's fraction is stored as a complement of the integer part's.
        size = 3 + (column.fsp + 1) // 2
        digits = info.datetime_precision or 0
        spec.lines = [f"{{v}} = {code.bind('time2', time2_text)}(from_bytes(data[p:p + {size}], 'big'), "
                      f"{column.fsp}, {digits})", f"p += {size}"]
        spec.skip_size = size
    elif kind == FIELD_TYPE.ENUM:
        if column.size not in (1, 2):
            return Unsupported(f"ENUM column {column.name} has {column.size}-byte values")
        values = tuple(column.enum_values) if column.enum_values else None
        read = _little_endian("p", column.size)
        spec.lines = [f"{{v}} = {code.bind(f'enum_{index}', values)}[{read}]" if values else "{v} = None",
                      f"p += {column.size}"]
        spec.skip_size = column.size
        apply(convert, may_see_none=True)
    elif kind == FIELD_TYPE.SET:
        if not 1 <= column.size <= 8:
            return Unsupported(f"SET column {column.name} has {column.size}-byte values")
        reader = _set_reader(column.set_values, convert, set_column=info.data_type.lower() == "set")
        spec.lines = [f"{{v}} = {code.bind(f'set_{index}', reader)}({_little_endian('p', column.size)})",
                      f"p += {column.size}"]
        spec.skip_size = column.size
    elif kind == FIELD_TYPE.BIT:
        spec.lines = [f"{{v}} = from_bytes(data[p:p + {column.bytes}], 'big') & {(1 << column.bits) - 1}",
                      f"p += {column.bytes}"]
        spec.skip_size = column.bytes
        if info.data_type.lower() == "bit":
            spec.post = "Decimal({v})" if spark_type_ddl(info) == "decimal(20,0)" else None
        else:
            spec.post = f"format({{v}}, '0{column.bits}b')"
            if convert is not None:
                spec.post = code.bind(f"convert_{index}", convert) + f"({spec.post})"
    elif kind == FIELD_TYPE.JSON:
        return _json_spec(spec, column, convert, code)
    else:
        return Unsupported(f"column {column.name} has binlog type {kind}, which only the library decodes")
    return spec


def _json_spec(spec: _Column, column: Any, convert: Callable[[Any], Any] | None, code: _Code) -> _Column | Unsupported:
    """MySQL's binary JSON: a length of `length_size` bytes, then the document, decoded as the library path
    decodes it (`replication_library._read_binary_json`: `json_binary`, then binlake's converter)."""
    prefix = column.length_size
    if prefix not in (1, 2, 3, 4):
        return Unsupported(f"JSON column {column.name} has a {prefix}-byte length prefix")
    decode = code.bind(f"json_{spec.index}", _json_document)
    spec.lines = [f"n = {_little_endian('p', prefix)}", f"p += {prefix} + n", f"{{v}} = {decode}(data[p - n:p])"]
    spec.skip = spec.lines[:2]
    if convert is not None:
        spec.post = code.bind(f"convert_{spec.index}", convert) + "({v})"
    return spec


def _json_document(data: bytes) -> MySqlJson:
    return MySqlJson(json_binary.decode(data))


def _little_endian(offset: str, size: int) -> str:
    return " | ".join(f"data[{offset} + {byte}] << {8 * byte}" if byte else f"data[{offset}]" for byte in range(size))


_CHARACTER_TYPES = frozenset({FIELD_TYPE.STRING, FIELD_TYPE.VAR_STRING, FIELD_TYPE.VARCHAR, FIELD_TYPE.BLOB})
_LABEL_TYPES = frozenset({FIELD_TYPE.ENUM, FIELD_TYPE.SET})
_UTF8 = frozenset({"utf8mb3", "utf8mb4"})


def column_charset(column: Any, info: ColumnInfo | None) -> str | None:
    """The MySQL charset of a character, ENUM or SET column of a table map; 'binary' for bytes.

    The table map names the collation (the library's `character_set_name` is a lossy codec name:
    latin1 → cp1252, utf8mb3 and utf8mb4 → utf8); every collation name starts with its charset's.
    A collation the library does not know leaves only the schema's charset to go by.
    """
    collation = getattr(column, "collation_name", None)
    if collation:
        charset = str(collation).split("_", 1)[0].lower()
        return "utf8mb3" if charset == "utf8" else charset
    return info.character_set if info is not None else None


def prepare_columns(columns: Sequence[Any], schema: TableSchema) -> None:
    """Make the library decode a table map's text as the server shows it (idempotent, per table map).

    python-mysql-replication decodes text with `bytes.decode(column.character_set_name)`: pointing that at
    binlake's exact codec (`cdc_lib.model.charsets`) fixes latin1's five extra bytes, big-endian utf16/utf32 and
    the rest on the fallback path. ENUM and SET labels, which it decodes as UTF-8 (or drops), are taken from
    the schema (see `_relabel`). A table map without column names (binlog_row_metadata=MINIMAL) is first named
    from the schema by position, with its signedness and labels (`column_positions`), so the generated reader and
    the library read the same columns. Call it before the library reads the rows of an event of this table map.

    Raises:
        SchemaChangeError: a nameless table map's columns are not the schema's (`column_positions.name_by_position`).
    """
    if unnamed(columns):
        name_by_position(columns, schema)
    info_by_name = {info.name: info for info in schema.columns}
    for column in columns:
        if getattr(column, "binlake_charset", None) is not None:
            continue
        kind = getattr(column, "type", None)
        if kind not in _CHARACTER_TYPES and kind not in _LABEL_TYPES:
            continue
        name = getattr(column, "name", None)
        info = info_by_name.get(name) if isinstance(name, str) else None
        charset = column_charset(column, info)
        if charset == "binary":
            column.binlake_charset = "binary"
            if kind in _CHARACTER_TYPES:
                # The library hands over bytes for the codec name 'binary' (it has no such codec), as a FULL table
                # map's collation 63 names it; without a name (MINIMAL metadata) it would decode them as UTF-8.
                column.character_set_name = "binary"
            continue
        # Not knowing the charset, the library would guess utf8; binlake's codec for it refuses instead.
        column.binlake_charset = charset = charset or "unknown"
        if kind in _CHARACTER_TYPES:
            column.character_set_name = charsets.codec_name(charset)
        _relabel(column, info, charset)


def _relabel(column: Any, info: ColumnInfo | None, charset: str) -> None:
    """ENUM/SET labels as the server shows them: the schema's, which the library's match in number.

    The library decodes the table map's labels as UTF-8 and makes '' of any it cannot, so a latin1 label
    'caf\xe9' would be lost; information_schema has them all as text.
    """
    members = info.set_members if info is not None and info.data_type.lower() in ("enum", "set") else None
    for attribute, offset in (("enum_values", 1), ("set_values", 0)):
        labels = getattr(column, attribute, None)
        if not labels:
            continue
        if members is not None and len(members) == len(labels) - offset:
            setattr(column, attribute, labels[:offset] + list(members))
        else:
            setattr(column, attribute, [_label(label, charset) for label in labels])


def _label(label: Any, charset: str) -> Any:
    if isinstance(label, str):
        label = label.encode("utf-8")  # it was decoded from these bytes strictly, so this gives them back
    return charsets.decode(label, charset) if isinstance(label, bytes) else label


def _fraction_lines(fsp: int) -> list[str]:
    """Read the fractional seconds into `us` as the library does (signed big-endian, odd fsp /10)."""
    size = (fsp + 1) // 2
    if size == 0:
        return ["us = 0"]
    lines = [f"us = from_bytes(data[p:p + {size}], 'big', signed=True)", f"p += {size}"]
    if fsp % 2:
        lines.append("us = int(us / 10)")
    if fsp < 6:
        lines.append(f"us *= {10 ** (6 - fsp)}")
    lines.append("us = us if us > 0 else 0")
    return lines


def _invalid_datetime(microsecond: int) -> None:
    """A zero or otherwise impossible date decodes to None, as in the library; a bad fraction is an error."""
    if microsecond > 999_999:
        raise ValueError(f"microsecond {microsecond} out of range")
    return None


def time2_micro(stored: int, fsp: int) -> int:
    """A TIME2 value's signed microseconds, from its big-endian bytes as one unsigned number.

    As MySQL's `my_time_packed_from_binary`: the packed value is (h << 12 | m << 6 | s) << 24 plus the
    microseconds, negated for a negative time, stored with an offset. With fsp 1–4 the integer part and the
    fraction are stored apart, and a negative time's fraction is the complement of one unit of the integer part
    (-00:00:01.25 is stored as -2 s and 0.75 s): python-mysql-replication misses that.
    """
    if fsp >= 5:
        packed = stored - 0x800000000000
    elif fsp >= 1:
        width = 16 if fsp >= 3 else 8
        whole, fraction = (stored >> width) - 0x800000, stored & ((1 << width) - 1)
        if whole < 0 and fraction:
            whole += 1
            fraction -= 1 << width
        packed = (whole << 24) + fraction * (100 if fsp >= 3 else 10_000)
    else:
        packed = (stored - 0x800000) << 24
    magnitude = abs(packed)
    clock, micro = magnitude >> 24, magnitude & 0xFFFFFF
    total = ((clock >> 12 & 0x3FF) * 3600 + (clock >> 6 & 0x3F) * 60 + (clock & 0x3F)) * 1_000_000 + micro
    return -total if packed < 0 else total


def time2_text(stored: int, fsp: int, digits: int) -> str:
    return format_time(dt.timedelta(microseconds=time2_micro(stored, fsp)), digits)


def _set_reader(
    members: list[str] | None, convert: Callable[[Any], Any] | None, *, set_column: bool
) -> Callable[[int], Any]:
    """Bit mask → the library's SET value after binlake's conversion, cached per mask."""
    cache: dict[int, Any] = {}
    listed = list(members or [])

    def read(mask: int) -> Any:
        try:
            return cache[mask]
        except KeyError:
            pass
        chosen = {member for position, member in enumerate(listed) if mask & (1 << position)}
        # The library reports an empty SET as None; binlake's TableDecoder turns that into "".
        value: Any = chosen if chosen else ("" if set_column else None)
        if value is not None and convert is not None:
            value = convert(value)
        if len(cache) < _CACHED_SET_TEXTS:
            cache[mask] = value
        return value

    return read


def _decimal_fields(precision: int, scale: int) -> list[tuple[int, int]]:
    """(bytes, digits) of each field of a packed DECIMAL, most significant first: leading digits, 9-digit words,
    trailing digits."""
    int_groups, int_rest = divmod(precision - scale, 9)
    frac_groups, frac_rest = divmod(scale, 9)
    fields = ([(_DIGITS_TO_BYTES[int_rest], int_rest)] if int_rest else []) + [(4, 9)] * (int_groups + frac_groups)
    return fields + ([(_DIGITS_TO_BYTES[frac_rest], frac_rest)] if frac_rest else [])


def _decimal_size(precision: int, scale: int) -> int:
    return sum(width for width, _ in _decimal_fields(precision, scale))


def _decimal_lines(precision: int, scale: int) -> list[str]:
    """Source that reads a packed DECIMAL into `{v}`: the library's value, with its exponent (-scale)."""
    fields = _decimal_fields(precision, scale)
    size = sum(width for width, _ in fields)
    top = 1 << (8 * size - 1)
    terms = []
    shift, digits_after = 8 * size, precision
    for width, digits in fields:
        shift -= 8 * width
        digits_after -= digits
        term = f"(n >> {shift} & {(1 << 8 * width) - 1})" if shift else f"(n & {(1 << 8 * width) - 1})"
        terms.append(f"{term} * {10 ** digits_after}" if digits_after else term)
    # The sign bit is inverted; a negative value is stored as the one's complement of its magnitude.
    value = f"Decimal({' + '.join(terms)}).scaleb({-scale}, exact)"
    return [f"n = from_bytes(data[p:p + {size}], 'big')", f"p += {size}",
            f"if n & {top}:", f"    n ^= {top}", f"    {{v}} = {value}",
            "else:", f"    n ^= {top - 1}", f"    {{v}} = {value}.copy_negate()"]


def _signature(columns: Sequence[Any]) -> tuple[Any, ...]:
    keys = ("type", "name", "unsigned", "binlake_charset", "max_length", "length_size", "fsp", "precision",
            "decimals", "bits", "bytes", "size")
    return tuple(
        (*(getattr(column, key, None) for key in keys),
         tuple(getattr(column, "enum_values", None) or ()), tuple(getattr(column, "set_values", None) or ()))
        for column in columns
    )


def rows_image(event: Any) -> tuple[bytes, int, int] | None:
    """The event's bytes and the range its row images fill, or None when only the library can read it."""
    if event.event_type not in _ROWS_EVENTS or not getattr(event, "complete", False):
        return None
    if rows_decoded(event):
        return None  # the library has read the rows already: the packet is past them
    wrapper = event.packet
    found = unread_bytes(wrapper)
    if found is None:
        return None  # bytes were pushed back: the packet position is not where the rows start
    data, start = found
    end = start + event.event_size - wrapper.read_bytes
    if not start < end <= len(data):
        return None
    return data, start, end


class FastRows:
    """Decodes a table's rows events without the library where it can; `images` returns None where not."""

    def __init__(self, schema: TableSchema, *, library_only: bool = False) -> None:
        self.schema = schema
        self.library_only = library_only
        self.decoded_events = 0
        self.fallback_events = 0
        self.unsupported: str | None = None
        self._readers: dict[tuple[Any, ...], RowImageReader | Unsupported] = {}
        self._last_columns: Any = None
        self._last_reader: RowImageReader | Unsupported = Unsupported("no table map yet")

    def images(self, event: Any, *, old_keys_only: bool = False) -> list[Row] | None:
        """The event's row images in order (an update's before and after alternate), or None.

        `old_keys_only`: a delete's images and an update's before images hold their key columns only (None in the
        others), for a fold that reads nothing else of them (the mirror's, `TableChanges`). Their other columns are
        stepped over by length, which still checks that the images fill the event exactly; an after image and an
        insert's image are always whole. Call it before the library reads `event.rows`: it also sets the table map
        up for exact text there.
        """
        columns = event.columns
        if columns is not self._last_columns:
            prepare_columns(columns, self.schema)
            self._last_reader = Unsupported("library only") if self.library_only else self._reader_for(columns)
            self._last_columns = columns
        if self.library_only:
            return self._fall_back()
        reader = self._last_reader
        if isinstance(reader, Unsupported) or event.number_of_columns != reader.width:
            return self._fall_back()
        full = (1 << reader.width) - 1
        for bitmap in (event.columns_present_bitmap, getattr(event, "columns_present_bitmap2", None)):
            if bitmap is not None and int.from_bytes(bitmap, "little") & full != full:
                return self._fall_back()  # not a FULL row image
        found = rows_image(event)
        if found is None:
            return self._fall_back()
        decode = reader.decode
        if old_keys_only:
            if event.event_type in _UPDATES:
                decode = reader.decode_updates or decode
            elif event.event_type in _DELETES:
                decode = reader.decode_keys or decode
        try:
            images = decode(*found)
        except (ValueError, IndexError, KeyError, TypeError, struct.error, UnicodeDecodeError, OverflowError):
            # The library decodes it instead, and raises its own error if the bytes are bad.
            return self._fall_back()
        if event.event_type in _UPDATES and len(images) % 2:
            return self._fall_back()
        self.decoded_events += 1
        return images

    def _fall_back(self) -> list[Row] | None:
        """None: python-mysql-replication decodes this event's rows instead."""
        self.fallback_events += 1
        return None

    def _reader_for(self, columns: Sequence[Any]) -> RowImageReader | Unsupported:
        signature = _signature(columns)
        reader = self._readers.get(signature)
        if reader is None:
            reader = self._readers[signature] = build_reader(self.schema, columns)
            if isinstance(reader, Unsupported):
                self.unsupported = reader.reason
                log.debug("%s: rows decoded by python-mysql-replication: %s", self.schema.table.name, reader.reason)
        return reader
