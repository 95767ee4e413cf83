"""One type mapping: the snapshot (JDBC) and the binlog path land the same schema and values for every type."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from pyspark.sql.types import StructType

from cdc_lib.config.model import PipelineConfig
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink import delta_log
from cdc_lib.sink.spark.session import spark_session
from tests.conftest import sql
from tests.integration.type_rows import (
    COLUMNS,
    NAMES,
    ROWS,
    TEMPORAL_COLUMNS,
    TEMPORAL_NAMES,
    WIDE_DECIMALS,
    as_temporal_text,
    insert_temporal_rows,
    server_temporal_text,
)

#: The binlog path's engines (`batch.writer`): the first batch after a snapshot MERGEs on either.
WRITERS = pytest.mark.parametrize("writer", ["spark", "delta-rs"])


def exclude_wide_decimals_from_statistics(config: PipelineConfig, pipeline: Pipeline, table: str) -> None:
    """The remedy delta-rs's refusal names: no statistics for the wide DECIMALs, so delta-rs may write the table."""
    # Spark refuses binary columns in the list (it keeps no statistics for them anyway).
    kept = ",".join(name for name in NAMES if name not in (*WIDE_DECIMALS, "bin", "vbin", "bl"))
    spark_session(config.spark).sql(f"ALTER TABLE delta.`{pipeline.table_path(table)}` SET TBLPROPERTIES "
                                     f"('delta.dataSkippingStatsColumns' = '{kept}')")


def written_by(pipeline: Pipeline, table: str) -> tuple[str, str]:
    """The writer and kind of the table's newest binlake commit."""
    tail = delta_log.read_log_tail(pipeline.table_path(table), application=pipeline.context.application(table))
    assert tail is not None and tail.last_binlake_commit is not None
    metadata = tail.last_binlake_commit.metadata
    return metadata["writer"], metadata["kind"]


def delta_table(config: PipelineConfig, pipeline: Pipeline, table: str) -> tuple[StructType, list[tuple[Any, ...]]]:
    frame = spark_session(config.spark).read.format("delta").load(pipeline.table_path(table))
    return frame.schema, sorted((tuple(row) for row in frame.collect()), key=lambda row: row[0])


@WRITERS
def test_snapshot_and_binlog_land_identical_delta_tables(mariadb, database, make_config, writer: str) -> None:
    db = database
    sql(
        mariadb,
        f"CREATE TABLE {db}.via_snapshot ({COLUMNS})",
        f"CREATE TABLE {db}.via_binlog ({COLUMNS})",
        f"INSERT INTO {db}.via_snapshot VALUES {', '.join(ROWS)}",
    )
    config = make_config([f"{db}.via_snapshot", f"{db}.via_binlog"], batch__writer=writer)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    if writer == "delta-rs":
        exclude_wide_decimals_from_statistics(config, pipeline, f"{db}.via_binlog")
    sql(mariadb, f"INSERT INTO {db}.via_binlog SELECT * FROM {db}.via_snapshot")
    pipeline.sync(until_caught_up=True)
    assert written_by(pipeline, f"{db}.via_binlog") == (writer, "merge")

    snapshot_schema, snapshot_rows = delta_table(config, pipeline, f"{db}.via_snapshot")
    binlog_schema, binlog_rows = delta_table(config, pipeline, f"{db}.via_binlog")
    assert snapshot_schema == binlog_schema
    assert len(snapshot_rows) == 4
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
    assert snapshot_rows[3][-2] == 0 and binlog_rows[3][-2] == 0  # YEAR 0000, not 1900
    assert values["yr"] == 2155 and values["flag"] == 1
    assert all(value is None for name, value in zip(values, snapshot_rows[2], strict=True) if name != "id")


@WRITERS
def test_time_datetime_and_timestamp_edges_land_as_the_server_shows_them(mariadb, database, make_config,
                                                                         writer: str) -> None:
    """Every fsp 0-6, negative TIME fractions, the DATETIME and TIMESTAMP range ends: both paths, one table each."""
    db = database
    sql(mariadb, f"CREATE TABLE {db}.via_snapshot ({TEMPORAL_COLUMNS})",
        f"CREATE TABLE {db}.via_binlog ({TEMPORAL_COLUMNS})")
    insert_temporal_rows(mariadb, f"{db}.via_snapshot")
    config = make_config([f"{db}.via_snapshot", f"{db}.via_binlog"], batch__writer=writer)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"INSERT INTO {db}.via_binlog SELECT * FROM {db}.via_snapshot")
    pipeline.sync(until_caught_up=True)
    assert written_by(pipeline, f"{db}.via_binlog") == (writer, "merge")

    expected = server_temporal_text(mariadb, f"{db}.via_snapshot")
    assert (expected[2][7], expected[3][7], expected[3][3]) == ("-00:00:00.000001", "-00:00:01.250000", "-00:00:01.25")
    for table in ("via_snapshot", "via_binlog"):
        _, rows = delta_table(config, pipeline, f"{db}.{table}")
        got = [as_temporal_text(row) for row in rows]
        wrong = {(want[0], name): (left, right) for want, have in zip(expected, got, strict=True)
                 for name, left, right in zip(TEMPORAL_NAMES, want[1:], have[1:], strict=True) if left != right}
        assert not wrong, (table, wrong)
