"""`snapshot.writer`: a snapshot's waves written by delta-rs (from Spark's read, as Arrow) land the same table as
Spark's writer, with the same idempotent commits, survive a kill between the commit and the snapshot document, and
tables delta-rs cannot write exactly stay on Spark (auto) or are refused (delta-rs)."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError, DeltaStateError
from cdc_lib.model.tables import TableRef
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.delta_rs import snapshot_wave
from cdc_lib.sink.delta_rs.snapshot_wave import SnapshotWriterError, write_wave
from cdc_lib.sink.storage import storage_for
from cdc_lib.snapshot.jdbc_read import read_table
from cdc_lib.source.server import describe_table, source_connection
from tests.conftest import delta_rows, run_cli, scan_rows, source_rows, sql, write_config_file
from tests.integration.conftest import s3_sink
from tests.integration.snapshot_runs import finished_record, make_items, wave_commits
from tests.integration.type_rows import COLUMNS, NAMES, ROWS, WIDE_DECIMALS


def commit_infos(path: str) -> list[dict[str, Any]]:
    """Every commit's commitInfo, oldest first."""
    infos = []
    for file in sorted((Path(path) / "_delta_log").glob("*.json")):
        for line in file.read_text().splitlines():
            if '"commitInfo"' in line:
                infos.append(json.loads(line)["commitInfo"])
    return infos


def written_by_spark(info: dict[str, Any]) -> bool:
    return str(info.get("engineInfo", "")).startswith("Apache-Spark")


def test_delta_rs_and_spark_snapshots_land_the_same_table(mariadb, database, make_config, tmp_path) -> None:
    """Every type of the type-parity table, read back by Spark and by delta-rs, in several delta-rs waves; then
    the sync's Spark MERGEs continue on the delta-rs table."""
    # Without the DECIMALs wider than delta-rs writes statistics for exactly: such a table stays on Spark (below).
    table, every_type = f"{database}.exact_statistics", f"{database}.every_type"
    sql(mariadb, f"CREATE TABLE {every_type} ({COLUMNS})", f"INSERT INTO {every_type} VALUES {', '.join(ROWS)}",
        f"CREATE TABLE {table} (PRIMARY KEY (id)) AS SELECT "
        f"{', '.join(name for name in NAMES if name not in WIDE_DECIMALS)} FROM {every_type}")
    by_spark = make_config([table], sink={"path": str(tmp_path / "lake-spark")}, snapshot={"writer": "spark"})
    by_delta_rs = make_config([table], sink={"path": str(tmp_path / "lake-delta-rs")},
                              snapshot={"writer": "delta-rs", "rows_per_chunk": 1, "chunks_per_wave": 2})
    Pipeline(by_spark).snapshot()
    (result,) = Pipeline(by_delta_rs).snapshot()
    assert result.chunks >= 3 and result.rows == 4

    rs_path = Pipeline(by_delta_rs).table_path(table)
    waves = wave_commits(by_delta_rs, table)
    assert len(waves) >= 2 and [wave["wave"] for wave in waves] == list(range(1, len(waves) + 1))
    assert all(wave["kind"] == "snapshot" for wave in waves)
    assert not any(written_by_spark(info) for info in commit_infos(rs_path)), "delta-rs wrote every commit"
    assert all(written_by_spark(info) for info in commit_infos(Pipeline(by_spark).table_path(table)))

    spark = Pipeline(by_spark).spark()
    spark_schema = spark.read.format("delta").load(Pipeline(by_spark).table_path(table)).schema
    rs_schema = spark.read.format("delta").load(rs_path).schema
    assert [(field.name, field.dataType) for field in rs_schema.fields] == \
        [(field.name, field.dataType) for field in spark_schema.fields]
    assert delta_rows(by_delta_rs, table) == delta_rows(by_spark, table)
    assert sorted(scan_rows(rs_path), key=lambda row: row[0]) == \
        sorted(scan_rows(Pipeline(by_spark).table_path(table)), key=lambda row: row[0])
    assert [row[0] for row in delta_rows(by_delta_rs, table)] == [1, 2, 3, 6]

    sql(mariadb, f"UPDATE {table} SET dec_small = 12.25, vc = 'après' WHERE id = 2",
        f"DELETE FROM {table} WHERE id = 3",
        f"INSERT INTO {table} (id, ti, dt6) VALUES (9, -7, '2031-05-06 07:08:09.5')")
    for config in (by_spark, by_delta_rs):
        Pipeline(config).sync(until_caught_up=True)
    assert delta_rows(by_delta_rs, table) == delta_rows(by_spark, table)
    assert [row[0] for row in delta_rows(by_delta_rs, table)] == [1, 2, 6, 9]

    # The table Spark wrote and MERGEd into, re-snapshotted by delta-rs (its protocol has timestampNtz): the
    # same rows, read by Spark and by delta-rs.
    spark_path = Pipeline(by_spark).table_path(table)
    switched = make_config([table], pipeline=by_spark.pipeline, sink={"path": str(tmp_path / "lake-spark")},
                           snapshot={"writer": "delta-rs"})
    Pipeline(switched).snapshot(restart=True)
    assert not written_by_spark(commit_infos(spark_path)[-1])
    assert delta_rows(switched, table) == delta_rows(by_delta_rs, table)
    assert sorted(scan_rows(spark_path), key=lambda row: row[0]) == sorted(scan_rows(rs_path), key=lambda row: row[0])


