"""binlake's optional metadata columns (`sink.metadata_columns`, docs/readers.md#metadata-columns) on mirror tables:
`_binlake_source_ts` is the source commit time of each row's last change, `_binlake_applied_ts` the time of the
batch (or snapshot) that wrote it, recorded before the commit so that any replay writes the same values.

The source stamps transactions with `SET TIMESTAMP`, which is the time MariaDB writes into the binlog event
headers of the transaction: the expected source times do not come from binlake's decoder. The Delta tables are
read with delta-rs (`deltalake`), not with binlake's Spark.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import time
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_lib.changes import metadata_columns
from cdc_lib.changes.events import CommitStamp, TableChanges
from cdc_lib.changes.metadata_columns import StampedChanges
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from cdc_lib.sink import merge
from cdc_lib.source import server as mysql
from tests.conftest import run_cli, source_rows, sql, write_config_file

BASE = int(time.time()) + 3 * 3600  # hours ahead of the real clock: never the time of a snapshot
SOURCE_TS, APPLIED_TS = "_binlake_source_ts", "_binlake_applied_ts"


def at(seconds: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(BASE + seconds, dt.UTC)


def make_items(mariadb: Any, database: str) -> str:
    sql(mariadb, f"CREATE TABLE {database}.items (id INT PRIMARY KEY, qty INT NOT NULL, label VARCHAR(20))",
        f"INSERT INTO {database}.items VALUES (1, 10, 'a'), (2, 20, 'b'), (3, 30, 'c'), (4, 40, 'd')")
    return f"{database}.items"


def commit_at(mariadb: Any, seconds: int, *statements: str) -> None:
    """One transaction whose binlog events carry BASE + seconds."""
    sql(mariadb, f"SET TIMESTAMP = {BASE + seconds}", "START TRANSACTION", *statements, "COMMIT")


def server_now(mariadb: Any) -> dt.datetime:
    ((now,),) = sql(mariadb, "SELECT UTC_TIMESTAMP(6)")
    return now.replace(tzinfo=dt.UTC)


def binlog_commit_time(mariadb: Any, statement: str) -> dt.datetime:
    """Run `statement` (autocommit) and return its commit event's header time as `mariadb-binlog` prints it
    from the binlog file itself (not through binlake's reader)."""
    ((log_file, start, *_),) = sql(mariadb, "SHOW MASTER STATUS")
    sql(mariadb, statement)
    ((_, stop, *_),) = sql(mariadb, "SHOW MASTER STATUS")
    printed = subprocess.run(
        ["mariadb-binlog", f"--start-position={start}", f"--stop-position={stop}", str(mariadb.datadir / log_file)],
        capture_output=True, text=True, check=True, env={**os.environ, "TZ": "UTC"},
    ).stdout
    (stamp,) = re.findall(r"^#(\d{6} +\d{1,2}:\d\d:\d\d) server id .*\bXid = ", printed, re.MULTILINE)
    return dt.datetime.strptime(" ".join(stamp.split()), "%y%m%d %H:%M:%S").replace(tzinfo=dt.UTC)


def delta_table(config: Any, table: str) -> list[dict[str, Any]]:
    """The table's rows by key, as delta-rs reads them."""
    rows = DeltaTable(Pipeline(config).table_path(table)).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda row: row["id"])


def delta_columns(config: Any, table: str) -> list[str]:
    return [field.name for field in DeltaTable(Pipeline(config).table_path(table)).schema().fields]


def applied_ats(config: Any, table: str) -> dict[int, dt.datetime]:
    """Each batch commit's recorded applied time, by batch sequence (the commit's `batch_seq`)."""
    found = {}
    for entry in DeltaTable(Pipeline(config).table_path(table)).history():
        metadata = json.loads(entry.get("userMetadata") or "{}")
        if metadata_columns.APPLIED_AT in metadata:
            found[int(metadata["batch_seq"])] = dt.datetime.fromisoformat(metadata[metadata_columns.APPLIED_AT])
    return found


