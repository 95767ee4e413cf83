"""Soft-delete and history (SCD type 2) tables equal what the source's history implies, across batches,
schema changes, TRUNCATE, crashes at the Delta commit and re-snapshots.

The script stamps every transaction with `SET TIMESTAMP` (the binlog's commit time), so the expected tables
are exact: a few hours ahead of the real clock, after the snapshot's own time.
"""

from __future__ import annotations

import datetime as dt
import signal
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import yaml
from deltalake import DeltaTable

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from tests.conftest import run_cli, scan_rows, sql, write_config_file

BASE = int(time.time()) + 3 * 3600
DATA = ["id", "amount", "note", "ta`g"]  # a backtick: quoted by doubling, in MySQL and Spark
BEFORE_ALTER = ["id", "amount", "note"]
VERSION_COLUMNS = ["_binlake_valid_from", "_binlake_valid_to", "_binlake_is_current", "_binlake_sequence"]


def at(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(BASE + seconds, dt.UTC)


class Source:
    """The two tables under test (one soft-delete, one history), changed by the same transactions."""

    def __init__(self, mariadb: Any, database: str) -> None:
        self.mariadb, self.database = mariadb, database
        self.soft, self.hist = f"{database}.soft", f"{database}.hist"
        for table in (self.soft, self.hist):
            sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(10,3), note VARCHAR(20))",
                f"INSERT INTO {table} VALUES (1, 12.25, 'a'), (2, 7.125, 'b'), (3, 100.5, 'c'), (4, 0.875, 'd')")

    def transaction(self, seconds: int, *statements: str) -> None:
        """One transaction committed at BASE + seconds, each statement run on both tables ({t})."""
        both = [statement.format(t=table) for statement in statements for table in (self.soft, self.hist)]
        sql(self.mariadb, f"SET TIMESTAMP = {BASE + seconds}", "START TRANSACTION", *both, "COMMIT")

    def statement(self, seconds: int, statement: str) -> None:
        for table in (self.soft, self.hist):
            sql(self.mariadb, f"SET TIMESTAMP = {BASE + seconds}", statement.format(t=table))


def table_path(config: Any, table: str) -> str:
    return Pipeline(config).table_path(table)


def history_rows(config: Any, table: str, data: list[str] = DATA) -> list[tuple[Any, ...]]:
    """(*data, valid_from, valid_to, is_current) as delta-rs reads them, by key, then `_binlake_sequence`."""
    rows = scan_rows(table_path(config, table), [*data, *VERSION_COLUMNS])
    keyed_sequences = [(row[0], row[-1]) for row in rows]
    assert len(set(keyed_sequences)) == len(keyed_sequences), "two versions of one key share a sequence"
    return [row[:-1] for row in sorted(rows, key=lambda row: (row[0], row[-1]))]


def soft_rows(config: Any, table: str, data: list[str] = DATA) -> list[tuple[Any, ...]]:
    return sorted(scan_rows(table_path(config, table), [*data, "_binlake_deleted_at"]), key=lambda row: row[0])


def snapshot_time(config: Any, table: str) -> dt.datetime:
    """When the snapshot's versions began (the server's clock at the snapshot): sequence ordinal 0."""
    rows = scan_rows(table_path(config, table), ["_binlake_valid_from", "_binlake_sequence"])
    (moment,) = {valid_from for valid_from, sequence in rows if sequence % (1 << 32) == 0}
    assert abs((moment - dt.datetime.now(dt.UTC)).total_seconds()) < 600
    return moment


def write_modes_config(config: Any, source: Source, path: Path) -> Path:
    write_config_file(config, path)
    document = yaml.safe_load(path.read_text())
    document["sink"]["tables"] = {source.soft: {"mode": "soft_delete"}, source.hist: {"mode": "history"}}
    path.write_text(yaml.safe_dump(document))
    return path


def first_batch(source: Source) -> None:
    source.transaction(0, "UPDATE {t} SET amount = 13.25 WHERE id = 1")
    source.transaction(0, "UPDATE {t} SET amount = 14.75 WHERE id = 1")  # same second: the sequence orders them
    source.transaction(1, "INSERT INTO {t} VALUES (5, 5.5, 'e')", "DELETE FROM {t} WHERE id = 2")
    source.transaction(2, "UPDATE {t} SET id = 30 WHERE id = 3")
    source.transaction(3, "INSERT INTO {t} VALUES (6, 6.0, 'f')", "DELETE FROM {t} WHERE id = 6",
                       "UPDATE {t} SET amount = 15.125 WHERE id = 1")


def second_batch(source: Source) -> None:
    source.transaction(10, "INSERT INTO {t} VALUES (2, 2.25, 'b2')")
    source.transaction(11, "UPDATE {t} SET amount = 6.625 WHERE id = 5")
    source.transaction(12, "DELETE FROM {t} WHERE id = 5")
    source.statement(12, "ALTER TABLE {t} ADD COLUMN `ta``g` VARCHAR(10) NOT NULL DEFAULT 'x'")
    source.transaction(13, "UPDATE {t} SET amount = 16.5, `ta``g` = 'y' WHERE id = 1")


