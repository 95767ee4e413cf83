"""Costs that must not grow with history or table count: Delta log reads start at the last checkpoint, and a
batch writes the offsets document a constant number of times (issue 12, direction A)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import boto3
import pytest
from deltalake import DeltaTable

from cdc_lib.common.s3 import S3Settings
from cdc_lib.config.model import SparkConfig
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink import delta_log
from cdc_lib.sink.spark.commit import IdempotentCommit
from cdc_lib.sink.spark.session import spark_session
from cdc_lib.sink.storage import LocalSinkStorage, S3SinkStorage
from cdc_lib.state.offset_store import STATE_FILE, LocalOffsetStore
from cdc_lib.state.offsets import PipelineState
from tests.conftest import delta_rows, source_rows, sql
from tests.integration.conftest import assert_each_change_applied_once

APP = "binlake:p:db.t"
CHECKPOINT_SHAPES = {
    "classic": {},
    "v2": {"delta.checkpointPolicy": "v2"},
    "multi_part": {},  # split by the session's partSize below
}


def _spark() -> Any:
    return spark_session(SparkConfig(master="local[2]"))


def _binlake_append(spark: Any, path: str, txn: int, options: dict[str, str] | None = None) -> None:
    frame = spark.createDataFrame([(txn * 7 + 3, f"v{txn}")], "id int, label string")
    with IdempotentCommit(spark, APP, txn, {"kind": "merge", "end": {"batch": txn}}):
        frame.write.format("delta").mode("append").options(**(options or {})).save(path)


def _foreign_commit(spark: Any, path: str, number: int) -> None:
    """A commit binlake did not write (a DELETE that leaves a deletion vector, or a property change)."""
    if number % 2:
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = {number * 7 + 3}")
    else:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('binlake.test.note' = '{number}')")


def _build(path: str, shape: str) -> None:
    """Binlake commits v0-v4 (txn 1-5), then foreign commits v5-v10: checkpoints at 3, 6 and 9 lie past the last
    binlake commit (v4), the last one (9) well past it."""
    spark = _spark()
    options = {
        "delta.checkpointInterval": "3", "delta.enableDeletionVectors": "true",
        "delta.enableChangeDataFeed": "true", **CHECKPOINT_SHAPES[shape],
    }
    if shape == "multi_part":
        spark.conf.set("spark.databricks.delta.checkpoint.partSize", "2")
    try:
        for txn in range(1, 6):
            _binlake_append(spark, path, txn, options if txn == 1 else None)
        for number in range(1, 7):
            _foreign_commit(spark, path, number)
    finally:
        spark.conf.unset("spark.databricks.delta.checkpoint.partSize")


def _checkpoint_versions(path: str) -> set[int]:
    return {int(match.group("version")) for name in (Path(path) / "_delta_log").iterdir()
            if (match := delta_log.CHECKPOINT_FILE.match(name.name))}


@pytest.mark.parametrize("shape", sorted(CHECKPOINT_SHAPES))
def test_tail_found_in_the_checkpoint_then_after_it(shape: str, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    _build(path, shape)
    assert _checkpoint_versions(path) >= {3, 6, 9}
    names = {name.name for name in (Path(path) / "_delta_log").iterdir()}
    if shape == "multi_part":
        parts = [name for name in names if re.match(r"^0{19}9\.checkpoint\.\d{10}\.\d{10}\.parquet$", name)]
        assert len(parts) >= 2, names
    if shape == "v2":
        assert any(name.startswith("00000000000000000009.checkpoint.") and name.endswith(".json") for name in names)

    storage = LocalSinkStorage()
    tail = delta_log.read_log_tail(path, application=APP, storage=storage)
    assert tail is not None and tail.checkpoint_version == 9
    assert tail.latest_version == DeltaTable(path).version() == 10
    commit = tail.last_binlake_commit
    assert commit is not None and (commit.delta_version, commit.txn_version) == (4, 5)
    assert commit.txn_version == DeltaTable(path).transaction_version(APP)  # delta-rs, the independent reader
    assert commit.metadata["end"] == {"batch": 5}
    # Listed: v9's checkpoint files, commit and .crc, v10's, _last_checkpoint, _staged_commits — never v0-v8.
    tail_names = [name for name in names if name > "00000000000000000009"]
    assert all(name.startswith(("00000000000000000009.", "00000000000000000010.", "_")) for name in tail_names)
    assert storage.counters.list_calls == 1 and storage.counters.names_listed == len(tail_names) < len(names) / 3
    assert delta_log.table_exists(path, storage=LocalSinkStorage())

    # A binlake commit after the checkpoint is found by the listing alone, without reading the checkpoint.
    _binlake_append(_spark(), path, 6)
    storage = LocalSinkStorage()
    tail = delta_log.read_log_tail(path, application=APP, storage=storage)
    assert tail is not None and tail.last_binlake_commit is not None
    assert (tail.last_binlake_commit.delta_version, tail.last_binlake_commit.txn_version) == (11, 6)
    assert storage.counters.files_read == 2  # _last_checkpoint, 00…11.json
    assert delta_log.version_of(path, APP, 6, LocalSinkStorage()) == 11


def test_listing_is_bounded_on_s3(tmp_path: Path, s3_endpoint: str, s3_bucket: str) -> None:
    """The same log on the moto S3 server: StartAfter keeps the keys listed to the checkpoint's tail."""
    path = tmp_path / "t"
    _build(str(path), "classic")
    shutil.rmtree(path / "_delta_log" / "_staged_commits", ignore_errors=True)
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    for file in (path / "_delta_log").iterdir():
        if file.is_file() and not file.name.startswith("."):
            client.put_object(Bucket=s3_bucket, Key=f"lake/t/_delta_log/{file.name}", Body=file.read_bytes())
    everything = len(client.list_objects_v2(Bucket=s3_bucket, Prefix="lake/t/_delta_log/")["Contents"])

    storage = S3SinkStorage(S3Settings(endpoint_url=s3_endpoint))
    tail = delta_log.read_log_tail(f"s3a://{s3_bucket}/lake/t", application=APP, storage=storage)
    assert tail is not None and tail.last_binlake_commit is not None
    assert (tail.latest_version, tail.last_binlake_commit.delta_version, tail.last_binlake_commit.txn_version) == (
        10, 4, 5)
    # 00…09.checkpoint.parquet, 00…09.json/.crc, 00…10.json/.crc, _last_checkpoint — of the whole log's keys.
    assert storage.counters.list_calls == 1 and storage.counters.names_listed == 6 < everything / 3
    assert delta_log.table_exists(f"s3a://{s3_bucket}/lake/t", storage=storage)
    assert not delta_log.table_exists(f"s3a://{s3_bucket}/lake/none", storage=storage)


