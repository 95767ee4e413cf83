"""The generated row decoder: what it covers, what it hands back to the library, and DECIMAL's packed form."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from types import SimpleNamespace

import pytest
from pymysqlreplication.column import Column
from pymysqlreplication.constants import FIELD_TYPE

from cdc_lib.binlog.row_decoder import FastRows, RowImageReader, Unsupported, build_reader, time2_text
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo

ID = ColumnInfo("id", "int", "int(11)", False)


def schema(*columns: ColumnInfo) -> TableSchema:
    return TableSchema(TableRef.parse("db.t"), (ID, *columns), ("id",))


def int_column(name: str = "id") -> Column:
    return Column(type=FIELD_TYPE.LONG, name=name, unsigned=False)


@pytest.mark.parametrize(
    ("binlog_type", "info"),
    [
        (FIELD_TYPE.GEOMETRY, ColumnInfo("x", "point", "point", True)),
        (FIELD_TYPE.DATETIME, ColumnInfo("x", "datetime", "datetime", True)),  # the pre-5.6 format
        (FIELD_TYPE.TIMESTAMP, ColumnInfo("x", "timestamp", "timestamp", True)),
        (FIELD_TYPE.VAR_STRING, ColumnInfo("x", "varchar", "varchar(5)", True)),
    ],
)
def test_an_uncovered_column_type_makes_the_table_fall_back(binlog_type: int, info: ColumnInfo) -> None:
    columns = [int_column(), Column(type=binlog_type, name="x", length_size=4, max_length=20)]
    reader = build_reader(schema(info), columns)
    assert isinstance(reader, Unsupported) and "only the library decodes" in reader.reason

    fast = FastRows(schema(info))
    event = SimpleNamespace(columns=columns, number_of_columns=2, columns_present_bitmap=b"\x03")
    assert fast.images(event) is None and fast.images(event) is None
    assert (fast.decoded_events, fast.fallback_events) == (0, 2)
    assert fast.unsupported == reader.reason


def test_columns_that_differ_from_the_schema_fall_back() -> None:
    info = ColumnInfo("v", "int", "int(11)", True)
    assert isinstance(build_reader(schema(info), [int_column(), int_column("w")]), Unsupported)
    assert isinstance(build_reader(schema(info), [int_column()]), Unsupported)
    assert isinstance(build_reader(schema(info), [int_column(), int_column(), int_column("v")]), Unsupported)


def _decimal_bytes(text: str, precision: int, scale: int) -> bytes:
    """MySQL's packed DECIMAL, written out the long way from its documented layout."""
    negative = text.startswith("-")
    whole, _, fraction = text.lstrip("-").partition(".")
    whole = whole.lstrip("0").rjust(precision - scale, "0")
    fraction = fraction.ljust(scale, "0")
    sizes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    out = bytearray()
    lead = len(whole) % 9
    if lead:
        out += int(whole[:lead]).to_bytes(sizes[lead], "big")
    for start in range(lead, len(whole), 9):
        out += int(whole[start:start + 9]).to_bytes(4, "big")
    for start in range(0, len(fraction) - len(fraction) % 9, 9):
        out += int(fraction[start:start + 9]).to_bytes(4, "big")
    if len(fraction) % 9:
        tail = fraction[len(fraction) - len(fraction) % 9:]
        out += int(tail).to_bytes(sizes[len(tail)], "big")
    out[0] |= 0x80
    if negative:
        out = bytearray(byte ^ 0xFF for byte in out)
    return bytes(out)


