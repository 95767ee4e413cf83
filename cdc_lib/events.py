"""Row changes of one micro-batch, folded to the last change per primary key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Operation = Literal["upsert", "delete"]
Row = tuple[Any, ...]


@dataclass
class TableChanges:
    """The net effect of a batch on one table.

    `rows` maps a primary key to the final operation and, for an upsert, the full
    row in schema order. A key change arrives as a delete of the old key and an
    upsert of the new one. `truncated` means the table was emptied before the
    remaining changes, so rows absent from `rows` must be deleted too.
    """

    key_positions: tuple[int, ...]
    rows: dict[Row, tuple[Operation, Row | None]] = field(default_factory=dict)
    truncated: bool = False
    inserted: int = 0
    updated: int = 0
    deleted: int = 0

    def __post_init__(self) -> None:
        positions = self.key_positions
        if len(positions) == 1:
            (only,) = positions
            self._key = lambda row: (row[only],)  # type: ignore[method-assign]

    def _key(self, row: Row) -> Row:
        return tuple(row[index] for index in self.key_positions)

    def insert(self, row: Row) -> None:
        self.inserted += 1
        self.rows[self._key(row)] = ("upsert", row)

    def update(self, before: Row, after: Row) -> None:
        self.updated += 1
        old_key, new_key = self._key(before), self._key(after)
        if old_key != new_key:
            self.rows[old_key] = ("delete", None)
        self.rows[new_key] = ("upsert", after)

    def delete(self, row: Row) -> None:
        self.deleted += 1
        self.rows[self._key(row)] = ("delete", None)

    def truncate(self) -> None:
        self.rows.clear()
        self.truncated = True

    def merge_from(self, later: TableChanges) -> None:
        """Apply `later` (the changes of a subsequent transaction) on top of this one."""
        if later.truncated:
            self.rows.clear()
            self.truncated = True
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

    def upserts(self) -> list[Row]:
        return [row for operation, row in self.rows.values() if operation == "upsert" and row is not None]

    def deleted_keys(self) -> list[Row]:
        return [key for key, (operation, _) in self.rows.items() if operation == "delete"]
