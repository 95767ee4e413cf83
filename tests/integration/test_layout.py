"""Partitioned and clustered tables (`sink.tables.<t>.partition_by` / `.cluster_by`, docs/layout.md) against the real
MariaDB: the layout is set by the snapshot and kept through change batches, a column widening (which rewrites the
table), an added column and a re-snapshot. The layout is read from the Delta log's JSON commits by this file
(`metaData.partitionColumns`, the `delta.clustering` domain) and the rows with delta-rs, not through binlake.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from cdc_lib.errors import LayoutError
from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import run_cli, sql, write_config_file


def _create(mariadb: Any, table: str) -> None:
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, region VARCHAR(10) NOT NULL, qty INT, note TEXT)",
        f"INSERT INTO {table} SELECT seq, ELT(1 + seq % 3, 'eu', 'us', 'apac'), seq * 2, CONCAT('n', seq) "
        "FROM seq_1_to_300", database=table.partition(".")[0])


def _log_actions(path: str) -> list[dict[str, Any]]:
    """Every action of the table's JSON commits, oldest first."""
    actions = []
    for commit in sorted(Path(path, "_delta_log").glob("*.json")):
        actions += [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
    return actions


def partition_columns(path: str) -> list[str]:
    return [action["metaData"] for action in _log_actions(path) if "metaData" in action][-1]["partitionColumns"]


def clustering_columns(path: str) -> list[list[str]]:
    domains = [action["domainMetadata"] for action in _log_actions(path)
               if action.get("domainMetadata", {}).get("domain") == "delta.clustering"]
    if not domains or domains[-1].get("removed"):
        return []
    return list(json.loads(domains[-1]["configuration"])["clusteringColumns"])


def _rows(path: str) -> list[dict[str, Any]]:
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted(({key: value for key, value in row.items() if not key.startswith("_")} for row in rows),
                  key=lambda row: row["id"])


def _source(mariadb: Any, table: str, columns: str = "id, region, qty, note") -> list[dict[str, Any]]:
    names = [name.strip() for name in columns.split(",")]
    return [dict(zip(names, row, strict=True)) for row in sql(mariadb, f"SELECT {columns} FROM {table} ORDER BY id")]


def _change(mariadb: Any, table: str, database: str) -> None:
    """Inserts, updates (one moves rows to another partition), deletes."""
    sql(mariadb, f"INSERT INTO {table} VALUES (1001, 'eu', 1, 'x'), (1002, 'latam', 2, NULL)",
        f"UPDATE {table} SET region = 'latam', qty = qty + 1 WHERE id % 7 = 0",
        f"UPDATE {table} SET note = 'changed' WHERE id % 5 = 0", f"DELETE FROM {table} WHERE id % 11 = 0",
        database=database)


def test_a_partitioned_table_keeps_its_partitions_through_sync_schema_changes_and_a_resnapshot(
    mariadb: Any, database: str, make_config: Any
) -> None:
    table = f"{database}.orders"
    _create(mariadb, table)
    config = make_config([table], sink__tables={table: {"partition_by": ["region"]}})
    pipeline = Pipeline(config)
    path = pipeline.table_path(table)
    pipeline.snapshot()
    assert partition_columns(path) == ["region"]
    assert _rows(path) == _source(mariadb, table)

    _change(mariadb, table, database)
    pipeline.sync(until_caught_up=True)
    assert _rows(path) == _source(mariadb, table)
    # Every data file any commit added sits in its region's partition: no engine wrote the table unpartitioned.
    added = [action["add"] for action in _log_actions(path) if "add" in action]
    assert added and all(add["partitionValues"].get("region") in {"eu", "us", "apac", "latam"} for add in added)
    assert all(add["path"].startswith(f"region={add['partitionValues']['region']}/") for add in added)

    # A widening rewrites the whole table (an overwrite): today it left the table unpartitioned.
    sql(mariadb, f"ALTER TABLE {table} MODIFY qty BIGINT", f"ALTER TABLE {table} ADD COLUMN extra INT DEFAULT 5",
        f"UPDATE {table} SET qty = 5000000000 WHERE id = 3", database=database)
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].error is None
    assert partition_columns(path) == ["region"]
    assert _rows(path) == _source(mariadb, table, "id, region, qty, note, extra")

    pipeline.snapshot([table], restart=True)
    assert partition_columns(path) == ["region"]
    assert _rows(path) == _source(mariadb, table, "id, region, qty, note, extra")


