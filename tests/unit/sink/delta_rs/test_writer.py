"""Which tables the delta-rs writer takes, and the names and options it hands delta-rs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.changes.events import TableChanges
from cdc_lib.common.s3 import S3Credentials, S3Settings
from cdc_lib.config.model import BatchWriter
from cdc_lib.sink.choice import DeltaRsWriterError, spark_only_reasons, writer_for
from cdc_lib.sink.delta_log import TableDetail
from cdc_lib.sink.delta_rs.writer import quote, storage_options, table_uri
from cdc_lib.sink.storage import LocalSinkStorage, S3SinkStorage


def settings(reader: int = 1, writer: int = 2, features: tuple[str, ...] = (),
             properties: dict[str, str] | None = None, partitions: tuple[str, ...] = ()) -> TableDetail:
    return TableDetail(properties=dict(properties or {}), features=frozenset(features), reader_version=reader,
                       writer_version=writer, partition_columns=partitions)


@pytest.mark.parametrize("table, reason", [
    (settings(), None),
    (settings(3, 7, ("timestampNtz", "appendOnly", "invariants")), None),
    (settings(properties={"delta.checkpointInterval": "4", "delta.enableDeletionVectors": "false"}), None),
    (settings(3, 7, ("deletionVectors",), properties={"delta.enableDeletionVectors": "true"}), "deletion vectors"),
    (settings(1, 7, ("checkpointProtection", "appendOnly")), "checkpointProtection"),
    (settings(1, 4, properties={"delta.enableChangeDataFeed": "true"}), "change data feed"),
    (settings(2, 5, properties={"delta.columnMapping.mode": "name"}), "column mapping"),
    (settings(3, 7, ("typeWidening",), properties={"delta.enableTypeWidening": "true"}), "typeWidening"),
    (settings(1, 3, properties={"delta.constraints.positive": "qty > 0"}), "CHECK constraints"),
    (settings(4, 8), "newer than delta-rs's"),
    (settings(properties={"delta.checkpointPolicy": "v2"}), "v2 checkpoints"),
    (settings(partitions=("region",)), "partition columns (region)"),
    (settings(1, 7, ("domainMetadata", "clustering", "appendOnly", "invariants")), "clustering"),
])
def test_spark_only_reasons_name_what_delta_rs_does_not_write(table: TableDetail, reason: str | None) -> None:
    reasons = spark_only_reasons(table)
    if reason is None:
        assert reasons == []
    else:
        assert any(reason in text for text in reasons), reasons


def write_log(path: Path, protocol: dict[str, object], configuration: dict[str, str]) -> str:
    (path / "_delta_log").mkdir(parents=True)
    actions = [{"protocol": protocol}, {"metaData": {"id": "x", "format": {"provider": "parquet"},
                                                     "schemaString": "{}", "partitionColumns": [],
                                                     "configuration": configuration}}]
    (path / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(action) for action in actions))
    return str(path)


def choose(configured: BatchWriter, path: str, **options: object) -> str:
    return writer_for(configured, mode=options.pop("mode", "mirror"), changes=TableChanges((0,)),  # type: ignore[arg-type]
                      path=path, storage=LocalSinkStorage(), table="shop.orders", **options).engine  # type: ignore[arg-type]


def test_auto_takes_delta_rs_for_a_plain_mirror_table_and_spark_otherwise(tmp_path: Path) -> None:
    plain = write_log(tmp_path / "plain", {"minReaderVersion": 1, "minWriterVersion": 2}, {})
    vectors = write_log(tmp_path / "dv", {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures":
                                          ["deletionVectors"], "writerFeatures": ["deletionVectors"]},
                        {"delta.enableDeletionVectors": "true"})
    assert choose("auto", plain) == "delta-rs"
    assert choose("auto", vectors) == "spark"
    assert choose("spark", plain) == "spark"
    assert choose("auto", plain, mode="history") == "spark"
    dynamo = {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"}
    assert choose("auto", plain, spark_conf=dynamo) == "spark"
    with pytest.raises(DeltaRsWriterError) as refused:
        choose("delta-rs", vectors)
    assert refused.value.table == "shop.orders" and "batch.writer" in refused.value.remedy
    assert "deletion vectors" in str(refused.value)


def test_identifiers_and_locations_as_delta_rs_takes_them() -> None:
    assert quote('Qty"Total') == '"Qty""Total"'
    assert quote("Über Größe") == '"Über Größe"'
    assert table_uri("s3a://bucket/lake/db/t") == "s3://bucket/lake/db/t"
    assert table_uri("/lake/db/t") == "/lake/db/t"


def test_storage_options_carry_the_sink_settings_and_the_single_writer_premise() -> None:
    assert storage_options("/lake/db/t", LocalSinkStorage()) is None
    sink = S3SinkStorage(S3Settings(endpoint_url="http://127.0.0.1:9000", region="eu-west-3",
                                    credentials=S3Credentials("AKIA12", "secret-34", "token-56")))
    options = storage_options("s3a://bucket/lake/db/t", sink)
    assert options == {
        "AWS_S3_ALLOW_UNSAFE_RENAME": "true", "AWS_REGION": "eu-west-3", "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false", "AWS_ACCESS_KEY_ID": "AKIA12",
        "AWS_SECRET_ACCESS_KEY": "secret-34", "AWS_SESSION_TOKEN": "token-56",
        # Every network wait bounded (source.network_timeout_seconds; S3Settings' own default here).
        "timeout": "30s", "connect_timeout": "5s",
    }
    aws = storage_options("s3a://bucket/lake/db/t", S3SinkStorage(S3Settings(region="us-west-2")))
    assert aws == {"AWS_S3_ALLOW_UNSAFE_RENAME": "true", "AWS_REGION": "us-west-2",
                   "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true", "timeout": "30s", "connect_timeout": "5s"}


def test_an_unreachable_sink_fails_the_run_retryably_not_the_table() -> None:
    import pyarrow as pa

    from cdc_lib.errors import SinkError
    from cdc_lib.model.tables import TableRef, TableSchema
    from cdc_lib.model.types import ColumnInfo
    from cdc_lib.sink.delta_rs.writer import BatchWrite, write_batch

    schema = TableSchema(table=TableRef("shop", "orders"), columns=(ColumnInfo("id", "int", "int(11)", False),),
                         primary_key=("id",))
    closed_port = S3SinkStorage(S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1",
                                           credentials=S3Credentials("AKIA12", "secret-34")))
    batch = BatchWrite(records=pa.table({"id": pa.array([7], pa.int32()), "_binlake_op": ["u"]}), append=False,
                       key_range=None, truncated=False)
    with pytest.raises(SinkError) as failed:
        write_batch("s3a://bucket/lake/shop/orders", schema, batch, application="binlake:p:shop.orders",
                    txn_version=3, metadata={}, storage=closed_port)
    assert failed.value.retryable and "s3a://bucket/lake/shop/orders" in failed.value.cause


def test_the_version_write_batch_returns_is_its_commit_in_the_log(tmp_path: Path) -> None:
    """The committed version comes from delta-rs's own state, not a re-read of the log: it must be the log's."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from cdc_lib.model.tables import TableRef, TableSchema
    from cdc_lib.model.types import ColumnInfo
    from cdc_lib.sink import delta_log
    from cdc_lib.sink.delta_rs.writer import BatchWrite, arrow_records, write_batch

    schema = TableSchema(table=TableRef("shop", "orders"),
                         columns=(ColumnInfo("id", "bigint", "bigint(20)", False),
                                  ColumnInfo("total", "double", "double", True)),
                         primary_key=("id",))
    path = str(tmp_path / "orders")
    write_deltalake(path, pa.table({"id": pa.array([3, 11], pa.int64()), "total": [12.25, -7.5]}),
                    configuration={"delta.checkpointInterval": "3"})
    application, storage = "binlake:p:shop.orders", LocalSinkStorage()
    versions = []
    batches: list[tuple[list[tuple[Any, ...]], bool]] = [
        ([(11, 99.125, "u"), (3, None, "d"), (40, 1.0, "u")], False),  # MERGE: update, delete, insert
        ([(41, 2.5, "u"), (42, 3.75, "u")], True),  # append
        ([(41, None, "d")], False),  # MERGE to version 3: a checkpoint at the table's interval
    ]
    for txn, (records, append) in enumerate(batches, start=17):
        batch = BatchWrite(records=arrow_records(schema, records), append=append, key_range=None, truncated=False)
        version = write_batch(path, schema, batch, application=application, txn_version=txn,
                              metadata={"table": "shop.orders"}, storage=storage)
        assert version == delta_log.version_of(path, application, txn, storage) == delta_log.newest_version(path)
        versions.append(version)
    assert versions == [1, 2, 3]
    assert (tmp_path / "orders" / "_delta_log" / f"{3:020d}.checkpoint.parquet").exists()
    # A replay of the newest batch writes nothing and answers its commit's version.
    replayed = BatchWrite(records=arrow_records(schema, [(77, 0.5, "u")]), append=False, key_range=None,
                          truncated=False)
    assert write_batch(path, schema, replayed, application=application, txn_version=19,
                       metadata={"table": "shop.orders"}, storage=storage) == 3
    assert delta_log.newest_version(path) == 3


