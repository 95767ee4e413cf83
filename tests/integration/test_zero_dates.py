"""Zero and partial dates: NULL by default on both paths, or a clear stop under `source.zero_dates: error`."""

from __future__ import annotations

import datetime as dt

import pytest

from cdc_lib.errors import ZeroDateError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile_table
from cdc_lib.sink import delta_log
from tests.conftest import delta_rows, sql

COLUMNS = "id INT PRIMARY KEY, d DATE NULL, dt DATETIME(3) NULL, ts TIMESTAMP NULL DEFAULT NULL"
ZERO_ROWS = (
    "(1, '0000-00-00', '0000-00-00 00:00:00', '0000-00-00 00:00:00'), "
    "(2, '2024-00-10', '2024-05-00 10:00:00', NULL), "
    "(3, '2024-02-29', '2024-02-29 10:00:00.5', '2024-02-29 10:00:00'), "
    "(4, NULL, NULL, NULL), "
    "(5, '0000-01-01', '0000-03-15 10:00:00.25', NULL)"  # year 0: outside Delta readers' range, a partial date
)
LENIENT = "SET SESSION sql_mode = ''"


def test_null_policy_stores_zero_dates_as_null_on_both_paths(mariadb, database, make_config) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.snap ({COLUMNS})", f"CREATE TABLE {db}.logged ({COLUMNS})", LENIENT,
        f"INSERT INTO {db}.snap VALUES {ZERO_ROWS}")
    config = make_config([f"{db}.snap", f"{db}.logged"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, LENIENT, f"INSERT INTO {db}.logged SELECT * FROM {db}.snap")
    pipeline.sync(until_caught_up=True)

    snapshot, binlog = delta_rows(config, f"{db}.snap"), delta_rows(config, f"{db}.logged")
    assert snapshot == binlog
    assert [row[1:] for row in snapshot if row[0] in (1, 2, 4, 5)] == [(None, None, None)] * 4
    assert next(row for row in snapshot if row[0] == 3)[1] is not None
    # Reconciliation compares the source as it lands: a zero date is NULL there too, not drift.
    for table in (f"{db}.snap", f"{db}.logged"):
        report = reconcile_table(pipeline, table, chunk_rows=2)
        assert report.matches, report.mismatches
        assert report.source_rows == report.delta_rows == 5


def test_error_policy_stops_the_snapshot_naming_table_and_column(mariadb, database, make_config) -> None:
    sql(mariadb, f"CREATE TABLE {database}.snap ({COLUMNS})", LENIENT,
        f"INSERT INTO {database}.snap VALUES (1, '2024-01-01', '2024-00-10 00:00:00', NULL)")
    config = make_config([f"{database}.snap"], source__zero_dates="error")
    pipeline = Pipeline(config)
    with pytest.raises(ZeroDateError) as raised:
        pipeline.snapshot()
    assert raised.value.table == f"{database}.snap" and raised.value.column == "dt"
    assert "2024-00-10" in str(raised.value)
    assert f"binlake snapshot --table {database}.snap" in raised.value.remedy
    assert "source.zero_dates: null" in raised.value.remedy
    assert delta_log.read_log_tail(pipeline.table_path(f"{database}.snap"), application="-") is None
    assert f"{database}.snap" not in pipeline.read_state().tables

    # Once the row is corrected, the snapshot the remedy names goes through.
    sql(mariadb, f"UPDATE {database}.snap SET dt = NULL WHERE id = 1")
    pipeline.snapshot()
    assert delta_rows(config, f"{database}.snap") == [(1, dt.date(2024, 1, 1), None, None)]


def test_error_policy_stops_the_table_on_the_binlog_and_writes_nothing_of_the_batch(
    mariadb, database, make_config
) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.dated ({COLUMNS})", f"CREATE TABLE {db}.plain (id INT PRIMARY KEY)",
        f"INSERT INTO {db}.dated VALUES (1, '2024-01-01', NULL, NULL)")
    config = make_config([f"{db}.dated", f"{db}.plain"], source__zero_dates="error")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    before = pipeline.read_state().tables[f"{db}.dated"]
    sql(mariadb, f"INSERT INTO {db}.dated VALUES (2, '2024-01-02', NULL, NULL)", f"INSERT INTO {db}.plain VALUES (1)")
    sql(mariadb, LENIENT, f"INSERT INTO {db}.dated VALUES (3, NULL, NULL, '0000-00-00 00:00:00')")
    sql(mariadb, f"INSERT INTO {db}.plain VALUES (2)")

    results = pipeline.sync(until_caught_up=True)
    failed = [table for result in results for table in result.tables if table.table == f"{db}.dated"]
    assert failed[0].error is not None and "column 'ts'" in failed[0].error and f"[{db}.dated]" in failed[0].error
    after = pipeline.read_state().tables[f"{db}.dated"]
    assert after.error == failed[0].error
    assert after.position == before.position and after.delta_version == before.delta_version
    assert delta_rows(config, f"{db}.dated") == [(1, dt.date(2024, 1, 1), None, None)]
    # Other tables of the same batches carry on.
    assert delta_rows(config, f"{db}.plain") == [(1,), (2,)]