def test_killed_after_a_delta_rs_commit_resumes_with_nothing_twice(mariadb, database, make_config,
                                                                     tmp_path) -> None:
    """Killed between wave 2's delta-rs commit and the document that records it, then before wave 4's commit:
    the resume adopts wave 2 from the Delta log, rewrites nothing committed, and every row is there once."""
    table = make_items(mariadb, database, rows=300)
    config = make_config([table], snapshot={"writer": "delta-rs", "rows_per_chunk": 50, "chunks_per_wave": 1})
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    killed = run_cli(config_path, "snapshot", env={"BINLAKE_FAILPOINT": "after_snapshot_wave_commit",
                                                   "BINLAKE_FAILPOINT_AT": "2"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert [commit["wave"] for commit in wave_commits(config, table)] == [1, 2]
    sql(mariadb, f"UPDATE {table} SET price = price + 0.75 WHERE id % 4 = 1",
        f"DELETE FROM {table} WHERE id BETWEEN 100 AND 130", f"INSERT INTO {table} VALUES (5000, 3.5, 'late')")
    killed = run_cli(config_path, "snapshot", env={"BINLAKE_FAILPOINT": "before_snapshot_wave_commit",
                                                   "BINLAKE_FAILPOINT_AT": "2"})  # the resume's 2nd: wave 4
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]

    pipeline = Pipeline(config)
    (result,) = pipeline.snapshot()
    assert result.installed and result.chunks == 6 and result.chunks_resumed == 3
    record = finished_record(config, table)
    assert [wave["number"] for wave in record["waves"]] == [1, 2, 3, 4, 5, 6]
    assert [wave["number"] for wave in record["waves"] if wave["adopted"]] == [2]
    assert [commit["wave"] for commit in wave_commits(config, table)] == [1, 2, 3, 4, 5, 6], "each wave once"
    path = pipeline.table_path(table)
    assert not any(written_by_spark(info) for info in commit_infos(path))

    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].consistent
    expected = source_rows(mariadb, table)
    assert sorted(scan_rows(path)) == expected
    assert delta_rows(config, table) == expected


def test_a_replayed_delta_rs_wave_writes_nothing(mariadb, database, make_config) -> None:
    """delta-rs does not check SetTransactions as Spark's writer does: `write_wave` does, before it writes."""
    table = make_items(mariadb, database, rows=40)
    config = make_config([table])
    pipeline = Pipeline(config)
    with source_connection(config.source) as connection:
        schema = describe_table(connection, TableRef.parse(table))
    frame = read_table(pipeline.spark(), config.source, schema, ["1=1"])
    path = pipeline.table_path(table)
    first = write_wave(frame, path, application="binlake-test:replay", txn_version=1, metadata={"wave": 1},
                       overwrite=True)
    second = write_wave(frame, path, application="binlake-test:replay", txn_version=2, metadata={"wave": 2},
                        overwrite=False)
    assert (first, second) == (0, 1)
    assert write_wave(frame, path, application="binlake-test:replay", txn_version=2, metadata={"wave": 2},
                      overwrite=False) == 1
    # An older wave replayed after a newer one: nothing written, and refused as Spark's writer path refuses it.
    with pytest.raises(DeltaStateError, match="batch 1 was not found"):
        write_wave(frame, path, application="binlake-test:replay", txn_version=1, metadata={"wave": 1},
                   overwrite=True)
    assert len(commit_infos(path)) == 2
    assert len(scan_rows(path)) == 80


