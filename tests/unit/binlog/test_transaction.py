"""The open transaction's state: savepoint segments, partial and full rollbacks by engine, XA parking."""

from __future__ import annotations

from cdc_lib.binlog.transaction import (
    OpenTransaction,
    PreparedXas,
    Transactional,
    XaId,
    engine_kind,
    parse_xid,
    transaction_control,
)
from cdc_lib.model.positions import BinlogPosition

ENGINES: dict[str, Transactional] = {"db.inno": "yes", "db.mis": "no", "db.odd": "unknown"}


def _transaction() -> OpenTransaction:
    return OpenTransaction(BinlogPosition("bin.000001", 400), lambda table: (0,))


def _rows(transaction: OpenTransaction) -> dict[str, dict]:
    return {table: changes.rows for table, changes in transaction.folded().items()}


def test_rollback_to_drops_transactional_rows_after_the_savepoint_and_keeps_non_transactional() -> None:
    transaction = _transaction()
    transaction.changes_for("db.inno").insert((1, "before"))
    transaction.savepoint("s1")
    transaction.changes_for("db.inno").insert((2, "after"))
    transaction.changes_for("db.inno").update((1, "before"), (1, "changed"))
    transaction.changes_for("db.mis").insert((9, "persists"))
    assert transaction.rollback_to("S1", ENGINES.__getitem__) == set()  # names are case-insensitive
    transaction.changes_for("db.inno").insert((3, "later"))
    assert _rows(transaction) == {
        "db.inno": {(1,): ("upsert", (1, "before")), (3,): ("upsert", (3, "later"))},
        "db.mis": {(9,): ("upsert", (9, "persists"))},
    }
    assert transaction.row_changes == 3

    # The savepoint survives its ROLLBACK TO: a second one drops row 3 again.
    transaction.rollback_to("s1", ENGINES.__getitem__)
    assert _rows(transaction)["db.inno"] == {(1,): ("upsert", (1, "before"))}


def test_nested_savepoints_release_and_a_full_rollback() -> None:
    transaction = _transaction()
    transaction.savepoint("a")
    transaction.changes_for("db.inno").insert((1, "a"))
    transaction.savepoint("b")
    transaction.changes_for("db.inno").insert((2, "b"))
    transaction.release("b")
    transaction.rollback_to("b", ENGINES.__getitem__)  # released: rolls back to the transaction start
    assert transaction.empty

    transaction = _transaction()
    transaction.changes_for("db.inno").insert((1, "x"))
    transaction.changes_for("db.mis").delete((5, "y"))
    transaction.savepoint("s")
    transaction.changes_for("db.mis").insert((6, "z"))
    assert transaction.rollback(ENGINES.__getitem__) == set()
    assert _rows(transaction) == {"db.mis": {(5,): ("delete", None), (6,): ("upsert", (6, "z"))}}


def test_an_unknown_engine_is_reported_by_a_rollback() -> None:
    transaction = _transaction()
    transaction.savepoint("s")
    transaction.changes_for("db.odd").insert((1, "?"))
    assert transaction.rollback_to("s", ENGINES.__getitem__) == {"db.odd"}


def test_engine_kinds() -> None:
    assert engine_kind("InnoDB") == "yes" and engine_kind("MyISAM") == "no" and engine_kind("Aria") == "no"
    assert engine_kind("MEMORY") == "no" and engine_kind("Spider") == "unknown" and engine_kind(None) == "unknown"


def test_prepared_xa_holds_its_tables_until_resolved() -> None:
    prepared = PreparedXas()
    first = _transaction()
    first.changes_for("db.inno").insert((1, "xa"))
    xid = XaId(b"x1")
    prepared.prepare(first, xid)
    second = OpenTransaction(BinlogPosition("bin.000001", 900), lambda table: (0,))
    second.changes_for("db.inno").insert((2, "xa2"))
    second.changes_for("db.mis").insert((3, "xa2"))
    prepared.prepare(second, XaId(b"x2", b"q", 7))
    assert prepared.holding("db.inno") == BinlogPosition("bin.000001", 400)
    assert prepared.holding("db.mis") == BinlogPosition("bin.000001", 900)
    assert prepared.holding("db.other") is None
    resolved = prepared.resolve(xid)
    assert resolved is not None and resolved.changes["db.inno"].rows == {(1,): ("upsert", (1, "xa"))}
    assert prepared.holding("db.inno") == BinlogPosition("bin.000001", 900)
    assert prepared.resolve(XaId(b"x2")) is None  # another branch qualifier and format
    assert prepared.resolve(XaId(b"x2", b"q", 7)) is not None and not prepared.by_xid


def test_xids_as_logged_and_as_typed() -> None:
    assert parse_xid(" X'7831',X'',1") == XaId(b"x1")
    assert parse_xid(" X'6162',X'7171',42") == XaId(b"ab", b"qq", 42)
    assert parse_xid(" 'x1'") == XaId(b"x1")
    assert parse_xid(" 'it''s', 'b'") == XaId(b"it's", b"b")
    assert parse_xid(" 0x6869") == XaId(b"hi")


def test_transaction_control_statements() -> None:
    def kind(statement: str) -> tuple[str, str] | None:
        control = transaction_control(statement)
        return None if control is None else (control.kind, control.name)

    assert kind("BEGIN") == ("begin", "")
    assert kind("/* app */ BEGIN") == ("begin", "")
    assert kind("START TRANSACTION READ WRITE") == ("begin", "")
    assert kind("COMMIT") == ("commit", "")
    assert kind("-- note\nCOMMIT WORK") == ("commit", "")
    assert kind("ROLLBACK") == ("rollback", "")
    assert kind("ROLLBACK TO `s1`") == ("rollback_to", "s1")
    assert kind("rollback work to savepoint sp_2") == ("rollback_to", "sp_2")
    assert kind("SAVEPOINT `we``ird`") == ("savepoint", "we`ird")
    assert kind("RELEASE SAVEPOINT s") == ("release", "s")
    assert kind("XA END X'7831',X'',1") == ("xa_end", "")
    assert kind("XA START X'7831',X'',1") == ("begin", "") or kind("XA START X'7831',X'',1") == ("xa_start", "")
    control = transaction_control("XA COMMIT X'7832',X'',1")
    assert control is not None and control.kind == "xa_commit" and control.xid == XaId(b"x2")
    assert not control.one_phase
    one_phase = transaction_control("XA COMMIT 'x3' ONE PHASE")
    assert one_phase is not None and one_phase.one_phase
    rolled = transaction_control("XA ROLLBACK X'7831',X'',1")
    assert rolled is not None and rolled.kind == "xa_rollback"
    # Not transaction control: read by ddl.table_effects instead.
    for statement in ("INSERT INTO t VALUES (1)", "COMMITTED_TABLE_UPDATE()", "BEGIN_X", "/*!40000 ALTER TABLE t */",
                      "ROLLBACKS", "CREATE TABLE savepoints (id INT)"):
        assert transaction_control(statement) is None, statement
