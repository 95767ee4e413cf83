"""Folding for soft-delete and history tables, and how a key's versions become Delta rows (pure logic)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from cdc_lib.changes.events import (
    CommitStamp,
    HistoryChanges,
    RowImages,
    SoftDeleteChanges,
    TableChanges,
    Version,
    batch_changes,
    transaction_changes,
)
from cdc_lib.changes.modes import CurrentVersion, resolve_versions, sequence_of, timestamp_micros
from cdc_lib.model.positions import BinlogPosition

T0 = dt.datetime(2026, 3, 14, 9, 26, 53, tzinfo=dt.UTC)


def stamp(ordinal: int, seconds: int = 0) -> CommitStamp:
    return CommitStamp(T0 + dt.timedelta(seconds=seconds), ordinal, BinlogPosition("bin.000003", 1000 + 100 * ordinal))


def txn(*steps: tuple[str, tuple]) -> RowImages:
    changes = RowImages((0,))
    for kind, rows in steps:
        if kind == "insert":
            changes.insert(rows)
        elif kind == "delete":
            changes.delete(rows)
        elif kind == "update":
            changes.update(*rows)
        else:
            changes.truncate()
    return changes


A = (7, Decimal("12.25"), "a")
A2 = (7, Decimal("7.125"), "a")
B = (9, Decimal("3.5"), "b")


def test_factories_keep_the_mirror_fold_for_mirror_tables() -> None:
    assert type(transaction_changes("mirror", (0,))) is TableChanges
    assert type(batch_changes("mirror", (0,))) is TableChanges
    assert isinstance(transaction_changes("history", (0,)), RowImages)
    assert isinstance(batch_changes("soft_delete", (0,)), SoftDeleteChanges)
    assert isinstance(batch_changes("history", (0,)), HistoryChanges)


def test_row_images_keep_the_deleted_row_and_forget_rows_born_and_gone_in_the_transaction() -> None:
    changes = txn(("insert", B), ("update", (A, A2)), ("delete", B), ("delete", A2))
    assert changes.rows == {(7,): ("delete", A2)}
    assert changes.change_count == 4


def test_row_images_key_change_deletes_the_old_key_with_its_image() -> None:
    moved = (8, Decimal("12.25"), "a")
    changes = txn(("update", (A, moved)))
    assert changes.rows == {(7,): ("delete", A), (8,): ("upsert", moved)}


def test_row_images_delete_then_reinsert_is_an_upsert_of_an_existing_row() -> None:
    changes = txn(("delete", A), ("insert", A2), ("delete", A2))
    assert changes.rows == {(7,): ("delete", A2)}, "the key existed before the transaction: its delete stays"


def test_row_images_savepoint_segments_fold_with_born_keys() -> None:
    first = txn(("insert", B))
    second = txn(("delete", B), ("update", (A, A2)))
    first.merge_from(second)
    assert first.rows == {(7,): ("upsert", A2)}, "B was born in the first segment and died in the second"


def test_soft_delete_keeps_the_deleting_transactions_time_and_a_reinsert_clears_it() -> None:
    batch = SoftDeleteChanges((0,))
    batch.merge_from(txn(("insert", A)), stamp(1, 0))
    batch.merge_from(txn(("delete", A)), stamp(2, 4))
    assert batch.deletes() == [(A, T0 + dt.timedelta(seconds=4))]
    batch.merge_from(txn(("insert", A2)), stamp(3, 9))
    assert batch.deletes() == [] and batch.upserts() == [A2]


def test_soft_delete_truncate_deletes_live_rows_with_their_values_and_notes_the_first_truncate() -> None:
    batch = SoftDeleteChanges((0,))
    batch.merge_from(txn(("update", (A, A2))), stamp(1, 1))
    batch.merge_from(txn(("truncate", ())), stamp(2, 2))
    batch.merge_from(txn(("insert", B)), stamp(3, 3))
    batch.merge_from(txn(("truncate", ())), stamp(4, 5))
    assert batch.truncated_at == T0 + dt.timedelta(seconds=2)
    assert sorted(batch.deletes()) == [(A2, T0 + dt.timedelta(seconds=2)), (B, T0 + dt.timedelta(seconds=5))]


def test_soft_delete_needs_commit_stamps() -> None:
    with pytest.raises(ValueError):
        SoftDeleteChanges((0,)).merge_from(txn(("insert", A)))


def test_history_keeps_one_version_per_transaction_and_key() -> None:
    batch = HistoryChanges((0,))
    batch.merge_from(txn(("insert", A)), stamp(1))
    batch.merge_from(txn(("update", (A, A2))), stamp(2))
    batch.merge_from(txn(("delete", A2), ("insert", A)), stamp(3))
    chain = batch.versions[(7,)]
    assert [(v.operation, v.row, v.stamp.ordinal) for v in chain] == [
        ("upsert", A, 1), ("upsert", A2, 2), ("upsert", A, 3),
    ]
    assert batch.written_rows() == 3 and not batch.empty


def test_history_truncate_closes_live_keys_and_keys_first_seen_after_it_start_with_a_delete() -> None:
    batch = HistoryChanges((0,))
    batch.merge_from(txn(("update", (A, A2))), stamp(1))
    batch.merge_from(txn(("truncate", ())), stamp(2))
    batch.merge_from(txn(("insert", B)), stamp(3))
    assert [(v.operation, v.stamp.ordinal) for v in batch.versions[(7,)]] == [("upsert", 1), ("delete", 2)]
    assert [(v.operation, v.stamp.ordinal) for v in batch.versions[(9,)]] == [("delete", 2), ("upsert", 3)]


def test_history_drop_after_forgets_transactions_a_held_table_reads_again() -> None:
    batch = HistoryChanges((0,))
    batch.merge_from(txn(("insert", A)), stamp(1))
    batch.merge_from(txn(("truncate", ())), stamp(2))
    batch.merge_from(txn(("insert", B)), stamp(3))
    batch.drop_after(stamp(1).end)
    assert list(batch.versions) == [(7,)] and len(batch.versions[(7,)]) == 1
    assert not batch.truncated and batch.truncations == []


def version(operation: str, row: tuple | None, ordinal: int, seconds: int) -> Version:
    return Version(operation, row, stamp(ordinal, seconds))  # type: ignore[arg-type]


def test_resolve_links_versions_and_closes_the_current_one() -> None:
    current = CurrentVersion(valid_from=T0 - dt.timedelta(days=1), equals_first=False)
    chain = [version("upsert", A, 1, 2), version("upsert", A2, 2, 2), version("delete", None, 5, 7)]
    plan = resolve_versions(chain, current, batch_seq=41)
    at = T0 + dt.timedelta(seconds=2)
    assert plan.close_at == at
    assert [(v.row, v.valid_from, v.valid_to, v.sequence) for v in plan.versions] == [
        (A, at, at, sequence_of(41, 1)),
        (A2, at, T0 + dt.timedelta(seconds=7), sequence_of(41, 2)),
    ]
    assert not any(v.is_current for v in plan.versions)


def test_resolve_skips_what_delta_already_holds() -> None:
    current = CurrentVersion(valid_from=T0, equals_first=True)
    plan = resolve_versions([version("upsert", A, 1, 3), version("upsert", A, 2, 4)], current, batch_seq=3)
    assert plan.close_at is None and plan.versions == ()
    plan = resolve_versions([version("upsert", A, 1, 3), version("upsert", A2, 2, 4)], current, batch_seq=3)
    assert plan.close_at == T0 + dt.timedelta(seconds=4)
    assert [(v.row, v.is_current) for v in plan.versions] == [(A2, True)]


def test_resolve_a_delete_without_a_live_row_does_nothing_and_a_reinsert_opens_a_version() -> None:
    plan = resolve_versions([version("delete", None, 1, 1), version("upsert", B, 2, 6)], None, batch_seq=8)
    assert plan.close_at is None
    assert [(v.row, v.valid_from, v.valid_to) for v in plan.versions] == [(B, T0 + dt.timedelta(seconds=6), None)]


def test_resolve_never_starts_a_version_before_the_previous_one() -> None:
    current = CurrentVersion(valid_from=T0 + dt.timedelta(seconds=10), equals_first=False)
    plan = resolve_versions([version("upsert", A2, 1, 9)], current, batch_seq=2)
    assert plan.close_at == T0 + dt.timedelta(seconds=10)
    assert plan.versions[0].valid_from == T0 + dt.timedelta(seconds=10)


def test_sequence_orders_batches_then_transactions() -> None:
    assert sequence_of(5, 0) < sequence_of(5, 1) < sequence_of(5, 4_000_000) < sequence_of(6, 0)
    with pytest.raises(ValueError):
        sequence_of(5, 1 << 32)


def test_timestamp_micros_is_utc_epoch_micros() -> None:
    assert timestamp_micros(dt.datetime(1970, 1, 1, 0, 0, 1, 250_000, tzinfo=dt.UTC)) == 1_250_000
