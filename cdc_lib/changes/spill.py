"""Spilling a table's changes to local Parquet when a batch holds more of them than memory should.

The folds of `cdc_lib.changes.events` hold one row image per key in Python. A single transaction that changes
millions of rows (a `DELETE` of a big table, an `UPDATE` of every row) would hold them all, and fail on every
retry. Past `batch.max_buffered_changes` row images of one table, the binlog read starts again from the
batch's start with that table *spilled* (cdc_lib.binlog.stream.read_batch): its row changes are written, in binlog
order, to a `ChangeLog` of Parquet files instead of a fold.

Exactness rests on one fact: every fold is per key. Each record carries a hash of its key and lands in one of
`FANOUT` bucket files; the changes of one key are all in one bucket, in order. At apply time each bucket is
replayed through the very fold classes of `events.py` (transaction by transaction, in commit order, with the
commit stamps) and written to the MERGE's staging folder, one bucket at a time; a bucket still larger than the
bound is split again by further bits of the hash. So Python holds one bucket, never the transaction.

What is not per key travels beside the files, small: which stretches of the log were committed and when
(a savepoint rolled back, a transaction of a table that stopped, an XA branch not yet committed leave their
records uncommitted, and the replay drops them), and where TRUNCATEs fell (replayed into every bucket). An
UPDATE that changes the key is two records, the old key leaving and the new arriving (`TableChanges.key_left`
and `key_arrived`), each in its key's bucket.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import shutil
import tempfile
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_lib.changes.events import CommitStamp, Row, TableChanges, batch_changes, transaction_changes
from cdc_lib.errors import BinlakeError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.types import spark_type_ddl

if TYPE_CHECKING:
    from cdc_lib.model.tables import TableSchema

log = logging.getLogger("binlake")

#: Buckets per split; a bucket larger than the bound splits again into as many by the next bits of the hash.
FANOUT = 16
_BITS = 4
_MAX_LEVEL = 12  # 48 of the hash's 64 bits: past that the keys collide, and one bucket is replayed as it is

# Record kinds. TRUNCATE is no record: it is kept in `ChangeLog.truncates` and replayed into every bucket.
INSERT, DELETE, UPDATE, KEY_LEFT, KEY_ARRIVED, TRUNCATE = range(6)

_SEQ, _KIND, _HASH = "_spill_seq", "_spill_kind", "_spill_hash"


class SpillError(BinlakeError):
    """Spilled changes cannot be applied where the pipeline runs."""


_ARROW_TYPES = {
    "tinyint": "int8", "smallint": "int16", "int": "int32", "bigint": "int64", "float": "float32",
    "double": "float64", "string": "string", "binary": "binary", "date": "date32", "boolean": "bool_",
}


def arrow_type(ddl: str) -> Any:
    """The Arrow type that holds the values of a column of Spark type `ddl` exactly."""
    import pyarrow as pa

    if ddl in _ARROW_TYPES:
        return getattr(pa, _ARROW_TYPES[ddl])()
    if ddl == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if ddl == "timestamp_ntz":
        return pa.timestamp("us")
    precision, scale = ddl.removeprefix("decimal(").rstrip(")").split(",")
    return pa.decimal128(int(precision), int(scale))


def default_spill_root() -> Path:
    return Path(tempfile.gettempdir()) / "binlake-spill"


_cleaned_roots: set[Path] = set()


def spill_folder(root: Path, table: str) -> Path:
    """A new, empty folder for one table's spill in one read: `<root>/proc-<pid>/<table>-<random>`.

    The first call for a root in a process removes what processes that are gone (killed mid-batch) left under
    it: a spill is only ever read by the read that wrote it, so such leftovers are never used, only removed.
    """
    if root not in _cleaned_roots:
        root.mkdir(parents=True, exist_ok=True)
        remove_orphans(root)
        _cleaned_roots.add(root)
    folder = root / f"proc-{os.getpid()}" / f"{table.replace('/', '_')}-{uuid.uuid4().hex[:12]}"
    folder.mkdir(parents=True)
    return folder


def remove_orphans(root: Path) -> list[Path]:
    """Remove spill folders under `root` whose process is no longer alive; returns those removed."""
    removed = []
    for folder in root.glob("proc-*"):
        pid_text = folder.name.removeprefix("proc-")
        if pid_text.isdigit() and not _alive(int(pid_text)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class _Commit:
    """A committed stretch of the log: the inclusive seq ranges of a transaction's surviving segments."""

    ranges: tuple[tuple[int, int], ...]
    stamp: CommitStamp | None