def test_replay_after_a_crash_finds_its_commit_behind_a_checkpoint(mariadb, database, make_config) -> None:
    """The Delta commit of a batch is there, the offset write was lost, and a checkpoint came after the commit:
    the re-run adopts the commit from the log and applies nothing twice."""
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY, qty INT)",
        f"INSERT INTO {database}.t VALUES (1, 11), (2, 22)")
    table = f"{database}.t"
    config = make_config([table])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    spark, path = pipeline.spark(), pipeline.table_path(table)
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '3')")
    store = LocalOffsetStore(config.offsets.uri)
    before_crash, _ = store.read(config.pipeline)
    assert before_crash is not None

    sql(mariadb, f"UPDATE {database}.t SET qty = qty + 5", f"INSERT INTO {database}.t VALUES (3, 37)")
    pipeline.sync()
    committed = delta_log.read_log_tail(path, application=pipeline.context.application(table))
    assert committed is not None and committed.last_binlake_commit is not None
    # The crash: the offsets go back to before the batch, as if its offset write never happened.
    _restore(store, before_crash)
    for number in range(4):
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('binlake.test.note' = '{number}')")
    assert max(_checkpoint_versions(path)) > committed.last_binlake_commit.delta_version

    pipeline.sync()
    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert_each_change_applied_once(config, table)
    after = pipeline.read_state().tables[table]
    assert after.applied_seq == committed.last_binlake_commit.txn_version
    assert after.delta_version == committed.last_binlake_commit.delta_version


def _restore(store: LocalOffsetStore, state: PipelineState) -> None:
    _, token = store.read(state.pipeline)
    state.lease = None
    store.write(state, token)


class CountingStore(LocalOffsetStore):
    """The real local store, counting its writes of the state document (however the runner makes them)."""

    writes = 0

    def write_document(self, pipeline: str, name: str, document: dict[str, Any], token: str | None) -> str:
        if name == STATE_FILE:
            CountingStore.writes += 1
        return super().write_document(pipeline, name, document, token)


@pytest.mark.parametrize("tables", [1, 12])
def test_offset_writes_per_batch_do_not_grow_with_tables(tables: int, mariadb, database, make_config) -> None:
    names = [f"{database}.t{number}" for number in range(tables)]
    sql(mariadb, *(f"CREATE TABLE {name} (id INT PRIMARY KEY, qty INT)" for name in names))
    config = make_config(names)
    pipeline = Pipeline(config, store=CountingStore(config.offsets.uri))
    pipeline.snapshot()
    sql(mariadb, "START TRANSACTION", *(f"INSERT INTO {name} VALUES (1, 12)" for name in names), "COMMIT")
    CountingStore.writes = 0

    results = pipeline.sync()
    assert sum(1 for result in results[0].tables if result.delta_version is not None) == tables
    # acquire (lease), the batch sequence before any Delta commit, the batch's offsets, release.
    assert CountingStore.writes == 4


