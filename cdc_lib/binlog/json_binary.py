"""MySQL's binary JSON (a JSON column's bytes in a row image, and a partial update's values), decoded exactly.

The format is MySQL's `json_binary` (sql-common/json_binary.cc): a type byte, then the value. Objects and arrays
come small (2-byte counts and offsets) or large (4-byte, once a document passes 64 KiB): element count, byte
size, then per member a key entry (offset, 2-byte length), per element a value entry (type byte, then the
offset of the value — or, for literals, 16-bit integers and, in the large format, 32-bit integers, the value
itself), then the keys and values. Scalars: literal (null, true, false), int16/uint16/int32/uint32/int64/uint64
and double little-endian, a string (UTF-8 after a variable-length length: 7 bits a byte, high bit set while more
follow), and an opaque value: a MySQL field type byte, a variable-length length and bytes. MySQL stores DATE,
TIME, DATETIME and TIMESTAMP scalars as opaque packed temporals (8 bytes, `TIME_to_longlong_*_packed`) and
DECIMAL as opaque precision, scale and packed decimal; anything else opaque (bytes from a BLOB or BIT) it prints
as `"base64:typeNN:<base64>"`, and an opaque VAR_STRING as the string.

python-mysql-replication 1.0.17 gets the opaque values wrong: a TIMESTAMP or a blob comes out as its bytes
decoded as text with errors dropped, a DATE/DATETIME/TIME/DECIMAL as a Python object `json.dumps` cannot
write (every batch with one failed). This decoder gives each such scalar MySQL's own text
(`cdc_lib.model.json_text.JsonScalarText`) and everything else as plain Python values in stored order, which
`json_text.mysql_json_text` prints as `CAST(col AS CHAR)` does.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from cdc_lib.model.json_text import JsonScalarText

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY = 0x00, 0x01, 0x02, 0x03
LITERAL, INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING, OPAQUE = (
    0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0F)
LITERAL_NULL, LITERAL_TRUE, LITERAL_FALSE = 0x00, 0x01, 0x02

# MySQL field types an opaque value names (include/field_types.h).
FIELD_TIMESTAMP, FIELD_DATE, FIELD_TIME, FIELD_DATETIME = 7, 10, 11, 12
FIELD_NEWDECIMAL, FIELD_VAR_STRING = 246, 253

_INLINE_SCALARS = {
    INT16: struct.Struct("<h"), UINT16: struct.Struct("<H"), INT32: struct.Struct("<i"), UINT32: struct.Struct("<I"),
}
_FIXED_SCALARS = {
    **_INLINE_SCALARS, INT64: struct.Struct("<q"), UINT64: struct.Struct("<Q"), DOUBLE: struct.Struct("<d"),
}
# Per format (small, large): a container's count and size; a key entry (offset, length); a value entry's offset.
_HEADERS = (struct.Struct("<HH").unpack_from, struct.Struct("<II").unpack_from)
_KEY_ENTRIES = (struct.Struct("<HH").unpack_from, struct.Struct("<IH").unpack_from)
_OFFSETS = (struct.Struct("<H").unpack_from, struct.Struct("<I").unpack_from)
_DIGITS_TO_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


class BinaryJsonError(ValueError):
    """Bytes that are not MySQL binary JSON as the server writes it (the caller stops the table, named)."""


def decode(data: bytes) -> Any:
    """A whole binary JSON value: its type byte, then its body. Empty bytes are JSON null, as MySQL reads them
    (a JSON column added NOT NULL to a table with rows holds them)."""
    if not data:
        return None
    return _value(bytes(data), data[0], 1, len(data))


def _value(data: bytes, kind: int, pos: int, end: int) -> Any:
    """The value of type `kind` whose bytes start at `pos` in `data`; the enclosing container ends at `end`.
    (Positions are absolute: a container's offsets are added to its start, so no bytes are copied.)"""
    if kind <= LARGE_ARRAY:
        return _container(data, pos, end, large=kind & 1, is_object=kind <= LARGE_OBJECT)
    if kind == LITERAL:
        _check(pos, 1, end)
        return _literal(data[pos])
    scalar = _FIXED_SCALARS.get(kind)
    if scalar is not None:
        _check(pos, scalar.size, end)
        return scalar.unpack_from(data, pos)[0]
    if kind == STRING:
        length, pos = _varlen(data, pos, end)
        _check(pos, length, end)
        return _text(data[pos:pos + length])
    if kind == OPAQUE:
        _check(pos, 1, end)
        length, start = _varlen(data, pos + 1, end)
        _check(start, length, end)
        return opaque(data[pos], data[start:start + length])
    raise BinaryJsonError(f"binary JSON has a value of type {kind:#04x}, which MySQL does not write")


def _container(data: bytes, base: int, end: int, *, large: int, is_object: bool) -> Any:
    width = 4 if large else 2
    _check(base, 2 * width, end)
    count, size = _HEADERS[large](data, base)
    if base + size > end:
        raise BinaryJsonError(f"a binary JSON {'object' if is_object else 'array'} says it is {size} bytes, "
                              f"but only {end - base} follow")
    limit = base + size
    key_entry, value_entry = width + 2, 1 + width
    entries = base + 2 * width + (count * key_entry if is_object else 0)
    if entries + count * value_entry > limit:
        raise BinaryJsonError(f"a binary JSON container of {count} elements does not fit its {size} bytes")
    offset_at = _OFFSETS[large]
    values = []
    for at in range(entries, entries + count * value_entry, value_entry):
        kind = data[at]
        if kind == LITERAL:
            values.append(_literal(data[at + 1]))
        elif kind == INT16 or kind == UINT16 or (large and (kind == INT32 or kind == UINT32)):
            # Small values live in the entry itself: 16-bit ones always, 32-bit ones in the large format.
            values.append(_INLINE_SCALARS[kind].unpack_from(data, at + 1)[0])
        else:
            values.append(_value(data, kind, base + offset_at(data, at + 1)[0], limit))
    if not is_object:
        return values
    members: dict[str, Any] = {}
    key_at = _KEY_ENTRIES[large]
    for index, at in enumerate(range(base + 2 * width, entries, key_entry)):
        offset, length = key_at(data, at)
        _check(base + offset, length, limit)
        members[_text(data[base + offset:base + offset + length])] = values[index]
    return members


def _literal(byte: int) -> bool | None:
    if byte == LITERAL_NULL:
        return None
    if byte in (LITERAL_TRUE, LITERAL_FALSE):
        return byte == LITERAL_TRUE
    raise BinaryJsonError(f"binary JSON has a literal {byte:#04x}, which is none of null, true, false")


def opaque(field_type: int, data: bytes) -> Any:
    """An opaque scalar as MySQL prints it (`wrapper_to_string`): temporals quoted with 6 fraction digits (DATE
    without time), DECIMAL with its scale, a VAR_STRING as the string, anything else `"base64:typeNN:…"`."""
    if field_type == FIELD_VAR_STRING:
        return _text(data)
    if field_type == FIELD_NEWDECIMAL:
        return JsonScalarText(_decimal_text(data))
    if field_type in (FIELD_DATE, FIELD_DATETIME, FIELD_TIMESTAMP, FIELD_TIME):
        if len(data) != 8:
            raise BinaryJsonError(f"a binary JSON temporal of field type {field_type} has {len(data)} bytes, not 8")
        packed = int.from_bytes(data, "little", signed=True)
        text = _time_text(packed) if field_type == FIELD_TIME else _datetime_text(packed, field_type == FIELD_DATE)
        return JsonScalarText(f'"{text}"')
    return JsonScalarText(f'"base64:type{field_type}:{_mysql_base64(data)}"')


def _datetime_text(packed: int, date_only: bool) -> str:
    """TIME_from_longlong_datetime_packed, then my_TIME_to_str with 6 fraction digits (a DATE: the date only)."""
    magnitude = -packed if packed < 0 else packed
    whole, fraction = magnitude >> 24, magnitude % (1 << 24)
    ymd, hms = whole >> 17, whole % (1 << 17)
    year_month = ymd >> 5
    date = f"{year_month // 13:04d}-{year_month % 13:02d}-{ymd % 32:02d}"
    if date_only:
        return date
    return f"{date} {hms >> 12:02d}:{(hms >> 6) % 64:02d}:{hms % 64:02d}.{fraction:06d}"


def _time_text(packed: int) -> str:
    """TIME_from_longlong_time_packed, then my_time_to_str with 6 fraction digits: `-838:59:59.000000`."""
    sign = "-" if packed < 0 else ""
    magnitude = -packed if packed < 0 else packed
    whole, fraction = magnitude >> 24, magnitude % (1 << 24)
    return f"{sign}{(whole >> 12) % 1024:02d}:{(whole >> 6) % 64:02d}:{whole % 64:02d}.{fraction:06d}"


def _decimal_text(data: bytes) -> str:
    """Json_decimal's opaque bytes (precision, scale, MySQL's packed decimal) as decimal2string prints them: all
    `scale` fraction digits, no leading integer zeros (`-0.00012300`)."""
    if len(data) < 2:
        raise BinaryJsonError("a binary JSON decimal lacks its precision and scale")
    precision, scale = data[0], data[1]
    if not 0 < precision <= 65 or scale > precision or scale > 30:
        raise BinaryJsonError(f"a binary JSON decimal has precision {precision} and scale {scale}")
    integral = precision - scale
    fields = ([_DIGITS_TO_BYTES[integral % 9]] if integral % 9 else []) + [4] * (integral // 9 + scale // 9)
    fields += [_DIGITS_TO_BYTES[scale % 9]] if scale % 9 else []
    packed = data[2:]
    if len(packed) != sum(fields):
        raise BinaryJsonError(f"a binary JSON decimal({precision},{scale}) has {len(packed)} bytes, not {sum(fields)}")
    raw = bytearray(packed)
    negative = not raw[0] & 0x80
    raw[0] ^= 0x80  # the sign bit is stored inverted; a negative value is the one's complement of its magnitude
    if negative:
        raw = bytearray(byte ^ 0xFF for byte in raw)
    digits, pos = [], 0
    widths = ([integral % 9] if integral % 9 else []) + [9] * (integral // 9 + scale // 9)
    widths += [scale % 9] if scale % 9 else []
    for size, width in zip(fields, widths, strict=True):
        digits.append(f"{int.from_bytes(raw[pos:pos + size], 'big'):0{width}d}")
        pos += size
    text = "".join(digits)
    whole, fraction = text[:integral].lstrip("0") or "0", text[integral:]
    sign = "-" if negative and text.strip("0") else ""
    return f"{sign}{whole}.{fraction}" if scale else f"{sign}{whole}"


def _mysql_base64(data: bytes) -> str:
    """MySQL's base64_encode: standard alphabet with padding, and a newline after every 76 output characters
    (which double_quote then prints as `\\n`)."""
    encoded = base64.b64encode(data).decode("ascii")
    return "\\n".join(encoded[at:at + 76] for at in range(0, len(encoded), 76))


def _text(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BinaryJsonError(f"a binary JSON string is not UTF-8 ({exc})") from None


def _varlen(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """MySQL's variable-length length (json_binary read_variable_length): 7 bits a byte, at most 5 bytes."""
    value = 0
    for index in range(5):
        _check(pos + index, 1, end)
        byte = data[pos + index]
        value |= (byte & 0x7F) << (7 * index)
        if not byte & 0x80:
            if value > 0xFFFFFFFF:
                break
            return value, pos + index + 1
    raise BinaryJsonError("a binary JSON length is longer than 32 bits")


def _check(pos: int, length: int, end: int) -> None:
    if pos + length > end:
        raise BinaryJsonError(f"a binary JSON value at byte {pos} runs past its container's end at byte {end}")
