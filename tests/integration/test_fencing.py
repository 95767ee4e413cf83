"""Two actors on one table, interleaved with pause points and SIGSTOP: every commit prepared under an older claim
is refused by the Delta log itself (cdc_lib/sink/fencing.py), and after catch-up the table equals the source, read
by delta-rs's scan (not binlake's reader), with no primary key twice.

- a sync batch paused before its Delta commit × a re-snapshot of the table run to completion meanwhile (issue 24
  case 1), on both writers, for a MERGE batch and an insert-only (append) batch;
- a snapshot stopped (SIGSTOP) after its wave was read and past its lease × a sync that abandons it and commits
  (issue 24 case 2): the stopped snapshot's wave never lands.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.state.offsets import utc_now
from cdc_lib.state.snapshot_documents import read_document
from tests.conftest import CDC_PASSWORD, run_cli, scan_rows, source_rows, sql, write_config_file
from tests.integration.conftest import Background, assert_each_change_applied_once, wait_for

LEASE_SECONDS = 5


def _assert_equal_to_source(mariadb, pipeline: Pipeline, table: str) -> None:
    rows = sorted(scan_rows(pipeline.table_path(table)))
    keys = Counter(row[0] for row in rows)
    assert [key for key, count in keys.items() if count > 1] == [], "a primary key is in Delta twice"
    assert rows == source_rows(mariadb, table)


def _sync_paused_before_commit(pipeline: Pipeline, flag: Path, monkeypatch: pytest.MonkeyPatch) -> Background:
    """A batch of this process that read its changes and waits before its Delta commit until `flag` is removed."""
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE", "before_delta_commit")
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE_FILE", str(flag))
    run = Background(lambda: pipeline.sync())
    run.start()
    wait_for(flag.exists, timeout=120, what="the batch to reach its Delta commit")
    monkeypatch.delenv("BINLAKE_FAILPOINT_PAUSE")
    return run


@pytest.mark.parametrize(("writer", "batch"), [
    ("delta-rs", "merge"), ("spark", "merge"), ("spark+feed", "merge"), ("delta-rs", "insert-only"),
    ("spark", "insert-only"),
])
def test_a_sync_batch_paused_before_its_commit_never_lands_on_a_resnapshot(
    mariadb, database, make_config, tmp_path, monkeypatch, writer, batch
) -> None:
    """`spark+feed`: a table with a change data feed, which delta-rs does not write: Spark writes its fence."""
    table = f"{database}.items"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL)",
        f"INSERT INTO {table} SELECT seq, 0 FROM {database}.seq_1_to_40")
    feed = {"sink__tables": {table: {"change_data_feed": True}}} if writer == "spark+feed" else {}
    config = make_config([table], batch__writer=writer.removesuffix("+feed"), offsets__lease_seconds=LEASE_SECONDS,
                         **feed)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    pipeline.sync(until_caught_up=True)
    # The batch the sync reads, then holds before its commit.
    if batch == "merge":
        sql(mariadb, f"UPDATE {table} SET qty = 1 WHERE id = 5", f"INSERT INTO {table} VALUES (100, 7)")
    else:
        sql(mariadb, f"INSERT INTO {table} VALUES (100, 7), (101, 8)")
    flag = tmp_path / "paused"
    run = _sync_paused_before_commit(pipeline, flag, monkeypatch)
    # Meanwhile: the source moves on, and a re-snapshot of the table (a Dagster backfill, say) runs to completion.
    sql(mariadb, f"UPDATE {table} SET qty = 2 WHERE id = 5", f"DELETE FROM {table} WHERE id = 7")
    snapshot = run_cli(write_config_file(config, tmp_path / "binlake.yaml"), "snapshot", "--table", table)
    assert snapshot.returncode == 0, snapshot.stderr
    flag.unlink()
    results = run.outcome()
    assert results[0].tables == [] or all(result.delta_version is None or result.error is None
                                          for result in results[0].tables)
    pipeline.sync(until_caught_up=True)
    _assert_equal_to_source(mariadb, pipeline, table)
    status = {entry.table: entry for entry in pipeline.status()}
    assert status[table].consistent


def _paused_cli(config_path: Path, flag: Path, failpoint: str, *arguments: str) -> subprocess.Popen[str]:
    """The CLI in its own process group, pausing at `failpoint` (its first arrival) until `flag` is removed."""
    environment = {
        **os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC",
        "BINLAKE_FAILPOINT_PAUSE": failpoint, "BINLAKE_FAILPOINT_PAUSE_FILE": str(flag), "BINLAKE_FAILPOINT_AT": "1",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), *arguments],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment, start_new_session=True,
    )


def _stop_when_paused(process: subprocess.Popen[str], flag: Path, what: str) -> None:
    """Wait for the process to reach its pause point, then stop its whole process group (a paused VM).

    The offset folders' locks are held while it is stopped: its heartbeat thread, which runs on at the pause point,
    is then never frozen inside a write holding one. That freeze is real (a stopped runner holding the local store's
    lock), and it ends in a bounded OffsetStoreError (tests/unit/state/test_offset_store_lock.py), not in the
    takeover these tests are about."""
    wait_for(lambda: flag.exists() or process.poll() is not None, timeout=180, what=what)
    assert process.poll() is None, process.communicate()[1]
    handles = [open(lock, "a+") for lock in flag.parent.rglob(".lock")]  # noqa: SIM115 - closed below
    try:
        for handle in handles:
            fcntl.flock(handle, fcntl.LOCK_EX)
        os.killpg(process.pid, signal.SIGSTOP)
    finally:
        for handle in handles:
            handle.close()
    flag.unlink()


def _resume(process: subprocess.Popen[str]) -> tuple[int, str]:
    try:
        os.killpg(process.pid, signal.SIGCONT)
        _, stderr = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    return process.returncode, stderr


def _lease_expired(pipeline: Pipeline, config, table: str | None) -> bool:
    if table is None:
        lease = pipeline.read_state().lease
    else:
        document, _ = read_document(pipeline.context.store, config.pipeline, table)
        lease = document.lease if document is not None else None
    return lease is not None and lease.expired(utc_now())


def _big_table(mariadb, database, make_config, tmp_path, writer: str):
    table = f"{database}.big"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT NOT NULL)",
        f"INSERT INTO {table} SELECT seq, seq FROM {database}.seq_1_to_3000")
    config = make_config([table], offsets__lease_seconds=LEASE_SECONDS, snapshot__writer=writer,
                         batch__writer="delta-rs" if writer == "delta-rs" else "spark",
                         snapshot__rows_per_chunk=1000, snapshot__chunks_per_wave=1)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    pipeline.sync(until_caught_up=True)
    return table, config, pipeline, write_config_file(config, tmp_path / "binlake.yaml")


#: Where a snapshot is stopped, per writer: after its last lease check. delta-rs reads the wave inside its write
#: (`snapshot_wave_read`, after it loaded the table: the fence then fails the commit in the conflict check);
#: Spark's read is lazy, inside its write (`snapshot_wave_checked`: Spark then skips the fenced version).
STOP_POINTS = [("delta-rs", "snapshot_wave_read"), ("delta-rs", "snapshot_wave_checked"),
               ("spark", "snapshot_wave_checked")]


def _stopped_resnapshot(mariadb, database, make_config, tmp_path, writer: str, stop_at: str):
    """A re-snapshot that passed its last lease check before its first wave's commit, its process stopped (a paused
    VM) until its table lease expired."""
    table, config, pipeline, config_path = _big_table(mariadb, database, make_config, tmp_path, writer)
    flag = tmp_path / "paused"
    snapshot = _paused_cli(config_path, flag, stop_at, "snapshot")
    _stop_when_paused(snapshot, flag, "the re-snapshot to reach its first wave's commit")
    wait_for(lambda: _lease_expired(pipeline, config, table), timeout=60, interval=0.5,
             what="the stopped snapshot's table lease to expire")
    return table, pipeline, config_path, snapshot


def _assert_taken_over(snapshot: subprocess.Popen[str]) -> None:
    code, stderr = _resume(snapshot)
    assert code != 0, "the stopped snapshot must not finish"
    assert "taken over" in stderr, stderr


@pytest.mark.parametrize(("writer", "stop_at"), STOP_POINTS)
def test_a_snapshot_stopped_past_its_lease_never_commits_its_wave(
    mariadb, database, make_config, tmp_path, writer, stop_at
) -> None:
    table, pipeline, _, snapshot = _stopped_resnapshot(mariadb, database, make_config, tmp_path, writer, stop_at)
    # A sync finds the snapshot's runner gone, abandons the snapshot and goes on with the table.
    sql(mariadb, f"UPDATE {table} SET v = -1 WHERE id = 2999", f"INSERT INTO {table} VALUES (5000, 5)")
    results = pipeline.sync(until_caught_up=True)
    assert results[0].snapshots_in_flight == {}
    _assert_taken_over(snapshot)
    pipeline.sync(until_caught_up=True)
    _assert_equal_to_source(mariadb, pipeline, table)


@pytest.mark.parametrize(("writer", "stop_at"), [STOP_POINTS[0], STOP_POINTS[2]])
def test_a_restarted_snapshot_fences_the_one_it_replaces(
    mariadb, database, make_config, tmp_path, writer, stop_at
) -> None:
    table, pipeline, config_path, first = _stopped_resnapshot(mariadb, database, make_config, tmp_path, writer,
                                                              stop_at)
    sql(mariadb, f"DELETE FROM {table} WHERE id <= 10", f"INSERT INTO {table} VALUES (6000, 6)")
    second = run_cli(config_path, "snapshot", "--restart", "--table", table)
    assert second.returncode == 0, second.stderr
    _assert_taken_over(first)
    pipeline.sync(until_caught_up=True)
    _assert_equal_to_source(mariadb, pipeline, table)


@pytest.mark.parametrize("writer", ["delta-rs", "spark"])
def test_a_runner_stopped_past_its_lease_never_commits_its_batch(
    mariadb, database, make_config, tmp_path, writer
) -> None:
    table, config, pipeline, config_path = _big_table(mariadb, database, make_config, tmp_path, writer)
    sql(mariadb, f"UPDATE {table} SET v = v + 1 WHERE id <= 50", f"INSERT INTO {table} VALUES (7000, 7)")
    flag = tmp_path / "paused"
    stale = _paused_cli(config_path, flag, "before_delta_commit", "sync")
    _stop_when_paused(stale, flag, "the sync to reach its Delta commit")
    # Its lease runs out; another runner takes the pipeline and carries the same changes, and more.
    wait_for(lambda: _lease_expired(pipeline, config, None), timeout=60, interval=0.5,
             what="the stopped runner's pipeline lease to expire")
    sql(mariadb, f"UPDATE {table} SET v = -5 WHERE id <= 20", f"DELETE FROM {table} WHERE id = 7000")
    pipeline.sync(until_caught_up=True)
    code, stderr = _resume(stale)
    assert code != 0, "the stopped runner must not commit"
    pipeline.sync(until_caught_up=True)
    _assert_equal_to_source(mariadb, pipeline, table)
    assert_each_change_applied_once(config, table)


@pytest.mark.parametrize("writer", ["delta-rs", "spark"])
def test_a_sync_paused_before_its_commit_while_a_snapshot_is_between_waves(
    mariadb, database, make_config, tmp_path, monkeypatch, writer
) -> None:
    table, config, pipeline, config_path = _big_table(mariadb, database, make_config, tmp_path, writer)
    sql(mariadb, f"UPDATE {table} SET v = 0 WHERE id = 1500", f"INSERT INTO {table} VALUES (8000, 8)")
    sync_flag = tmp_path / "sync-paused"
    run = _sync_paused_before_commit(pipeline, sync_flag, monkeypatch)
    # A re-snapshot writes its first wave and pauses before its second.
    snapshot_flag = tmp_path / "snapshot-paused"
    snapshot = _paused_cli(config_path, snapshot_flag, "after_snapshot_wave_recorded", "snapshot", "--table", table)
    wait_for(lambda: snapshot_flag.exists() or snapshot.poll() is not None, timeout=180,
             what="the re-snapshot's first wave")
    sql(mariadb, f"UPDATE {table} SET v = 1 WHERE id = 1500")
    sync_flag.unlink()  # the batch commits, or is refused, while the snapshot is between its waves
    run.outcome()
    snapshot_flag.unlink()
    _, stderr = snapshot.communicate(timeout=300)
    assert snapshot.returncode == 0, stderr
    pipeline.sync(until_caught_up=True)
    _assert_equal_to_source(mariadb, pipeline, table)


def test_follow_beside_a_backfill_of_one_of_its_tables(mariadb, database, make_config, tmp_path) -> None:
    """The Dagster backfill of a table is `snapshot --table` (the same `snapshot_tables`), beside follow mode."""
    from cdc_lib.pipeline.follow import follow

    table, other = f"{database}.big", f"{database}.other"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT NOT NULL)",
        f"INSERT INTO {table} SELECT seq, seq FROM {database}.seq_1_to_3000",
        f"CREATE TABLE {other} (id INT PRIMARY KEY, v INT)", f"INSERT INTO {other} VALUES (1, 1)")
    config = make_config([table, other], offsets__lease_seconds=LEASE_SECONDS, snapshot__rows_per_chunk=1000,
                         snapshot__chunks_per_wave=1)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    stop = threading.Event()
    run = Background(lambda: follow(pipeline, poll_seconds=0.2, stop=stop, give_up_after=0))
    run.start()
    writes = 0
    backfill = None
    while writes < 60:
        sql(mariadb, f"UPDATE {table} SET v = v + 1 WHERE id = {1 + writes * 37 % 3000}",
            f"INSERT INTO {table} VALUES ({10_000 + writes}, {writes})",
            f"UPDATE {other} SET v = {writes} WHERE id = 1")
        writes += 1
        if writes == 10:
            backfill = subprocess.Popen(
                [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), "snapshot", "--table", table],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                env={**os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC"},
            )
        threading.Event().wait(0.1)
    assert backfill is not None
    _, stderr = backfill.communicate(timeout=300)
    assert backfill.returncode == 0, stderr
    stop.set()
    run.outcome()
    pipeline.sync(until_caught_up=True)
    _assert_equal_to_source(mariadb, pipeline, table)
    _assert_equal_to_source(mariadb, pipeline, other)
