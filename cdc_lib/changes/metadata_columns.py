"""binlake's optional metadata columns on mirror tables (`sink.metadata_columns`; docs/readers.md#metadata-columns).

    _binlake_source_ts   TIMESTAMP  commit time of the source transaction that last changed the row: the binlog
                                    event header's timestamp (whole seconds); for snapshot rows, the source
                                    server's clock when the snapshot began (its first low watermark)
    _binlake_applied_ts  TIMESTAMP  when binlake applied the row: the time its batch took its batch sequence
                                    (recorded as `applied_at` in the batch's commit metadata); for snapshot rows,
                                    when the snapshot began on binlake's clock (recorded in its document)

Both are functions of the batch, not of the wall clock at write time, so a retried or replayed commit writes
the same values. They follow the source's columns: the fold's rows carry the source time after the row's own
values (`StampedChanges`), and `with_applied` adds the batch's time when the batch is written; both writers
then write the extended schema (`extended_schema`) as they write any other.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from cdc_lib.changes.events import CommitStamp, TableChanges
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import ColumnInfo

SOURCE_TS = "_binlake_source_ts"
APPLIED_TS = "_binlake_applied_ts"
#: In the order they follow the source's columns.
NAMES = (SOURCE_TS, APPLIED_TS)
#: The batch commit's metadata key holding the batch's applied time (ISO 8601, UTC).
APPLIED_AT = "applied_at"


def _column(name: str) -> ColumnInfo:
    # A TIMESTAMP(6) maps to Spark's `timestamp` (UTC instants) on both roads, like a source TIMESTAMP column.
    return ColumnInfo(name=name, data_type="timestamp", column_type="timestamp(6)", nullable=True,
                      datetime_precision=6)


COLUMNS = tuple(_column(name) for name in NAMES)


def extended_schema(schema: TableSchema) -> TableSchema:
    """The table's Delta schema with the metadata columns: the source's columns, then `NAMES`.

    A schema that already ends with them is returned as it is.
    """
    if schema.column_names[-len(NAMES):] == NAMES:
        return schema
    return TableSchema(table=schema.table, columns=(*schema.columns, *COLUMNS), primary_key=schema.primary_key)


def source_schema(schema: TableSchema) -> TableSchema:
    """`schema` without the metadata columns (what the source has)."""
    kept = tuple(column for column in schema.columns if column.name not in NAMES)
    return TableSchema(table=schema.table, columns=kept, primary_key=schema.primary_key)


def applied_time(moment: dt.datetime) -> dt.datetime:
    """A batch's applied time as both writers store it: UTC, whole microseconds (Delta's resolution)."""
    return moment.astimezone(dt.UTC)


@dataclass
class StampedChanges(TableChanges):
    """The mirror's fold, each upsert row followed by the commit time of the transaction that wrote it last.

    Deletes need no time (the row is gone). The rows are one value wider than the source's; `with_applied`
    adds the batch's applied time before they are written.
    """

    def merge_from(self, later: TableChanges, stamp: CommitStamp | None = None) -> None:
        assert stamp is not None, "a table with metadata columns folds with commit stamps"
        stamped = TableChanges(later.key_positions, truncated=later.truncated, inserted=later.inserted,
                               updated=later.updated, deleted=later.deleted, new_keys=later.new_keys)
        stamped.rows = {
            key: (operation, None if row is None else (*row, stamp.time))
            for key, (operation, row) in later.rows.items()
        }
        super().merge_from(stamped, stamp)

    def empty_like(self) -> TableChanges:
        return StampedChanges(self.key_positions)


def with_applied(changes: TableChanges, applied_at: dt.datetime) -> TableChanges:
    """`changes` (a `StampedChanges`) with `applied_at` after each upsert row, as a new fold (the input is kept,
    so a commit retried after a conflict writes the same rows)."""
    rows = {
        key: (operation, None if row is None else (*row, applied_at)) for key, (operation, row) in changes.rows.items()
    }
    return TableChanges(changes.key_positions, rows=rows, truncated=changes.truncated, inserted=changes.inserted,
                          updated=changes.updated, deleted=changes.deleted, new_keys=set(changes.new_keys))


__all__ = [
    "APPLIED_AT", "APPLIED_TS", "COLUMNS", "NAMES", "SOURCE_TS", "StampedChanges",
    "applied_time", "extended_schema", "source_schema", "with_applied",
]
