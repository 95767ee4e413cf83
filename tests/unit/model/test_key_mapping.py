"""Every MySQL type usable in a primary key maps distinct source values to distinct, non-NULL Delta values, or
binlake refuses it as a key (issue 24, case 3): the type (`types.key_refusal`) or the value (a zero date).

The values are the binlog path's (python-mysql-replication's decoded value, then `types.binlog_converter`); the
snapshot path's are compared with these by tests/integration/test_type_parity.py, and the keys' edge values by
tests/integration/test_key_integrity.py on both paths.
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

import pytest
from pymysqlreplication.constants import NONE_SOURCE

from cdc_lib.binlog.table_rows import TableDecoder
from cdc_lib.errors import KeyMappingError, ZeroDateError, ZeroDateKeyError
from cdc_lib.model import charset_tables, charsets
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo, binlog_converter, check_key_columns, key_refusal


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _column(data_type: str, column_type: str | None = None, **extra: Any) -> ColumnInfo:
    return ColumnInfo("k", data_type, column_type or data_type, False, **extra)


def _mapped(column: ColumnInfo, value: Any) -> Any:
    if isinstance(value, bytes) and column.character_set:
        value = charsets.decode(value, column.character_set)  # what the library's registered codec does
    converter = binlog_converter(column)
    return value if converter is None else converter(value)


#: (column, distinct source values as python-mysql-replication decodes them), one entry per key type of
#: docs/types.md. Values MySQL itself holds equal (0.0 and -0.0, 'a' and 'a ' in a PAD SPACE collation) are no
#: two keys on the source either, so they are not listed as distinct.
KEY_TYPES: list[tuple[ColumnInfo, list[Any]]] = [
    (_column("tinyint", "tinyint(4)"), [-128, -1, 0, 1, 127]),
    (_column("tinyint", "tinyint(1)"), [0, 1, 2, -1]),
    (_column("tinyint", "tinyint(3) unsigned"), [0, 128, 255]),
    (_column("smallint", "smallint(6)"), [-32768, 0, 32767]),
    (_column("smallint", "smallint(5) unsigned"), [0, 65535]),
    (_column("mediumint", "mediumint(9)"), [-8388608, 8388607]),
    (_column("mediumint", "mediumint(8) unsigned"), [0, 16777215]),
    (_column("int", "int(11)"), [-(2**31), 0, 2**31 - 1]),
    (_column("int", "int(10) unsigned"), [0, 2**32 - 1]),
    (_column("bigint", "bigint(20)"), [-(2**63), -1, 0, 2**53 + 1, 2**63 - 1]),
    (_column("bigint", "bigint(20) unsigned"), [0, 2**63, 2**64 - 2, 2**64 - 1]),
    (_column("decimal", "decimal(10,2)", numeric_precision=10, numeric_scale=2),
     [Decimal("-0.01"), Decimal("0.00"), Decimal("0.01"), Decimal("99999999.99")]),
    (_column("decimal", "decimal(38,0)", numeric_precision=38, numeric_scale=0),
     [Decimal("1" * 37 + "0"), Decimal("1" * 37 + "1")]),
    (_column("decimal", "decimal(65,30)", numeric_precision=65, numeric_scale=30),
     [Decimal("1.5" + "0" * 29), Decimal("1.5" + "0" * 28 + "1"), Decimal("-1.5" + "0" * 29)]),
    (_column("float"), [_float32(0.1), _float32(0.1) + 2**-27, 16777216.0, 16777218.0, _float32(1e-45), -1.5]),
    (_column("double"), [0.3, 0.30000000000000004, 5e-324, 1e308, -1.5]),
    (_column("bit", "bit(1)"), [b"\x00", b"\x01"]),
    (_column("bit", "bit(64)"), [b"\x00" * 8, b"\x7f" + b"\xff" * 7, b"\xff" * 8]),
    (_column("year"), [1900, 1901, 1970, 2155]),  # 1900: the library's reading of YEAR 0000
    (_column("date"), [dt.date(1, 1, 1), dt.date(1582, 10, 10), dt.date(1970, 1, 1), dt.date(9999, 12, 31)]),
    (_column("datetime", "datetime(6)", datetime_precision=6),
     [dt.datetime(1000, 1, 1), dt.datetime(2024, 1, 1, 0, 0, 0, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999)]),
    (_column("timestamp", "timestamp(6)", datetime_precision=6),
     [dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(2024, 3, 31, 1, 0, 0, 1), dt.datetime(2038, 1, 19, 3, 14, 7)]),
    (_column("time", "time(6)", datetime_precision=6),
     [dt.timedelta(seconds=-1.25), dt.timedelta(seconds=-1.75), dt.timedelta(0), dt.timedelta(microseconds=1),
      dt.timedelta(hours=-838, minutes=-59, seconds=-59), dt.timedelta(hours=838, minutes=59, seconds=59)]),
    (_column("time", "time", datetime_precision=0), [dt.timedelta(seconds=-1), dt.timedelta(0), dt.timedelta(1)]),
    (_column("varchar", "varchar(20)", character_set="utf8mb4"),
     ["", "a", "A", "a ", "é", "e\u0301", "😀", "\x00"]),
    (_column("char", "char(4)", character_set="utf8mb3"), ["", "a", "ab", "Ä"]),
    (_column("varchar", "varchar(20)", character_set="latin1"), [bytes([code]) for code in range(256)]),
    (_column("varchar", "varchar(20)", character_set="ucs2"), [b"\x00\x41", b"\x00\x61", b"\xff\xfd"]),
    (_column("enum", "enum('a','b','A ')", character_set="utf8mb4"), ["", "a", "b", "A"]),  # '': the error value
    (_column("set", "set('a','b','c')", character_set="utf8mb4"),
     [set(), {"a"}, {"b"}, {"a", "b"}, {"a", "b", "c"}, 0b101]),
    (_column("binary", "binary(4)"), [b"a", b"a\x00\x01", b"\x00\x00\x00\x01", b"\xff\xff\xff\xff"]),
    (_column("varbinary", "varbinary(8)"), [b"", b"\x00", b"a", b"a\x00", b"a "]),
    (_column("blob"), [b"", b"\x00", b"x" * 100]),  # a key on a prefix: the whole values are still distinct
    (_column("text", "text", character_set="utf8mb4"), ["", "x", "x" * 100]),
]


@pytest.mark.parametrize(("column", "values"), KEY_TYPES, ids=[column.column_type for column, _ in KEY_TYPES])
def test_distinct_key_values_stay_distinct_and_non_null(column: ColumnInfo, values: list[Any]) -> None:
    assert key_refusal(column) is None
    mapped = [_mapped(column, value) for value in values]
    assert None not in mapped
    assert len(set(mapped)) == len(values), f"{column.column_type}: {values} → {mapped}"


#: Single-byte charsets from the server's tables: a key column in one is either injective over every byte, or
#: refused. Multi-byte ones are judged on their codes that the server shows differently from Python's codec.
@pytest.mark.parametrize("charset", sorted(charset_tables.SINGLE_BYTE))
def test_a_single_byte_charset_key_is_injective_over_every_byte_or_refused(charset: str) -> None:
    column = _column("varchar", "varchar(4)", character_set=charset)
    shown = [_mapped(column, bytes([code])) for code in range(256)]
    if len(set(shown)) < 256:
        assert key_refusal(column) is not None and "both show as" in str(key_refusal(column))
    else:
        assert key_refusal(column) is None


@pytest.mark.parametrize("charset", sorted(charset_tables.MULTI_BYTE))
def test_a_multi_byte_charset_key_is_injective_on_its_fixed_codes_or_refused(charset: str) -> None:
    codec, _, fixed = charset_tables.MULTI_BYTE[charset]
    column = _column("varchar", "varchar(4)", character_set=charset)
    codes = [code for first, last, _, _ in fixed for code in range(first, last + 1)]
    texts = {_mapped(column, code.to_bytes((code.bit_length() + 7) // 8, "big")) for code in codes}
    plain = {chr(code) for code in range(0x20, 0x7F)}  # ASCII, which every one of these shows as itself
    collides = len(texts) < len(codes) or bool(texts & plain)
    assert collides == (key_refusal(column) is not None)


@pytest.mark.parametrize("charset", ["utf8mb4", "utf8mb3", "utf16", "utf16le", "utf32", "ucs2", "latin1", "koi8r"])
def test_charsets_that_decode_every_code_apart_are_keys(charset: str) -> None:
    assert key_refusal(_column("varchar", "varchar(4)", character_set=charset)) is None


@pytest.mark.parametrize(("column", "colliding"), [
    (_column("enum", "enum('','a')", character_set="utf8mb4"), ["", ""]),  # the error value (index 0) and ''
    (_column("set", "set('','a')", character_set="utf8mb4"), [set(), {""}]),
])
def test_an_empty_member_makes_enum_and_set_no_key(column: ColumnInfo, colliding: list[Any]) -> None:
    assert len({_mapped(column, value) for value in colliding}) == 1
    assert key_refusal(column) is not None
    with pytest.raises(KeyMappingError, match="primary-key column 'k' is ") as raised:
        check_key_columns([column, _column("int")], ["k"], table="d.t")
    assert "binlake snapshot --table d.t" in raised.value.remedy and raised.value.column == "k"
    check_key_columns([column, _column("int", "int")], ["other"], table="d.t")  # not a key: no refusal


def test_a_lossy_charset_key_is_refused_with_its_example() -> None:
    with pytest.raises(KeyMappingError, match=r"cp1251, in which bytes 0x3F and 0x98 both show as '\?'"):
        check_key_columns([_column("varchar", "varchar(9)", character_set="cp1251")], ["k"], table="d.t")


ZERO_DATES = [
    ("date", None, NONE_SOURCE.OUT_OF_DATE_RANGE),  # '0000-00-00', '2024-00-10', '0000-01-01'
    ("datetime", None, NONE_SOURCE.OUT_OF_DATETIME2_RANGE),
    ("timestamp", dt.datetime(1970, 1, 1), None),  # the library reads a zero TIMESTAMP as the epoch
]


@pytest.mark.parametrize(("kind", "decoded", "none_source"), ZERO_DATES)
@pytest.mark.parametrize("policy", ["null", "error"])
def test_a_zero_date_in_a_key_is_refused_on_the_binlog_under_any_policy(kind: str, decoded: Any,
                                                                         none_source: str | None,
                                                                         policy: Any) -> None:
    columns = (ColumnInfo("d", kind, kind, False), ColumnInfo("v", kind, kind, True))
    decoder = TableDecoder.for_schema(TableSchema(TableRef("db", "z"), columns, ("d",)), zero_dates=policy)
    sources = {"d": none_source} if none_source else {}
    with pytest.raises(ZeroDateKeyError, match="primary-key column 'd' holds a zero or partial date") as raised:
        decoder.row({"d": decoded, "v": None}, sources)
    assert isinstance(raised.value, ZeroDateError)  # the binlog read stops the table as for any zero date
    assert "binlake snapshot --table db.z" in raised.value.remedy
    # The fast decoder gives a zero date as None, which a NOT NULL key column cannot otherwise hold.
    with pytest.raises(ZeroDateKeyError):
        decoder.check_keys([(dt.date(2024, 1, 1), None), (None, None)])
    decoder.check_keys([(dt.date(2024, 1, 1), None)])


def test_a_zero_date_outside_the_key_keeps_its_policy() -> None:
    columns = (ColumnInfo("id", "int", "int", False), ColumnInfo("d", "date", "date", True))
    decoder = TableDecoder.for_schema(TableSchema(TableRef("db", "z"), columns, ("id",)))
    assert decoder.row({"id": 1, "d": None}, {"d": NONE_SOURCE.OUT_OF_DATE_RANGE}) == (1, None)
    assert decoder.temporal_keys == ()


def test_a_table_snapshotted_before_its_key_type_was_refused_stops_at_its_offset_on_the_next_read() -> None:
    from cdc_lib.binlog.batch import BinlogRead, TableCursor
    from cdc_lib.config.model import SourceConfig
    from cdc_lib.model.positions import BinlogPosition

    refused = TableSchema(TableRef("db", "e"), (_column("enum", "enum('','a')", character_set="utf8mb4"),), ("k",))
    plain = TableSchema(TableRef("db", "p"), (_column("int", "int(11)"),), ("k",))
    at = BinlogPosition("mysql-bin.000001", 400)
    cursors = [TableCursor("db.e", at, refused), TableCursor("db.p", at, plain)]
    source = SourceConfig(host="h", port=1, user="u", password="p", server_id=1, tables=("db.*",))
    read = BinlogRead(source, cursors, None)
    assert set(read.result.table_errors) == {"db.e"}
    failure = read.result.table_errors["db.e"]
    assert isinstance(failure.error, KeyMappingError) and failure.position == at
