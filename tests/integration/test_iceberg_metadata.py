"""Iceberg metadata written by binlake beside a Delta table (`sink.tables.<t>.iceberg: true`, docs/iceberg.md),
against the real MariaDB, Spark and Delta: after a snapshot, MERGE batches, an ADD COLUMN, a crash between the
Delta commit and the Iceberg write, maintenance and a re-snapshot, pyiceberg (not binlake) opens the newest
metadata and reads the same rows as the source and as delta-rs. pyiceberg is imported at module level: without it
these tests fail, they do not skip.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from pyiceberg.table import StaticTable

from cdc_lib.config.model import PipelineConfig
from cdc_lib.maintenance.run import maintain
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink import delta_log
from cdc_lib.sink.iceberg.convert import DELTA_VERSION, KEEP_VERSIONS
from tests.conftest import run_cli, source_rows, sql, write_config_file
from tests.integration.iceberg_rows import normal, sorted_rows
from tests.integration.type_rows import COLUMNS, ROWS

EAGER = {"min_files_to_compact": 2, "vacuum_retention_hours": 0, "checkpoint_every_commits": 3}


def _iceberg(path: str) -> tuple[list[tuple[Any, ...]], str]:
    """The table as pyiceberg reads its newest metadata (through version-hint.text), and the Delta version it lists."""
    table = StaticTable.from_metadata(path)
    snapshot = table.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    return sorted_rows(table.scan().to_arrow()), str(snapshot.summary[DELTA_VERSION])


def _check(config: PipelineConfig, table: str, mariadb: Any) -> None:
    path = Pipeline(config).table_path(table)
    delta = DeltaTable(path)
    rows, version = _iceberg(path)
    assert version == str(delta.version()), "the Iceberg snapshot lists the newest Delta version"
    assert rows == sorted_rows(delta.to_pyarrow_table()), "Iceberg and delta-rs read the same rows"
    assert rows == [tuple(normal(value) for value in row) for row in source_rows(mariadb, table)]


def test_iceberg_readers_see_every_delta_version_binlake_commits(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path,
) -> None:
    table = f"{database}.t"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20), amount DECIMAL(9,2), "
                 "at DATETIME(6), n BIGINT)",
        f"INSERT INTO {table} VALUES (1, 'a', 1.50, '2026-01-02 03:04:05.123456', 10), (2, 'b', NULL, NULL, 20), "
        "(3, 'c', 3.25, '2026-02-03 00:00:00', 30)")
    config = make_config([table], sink={"path": str(tmp_path / "lake"), "tables": {
        table: {"iceberg": True, "maintenance": EAGER}}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    _check(config, table, mariadb)  # the snapshot

    for round_number in range(3):  # MERGE batches: inserts, updates, deletes
        sql(mariadb, f"INSERT INTO {table} VALUES ({10 + round_number}, 'new', 9.99, NOW(6), {round_number})",
            f"UPDATE {table} SET v = 'u{round_number}' WHERE id = 1",
            f"DELETE FROM {table} WHERE id = {10 + round_number - 1}" if round_number else "DO 0")
        pipeline.sync(until_caught_up=True)
        _check(config, table, mariadb)

    sql(mariadb, f"ALTER TABLE {table} ADD COLUMN extra VARCHAR(10)",
        f"INSERT INTO {table} VALUES (50, 'x', 1.00, NULL, 5, 'e')", f"UPDATE {table} SET extra = 'z' WHERE id = 2")
    pipeline.sync(until_caught_up=True)
    _check(config, table, mariadb)
    path = pipeline.table_path(table)
    schema = StaticTable.from_metadata(path).schema()
    assert [(field.field_id, field.name) for field in schema.fields] == [
        (1, "id"), (2, "v"), (3, "amount"), (4, "at"), (5, "n"), (6, "extra")], "existing ids kept, a new one added"

    # A kill between the Delta commit and the Iceberg write: the Delta table moves on, the Iceberg one does not ...
    sql(mariadb, f"INSERT INTO {table} VALUES (60, 'k', 2.00, NULL, 6, NULL)")
    crashed = run_cli(write_config_file(config, tmp_path / "binlake.yaml"), "sync",
                      env={"BINLAKE_FAILPOINT": "after_delta_commit"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    _, listed = _iceberg(path)
    assert listed == str(DeltaTable(path).version() - 1), "the crash left the Iceberg side one version behind"
    # ... and the next sync heals it, with nothing more to apply.
    pipeline = Pipeline(config)
    pipeline.sync(until_caught_up=True)
    _check(config, table, mariadb)

    outcome = maintain(pipeline.context, [table])[0]  # OPTIMIZE + VACUUM: new files, old ones gone
    assert outcome.compacted_files > 0 and outcome.vacuumed_files > 0, outcome
    _check(config, table, mariadb)

    sql(mariadb, f"UPDATE {table} SET n = n + 1")
    Pipeline(config).snapshot(tables=[table])  # a re-snapshot: an overwrite of the whole table
    _check(config, table, mariadb)

    for round_number in range(KEEP_VERSIONS + 2):  # a busy table keeps a bounded number of metadata files
        sql(mariadb, f"UPDATE {table} SET n = {round_number} WHERE id = 3")
        pipeline.sync(until_caught_up=True)
    _check(config, table, mariadb)
    metadata = Path(path) / "metadata"
    assert len(list(metadata.glob("*.metadata.json"))) == KEEP_VERSIONS
    assert len(list(metadata.glob("snap-*.avro"))) == KEEP_VERSIONS
    assert len(list(metadata.glob("manifest-*.avro"))) == KEEP_VERSIONS


def test_a_delta_rs_batch_keeps_the_iceberg_metadata_current(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path,
) -> None:
    table = f"{database}.r"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))",
        f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b')")
    config = make_config([table], batch={"max_events": 100_000, "max_seconds": 60, "writer": "delta-rs"},
                         sink={"path": str(tmp_path / "lake"), "tables": {table: {"iceberg": True}}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"INSERT INTO {table} VALUES (3, 'c')", f"UPDATE {table} SET v = 'z' WHERE id = 1",
        f"DELETE FROM {table} WHERE id = 2")
    results = pipeline.sync(until_caught_up=True)
    path = pipeline.table_path(table)
    assert delta_log.commit_engine(path, DeltaTable(path).version()) == "delta-rs", results
    _check(config, table, mariadb)


def test_every_mysql_type_reads_the_same_through_iceberg_as_through_delta(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path,
) -> None:
    table = f"{database}.types"
    sql(mariadb, f"CREATE TABLE {table} ({COLUMNS})", f"INSERT INTO {table} VALUES {', '.join(ROWS[:2])}")
    config = make_config([table], sink={"path": str(tmp_path / "lake"), "tables": {table: {"iceberg": True}}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"INSERT INTO {table} VALUES {', '.join(ROWS[2:])}", f"UPDATE {table} SET vc = 'changed' WHERE id = 1")
    pipeline.sync(until_caught_up=True)
    path = pipeline.table_path(table)
    delta = DeltaTable(path)
    rows, version = _iceberg(path)
    assert version == str(delta.version())
    assert rows == sorted_rows(delta.to_pyarrow_table()) and len(rows) == len(ROWS)
