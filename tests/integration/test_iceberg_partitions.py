"""Iceberg metadata of a partitioned Delta table (`partition_by` with `iceberg: true`, docs/iceberg.md), against the
real MariaDB, Spark and Delta: Delta keeps partition values out of its Parquet files, so the Iceberg side carries an
identity partition spec and each file's values in its manifest entry, and pyiceberg (not binlake) projects the
partition columns from there. After a snapshot and batches moving rows between partitions (into and out of NULL
ones), pyiceberg reads the same rows as the source and as delta-rs. (delta-rs does not write partitioned tables:
`cdc_lib.sink.choice` gives them to Spark.)
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from deltalake import DeltaTable
from pyiceberg.table import StaticTable
from pyiceberg.transforms import IdentityTransform

from cdc_lib.config.model import PipelineConfig
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.iceberg.convert import DELTA_VERSION
from tests.conftest import source_rows, sql


def _rows(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(row.values()) for row in frame.to_pylist()), key=repr)


def _check(config: PipelineConfig, table: str, mariadb: Any) -> StaticTable:
    path = Pipeline(config).table_path(table)
    delta = DeltaTable(path)
    iceberg = StaticTable.from_metadata(path)
    snapshot = iceberg.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary[DELTA_VERSION] == str(delta.version())
    spec = iceberg.spec()
    assert [(field.name, field.transform) for field in spec.fields] == [
        ("region", IdentityTransform()), ("day", IdentityTransform())], "Delta's partition columns, identity"
    tasks = list(iceberg.scan().plan_files())
    assert sorted(task.file.file_path for task in tasks) == sorted(delta.file_uris())
    for task in tasks:  # the values are in the manifest only, not in the files pyiceberg reads
        assert {"region", "day"}.isdisjoint(pq.read_schema(task.file.file_path).names)
    rows = _rows(iceberg.scan().to_arrow())
    assert rows == _rows(delta.to_pyarrow_table()), "Iceberg and delta-rs read the same rows"
    assert rows == sorted(source_rows(mariadb, table), key=repr)
    return iceberg


def test_a_partitioned_table_reads_the_same_through_iceberg(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path,
) -> None:
    table = f"{database}.p"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, region VARCHAR(20), day DATE, n BIGINT)",
        f"INSERT INTO {table} VALUES (1, 'eu', '2026-01-01', 10), (2, 'us', '2026-01-01', 20), "
        "(3, 'eu', '2026-01-02', 30), (4, 'a b/c', NULL, 40), (5, NULL, '2026-01-03', 50)")
    settings = {"iceberg": True, "partition_by": ["region", "day"]}
    config = make_config([table], sink={"path": str(tmp_path / "lake"), "tables": {table: settings}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    _check(config, table, mariadb)

    # Rows move between partitions, into and out of NULL ones, and a new partition appears (Spark's MERGE).
    sql(mariadb, f"UPDATE {table} SET region = 'us' WHERE id = 1", f"UPDATE {table} SET day = '2026-02-01' "
                 "WHERE id = 4", f"UPDATE {table} SET region = NULL WHERE id = 3",
        f"INSERT INTO {table} VALUES (6, 'ap', '2026-03-01', 60)", f"DELETE FROM {table} WHERE id = 2")
    pipeline.sync(until_caught_up=True)
    iceberg = _check(config, table, mariadb)
    # A partition filter reads through the manifest's partition values.
    assert sorted(iceberg.scan(row_filter="region = 'us'").to_arrow().column("id").to_pylist()) == [1]

    # A second batch: a row moves back, a partition value with a space and a slash (percent-encoded in the path).
    sql(mariadb, f"UPDATE {table} SET region = 'eu', day = '2026-01-01' WHERE id = 6",
        f"INSERT INTO {table} VALUES (7, 'x y/z', '2026-04-01', 70)")
    pipeline.sync(until_caught_up=True)
    iceberg = _check(config, table, mariadb)
    assert sorted(iceberg.scan(row_filter="day = '2026-01-01'").to_arrow().column("id").to_pylist()) == [1, 6]
    assert all(isinstance(value, dt.date) for value in iceberg.scan().to_arrow().column("day").to_pylist()
               if value is not None), "the date partition reads back as a date"