def test_status_shows_a_finite_time_to_catch_up(mariadb, database, make_config) -> None:
    """A backlog read in batches that hit their limit: status divides what is left by the measured rates."""
    table = f"{database}.t"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT, pad VARCHAR(200))")
    config = make_config([table], batch__max_events=40)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    for number in range(12):
        sql(mariadb, f"INSERT INTO {table} SELECT {number * 100} + seq, seq, REPEAT('c', 173) "
                     f"FROM {database}.seq_1_to_25")
    first = pipeline.sync()[0]
    assert not first.reached_end, "the batch must stop at its limit to measure what binlake can apply"
    recorded = pipeline.read_state().recent_batches[-1]
    assert recorded.limited and recorded.binlog_bytes > 0 and recorded.seconds > 0

    status = next(status for status in pipeline.status() if status.table == table)
    assert status.lag_bytes is not None and status.lag_bytes > 0
    estimate = status.catch_up
    assert estimate is not None and estimate["verdict"] == "catching_up", estimate
    assert estimate["apply_bytes_per_second"] == pytest.approx(recorded.binlog_bytes / recorded.seconds)
    margin = estimate["apply_bytes_per_second"] - (estimate["source_bytes_per_second"] or 0.0)
    assert estimate["seconds"] == pytest.approx(status.lag_bytes / margin)
    assert 0 < estimate["seconds"] < 3600 and not status.catch_up_warning

    pipeline.sync(until_caught_up=True)
    caught_up = next(status for status in pipeline.status() if status.table == table)
    assert caught_up.catch_up is not None and caught_up.catch_up["verdict"] == "caught_up"
    assert caught_up.catch_up["seconds"] == 0.0


def test_an_incomplete_or_missing_checkpoint_is_passed_over(tmp_path: Path) -> None:
    """A multi-part checkpoint cut short is not a checkpoint; a `_last_checkpoint` naming a checkpoint that is not
    there makes the read list the log whole."""
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    for version in range(6):
        actions = [{"txn": {"appId": APP, "version": version + 40}},
                   {"commitInfo": {"userMetadata": json.dumps({"app_id": APP, "end": version * 11})}}]
        (log / f"{version:020d}.json").write_text("\n".join(json.dumps(action) for action in actions) + "\n")
    (log / f"{3:020d}.checkpoint.parquet").write_bytes(b"PAR1 not read: a commit after it is binlake's")
    (log / f"{5:020d}.checkpoint.0000000001.0000000002.parquet").write_bytes(b"PAR1")
    for hint, listed in ((3, 6), (7, 1 + 9)):
        (log / "_last_checkpoint").write_text(json.dumps({"version": hint, "size": 4}))
        storage = LocalSinkStorage()
        tail = delta_log.read_log_tail(str(tmp_path / "t"), application=APP, storage=storage)
        assert tail is not None and tail.checkpoint_version == 3 and tail.latest_version == 5
        assert tail.last_binlake_commit is not None and tail.last_binlake_commit.metadata["end"] == 55
        assert storage.counters.names_listed == listed


@pytest.mark.parametrize("shape", sorted(CHECKPOINT_SHAPES))
def test_table_settings_match_describe_detail(shape: str, tmp_path: Path) -> None:
    """The properties and features a re-snapshot checks, read from the log (the newest metaData is in a commit
    after the checkpoint, the protocol only in the checkpoint), are what Spark's DESCRIBE DETAIL reports."""
    path = str(tmp_path / "t")
    _build(path, shape)
    storage = LocalSinkStorage()
    settings = delta_log.table_detail(path, storage=storage)
    detail = _spark().sql(f"DESCRIBE DETAIL delta.`{path}`").select("properties", "tableFeatures").first()
    assert settings is not None and detail is not None
    assert settings.properties == dict(detail[0]) and settings.properties["binlake.test.note"] == "6"
    assert settings.features == set(detail[1]) and "deletionVectors" in settings.features
    assert storage.counters.list_calls == 1  # from the checkpoint on, as the tail read

    # A property set, then dropped again: the newest commit's metaData wins over the checkpoint's.
    _spark().sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    settings = delta_log.table_detail(path, storage=LocalSinkStorage())
    assert settings is not None and settings.properties["delta.enableDeletionVectors"] == "false"
    assert delta_log.table_detail(str(tmp_path / "none"), storage=LocalSinkStorage()) is None
