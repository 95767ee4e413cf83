"""One type mapping: the snapshot (JDBC) and the binlog path land the same schema and values for every type."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from cdc_lib.pipeline import Pipeline
from cdc_lib.spark import spark_session
from tests.conftest import sql

COLUMNS = """
    id INT PRIMARY KEY,
    flag TINYINT(1), ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
    mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
    f FLOAT, d DOUBLE, dec_small DECIMAL(12,2), dec_wide DECIMAL(65,30),
    b1 BIT(1), b64 BIT(64),
    c CHAR(10), vc VARCHAR(50), tx TEXT, bin BINARY(4), vbin VARBINARY(10), bl BLOB,
    e ENUM('small','medium','large'), st SET('a','b','c'),
    dte DATE, dt0 DATETIME, dt6 DATETIME(6), ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL,
    tm0 TIME, tm6 TIME(6), yr YEAR, js JSON
"""

ROWS = [
    "(1, 1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, -9223372036854775808, "
    "18446744073709551615, 1.5, -2.25e100, -1234567890.12, "
    "12345678901234567890123456789012345.123456789012345678901234567890, b'1', "
    "b'1111111111111111111111111111111111111111111111111111111111111111', 'ab', 'zoë 😀 ✓', REPEAT('t', 300), "
    "x'00010200', x'ff00', x'deadbeef', 'large', 'a,c', '2024-02-29', '2024-01-01 23:59:59', "
    "'1999-12-31 23:59:59.999999', '2038-01-19 03:14:07', '2024-06-01 12:00:00.000001', "
    "'-838:59:59', '123:45:06.000007', 2155, '{\"k\": [1, 2.5, null, true], \"s\": \"é\"}')",
    "(2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0.1, 0.1, 0, 0, b'0', b'0', '', '', '', x'00', x'', x'', "
    "'small', '', '1000-01-01', '1000-01-01 00:00:00', '9999-12-31 23:59:59.999999', "
    "'1970-01-01 00:00:01', '1970-01-01 00:00:01.5', '00:00:00', '-00:00:00.5', 1901, '[]')",
    "(3" + ", NULL" * 34 + ")",
]


def delta_table(config, pipeline: Pipeline, table: str) -> list[tuple]:
    frame = spark_session(config.spark).read.format("delta").load(pipeline.table_path(table))
    return frame.schema, sorted((tuple(row) for row in frame.collect()), key=lambda row: row[0])


def test_snapshot_and_binlog_land_identical_delta_tables(mariadb, database, make_config) -> None:
    db = database
    sql(
        mariadb,
        f"CREATE TABLE {db}.via_snapshot ({COLUMNS})",
        f"CREATE TABLE {db}.via_binlog ({COLUMNS})",
        f"INSERT INTO {db}.via_snapshot VALUES {', '.join(ROWS)}",
    )
    config = make_config([f"{db}.via_snapshot", f"{db}.via_binlog"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"INSERT INTO {db}.via_binlog SELECT * FROM {db}.via_snapshot")
    pipeline.sync(until_caught_up=True)

    snapshot_schema, snapshot_rows = delta_table(config, pipeline, f"{db}.via_snapshot")
    binlog_schema, binlog_rows = delta_table(config, pipeline, f"{db}.via_binlog")
    assert snapshot_schema == binlog_schema
    assert len(snapshot_rows) == 3
    for snapshot_row, binlog_row in zip(snapshot_rows, binlog_rows, strict=True):
        differing = {
            field.name: (left, right)
            for field, left, right in zip(snapshot_schema.fields, snapshot_row, binlog_row, strict=True)
            if left != right
        }
        assert not differing, differing

    values = dict(zip([field.name for field in snapshot_schema.fields], snapshot_rows[0], strict=True))
    assert values["biu"] == Decimal("18446744073709551615")
    assert values["bi"] == -9223372036854775808
    assert values["dec_wide"] == "12345678901234567890123456789012345.123456789012345678901234567890"
    assert values["b64"] == Decimal(2**64 - 1)
    assert values["vc"] == "zoë 😀 ✓"
    assert values["bin"] == bytearray(b"\x00\x01\x02\x00")
    assert values["st"] == "a,c" and values["e"] == "large"
    assert values["dt6"] == dt.datetime(1999, 12, 31, 23, 59, 59, 999999)
    assert values["ts6"] == dt.datetime(2024, 6, 1, 12, 0, 0, 1)
    assert values["tm0"] == "-838:59:59" and values["tm6"] == "123:45:06.000007"
    assert values["yr"] == 2155 and values["flag"] == 1
    assert all(value is None for name, value in zip(values, snapshot_rows[2], strict=True) if name != "id")