def _orders(tmp_path: Path) -> tuple[Any, str]:
    import pyarrow as pa
    from deltalake import write_deltalake

    from cdc_lib.model.tables import TableRef, TableSchema
    from cdc_lib.model.types import ColumnInfo

    schema = TableSchema(table=TableRef("shop", "orders"),
                         columns=(ColumnInfo("id", "bigint", "bigint(20)", False),
                                  ColumnInfo("total", "double", "double", True)),
                         primary_key=("id",))
    path = str(tmp_path / "orders")
    write_deltalake(path, pa.table({"id": pa.array([3, 11, 12, 29], pa.int64()), "total": [12.25, -7.5, 0.125, 8.0]}))
    return schema, path


def _write(path: str, schema: Any, records: list[tuple[Any, ...]], txn: int, *, known: bool = True) -> int:
    from cdc_lib.sink import delta_log
    from cdc_lib.sink.delta_rs.writer import BatchWrite, KnownLog, arrow_records, write_batch

    application = "binlake:p:shop.orders"
    tail = delta_log.read_log_tail(path, application=application)
    assert tail is not None
    keys = [record[0] for record in records]
    batch = BatchWrite(records=arrow_records(schema, records), append=False, key_range=(min(keys), max(keys)),
                       truncated=False)
    return write_batch(path, schema, batch, application=application, txn_version=txn, metadata={"table": "t"},
                       storage=LocalSinkStorage(),
                       known_log=KnownLog(tail.latest_version, tail.checkpoint_version) if known else None)


