"""Chunked, resumable snapshots: resume after SIGKILL, key walks, concurrent writes, the sync alongside, the lease."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import socket
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.state.snapshot_documents import (
    SnapshotInProgressError,
    TableLease,
    document_name,
    read_document,
)
from tests.conftest import run_cli, scan_rows, source_rows, sql, write_config_file
from tests.integration.conftest import wait_for
from tests.integration.snapshot_runs import finished_record, make_items, popen_cli, wave_commits

SEED = int(os.environ.get("BINLAKE_TEST_SEED", "20261123"))


def lake_rows(config: Any, table: str) -> list[tuple[Any, ...]]:
    """The Delta table as delta-rs reads it (not Spark)."""
    return sorted(scan_rows(Pipeline(config).table_path(table)))


def commit_timestamps(config: Any, table: str) -> dict[int, int]:
    log_dir = Path(Pipeline(config).table_path(table)) / "_delta_log"
    stamps = {}
    for path in sorted(log_dir.glob("*.json")):
        for line in path.read_text().split("\n"):
            if '"commitInfo"' in line:
                stamps[int(path.stem)] = json.loads(line)["commitInfo"]["timestamp"]
    return stamps


def test_resume_after_sigkill_at_random_chunk_points(mariadb, database, make_config, tmp_path) -> None:
    table = make_items(mariadb, database, rows=600)
    config = make_config([table], snapshot__rows_per_chunk=50, snapshot__chunks_per_wave=2)
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    chooser = random.Random(SEED)
    # 12 chunks in 6 waves: killed before one wave's commit (its chunks are read again), then after a later one's
    # commit and before the document recorded it (adopted from the Delta log, not read again).
    before_at = chooser.randint(2, 4)
    after_at = chooser.randint(1, 2)
    killed = run_cli(config_path, "snapshot", env={"BINLAKE_FAILPOINT": "before_snapshot_wave_commit",
                                                   "BINLAKE_FAILPOINT_AT": str(before_at)})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    sql(mariadb, f"UPDATE {table} SET price = price + 0.75 WHERE id % 4 = 1",
        f"DELETE FROM {table} WHERE id BETWEEN 100 AND 130", f"INSERT INTO {table} VALUES (5000, 3.5, 'late')")
    killed = run_cli(config_path, "snapshot", env={"BINLAKE_FAILPOINT": "after_snapshot_wave_commit",
                                                   "BINLAKE_FAILPOINT_AT": str(after_at)})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    pipeline = Pipeline(config)
    assert table not in pipeline.read_state().tables, "nothing installed before the snapshot completes"

    (result,) = pipeline.snapshot()
    assert result.installed and result.chunks == 12
    assert result.chunks_resumed == 2 * (before_at - 1 + after_at), "resumed at the first unfinished chunk"
    record = finished_record(config, table)
    # Re-read: at most the wave in flight at each kill (the one killed after its commit was adopted).
    assert 12 <= record["chunks_read"] <= 12 + 2, record["chunks_read"]
    assert [wave["number"] for wave in record["waves"]] == [1, 2, 3, 4, 5, 6]
    assert sum(1 for wave in record["waves"] if wave["adopted"]) == 1
    waves = wave_commits(config, table)
    assert [commit["wave"] for commit in waves] == [1, 2, 3, 4, 5, 6], "each wave committed once"

    sql(mariadb, f"UPDATE {table} SET label = 'after' WHERE id < 50")
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].consistent
    assert lake_rows(config, table) == source_rows(mariadb, table)


def test_walked_plan_of_text_and_composite_keys(mariadb, database, make_config) -> None:
    sql(
        mariadb,
        f"CREATE TABLE {database}.words (k VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT)",
        # Mixed case: the collation's order ('apple' < 'Banana') is not the binary one ('Banana' < 'apple').
        f"INSERT INTO {database}.words SELECT CONCAT(IF(seq % 3 = 0, 'W', 'w'), LPAD(seq * 37 % 1000, 3, '0'), "
        f"IF(seq % 2 = 0, 'a', 'B')), seq FROM {database}.seq_1_to_150",
        f"CREATE TABLE {database}.pairs (a INT, b VARCHAR(8) COLLATE utf8mb4_general_ci, v DECIMAL(6,2), "
        "PRIMARY KEY (a, b))",
        f"INSERT INTO {database}.pairs SELECT seq % 7, CONCAT(IF(seq % 2 = 0, 'x', 'X'), seq), seq + 0.25 "
        f"FROM {database}.seq_1_to_130",
    )
    tables = [f"{database}.words", f"{database}.pairs"]
    config = make_config(tables, snapshot__rows_per_chunk=16, snapshot__chunks_per_wave=3)
    results = Pipeline(config).snapshot()
    for result, table in zip(results, tables, strict=True):
        record = finished_record(config, table)
        assert record["plan_method"] == "walk" and len(record["plan"]) >= 8, record["plan"]
        assert "OFFSET" not in " ".join(record["plan"])
        assert result.rows == len(source_rows(mariadb, table)), "every row once"
        assert lake_rows(config, table) == source_rows(mariadb, table)


def test_concurrent_writes_during_a_chunked_snapshot_converge(mariadb, database, make_config) -> None:
    table = make_items(mariadb, database, rows=400)
    config = make_config([table], snapshot__rows_per_chunk=40, snapshot__chunks_per_wave=1)
    stop = threading.Event()
    chooser = random.Random(SEED)

    def write() -> None:
        round_number = 0
        while not stop.is_set():
            round_number += 1
            low = chooser.randint(-4, 1100)
            sql(
                mariadb,
                "START TRANSACTION",
                f"INSERT INTO {table} VALUES ({20_000 + round_number}, {round_number}.25, 'new') ",
                f"UPDATE {table} SET price = price + 1.5, label = 'upd' WHERE id BETWEEN {low} AND {low + 30}",
                f"DELETE FROM {table} WHERE id = {chooser.randint(-4, 1200)}",
                "COMMIT",
                # A key moves from an early chunk to a late one (and so across the chunks being read).
                f"UPDATE IGNORE {table} SET id = id + 1500 WHERE id = {chooser.randint(-4, 300)}",
            )

    writer = threading.Thread(target=write)
    writer.start()
    try:
        (result,) = Pipeline(config).snapshot()
    finally:
        stop.set()
        writer.join()
    assert result.chunks >= 8
    pipeline = Pipeline(config)
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].consistent
    assert lake_rows(config, table) == source_rows(mariadb, table)


def test_other_tables_commit_while_a_snapshot_is_in_flight(mariadb, database, make_config, tmp_path) -> None:
    big = make_items(mariadb, database, rows=300, name="big")
    other = make_items(mariadb, database, rows=20, name="other")
    config = make_config([big, other], snapshot__rows_per_chunk=50, snapshot__chunks_per_wave=2)
    pipeline = Pipeline(config)
    pipeline.snapshot([other])
    pause = tmp_path / "paused"
    process = popen_cli(write_config_file(config, tmp_path / "binlake.yaml"), "snapshot", "--table", big, env={
        "BINLAKE_FAILPOINT_PAUSE": "after_snapshot_wave_recorded", "BINLAKE_FAILPOINT_AT": "1",
        "BINLAKE_FAILPOINT_PAUSE_FILE": str(pause),
    })
    try:
        wait_for(lambda: pause.exists() or process.poll() is not None, timeout=240, what="the first wave")
        assert pause.exists(), process.communicate()[1][-2000:]
        sql(mariadb, f"UPDATE {other} SET price = 99.75 WHERE id < 10", f"UPDATE {big} SET price = 1.25 WHERE id < 9")
        (batch,) = pipeline.sync()
        document, _ = read_document(pipeline.store, config.pipeline, big)
        assert document is not None and document.status == "running" and document.chunks_done == 2
        assert big in batch.snapshots_in_flight and big not in batch.skipped_tables
        assert [table.table for table in batch.tables] == [other], "the snapshotting table waits"
        assert big not in pipeline.read_state().tables, "a half-done snapshot is not adopted"
        other_version = pipeline.read_state().tables[other].delta_version
        assert other_version is not None
        other_committed = commit_timestamps(config, other)[other_version]
    finally:
        pause.unlink(missing_ok=True)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-2000:]
    waves = wave_commits(config, big)
    # Interleaved: the other table's MERGE committed between the snapshot's first and last wave commits.
    assert waves[0]["timestamp"] <= other_committed <= waves[-1]["timestamp"], (waves, other_committed)
    pipeline.sync(until_caught_up=True)
    state = pipeline.read_state()
    assert state.tables[big].consistent and state.tables[big].snapshot_low.to_json() == waves[0]["snapshot_low"]
    for table in (big, other):
        assert lake_rows(config, table) == source_rows(mariadb, table)


def test_table_lease_refuses_a_second_snapshot_and_is_taken_over_when_expired(mariadb, database, make_config,
                                                                                tmp_path) -> None:
    table = make_items(mariadb, database, rows=120)
    config = make_config([table], snapshot__rows_per_chunk=40, snapshot__chunks_per_wave=1)
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    killed = run_cli(config_path, "snapshot", env={"BINLAKE_FAILPOINT": "before_snapshot_wave_commit",
                                                   "BINLAKE_FAILPOINT_AT": "2"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    pipeline = Pipeline(config)
    store = pipeline.store
    raw, token = store.read_document(config.pipeline, document_name(table))
    assert raw is not None
    # A live holder elsewhere (another host: its PID cannot be checked) until an hour from now.
    alive = TableLease(owner="other-runner", host="elsewhere", pid=1,
                       expires_at=(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat())
    token = store.write_document(config.pipeline, document_name(table), {**raw, "lease": alive.__dict__}, token)
    with pytest.raises(SnapshotInProgressError, match="being snapshotted"):
        pipeline.snapshot()
    expired = TableLease(owner="other-runner", host="elsewhere", pid=1,
                         expires_at=(dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)).isoformat())
    store.write_document(config.pipeline, document_name(table), {**raw, "lease": expired.__dict__}, token)
    (result,) = pipeline.snapshot()
    assert result.chunks_resumed == 1 and result.installed
    assert lake_rows(config, table) == source_rows(mariadb, table)


def test_a_lost_table_lease_stops_before_the_next_wave_commit(mariadb, database, make_config, tmp_path) -> None:
    table = make_items(mariadb, database, rows=120)
    config = make_config([table], snapshot__rows_per_chunk=40, snapshot__chunks_per_wave=1)
    pause = tmp_path / "paused"
    process = popen_cli(write_config_file(config, tmp_path / "binlake.yaml"), "snapshot", env={
        "BINLAKE_FAILPOINT_PAUSE": "before_snapshot_wave_commit", "BINLAKE_FAILPOINT_AT": "2",
        "BINLAKE_FAILPOINT_PAUSE_FILE": str(pause),
    })
    store = Pipeline(config).store
    try:
        wait_for(lambda: pause.exists() or process.poll() is not None, timeout=240, what="the second wave")
        assert pause.exists(), process.communicate()[1][-2000:]
        raw, token = store.read_document(config.pipeline, document_name(table))
        assert raw is not None
        taker = TableLease(owner="taker", host=socket.gethostname(), pid=os.getpid(),
                           expires_at=(dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).isoformat())
        store.write_document(config.pipeline, document_name(table), {**raw, "lease": taker.__dict__}, token)
    finally:
        pause.unlink(missing_ok=True)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode != 0 and "lease of the snapshot" in stderr and "was lost" in stderr, stderr[-2000:]
    assert [commit["wave"] for commit in wave_commits(config, table)] == [1], "nothing written after the loss"
    raw, _ = store.read_document(config.pipeline, document_name(table))
    assert raw is not None and raw["lease"]["owner"] == "taker" and len(raw["waves"]) == 1


def test_a_ddl_during_a_wave_stops_the_snapshot_uninstalled_and_the_next_run_starts_over(
    mariadb, database, make_config, tmp_path
) -> None:
    """The last wave is read after an ALTER widened a column: its rows went through the old column's type, so the
    snapshot must not be installed; the next run starts over with the new schema."""
    table = make_items(mariadb, database, rows=80)
    config = make_config([table], snapshot__rows_per_chunk=40, snapshot__chunks_per_wave=1)
    path = write_config_file(config, tmp_path / "binlake.yaml")
    pause = tmp_path / "paused"
    process = popen_cli(path, "snapshot", env={
        "BINLAKE_FAILPOINT_PAUSE": "before_snapshot_wave_commit", "BINLAKE_FAILPOINT_AT": "2",
        "BINLAKE_FAILPOINT_PAUSE_FILE": str(pause),
    })
    try:
        wait_for(lambda: pause.exists() or process.poll() is not None, timeout=240, what="the second wave")
        assert pause.exists(), process.communicate()[1][-2000:]
        sql(mariadb, f"ALTER TABLE {table} MODIFY price DECIMAL(12,4) NOT NULL")
    finally:
        pause.unlink(missing_ok=True)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode != 0 and "changed shape" in stderr and "starts over" in stderr, stderr[-2000:]
    pipeline = Pipeline(config)
    raw, _ = pipeline.store.read_document(config.pipeline, document_name(table))
    assert raw is not None and raw["status"] == "running" and len(raw["waves"]) == 2
    (waiting,) = pipeline.sync()
    assert table in waiting.snapshots_in_flight and table not in pipeline.read_state().tables

    sql(mariadb, f"UPDATE {table} SET price = price + 0.0125 WHERE id = -4")
    rerun = run_cli(path, "snapshot")
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "STARTING OVER" in rerun.stderr
    assert lake_rows(config, table) == source_rows(mariadb, table)
    assert (-4, Decimal("12.2625"), "n-7") in source_rows(mariadb, table)


def test_snapshot_documents_on_s3_are_compare_and_swap_and_listed_in_one_call(s3_endpoint: str,
                                                                               s3_bucket: str) -> None:
    from cdc_lib.errors import ConcurrentRunError
    from cdc_lib.state.offset_store import S3OffsetStore

    store = S3OffsetStore(f"s3://{s3_bucket}/offsets", endpoint_url=s3_endpoint)
    assert store.list_documents("p", "snapshots") == []
    token = store.write_document("p", "snapshots/db.a.json", {"table": "db.a", "chunks": 17}, None)
    with pytest.raises(ConcurrentRunError):
        store.write_document("p", "snapshots/db.a.json", {"table": "db.a", "chunks": 3}, None)
    store.write_document("p", "snapshots/db.b.json", {"table": "db.b"}, None)
    store.write_document("p", "snapshots-done/db.c.json", {"table": "db.c"}, None)
    newer = store.write_document("p", "snapshots/db.a.json", {"table": "db.a", "chunks": 18}, token)
    with pytest.raises(ConcurrentRunError):
        store.write_document("p", "snapshots/db.a.json", {"table": "db.a", "chunks": 2}, token)
    assert store.read_document("p", "snapshots/db.a.json") == ({"table": "db.a", "chunks": 18}, newer)
    assert store.list_documents("p", "snapshots") == ["snapshots/db.a.json", "snapshots/db.b.json"]
    store.delete_document("p", "snapshots/db.b.json")
    assert store.list_documents("p", "snapshots") == ["snapshots/db.a.json"]
