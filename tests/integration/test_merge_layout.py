"""The files a delta-rs batch rewrites (cdc_lib.sink.delta_rs.file_layout, cdc_lib.sink.delta_rs.key_rewrite): a
snapshot in bounded files
sorted by key, a batch that replaces only the files its keys are in (the others stay, by path), new keys in files
of their own, the key types and batches that go to delta-rs's MERGE instead, and a scratch log left by a crash.

The files are made small (`file_layout.TARGET_FILE_BYTES`) so that a few thousand rows make several.
Results are read by delta-rs's scan and by Spark, and compared with the source.
"""

from __future__ import annotations

import json
import signal
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink import delta_log
from cdc_lib.sink.delta_rs import file_layout, key_rewrite
from cdc_lib.sink.spark.session import spark_session
from tests.conftest import run_cli, scan_rows, source_rows, sql
from tests.integration.conftest import assert_each_change_applied_once
from tests.integration.delta_commits import assert_equal_to_source, commits_of
from tests.integration.mixed_batches import config_file_with

#: Small enough that the tables below snapshot into several files (delta-rs cuts a file past the size).
SMALL_FILE_BYTES = 12 * 1024


@pytest.fixture
def small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_layout, "TARGET_FILE_BYTES", SMALL_FILE_BYTES)


def data_files(pipeline: Pipeline, table: str, key: str = "id") -> dict[str, tuple[Any, Any]]:
    """The table's data files as the log names them, with the key's min and max statistics."""
    actions = pa.table(DeltaTable(pipeline.table_path(table)).get_add_actions(flatten=True)).to_pydict()
    return {path: (low, high) for path, low, high in
            zip(actions["path"], actions[f"min.{key}"], actions[f"max.{key}"], strict=True)}


def plain(value: Any) -> Any:
    """A scanned value as pymysql gives the source's: a DECIMAL(20,0) key as int, a TIMESTAMP naive in UTC."""
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def assert_same_rows(mariadb: Any, pipeline: Pipeline, table: str) -> None:
    """The table as delta-rs scans it (values made plain) and as Spark counts it is the source's."""
    delta = sorted(tuple(plain(value) for value in row) for row in scan_rows(pipeline.table_path(table)))
    assert delta == source_rows(mariadb, table), f"{table}: Delta (delta-rs scan) differs from the source"
    frame = spark_session(pipeline.config.spark).read.format("delta").load(pipeline.table_path(table))
    assert frame.count() == len(delta), "Spark reads another table than delta-rs"


def last_metrics(pipeline: Pipeline, table: str) -> dict[str, int]:
    path = pipeline.table_path(table)
    version = delta_log.newest_version(path)
    assert version is not None
    return delta_log.commit_metrics(path, version)


def test_a_batch_replaces_only_the_files_its_keys_are_in(mariadb, database, make_config, small_files) -> None:
    table = f"{database}.clustered"
    sql(mariadb, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, qty INT NOT NULL, label VARCHAR(60))",
        f"INSERT INTO {table} SELECT seq, seq * 3, CONCAT('row ', seq, REPEAT('x', seq % 37)) "
        f"FROM {database}.seq_1_to_6000")
    pipeline = Pipeline(make_config([table], batch__writer="delta-rs"))
    pipeline.snapshot()
    before = data_files(pipeline, table)
    ranges = sorted(before.values())
    assert len(ranges) >= 4, f"the snapshot is not in bounded files: {ranges}"
    assert all(high < next_low for (_, high), (next_low, _) in zip(ranges, ranges[1:], strict=False)), ranges
    first_low, first_high = ranges[0]
    last_low, last_high = ranges[-1]
    # One transaction: updates in the first file, a delete in the last, new keys above the table.
    sql(mariadb, "START TRANSACTION",
        f"UPDATE {table} SET qty = -qty, label = 'upd ✓' WHERE id IN ({first_low + 3}, {first_high - 1})",
        f"DELETE FROM {table} WHERE id = {last_high - 2}",
        f"INSERT INTO {table} SELECT 9000 + seq, seq, 'neu' FROM {database}.seq_1_to_40", "COMMIT")
    pipeline.sync(until_caught_up=True)
    assert_equal_to_source(mariadb, pipeline, table)

    after = data_files(pipeline, table)
    untouched = {path for path, (low, _) in before.items() if low not in (first_low, last_low)}
    assert untouched and untouched <= set(after), "a file holding none of the batch's keys was rewritten"
    metrics = last_metrics(pipeline, table)
    assert metrics["numTargetFilesRemoved"] == 2
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsDeleted"], metrics["numTargetRowsInserted"]) \
        == (2, 1, 40)
    new = [span for path, span in after.items() if path not in before]
    assert all(path.startswith(f"{key_rewrite.SCRATCH_FOLDER}/") for path in set(after) - set(before))
    # Written sorted by key: no new file's key range overlaps a file the batch left (nor another new file).
    kept = [before[path] for path in untouched]
    assert not [(span, other) for span in new for other in kept if span[0] <= other[1] and other[0] <= span[1]]
    assert max(high for _, high in new) == 9040
    # The scratch table's log is gone: only the files the commit references remain of it.
    assert not list((Path(pipeline.table_path(table)) / key_rewrite.SCRATCH_FOLDER / "_delta_log").glob("*.json"))
    assert commits_of(pipeline, table)[-1]["writer"] == "delta-rs"