@pytest.mark.parametrize(
    ("text", "precision", "scale"),
    [
        ("1234567890.12", 12, 2), ("-1234567890.12", 12, 2), ("0.00", 12, 2), ("-0.01", 12, 2),
        ("-0.12345", 5, 5), ("9999999999", 10, 0), ("-9999999999", 10, 0), ("123456789.123456789", 18, 9),
        ("-12345678901234567890123456789012345.123456789012345678901234567890", 65, 30),
        ("0.000000000000000000000000000001", 65, 30), ("-1234.567", 7, 3),
    ],
)
def test_decimal_decodes_to_the_value_and_exponent_of_its_text(text: str, precision: int, scale: int) -> None:
    info = ColumnInfo("d", "decimal", f"decimal({precision},{scale})", True, precision, scale)
    columns = [int_column(), Column(type=FIELD_TYPE.NEWDECIMAL, name="d", precision=precision, decimals=scale)]
    reader = build_reader(schema(info), columns)
    assert isinstance(reader, RowImageReader)
    image = b"\x00" + (7).to_bytes(4, "little") + _decimal_bytes(text, precision, scale)
    ((key, value),) = reader.decode(image, 0, len(image))
    expected = Decimal(text)
    if precision > 38:  # binlake keeps these as text
        assert value == format(expected, "f")
    else:
        assert (key, repr(value)) == (7, repr(expected))


def test_nulls_and_unused_bitmap_bits() -> None:
    info = ColumnInfo("ts", "timestamp", "timestamp(6)", True, None, None, 6)
    columns = [int_column(), Column(type=FIELD_TYPE.TIMESTAMP2, name="ts", fsp=6)]
    reader = build_reader(schema(info), columns)
    assert isinstance(reader, RowImageReader)
    moment = (1_767_225_600).to_bytes(4, "big") + (123_456).to_bytes(3, "big")
    # The server sets the bitmap's spare bits (0xFC); only bits 0-1 belong to columns.
    images = b"\xfc" + (1).to_bytes(4, "little") + moment + b"\xfe" + (2).to_bytes(4, "little")
    assert reader.decode(images, 0, len(images)) == [
        (1, dt.datetime(2026, 1, 1, 0, 0, 0, 123_456, tzinfo=dt.UTC)), (2, None),
    ]
    with pytest.raises(ValueError):
        reader.decode(images, 0, len(images) - 1)  # an image running past the event's end is refused


def _time2_bytes(text: str, fsp: int) -> int:
    """MySQL's stored TIME2 (my_time_packed_to_binary), written out from its layout, as one big-endian number."""
    negative = text.startswith("-")
    hours, minutes, seconds = text.lstrip("-").split(":")
    whole, _, fraction = seconds.partition(".")
    micro = int((fraction + "000000")[:6])
    packed = ((int(hours) << 12 | int(minutes) << 6 | int(whole)) << 24) + micro
    packed = -packed if negative else packed
    if fsp >= 5:
        return packed + 0x800000000000
    int_part = packed >> 24  # an arithmetic shift, as in C
    frac_part = -(-packed % (1 << 24)) if packed < 0 else packed % (1 << 24)  # C's remainder takes the sign
    if fsp == 0:
        return int_part + 0x800000
    width, unit = (16, 100) if fsp >= 3 else (8, 10_000)
    stored_fraction = frac_part // unit if frac_part >= 0 else -(-frac_part // unit)  # C's division truncates
    return (int_part + 0x800000) << width | stored_fraction % (1 << width)


@pytest.mark.parametrize("fsp", range(7))
@pytest.mark.parametrize(
    "text",
    ["-838:59:59.999999", "-00:00:00.000001", "-00:00:01.250000", "00:00:00.000001", "838:59:59.000000",
     "-01:00:00.100000", "-00:00:00.500000", "-00:00:01.000000", "12:34:56.789012", "00:00:00.000000"],
)
def test_time2_reads_negative_fractions_as_mysql_stores_them(text: str, fsp: int) -> None:
    sign, rest = ("-", text[1:]) if text.startswith("-") else ("", text)
    whole, fraction = rest.split(".")
    kept = fraction[:fsp].ljust(6, "0")
    stored_text = f"{sign}{whole}.{kept}"
    expected = f"{sign}{whole}" + (f".{kept[:fsp]}" if fsp else "")
    if not int(kept) and whole == "00:00:00":
        expected = expected.lstrip("-")  # MySQL has no negative zero
    assert time2_text(_time2_bytes(stored_text, fsp), fsp, fsp) == expected


