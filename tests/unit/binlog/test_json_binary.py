"""MySQL's binary JSON decoded and printed as MySQL prints it (`CAST(col AS CHAR)`).

The documents are built by an encoder written here from the format's description (sql-common/json_binary.cc's
header comment: small and large containers, inline values, variable-length lengths, opaque values with the
packed temporal and decimal layouts of my_time.cc / decimal.cc), independent of the decoder, with edge values
chosen so that a swapped field, a lost sign or a wrong rounding shows. The expected texts follow MySQL's
printing rules (`Json_wrapper::to_string`: temporals with 6 fraction digits, decimals with their scale, doubles
by my_gcvt, blobs as `base64:typeNN:`), written out by hand. No MySQL server runs here, so these are the
documented rules, not a server's observed output; the real MySQL 8.0.22 file `json.binlog.000001` is decoded
at the end.
"""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.binlog import json_binary
from cdc_lib.binlog.json_binary import BinaryJsonError
from cdc_lib.binlog.replication_library import parse_binary_json
from cdc_lib.model.json_text import MySqlJson, double_text, mysql_json_text
from cdc_lib.model.types import ColumnInfo, binlog_converter

FIXTURE = Path(__file__).parents[2] / "fixtures" / "mysql-binlogs" / "rust_mysql_common" / "json.binlog.000001"


# -- a test-side encoder -------------------------------------------------------------------------


class Opaque:
    def __init__(self, field_type: int, data: bytes) -> None:
        self.field_type, self.data = field_type, data


def varlen(length: int) -> bytes:
    out = bytearray()
    while True:
        byte, length = length & 0x7F, length >> 7
        out.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(out)


def scalar(value: Any) -> tuple[int, bytes]:
    if value is None or isinstance(value, bool):
        return 0x04, bytes([{None: 0, True: 1, False: 2}[value]])
    if isinstance(value, int):
        for kind, fmt, low, high in ((0x05, "<h", -2**15, 2**15 - 1), (0x07, "<i", -2**31, 2**31 - 1),
                                     (0x09, "<q", -2**63, 2**63 - 1), (0x0A, "<Q", 0, 2**64 - 1)):
            if low <= value <= high:
                return kind, struct.pack(fmt, value)
        raise ValueError(value)
    if isinstance(value, float):
        return 0x0B, struct.pack("<d", value)
    if isinstance(value, str):
        raw = value.encode()
        return 0x0C, varlen(len(raw)) + raw
    if isinstance(value, Opaque):
        return 0x0F, bytes([value.field_type]) + varlen(len(value.data)) + value.data
    raise TypeError(value)


def encode_value(value: Any, large: bool = False) -> tuple[int, bytes]:
    if isinstance(value, (dict, list)):
        try:
            small = None if large else container(value, large=False)
        except OverflowError:  # an offset past 64 KiB: only the large format holds it
            small = None
        if small is not None and len(small) <= 0xFFFF:
            return (0x00 if isinstance(value, dict) else 0x02), small
        return (0x01 if isinstance(value, dict) else 0x03), container(value, large=True)
    return scalar(value)


def container(value: dict[str, Any] | list[Any], *, large: bool) -> bytes:
    width = 4 if large else 2
    is_object = isinstance(value, dict)
    items: list[tuple[bytes, Any]]
    if isinstance(value, dict):
        # MySQL stores members ordered by key length, then key bytes.
        items = sorted(((key.encode(), item) for key, item in value.items()), key=lambda kv: (len(kv[0]), kv[0]))
    else:
        items = [(b"", item) for item in value]
    count = len(items)
    header = 2 * width + count * ((width + 2) if is_object else 0) + count * (1 + width)
    tail = bytearray(b"".join(key for key, _ in items))
    key_entries, value_entries = bytearray(), bytearray()
    key_offset = header
    for key, _ in items:
        if is_object:
            key_entries += key_offset.to_bytes(width, "little") + len(key).to_bytes(2, "little")
            key_offset += len(key)
    for _, item in items:
        kind, body = encode_value(item, large=False)
        inline = kind == 0x04 or kind == 0x05 or (large and kind == 0x07)
        if kind == 0x05 and not large:
            inline = True
        if inline:
            value_entries += bytes([kind]) + body.ljust(width, b"\x00")
        else:
            value_entries += bytes([kind]) + (header + len(tail)).to_bytes(width, "little")
            tail += body
    size = header + len(tail)
    return count.to_bytes(width, "little") + size.to_bytes(width, "little") + key_entries + value_entries + tail


