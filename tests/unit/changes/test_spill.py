"""A spilled fold (cdc_lib.changes.spill) equals the in-memory one: same script of transactions, both ways, every mode.

The script is random but seeded: inserts, same-key and key-changing updates, deletes, TRUNCATEs, savepoints
with ROLLBACK TO and RELEASE, whole rollbacks, XA branches committed after later transactions or rolled back,
and transactions a table never takes (a stopped table, a transaction behind its offset). The spilled side
replays with a tiny bound, so buckets split again, and its parts must hold disjoint keys.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import pytest

from cdc_lib.binlog.transaction import OpenTransaction, PreparedXas, XaId
from cdc_lib.changes.events import CommitStamp, HistoryChanges, SoftDeleteChanges, TableChanges, batch_changes
from cdc_lib.changes.spill import ChangeLog, SpilledChanges, SpillSegment, remove_orphans, spill_folder
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo

TABLE = "db.t"
COLUMNS = (
    ColumnInfo("id", "int", "int(11)", False),
    ColumnInfo("grp", "int", "int(11)", False),
    ColumnInfo("amount", "decimal", "decimal(10,3)", True, numeric_precision=10, numeric_scale=3),
    ColumnInfo("label", "varchar", "varchar(20)", True),
)


def _schema(key: tuple[str, ...]) -> TableSchema:
    return TableSchema(TableRef.parse(TABLE), COLUMNS, key)


@dataclass
class _Side:
    """One way of folding: in memory, or spilled to a ChangeLog."""

    mode: str
    key_positions: tuple[int, ...]
    log: ChangeLog | None

    def __post_init__(self) -> None:
        self.batch: TableChanges = (
            SpilledChanges(self.key_positions, log=self.log) if self.log is not None
            else batch_changes(self.mode, self.key_positions)
        )
        self.prepared = PreparedXas()
        self.transaction = self._open()
        self.ordinal = 0

    def _open(self) -> OpenTransaction:
        log = self.log
        return OpenTransaction(
            BinlogPosition("bin.000001", 4), lambda _table: self.key_positions, mode_of=lambda _table: self.mode,
            spill_fold=(lambda _table: SpillSegment(self.key_positions, log=log)) if log is not None
            else (lambda _table: None),
        )

    def commit(self, changes: dict[str, TableChanges] | None = None, *, taken: bool = True) -> None:
        self.ordinal += 1
        changes = self.transaction.folded() if changes is None else changes
        stamp = CommitStamp(
            dt.datetime(2026, 3, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=self.ordinal), self.ordinal,
            BinlogPosition("bin.000001", 1000 + self.ordinal),
        )
        if taken and TABLE in changes:
            self.batch.merge_from(changes[TABLE], stamp)
        self.transaction = self._open()


def _row(rng: random.Random, key: tuple[int, int]) -> tuple[object, ...]:
    amount = Decimal(rng.choice(["12.250", "-7.125", "0.001", "99999.999"]))
    return (key[0], key[1], amount if rng.random() > 0.1 else None, rng.choice(["Zoë", "a", None, "日本"]))


def _script(sides: list[_Side], seed: int) -> None:
    rng = random.Random(seed)
    live: dict[tuple[int, int], tuple[object, ...]] = {}

    def each(action: str, *arguments: object) -> None:
        for side in sides:
            getattr(side.transaction.changes_for(TABLE), action)(*arguments)

    for _ in range(40):
        savepoints: list[str] = []
        for _ in range(rng.randint(1, 30)):
            roll = rng.random()
            if roll < 0.3 or not live:
                key = (rng.randint(1, 60), rng.randint(1, 2))
                row = _row(rng, key)
                live[key] = row
                each("insert", row)
            elif roll < 0.55:
                key = rng.choice(sorted(live))
                moved = key if rng.random() < 0.6 else (rng.randint(1, 60), rng.randint(1, 2))
                row = _row(rng, moved)
                each("update", live.pop(key), row)
                live[moved] = row
            elif roll < 0.75:
                key = rng.choice(sorted(live))
                each("delete", live.pop(key))
            elif roll < 0.78:
                live.clear()
                each("truncate")
            elif roll < 0.88:
                name = rng.choice(["s1", "s2", "S3"])
                savepoints.append(name)
                for side in sides:
                    side.transaction.savepoint(name)
            elif roll < 0.96 and savepoints:
                name = rng.choice(savepoints)
                for side in sides:
                    side.transaction.rollback_to(name, lambda _table: "yes")
            elif savepoints:
                name = rng.choice(savepoints)
                for side in sides:
                    side.transaction.release(name)
        ending = rng.random()
        if ending < 0.08:
            for side in sides:
                side.transaction.rollback(lambda _table: "yes")
                side.commit()
        elif ending < 0.14:
            for side in sides:
                side.commit(taken=False)  # a transaction the table does not take (stopped, or behind its offset)
        elif ending < 0.24:
            xid = XaId(f"x{rng.randint(1, 3)}".encode())
            for side in sides:
                if xid in side.prepared.by_xid:
                    side.transaction.discard_table(TABLE)
                    side.commit()
                    continue
                side.prepared.prepare(side.transaction, xid)
                side.transaction = side._open()
        else:
            for side in sides:
                side.commit()
        if rng.random() < 0.1:
            for side in sides:  # an XA COMMIT or XA ROLLBACK of a branch prepared earlier
                for xid in list(side.prepared.by_xid)[:1]:
                    prepared = side.prepared.resolve(xid)
                    assert prepared is not None
                    side.commit(prepared.changes, taken=ending < 0.5)


def _merged(parts: list[TableChanges], like: TableChanges) -> TableChanges:
    """The parts of a spilled fold joined into one, after checking that no key is in two parts."""
    seen: set[object] = set()
    for part in parts:
        keys = set(part.versions if isinstance(part, HistoryChanges) else part.rows)
        assert not keys & seen, "a key replayed in two buckets"
        seen |= keys
    whole = like.empty_like()
    for part in parts:
        whole.rows.update(part.rows)
        whole.new_keys.update(part.new_keys)
        whole.truncated = whole.truncated or part.truncated
        whole.inserted += part.inserted
        whole.updated += part.updated
        whole.deleted += part.deleted
        if isinstance(whole, SoftDeleteChanges) and isinstance(part, SoftDeleteChanges):
            whole.deleted_at.update(part.deleted_at)
            whole.truncated_at = whole.truncated_at or part.truncated_at
        if isinstance(whole, HistoryChanges) and isinstance(part, HistoryChanges):
            whole.versions.update(part.versions)
            whole.truncations = whole.truncations or part.truncations
    return whole


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("mode", ["mirror", "soft_delete", "history"])
@pytest.mark.parametrize("key", [("id",), ("id", "grp")])
def test_spilled_fold_equals_the_in_memory_fold(seed: int, mode: str, key: tuple[str, ...], tmp_path: Path) -> None:
    schema = _schema(key)
    positions = tuple(schema.column_names.index(name) for name in key)
    log = ChangeLog(tmp_path / "log", schema, mode=mode, key_positions=positions, limit=7)
    (tmp_path / "log").mkdir()
    memory, spilled = _Side(mode, positions, None), _Side(mode, positions, log)
    _script([memory, spilled], seed)
    assert isinstance(spilled.batch, SpilledChanges)
    parts = list(spilled.batch.folds())
    assert len(parts) > 16 or log.records < 7 * 16, "small buckets split again"
    whole = _merged(parts, memory.batch)
    expected = memory.batch
    assert whole.rows == expected.rows
    assert whole.truncated == expected.truncated
    assert (whole.inserted, whole.updated, whole.deleted) == (expected.inserted, expected.updated, expected.deleted)
    assert (spilled.batch.inserted, spilled.batch.updated) == (expected.inserted, expected.updated)
    assert spilled.batch.written_rows() == expected.written_rows()
    if mode == "mirror":
        assert whole.new_keys == expected.new_keys
    if isinstance(whole, SoftDeleteChanges) and isinstance(expected, SoftDeleteChanges):
        assert whole.deleted_at == expected.deleted_at and whole.truncated_at == expected.truncated_at
    if isinstance(whole, HistoryChanges) and isinstance(expected, HistoryChanges):
        assert whole.versions == expected.versions and whole.truncations == expected.truncations
    log.remove()
    assert not (tmp_path / "log").exists()


def test_history_drop_after_forgets_later_commits_of_a_spilled_table(tmp_path: Path) -> None:
    schema = _schema(("id",))
    log = ChangeLog(tmp_path, schema, mode="history", key_positions=(0,), limit=100)
    memory, spilled = _Side("history", (0,), None), _Side("history", (0,), log)
    for number in range(1, 5):
        for side in (memory, spilled):
            side.transaction.changes_for(TABLE).insert((number, 1, Decimal("12.250"), "x"))
            side.commit()
    held = BinlogPosition("bin.000001", 1002)
    assert isinstance(memory.batch, HistoryChanges) and isinstance(spilled.batch, SpilledChanges)
    memory.batch.drop_after(held)
    spilled.batch.drop_after(held)
    whole = _merged(list(spilled.batch.folds()), memory.batch)
    assert isinstance(whole, HistoryChanges)
    assert whole.versions == memory.batch.versions and sorted(whole.versions) == [(1,), (2,)]


def test_orphan_spill_folders_of_dead_processes_are_removed(tmp_path: Path) -> None:
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    orphan = tmp_path / f"proc-{int(dead.stdout)}" / "db.t-abc"
    orphan.mkdir(parents=True)
    (orphan / "bucket-00.parquet").write_bytes(b"left by a killed run")
    mine = spill_folder(tmp_path, TABLE)  # the first spill under a root cleans it
    assert not orphan.parent.exists()
    assert mine.exists() and mine.parent.name == f"proc-{__import__('os').getpid()}"
    assert remove_orphans(tmp_path) == []
