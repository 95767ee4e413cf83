"""Proving that a key is absent from a Delta table before a batch appends it (issue 24, case 4).

The append path (`cdc_lib.sink.merge.merge_changes`, `append_from`) writes the rows of keys a batch inserts without a
join. The binlog alone does not prove such a key new: a row deleted with `sql_log_bin=0`, a failover to a replica
that lacks a row, or a source replicating in IDEMPOTENT mode leave a key in the Delta table that the binlog never
showed leaving, and an INSERT of it then looked new; appended, the table held two rows with one key. So the
binlog only nominates keys (`TableChanges.new_keys`); the proof comes from the table itself:

1. every live file of the table carries min/max statistics of the key's leading column in its `add` action
   (Spark and delta-rs both write them; a file without them, or a column without them, proves nothing);
2. a key whose leading value lies outside every file's [min, max] cannot be in any row of the table (a file's
   deletion vector only removes rows, so its statistics still bound what is left);
3. such keys are appended; every other key of the batch goes through the MERGE (`split_absent`).

Only integer keys are judged (`PROVABLE_TYPES`): their statistics are exact in both engines, whereas Spark cuts
string and timestamp statistics (to 32 characters, to milliseconds) and delta-rs rounds wide decimals. The common
case stays an append: auto-increment inserts lie past the largest key, one comparison per key.

The statistics are read from the table's state at the version binlake's own log read just found (the `KnownLog`
of the batch), through the same kept delta-rs table the delta-rs writer commits with (`loaded_tables`).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_lib.changes.events import Row, TableChanges
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import spark_type_ddl
from cdc_lib.sink.key_bounds import file_keys
from cdc_lib.sink.loaded_tables import LOADED_TABLES, KnownLog

if TYPE_CHECKING:
    from deltalake import DeltaTable

log = logging.getLogger("binlake")

#: Delta types of a leading key column whose file statistics are exact in Spark and delta-rs alike.
PROVABLE_TYPES = frozenset({"tinyint", "smallint", "int", "bigint"})


@dataclass(frozen=True)
class KeySpans:
    """The leading key values the table's live files may hold: disjoint closed ranges, sorted.

    `absent(key)` is True only when no file's [min, max] contains the key's leading value.
    """

    lows: tuple[Any, ...]
    highs: tuple[Any, ...]

    @property
    def top(self) -> Any:
        """The largest leading key value any file may hold (None: the table holds no key)."""
        return self.highs[-1] if self.highs else None

    def absent(self, key: Row) -> bool:
        value = key[0]
        if not self.highs or value > self.highs[-1]:
            return True
        index = bisect.bisect_right(self.lows, value) - 1
        return index < 0 or value > self.highs[index]


def spans_of(lows: Sequence[Any], highs: Sequence[Any], null_counts: Sequence[Any],
             records: Sequence[Any]) -> KeySpans | None:
    """The spans of files with these statistics (one entry per file); None when a file's range is unknown.

    A file whose key statistics are missing is unknown unless its statistics say every row's key is NULL (no
    MySQL key is NULL; a row keyed NULL cannot equal a key a batch inserts).
    """
    ranges = []
    for low, high, nulls, count in zip(lows, highs, null_counts, records, strict=True):
        if low is None or high is None:
            if count is not None and nulls is not None and nulls == count:
                continue
            return None
        ranges.append((low, high))
    ranges.sort()
    merged_lows: list[Any] = []
    merged_highs: list[Any] = []
    for low, high in ranges:
        if merged_highs and low <= merged_highs[-1]:
            merged_highs[-1] = max(merged_highs[-1], high)
        else:
            merged_lows.append(low)
            merged_highs.append(high)
    return KeySpans(tuple(merged_lows), tuple(merged_highs))


def file_spans(table: DeltaTable, key: str) -> KeySpans | None:
    """The spans of `key` over the live files of `table` (a delta-rs table at the version to be proven)."""
    files = file_keys(table, key)
    return spans_of([file.low for file in files], [file.high for file in files],
                    [file.null_count for file in files], [file.records for file in files])


def provable(schema: TableSchema) -> bool:
    """Whether the table's leading key column has exact statistics to prove absence with."""
    lead = schema.primary_key[0]
    column = next(column for column in schema.columns if column.name == lead)
    return spark_type_ddl(column) in PROVABLE_TYPES