def test_a_clustered_table_stays_clustered_through_sync_schema_changes_a_resnapshot_and_maintenance(
    mariadb: Any, database: str, make_config: Any
) -> None:
    table = f"{database}.orders"
    _create(mariadb, table)
    config = make_config([table], sink__tables={table: {"cluster_by": ["region", "qty"]}})
    pipeline = Pipeline(config)
    path = pipeline.table_path(table)
    pipeline.snapshot()
    assert clustering_columns(path) == [["region"], ["qty"]]
    assert partition_columns(path) == []
    assert _rows(path) == _source(mariadb, table)

    _change(mariadb, table, database)
    pipeline.sync(until_caught_up=True)
    assert _rows(path) == _source(mariadb, table)
    assert clustering_columns(path) == [["region"], ["qty"]]

    sql(mariadb, f"ALTER TABLE {table} MODIFY qty BIGINT", f"ALTER TABLE {table} ADD COLUMN extra INT DEFAULT 5",
        f"UPDATE {table} SET qty = 5000000000 WHERE id = 3", database=database)
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].error is None
    assert clustering_columns(path) == [["region"], ["qty"]], "the widening's overwrite reset the clustering"
    assert _rows(path) == _source(mariadb, table, "id, region, qty, note, extra")

    # A re-snapshot's overwrite resets clustering in Delta 4.0.1; binlake sets it again.
    pipeline.snapshot([table], restart=True)
    assert clustering_columns(path) == [["region"], ["qty"]]
    assert _rows(path) == _source(mariadb, table, "id, region, qty, note, extra")


def test_a_layout_column_the_table_lacks_stops_its_snapshot(mariadb: Any, database: str, make_config: Any) -> None:
    table = f"{database}.orders"
    _create(mariadb, table)
    config = make_config([table], sink__tables={table: {"partition_by": ["regoin"]}})
    with pytest.raises(LayoutError, match="regoin"):
        Pipeline(config).snapshot()
    assert not Path(Pipeline(config).table_path(table), "_delta_log").exists()


def test_a_crash_between_a_widening_and_its_cluster_by_is_healed_by_the_replay(
    mariadb: Any, database: str, make_config: Any, tmp_path: Path
) -> None:
    """A widening rewrites the table, which resets clustering, then sets it again: killed between the two, the
    replay finds the types done and the clustering gone, and sets the configured clustering again."""
    table = f"{database}.orders"
    _create(mariadb, table)
    config = make_config([table], sink__tables={table: {"cluster_by": ["region", "qty"]}})
    pipeline = Pipeline(config)
    path = pipeline.table_path(table)
    pipeline.snapshot()
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    document = yaml.safe_load(config_path.read_text())
    document["sink"]["tables"] = {table: {"cluster_by": ["region", "qty"]}}
    config_path.write_text(yaml.safe_dump(document))

    sql(mariadb, f"ALTER TABLE {table} MODIFY qty BIGINT", f"UPDATE {table} SET qty = 5000000000 WHERE id = 3",
        database=database)
    crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": "after_retype_overwrite"}, timeout=900)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-3000:]
    assert clustering_columns(path) == [], "killed after the overwrite reset the clustering, before CLUSTER BY"

    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].error is None
    assert clustering_columns(path) == [["region"], ["qty"]]
    assert _rows(path) == _source(mariadb, table)
