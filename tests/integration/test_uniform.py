"""Delta UniForm (docs/iceberg.md) against the real MariaDB, Spark and Delta.

binlake cannot write Iceberg metadata: delta-spark 4.0.1 needs the `io.delta:delta-iceberg_2.13:4.0.1` jar for it,
which Maven Central does not serve, and delta-rs writes none. So `iceberg: true` is refused (tests/unit/config), and
a table another writer turned UniForm on must never get a commit whose Iceberg metadata nobody writes. Delta
itself commits such a change first and fails after (the Delta table moves on, the Iceberg metadata does not):
binlake stops that table before writing, the other tables flow, and the documented remedy resumes it exactly.
Delta is read back with delta-rs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.pipeline.sync import SyncResult
from cdc_lib.sink.spark.jars import DELTA_ICEBERG
from cdc_lib.sink.spark.session import spark_session
from tests.conftest import source_rows, sql

UNIFORM = "delta.universalFormat.enabledFormats"


def _errors(results: list[SyncResult], table: str) -> list[str]:
    return [entry.error for result in results for entry in result.tables if entry.table == table and entry.error]


def _rows(path: str) -> list[tuple[Any, ...]]:
    """The table as delta-rs reads it (not binlake's reader)."""
    frame = DeltaTable(path).to_pyarrow_table()
    return sorted(tuple(row.values()) for row in frame.to_pylist())


def _turn_uniform_on(spark: Any, path: str) -> None:
    """What another writer (Spark with the delta-iceberg jar, Databricks) does to make a table UniForm.

    Column mapping and IcebergCompatV2 are set through this Spark, which allows them without the jar. The last
    step, `SET TBLPROPERTIES ('delta.universalFormat.enabledFormats' = 'iceberg')`, needs the jar's converter
    here: its commit is written as that writer's would be, the newest metaData with the property added.
    """
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
              "'delta.enableIcebergCompatV2' = 'true')")
    log = Path(path) / "_delta_log"
    commits = sorted(log.glob("*.json"))
    assert not list(log.glob("*.checkpoint*.parquet")), "a young table: its metaData is in the JSON commits"
    metadata: dict[str, Any] | None = None
    for commit in commits:
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            metadata = action.get("metaData", metadata)
    assert metadata is not None
    metadata["configuration"][UNIFORM] = "iceberg"
    version = int(commits[-1].name.split(".")[0]) + 1
    with open(log / f"{version:020d}.json", "x") as handle:
        handle.write(json.dumps({"commitInfo": {"timestamp": 0, "operation": "SET TBLPROPERTIES",
                                                "operationParameters": {}}}) + "\n")
        handle.write(json.dumps({"metaData": metadata}) + "\n")


def test_a_table_another_writer_turned_uniform_on_stops_before_any_commit_and_resumes_exactly(
    mariadb: Any, database: str, make_config: Any,
) -> None:
    db = database
    table, other = f"{db}.t", f"{db}.other"
    sql(
        mariadb,
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        f"CREATE TABLE {db}.other (id INT PRIMARY KEY)",
        f"INSERT INTO {db}.t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)",
    )
    config = make_config([table, other])
    Pipeline(config).snapshot()
    path = Pipeline(config).table_path(table)
    spark = spark_session(config.spark)
    _turn_uniform_on(spark, path)
    before = DeltaTable(path).version()
    snapshot_rows = _rows(path)
    assert snapshot_rows == source_rows(mariadb, table)

    sql(
        mariadb,
        f"INSERT INTO {db}.t VALUES (4, 'd', 40)",
        f"UPDATE {db}.t SET v = 'B', n = 21 WHERE id = 2",
        f"DELETE FROM {db}.t WHERE id = 3",
        f"INSERT INTO {db}.other VALUES (1), (2)",
    )
    results = Pipeline(config).sync(until_caught_up=True)
    errors = _errors(results, table)
    assert errors, "the UniForm table must stop: this Spark cannot write its Iceberg metadata"
    assert DELTA_ICEBERG.coordinate in errors[0] and "UNSET TBLPROPERTIES" in errors[0]
    # Nothing was committed: Delta alone would have committed the MERGE and failed after it, leaving the
    # Iceberg metadata a version behind the Delta table.
    assert DeltaTable(path).version() == before
    assert _rows(path) == snapshot_rows
    assert not (Path(path) / "metadata").exists(), "no Iceberg metadata was written by anyone"
    # The failure is the table's: the other table flowed (invariant 12).
    assert not _errors(results, other)
    assert _rows(Pipeline(config).table_path(other)) == source_rows(mariadb, other)

    # The remedy the error names: turn UniForm off (allowed without the jar), then resume the table.
    spark.sql(f"ALTER TABLE delta.`{path}` UNSET TBLPROPERTIES ('{UNIFORM}')")
    assert UNIFORM not in DeltaTable(path).metadata().configuration
    Pipeline(config).resume(table)
    results = Pipeline(config).sync(until_caught_up=True)
    assert not _errors(results, table)
    assert _rows(path) == source_rows(mariadb, table)
    # Still Spark's: the icebergCompatV2 feature stays in the protocol, which delta-rs does not write.
    last = DeltaTable(path).history(1)[0]
    assert json.loads(last["userMetadata"])["writer"] == "spark"