def encode(value: Any) -> bytes:
    kind, body = encode_value(value)
    return bytes([kind]) + body


# MySQL's packed temporals (my_time.cc) and packed decimals (decimal.cc), from their layout.

def packed_datetime(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0,
                    micro: int = 0) -> bytes:
    ymd = ((year * 13 + month) << 5) | day
    hms = (hour << 12) | (minute << 6) | second
    return struct.pack("<q", (((ymd << 17) | hms) << 24) + micro)


def packed_time(negative: bool, hours: int, minute: int, second: int, micro: int) -> bytes:
    value = (((hours << 12) | (minute << 6) | second) << 24) + micro
    return struct.pack("<q", -value if negative else value)


def packed_decimal(text: str, precision: int, scale: int) -> bytes:
    negative = text.startswith("-")
    whole, _, fraction = text.lstrip("-").partition(".")
    integral = precision - scale
    whole, fraction = whole.rjust(integral, "0"), fraction.ljust(scale, "0")
    sizes = {0: 0, 1: 1, 2: 1, 3: 2, 4: 2, 5: 3, 6: 3, 7: 4, 8: 4, 9: 4}
    out = bytearray()
    lead = integral % 9
    groups = ([whole[:lead]] if lead else []) + [whole[i:i + 9] for i in range(lead, integral, 9)]
    for group in groups:
        out += int(group).to_bytes(sizes[len(group)], "big")
    for i in range(0, scale, 9):
        group = fraction[i:i + 9]
        out += int(group).to_bytes(sizes[len(group)], "big")
    out[0] ^= 0x80
    if negative:
        out = bytearray(byte ^ 0xFF for byte in out)
    return bytes([precision, scale]) + bytes(out)


DATE, TIME, DATETIME, TIMESTAMP, NEWDECIMAL, BLOB, BIT, VAR_STRING = 10, 11, 12, 7, 246, 252, 16, 253


# -- scalars as MySQL prints them ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Opaque(DATE, packed_datetime(2024, 1, 2)), '"2024-01-02"'),
        (Opaque(DATE, packed_datetime(1, 12, 31)), '"0001-12-31"'),
        (Opaque(TIME, packed_time(True, 12, 34, 56, 1)), '"-12:34:56.000001"'),
        (Opaque(TIME, packed_time(False, 838, 59, 59, 0)), '"838:59:59.000000"'),
        (Opaque(TIME, packed_time(True, 0, 0, 0, 250000)), '"-00:00:00.250000"'),
        (Opaque(DATETIME, packed_datetime(2024, 2, 29, 23, 59, 58, 999999)), '"2024-02-29 23:59:58.999999"'),
        (Opaque(DATETIME, packed_datetime(9999, 12, 31, 1, 2, 3)), '"9999-12-31 01:02:03.000000"'),
        (Opaque(TIMESTAMP, packed_datetime(1970, 1, 1, 0, 0, 1, 500000)), '"1970-01-01 00:00:01.500000"'),
        (Opaque(NEWDECIMAL, packed_decimal("-0.00012300", 10, 8)), "-0.00012300"),
        (Opaque(NEWDECIMAL, packed_decimal("12345678901234567890.123456789", 29, 9)),
         "12345678901234567890.123456789"),
        (Opaque(NEWDECIMAL, packed_decimal("-987654321987", 12, 0)), "-987654321987"),
        (Opaque(NEWDECIMAL, packed_decimal("0.5", 65, 30)), "0." + "5".ljust(30, "0")),
        (Opaque(BLOB, b"\x00\xff"), '"base64:type252:AP8="'),
        (Opaque(BIT, b"\x55"), '"base64:type16:VQ=="'),
        (Opaque(VAR_STRING, b"plain text"), '"plain text"'),
        (1e300, "1e300"), (0.1, "0.1"), (1.0, "1.0"), (-2.5, "-2.5"), (1e15, "1e15"), (1e14, "100000000000000.0"),
        (1e-5, "0.00001"), (1e-16, "1e-16"), (-1.5e-7, "-0.00000015"), (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e308"), (123456789012345678.0, "1.2345678901234568e17"),
        (-9223372036854775808, "-9223372036854775808"), (18446744073709551615, "18446744073709551615"),
        (-32768, "-32768"), (65535, "65535"), (-2147483648, "-2147483648"),
        (None, "null"), (True, "true"), (False, "false"),
        ('a"b\\c\n\t\x01\x1f\x7fé😀', '"a\\"b\\\\c\\n\\t\\u0001\\u001f\x7fé😀"'),
    ],
)
def test_a_scalar_prints_as_mysql_prints_it_alone_and_in_containers(value: Any, text: str) -> None:
    assert mysql_json_text(json_binary.decode(encode(value))) == text
    assert mysql_json_text(json_binary.decode(encode([value, 7]))) == f"[{text}, 7]"
    assert mysql_json_text(json_binary.decode(encode({"k": value}))) == '{"k": ' + text + "}"


