import datetime as dt
from decimal import Decimal

import pytest

from cdc_lib.positions import BinlogPosition
from cdc_lib.types import ColumnInfo, binlog_converter, format_time, spark_type_ddl


def column(data_type: str, column_type: str | None = None, **extra: object) -> ColumnInfo:
    return ColumnInfo(name="c", data_type=data_type, column_type=column_type or data_type, nullable=True, **extra)


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


def test_binlog_converters() -> None:
    assert binlog_converter(column("bigint", "bigint unsigned"))(2**64 - 1) == Decimal(2**64 - 1)
    assert binlog_converter(column("bit", "bit(5)"))("10101") == 21
    assert binlog_converter(column("set", "set('x','y','z')"))({"z", "x"}) == "x,z"
    stamp = binlog_converter(column("timestamp"))(dt.datetime(2024, 1, 1, 10))
    assert stamp == dt.datetime(2024, 1, 1, 10, tzinfo=dt.UTC)
    assert binlog_converter(column("json"))({"a": [1, 2]}) == '{"a": [1, 2]}'
    assert binlog_converter(column("varchar")) is None, "the reader's str is stored as is"
    assert binlog_converter(column("bigint")) is None


def test_positions_order_across_files() -> None:
    early = BinlogPosition("mariadb-bin.000009", 900)
    late = BinlogPosition("mariadb-bin.000010", 4)
    assert early < late and late > early and early <= early
    assert BinlogPosition.from_json(late.to_json()) == late