def test_keys_past_two_to_the_63_composite_and_string_keys_and_truncate(mariadb, database, make_config,
                                                                       small_files) -> None:
    unsigned, composite, text = f"{database}.unsigned_key", f"{database}.pair_key", f"{database}.text_key"
    top = 2**64 - 1
    sql(mariadb,
        f"CREATE TABLE {unsigned} (id BIGINT UNSIGNED PRIMARY KEY, qty INT, seen DATETIME(6), at TIMESTAMP(6) NULL, "
        "label VARCHAR(60))",
        f"INSERT INTO {unsigned} SELECT seq, seq, '1001-02-03 04:05:06.000007', '2026-11-24 01:02:03.250000', "
        f"REPEAT('u', seq % 41) FROM {database}.seq_1_to_2500",
        f"INSERT INTO {unsigned} SELECT {2**63} + seq, seq, '9999-12-31 23:59:59.999999', NULL, REPEAT('v', seq % 43) "
        f"FROM {database}.seq_1_to_2500",
        f"CREATE TABLE {composite} (a INT, b INT, label VARCHAR(60), PRIMARY KEY (a, b))",
        f"INSERT INTO {composite} SELECT seq DIV 4, seq % 4, MD5(seq) FROM {database}.seq_1_to_5000",
        f"CREATE TABLE {text} (code VARCHAR(20) PRIMARY KEY, qty INT, label VARCHAR(60))",
        f"INSERT INTO {text} SELECT CONCAT('k', LPAD(seq, 6, '0')), seq, MD5(seq) "
        f"FROM {database}.seq_1_to_5000")
    tables = [unsigned, composite, text]
    config = make_config(tables, batch__writer="auto")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    # delta-rs keeps no exact statistics of a DECIMAL(20,0) (the unsigned key): Spark snapshots the table; without
    # statistics of the key, delta-rs writes it, and every file is a candidate whose keys are read.
    spark_session(config.spark).sql(
        f"ALTER TABLE delta.`{pipeline.table_path(unsigned)}` SET TBLPROPERTIES "
        "('delta.dataSkippingStatsColumns' = 'qty,seen,at,label')"
    )
    assert len(data_files(pipeline, composite, key="a")) >= 3
    sql(mariadb, "START TRANSACTION",
        f"UPDATE {unsigned} SET qty = -1, at = '2038-01-19 03:14:07.000001' "
        f"WHERE id IN (7, 2400, {2**63 + 3}, {2**63 + 2499})",
        f"DELETE FROM {unsigned} WHERE id = {2**63 + 1200}",
        f"INSERT INTO {unsigned} VALUES ({top}, 5, '1000-01-01 00:00:00', NULL, 'top'), "
        f"({top - 1}, 6, NULL, '1970-01-01 00:00:01', 'below top')",
        f"UPDATE {composite} SET label = 'pair' WHERE a IN (3, 600, 1249)",
        f"DELETE FROM {composite} WHERE a = 900 AND b = 2",
        f"INSERT INTO {composite} VALUES (1251, 3, 'new pair')",
        f"UPDATE {text} SET qty = qty + 1000 WHERE code IN ('k000012', 'k004321')",
        f"DELETE FROM {text} WHERE code = 'k002222'", "COMMIT")
    pipeline.sync(until_caught_up=True)
    assert_same_rows(mariadb, pipeline, unsigned)
    for table in (composite, text):
        assert_equal_to_source(mariadb, pipeline, table)
    # The unsigned key is rewritten by key (read from Spark's files); the composite and string keys are MERGEd.
    assert [commits_of(pipeline, table)[-1]["operation"] for table in tables] == ["WRITE", "MERGE", "MERGE"]
    assert all(commits_of(pipeline, table)[-1]["writer"] == "delta-rs" for table in tables)
    # The composite key's MERGE is pruned by its leading column's ranges: it rewrites files, not the table.
    assert last_metrics(pipeline, composite)["numTargetFilesRemoved"] < len(data_files(pipeline, composite, key="a"))

    # A TRUNCATE's batch deletes every row it does not hold: the MERGE, on a table the key rewrite wrote.
    sql(mariadb, f"TRUNCATE TABLE {unsigned}",
        f"INSERT INTO {unsigned} VALUES ({2**63 + 17}, 17, NULL, NULL, 'after')")
    pipeline.sync(until_caught_up=True)
    assert_same_rows(mariadb, pipeline, unsigned)
    assert commits_of(pipeline, unsigned)[-1]["operation"] == "MERGE"