def test_a_long_blob_breaks_its_base64_every_76_characters_as_mysql_does() -> None:
    data = bytes(range(256)) * 2
    encoded = base64.b64encode(data).decode()
    expected = '"base64:type251:' + "\\n".join(encoded[i:i + 76] for i in range(0, len(encoded), 76)) + '"'
    assert mysql_json_text(json_binary.decode(encode(Opaque(251, data)))) == expected


def test_members_keep_mysqls_stored_order_and_unicode_keys() -> None:
    document = {"zz": 1, "é": [1, 2.0, "x"], "a": {"日本": None, "b": True}, "": -1}
    text = mysql_json_text(json_binary.decode(encode(document)))
    # key length in bytes, then bytes: "" (0), "a" (1), "zz" and "é" (2 bytes: 'z' 0x7A < 0xC3), "日本" (6).
    assert text == '{"": -1, "a": {"b": true, "日本": null}, "zz": 1, "é": [1, 2.0, "x"]}'


def test_a_document_over_64_kib_is_read_in_the_large_format_inline_int32_included() -> None:
    inner = {f"key{index:05d}": "v" * 40 for index in range(1500)}
    document = {"big": inner, "n": -2147483648, "u": 4294967295, "d": Opaque(DATE, packed_datetime(2000, 2, 29))}
    data = encode(document)
    assert data[0] == 0x01 and len(data) > 0xFFFF  # the large object format
    decoded = json_binary.decode(data)
    assert decoded["big"] == inner and decoded["n"] == -2147483648 and decoded["u"] == 4294967295
    text = mysql_json_text(decoded)
    assert text.startswith('{"d": "2000-02-29", "n": -2147483648, "u": 4294967295, "big": {"key00000": "vvv')
    assert json.loads(text)["big"] == inner


def test_the_json_columns_converter_quotes_a_top_level_string_and_keeps_mariadbs_text() -> None:
    json_text = binlog_converter(ColumnInfo("j", "json", "json", True))
    assert json_text is not None
    assert json_text(MySqlJson(json_binary.decode(encode("text")))) == '"text"'
    assert json_text(MySqlJson(json_binary.decode(b""))) == "null"  # MySQL reads an empty value as JSON null
    assert json_text('{"a":1}') == '{"a":1}'  # MariaDB: LONGTEXT, the text itself


@pytest.mark.parametrize(
    "data",
    [
        b"\x0e\x00",  # no such type
        b"\x04\x03",  # no such literal
        b"\x0c\x05abc",  # a string longer than its bytes
        b"\x0c\x02\xc3\x28",  # not UTF-8
        b"\x00\x02\x00\xff\x00",  # an object bigger than its bytes
        b"\x0f\x0a\x04abcd",  # a DATE of 4 bytes
        b"\x0f\xf6\x03\x05\x02\x80",  # a DECIMAL(5,2) one byte short
    ],
)
def test_bytes_the_server_does_not_write_are_refused(data: bytes) -> None:
    with pytest.raises(BinaryJsonError):
        json_binary.decode(data)


def test_double_text_is_my_gcvt_for_every_magnitude() -> None:
    for exponent in range(-30, 31):
        value = 1.25 * 10.0 ** exponent
        text = double_text(value)
        assert float(text) == value and "+" not in text
        if -14 <= exponent + 1 <= 15 or exponent == 15:
            assert "e" not in text or exponent >= 15
    assert double_text(-0.0) == "-0.0"


# -- the library path and the diff values use the same decoder ------------------------------------


