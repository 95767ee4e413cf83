"""Row changes of one micro-batch, folded to the last change per primary key.

`TableChanges` is the mirror's fold (last change per key). The other table modes (docs/table-modes.md)
fold inside a transaction with `RowImages` (deletes keep their row image; a row born and gone in one
transaction leaves nothing) and across the batch's transactions with `SoftDeleteChanges` (net row per key
plus the deleting transaction's time) or `HistoryChanges` (every transaction's net row per key, in order).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from itertools import filterfalse, repeat
from operator import itemgetter
from typing import Any, Literal

from cdc_lib.model.positions import BinlogPosition

Operation = Literal["upsert", "delete"]
Row = tuple[Any, ...]


@dataclass(frozen=True)
class CommitStamp:
    """Where a source transaction sits: its commit time and its order in the binlog read.

    `time` is the binlog's commit timestamp (UTC, whole seconds); `ordinal` counts the read's commits from 1,
    so it orders transactions exactly within one second; `end` is the binlog position after the commit.
    """

    time: dt.datetime
    ordinal: int
    end: BinlogPosition


@dataclass
class TableChanges:
    """The net effect of a batch on one table.

    `rows` maps a primary key to the final operation and, for an upsert, the full
    row in schema order. A key change arrives as a delete of the old key and an
    upsert of the new one. `truncated` means the table was emptied before the
    remaining changes, so rows absent from `rows` must be deleted too.

    `new_keys` are the keys whose first change in the fold is an INSERT: the source had no row with that
    key just before (a storage engine writes no row over an existing primary key; REPLACE and
    INSERT … ON DUPLICATE KEY UPDATE log the delete or the update). Only the mirror's fold keeps them.
    """

    key_positions: tuple[int, ...]
    rows: dict[Row, tuple[Operation, Row | None]] = field(default_factory=dict)
    truncated: bool = False
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    new_keys: set[Row] = field(default_factory=set)

    def __post_init__(self) -> None:
        positions = self.key_positions
        if len(positions) == 1:
            (only,) = positions
            self._key = lambda row: (row[only],)  # type: ignore[method-assign]

    def _key(self, row: Row) -> Row:
        return tuple(row[index] for index in self.key_positions)

    def insert(self, row: Row) -> None:
        self.inserted += 1
        key = self._key(row)
        if key not in self.rows:
            self.new_keys.add(key)
        self.rows[key] = ("upsert", row)

    def update(self, before: Row, after: Row) -> None:
        old_key, new_key = self._key(before), self._key(after)
        if old_key != new_key:
            self.key_left(before)
            self.key_arrived(after)
            return
        self.updated += 1
        self.rows[new_key] = ("upsert", after)

    def key_left(self, before: Row) -> None:
        """The first half of an UPDATE that changes the key: the row leaves its old key (counted by the second).

        `update` is these two halves; they exist apart so that a spilled fold (cdc_lib.changes.spill), which keeps
        each key's changes together, can replay a key change one key at a time.
        """
        self.rows[self._key(before)] = ("delete", None)

    def key_arrived(self, after: Row) -> None:
        """The second half of an UPDATE that changes the key: the row arrives at its new key."""
        self.updated += 1
        self.rows[self._key(after)] = ("upsert", after)

    def delete(self, row: Row) -> None:
        self.deleted += 1
        self.rows[self._key(row)] = ("delete", None)

    # -- one rows event at once ---------------------------------------------------------------------------------
    #
    # The same fold as `insert`, `update` and `delete` called row by row, with the per-row Python work moved into C
    # loops (dict.update over zipped keys): the read's hottest path for a table without a filter or a shape
    # (cdc_lib.binlog.table_rows.fold_rows). Only `TableChanges` itself uses them; the other folds override the
    # row-by-row methods and are called row by row.

    def _keys(self, rows: list[Row]) -> list[Row]:
        positions = self.key_positions
        if len(positions) == 1:
            (only,) = positions
            return [(row[only],) for row in rows]
        return list(map(itemgetter(*positions), rows))

    def insert_rows(self, rows: list[Row]) -> None:
        """`insert` of each of `rows`, in order."""
        keys = self._keys(rows)
        # New: the keys the fold did not hold before this event, as row by row (where a key inserted twice in one
        # event is new at its first insert and held at its second).
        self.new_keys.update(filterfalse(self.rows.__contains__, keys))
        self.rows.update(zip(keys, zip(repeat("upsert"), rows), strict=True))
        self.inserted += len(keys)

    def update_rows(self, images: list[Row]) -> None:
        """`update` of each (before, after) pair of `images` (before and after alternate), in order."""
        befores, afters = images[0::2], images[1::2]
        new = self._keys(afters)
        if self._keys(befores) != new:  # some update moves its row to another key: the general path
            for before, after in zip(befores, afters, strict=True):
                self.update(before, after)
            return
        self.rows.update(zip(new, zip(repeat("upsert"), afters), strict=True))
        self.updated += len(new)

    def delete_rows(self, rows: list[Row]) -> None:
        """`delete` of each of `rows`, in order."""
        keys = self._keys(rows)
        self.rows.update(zip(keys, repeat(("delete", None))))
        self.deleted += len(keys)

    def truncate(self) -> None:
        self.rows.clear()
        self.new_keys.clear()
        self.truncated = True

    def merge_from(self, later: TableChanges, stamp: CommitStamp | None = None) -> None:
        """Apply `later` (the changes of a subsequent transaction, committed at `stamp`) on top of this one.

        The mirror keeps only the last change per key, so it has no use for `stamp`.
        """
        if later.truncated:
            self.rows.clear()
            self.new_keys.clear()
            self.truncated = True
        # A key is new to the batch only if `later` is where the batch first touches it.
        self.new_keys.update(key for key in later.new_keys if key not in self.rows)
        self.rows.update(later.rows)
        self.inserted += later.inserted
        self.updated += later.updated
        self.deleted += later.deleted

    @property
    def change_count(self) -> int:
        return self.inserted + self.updated + self.deleted

    @property
    def empty(self) -> bool:
        return not self.rows and not self.truncated

    def written_rows(self) -> int:
        """Rows this batch writes to the table (net keys for a mirror)."""
        return len(self.rows)

    @property
    def buffered(self) -> int:
        """Row images this fold holds in memory, what `batch.max_buffered_changes` bounds (cdc_lib.changes.spill)."""
        return len(self.rows)

    def empty_like(self) -> TableChanges:
        """A new, empty fold of the same kind (for the same table)."""
        return TableChanges(self.key_positions)

    def upserts(self) -> list[Row]:
        return [row for operation, row in self.rows.values() if operation == "upsert" and row is not None]

    def deleted_keys(self) -> list[Row]:
        return [key for key, (operation, _) in self.rows.items() if operation == "delete"]

    def split_new(self) -> tuple[list[Row], TableChanges]:
        """The rows of new keys still present at the end (`new_keys`), and the fold of every other key.

        A new key deleted again within the fold is in neither: it was absent before and is absent after.
        Meant for a fold without TRUNCATE (after one, a new key may still be in the target).
        """
        appended: list[Row] = []
        rest = TableChanges(self.key_positions, truncated=self.truncated)
        for key, (operation, row) in self.rows.items():
            if key in self.new_keys:
                if operation == "upsert" and row is not None:
                    appended.append(row)
            else:
                rest.rows[key] = (operation, row)
        return appended, rest


@dataclass
class RowImages(TableChanges):
    """One transaction's net changes for a soft-delete or history table.

    Like the mirror's fold, except that a delete keeps its row image (the row's last values, which a
    soft-deleted row keeps), and a key inserted and deleted inside the transaction leaves nothing: outside
    the transaction it never existed. `born` holds the keys the transaction inserted that no row had before.
    """

    born: set[Row] = field(default_factory=set)

    def insert(self, row: Row) -> None:
        self.inserted += 1
        self._upsert(self._key(row), row)

    def update(self, before: Row, after: Row) -> None:
        old_key, new_key = self._key(before), self._key(after)
        if old_key == new_key:
            self.updated += 1
            self.rows[new_key] = ("upsert", after)
            return
        self.key_left(before)
        self.key_arrived(after)

    def key_left(self, before: Row) -> None:
        self._delete(self._key(before), before)

    def key_arrived(self, after: Row) -> None:
        self.updated += 1
        self._upsert(self._key(after), after)

    def delete(self, row: Row) -> None:
        self.deleted += 1
        self._delete(self._key(row), row)

    def _upsert(self, key: Row, row: Row) -> None:
        if key not in self.rows and not self.truncated:
            self.born.add(key)
        self.rows[key] = ("upsert", row)

    def _delete(self, key: Row, row: Row) -> None:
        if key in self.born:
            self.born.discard(key)
            del self.rows[key]
        else:
            self.rows[key] = ("delete", row)

    def truncate(self) -> None:
        super().truncate()
        self.born.clear()

    def merge_from(self, later: TableChanges, stamp: CommitStamp | None = None) -> None:
        """Apply a later savepoint segment of the same transaction."""
        if later.truncated:
            self.rows.clear()
            self.born.clear()
            self.truncated = True
        later_born = later.born if isinstance(later, RowImages) else set()
        for key, entry in later.rows.items():
            if entry[0] == "delete" and key in self.born:
                self.born.discard(key)
                self.rows.pop(key, None)
                continue
            if key in later_born and key not in self.rows:
                self.born.add(key)
            self.rows[key] = entry
        self.inserted += later.inserted
        self.updated += later.updated
        self.deleted += later.deleted

    def empty_like(self) -> RowImages:
        return RowImages(self.key_positions)


def _stamped(stamp: CommitStamp | None) -> CommitStamp:
    if stamp is None:
        raise ValueError("a soft-delete or history table folds committed transactions only (no commit stamp)")
    return stamp


@dataclass
class SoftDeleteChanges(TableChanges):
    """A batch's net changes for a soft-delete table: the last row per key, deletes with their row image.

    `deleted_at` holds, per deleted key, the commit time of the transaction that deleted it;
    `truncated_at` the first TRUNCATE of the batch, when every row the batch does not touch was deleted.
    """

    deleted_at: dict[Row, dt.datetime] = field(default_factory=dict)
    truncated_at: dt.datetime | None = None

    def merge_from(self, later: TableChanges, stamp: CommitStamp | None = None) -> None:
        committed = _stamped(stamp)
        if later.truncated:
            if self.truncated_at is None:
                self.truncated_at = committed.time
            # Rows the batch made live are deleted by the TRUNCATE with the values they had.
            for key, (operation, row) in list(self.rows.items()):
                if operation == "upsert":
                    self.rows[key] = ("delete", row)
                    self.deleted_at[key] = committed.time
            self.truncated = True
        for key, entry in later.rows.items():
            self.rows[key] = entry
            if entry[0] == "delete":
                self.deleted_at[key] = committed.time
            else:
                self.deleted_at.pop(key, None)
        self.inserted += later.inserted
        self.updated += later.updated
        self.deleted += later.deleted

    def empty_like(self) -> SoftDeleteChanges:
        return SoftDeleteChanges(self.key_positions)

    def deletes(self) -> list[tuple[Row, dt.datetime]]:
        """Deleted rows (their last values) with the time they were deleted."""
        return [
            (row, self.deleted_at[key])
            for key, (operation, row) in self.rows.items()
            if operation == "delete" and row is not None
        ]


@dataclass(frozen=True, slots=True)
class Version:
    """One transaction's net change of one key: the row it left (None for a delete), and when."""

    operation: Operation
    row: Row | None
    stamp: CommitStamp


