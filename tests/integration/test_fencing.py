"""Two actors on one table, interleaved with pause points and SIGSTOP: every commit prepared under an older claim
is refused by the Delta log itself (cdc_lib/fencing.py), and after catch-up the table equals the source, read
by delta-rs's scan (not binlake's reader), with no primary key twice.

- a sync batch paused before its Delta commit × a re-snapshot of the table run to completion meanwhile (issue 24
  case 1), on both writers, for a MERGE batch and an insert-only (append) batch;
- a snapshot stopped (SIGSTOP) after its wave was read and past its lease × a sync that abandons it and commits
  (issue 24 case 2): the stopped snapshot's wave never lands.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from cdc_lib.offsets import utc_now
from cdc_lib.pipeline import Pipeline
from cdc_lib.snapshot_documents import read_document
from tests.conftest import CDC_PASSWORD, run_cli, scan_rows, source_rows, sql, write_config_file
from tests.integration.conftest import Background, wait_for

LEASE_SECONDS = 5


def _assert_equal_to_source(mariadb, pipeline: Pipeline, table: str) -> None:
    rows = sorted(scan_rows(pipeline.table_path(table)))
    keys = Counter(row[0] for row in rows)
    assert [key for key, count in keys.items() if count > 1] == [], "a primary key is in Delta twice"
    assert rows == source_rows(mariadb, table)


@pytest.mark.parametrize("writer", ["delta-rs", "spark"])
@pytest.mark.parametrize("batch", ["merge", "insert-only"])
def test_a_sync_batch_paused_before_its_commit_never_lands_on_a_resnapshot(
    mariadb, database, make_config, tmp_path, monkeypatch, writer, batch
) -> None:
    table = f"{database}.items"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL)",
        f"INSERT INTO {table} SELECT seq, 0 FROM {database}.seq_1_to_40")
    config = make_config([table], batch__writer=writer, offsets__lease_seconds=LEASE_SECONDS)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    pipeline.sync(until_caught_up=True)
    # The batch the sync reads, then holds before its commit.
    if batch == "merge":
        sql(mariadb, f"UPDATE {table} SET qty = 1 WHERE id = 5", f"INSERT INTO {table} VALUES (100, 7)")
    else:
        sql(mariadb, f"INSERT INTO {table} VALUES (100, 7), (101, 8)")
    flag = tmp_path / "paused"
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE", "before_delta_commit")
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE_FILE", str(flag))
    run = Background(lambda: pipeline.sync())
    run.start()
    wait_for(flag.exists, timeout=120, what="the batch to reach its Delta commit")
    monkeypatch.delenv("BINLAKE_FAILPOINT_PAUSE")
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


def _snapshot_process(config_path: Path, flag: Path) -> subprocess.Popen[str]:
    environment = {
        **os.environ, "BINLAKE_TEST_PASSWORD": CDC_PASSWORD, "TZ": "UTC",
        "BINLAKE_FAILPOINT_PAUSE": "snapshot_wave_read", "BINLAKE_FAILPOINT_PAUSE_FILE": str(flag),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), "snapshot"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment, start_new_session=True,
    )


def test_a_snapshot_stopped_past_its_lease_never_commits_its_wave(mariadb, database, make_config, tmp_path) -> None:
    table = f"{database}.big"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT NOT NULL)",
        f"INSERT INTO {table} SELECT seq, seq FROM {database}.seq_1_to_3000")
    config = make_config([table], offsets__lease_seconds=LEASE_SECONDS, snapshot__writer="delta-rs",
                         snapshot__rows_per_chunk=1000, snapshot__chunks_per_wave=1)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    pipeline.sync(until_caught_up=True)
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    # A re-snapshot reads its first wave, and its process is stopped (a paused VM) right after the read.
    flag = tmp_path / "paused"
    snapshot = _snapshot_process(config_path, flag)
    try:
        wait_for(flag.exists, timeout=180, what="the re-snapshot to read its first wave")
        os.killpg(snapshot.pid, signal.SIGSTOP)
        flag.unlink()
        def lease_expired() -> bool:
            document, _ = read_document(pipeline.context.store, config.pipeline, table)
            return document is not None and document.lease is not None and document.lease.expired(utc_now())

        wait_for(lease_expired, timeout=60, interval=0.5, what="the stopped snapshot's table lease to expire")
        # A sync finds the snapshot's runner gone, abandons the snapshot and goes on with the table.
        sql(mariadb, f"UPDATE {table} SET v = -1 WHERE id = 2999", f"INSERT INTO {table} VALUES (5000, 5)")
        results = pipeline.sync(until_caught_up=True)
        assert results[0].snapshots_in_flight == {}
        os.killpg(snapshot.pid, signal.SIGCONT)
        _, stderr = snapshot.communicate(timeout=180)
    finally:
        if snapshot.poll() is None:
            os.killpg(snapshot.pid, signal.SIGKILL)
    assert snapshot.returncode != 0, "the stopped snapshot must not finish"
    assert "taken over" in stderr, stderr
    pipeline.sync(until_caught_up=True)
    _assert_equal_to_source(mariadb, pipeline, table)