def test_an_empty_table_snapshotted_by_delta_rs_then_followed(mariadb, database, make_config) -> None:
    table = make_items(mariadb, database, rows=1)
    sql(mariadb, f"DELETE FROM {table}")
    config = make_config([table], snapshot={"writer": "delta-rs"})
    pipeline = Pipeline(config)
    (result,) = pipeline.snapshot()
    assert result.rows == 0 and scan_rows(pipeline.table_path(table)) == []
    assert not any(written_by_spark(info) for info in commit_infos(pipeline.table_path(table)))
    sql(mariadb, f"INSERT INTO {table} VALUES (-3, 12.25, 'first'), (8, 0.75, NULL)")
    pipeline.sync(until_caught_up=True)
    assert delta_rows(config, table) == source_rows(mariadb, table)


def test_a_wave_whose_read_fails_midway_commits_nothing(mariadb, database, make_config, tmp_path) -> None:
    """A wave's read failing in one task after another task finished: the job's own error is raised, delta-rs
    commits nothing, and the wave read again commits once (a streamed hand-over must keep this: docs/performance.md
    "Pipelining the wave")."""
    from pyspark.sql import functions as F

    table = make_items(mariadb, database, rows=40)
    pipeline = Pipeline(make_config([table]))
    spark = pipeline.spark()
    path = str(tmp_path / "failed-wave")
    good = spark.range(0, 3_000, 1, 2).select((F.col("id") * 7).alias("id"))
    assert write_wave(good, path, application="binlake-test:midway", txn_version=1, metadata={"wave": 1},
                      overwrite=True) == 0
    # Two tasks: the first reads its 20,000 rows, the second fails at its last row.
    failing = spark.range(0, 40_000, 1, 2).select(
        F.when(F.col("id") == 39_999, F.raise_error(F.lit("binlake-test: the read broke at 12.25")))
        .otherwise(F.col("id")).alias("id"))
    with pytest.raises(Exception, match="the read broke at 12.25"):
        write_wave(failing, path, application="binlake-test:midway", txn_version=2, metadata={"wave": 2},
                   overwrite=False)
    assert len(commit_infos(path)) == 1, "no commit for the failed wave"
    assert sorted(row[0] for row in scan_rows(path)) == [7 * key for key in range(3_000)]
    # The same wave read again commits once.
    assert write_wave(spark.range(0, 40_000, 1, 2), path, application="binlake-test:midway", txn_version=2,
                      metadata={"wave": 2}, overwrite=False) == 1
    assert len(scan_rows(path)) == 43_000


def test_a_snapshot_into_s3_is_written_by_delta_rs(mariadb, database, make_config, s3_endpoint, s3_bucket) -> None:
    """An S3 sink takes the delta-rs writer too (delta-rs reaches it with the sink's S3 settings): the waves land
    on the bucket, read back by delta-rs and by Spark, and the sync's Spark MERGEs continue on the table."""
    from deltalake import DeltaTable

    from cdc_lib.sink.delta_rs.writer import storage_options, table_uri

    table = make_items(mariadb, database, rows=300)
    config = make_config([table], sink=s3_sink(s3_endpoint, s3_bucket), offsets={},
                         snapshot={"writer": "delta-rs", "rows_per_chunk": 120, "chunks_per_wave": 1})
    pipeline = Pipeline(config)
    (result,) = pipeline.snapshot()
    assert result.rows == 300 and result.chunks == 3 and result.installed
    path = pipeline.table_path(table)
    assert path.startswith("s3a://")

    def lake() -> DeltaTable:
        return DeltaTable(table_uri(path), storage_options=storage_options(path, pipeline.sink))

    history = sorted(lake().history(), key=lambda info: int(info["version"]))
    assert [json.loads(info["userMetadata"])["wave"] for info in history] == [1, 2, 3]
    assert not any(written_by_spark(info) for info in history), "delta-rs wrote every wave"
    by_delta_rs = sorted(tuple(row.values()) for row in lake().to_pyarrow_table().to_pylist())
    assert by_delta_rs == source_rows(mariadb, table)
    assert delta_rows(config, table) == source_rows(mariadb, table)

    sql(mariadb, f"UPDATE {table} SET price = 12.25 WHERE id = 14", f"DELETE FROM {table} WHERE id = -4",
        f"INSERT INTO {table} VALUES (5003, 0.75, 'late')")
    pipeline.sync(until_caught_up=True)
    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert pipeline.read_state().tables[table].consistent


