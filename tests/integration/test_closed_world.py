"""The reader's closed world on the real MariaDB: XA transactions, partial rollbacks, compressed events,
statements inside transactions, and a table whose rows cannot be decoded — each applied exactly as the
source shows it, or the affected table stops loudly while the others carry on.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from cdc_lib.binlog import batch
from cdc_lib.binlog.ddl import table_effects
from cdc_lib.binlog.table_rows import TableDecoder
from cdc_lib.changes.events import TableChanges
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import delta_rows, source_rows, sql
from tests.integration.conftest import assert_each_change_applied_once


def _table(server: LocalMariaDB, name: str, *, engine: str = "InnoDB", rows: int = 3) -> None:
    sql(server, f"CREATE TABLE {name} (id INT PRIMARY KEY, v VARCHAR(40), n DECIMAL(9,6)) ENGINE={engine}")
    for number in range(1, rows + 1):
        sql(server, f"INSERT INTO {name} VALUES ({number * 100}, 'seed{number}', {number}.000001)")


def _xa(server: LocalMariaDB, xid: str, *statements: str) -> None:
    """XA START … XA PREPARE on one connection, which then closes: the branch stays prepared, detached."""
    sql(server, f"XA START '{xid}'", *statements, f"XA END '{xid}'", f"XA PREPARE '{xid}'")


def _master(server: LocalMariaDB) -> tuple[str, int]:
    row = sql(server, "SHOW MASTER STATUS")[0]
    return str(row[0]), int(row[1])


# -- XA ----------------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_branch_left_prepared(mariadb: LocalMariaDB, database: str) -> Iterator[None]:
    """A failing test must not leave a prepared branch on the shared server (it holds locks, and every later
    snapshot would start before it). It asks for `database` so that it runs before the DROP DATABASE."""
    yield
    for _, gtrid_length, _, data in sql(mariadb, "XA RECOVER"):
        xid = bytes(data)[: int(gtrid_length)].decode()
        if xid in _XIDS:
            sql(mariadb, f"XA ROLLBACK '{xid}'")


_XIDS = {"gone", "one", "split", "slow", "straddle", "purged"}


def test_xa_rollback_leaves_nothing_and_a_one_phase_commit_lands(mariadb, database, make_config) -> None:
    table = f"{database}.t"
    _table(mariadb, table)
    config = make_config([table])
    pipeline = Pipeline(config)
    pipeline.snapshot()

    _xa(mariadb, "gone", f"INSERT INTO {table} VALUES (1, 'never existed', -0.250000)",
        f"UPDATE {table} SET v = 'rolled back' WHERE id = 100", f"DELETE FROM {table} WHERE id = 200")
    sql(mariadb, "XA ROLLBACK 'gone'")
    sql(mariadb, "XA START 'one'", f"INSERT INTO {table} VALUES (2, 'one phase', 0.000001)",
        f"UPDATE {table} SET n = -999.999999 WHERE id = 300", "XA END 'one'", "XA COMMIT 'one' ONE PHASE")
    pipeline.sync(until_caught_up=True)

    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert not [row for row in delta_rows(config, table) if row[0] == 1]
    assert (2, "one phase", Decimal("0.000001")) in delta_rows(config, table)


def test_xa_committed_after_a_batch_boundary_lands_exactly_once(mariadb, database, make_config) -> None:
    table, other = f"{database}.t", f"{database}.other"
    _table(mariadb, table)
    _table(mariadb, other, rows=1)
    config = make_config([table, other])
    pipeline = Pipeline(config)
    pipeline.snapshot()

    before_prepare = _master(mariadb)
    _xa(mariadb, "split", f"INSERT INTO {table} VALUES (10, 'xa row', 10.250000)",
        f"UPDATE {table} SET v = 'xa update' WHERE id = 100")
    # Later transactions on the same table (other rows) and on another table commit before the XA does.
    sql(mariadb, f"INSERT INTO {table} VALUES (11, 'later', -0.000001)", f"UPDATE {table} SET n = 2.5 WHERE id = 200")
    sql(mariadb, f"INSERT INTO {other} VALUES (1, 'moves on', 1)")
    pipeline.sync(until_caught_up=True)

    # The prepared rows are invisible at the source and absent from Delta; later rows are there.
    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert delta_rows(config, other) == source_rows(mariadb, other)
    state = pipeline.read_state().tables
    held = state[table].position
    assert (held.file, held.pos) == before_prepare, "the offset must stay before the unresolved XA PREPARE"
    assert (state[other].position.file, state[other].position.pos) > before_prepare

    sql(mariadb, "XA COMMIT 'split'")
    sql(mariadb, f"INSERT INTO {table} VALUES (12, 'after commit', 12)")
    pipeline.sync(until_caught_up=True)
    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert (10, "xa row", Decimal("10.250000")) in delta_rows(config, table)
    assert next(row for row in delta_rows(config, table) if row[0] == 100)[1] == "xa update"
    assert pipeline.read_state().tables[table].position > held
    assert_each_change_applied_once(config, table)


def test_small_batches_never_end_inside_an_xa_and_still_make_progress(mariadb, database, make_config) -> None:
    """With one row change per batch, a table held before a prepared branch still reaches the binlog end."""
    table = f"{database}.t"
    _table(mariadb, table)
    config = make_config([table], batch__max_events=1)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    _xa(mariadb, "slow", *(f"INSERT INTO {table} VALUES ({number}, 'xa', {number}.5)" for number in range(1, 4)))
    for number in range(20, 26):
        sql(mariadb, f"INSERT INTO {table} VALUES ({number}, 'later', -{number}.000001)")
    results = pipeline.sync(until_caught_up=True)
    assert len(results) < 20
    assert delta_rows(config, table) == source_rows(mariadb, table)

    sql(mariadb, "XA COMMIT 'slow'")
    pipeline.sync(until_caught_up=True)
    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert [row[0] for row in delta_rows(config, table)] == [1, 2, 3, 20, 21, 22, 23, 24, 25, 100, 200, 300]
    assert_each_change_applied_once(config, table)


def test_xa_prepared_before_the_snapshot_and_committed_after_lands(mariadb, database, make_config) -> None:
    table = f"{database}.t"
    _table(mariadb, table)
    _xa(mariadb, "straddle", f"INSERT INTO {table} VALUES (5, 'prepared first', 5.000005)",
        f"UPDATE {table} SET v = 'changed by xa' WHERE id = 300")
    config = make_config([table])
    pipeline = Pipeline(config)
    try:
        pipeline.snapshot()
    finally:
        sql(mariadb, "XA COMMIT 'straddle'")
    pipeline.sync(until_caught_up=True)

    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert (5, "prepared first", Decimal("5.000005")) in delta_rows(config, table)


def test_a_prepared_xa_whose_prepare_was_purged_stops_the_snapshot(mariadb, database, make_config) -> None:
    from cdc_lib.errors import TableError
    from tests.integration.binlog_purge import purge_all_but_newest

    table = f"{database}.t"
    _table(mariadb, table)
    _xa(mariadb, "purged", f"INSERT INTO {table} VALUES (6, 'prepared, then its binlog purged', 6.000006)")
    purge_all_but_newest(mariadb)
    pipeline = Pipeline(make_config([table]))
    try:
        with pytest.raises(TableError, match="commit or roll back the prepared XA transactions"):
            pipeline.snapshot()
        assert table not in pipeline.read_state().tables
    finally:
        sql(mariadb, "XA ROLLBACK 'purged'")
    pipeline.snapshot()  # the remedy the error names
    assert table in pipeline.read_state().tables


# -- savepoints and logged rollbacks --------------------------------------------------------------------------


def test_partial_and_full_rollbacks_keep_only_what_the_source_kept(mariadb, database, make_config) -> None:
    db = database
    innodb, myisam, aria = f"{db}.inno", f"{db}.mis", f"{db}.ari"
    _table(mariadb, innodb)
    _table(mariadb, myisam, engine="MyISAM")
    _table(mariadb, aria, engine="Aria")
    config = make_config([innodb, myisam, aria])
    pipeline = Pipeline(config)
    pipeline.snapshot()

    sql(
        mariadb,
        "BEGIN",
        f"INSERT INTO {innodb} VALUES (1, 'before savepoint', 0.000001)",
        f"UPDATE {innodb} SET v = 'kept update' WHERE id = 100",
        "SAVEPOINT s1",
        f"INSERT INTO {innodb} VALUES (2, 'rolled back', -1.250000)",
        f"UPDATE {innodb} SET v = 'rolled back' WHERE id = 200",
        f"DELETE FROM {innodb} WHERE id = 300",
        f"INSERT INTO {myisam} VALUES (2, 'persists', 2.000002)",
        "/* app */ ROLLBACK TO SAVEPOINT s1",
        f"INSERT INTO {innodb} VALUES (3, 'after rollback to', 3.000003)",
        "SAVEPOINT s2",
        f"UPDATE {aria} SET v = 'aria persists' WHERE id = 100",
        f"UPDATE {innodb} SET n = 7 WHERE id = 3",
        "ROLLBACK TO s2",
        "RELEASE SAVEPOINT s2",
        "COMMIT",
    )
    sql(mariadb, "BEGIN", f"INSERT INTO {innodb} VALUES (7, 'whole rollback', 7)",
        f"INSERT INTO {myisam} VALUES (7, 'persists too', 7)", f"DELETE FROM {aria} WHERE id = 200", "ROLLBACK")
    pipeline.sync(until_caught_up=True)

    for table in (innodb, myisam, aria):
        assert delta_rows(config, table) == source_rows(mariadb, table), table
    assert [row[0] for row in delta_rows(config, innodb)] == [1, 3, 100, 200, 300]
    assert next(row for row in delta_rows(config, innodb) if row[0] == 3)[2] == Decimal("3.000003")


# -- compressed binlog events (MariaDB log_bin_compress) ------------------------------------------------------


@pytest.fixture
def compressed_binlog(mariadb: LocalMariaDB) -> Iterator[None]:
    """log_bin_compress=ON for one test; the MariaDB is shared by the session, so it is always reset."""
    sql(mariadb, "SET GLOBAL log_bin_compress = ON")
    try:
        yield
    finally:
        sql(mariadb, "SET GLOBAL log_bin_compress = OFF")


def test_compressed_rows_and_statements_are_decoded(mariadb, database, make_config, compressed_binlog) -> None:
    table = f"{database}.big"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, note VARCHAR(2000), amount DECIMAL(14,6), "
                 "at DATETIME(6) NULL)")
    sql(mariadb, f"INSERT INTO {table} VALUES (1, REPEAT('seed', 100), 1.5, '2024-01-01 00:00:00.000001')")
    config = make_config([table])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    start = _master(mariadb)

    sql(
        mariadb,
        "BEGIN",
        f"INSERT INTO {table} SELECT seq, CONCAT(REPEAT('x', 300 + seq), 'ü', seq), -seq - 0.000001, "
        f"TIMESTAMP('2024-02-29 23:59:59.999999') - INTERVAL seq SECOND FROM {database}.seq_2_to_40",
        f"UPDATE {table} SET note = CONCAT(note, REPEAT('u', 280)), amount = amount * 2 WHERE id % 3 = 0",
        f"DELETE FROM {table} WHERE id % 7 = 0",
        "COMMIT",
    )
    sql(mariadb, f"ALTER TABLE {table} ADD COLUMN extra INT NULL "
                 f"COMMENT '{'a long comment that makes the statement compressed ' * 8}'")
    sql(mariadb, f"INSERT INTO {table} VALUES (99, REPEAT('after alter ', 40), 0.000001, NULL, -7)")

    kinds = {str(row[2]) for row in sql(mariadb, f"SHOW BINLOG EVENTS IN '{start[0]}' FROM {start[1]}")}
    assert {"Write_rows_compressed_v1", "Update_rows_compressed_v1", "Delete_rows_compressed_v1",
            "Query_compressed"} <= kinds, kinds

    pipeline.sync(until_caught_up=True)
    assert [status.error for status in pipeline.status() if status.error] == []
    assert delta_rows(config, table) == source_rows(mariadb, table)
    assert len(delta_rows(config, table)) == 1 + 39 - 5 + 1


# -- statements inside a transaction ------------------------------------------------------------------------------


def test_statement_logged_dml_inside_a_transaction_never_passes_silently(mariadb, database, make_config) -> None:
    assert table_effects("INSERT INTO d.t VALUES (1)", "d", {"d.t"})[0].kind == "stop"
    table, other = f"{database}.t", f"{database}.other"
    _table(mariadb, table)
    _table(mariadb, other, rows=1)
    config = make_config([table, other])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    before = pipeline.read_state().tables[table].position
    sql(mariadb, "SET SESSION binlog_format = 'STATEMENT'", "BEGIN",
        f"INSERT INTO {table} VALUES (1, 'statement', 1)", f"UPDATE {table} SET v = 's' WHERE id = 100", "COMMIT")
    sql(mariadb, f"INSERT INTO {other} VALUES (5, 'row based', 5)")
    pipeline.sync(until_caught_up=True)

    state = pipeline.read_state().tables
    assert state[table].error, "rows changed by a logged statement must stop the table"
    assert state[table].position == before
    assert delta_rows(config, other) == source_rows(mariadb, other)


# -- one table's undecodable rows --------------------------------------------------------------------------------


def test_a_row_decode_failure_stops_only_that_table(mariadb, database, make_config, monkeypatch) -> None:
    good, bad = f"{database}.good", f"{database}.bad"
    _table(mariadb, good)
    _table(mariadb, bad)
    config = make_config([good, bad])
    pipeline = Pipeline(config)
    pipeline.snapshot()

    real_fold = batch.fold_rows

    def failing_fold(event: Any, decoder: TableDecoder, changes: TableChanges, ahead: Any = None) -> int:
        if decoder.schema.table.name == bad and any(row.get("values", {}).get("id") == 66 for row in event.rows):
            raise UnicodeDecodeError("latin1", b"\x81", 0, 1, "a byte Python's codec rejects")
        return real_fold(event, decoder, changes, ahead)

    monkeypatch.setattr(batch, "fold_rows", failing_fold)
    sql(mariadb, f"INSERT INTO {bad} VALUES (1, 'fine', 1)", f"INSERT INTO {good} VALUES (1, 'fine', 1)")
    before_bad = _master(mariadb)
    sql(mariadb, "BEGIN", f"INSERT INTO {good} VALUES (66, 'same transaction', 66)",
        f"INSERT INTO {bad} VALUES (66, 'undecodable', 66)", "COMMIT")
    sql(mariadb, f"INSERT INTO {good} VALUES (67, 'later', 67)", f"INSERT INTO {bad} VALUES (67, 'later', 67)")

    results = pipeline.sync(until_caught_up=True)
    errors = [table.error for result in results for table in result.tables if table.table == bad and table.error]
    assert errors and "UnicodeDecodeError" in errors[0] and "remedy" in errors[0] and f"[{bad}]" in errors[0]
    state = pipeline.read_state().tables
    assert state[bad].error == errors[0]
    assert (state[bad].position.file, state[bad].position.pos) == before_bad
    assert not state[good].error
    assert delta_rows(config, good) == source_rows(mariadb, good)
    assert [row[0] for row in delta_rows(config, bad)] == [1, 100, 200, 300]
    statuses = {status.table: status for status in pipeline.status()}
    assert statuses[good].lag_bytes == 0

