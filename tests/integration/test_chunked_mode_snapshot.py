"""First snapshots of soft-delete and history tables go through the chunked engine and stay exact.

Each test changes the source BETWEEN two waves of the snapshot (the CLI pauses after a wave is recorded), then
checks the Delta table after the next sync against what the source's history implies, written out by hand: the
rows of a consistent snapshot at the first low watermark followed by every change since. Commits are stamped
with `SET TIMESTAMP` a few hours ahead, so every time in the expected lists is exact.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.state.snapshot_documents import read_document
from tests.conftest import scan_rows, sql, write_config_file
from tests.integration.conftest import wait_for
from tests.integration.snapshot_runs import popen_cli

BASE = int(time.time()) + 3 * 3600
DATA = ["id", "amount", "note"]
VERSIONS = ["_binlake_valid_from", "_binlake_valid_to", "_binlake_is_current", "_binlake_sequence"]
D = Decimal


def at(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(BASE + seconds, dt.UTC)


def make_table(mariadb: Any, database: str, name: str) -> str:
    table = f"{database}.{name}"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,3), note VARCHAR(20))",
        f"INSERT INTO {table} VALUES (1, 12.25, 'a'), (2, 7.125, 'b'), (3, 100.5, 'c'), (4, 0.875, 'd'), "
        "(5, 55.125, 'e'), (6, 6.375, 'f')")
    return table


def commit(mariadb: Any, seconds: int, *statements: str) -> None:
    """One transaction committed at BASE + seconds (the binlog's commit time)."""
    sql(mariadb, f"SET TIMESTAMP = {BASE + seconds}", "START TRANSACTION", *statements, "COMMIT")


def modes_config(make_config: Any, tmp_path: Path, modes: dict[str, str]) -> tuple[Any, Path]:
    config = make_config(list(modes), snapshot__rows_per_chunk=2, snapshot__chunks_per_wave=1,
                         sink__tables={table: {"mode": mode} for table, mode in modes.items()})
    path = write_config_file(config, tmp_path / "binlake.yaml")
    document = yaml.safe_load(path.read_text())
    document["sink"]["tables"] = {table: {"mode": mode} for table, mode in modes.items()}
    path.write_text(yaml.safe_dump(document))
    return config, path


def history_rows(config: Any, table: str) -> list[tuple[Any, ...]]:
    """(*data, valid_from, valid_to, is_current) as delta-rs reads them, by key, then `_binlake_sequence`."""
    rows = scan_rows(Pipeline(config).table_path(table), [*DATA, *VERSIONS])
    return [row[:-1] for row in sorted(rows, key=lambda row: (row[0], row[-1]))]


def snapshot_moment(config: Any, table: str) -> dt.datetime:
    """The snapshot's versions' valid_from (the server's clock at the first low watermark): sequence 0."""
    rows = scan_rows(Pipeline(config).table_path(table), ["_binlake_valid_from", "_binlake_sequence"])
    (moment,) = {valid_from for valid_from, sequence in rows if sequence == 0}
    assert abs((moment - dt.datetime.now(dt.UTC)).total_seconds()) < 600
    return moment


def snapshot_commits(config: Any, table: str) -> list[dict[str, Any]]:
    """The userMetadata of the snapshot's commits (waves and correction) in the table's Delta log, oldest first."""
    found = []
    for path in sorted((Path(Pipeline(config).table_path(table)) / "_delta_log").glob("*.json")):
        for line in path.read_text().split("\n"):
            if '"commitInfo"' in line:
                metadata = json.loads(json.loads(line)["commitInfo"].get("userMetadata") or "{}")
                if "snapshot_id" in metadata:
                    found.append(metadata)
    return found


class PausedSnapshot:
    """`binlake snapshot` in a subprocess that pauses after each recorded wave while the test changes the source."""

    def __init__(self, config_path: Path, tmp_path: Path, *arguments: str, env: dict[str, str] | None = None) -> None:
        self.pause = tmp_path / "paused"
        self.outcome: tuple[int, str] | None = None
        self.process = popen_cli(config_path, "snapshot", *arguments, env={
            "BINLAKE_FAILPOINT_PAUSE": "after_snapshot_wave_recorded", "BINLAKE_FAILPOINT_PAUSE_FILE": str(self.pause),
            **(env or {}),
        })

    def next_pause(self) -> bool:
        """Wait for the next pause (True) or the end of the process (False)."""
        wait_for(lambda: self.pause.exists() or self.process.poll() is not None, timeout=300, what="a wave")
        return self.pause.exists()

    def resume(self) -> None:
        self.pause.unlink(missing_ok=True)

    def finish(self) -> tuple[int, str]:
        """Let it run to its end, through the pauses of its later waves: its exit code and stderr (the same
        answer when asked again)."""
        if self.outcome is None:
            ended = threading.Event()

            def keep_resuming() -> None:
                while not ended.wait(0.05):
                    self.resume()

            resumer = threading.Thread(target=keep_resuming, daemon=True)
            resumer.start()
            try:
                _, stderr = self.process.communicate(timeout=300)
            finally:
                ended.set()
                resumer.join()
            self.outcome = (self.process.returncode, stderr)
        return self.outcome


def waves_recorded(config: Any, table: str) -> int:
    document, _ = read_document(Pipeline(config).store, config.pipeline, table)
    return 0 if document is None or document.status != "running" else len(document.waves)


def history_workload(mariadb: Any, table: str) -> None:
    """Between two waves: a key updated twice, one deleted, one key changed, one inserted and updated, and one
    (read by the first wave already) updated."""
    commit(mariadb, 10, f"UPDATE {table} SET amount = 30.5 WHERE id = 3")
    commit(mariadb, 11, f"UPDATE {table} SET amount = 31.75 WHERE id = 3")
    commit(mariadb, 12, f"DELETE FROM {table} WHERE id = 4")
    commit(mariadb, 13, f"UPDATE {table} SET id = 50 WHERE id = 5")
    commit(mariadb, 14, f"INSERT INTO {table} VALUES (7, 7.375, 'g')")
    commit(mariadb, 15, f"UPDATE {table} SET note = 'g2' WHERE id = 7")
    commit(mariadb, 16, f"UPDATE {table} SET amount = 2.625 WHERE id = 2")


def expected_history(snap: dt.datetime) -> list[tuple[Any, ...]]:
    return [
        (1, D("12.250"), "a", snap, None, True),
        (2, D("7.125"), "b", snap, at(16), False),
        (2, D("2.625"), "b", at(16), None, True),
        (3, D("100.500"), "c", snap, at(10), False),
        (3, D("30.500"), "c", at(10), at(11), False),
        (3, D("31.750"), "c", at(11), None, True),
        (4, D("0.875"), "d", snap, at(12), False),
        (5, D("55.125"), "e", snap, at(13), False),
        (6, D("6.375"), "f", snap, None, True),
        (7, D("7.375"), "g", at(14), at(15), False),
        (7, D("7.375"), "g2", at(15), None, True),
        (50, D("55.125"), "e", at(13), None, True),
    ]


def soft_workload(mariadb: Any, table: str) -> None:
    """Between two waves: deletes of unread and read keys, a delete and re-insert, an insert then delete, a key
    change."""
    commit(mariadb, 110, f"DELETE FROM {table} WHERE id = 3")
    commit(mariadb, 120, f"DELETE FROM {table} WHERE id = 4")
    commit(mariadb, 130, f"INSERT INTO {table} VALUES (4, 40.25, 'd2')")
    commit(mariadb, 140, f"DELETE FROM {table} WHERE id = 1")
    commit(mariadb, 150, f"INSERT INTO {table} VALUES (8, 8.125, 'h')")
    commit(mariadb, 160, f"DELETE FROM {table} WHERE id = 8")
    commit(mariadb, 165, f"UPDATE {table} SET id = 51 WHERE id = 5")


EXPECTED_SOFT = [
    (1, D("12.250"), "a", at(140)),
    (2, D("7.125"), "b", None),
    (3, D("100.500"), "c", at(110)),
    (4, D("40.250"), "d2", None),
    (5, D("55.125"), "e", at(165)),
    (6, D("6.375"), "f", None),
    (8, D("8.125"), "h", at(160)),
    (51, D("55.125"), "e", None),
]


def test_changes_between_waves_give_the_history_and_tombstones_of_a_snapshot_at_the_low_watermark(
    mariadb, database, make_config, tmp_path
) -> None:
    hist, soft = make_table(mariadb, database, "hist"), make_table(mariadb, database, "soft")
    config, path = modes_config(make_config, tmp_path, {hist: "history", soft: "soft_delete"})
    snapshot = PausedSnapshot(path, tmp_path)
    pending = {hist: history_workload, soft: soft_workload}
    try:
        while pending and snapshot.next_pause():
            for table in [table for table in pending if waves_recorded(config, table) == 1]:
                pending.pop(table)(mariadb, table)
            snapshot.resume()
    finally:
        returncode, stderr = snapshot.finish()
    assert returncode == 0, stderr[-3000:]
    assert not pending, f"no pause after the first wave of {sorted(pending)}: not a chunked snapshot"
    for table in (hist, soft):
        commits = snapshot_commits(config, table)
        assert [commit["wave"] for commit in commits if "wave" in commit] == [1, 2, 3], commits
    # The history table needed one correction commit; the soft-delete table none.
    assert [commit["keys"] for commit in snapshot_commits(config, hist) if commit.get("step") == "correction"] == [6]
    assert not [commit for commit in snapshot_commits(config, soft) if commit.get("step") == "correction"]

    pipeline = Pipeline(config)
    pipeline.sync(until_caught_up=True)
    state = pipeline.read_state()
    assert state.tables[hist].consistent and state.tables[soft].consistent
    assert history_rows(config, hist) == expected_history(snapshot_moment(config, hist))
    # The snapshot's row count is its rows as of the low watermark (the sequence-0 versions), not the waves'.
    versions = scan_rows(pipeline.table_path(hist), ["_binlake_sequence"])
    assert state.tables[hist].rows_snapshotted == sum(1 for (sequence,) in versions if sequence == 0)
    soft_rows = sorted(scan_rows(pipeline.table_path(soft), [*DATA, "_binlake_deleted_at"]), key=lambda row: row[0])
    assert soft_rows == EXPECTED_SOFT


def test_a_truncate_between_waves_is_refused_and_never_installed(mariadb, database, make_config, tmp_path) -> None:
    hist = make_table(mariadb, database, "hist")
    config, path = modes_config(make_config, tmp_path, {hist: "history"})
    snapshot = PausedSnapshot(path, tmp_path, env={"BINLAKE_FAILPOINT_AT": "1"})
    try:
        assert snapshot.next_pause(), snapshot.finish()[1][-3000:]
        commit(mariadb, 10, f"UPDATE {hist} SET amount = 30.5 WHERE id = 3")
        sql(mariadb, f"SET TIMESTAMP = {BASE + 11}", f"TRUNCATE TABLE {hist}")
        commit(mariadb, 12, f"INSERT INTO {hist} VALUES (9, 9.875, 'i')")
    finally:
        returncode, stderr = snapshot.finish()
    assert returncode != 0 and "TRUNCATE" in stderr and f"binlake snapshot --table {hist} --restart" in stderr, (
        stderr[-3000:])
    pipeline = Pipeline(config)
    (batch,) = pipeline.sync()
    assert hist not in pipeline.read_state().tables, "a refused snapshot is never installed"
    assert "refused" in batch.snapshots_in_flight[hist]
    (status,) = [status for status in pipeline.status() if status.table == hist]
    assert status.snapshot_in_flight is not None and status.snapshot_in_flight.startswith("refused: a TRUNCATE")

    (result,) = pipeline.snapshot([hist], restart=True)
    assert result.installed
    pipeline.sync(until_caught_up=True)
    snap = snapshot_moment(config, hist)
    assert history_rows(config, hist) == [(9, D("9.875"), "i", snap, None, True)]


def test_a_crash_after_the_correction_commit_commits_nothing_twice(mariadb, database, make_config, tmp_path) -> None:
    hist = make_table(mariadb, database, "hist")
    config, path = modes_config(make_config, tmp_path, {hist: "history"})
    snapshot = PausedSnapshot(path, tmp_path, env={
        "BINLAKE_FAILPOINT_AT": "1", "BINLAKE_FAILPOINT": "after_snapshot_correction_commit",
    })
    try:
        assert snapshot.next_pause(), snapshot.finish()[1][-3000:]
        commit(mariadb, 10, f"UPDATE {hist} SET amount = 30.5 WHERE id = 3")
        commit(mariadb, 11, f"UPDATE {hist} SET amount = 31.75 WHERE id = 3")
    finally:
        returncode, stderr = snapshot.finish()
    assert returncode == -signal.SIGKILL, stderr[-3000:]
    pipeline = Pipeline(config)
    (batch,) = pipeline.sync()  # the runner is dead: its correction commit is not taken for a wave
    assert hist not in pipeline.read_state().tables and hist in batch.snapshots_in_flight

    (result,) = pipeline.snapshot([hist])
    assert result.installed and result.chunks_resumed == 3
    corrections = [commit for commit in snapshot_commits(config, hist) if commit.get("step") == "correction"]
    assert [commit["keys"] for commit in corrections] == [1], "the correction was committed once"
    pipeline.sync(until_caught_up=True)
    snap = snapshot_moment(config, hist)
    assert history_rows(config, hist) == [
        (1, D("12.250"), "a", snap, None, True),
        (2, D("7.125"), "b", snap, None, True),
        (3, D("100.500"), "c", snap, at(10), False),
        (3, D("30.500"), "c", at(10), at(11), False),
        (3, D("31.750"), "c", at(11), None, True),
        (4, D("0.875"), "d", snap, None, True),
        (5, D("55.125"), "e", snap, None, True),
        (6, D("6.375"), "f", snap, None, True),
    ]
