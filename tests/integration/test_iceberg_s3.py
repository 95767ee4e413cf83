"""Iceberg metadata of a Delta table on an S3 sink (`sink.tables.<t>.iceberg: true`, docs/iceberg.md), against the
real MariaDB, Spark, Delta and the suite's moto S3 server: after a snapshot and a sync batch, pyiceberg (not binlake)
opens the newest metadata on S3 with the sink's endpoint and keys, and reads the same rows as the source and as
delta-rs; every data file it lists is an `s3://` location of a file Delta lists. pyiceberg is imported at module
level: without it these tests fail, they do not skip.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import boto3
from deltalake import DeltaTable
from pyiceberg.table import StaticTable

from cdc_lib.config.model import PipelineConfig
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.iceberg.convert import DELTA_VERSION
from tests.conftest import source_rows, sql
from tests.integration.conftest import s3_sink
from tests.integration.iceberg_rows import normal, sorted_rows


def _reader_properties(endpoint: str) -> dict[str, str]:
    """What any pyiceberg reader of the bucket passes: the endpoint, keys and path-style addressing."""
    return {"s3.endpoint": endpoint, "s3.access-key-id": os.environ["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": os.environ["AWS_SECRET_ACCESS_KEY"], "s3.region": "us-east-1",
            "s3.force-virtual-addressing": "false"}


def _delta(path: str, endpoint: str) -> DeltaTable:
    return DeltaTable("s3://" + path.removeprefix("s3a://"), storage_options={
        "AWS_ENDPOINT_URL": endpoint, "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"], "AWS_S3_ALLOW_UNSAFE_RENAME": "true"})


def _check(config: PipelineConfig, table: str, mariadb: Any, endpoint: str) -> StaticTable:
    path = Pipeline(config).table_path(table)
    assert path.startswith("s3a://")
    location = "s3://" + path.removeprefix("s3a://")
    delta = _delta(path, endpoint)
    iceberg = StaticTable.from_metadata(location, properties=_reader_properties(endpoint))  # via version-hint.text
    snapshot = iceberg.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    assert snapshot.summary[DELTA_VERSION] == str(delta.version()), "the Iceberg snapshot lists the newest version"
    assert iceberg.metadata.location == location
    listed = sorted(task.file.file_path for task in iceberg.scan().plan_files())
    assert listed == sorted(delta.file_uris()) and all(file.startswith(f"{location}/") for file in listed), \
        "the same Parquet files Delta lists, as s3:// URIs"
    rows = sorted_rows(iceberg.scan().to_arrow())
    assert rows == sorted_rows(delta.to_pyarrow_table()), "Iceberg and delta-rs read the same rows"
    assert rows == [tuple(normal(value) for value in row) for row in source_rows(mariadb, table)]
    return iceberg


def test_iceberg_metadata_on_an_s3_sink_reads_like_the_source(
    mariadb: Any, database: str, make_config: Any, s3_endpoint: str, s3_bucket: str, tmp_path: Path,
) -> None:
    table = f"{database}.t"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20), amount DECIMAL(9,2), "
                 "at DATETIME(6), n BIGINT)",
        f"INSERT INTO {table} VALUES (1, 'a', 1.50, '2026-01-02 03:04:05.123456', 10), (2, 'b', NULL, NULL, 20), "
        "(3, 'c', 3.25, '2026-02-03 00:00:00', 30)")
    config = make_config([table], sink=s3_sink(s3_endpoint, s3_bucket, tables={table: {"iceberg": True}}),
                         offsets={})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    _check(config, table, mariadb, s3_endpoint)

    sql(mariadb, f"INSERT INTO {table} VALUES (4, 'new', 9.99, NOW(6), 40)", f"UPDATE {table} SET v = 'u' WHERE id = 1",
        f"DELETE FROM {table} WHERE id = 2")
    pipeline.sync(until_caught_up=True)
    iceberg = _check(config, table, mariadb, s3_endpoint)
    assert len(iceberg.metadata.snapshots) >= 2, "the sync's Delta version is a second Iceberg snapshot"

    prefix = f"lake/{database}/t/metadata/"
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    names = {item["Key"].removeprefix(prefix) for item in client.list_objects_v2(
        Bucket=s3_bucket, Prefix=prefix)["Contents"]}
    hint = client.get_object(Bucket=s3_bucket, Key=prefix + "version-hint.text")["Body"].read().decode()
    assert f"v{hint}.metadata.json" in names and "v1.metadata.json" in names
    assert not (tmp_path / "lake").exists(), "nothing went to local disk"