def test_a_scratch_log_left_by_a_crash_does_not_leak_into_the_next_batch(mariadb, database, make_config,
                                                                         small_files) -> None:
    table = f"{database}.scratch"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT, label VARCHAR(60))",
        f"INSERT INTO {table} SELECT seq, seq, REPEAT('s', seq % 31) FROM {database}.seq_1_to_3000")
    pipeline = Pipeline(make_config([table], batch__writer="delta-rs"))
    pipeline.snapshot()
    # What a run that died between writing its files and committing them leaves: a scratch table of its own rows.
    scratch = f"{pipeline.table_path(table)}/{key_rewrite.SCRATCH_FOLDER}"
    stray = pa.table({"id": pa.array([2], pa.int32()), "qty": pa.array([-99], pa.int32()),
                      "label": pa.array(["stray"])})
    write_deltalake(scratch, stray)
    write_deltalake(scratch, stray, mode="append")
    sql(mariadb, f"UPDATE {table} SET qty = qty * 2 WHERE id IN (2, 2999)",
        f"INSERT INTO {table} VALUES (5000, 1, 'new')")
    pipeline.sync(until_caught_up=True)
    assert_equal_to_source(mariadb, pipeline, table)
    assert not list(Path(scratch, "_delta_log").glob("*.json"))


def test_appends_merge_the_small_files_they_leave_in_their_own_commit(mariadb, database, make_config,
                                                                       small_files) -> None:
    table = f"{database}.appended"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT, label VARCHAR(60))",
        f"INSERT INTO {table} SELECT seq, seq, MD5(seq) FROM {database}.seq_1_to_2000")
    pipeline = Pipeline(make_config([table], batch__writer="delta-rs"))
    pipeline.snapshot()
    snapshot_files = len(data_files(pipeline, table))
    for round_number in range(9):
        first = 3000 + 40 * round_number
        sql(mariadb, f"INSERT INTO {table} SELECT {first} + seq, -seq, 'n{round_number}' FROM {database}.seq_1_to_40")
        pipeline.sync(until_caught_up=True)
    assert_equal_to_source(mariadb, pipeline, table)

    log = Path(pipeline.table_path(table)) / "_delta_log"
    actions = [[json.loads(line) for line in path.read_text().split("\n") if line.strip()]
               for path in sorted(log.glob("*.json"))]
    compactions = [commit for commit in actions if any("remove" in action for action in commit)]
    assert compactions, "no append merged the earlier appends' small files"
    for commit in compactions:
        # The merged files move without a data change; the batch's own rows are the commit's only new data.
        assert all(not action["remove"]["dataChange"] for action in commit if "remove" in action)
        added = [action["add"] for action in commit if "add" in action]
        assert any(add["dataChange"] for add in added) and any(not add["dataChange"] for add in added)
        assert sum(json.loads(add["stats"])["numRecords"] for add in added if add["dataChange"]) == 40
        assert any("txn" in action for action in commit)
    # Every batch past the snapshot's window stayed on the append path (the compaction kept its applied_through).
    batches = commits_of(pipeline, table)[1:]
    assert [commit["path"] for commit in batches[1:]] == ["append"] * (len(batches) - 1)
    assert len(data_files(pipeline, table)) < snapshot_files + 9
    tail = delta_log.read_log_tail(pipeline.table_path(table), application=pipeline.application(table))
    assert tail is not None and tail.last_binlake_commit is not None
    assert tail.last_binlake_commit.txn_version == pipeline.read_state().batch_seq