class ChangeLog:
    """One table's row changes of one batch read, in binlog order, in Parquet bucket files under `folder`."""

    def __init__(self, folder: Path, schema: TableSchema, *, mode: str, key_positions: tuple[int, ...],
                 limit: int) -> None:
        import pyarrow as pa

        self.folder = folder
        self.mode = mode
        self.key_positions = key_positions
        #: Records per bucket replayed at once, and records buffered before a write.
        self.limit = max(1, limit)
        self.names = list(schema.column_names)
        self.arrow_schema = pa.schema(
            [pa.field(_SEQ, pa.int64(), False), pa.field(_KIND, pa.int8(), False), pa.field(_HASH, pa.int64(), False)]
            + [pa.field(name, arrow_type(spark_type_ddl(column))) for name, column in zip(
                self.names, schema.columns, strict=True)]
        )
        self.next_seq = 0
        self.buffer: list[tuple[Any, ...]] = []
        self.writers: dict[int, ParquetParts] = {}
        self.truncates: list[int] = []
        self.commits: list[_Commit] = []
        self.records = 0
        self.closed = False
        single = len(key_positions) == 1
        self._key: Callable[[Row], Any] = (
            (lambda row: row[key_positions[0]]) if single else (lambda row: tuple(row[i] for i in key_positions))
        )
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(folder), True)

    # -- writing (the binlog read) -----------------------------------------------------------

    def append(self, kind: int, row: Row) -> int:
        seq = self.next_seq
        self.next_seq += 1
        self.buffer.append((seq, kind, hash(self._key(row)), *row))
        if len(self.buffer) >= self.limit:
            self._flush()
        return seq

    def mark_truncate(self) -> int:
        seq = self.next_seq
        self.next_seq += 1
        self.truncates.append(seq)
        return seq

    def commit(self, ranges: list[tuple[int, int]], stamp: CommitStamp | None) -> None:
        self.commits.append(_Commit(tuple(ranges), stamp))

    def drop_after(self, position: BinlogPosition) -> None:
        """Forget the commits after `position` (see `HistoryChanges.drop_after`)."""
        self.commits = [
            commit for commit in self.commits if commit.stamp is None or commit.stamp.end <= position
        ]

    @property
    def committed(self) -> bool:
        return any(commit.ranges for commit in self.commits)

    def _flush(self) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        if not self.buffer:
            return
        columns = list(zip(*self.buffer, strict=True))
        self.buffer = []
        table = pa.Table.from_arrays(
            [pa.array(values, type=spec.type) for values, spec in zip(columns, self.arrow_schema, strict=True)],
            schema=self.arrow_schema,
        )
        self.records += table.num_rows
        buckets = pc.bit_wise_and(table.column(_HASH), FANOUT - 1)
        for bucket in range(FANOUT):
            part = table.filter(pc.equal(buckets, bucket))
            if part.num_rows == 0:
                continue
            writer = self.writers.get(bucket)
            if writer is None:
                writer = self.writers[bucket] = ParquetParts(self.folder, f"bucket-{bucket:02d}", self.arrow_schema)
            writer.write(part)
        del table, part, buckets
        _release_arrow_memory()

    def close(self) -> None:
        """Write what is buffered and close the files (before the apply reads them)."""
        if self.closed:
            return
        self._flush()
        for writer in self.writers.values():
            writer.close()
        self.closed = True

    def remove(self) -> None:
        self._finalizer()

    # -- reading (the apply) ----------------------------------------------------------------

    def folds(self) -> Iterator[TableChanges]:
        """The batch's exact fold (events.batch_changes of the table's mode), one bucket of keys at a time."""
        self.close()
        ranges = sorted(
            (low, high, (order, segment))
            for order, commit in enumerate(self.commits) for segment, (low, high) in enumerate(commit.ranges)
        )
        lookup = _CommitLookup([low for low, _, _ in ranges], ranges)
        truncates = [(*place, seq) for seq in self.truncates if (place := lookup.place_of(seq)) is not None]
        if not self.writers:
            if truncates:
                yield self._replay([], truncates)
            return
        for writer in self.writers.values():
            yield from self._folds_of(writer.paths, 1, lookup, truncates)

    def _folds_of(self, paths: list[Path], level: int, lookup: _CommitLookup,
                  truncates: list[tuple[int, int, int]]) -> Iterator[TableChanges]:
        import pyarrow.parquet as pq

        if sum(pq.ParquetFile(path).metadata.num_rows for path in paths) > self.limit and level < _MAX_LEVEL:
            parts = self._split(paths, level)
            for part in parts:
                yield from self._folds_of(part.paths, level + 1, lookup, truncates)
                for path in part.paths:
                    path.unlink()
            return
        table = pq.read_table(paths[0]) if len(paths) == 1 else _concatenated(paths)
        entries: list[tuple[int, int, int, int, Row]] = []
        data = [table.column(name).to_pylist() for name in self.names]
        for index, (seq, kind) in enumerate(zip(table.column(_SEQ).to_pylist(), table.column(_KIND).to_pylist(),
                                                strict=True)):
            place = lookup.place_of(seq)
            if place is not None:
                entries.append((*place, seq, kind, tuple(column[index] for column in data)))
        del table, data
        _release_arrow_memory()
        yield self._replay(entries, truncates)

    def _split(self, paths: list[Path], level: int) -> list[ParquetParts]:
        """Split a bucket's files by the next bits of the key hash, streaming them batch by batch."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        writers: dict[int, ParquetParts] = {}
        stem = paths[0].stem.split(".")[0]
        for path in paths:
            for batch in pq.ParquetFile(path).iter_batches(batch_size=max(1024, self.limit)):
                table = pa.Table.from_batches([batch], schema=self.arrow_schema)
                buckets = pc.bit_wise_and(pc.shift_right(table.column(_HASH), _BITS * level), FANOUT - 1)
                for bucket in range(FANOUT):
                    part = table.filter(pc.equal(buckets, bucket))
                    if part.num_rows:
                        writer = writers.get(bucket)
                        if writer is None:
                            writer = writers[bucket] = ParquetParts(path.parent, f"{stem}-{bucket:02d}",
                                                                     self.arrow_schema)
                        writer.write(part)
                del table, buckets
                _release_arrow_memory()
        for writer in writers.values():
            writer.close()
        return [writers[bucket] for bucket in sorted(writers)]

    def _replay(self, entries: list[tuple[int, int, int, int, Row]],
                truncates: list[tuple[int, int, int]]) -> TableChanges:
        """Fold one bucket's committed records as the reader would have: each savepoint segment on its own,
        the segments of a transaction in order (`OpenTransaction.folded`), the transactions in commit order."""
        empty: Row = ()
        entries.extend((order, segment, seq, TRUNCATE, empty) for order, segment, seq in truncates)
        entries.sort(key=lambda entry: (entry[0], entry[1], entry[2]))
        folded = batch_changes(self.mode, self.key_positions)
        for order, in_commit in itertools.groupby(entries, key=lambda entry: entry[0]):
            transaction = transaction_changes(self.mode, self.key_positions)
            for _, in_segment in itertools.groupby(in_commit, key=lambda entry: entry[1]):
                segment = transaction.empty_like()
                for _, _, _, kind, row in in_segment:
                    _apply(segment, kind, row)
                transaction.merge_from(segment)
            folded.merge_from(transaction, self.commits[order].stamp)
        return folded


def _apply(fold: TableChanges, kind: int, row: Row) -> None:
    if kind == INSERT:
        fold.insert(row)
    elif kind == DELETE:
        fold.delete(row)
    elif kind == UPDATE:
        fold.update(row, row)
    elif kind == KEY_LEFT:
        fold.key_left(row)
    elif kind == KEY_ARRIVED:
        fold.key_arrived(row)
    else:
        fold.truncate()


class ParquetParts:
    """Parquet files under `folder` named `<stem>.NNNN.parquet`, appended a row group at a time.

    A Parquet writer keeps every row group's metadata until it closes, which would grow with the transaction;
    so a file is closed after `_ROW_GROUPS_PER_FILE` row groups and the bucket goes on in the next one, and no
    column statistics are written (the replay reads whole files, it never skips row groups).
    """

    def __init__(self, folder: Path, stem: str, schema: Any) -> None:
        self.folder, self.stem, self.schema = folder, stem, schema
        self.paths: list[Path] = []
        self.writer: Any = None
        self.row_groups = 0

    def write(self, table: Any) -> None:
        import pyarrow.parquet as pq

        if self.writer is None or self.row_groups >= _ROW_GROUPS_PER_FILE:
            self.close()
            path = self.folder / f"{self.stem}.{len(self.paths):04d}.parquet"
            self.writer = pq.ParquetWriter(path, self.schema, write_statistics=False)
            self.paths.append(path)
            self.row_groups = 0
        self.writer.write_table(table)
        self.row_groups += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


_ROW_GROUPS_PER_FILE = 64


def _concatenated(paths: list[Path]) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    return pa.concat_tables([pq.read_table(path) for path in paths])


def _release_arrow_memory() -> None:
    """Hand Arrow's freed buffers back to the system: its allocator (mimalloc) otherwise keeps them, and the
    process's peak memory would grow with the transaction even though what is alive does not."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


