"""Schema policies per table (docs/ddl.md#schema-policies): `stop` stops at any change of shape, `approve` holds the
table at the change (durably, across restarts) until a person approves or rejects it; the other tables flow."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from cdc_lib.errors import TableError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.pipeline.sync import SyncResult
from tests.conftest import run_cli, scan_rows, source_rows, sql, write_config_file
from tests.integration.conftest import cli_in_process


def _errors(results: list[SyncResult], table: str) -> list[str]:
    return [entry.error for result in results for entry in result.tables if entry.table == table and entry.error]


@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_an_approval_gate_holds_the_table_across_restarts_and_evolves_it_exactly(
    mariadb, database, make_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, writer: str,
) -> None:
    db = database
    table, other = f"{db}.t", f"{db}.other"
    sql(
        mariadb,
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10))",
        f"CREATE TABLE {db}.other (id INT PRIMARY KEY)",
        f"INSERT INTO {db}.t VALUES (1, 'x'), (2, 'y')",
    )
    config = make_config([table, other], sink__tables={table: {"schema_policy": "approve"}}, batch__writer=writer)
    Pipeline(config).snapshot()
    alter = f"ALTER TABLE {db}.t ADD COLUMN c INT NOT NULL DEFAULT 7"
    sql(
        mariadb,
        f"INSERT INTO {db}.t VALUES (3, 'before')",
        alter,
        f"INSERT INTO {db}.t VALUES (4, 'after', 40)",
        f"INSERT INTO {db}.other VALUES (1)",
    )
    results = Pipeline(config).sync(until_caught_up=True)
    errors = _errors(results, table)
    assert errors and "awaiting approval" in errors[0] and alter in errors[0]
    assert "binlake schema approve --table" in errors[0]
    path = Pipeline(config).table_path(table)
    assert sorted(scan_rows(path)) == [(1, "x"), (2, "y"), (3, "before")], "the row before the ALTER, none after"
    assert scan_rows(Pipeline(config).table_path(other)) == [(1,)]

    # More changes while it waits; the other table flows, the held one keeps its Delta table and its offset.
    sql(mariadb, f"UPDATE {db}.t SET c = 9, a = 'z' WHERE id = 1", f"INSERT INTO {db}.other VALUES (2)")
    held = Pipeline(config).read_state().tables[table]
    results = Pipeline(config).sync(until_caught_up=True)
    assert sorted(scan_rows(Pipeline(config).table_path(other))) == [(1,), (2,)]
    assert sorted(scan_rows(path)) == [(1, "x"), (2, "y"), (3, "before")]
    # A restart: a new Pipeline reads the pending change from the offset store.
    restarted = Pipeline(config)
    after = restarted.read_state().tables[table]
    assert after.position == held.position and after.schema_change is not None
    assert after.schema_change["statement"] == alter and not after.schema_change["approved"]
    status = {entry.table: entry for entry in restarted.status()}
    assert "awaiting approval" in (status[table].error or "")
    assert status[table].schema_change == after.schema_change and not status[other].error

    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    code, out, _ = cli_in_process(config_path, "schema", "approve", "--table", table,
                                  monkeypatch=monkeypatch, capsys=capsys)
    assert code == 0 and "approved" in out and alter in out
    with pytest.raises(TableError, match="approved"):
        Pipeline(config).approve_schema_change(table)

    results = Pipeline(config).sync(until_caught_up=True)
    assert not _errors(results, table)
    assert sorted(scan_rows(path, ["id", "a", "c"])) == source_rows(mariadb, table)
    final = Pipeline(config).read_state().tables[table]
    assert final.error is None and final.schema_change is None
    assert final.ddl_log[-1]["action"] == "added columns ['c']"
    # And the table flows on afterwards.
    sql(mariadb, f"INSERT INTO {db}.t VALUES (5, 'later', 50)")
    Pipeline(config).sync(until_caught_up=True)
    assert sorted(scan_rows(path, ["id", "a", "c"])) == source_rows(mariadb, table)


def test_a_rejected_change_stops_the_table_until_a_re_snapshot(mariadb, database, make_config) -> None:
    db = database
    table = f"{db}.t"
    sql(mariadb, f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {db}.t VALUES (1, 1)")
    config = make_config([table], sink__tables={table: {"schema_policy": "approve"}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"ALTER TABLE {db}.t MODIFY v BIGINT", f"INSERT INTO {db}.t VALUES (2, 2)")
    assert "awaiting approval" in _errors(pipeline.sync(until_caught_up=True), table)[0]
    decided = pipeline.reject_schema_change(table)
    assert not decided.approved
    state = pipeline.read_state().tables[table]
    assert state.error and "rejected" in state.error and "binlake snapshot --table" in state.error
    assert state.schema_change is None
    with pytest.raises(TableError, match="waits for no schema change"):
        pipeline.approve_schema_change(table)
    pipeline.sync(until_caught_up=True)
    assert scan_rows(pipeline.table_path(table)) == [(1, 1)], "a rejected change is never applied"
    pipeline.snapshot([table])
    sql(mariadb, f"INSERT INTO {db}.t VALUES (3, 3)")
    pipeline.sync(until_caught_up=True)
    assert sorted(scan_rows(pipeline.table_path(table))) == source_rows(mariadb, table)


def test_stop_stops_at_any_change_of_shape_and_resumes_under_evolve(mariadb, database, make_config) -> None:
    db = database
    table, other = f"{db}.t", f"{db}.other"
    sql(
        mariadb,
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10))",
        f"CREATE TABLE {db}.other (id INT PRIMARY KEY)",
        f"INSERT INTO {db}.t VALUES (1, 'x')",
    )
    name = "stoppolicy"
    config = make_config([table, other], pipeline=name, sink__tables={table: {"schema_policy": "stop"}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(
        mariadb,
        f"ALTER TABLE {db}.t ADD INDEX by_a (a)",  # no change of shape: passes
        f"INSERT INTO {db}.t VALUES (2, 'y')",
        f"ALTER TABLE {db}.t MODIFY a VARCHAR(20)",  # the same Delta type, yet a change of shape
        f"INSERT INTO {db}.t VALUES (3, 'a longer one')",
        f"INSERT INTO {db}.other VALUES (1)",
    )
    errors = _errors(pipeline.sync(until_caught_up=True), table)
    assert errors and "schema_policy stop" in errors[0] and "MODIFY a VARCHAR(20)" in errors[0]
    assert sorted(scan_rows(pipeline.table_path(table))) == [(1, "x"), (2, "y")]
    assert scan_rows(pipeline.table_path(other)) == [(1,)]

    # The remedy without a re-snapshot: the policy changed to evolve, the table replayed from before the ALTER.
    evolving = Pipeline(make_config([table, other], pipeline=name))
    evolving.resume(table)
    assert not _errors(evolving.sync(until_caught_up=True), table)
    assert sorted(scan_rows(evolving.table_path(table))) == source_rows(mariadb, table)


def test_a_sync_killed_after_the_approved_evolution_replays_it_exactly(
    mariadb, database, make_config, tmp_path: Path,
) -> None:
    """Killed after the approved ALTER evolved the Delta table, before the offsets were saved: the state still holds
    the approval at the same position, so the rerun meets the ALTER again and applies it once more, exactly."""
    db = database
    table = f"{db}.t"
    sql(mariadb, f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10))", f"INSERT INTO {db}.t VALUES (1, 'x')")
    config = make_config([table], sink__tables={table: {"schema_policy": "approve"}})
    Pipeline(config).snapshot()
    alter = f"ALTER TABLE {db}.t ADD COLUMN c INT NOT NULL"  # back-filled from the source (the implicit 0)
    sql(mariadb, alter, f"INSERT INTO {db}.t VALUES (2, 'y', 5)")
    assert "awaiting approval" in _errors(Pipeline(config).sync(until_caught_up=True), table)[0]
    Pipeline(config).approve_schema_change(table)
    config_path = write_config_file(config, tmp_path / "binlake.yaml")
    crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": "before_offset_write"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    kept = Pipeline(config).read_state().tables[table].schema_change
    assert kept is not None and kept["approved"] and kept["statement"] == alter, "the offsets did not move"

    pipeline = Pipeline(config)
    assert not _errors(pipeline.sync(until_caught_up=True), table)
    assert sorted(scan_rows(pipeline.table_path(table), ["id", "a", "c"])) == source_rows(mariadb, table)
    final = pipeline.read_state().tables[table]
    assert final.error is None and final.schema_change is None and final.consistent
