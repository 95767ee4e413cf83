"""The mirror's fold with commit times (`StampedChanges`) and the batch's applied time (`with_applied`)."""

from __future__ import annotations

import datetime as dt

from cdc_lib.changes import metadata_columns
from cdc_lib.changes.events import CommitStamp, TableChanges
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo

T1 = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
T2 = T1 + dt.timedelta(seconds=7)
APPLIED = dt.datetime(2026, 1, 2, 3, 5, 0, 250_000, tzinfo=dt.UTC)


def stamp(time: dt.datetime, ordinal: int) -> CommitStamp:
    return CommitStamp(time, ordinal, BinlogPosition("log.000001", 4 + ordinal))


def test_each_key_keeps_its_last_change_time_and_the_batch_time_follows() -> None:
    first, second = TableChanges((0,)), TableChanges((0,))
    first.insert((1, "a"))
    first.insert((2, "b"))
    second.update((1, "a"), (1, "a2"))
    second.delete((2, "b"))
    second.insert((3, "c"))
    fold = metadata_columns.StampedChanges((0,))
    fold.merge_from(first, stamp(T1, 1))
    fold.merge_from(second, stamp(T2, 2))
    assert fold.rows == {(1,): ("upsert", (1, "a2", T2)), (2,): ("delete", None), (3,): ("upsert", (3, "c", T2))}
    assert fold.new_keys == {(1,), (2,), (3,)} and fold.change_count == 5

    written = metadata_columns.with_applied(fold, APPLIED)
    assert written.upserts() == [(1, "a2", T2, APPLIED), (3, "c", T2, APPLIED)]
    assert written.deleted_keys() == [(2,)] and written.new_keys == fold.new_keys
    assert fold.rows[(1,)] == ("upsert", (1, "a2", T2)), "the fold is kept for a retried commit"


def test_the_columns_follow_the_source_columns() -> None:
    source = TableSchema(TableRef("shop", "t"), (ColumnInfo("id", "int", "int", False),), ("id",))
    extended = metadata_columns.extended_schema(source)
    assert extended.column_names == ("id", "_binlake_source_ts", "_binlake_applied_ts")
    assert metadata_columns.extended_schema(extended) == extended
    assert metadata_columns.source_schema(extended) == source