@dataclass
class HistoryChanges(TableChanges):
    """A batch's changes for a history (SCD type 2) table: per key, every transaction's net change in order.

    `truncations` are the batch's TRUNCATEs: each deletes every key live at that point. A key first
    touched after one starts with a delete at the first (it was live, or not, in Delta before the batch;
    `table_modes.resolve_versions` knows which).
    """

    versions: dict[Row, list[Version]] = field(default_factory=dict)
    truncations: list[CommitStamp] = field(default_factory=list)

    def merge_from(self, later: TableChanges, stamp: CommitStamp | None = None) -> None:
        committed = _stamped(stamp)
        if later.truncated:
            for versions in self.versions.values():
                if versions[-1].operation == "upsert":
                    versions.append(Version("delete", None, committed))
            self.truncations.append(committed)
            self.truncated = True
        for key, (operation, row) in later.rows.items():
            chain = self.versions.get(key)
            if chain is None:
                chain = []
                self.versions[key] = chain
                if self.truncations:
                    chain.append(Version("delete", None, self.truncations[0]))
            chain.append(Version(operation, row if operation == "upsert" else None, committed))
        self.inserted += later.inserted
        self.updated += later.updated
        self.deleted += later.deleted

    @property
    def empty(self) -> bool:
        return not self.versions and not self.truncations

    def written_rows(self) -> int:
        return sum(len(chain) for chain in self.versions.values())

    @property
    def buffered(self) -> int:
        # Keys, not versions: counting versions would walk every chain on each check. A key changed by many
        # transactions of one batch holds more; the batch's `max_events` bounds that case.
        return len(self.versions)

    def empty_like(self) -> HistoryChanges:
        return HistoryChanges(self.key_positions)

    def drop_after(self, position: BinlogPosition) -> None:
        """Forget the transactions committed after `position`: the table's offset stays there, so the next
        batch reads them again (a table held by a prepared XA branch), and a version must not come twice."""
        for key in list(self.versions):
            kept = [version for version in self.versions[key] if version.stamp.end <= position]
            if kept:
                self.versions[key] = kept
            else:
                del self.versions[key]
        self.truncations = [stamp for stamp in self.truncations if stamp.end <= position]
        self.truncated = bool(self.truncations)


def batch_changes(mode: str, key_positions: tuple[int, ...]) -> TableChanges:
    """An empty fold of a batch's committed transactions for a table in `mode` (config.TableMode)."""
    if mode == "soft_delete":
        return SoftDeleteChanges(key_positions)
    if mode == "history":
        return HistoryChanges(key_positions)
    return TableChanges(key_positions)


def transaction_changes(mode: str, key_positions: tuple[int, ...]) -> TableChanges:
    """An empty fold of one transaction's rows for a table in `mode`."""
    return TableChanges(key_positions) if mode == "mirror" else RowImages(key_positions)
