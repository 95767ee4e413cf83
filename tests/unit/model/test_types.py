import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.types import ColumnInfo, binlog_converter, format_time, spark_type_ddl


def column(data_type: str, column_type: str | None = None, **extra: Any) -> ColumnInfo:
    return ColumnInfo(name="c", data_type=data_type, column_type=column_type or data_type, nullable=True, **extra)


def converter(info: ColumnInfo) -> Callable[[Any], Any]:
    convert = binlog_converter(info)
    assert convert is not None, f"{info.column_type} needs a converter"
    return convert


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (column("tinyint", "tinyint(1)"), "tinyint"),
        (column("tinyint", "tinyint(3) unsigned"), "smallint"),
        (column("int", "int(10) unsigned"), "bigint"),
        (column("bigint", "bigint(20) unsigned"), "decimal(20,0)"),
        (column("decimal", "decimal(12,2)", numeric_precision=12, numeric_scale=2), "decimal(12,2)"),
        (column("decimal", "decimal(65,30)", numeric_precision=65, numeric_scale=30), "string"),
        (column("datetime"), "timestamp_ntz"),
        (column("timestamp"), "timestamp"),
        (column("time"), "string"),
        (column("json"), "string"),
        (column("varbinary", "varbinary(10)"), "binary"),
        (column("bit", "bit(64)"), "decimal(20,0)"),
    ],
)
def test_type_mapping(info: ColumnInfo, expected: str) -> None:
    assert spark_type_ddl(info) == expected


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [
        (dt.timedelta(hours=-838, minutes=-59, seconds=-59), 0, "-838:59:59"),
        (dt.timedelta(hours=25, microseconds=500000), 2, "25:00:00.50"),
        (dt.timedelta(seconds=1, microseconds=123456), 6, "00:00:01.123456"),
    ],
)
def test_time_text_matches_mysql(value: dt.timedelta, digits: int, text: str) -> None:
    assert format_time(value, digits) == text


@pytest.mark.parametrize(
    ("library", "text"),
    [  # what python-mysql-replication 1.0.17 makes of a negative TIME(6) with a fraction → the real value
        ("-00:00:01.750000", "-00:00:01.250000"),
        ("-00:00:00.999999", "-00:00:00.000001"),
        ("-838:59:59.000001", "-838:59:59.999999"),
        ("-00:00:00.500000", "-00:00:00.500000"),
        ("-12:00:00.000000", "-12:00:00.000000"),
        ("00:00:01.250000", "00:00:01.250000"),
    ],
)
def test_the_librarys_negative_time_fraction_is_corrected(library: str, text: str) -> None:
    negative = library.startswith("-")
    hours, minutes, seconds = library.lstrip("-").split(":")
    value = dt.timedelta(hours=int(hours), minutes=int(minutes), seconds=float(seconds))
    convert = converter(column("time", "time(6)", datetime_precision=6))
    assert convert(-value if negative else value) == text


def test_binlog_converters() -> None:
    assert converter(column("bigint", "bigint unsigned"))(2**64 - 1) == Decimal(2**64 - 1)
    assert converter(column("bit", "bit(5)"))("10101") == 21
    assert converter(column("set", "set('x','y','z')"))({"z", "x"}) == "x,z"
    stamp = converter(column("timestamp"))(dt.datetime(2024, 1, 1, 10))
    assert stamp == dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)
    assert converter(column("json"))({"a": [1, 2]}) == '{"a": [1, 2]}'
    assert binlog_converter(column("varchar")) is None, "the reader's str is stored as is"
    assert binlog_converter(column("bigint")) is None


def test_positions_order_across_files() -> None:
    early = BinlogPosition("mariadb-bin.000009", 900)
    late = BinlogPosition("mariadb-bin.000010", 4)
    assert early < late and late > early and early <= early
    assert BinlogPosition.from_json(late.to_json()) == late
