"""Faults: kill the source server, its binlog connection, the offset store and binlake itself mid-run.

Each case ends with the Delta table equal to the source row for row, and with every binlog range
applied once (each MERGE starts where the previous commit ended).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.errors import ConcurrentRunError, OffsetStoreError, SourceConnectionError
from cdc_lib.pipeline.pipeline import Pipeline, SyncResult
from tests.conftest import CDC_PASSWORD, delta_rows, source_rows, sql, write_config_file
from tests.integration.conftest import (
    Background,
    MotoServer,
    assert_each_change_applied_once,
    backlog,
    binlake_commits,
    dump_threads,
    footprint,
    make_items,
    quickly_failing_store,
    wait_for,
)
from tests.net_proxy import TcpProxy


def assert_converged(config: Any, server: LocalMariaDB, table: str) -> None:
    assert delta_rows(config, table) == source_rows(server, table)
    assert_each_change_applied_once(config, table)
    assert Pipeline(config).read_state().tables[table].consistent


def popen_cli(config_path: Path, *arguments: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """A `binlake` process in its own process group, so a SIGKILL takes its JVM down with it."""
    environment = {**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC", **(env or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), *arguments],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def kill_group(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL


def retry_while(call: Callable[[], Any], error: type[BaseException], *, timeout: float) -> Any:
    """Call until it stops raising `error` (what an orchestrator does with a retryable failure)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except error:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


# -- the source server dies --------------------------------------------------------------------