def data_of(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((row["id"], row["qty"], row["label"]) for row in rows)


@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_columns_hold_commit_and_batch_times(writer, mariadb, database, make_config) -> None:
    table = make_items(mariadb, database)
    # One engine writes both the snapshot's waves and the batches.
    config = make_config([table], sink__metadata_columns=True, batch__writer=writer, snapshot__writer=writer)
    pipeline = Pipeline(config)
    before_snapshot, server_before = dt.datetime.now(dt.UTC), server_now(mariadb)
    pipeline.snapshot()
    after_snapshot, server_after = dt.datetime.now(dt.UTC), server_now(mariadb)

    rows = delta_table(config, table)
    assert delta_columns(config, table) == ["id", "qty", "label", SOURCE_TS, APPLIED_TS]
    # Snapshot rows: the source server's clock at the snapshot's low watermark, and binlake's when it began.
    assert len({row[SOURCE_TS] for row in rows}) == 1 and len({row[APPLIED_TS] for row in rows}) == 1
    assert server_before <= rows[0][SOURCE_TS] <= server_after
    assert before_snapshot <= rows[0][APPLIED_TS] <= after_snapshot

    commit_at(mariadb, 10, f"UPDATE {table} SET qty = 11 WHERE id = 1", f"INSERT INTO {table} VALUES (5, 50, 'e')")
    commit_at(mariadb, 25, f"UPDATE {table} SET qty = 12 WHERE id = 1", f"DELETE FROM {table} WHERE id = 2")
    commit_at(mariadb, 40, f"UPDATE {table} SET label = 'cc' WHERE id = 3")
    started = dt.datetime.now(dt.UTC)
    (result,) = pipeline.sync()
    ended = dt.datetime.now(dt.UTC)
    assert result.batch_seq is not None

    rows = delta_table(config, table)
    by_id = {row["id"]: row for row in rows}
    assert data_of(rows) == source_rows(mariadb, table)
    # Each row's last change: id 1 last changed at +25 (not +10), 3 at +40, 5 at +10; 4 kept the snapshot's.
    assert by_id[1][SOURCE_TS] == at(25) and by_id[3][SOURCE_TS] == at(40) and by_id[5][SOURCE_TS] == at(10)
    assert by_id[4][SOURCE_TS] == rows[-1][SOURCE_TS] or by_id[4][SOURCE_TS] <= server_after
    applied = applied_ats(config, table)[result.batch_seq]
    assert started <= applied <= ended, "the batch's applied time lies within the batch"
    assert by_id[1][APPLIED_TS] == by_id[3][APPLIED_TS] == by_id[5][APPLIED_TS] == applied
    assert by_id[4][APPLIED_TS] < applied, "a row the batch did not touch keeps its time"
    assert all(report.matches for report in reconcile(pipeline)), "reconcile ignores the metadata columns"

    # A transaction stamped by the server's own clock: the commit event's header time in the binlog file.
    logged = binlog_commit_time(mariadb, f"UPDATE {table} SET qty = 44 WHERE id = 4")
    # An added source column goes before the metadata columns, which stay last.
    sql(mariadb, f"ALTER TABLE {table} ADD COLUMN note VARCHAR(10)")
    commit_at(mariadb, 60, f"UPDATE {table} SET note = 'n' WHERE id = 5")
    pipeline.sync(until_caught_up=True)
    assert delta_columns(config, table) == ["id", "qty", "label", "note", SOURCE_TS, APPLIED_TS]
    by_id = {row["id"]: row for row in delta_table(config, table)}
    assert by_id[4][SOURCE_TS] == logged
    assert by_id[5][SOURCE_TS] == at(60) and by_id[5]["note"] == "n"
    assert all(report.matches for report in reconcile(pipeline))


def test_both_writers_write_the_same_values(mariadb, database, make_config, tmp_path) -> None:
    """The same batch (the same fold, sequence and applied time) written by Spark and by delta-rs."""
    table = make_items(mariadb, database)
    tables = {}
    for writer in ("spark", "delta-rs"):
        config = make_config([table], sink={"path": str(tmp_path / writer)}, sink__metadata_columns=True,
                             offsets={"uri": str(tmp_path / writer / "_offsets")})
        Pipeline(config).snapshot()
        tables[writer] = config
    connection = mysql.connect(tables["spark"].source)
    try:
        schema = mysql.describe_table(connection, TableRef.parse(table))
    finally:
        connection.close()
    applied = dt.datetime(2026, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)

    def fold() -> TableChanges:
        changes = StampedChanges(key_positions=(0,))
        first, second = TableChanges(key_positions=(0,)), TableChanges(key_positions=(0,))
        first.update((1, 10, "a"), (1, 15, "a1"))
        first.insert((9, 90, "new"))
        second.update((1, 15, "a1"), (1, 16, "a2"))
        second.delete((2, 20, "b"))
        changes.merge_from(first, CommitStamp(at(1), 1, None))  # type: ignore[arg-type]
        changes.merge_from(second, CommitStamp(at(2), 2, None))  # type: ignore[arg-type]
        return metadata_columns.with_applied(changes, applied)

    extended: TableSchema = metadata_columns.extended_schema(schema)
    for writer, config in tables.items():
        pipeline = Pipeline(config)
        merge.merge_changes(
            pipeline.spark() if writer == "spark" else None, pipeline.table_path(table), extended, fold(),
            application=f"test:{writer}", txn_version=1, metadata={"batch_seq": 1}, writer=writer,  # type: ignore[arg-type]
        )
    spark_rows, delta_rs_rows = (delta_table(config, table) for config in tables.values())
    written = {1, 9}
    assert [row for row in spark_rows if row["id"] in written] == [row for row in delta_rs_rows if row["id"] in written]
    by_id = {row["id"]: row for row in delta_rs_rows}
    assert (by_id[1][SOURCE_TS], by_id[1][APPLIED_TS], by_id[9][SOURCE_TS]) == (at(2), applied, at(1))
    assert 2 not in by_id
    for config in tables.values():
        fields = DeltaTable(Pipeline(config).table_path(table)).schema().fields
        field_types = {field.name: str(field.type) for field in fields}
        assert field_types[SOURCE_TS] == field_types[APPLIED_TS] == "PrimitiveType(\"timestamp\")"


@pytest.mark.parametrize("failpoint", ["after_delta_commit", "before_delta_commit"])
def test_replay_after_a_crash_writes_the_same_values(failpoint, mariadb, database, make_config, tmp_path) -> None:
    """SIGKILL between the Delta commit and the offset write (the replay is skipped: the committed values stay),
    and before the commit (the rerun is a new batch with its own recorded time, as a run without the crash that
    ran the batch then): either way each row holds its last change's commit time and its batch's recorded time,
    as a crash-free pipeline's table does."""
    table = make_items(mariadb, database)
    config = make_config([table], sink__metadata_columns=True)
    calm = make_config([table], sink={"path": str(tmp_path / "calm")}, sink__metadata_columns=True,
                       offsets={"uri": str(tmp_path / "calm" / "_offsets")})
    Pipeline(config).snapshot()
    Pipeline(calm).snapshot()
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    commit_at(mariadb, 10, f"UPDATE {table} SET qty = 11 WHERE id = 1", f"INSERT INTO {table} VALUES (5, 50, 'e')")
    commit_at(mariadb, 20, f"DELETE FROM {table} WHERE id = 2")

    before = delta_table(config, table)
    crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": failpoint})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    at_crash = delta_table(config, table)
    if failpoint == "before_delta_commit":
        assert at_crash == before, "nothing was committed"
    else:
        assert data_of(at_crash) == source_rows(mariadb, table), "the commit landed"

    Pipeline(config).sync(until_caught_up=True)
    Pipeline(calm).sync(until_caught_up=True)
    recovered, crash_free = delta_table(config, table), delta_table(calm, table)
    if failpoint == "after_delta_commit":
        assert recovered == at_crash, "the replay wrote nothing: the committed values stand"
        reconciled = run_cli(config_path, "reconcile")
        assert reconciled.returncode == 0, reconciled.stdout[-2000:] + reconciled.stderr[-2000:]
    assert data_of(recovered) == data_of(crash_free) == source_rows(mariadb, table)
    recorded, recorded_calm = applied_ats(config, table), applied_ats(calm, table)
    assert len(recorded) == 1 and len(recorded_calm) == 1, "one batch commit each"

    def shape(rows: list[dict[str, Any]], applied: dt.datetime) -> list[tuple[Any, ...]]:
        """Rows with the batch's recorded time as a mark: which rows the batch wrote, and their source times."""
        return [(row["id"], row[SOURCE_TS] if row[APPLIED_TS] == applied else "snapshot") for row in rows]

    (applied,), (applied_calm,) = recorded.values(), recorded_calm.values()
    assert shape(recovered, applied) == shape(crash_free, applied_calm) == [
        (1, at(10)), (3, "snapshot"), (4, "snapshot"), (5, at(10)),
    ]


def test_off_by_default(mariadb, database, make_config) -> None:
    table = make_items(mariadb, database)
    config = make_config([table])
    assert config.sink.metadata_columns is False and not config.sink.metadata_columns_for(table)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    commit_at(mariadb, 5, f"UPDATE {table} SET qty = 11 WHERE id = 1")
    pipeline.sync()
    assert delta_columns(config, table) == ["id", "qty", "label"]
    assert data_of(delta_table(config, table)) == source_rows(mariadb, table)


def test_turning_them_on_for_a_table_without_them_stops_it_with_a_remedy(mariadb, database, make_config) -> None:
    table = make_items(mariadb, database)
    config = make_config([table])
    Pipeline(config).snapshot()
    turned_on = make_config([table], pipeline=config.pipeline, sink__metadata_columns=True)
    commit_at(mariadb, 5, f"UPDATE {table} SET qty = 11 WHERE id = 1")
    pipeline = Pipeline(turned_on)
    pipeline.sync()
    state = pipeline.read_state().tables[table]
    assert state.error is not None and "written without _binlake_source_ts" in state.error
    assert "binlake snapshot --table" in state.error
    assert delta_columns(config, table) == ["id", "qty", "label"]
    pipeline.snapshot(tables=[table], restart=True)
    pipeline.sync(until_caught_up=True)
    rows = delta_table(turned_on, table)
    assert delta_columns(turned_on, table)[-2:] == [SOURCE_TS, APPLIED_TS]
    assert all(row[SOURCE_TS] is not None and row[APPLIED_TS] is not None for row in rows)
    assert data_of(rows) == source_rows(mariadb, table)