@dataclass(frozen=True)
class _CommitLookup:
    """Which commit (its order) and savepoint segment in it a record's seq belongs to; None when its changes
    were never committed."""

    lows: list[int]
    ranges: list[tuple[int, int, tuple[int, int]]]

    def place_of(self, seq: int) -> tuple[int, int] | None:
        index = bisect.bisect_right(self.lows, seq) - 1
        if index < 0:
            return None
        _, high, place = self.ranges[index]
        return place if seq <= high else None


@dataclass(kw_only=True)
class SpillSegment(TableChanges):
    """A spilled table's changes in one savepoint segment of a transaction: the seq ranges it wrote to the log.

    Stands where the transaction's fold (events.transaction_changes) would, so `OpenTransaction` keeps its
    savepoint logic unchanged: a segment rolled back is dropped, and its records, in no committed range, are
    dropped by the replay; segments folded together (`merge_from`) join their ranges.
    """

    log: ChangeLog
    ranges: list[tuple[int, int]] = field(default_factory=list)

    def _wrote(self, seq: int) -> None:
        if self.ranges and self.ranges[-1][1] == seq - 1:
            self.ranges[-1] = (self.ranges[-1][0], seq)
        else:
            self.ranges.append((seq, seq))

    def insert(self, row: Row) -> None:
        self.inserted += 1
        self._wrote(self.log.append(INSERT, row))

    def update(self, before: Row, after: Row) -> None:
        if self._key(before) != self._key(after):
            self.key_left(before)
            self.key_arrived(after)
            return
        self.updated += 1
        self._wrote(self.log.append(UPDATE, after))

    def key_left(self, before: Row) -> None:
        self._wrote(self.log.append(KEY_LEFT, before))

    def key_arrived(self, after: Row) -> None:
        self.updated += 1
        self._wrote(self.log.append(KEY_ARRIVED, after))

    def delete(self, row: Row) -> None:
        self.deleted += 1
        self._wrote(self.log.append(DELETE, row))

    def truncate(self) -> None:
        self.truncated = True
        self._wrote(self.log.mark_truncate())

    def merge_from(self, later: TableChanges, stamp: CommitStamp | None = None) -> None:
        if not isinstance(later, SpillSegment):
            raise TypeError(f"a spilled segment cannot take a {type(later).__name__}")
        self.ranges.extend(later.ranges)
        _add_counts(self, later)

    @property
    def empty(self) -> bool:
        return not self.ranges

    @property
    def buffered(self) -> int:
        return 0

    def empty_like(self) -> SpillSegment:
        return SpillSegment(self.key_positions, log=self.log)