class LiveKeys:
    """The absence proof for one batch of one table, read once and only when the batch has new keys to prove."""

    def __init__(self, path: str, schema: TableSchema, *, uri: str, options: dict[str, str] | None,
                 known: KnownLog) -> None:
        self.path = path
        self.schema = schema
        self.uri = uri
        self.options = options
        self.known = known
        self._spans: KeySpans | None = None
        self._read = False

    def spans(self) -> KeySpans | None:
        """The table's key spans at the known version; None when nothing can be proven (then every key MERGEs)."""
        if not self._read:
            self._read = True
            if provable(self.schema):
                self._spans = self._load()
        return self._spans

    def _load(self) -> KeySpans | None:
        kept = LOADED_TABLES.held(self.uri, self.options)
        if kept is not None and kept.version() == self.known.latest_version:
            # The delta-rs writer's own table, already at the version the log read found: no I/O (a table is
            # written by one thread at a time, and reading its file list changes nothing).
            try:
                return file_spans(kept, self.schema.primary_key[0])
            except Exception as exc:  # noqa: BLE001 - no proof: the batch's keys MERGE, which is exact anyway
                log.info("%s: key statistics not readable (%s); inserted keys are MERGEd", self.path, exc)
                return None
        try:
            table = LOADED_TABLES.take(self.uri, self.options, self.known)
        except Exception as exc:  # noqa: BLE001 - no proof: the batch's keys MERGE, which is exact anyway
            log.info("%s: key statistics not readable (%s); inserted keys are MERGEd", self.path, exc)
            return None
        try:
            if table.version() != self.known.latest_version:
                return None  # not the state the batch commits onto
            return file_spans(table, self.schema.primary_key[0])
        except Exception as exc:  # noqa: BLE001 - as above
            log.info("%s: key statistics not readable (%s); inserted keys are MERGEd", self.path, exc)
            return None
        finally:
            LOADED_TABLES.keep(self.uri, self.options, table)

    def split(self, changes: TableChanges) -> tuple[list[Row], TableChanges]:
        """`split_absent` of `changes` against this table's spans."""
        return split_absent(changes, self.spans() if changes.new_keys else None)


def split_absent(changes: TableChanges, spans: KeySpans | None) -> tuple[list[Row], TableChanges]:
    """The rows of keys proven new (first inserted in this fold, and absent from every live file), and the fold of
    every other key, for the MERGE.

    A proven-new key deleted again within the fold is in neither: it was absent before and is absent after. A new
    key that may be in the table keeps its net operation in the rest, a delete included: the table may hold a row
    under it that the binlog never showed. Meant for a fold without TRUNCATE (after one, a new key may still be
    in the target).
    """
    appended: list[Row] = []
    rest = TableChanges(changes.key_positions, truncated=changes.truncated)
    new_keys = changes.new_keys if spans is not None else set()
    if spans is not None and spans.top is not None and new_keys:
        top = spans.top
        # The common case, auto-increment keys past the table's largest: one pass, no new set.
        if min(key[0] for key in new_keys) <= top:
            new_keys = {key for key in new_keys if key[0] > top or spans.absent(key)}
    for key, (operation, row) in changes.rows.items():
        if key in new_keys:
            if operation == "upsert" and row is not None:
                appended.append(row)
        else:
            rest.rows[key] = (operation, row)
    return appended, rest


__all__ = ["PROVABLE_TYPES", "KeySpans", "LiveKeys", "file_spans", "provable", "spans_of", "split_absent"]