def test_tables_delta_rs_cannot_write_exactly_stay_on_spark_or_are_refused(mariadb, database, make_config,
                                                                           tmp_path) -> None:
    table = make_items(mariadb, database, rows=30)
    auto = make_config([table], sink={"path": str(tmp_path / "lake"), "deletion_vectors": True})
    (result,) = Pipeline(auto).snapshot()
    assert result.rows == 30
    assert all(written_by_spark(info) for info in commit_infos(Pipeline(auto).table_path(table)))

    forced = make_config([table], sink={"path": str(tmp_path / "lake-forced"), "deletion_vectors": True},
                         snapshot={"writer": "delta-rs"})
    with pytest.raises(SnapshotWriterError, match="deletion vectors") as raised:
        Pipeline(forced).snapshot()
    assert "snapshot.writer" in raised.value.remedy

    # A table Spark left with deletion vectors in its protocol: a later snapshot with them off stays on Spark
    # under auto (Spark drops the feature; delta-rs cannot), and its rows are still exact.
    after = make_config([table], sink={"path": str(tmp_path / "lake")}, pipeline=auto.pipeline)
    Pipeline(after).snapshot(restart=True)
    infos = commit_infos(Pipeline(after).table_path(table))
    assert all(written_by_spark(info) for info in infos)
    assert sorted(scan_rows(Pipeline(after).table_path(table))) == source_rows(mariadb, table)


def test_a_wave_too_large_for_the_driver_stays_on_spark(mariadb, database, make_config, tmp_path,
                                                        monkeypatch) -> None:
    """The Arrow budget is 512 MiB; lowered here below this table's wave (InnoDB's average row length × rows)."""
    table = make_items(mariadb, database, rows=120)
    monkeypatch.setattr(snapshot_wave, "ARROW_WAVE_BYTES", 1000)
    auto = make_config([table], sink={"path": str(tmp_path / "lake")})
    (result,) = Pipeline(auto).snapshot()
    assert result.rows == 120
    assert all(written_by_spark(info) for info in commit_infos(Pipeline(auto).table_path(table)))
    forced = make_config([table], sink={"path": str(tmp_path / "lake-forced")}, snapshot={"writer": "delta-rs"})
    with pytest.raises(SnapshotWriterError, match="MiB"):
        Pipeline(forced).snapshot()


def test_a_delta_log_store_set_for_spark_keeps_the_snapshot_on_spark(tmp_path) -> None:
    """S3's DynamoDB log store (set under spark.conf) is how Spark's commits coordinate: delta-rs would bypass it."""
    path = str(tmp_path / "lake" / "db" / "t")
    common: dict[str, Any] = {"table": "db.t", "mode": "mirror", "deletion_vectors": False, "change_data_feed": False,
                              "local_master": True, "wave_bytes": 4_096, "storage": storage_for(path)}
    log_store = {"spark.delta.logStore.s3a.impl": "io.delta.storage.S3DynamoDBLogStore"}
    assert snapshot_wave.choose_writer("auto", path, **common) == "delta-rs"
    assert snapshot_wave.choose_writer("auto", path, **common, spark_conf={"spark.sql.shuffle.partitions": "3"}) \
        == "delta-rs"
    assert snapshot_wave.choose_writer("auto", path, **common, spark_conf=log_store) == "spark"
    with pytest.raises(SnapshotWriterError, match="log store"):
        snapshot_wave.choose_writer("delta-rs", path, **common, spark_conf=log_store)


def test_snapshot_writer_setting_is_validated() -> None:
    base = {"pipeline": "p", "source": {"host": "h", "user": "u", "password": "x", "server_id": 7, "tables": ["a.b"]},
            "sink": {"path": "/tmp/lake"}, "offsets": {"uri": "/tmp/lake/_offsets"}}
    assert parse_config(base).snapshot.writer == "auto"
    assert parse_config({**base, "snapshot": {"writer": "delta-rs"}}).snapshot.writer == "delta-rs"
    with pytest.raises(ConfigError, match="snapshot.writer"):
        parse_config({**base, "snapshot": {"writer": "polars"}})
