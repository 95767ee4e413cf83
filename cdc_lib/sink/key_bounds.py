"""The bounds of keys: a batch's leading key values (what a MERGE's file pruning needs), and the key statistics
of a table's live files (what a key's absence is proven with, and which files a batch's keys may be in).

Shared by both engines: `KeyBounds` prunes Spark's MERGE (`key_range_filter`) and delta-rs's (`key_range`);
`file_keys` reads the files' min/max for `key_absence` and `delta_rs.key_rewrite`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import quote_identifier, spark_type_ddl

if TYPE_CHECKING:
    from deltalake import DeltaTable

#: Delta types of a leading key column whose values order as numbers (their min/max statistics compare as the
#: keys do, and a range of them is a BETWEEN).
ORDERED_KEY_TYPES = ("tinyint", "smallint", "int", "bigint", "decimal(20,0)")


class KeyBounds:
    """The smallest and largest leading key value of the keys added, for `key_range_filter` (integer keys)."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.ends: list[tuple[Any, ...]] = []

    def add(self, keys: Iterable[tuple[Any, ...]]) -> None:
        values = [key[0] for key in keys]
        if values:
            self.ends = [(value,) for value in (*(end[0] for end in self.ends), min(values), max(values))]
            self.ends = [min(self.ends), max(self.ends)]

    def filter(self) -> str | None:
        return key_range_filter(self.schema, self.ends)

    def range(self) -> tuple[Any, Any] | None:
        return key_range(self.schema, self.ends)


def key_range(schema: TableSchema, keys: Iterable[tuple[Any, ...]]) -> tuple[Any, Any] | None:
    """The smallest and largest leading key value of `keys`, for integer keys; else None."""
    lead = schema.primary_key[0]
    column = next(column for column in schema.columns if column.name == lead)
    if spark_type_ddl(column) not in ORDERED_KEY_TYPES:
        return None
    values = [key[0] for key in keys]
    if not values:
        return None
    return min(values), max(values)


def key_range_filter(schema: TableSchema, keys: Iterable[tuple[Any, ...]]) -> str | None:
    """A predicate on the target's (`t`) leading key column covering `keys`, for integer keys; else None."""
    bounds = key_range(schema, keys)
    if bounds is None:
        return None
    lead = schema.primary_key[0]
    return f"t.{quote_identifier(lead)} BETWEEN {bounds[0]} AND {bounds[1]}"


@dataclass(frozen=True)
class FileKeys:
    """A live file of a table and the statistics of one key column in its `add` action."""

    path: str  # as the log names it (relative and URL-encoded, or absolute)
    size: int
    low: Any  # the key's min statistic; None: no statistics (the file may hold any key)
    high: Any
    null_count: Any  # None: not recorded
    records: Any  # the file's row count; None: not recorded


def file_keys(table: DeltaTable, key: str) -> list[FileKeys]:
    """The live files of `table` (a delta-rs table) with the statistics of `key`, as its log holds them."""
    import pyarrow as pa

    actions = pa.table(table.get_add_actions(flatten=True))
    names = actions.column_names

    def column(name: str) -> list[Any]:
        return actions.column(name).to_pylist() if name in names else [None] * actions.num_rows

    return [FileKeys(*values) for values in zip(
        column("path"), column("size_bytes"), column(f"min.{key}"),
        column(f"max.{key}"), column(f"null_count.{key}"), column("num_records"), strict=True)]


__all__ = ["ORDERED_KEY_TYPES", "FileKeys", "KeyBounds", "file_keys", "key_range", "key_range_filter"]
