"""Table modes beyond the mirror: soft delete and history (SCD type 2); see docs/table-modes.md.

The pure parts live here: the metadata columns each mode adds, the `_binlake_sequence` of a version, how
one key's versions in a batch become Delta rows given the key's current version (`resolve_versions`), and
which rows of a table are its live ones (what reconciliation compares with the source). The Spark side
(the MERGEs) is `cdc_lib/sink/spark/modes.py`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdc_lib.changes import metadata_columns
from cdc_lib.changes.events import Row, Version
from cdc_lib.errors import BinlakeError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DELETED_AT = "_binlake_deleted_at"
VALID_FROM = "_binlake_valid_from"
VALID_TO = "_binlake_valid_to"
IS_CURRENT = "_binlake_is_current"
SEQUENCE = "_binlake_sequence"

#: The columns each mode appends to the source's, with their Spark types.
METADATA_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "mirror": (),
    "soft_delete": ((DELETED_AT, "timestamp"),),
    "history": ((VALID_FROM, "timestamp"), (VALID_TO, "timestamp"), (IS_CURRENT, "boolean"), (SEQUENCE, "bigint")),
}
#: Every column binlake adds to a source's: the modes', and the optional ones of `sink.metadata_columns`.
ALL_METADATA_COLUMNS = frozenset(
    {*(name for columns in METADATA_COLUMNS.values() for name, _ in columns), *metadata_columns.NAMES}
)

#: Bits of `_binlake_sequence` below the batch sequence: the transaction's order in the batch read.
_ORDINAL_BITS = 32


class TableModeError(BinlakeError):
    """A table cannot be kept exactly in its configured mode (docs/table-modes.md)."""


def sequence_of(batch_seq: int, ordinal: int) -> int:
    """`_binlake_sequence` of a version: the batch sequence, then the transaction's order in that batch's read.

    Batch sequences only grow (each is saved before a Delta commit carries it) and survive a switch of the
    source server, where binlog file numbers start elsewhere; a snapshot's rows take ordinal 0.
    """
    if not 0 <= ordinal < 1 << _ORDINAL_BITS:
        raise ValueError(f"transaction ordinal {ordinal} out of range")
    return (batch_seq << _ORDINAL_BITS) | ordinal


def timestamp_micros(moment: dt.datetime) -> int:
    """Microseconds since the epoch of an aware datetime (how timestamps travel into Spark SQL literals)."""
    delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass(frozen=True)
class CurrentVersion:
    """A key's current version in Delta before the batch: when it began, and whether its values equal the
    row of the batch's first version of the key (then that version is already there: a replay)."""

    valid_from: dt.datetime
    equals_first: bool


@dataclass(frozen=True)
class NewVersion:
    """A version row to insert."""

    row: Row
    valid_from: dt.datetime
    valid_to: dt.datetime | None
    sequence: int

    @property
    def is_current(self) -> bool:
        return self.valid_to is None


@dataclass(frozen=True)
class KeyPlan:
    """What a batch does to one key of a history table: close its current Delta version (at `close_at`,
    None to leave it), then insert `versions`."""

    close_at: dt.datetime | None
    versions: tuple[NewVersion, ...]


def resolve_versions(chain: list[Version], current: CurrentVersion | None, *, batch_seq: int) -> KeyPlan:
    """Turn one key's versions of a batch into a close of its current version and new version rows.

    A version that changes nothing is skipped: an upsert equal to the live row (the binlog re-read over a
    stretch a snapshot already holds, or a row deleted and re-inserted unchanged inside one transaction) and
    a delete of a key with no live row. `valid_from` never goes back before the previous version's: the
    binlog stamps a statement's start in whole seconds, so a statement that waited for a row lock can carry
    an earlier second than the commit it waited for.
    """
    walk = _KeyWalk(current, batch_seq)
    for index, version in enumerate(chain):
        if version.operation == "upsert":
            assert version.row is not None
            if index == 0 and current is not None and current.equals_first:
                walk.live_row = version.row  # Delta holds this version already
            else:
                walk.upsert(version.row, version.stamp.time, version.stamp.ordinal)
        else:
            walk.delete(version.stamp.time)
    return walk.plan()


class _KeyWalk:
    """One key's state while its versions are walked: live or not, its live row, the version being built."""

    def __init__(self, current: CurrentVersion | None, batch_seq: int) -> None:
        self.batch_seq = batch_seq
        self.live = current is not None
        #: The live row's values when a version of this batch set them (Delta's are not known here).
        self.live_row: Row | None = None
        self.delta_open = current is not None
        self.last_from = current.valid_from if current is not None else None
        self.close_at: dt.datetime | None = None
        self.pending: tuple[Row, dt.datetime, int] | None = None
        self.done: list[NewVersion] = []

    def upsert(self, row: Row, time: dt.datetime, ordinal: int) -> None:
        if self.live and self.live_row is not None and self.live_row == row:
            return
        moment = self._end_live(time)
        self.pending = (row, moment, sequence_of(self.batch_seq, ordinal))
        self.live, self.live_row = True, row

    def delete(self, time: dt.datetime) -> None:
        if not self.live:
            return
        self._end_live(time)
        self.live, self.live_row = False, None

    def _end_live(self, time: dt.datetime) -> dt.datetime:
        """End the live version (if any) at `time`, kept no earlier than its start; return that moment."""
        moment = time if self.last_from is None else max(time, self.last_from)
        if self.pending is not None:
            row, valid_from, sequence = self.pending
            self.done.append(NewVersion(row, valid_from, moment, sequence))
            self.pending = None
        elif self.delta_open:
            self.close_at, self.delta_open = moment, False
        self.last_from = moment
        return moment

    def plan(self) -> KeyPlan:
        versions = list(self.done)
        if self.pending is not None:
            row, valid_from, sequence = self.pending
            versions.append(NewVersion(row, valid_from, None, sequence))
        return KeyPlan(close_at=self.close_at, versions=tuple(versions))


def live_rows(frame: DataFrame) -> DataFrame:
    """The rows of a Delta table that stand for the source's rows now, without binlake's metadata columns.

    A mirror's rows as they are; a soft-delete table's rows not deleted; a history table's current versions.
    """
    from pyspark.sql import functions as F

    columns = set(frame.columns)
    if IS_CURRENT in columns:
        frame = frame.where(F.col(IS_CURRENT))
    elif DELETED_AT in columns:
        frame = frame.where(F.col(DELETED_AT).isNull())
    present = [name for name in frame.columns if name in ALL_METADATA_COLUMNS]
    return frame.drop(*present) if present else frame


def mode_of_commit(metadata: dict[str, object]) -> str:
    """The mode a binlake commit's metadata records (mirror commits record none)."""
    return str(metadata.get("mode", "mirror"))


__all__ = [
    "ALL_METADATA_COLUMNS", "DELETED_AT", "IS_CURRENT", "METADATA_COLUMNS", "SEQUENCE", "VALID_FROM", "VALID_TO",
    "CurrentVersion", "KeyPlan", "NewVersion", "TableModeError", "live_rows", "mode_of_commit", "resolve_versions",
    "sequence_of", "timestamp_micros",
]