def third_batch(source: Source) -> None:
    source.statement(20, "TRUNCATE TABLE {t}")
    source.transaction(21, "INSERT INTO {t} VALUES (7, 70.07, 'g', 'z')")


def expected_history(snap: dt.datetime) -> list[tuple[Any, ...]]:
    """What the script implies, the ADD COLUMN's default filled into every earlier version."""
    d = Decimal
    return [
        (1, d("12.250"), "a", "x", snap, at(0), False),
        (1, d("13.250"), "a", "x", at(0), at(0), False),
        (1, d("14.750"), "a", "x", at(0), at(3), False),
        (1, d("15.125"), "a", "x", at(3), at(13), False),
        (1, d("16.500"), "a", "y", at(13), at(20), False),
        (2, d("7.125"), "b", "x", snap, at(1), False),
        (2, d("2.250"), "b2", "x", at(10), at(20), False),
        (3, d("100.500"), "c", "x", snap, at(2), False),
        (4, d("0.875"), "d", "x", snap, at(20), False),
        (5, d("5.500"), "e", "x", at(1), at(11), False),
        (5, d("6.625"), "e", "x", at(11), at(12), False),
        (7, d("70.070"), "g", "z", at(21), None, True),
        (30, d("100.500"), "c", "x", at(2), at(20), False),
    ]


def expected_soft() -> list[tuple[Any, ...]]:
    d = Decimal
    return [
        (1, d("16.500"), "a", "y", at(20)),
        (2, d("2.250"), "b2", "x", at(20)),
        (3, d("100.500"), "c", "x", at(2)),
        (4, d("0.875"), "d", "x", at(20)),
        (5, d("6.625"), "e", "x", at(12)),
        (7, d("70.070"), "g", "z", None),
        (30, d("100.500"), "c", "x", at(20)),
    ]


def test_soft_delete_and_history_follow_the_scripted_source(mariadb, database, make_config) -> None:
    source = Source(mariadb, database)
    config = make_config([source.soft, source.hist], sink__tables={
        source.soft: {"mode": "soft_delete"}, source.hist: {"mode": "history"},
    })
    pipeline = Pipeline(config)
    pipeline.snapshot()
    snap = snapshot_time(config, source.hist)
    assert [row[-1] for row in soft_rows(config, source.soft, BEFORE_ALTER)] == [None] * 4

    first_batch(source)
    pipeline.sync(until_caught_up=True)
    current = [row for row in history_rows(config, source.hist, BEFORE_ALTER) if row[-1]]
    assert [(row[0], row[1]) for row in current] == [
        (1, Decimal("15.125")), (4, Decimal("0.875")), (5, Decimal("5.500")), (30, Decimal("100.500")),
    ]
    assert all(report.matches for report in reconcile(pipeline)), "live rows equal the source"

    second_batch(source)
    pipeline.sync(until_caught_up=True)
    assert all(report.matches for report in reconcile(pipeline))
    third_batch(source)
    pipeline.sync(until_caught_up=True)

    assert history_rows(config, source.hist) == expected_history(snap)
    assert soft_rows(config, source.soft) == expected_soft()
    assert all(report.matches for report in reconcile(pipeline)), "live rows equal the source after TRUNCATE"
    for table in (source.soft, source.hist):
        # No reader feature came with the modes: delta-rs's pyarrow path (pandas, Polars) opens them too.
        opened = DeltaTable(table_path(config, table))
        assert not opened.protocol().reader_features
        assert opened.to_pyarrow_table().num_rows == {source.soft: 7, source.hist: 13}[table]
    statuses = {status.table: status.mode for status in pipeline.status()}
    assert statuses == {source.soft: "soft_delete", source.hist: "history"}


def test_kills_around_the_delta_commit_add_nothing_twice(mariadb, database, make_config, tmp_path) -> None:
    source = Source(mariadb, database)
    config = make_config([source.soft, source.hist], sink__tables={
        source.soft: {"mode": "soft_delete"}, source.hist: {"mode": "history"},
    })
    Pipeline(config).snapshot()
    snap = snapshot_time(config, source.hist)
    config_path = write_modes_config(config, source, tmp_path / "binlake.yaml")

    first_batch(source)
    second_batch(source)
    # Killed before any commit, after the history table's commit (tables go in name order), and after both
    # commits before the offsets were saved: each rerun must find what Delta already holds.
    for point in ("before_delta_commit", "after_delta_commit", "before_offset_write"):
        crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": point})
        assert crashed.returncode == -signal.SIGKILL, (point, crashed.stderr[-2000:])
    finished = run_cli(config_path, "sync", "--until-caught-up")
    assert finished.returncode == 0, finished.stderr[-2000:]
    third_batch(source)
    crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": "after_delta_commit"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    Pipeline(config).sync(until_caught_up=True)

    assert history_rows(config, source.hist) == expected_history(snap)
    assert soft_rows(config, source.soft) == expected_soft()


