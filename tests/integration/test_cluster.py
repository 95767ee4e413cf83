"""`spark.master: spark://…`: snapshot and micro-batches run on a standalone cluster's executor, not the driver.

The test process keeps its one local SparkSession (to read the Delta tables back); the pipeline runs in
CLI subprocesses whose config points at a private master + one worker on 127.0.0.1.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc_lib.config.load import load_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.dev.local_spark_cluster import LocalSparkCluster
from tests.conftest import CDC_PASSWORD, CDC_USER, delta_rows, run_cli, source_rows, sql


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSparkCluster]:
    cluster = LocalSparkCluster(tmp_path_factory.mktemp("spark-cluster"), worker_cores=1, worker_memory="1g")
    cluster.start()
    yield cluster
    cluster.stop()


def cluster_config(
    path: Path, *, cluster: LocalSparkCluster, server: LocalMariaDB, table: str, **spark: Any
) -> Path:
    document = {
        "pipeline": "on-cluster",
        "source": {
            "host": "127.0.0.1", "port": server.port, "user": CDC_USER, "password": "${BINLAKE_TEST_PASSWORD}",
            "server_id": 6901, "tables": [table],
        },
        "sink": {"path": str(path.parent / "lake")},
        "spark": {
            "master": cluster.master_url,
            # Executors connect back to the driver; on this machine everything listens on loopback only.
            "conf": {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"},
            **spark,
        },
        # Three key ranges, so the snapshot is several JDBC tasks (one wave: one Spark job reads them all).
        "snapshot": {"rows_per_partition": 1000, "max_partitions": 8, "chunks_per_wave": 4},
        # The batches' MERGEs on the cluster's executors (under `auto` delta-rs writes them in the driver's process).
        "batch": {"writer": "spark"},
    }
    path.write_text(yaml.safe_dump(document))
    return path


def finished_apps(cluster: LocalSparkCluster) -> list[dict[str, Any]]:
    return [app for app in cluster.status()["completedapps"] if app["state"] == "FINISHED"]


def executor_log(cluster: LocalSparkCluster, app_id: str) -> str:
    logs = sorted(cluster.work_dir.glob(f"{app_id}/*/stderr"))
    assert logs, f"the worker ran no executor for {app_id}"
    return "\n".join(log.read_text(errors="replace") for log in logs)


def test_snapshot_and_sync_run_on_the_standalone_cluster_executor(
    spark_cluster: LocalSparkCluster, mariadb: LocalMariaDB, database: str, tmp_path: Path
) -> None:
    table = f"{database}.items"
    sql(
        mariadb,
        f"CREATE TABLE {table} (id INT PRIMARY KEY, label VARCHAR(20) NOT NULL, amount DECIMAL(10,2), "
        "at DATETIME(3))",
        f"INSERT INTO {table} SELECT seq, CONCAT('item-', seq), seq / 4, TIMESTAMP('2026-01-01') + INTERVAL seq "
        f"SECOND FROM seq_1_to_3000",
        database=database,
    )
    config_path = cluster_config(tmp_path / "binlake.yaml", cluster=spark_cluster, server=mariadb, table=table)
    apps_before = {app["id"] for app in finished_apps(spark_cluster)}

    snapshot = run_cli(config_path, "snapshot")
    assert snapshot.returncode == 0, snapshot.stderr
    sql(
        mariadb,
        f"INSERT INTO {table} VALUES (5001, 'new', 1.25, '2026-03-01 10:00:00.125')",
        f"UPDATE {table} SET label = 'changed' WHERE id <= 10",
        f"DELETE FROM {table} WHERE id BETWEEN 100 AND 104",
    )
    # The rows of a batch travel inside the plan (no folder shared with the executors is configured).
    first_sync = run_cli(config_path, "sync")
    assert first_sync.returncode == 0, first_sync.stderr

    # With a staging folder the executors can read, the batch goes through Parquet instead.
    staging = tmp_path / "shared-staging"
    cluster_config(config_path, cluster=spark_cluster, server=mariadb, table=table, staging_path=str(staging))
    sql(mariadb, f"UPDATE {table} SET amount = amount + 1 WHERE id BETWEEN 2000 AND 2100")
    second_sync = run_cli(config_path, "sync")
    assert second_sync.returncode == 0, second_sync.stderr
    assert staging.is_dir() and not any(staging.iterdir()), "the staged batch is removed after the MERGE"

    assert delta_rows(load_config(config_path, environ={"BINLAKE_TEST_PASSWORD": CDC_PASSWORD}), table) == (
        source_rows(mariadb, table)
    )
    new_apps = [app for app in finished_apps(spark_cluster) if app["id"] not in apps_before]
    assert len(new_apps) == 3 and all(app["name"] == "binlake" for app in new_apps)
    for app in new_apps:
        log = executor_log(spark_cluster, app["id"])
        # spark.jars reached the executor: it fetched the Delta and JDBC jars from the driver.
        assert re.search(r"Fetching spark://127\.0\.0\.1:\d+/jars/delta-spark_2\.13-[\d.]+\.jar", log), log[-3000:]
        assert "mariadb-java-client" in log
        assert re.search(r"Finished task .* in stage", log), "the executor ran tasks"
    snapshot_log = executor_log(spark_cluster, sorted(app["id"] for app in new_apps)[0])
    # Three JDBC partitions, each a task run on the executor.
    assert len(set(re.findall(r"Running task (\d+)\.0 in stage 0\.0", snapshot_log))) >= 3