class Packet:
    """The two reads `read_binary_json` makes of a row image."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def read(self, size: int) -> bytes:
        self.pos += size
        return self.data[self.pos - size:self.pos]

    def read_uint_by_size(self, size: int) -> int:
        return int.from_bytes(self.read(size), "little")


def test_the_library_path_reads_a_json_value_with_binlakes_decoder() -> None:
    from pymysqlreplication.packet import BinLogPacketWrapper

    document = {"ts": Opaque(TIMESTAMP, packed_datetime(2038, 1, 19, 3, 14, 7, 999999)),
                "t": Opaque(TIME, packed_time(True, 1, 2, 3, 4)), "blob": Opaque(BLOB, b"\x80\x81")}
    body = encode(document)
    value = BinLogPacketWrapper.read_binary_json(Packet(len(body).to_bytes(4, "little") + body), 4, False)
    json_text = binlog_converter(ColumnInfo("j", "json", "json", True))
    assert json_text is not None
    assert json_text(value) == '{"t": "-01:02:03.000004", "ts": "2038-01-19 03:14:07.999999", ' \
                               '"blob": "base64:type252:gIE="}'
    assert parse_binary_json(encode(Opaque(DATE, packed_datetime(2024, 1, 2)))) == \
        json_binary.decode(encode(Opaque(DATE, packed_datetime(2024, 1, 2))))


# -- the real file -------------------------------------------------------------------------------


def test_the_real_mysql_8_0_22_documents_print_as_mysql_prints_them() -> None:
    """json.binlog.000001's WRITE_ROWS events (type 30): each row's @2 is a JSON document (4-byte length)."""
    data, pos, texts = FIXTURE.read_bytes(), 4, []
    while pos < len(data):
        kind, size = data[pos + 4], struct.unpack_from("<I", data, pos + 9)[0]
        if kind == 30:
            body = data[pos + 19:pos + size - 4]
            images, at = body[6 + 2 + 2 + 1 + 1:], 0  # table id, flags, extra data, column count, bitmap
            while at < len(images):
                at += 1 + 4  # null bitmap, @1
                length = struct.unpack_from("<I", images, at)[0]
                texts.append(mysql_json_text(json_binary.decode(images[at + 4:at + 4 + length])))
                at += 4 + length
                at += 2 + struct.unpack_from("<H", images, at)[0] + 4  # @3 VARCHAR(100) utf8mb4, @4 INT
        pos += size
    people = ['{"age": 24, "data": "xxxxxxxxxx", "name": "Joe"}', '{"age": 32, "data": "yyyyyyyyyy", "name": "Sue"}',
              '{"age": 40, "data": "zzzzzzzzzz", "name": "Pete"}']
    assert texts == people * 2


def test_the_fast_row_decoder_reads_json_columns_as_the_library_path_does() -> None:
    from pymysqlreplication.column import Column
    from pymysqlreplication.constants import FIELD_TYPE

    from cdc_lib.binlog.row_decoder import RowImageReader, build_reader
    from cdc_lib.model.tables import TableRef, TableSchema

    info = ColumnInfo("j", "json", "json", True)
    table = TableSchema(TableRef.parse("db.t"), (ColumnInfo("id", "int", "int(11)", False), info), ("id",))
    columns = [Column(type=FIELD_TYPE.LONG, name="id", unsigned=False),
               Column(type=FIELD_TYPE.JSON, name="j", length_size=4)]
    reader = build_reader(table, columns)
    assert isinstance(reader, RowImageReader)
    document = encode({"d": Opaque(NEWDECIMAL, packed_decimal("-0.00012300", 10, 8)), "f": 0.1})
    images = (b"\x00" + struct.pack("<i", 1) + struct.pack("<I", len(document)) + document
              + b"\x02" + struct.pack("<i", 2))  # the second row's JSON is SQL NULL
    assert reader.decode(images, 0, len(images)) == [(1, '{"d": -0.00012300, "f": 0.1}'), (2, None)]


def test_a_partial_updates_values_are_decoded_the_same_way() -> None:
    from cdc_lib.binlog.json_diff import REPLACE, apply_diffs, read_diffs

    def entry(path: str, value: bytes) -> bytes:  # operation, packed-length path, packed-length value
        return bytes([REPLACE, len(path)]) + path.encode() + bytes([len(value)]) + value

    before = json_binary.decode(encode({"when": None, "amount": 1}))
    vector = (entry("$.when", encode(Opaque(DATETIME, packed_datetime(2024, 12, 31, 23, 59, 59, 120000))))
              + entry("$.amount", encode(Opaque(NEWDECIMAL, packed_decimal("-0.00012300", 10, 8)))))
    after = apply_diffs(before, read_diffs(vector, parse_binary_json))
    json_text = binlog_converter(ColumnInfo("j", "json", "json", True))
    assert json_text is not None
    assert json_text(MySqlJson(after)) == '{"when": "2024-12-31 23:59:59.120000", "amount": -0.00012300}'
