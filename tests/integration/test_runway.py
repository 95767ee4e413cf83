"""`binlake status` shows how long the server keeps the binlog each table's offset needs."""

from __future__ import annotations

import json

from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import run_cli, sql, write_config_file

TWO_DAYS = 2 * 86_400


def test_status_reports_the_runway_and_warns_when_the_expiry_is_short(
    mariadb, database, make_config, tmp_path
) -> None:
    table = f"{database}.kept"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY)", f"INSERT INTO {table} VALUES (1)")
    config = make_config([table])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    needed = pipeline.read_state().tables[table].position.file
    # Closing the offset's file starts its expiry clock; the new change puts the table behind.
    sql(mariadb, "FLUSH BINARY LOGS", f"INSERT INTO {table} VALUES (2)")
    original = sql(mariadb, "SELECT @@GLOBAL.binlog_expire_logs_seconds")[0][0]
    try:
        # Two days of binlog, against the default 72-hour warning threshold (nothing here is that old).
        sql(mariadb, f"SET GLOBAL binlog_expire_logs_seconds = {TWO_DAYS}")
        run = run_cli(write_config_file(config, tmp_path / "binlake.yaml"), "status", "--json")
        relaxed = pipeline.status(runway_warn_hours=1)
    finally:
        sql(mariadb, f"SET GLOBAL binlog_expire_logs_seconds = {original}")

    assert run.returncode == 0, run.stderr
    status = next(entry for entry in json.loads(run.stdout) if entry["table"] == table)
    runway = status["runway"]
    assert status["runway_warning"] is True
    assert runway["needed_file"] == needed and runway["purged"] is False
    assert runway["expire_seconds"] == TWO_DAYS
    assert TWO_DAYS - 600 < runway["runway_seconds"] < TWO_DAYS
    assert runway["oldest_on_server"] and runway["oldest_on_server_age_seconds"] >= 0
    assert runway["bytes_from_offset"] > 0 and runway["bytes_from_offset"] == status["lag_bytes"]
    assert runway["rotated_at"] is not None

    calm = next(entry for entry in relaxed if entry.table == table)
    assert calm.runway_warning is False and calm.runway is not None