def test_a_kill_right_after_a_compacting_append_commits_nothing_twice(mariadb, database, make_config, tmp_path,
                                                                       small_files) -> None:
    table = f"{database}.killed"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT, label VARCHAR(60))",
        f"INSERT INTO {table} SELECT seq, seq, MD5(seq) FROM {database}.seq_1_to_1500")
    config = make_config([table], batch__writer="delta-rs")
    pipeline = Pipeline(config)
    pipeline.snapshot()  # the table's delta.targetFileSize is the small one: the CLI below follows it

    def insert_round(round_number: int) -> None:
        sql(mariadb, f"INSERT INTO {table} SELECT {4000 + 30 * round_number} + seq, seq, 'k{round_number}' "
            f"FROM {database}.seq_1_to_30")

    # Appends (past the snapshot's window) until the next one is due to merge the small files they left.
    round_number = 0
    while round_number < 2 or len(key_rewrite.small_files_at_top(
            DeltaTable(pipeline.table_path(table)), "id")) < key_rewrite.COMPACT_MIN_FILES:
        assert round_number < 12, "the appends left no small files to merge"
        insert_round(round_number)
        pipeline.sync(until_caught_up=True)
        round_number += 1
    removes_before = removes(pipeline, table)
    insert_round(round_number)
    crashed = run_cli(config_file_with(config, tmp_path / "binlake.yaml"), "sync",
                      env={"BINLAKE_FAILPOINT": "after_delta_commit"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    assert removes(pipeline, table) > removes_before, "the killed batch did not merge small files"

    insert_round(round_number + 1)
    resumed = run_cli(config_file_with(config, tmp_path / "binlake.yaml"), "sync", "--until-caught-up")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert_equal_to_source(mariadb, pipeline, table)
    assert_each_change_applied_once(config, table)


def removes(pipeline: Pipeline, table: str) -> int:
    """How many remove actions the table's log holds (files replaced by a rewrite or a compaction)."""
    log = Path(pipeline.table_path(table)) / "_delta_log"
    return sum(line.startswith('{"remove"') for path in log.glob("*.json") for line in path.read_text().split("\n"))


def test_a_re_snapshot_keeps_a_file_size_the_table_was_given_and_refuses_one_that_is_no_size(
    mariadb, database, make_config, small_files
) -> None:
    """A person may give a table larger files (`delta.targetFileSize`, as Spark and Delta write sizes): binlake's
    re-snapshot writes by it rather than putting its default back; a value that is no size stops the snapshot."""
    table = f"{database}.sized"
    sql(mariadb, f"CREATE TABLE {table} (id BIGINT PRIMARY KEY, label VARCHAR(60))",
        f"INSERT INTO {table} SELECT seq, CONCAT('row ', seq, REPEAT('y', seq % 41)) FROM {database}.seq_1_to_6000")
    pipeline = Pipeline(make_config([table], batch__writer="delta-rs"))
    pipeline.snapshot()
    small = len(data_files(pipeline, table))
    path = pipeline.table_path(table)
    DeltaTable(path).alter.set_table_properties({file_layout.TARGET_FILE_SIZE_PROPERTY: "48kb"})
    pipeline.snapshot([table], restart=True)
    settings = delta_log.table_detail(path)
    assert settings is not None and settings.properties[file_layout.TARGET_FILE_SIZE_PROPERTY] == "48kb"
    larger = len(data_files(pipeline, table))
    assert larger < small, f"the re-snapshot did not write by the table's 48kb: {small} files, then {larger}"
    assert_same_rows(mariadb, pipeline, table)

    DeltaTable(path).alter.set_table_properties({file_layout.TARGET_FILE_SIZE_PROPERTY: "huge"})
    before = delta_log.newest_version(path)
    with pytest.raises(file_layout.FileSizeError) as refused:
        pipeline.snapshot([table], restart=True)
    assert refused.value.table == table and "huge" in refused.value.cause
    assert delta_log.newest_version(path) == before, "a refused snapshot wrote to the table"
