"""The delta-rs writer (`batch.writer`, cdc_lib.sink.delta_rs.writer): every kind of change, engines alternating on one
table, checkpoints at Spark's cadence, a kill right after its commit, the tables it refuses, an S3 sink, and a
batch that never starts Spark.

Results are read by delta-rs's scan (an independent reader) and by Spark, and compared with the source.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, QueryBuilder

from cdc_lib.config.model import PipelineConfig
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink import delta_log
from cdc_lib.sink.choice import DeltaRsWriterError
from cdc_lib.sink.delta_rs.writer import storage_options, table_uri
from cdc_lib.sink.spark.session import spark_session
from tests.conftest import CDC_PASSWORD, run_cli, source_rows, sql, write_config_file
from tests.integration.conftest import assert_each_change_applied_once, s3_sink
from tests.integration.delta_commits import assert_equal_to_source, commits_of
from tests.integration.mixed_batches import config_file_with, make_tables, mixed

#: Column names DataFusion must quote: upper case, a double quote, a hyphen, non-ASCII; and a backtick, which
#: Spark's and MySQL's identifiers must double.
ODD_COLUMNS = ('`ID` INT PRIMARY KEY, `Qty"Total` INT, `Über-Größe` VARCHAR(20), `Prix€` DECIMAL(15,4), '
               '`Seen` DATETIME(6), `Tick``s` SMALLINT')


def with_writer(config: PipelineConfig, writer: str) -> PipelineConfig:
    return replace(config, batch=replace(config.batch, writer=writer))  # type: ignore[arg-type]


def test_every_change_kind_on_delta_rs_then_spark_then_delta_rs_again(mariadb, database, make_config) -> None:
    table = f"{database}.odd"
    sql(mariadb, f"CREATE TABLE {table} ({ODD_COLUMNS})",
        f"INSERT INTO {table} SELECT seq, seq * 3, CONCAT('r', seq), seq / 8, '2026-01-02 03:04:05.250000', -seq "
        f"FROM {database}.seq_1_to_40")
    config = make_config([table], batch__writer="delta-rs")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    # Spark's checkpoints come every 10 commits unless the table says otherwise: 4 here, so a few batches cross one.
    spark_session(config.spark).sql(
        f"ALTER TABLE delta.`{pipeline.table_path(table)}` SET TBLPROPERTIES ('delta.checkpointInterval' = '4')"
    )
    steps = [
        # updates, deletes, a key change, a key born and gone: the first batch after the snapshot MERGEs
        ["UPDATE {t} SET `Qty\"Total` = `Qty\"Total` + 7 WHERE `ID` % 3 = 0", "DELETE FROM {t} WHERE `ID` IN (2, 5)",
         "UPDATE {t} SET `ID` = 1001 WHERE `ID` = 7", "INSERT INTO {t} VALUES (900, 1, 'brief', 1.5, NULL, 9)",
         "DELETE FROM {t} WHERE `ID` = 900"],
        # only new keys, past the snapshot: appended without a join
        ["INSERT INTO {t} SELECT 2000 + seq, seq, 'neu', 12.125, '2026-11-24 01:02:03.000007', seq "
         "FROM {db}.seq_1_to_25"],
        # TRUNCATE, then rows: every row not in the batch goes
        ["TRUNCATE TABLE {t}", "INSERT INTO {t} VALUES (3, 33, 'nach', -0.0625, '1999-12-31 23:59:59.999999', -32768), "
         "(4000000, -4, 'groß ✓', 99999999.9999, NULL, 0)"],
        ["INSERT INTO {t} SELECT 5000 + seq, seq, 'x', 0.5, NULL, 32767 FROM {db}.seq_1_to_12",
         "UPDATE {t} SET `Über-Größe` = 'upd' WHERE `ID` = 3"],
        # Spark MERGEs into the table delta-rs wrote, then delta-rs into Spark's
        ["UPDATE {t} SET `Qty\"Total` = -1 WHERE `ID` > 5005", "DELETE FROM {t} WHERE `ID` = 5002",
         "INSERT INTO {t} VALUES (17, 17, 'siebzehn', 1.0625, NULL, 17)"],
        ["INSERT INTO {t} SELECT 6000 + seq, seq, 'y', 2.25, NULL, NULL FROM {db}.seq_1_to_5",
         "UPDATE {t} SET `Seen` = '2030-05-06 07:08:09.123456' WHERE `ID` = 17", "DELETE FROM {t} WHERE `ID` = 5001"],
    ]
    writers = ["delta-rs"] * 4 + ["spark", "delta-rs"]
    for statements, writer in zip(steps, writers, strict=True):
        if writer != pipeline.config.batch.writer:
            pipeline = Pipeline(with_writer(config, writer))
        sql(mariadb, *(text.format(t=table, db=database) for text in statements))
        pipeline.sync(until_caught_up=True)
        assert_equal_to_source(mariadb, pipeline, table)

    commits = commits_of(pipeline, table)
    assert [commit["writer"] for commit in commits[1:]] == writers
    assert [commit["path"] for commit in commits[1:4]] == ["merge", "append", "merge"]
    assert all(commit["engine"].startswith("delta-rs") == (commit["writer"] == "delta-rs") for commit in commits[1:])
    assert_each_change_applied_once(pipeline.config, table)
    # Checkpoints at the table's interval whoever wrote the commit, and binlake's reads start from them.
    log_dir = Path(pipeline.table_path(table)) / "_delta_log"
    checkpoints = sorted(int(path.name[:20]) for path in log_dir.glob("*.checkpoint*.parquet"))
    newest = max(int(path.stem) for path in log_dir.glob("*.json"))
    assert checkpoints == list(range(4, newest + 1, 4)), (checkpoints, newest)
    tail = delta_log.read_log_tail(pipeline.table_path(table), application=pipeline.application(table))
    assert tail is not None and tail.checkpoint_version == checkpoints[-1]
    assert tail.last_binlake_commit is not None and tail.last_binlake_commit.delta_version == newest
    assert tail.last_binlake_commit.txn_version == pipeline.read_state().batch_seq


def test_a_kill_right_after_delta_rs_commits_commits_nothing_twice(mariadb, database, make_config, tmp_path) -> None:
    tables = make_tables(mariadb, database, 3)
    config = make_config(tables, batch__writer="delta-rs")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    config_path = config_file_with(config, tmp_path / "binlake.yaml", apply_threads=3)
    for index, table in enumerate(tables):
        mixed(mariadb, table, index)
    crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": "after_delta_commit"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    landed = [table for table in tables if commits_of(pipeline, table)[-1]["path"] == "merge"]
    assert landed, "no delta-rs commit landed before the kill"

    for index, table in enumerate(tables):
        mixed(mariadb, table, index + 5)
    resumed = run_cli(config_path, "sync", "--until-caught-up")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    for table in tables:
        assert_equal_to_source(mariadb, pipeline, table)
        assert_each_change_applied_once(config, table)
        assert {commit["writer"] for commit in commits_of(pipeline, table)[1:]} == {"delta-rs"}


def test_a_table_with_deletion_vectors_goes_to_spark_and_is_refused_by_forced_delta_rs(
    mariadb, database, make_config
) -> None:
    with_dv, plain = make_tables(mariadb, database, 2)
    config = make_config([with_dv, plain], sink__tables={with_dv: {"deletion_vectors": True}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    mixed(mariadb, with_dv, 1)
    mixed(mariadb, plain, 2)
    (result,) = pipeline.sync(until_caught_up=True)
    assert result.spark_started
    assert [commits_of(pipeline, table)[-1]["writer"] for table in (with_dv, plain)] == ["spark", "delta-rs"]
    assert_equal_to_source(mariadb, pipeline, plain)
    assert sorted(tuple(row) for row in spark_session(config.spark).read.format("delta")
                  .load(pipeline.table_path(with_dv)).collect()) == source_rows(mariadb, with_dv)

    forced = Pipeline(with_writer(config, "delta-rs"))
    before = forced.read_state().tables
    mixed(mariadb, with_dv, 3)
    with pytest.raises(DeltaRsWriterError) as refused:
        forced.sync(until_caught_up=True)
    assert refused.value.table == with_dv and "deletion vectors" in refused.value.cause
    assert "batch.writer to auto" in refused.value.remedy
    after = forced.read_state().tables
    assert {name: state.position for name, state in after.items()} == {
        name: state.position for name, state in before.items()}, "a refused batch moved an offset"


def test_an_s3_sink_round_trip_on_delta_rs(mariadb, database, make_config, s3_endpoint, s3_bucket) -> None:
    (table,) = make_tables(mariadb, database, 1)
    config = make_config([table], sink=s3_sink(s3_endpoint, s3_bucket), offsets={}, batch__writer="delta-rs")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    mixed(mariadb, table, 4)
    pipeline.sync(until_caught_up=True)
    mixed(mariadb, table, 5)
    pipeline.sync(until_caught_up=True)

    path = pipeline.table_path(table)
    options = storage_options(path, pipeline.context.sink)
    assert options is not None and options["AWS_S3_ALLOW_UNSAFE_RENAME"] == "true"
    scanned = QueryBuilder().register("t", DeltaTable(table_uri(path), storage_options=options)).execute(
        "SELECT * FROM t")
    assert sorted(tuple(row.values()) for row in pa.table(scanned.read_all()).to_pylist()) == source_rows(
        mariadb, table)
    tail = delta_log.read_log_tail(path, application=pipeline.application(table), storage=pipeline.context.sink)
    assert tail is not None and tail.last_binlake_commit is not None
    assert tail.last_binlake_commit.metadata["writer"] == "delta-rs"
    assert tail.last_binlake_commit.txn_version == pipeline.read_state().batch_seq
    spark_rows = spark_session(config.spark).read.format("delta").load(path).collect()
    assert sorted(tuple(row) for row in spark_rows) == source_rows(mariadb, table)


PROBE = """
import json, sys, time
from cdc_lib.config.load import load_config
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.spark import session as spark
started = time.monotonic()
results = Pipeline(load_config(sys.argv[1])).sync(until_caught_up=True)
print(json.dumps({
    "seconds": time.monotonic() - started,
    "spark_started": [r.spark_started for r in results],
    "versions": sorted(t.delta_version for r in results for t in r.tables if t.rows_written),
    "sessions": spark.started_sessions,
    "pyspark_session_imported": "pyspark.sql.session" in sys.modules,
}))
"""


def test_a_batch_of_delta_rs_tables_never_starts_spark(mariadb, database, make_config, tmp_path) -> None:
    tables = make_tables(mariadb, database, 2)
    config = make_config(tables)  # batch.writer: auto
    Pipeline(config).snapshot()
    for index, table in enumerate(tables):
        mixed(mariadb, table, index)
    path = write_config_file(config, tmp_path / "binlake.yaml")
    probe = subprocess.run([sys.executable, "-c", PROBE, str(path)], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC"})
    assert probe.returncode == 0, probe.stderr[-2000:]
    report = json.loads(probe.stdout.strip().splitlines()[-1])
    assert report["spark_started"] == [False] and report["sessions"] == 0
    assert report["pyspark_session_imported"] is False
    assert len(report["versions"]) == 2
    mixed(mariadb, tables[0], 7)
    cli = run_cli(path, "sync", "--json")  # the CLI process too: no JVM, and its result says so
    assert cli.returncode == 0, cli.stderr[-2000:]
    (batch,) = json.loads(cli.stdout)
    assert batch["spark_started"] is False and [table["table"] for table in batch["tables"]
                                                if table["rows_written"]] == [tables[0]]
    pipeline = Pipeline(config)
    for table in tables:
        assert_equal_to_source(mariadb, pipeline, table)
        assert commits_of(pipeline, table)[-1]["writer"] == "delta-rs"


def test_wide_decimal_statistics_keep_a_table_on_spark_for_its_snapshot_and_its_batches(
    mariadb, database, make_config
) -> None:
    # delta-rs 1.6.6 writes a DECIMAL(20,0) (BIGINT UNSIGNED) min/max clamped to 2^63 - 1: a MERGE pruned by key
    # range then skips the file holding 18446744073709551610 and inserts it a second time (found by the fuzzer).
    wide, (plain,) = f"{database}.wide_keys", make_tables(mariadb, database, 1)
    sql(mariadb, f"CREATE TABLE {wide} (id BIGINT UNSIGNED PRIMARY KEY, qty INT)",
        f"INSERT INTO {wide} VALUES (7, 1), (18446744073709551610, 2), (18446744073709551615, 3)")
    config = make_config([wide, plain])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    engines = {table: [commit["engine"] for commit in commits_of(pipeline, table)] for table in (wide, plain)}
    assert all(engine.startswith("Apache-Spark") for engine in engines[wide]), engines
    assert all(engine.startswith("delta-rs") for engine in engines[plain]), engines

    sql(mariadb, f"UPDATE {wide} SET qty = qty + 40 WHERE id > 18446744073709551600",
        f"INSERT INTO {wide} VALUES (18446744073709551612, 4)")
    mixed(mariadb, plain, 1)
    pipeline.sync(until_caught_up=True)
    assert [commits_of(pipeline, table)[-1]["writer"] for table in (wide, plain)] == ["spark", "delta-rs"]
    assert_equal_to_source(mariadb, pipeline, wide)
    assert_equal_to_source(mariadb, pipeline, plain)

    sql(mariadb, f"UPDATE {wide} SET qty = qty + 1 WHERE id = 18446744073709551615")
    with pytest.raises(DeltaRsWriterError) as refused:
        Pipeline(with_writer(config, "delta-rs")).sync(until_caught_up=True)
    assert refused.value.table == wide and "statistics" in refused.value.cause


def test_a_kept_delta_rs_table_sees_a_spark_commit_made_between_two_batches(mariadb, database, make_config) -> None:
    from cdc_lib.sink.delta_rs.writer import LOADED_TABLES, table_uri

    (table,) = make_tables(mariadb, database, 1)
    pipeline = Pipeline(make_config([table], batch__writer="delta-rs"))
    pipeline.snapshot()
    path = pipeline.table_path(table)
    mixed(mariadb, table, 1)
    pipeline.sync(until_caught_up=True)
    kept = LOADED_TABLES.held(table_uri(path))
    assert kept is not None, "the batch kept no DeltaTable"
    # Spark (another engine, as a second process would be) rewrites every file of the table between the batches,
    # rows unchanged: a kept state that missed the commit would MERGE into removed files (rows twice, or a
    # conflict).
    spark_session(pipeline.config.spark).sql(f"UPDATE delta.`{path}` SET qty = qty")
    rewritten = DeltaTable(path).version()
    assert rewritten == kept.version() + 1 and _commit_operation(path, rewritten) == "UPDATE"
    mixed(mariadb, table, 2)
    pipeline.sync(until_caught_up=True)
    assert LOADED_TABLES.held(table_uri(path)) is kept, "the second batch did not reuse the kept table"
    assert kept.version() == rewritten + 1 == DeltaTable(path).version()
    assert_equal_to_source(mariadb, pipeline, table)
    # A batch that only deletes is a DELETE (no join), on the kept table too.
    sql(mariadb, f"DELETE FROM {table} WHERE id BETWEEN 17 AND 23 OR id = 20005")
    pipeline.sync(until_caught_up=True)
    assert _commit_operation(path, DeltaTable(path).version()) == "DELETE"
    assert LOADED_TABLES.held(table_uri(path)) is kept
    assert_equal_to_source(mariadb, pipeline, table)
    assert_each_change_applied_once(pipeline.config, table)


def _commit_operation(path: str, version: int) -> str:
    lines = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    return str(next(json.loads(line)["commitInfo"]["operation"] for line in lines if '"commitInfo"' in line))