def _commit_info(path: str, version: int) -> dict[str, Any]:
    lines = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return next(json.loads(line)["commitInfo"] for line in lines if '"commitInfo"' in line)


def test_a_batch_of_only_deletes_is_a_delete_and_one_that_deletes_nothing_still_commits(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from cdc_lib.sink import delta_log

    schema, path = _orders(tmp_path)
    assert _write(path, schema, [(11, None, "d"), (29, None, "d"), (404, None, "d")], 5) == 1
    assert _commit_info(path, 1)["operation"] == "DELETE"
    assert sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda row: row["id"]) == [
        {"id": 3, "total": 12.25}, {"id": 12, "total": 0.125}]
    # Rows the table never held (deleted before a snapshot read them): delta-rs alone commits nothing, and the
    # batch's SetTransaction would be missing; an empty append carries it.
    assert _write(path, schema, [(77, None, "d"), (78, None, "d")], 6) == 2
    assert delta_log.version_of(path, "binlake:p:shop.orders", 6, LocalSinkStorage()) == 2
    assert json.loads(_commit_info(path, 2)["userMetadata"])["table"] == "t"
    assert DeltaTable(path).to_pyarrow_table().num_rows == 2
    # A MERGE that changes nothing (a delete of an absent key among upserts never is one; deletes past the DELETE
    # path's limit are): the same empty commit.
    many_absent = [(100_000 + index, None, "d") for index in range(1001)]
    assert _write(path, schema, many_absent, 7) == 3
    assert _commit_info(path, 3)["operation"] == "WRITE"
    assert delta_log.version_of(path, "binlake:p:shop.orders", 7, LocalSinkStorage()) == 3


def test_a_kept_table_sees_what_another_writer_committed_between_two_batches(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from cdc_lib.sink.delta_rs.writer import LOADED_TABLES, table_uri

    schema, path = _orders(tmp_path)
    LOADED_TABLES.clear()
    assert _write(path, schema, [(3, 1.5, "u"), (50, 2.75, "u")], 1) == 1
    kept = LOADED_TABLES.held(table_uri(path))
    assert kept is not None and kept.version() == 1
    # Another writer (here a second delta-rs handle; Spark in tests/integration/test_delta_rs_writes.py) rewrites
    # the table: a kept state that missed it would MERGE into files no longer in the table.
    write_deltalake(path, pa.table({"id": pa.array([3, 50, 60], pa.int64()), "total": [1.5, 2.75, 60.5]}),
                    mode="overwrite")
    assert _write(path, schema, [(50, 99.0, "u"), (61, 4.25, "u")], 2) == 3
    assert LOADED_TABLES.held(table_uri(path)) is kept, "the kept table was not reused"
    assert sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda row: row["id"]) == [
        {"id": 3, "total": 1.5}, {"id": 50, "total": 99.0}, {"id": 60, "total": 60.5}, {"id": 61, "total": 4.25}]
    # A log read that does not match the kept state (here: none given, or a commit after the read) loads afresh.
    assert _write(path, schema, [(3, 5.0, "u")], 3, known=False) == 4
    assert LOADED_TABLES.held(table_uri(path)) is not kept
    assert DeltaTable(path).transaction_version("binlake:p:shop.orders") == 3


def test_a_partitioned_or_clustered_snapshot_is_written_by_spark_and_refused_to_delta_rs(tmp_path: Path) -> None:
    from cdc_lib.config.model import TableLayout
    from cdc_lib.sink.delta_rs.snapshot_wave import SnapshotWriterError, choose_writer

    def choice(setting: Any, layout: TableLayout) -> str:
        return choose_writer(setting, str(tmp_path / "new"), table="shop.orders", mode="mirror",
                             deletion_vectors=False, change_data_feed=False, local_master=True, wave_bytes=1,
                             storage=LocalSinkStorage(), column_types=[("id", "integer")], layout=layout)

    assert choice("auto", TableLayout()) == "delta-rs"
    assert choice("auto", TableLayout(partition_by=("region",))) == "spark"
    assert choice("auto", TableLayout(cluster_by=("region",))) == "spark"
    with pytest.raises(SnapshotWriterError, match="partitioned by region"):
        choice("delta-rs", TableLayout(partition_by=("region",)))