def test_a_resnapshot_keeps_history_and_deletions(mariadb, database, make_config) -> None:
    source = Source(mariadb, database)
    config = make_config([source.soft, source.hist], sink__tables={
        source.soft: {"mode": "soft_delete"}, source.hist: {"mode": "history"},
    })
    pipeline = Pipeline(config)
    pipeline.snapshot()
    snap = snapshot_time(config, source.hist)
    source.transaction(0, "UPDATE {t} SET amount = 13.25 WHERE id = 1")
    pipeline.sync(until_caught_up=True)
    before = history_rows(config, source.hist, BEFORE_ALTER)

    # Changed behind the pipeline's back (as after a stop), then re-snapshotted.
    source.transaction(5, "UPDATE {t} SET note = 'b-new' WHERE id = 2", "DELETE FROM {t} WHERE id = 3",
                       "INSERT INTO {t} VALUES (8, 8.25, 'h')")
    started = dt.datetime.now(dt.UTC)
    pipeline.snapshot()
    ended = dt.datetime.now(dt.UTC)
    after = history_rows(config, source.hist, BEFORE_ALTER)
    resnap = next(row[3] for row in after if row[0] == 8)  # a new row: its version began at the re-snapshot
    assert started <= resnap <= ended
    d = Decimal
    assert after == [
        (1, d("12.250"), "a", snap, at(0), False),
        (1, d("13.250"), "a", at(0), None, True),
        (2, d("7.125"), "b", snap, resnap, False),
        (2, d("7.125"), "b-new", resnap, None, True),
        (3, d("100.500"), "c", snap, resnap, False),
        (4, d("0.875"), "d", snap, None, True),
        (8, d("8.250"), "h", resnap, None, True),
    ]
    assert [row for row in before if row[0] in (1, 4)] == [row for row in after if row[0] in (1, 4)]
    soft = soft_rows(config, source.soft, BEFORE_ALTER)
    deleted_at = soft[2][-1]  # each table's snapshot has its own moment
    assert deleted_at is not None and started <= deleted_at <= ended
    assert soft == [
        (1, d("13.250"), "a", None), (2, d("7.125"), "b-new", None), (3, d("100.500"), "c", deleted_at),
        (4, d("0.875"), "d", None), (8, d("8.250"), "h", None),
    ]
    pipeline.sync(until_caught_up=True)
    assert all(report.matches for report in reconcile(pipeline))


def test_a_mode_change_needs_a_resnapshot(mariadb, database, make_config) -> None:
    source = Source(mariadb, database)
    Pipeline(make_config([source.hist], pipeline="modes")).snapshot()
    config = make_config([source.hist], pipeline="modes", sink__tables={source.hist: {"mode": "history"}})
    pipeline = Pipeline(config)
    source.transaction(0, "UPDATE {t} SET amount = 13.25 WHERE id = 1")
    (result,) = pipeline.sync()[0].tables
    assert result.error is not None and "mirror mode and the config says history" in result.error
    assert "binlake snapshot --table" in result.error

    pipeline.snapshot()  # starts the table afresh as a history table
    snap = snapshot_time(config, source.hist)
    assert [row[3:] for row in history_rows(config, source.hist, BEFORE_ALTER)] == [(snap, None, True)] * 4


def test_history_behind_a_prepared_xa_branch_gets_each_version_once(mariadb, database, make_config) -> None:
    """A table held before an XA PREPARE reads the transactions after it again: their versions come once."""
    source = Source(mariadb, database)
    config = make_config([source.hist], sink__tables={source.hist: {"mode": "history"}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    snap = snapshot_time(config, source.hist)
    try:
        sql(mariadb, f"SET TIMESTAMP = {BASE}", "XA START 'modes_held'",
            f"UPDATE {source.hist} SET amount = 4.375 WHERE id = 4", "XA END 'modes_held'", "XA PREPARE 'modes_held'")
        sql(mariadb, f"SET TIMESTAMP = {BASE + 1}", f"UPDATE {source.hist} SET amount = 13.25 WHERE id = 1")
        sql(mariadb, f"SET TIMESTAMP = {BASE + 2}", f"UPDATE {source.hist} SET amount = 14.75 WHERE id = 1")
        pipeline.sync(until_caught_up=True)
        sql(mariadb, f"SET TIMESTAMP = {BASE + 3}", "XA COMMIT 'modes_held'")
    finally:
        if any(bytes(row[3]).startswith(b"modes_held") for row in sql(mariadb, "XA RECOVER")):
            sql(mariadb, "XA ROLLBACK 'modes_held'")
    pipeline.sync(until_caught_up=True)
    d = Decimal
    assert history_rows(config, source.hist, BEFORE_ALTER) == [
        (1, d("12.250"), "a", snap, at(1), False),
        (1, d("13.250"), "a", at(1), at(2), False),
        (1, d("14.750"), "a", at(2), None, True),
        (2, d("7.125"), "b", snap, None, True),
        (3, d("100.500"), "c", snap, None, True),
        (4, d("0.875"), "d", snap, at(3), False),
        (4, d("4.375"), "d", at(3), None, True),
    ]
    assert all(report.matches for report in reconcile(pipeline))