def _add_counts(target: TableChanges, later: SpillSegment) -> None:
    """What a later segment read adds to the counts of the fold it joins."""
    target.truncated = target.truncated or later.truncated
    target.inserted += later.inserted
    target.updated += later.updated
    target.deleted += later.deleted


@dataclass(kw_only=True)
class SpilledChanges(TableChanges):
    """A spilled table's share of a batch: its `ChangeLog` and which transactions committed.

    The counts are those of the changes read (rolled-back ones included) until `folds()` has replayed the log,
    then those of the exact fold; `written_rows` likewise.
    """

    log: ChangeLog
    written: int = 0

    def merge_from(self, later: TableChanges, stamp: CommitStamp | None = None) -> None:
        if not isinstance(later, SpillSegment):
            raise TypeError(f"a spilled batch cannot take a {type(later).__name__}")
        self.log.commit(later.ranges, stamp)
        _add_counts(self, later)

    @property
    def empty(self) -> bool:
        return not self.log.committed

    @property
    def buffered(self) -> int:
        return 0

    def written_rows(self) -> int:
        return self.written

    def empty_like(self) -> SpilledChanges:
        raise TypeError("a spilled batch is not folded into another")

    def drop_after(self, position: BinlogPosition) -> None:
        self.log.drop_after(position)

    def folds(self) -> Iterator[TableChanges]:
        """The exact fold of the batch, bucket by bucket; the counts become the fold's as it goes."""
        self.inserted = self.updated = self.deleted = self.written = 0
        for fold in self.log.folds():
            self.inserted += fold.inserted
            self.updated += fold.updated
            self.deleted += fold.deleted
            self.written += fold.written_rows()
            self.truncated = self.truncated or fold.truncated
            yield fold

    def remove(self) -> None:
        self.log.remove()


def folds_of(changes: TableChanges) -> Iterator[TableChanges]:
    """A batch's fold of one table as parts with disjoint keys: the spilled buckets, or the fold itself."""
    if isinstance(changes, SpilledChanges):
        return changes.folds()
    return iter([changes])


__all__ = [
    "ChangeLog", "ParquetParts", "SpillError", "SpillSegment", "SpilledChanges", "arrow_type", "default_spill_root",
    "folds_of", "remove_orphans", "spill_folder",
]