def _mixed_table() -> tuple[TableSchema, list[Column]]:
    """A key between other columns, so stepping over the columns before it must land exactly on it."""
    infos = (ColumnInfo("note", "varchar", "varchar(300)", True, character_set="utf8mb4"),
             ColumnInfo("k", "bigint", "bigint(20)", False),
             ColumnInfo("amount", "decimal", "decimal(12,2)", True),
             ColumnInfo("at", "timestamp", "timestamp(6)", True, None, None, 6),
             ColumnInfo("n", "int", "int(11)", True))
    columns = [Column(type=FIELD_TYPE.VARCHAR, name="note", max_length=1200, collation_name="utf8mb4_bin"),
               Column(type=FIELD_TYPE.LONGLONG, name="k", unsigned=False),
               Column(type=FIELD_TYPE.NEWDECIMAL, name="amount", precision=12, decimals=2),
               Column(type=FIELD_TYPE.TIMESTAMP2, name="at", fsp=6),
               Column(type=FIELD_TYPE.LONG, name="n", unsigned=False)]
    return TableSchema(TableRef.parse("db.m"), infos, ("k",)), columns


def _mixed_image(note: str | None, key: int, amount: str | None, at: int | None, n: int | None) -> bytes:
    values = (note, key, amount, at, n)
    nulls = sum(1 << index for index, value in enumerate(values) if value is None)
    out = bytearray([nulls | 0xE0])
    if note is not None:
        text = note.encode("utf-8")
        out += len(text).to_bytes(2, "little") + text
    out += key.to_bytes(8, "little", signed=True)
    if amount is not None:
        out += _decimal_bytes(amount, 12, 2)
    if at is not None:
        out += at.to_bytes(4, "big") + (654_321).to_bytes(3, "big")
    if n is not None:
        out += n.to_bytes(4, "little", signed=True)
    return bytes(out)


def test_old_images_decode_their_key_only_and_step_over_the_rest_exactly() -> None:
    table, columns = _mixed_table()
    reader = build_reader(table, columns)
    assert isinstance(reader, RowImageReader) and reader.decode_keys and reader.decode_updates
    images = [
        _mixed_image("é" * 150, -7, "-1234.56", 1_767_225_600, 42),
        _mixed_image(None, 9_000_000_000, None, None, None),
        _mixed_image("", 3, "0.01", 1, -1),
        _mixed_image("x" * 299, 4, "9999999999.99", None, 2**31 - 1),
    ]
    data = b"".join(images)
    whole = reader.decode(data, 0, len(data))
    assert [row[1] for row in whole] == [-7, 9_000_000_000, 3, 4]
    assert whole[0][0] == "é" * 150 and whole[0][2] == Decimal("-1234.56") and whole[3][4] == 2**31 - 1

    def keys_only(row: tuple[object, ...]) -> tuple[object, ...]:
        return tuple(value if index == 1 else None for index, value in enumerate(row))

    assert reader.decode_keys(data, 0, len(data)) == [keys_only(row) for row in whole]
    # An update's images alternate before/after: the before images come back as their keys, the after images whole.
    assert reader.decode_updates(data, 0, len(data)) == [
        keys_only(whole[0]), whole[1], keys_only(whole[2]), whole[3],
    ]
    odd = b"".join(images[:3])
    with pytest.raises(ValueError, match="ends after its before image"):
        reader.decode_updates(odd, 0, len(odd))
    for decode in (reader.decode_keys, reader.decode_updates):
        with pytest.raises((ValueError, IndexError)):
            decode(data, 0, len(data) - 1)  # an image stepped over past the event's end is still refused


def test_a_table_without_a_primary_key_has_no_key_only_decoders() -> None:
    table, columns = _mixed_table()
    keyless = TableSchema(table.table, table.columns, ())
    reader = build_reader(keyless, columns)
    assert isinstance(reader, RowImageReader)
    assert reader.decode_keys is None and reader.decode_updates is None
