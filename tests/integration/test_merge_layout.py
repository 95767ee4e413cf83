"""The files a delta-rs batch rewrites (cdc_lib.file_layout, cdc_lib.key_rewrite): a snapshot in bounded files
sorted by key, a batch that replaces only the files its keys are in (the others stay, by path), new keys in files
of their own, the key types and batches that go to delta-rs's MERGE instead, and a scratch log left by a crash.

The files are made small (`file_layout.TARGET_FILE_BYTES`) so that a few thousand rows make several.
Results are read by delta-rs's scan and by Spark, and compared with the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_lib import delta_log, file_layout, key_rewrite
from cdc_lib.pipeline import Pipeline
from tests.conftest import sql
from tests.integration.test_delta_rs_writes import assert_equal_to_source, commits_of

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
    # The new keys sort after every key the table had: their rows are in a file whose range starts above them.
    assert any(low >= 9001 for low, _ in new), new
    # The scratch table's log is gone: only the files the commit references remain of it.
    assert not list((Path(pipeline.table_path(table)) / key_rewrite.SCRATCH_FOLDER / "_delta_log").glob("*.json"))
    assert commits_of(pipeline, table)[-1]["writer"] == "delta-rs"


def test_keys_past_two_to_the_63_composite_and_string_keys_and_truncate(mariadb, database, make_config,
                                                                       small_files) -> None:
    unsigned, composite, text = f"{database}.unsigned_key", f"{database}.pair_key", f"{database}.text_key"
    top = 2**64 - 1
    sql(mariadb,
        f"CREATE TABLE {unsigned} (id BIGINT UNSIGNED PRIMARY KEY, qty INT, label VARCHAR(60))",
        f"INSERT INTO {unsigned} SELECT seq, seq, REPEAT('u', seq % 41) FROM {database}.seq_1_to_2500",
        f"INSERT INTO {unsigned} SELECT {2**63} + seq, seq, REPEAT('v', seq % 43) FROM {database}.seq_1_to_2500",
        f"CREATE TABLE {composite} (a INT, b INT, label VARCHAR(60), PRIMARY KEY (a, b))",
        f"INSERT INTO {composite} SELECT seq DIV 4, seq % 4, REPEAT('c', seq % 47) FROM {database}.seq_1_to_5000",
        f"CREATE TABLE {text} (code VARCHAR(20) PRIMARY KEY, qty INT, label VARCHAR(60))",
        f"INSERT INTO {text} SELECT CONCAT('k', LPAD(seq, 6, '0')), seq, REPEAT('t', seq % 53) "
        f"FROM {database}.seq_1_to_5000")
    tables = [unsigned, composite, text]
    pipeline = Pipeline(make_config(tables, batch__writer="delta-rs"))
    pipeline.snapshot()
    assert len(data_files(pipeline, unsigned)) >= 3
    sql(mariadb, "START TRANSACTION",
        f"UPDATE {unsigned} SET qty = -1 WHERE id IN (7, 2400, {2**63 + 3}, {2**63 + 2499})",
        f"DELETE FROM {unsigned} WHERE id = {2**63 + 1200}",
        f"INSERT INTO {unsigned} VALUES ({top}, 5, 'top'), ({top - 1}, 6, 'below top')",
        f"UPDATE {composite} SET label = 'pair' WHERE a IN (3, 600, 1249)",
        f"DELETE FROM {composite} WHERE a = 900 AND b = 2",
        f"INSERT INTO {composite} VALUES (1250, 0, 'new pair')",
        f"UPDATE {text} SET qty = qty + 1000 WHERE code IN ('k000012', 'k004321')",
        f"DELETE FROM {text} WHERE code = 'k002222'", "COMMIT")
    pipeline.sync(until_caught_up=True)
    for table in tables:
        assert_equal_to_source(mariadb, pipeline, table)
    # The unsigned key is rewritten by key (only the files its keys are in); the others go to the MERGE.
    assert last_metrics(pipeline, unsigned)["numTargetFilesRemoved"] < len(data_files(pipeline, unsigned))
    assert commits_of(pipeline, composite)[-1]["operation"] == "MERGE"
    assert commits_of(pipeline, text)[-1]["operation"] == "MERGE"

    # A TRUNCATE's batch deletes every row it does not hold: the MERGE, on a table the key rewrite wrote.
    sql(mariadb, f"TRUNCATE TABLE {unsigned}", f"INSERT INTO {unsigned} VALUES ({2**63 + 17}, 17, 'after')")
    pipeline.sync(until_caught_up=True)
    assert_equal_to_source(mariadb, pipeline, unsigned)
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