@pytest.mark.slow
def test_mariadb_sigkilled_mid_read_and_between_batches(
    own_mariadb: LocalMariaDB, make_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = own_mariadb
    sql(server, "CREATE DATABASE faults")
    table = make_items(server, "faults", rows=2000)
    config = make_config([table], source__port=server.port)
    Pipeline(config).snapshot()

    # 1. Killed while a batch reads a large backlog from the binlog.
    backlog(server, "faults", transactions=3, rows=2000)
    run = Background(lambda: Pipeline(config).sync())
    run.start()
    wait_for(lambda: dump_threads(server, sending=True) or not run.is_alive(), timeout=60, what="the binlog read")
    assert run.is_alive(), "the sync finished before the server could be killed"
    server.kill()
    with pytest.raises(SourceConnectionError, match="binlog|MySQL server") as raised:
        run.outcome()
    assert raised.value.retryable, raised.value
    assert Pipeline(config).read_state().lease is None, "the failed run released its lease"
    assert len(binlake_commits(config, table)) == 1, "nothing reached Delta"

    # 2. Restarted (crash recovery, a new binlog file), then killed between two batches.
    server.start()
    sql(server, "UPDATE faults.items SET qty = qty + 100 WHERE id % 7 = 0", "DELETE FROM faults.items WHERE id < 50")
    flag = tmp_path / "paused-after-delta-commit"
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE", "after_delta_commit")
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE_FILE", str(flag))
    small_batches = make_config([table], pipeline=config.pipeline, source__port=server.port, batch__max_events=7000)
    run = Background(lambda: Pipeline(small_batches).sync(until_caught_up=True))
    run.start()
    wait_for(flag.exists, timeout=180, what="the first batch's Delta commit")
    monkeypatch.delenv("BINLAKE_FAILPOINT_PAUSE")
    server.kill()
    flag.unlink()  # the batch saves its offsets; the next one finds the server gone
    with pytest.raises(SourceConnectionError, match="lost the connection") as raised:
        run.outcome()
    assert raised.value.retryable, raised.value

    server.start()
    sql(server, "INSERT INTO faults.items VALUES (0, 0, 'after two crashes')")
    Pipeline(small_batches).sync(until_caught_up=True)
    assert_converged(config, server, table)


def test_binlog_connection_killed_by_the_server_mid_read(mariadb: LocalMariaDB, database: str, make_config: Any,
                                                         caplog: pytest.LogCaptureFixture, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    table = make_items(mariadb, database, rows=2000)
    config = make_config([table])
    Pipeline(config).snapshot()
    expected = backlog(mariadb, database, transactions=10, rows=2000)

    # The reader stops after the batch's first rows event, its dump connection open with the rest to come.
    flag = tmp_path / "paused-mid-read"
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE", "binlog_mid_read")
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE_FILE", str(flag))
    run = Background(lambda: Pipeline(config).sync(until_caught_up=True))
    run.start()
    wait_for(flag.exists, timeout=120, what="the reader to pause mid-read")
    first = wait_for(lambda: dump_threads(mariadb), timeout=30, what="the binlog dump thread")[0]
    sql(mariadb, f"KILL CONNECTION {first}")
    monkeypatch.delenv("BINLAKE_FAILPOINT_PAUSE")
    flag.unlink()
    results: list[SyncResult] = run.outcome()
    reconnects = [record for record in caplog.records if "Re-request the connection" in record.getMessage()]
    assert reconnects, "the reader did not notice the kill: it was not mid-read"
    assert sum(result.row_changes for result in results) == expected, "a change was lost or read twice"
    assert_converged(config, mariadb, table)


# -- the offset store goes away during the offset write ---------------------------------------


def test_offset_store_unreachable_during_the_offset_write(
    mariadb: LocalMariaDB, database: str, make_config: Any, private_moto: MotoServer, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import boto3

    boto3.client("s3", endpoint_url=private_moto.endpoint).create_bucket(Bucket="binlake-faults")
    proxy = TcpProxy(private_moto.port).restore()
    try:
        table = make_items(mariadb, database, rows=300)
        config = make_config([table], offsets={"uri": "s3://binlake-faults/offsets", "lease_seconds": 5,
                                               "endpoint_url": f"http://127.0.0.1:{proxy.port}"})
        Pipeline(config).snapshot()
        backlog(mariadb, database, transactions=3, rows=100)

        flag = tmp_path / "paused-before-offset-write"
        monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE", "before_offset_write")
        monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE_FILE", str(flag))
        run = Background(lambda: Pipeline(config, store=quickly_failing_store(config)).sync())
        run.start()
        wait_for(flag.exists, timeout=180, what="the sync to reach its offset write")
        committed = binlake_commits(config, table)[-1]
        proxy.cut()
        flag.unlink()
        with pytest.raises(OffsetStoreError, match="cannot write s3://binlake-faults/offsets") as raised:
            run.outcome()
        assert raised.value.retryable, raised.value
        assert "offsets.endpoint_url" in raised.value.remedy
        monkeypatch.delenv("BINLAKE_FAILPOINT_PAUSE")

        proxy.restore()
        stored = Pipeline(config).read_state()
        assert stored.tables[table].applied_seq < committed.txn_version, "the offset write really failed"
        assert committed.kind == "merge" and delta_rows(config, table) == source_rows(mariadb, table)
        # The failed run could not release its lease either; it lapses after offsets.lease_seconds.
        sql(mariadb, f"UPDATE {database}.items SET qty = -1 WHERE id BETWEEN 5 AND 9")
        retry_while(lambda: Pipeline(config).sync(until_caught_up=True), ConcurrentRunError, timeout=60)
        assert_converged(config, mariadb, table)
    finally:
        proxy.cut()


# -- binlake itself is SIGKILLed --------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_while_the_first_snapshot_writes(mariadb: LocalMariaDB, database: str, make_config: Any,
                                                 tmp_path: Path) -> None:
    table = make_items(mariadb, database, rows=100_000, pad=60)
    # Spark's writer, whose Parquet files sit uncommitted for a while (delta-rs commits within milliseconds of
    # them; its kills are tests/integration/test_snapshot_writer.py's).
    config = make_config([table], snapshot__writer="spark")
    process = popen_cli(write_config_file(config, tmp_path / "binlake.yaml"), "snapshot")
    table_dir = Path(Pipeline(config).table_path(table))

    def writing() -> bool:
        return any(table_dir.glob("part-*.parquet")) or process.poll() is not None

    wait_for(writing, timeout=180, interval=0.01, what="the snapshot to write Parquet files")
    assert process.poll() is None, f"the snapshot ended before it could be killed: {process.communicate()[1][-2000:]}"
    kill_group(process)
    assert not list(table_dir.glob("_delta_log/*.json")), "killed too late: the snapshot committed"
    assert list(table_dir.glob("part-*.parquet")), "the kill left partial Parquet files behind"
    assert table not in Pipeline(config).read_state().tables

    sql(mariadb, f"UPDATE {database}.items SET qty = 7 WHERE id <= 10", f"DELETE FROM {database}.items WHERE id = 11")
    pipeline = Pipeline(config)
    pipeline.snapshot()  # the rerun; the orphaned files are not part of any Delta version
    sql(mariadb, f"INSERT INTO {database}.items VALUES (0, 0, 'after')")
    pipeline.sync(until_caught_up=True)
    assert_converged(config, mariadb, table)


@pytest.mark.slow
def test_sigkill_before_a_resnapshot_commits(mariadb: LocalMariaDB, database: str, make_config: Any,
                                             tmp_path: Path) -> None:
    table = make_items(mariadb, database, rows=500)
    config = make_config([table])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"UPDATE {database}.items SET qty = 1 WHERE id <= 100")
    pipeline.sync()
    before = footprint(config)

    sql(mariadb, f"DELETE FROM {database}.items WHERE id <= 20")
    process = popen_cli(write_config_file(config, tmp_path / "binlake.yaml"), "snapshot", "--table", table,
                        env={"BINLAKE_FAILPOINT": "before_snapshot_write"})
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == -signal.SIGKILL, stderr[-2000:]
    after = footprint(config)
    assert after.delta_files == before.delta_files, "the killed re-snapshot must not touch the Delta table"
    assert after.tables == before.tables, "nor the table's offsets"

    pipeline = Pipeline(config)
    pipeline.sync(until_caught_up=True)  # the table goes on from its old offset
    assert_converged(config, mariadb, table)
    pipeline.snapshot([table])
    sql(mariadb, f"UPDATE {database}.items SET qty = 2 WHERE id BETWEEN 21 AND 30")
    pipeline.sync(until_caught_up=True)
    assert_converged(config, mariadb, table)


def test_sigkill_during_the_binlog_read(mariadb: LocalMariaDB, database: str, make_config: Any,
                                        tmp_path: Path) -> None:
    table = make_items(mariadb, database, rows=2000)
    config = make_config([table])
    Pipeline(config).snapshot()
    expected = backlog(mariadb, database, transactions=10, rows=2000)
    before = footprint(config)

    process = popen_cli(write_config_file(config, tmp_path / "binlake.yaml"), "sync", "--until-caught-up")
    wait_for(lambda: dump_threads(mariadb, sending=True) or process.poll() is not None, timeout=120,
             what="the binlog read")
    assert process.poll() is None, "the sync ended before it could be killed"
    kill_group(process)
    assert footprint(config) == before, "a run killed while reading changed nothing durable"

    results = Pipeline(config).sync(until_caught_up=True)  # takes over the dead runner's lease
    assert sum(result.row_changes for result in results) == expected
    assert_converged(config, mariadb, table)


# -- one key's whole life inside one batch ------------------------------------------------------


def test_key_inserted_updated_deleted_and_reinserted_within_one_batch(mariadb: LocalMariaDB, database: str,
                                                                       make_config: Any) -> None:
    table = f"{database}.k"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20), n INT)",
        f"INSERT INTO {table} VALUES (2, 'snap', 0), (3, 'snap', 0), (5, 'snap', 0), (8, 'snap', 0)")
    config = make_config([table])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    transactions = [
        # key 1 is new: insert, update, delete, insert again — each its own transaction
        [f"INSERT INTO {table} VALUES (1, 'first', 1)"],
        [f"UPDATE {table} SET v = 'updated', n = 2 WHERE id = 1"],
        [f"DELETE FROM {table} WHERE id = 1"],
        [f"INSERT INTO {table} VALUES (1, 'again', 4)"],
        # key 2 comes from the snapshot: delete, re-insert, update
        [f"DELETE FROM {table} WHERE id = 2"],
        [f"INSERT INTO {table} VALUES (2, 'reborn', 1)"],
        [f"UPDATE {table} SET n = 9 WHERE id = 2"],
        # key 3 comes from the snapshot and ends deleted; key 4 lives and dies inside the batch
        [f"UPDATE {table} SET v = 'doomed' WHERE id = 3"],
        [f"DELETE FROM {table} WHERE id = 3"],
        [f"INSERT INTO {table} VALUES (4, 'brief', 1)"],
        [f"DELETE FROM {table} WHERE id = 4"],
        # key 5 moves to 6 and 5 is taken again; key 8's row goes away and back in one transaction
        [f"UPDATE {table} SET id = 6 WHERE id = 5"],
        [f"INSERT INTO {table} VALUES (5, 'new five', 5)"],
        [f"INSERT INTO {table} VALUES (7, 'x', 1)", f"UPDATE {table} SET v = 'y' WHERE id = 7",
         f"DELETE FROM {table} WHERE id = 8", f"INSERT INTO {table} VALUES (8, 'back', 8)",
         f"DELETE FROM {table} WHERE id = 7", f"INSERT INTO {table} VALUES (7, 'z', 3)"],
    ]
    for statements in transactions:
        sql(mariadb, "START TRANSACTION", *statements, "COMMIT")

    results = pipeline.sync()
    assert len(results) == 1 and results[0].reached_end, "all of it in one batch"
    assert results[0].transactions >= len(transactions)
    rows = delta_rows(config, table)
    assert rows == source_rows(mariadb, table)
    assert [row[0] for row in rows] == [1, 2, 5, 6, 7, 8], "each key once, deleted keys gone"
    assert len(binlake_commits(config, table)) == 2, "one snapshot and one MERGE"
