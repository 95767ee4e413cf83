"""How a mirror table written by delta-rs is laid out in files, so that a MERGE's cost follows its batch.

delta-rs 1.6.6 rewrites, in a MERGE, only the files that hold a row the MERGE matched (the others it scans and
leaves), and it writes a table's files up to the table's `delta.targetFileSize` (100 MiB when unset): a 100k-row
mirror was one file after its snapshot, and every mixed batch rewrote the whole table into one larger file
(docs/performance.md "Files a MERGE rewrites"). Two things bound that:

- files of a bounded size whose key ranges barely overlap: the delta-rs snapshot writes each wave sorted by the
  primary key and sets `delta.targetFileSize` (`TARGET_FILE_BYTES`), which delta-rs's MERGE, DELETE and appends
  then follow too;
- a MERGE scan pruned to the batch's keys: `key_ranges` cuts the batch's sorted leading key values at their
  largest gaps into a few ranges, and the join predicate's disjunction of them lets delta-rs skip every file
  whose min/max statistics lie between the ranges.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from cdc_lib.errors import TableError

#: The table property delta-rs sizes its written files by (write, MERGE, DELETE, OPTIMIZE).
TARGET_FILE_SIZE_PROPERTY = "delta.targetFileSize"
#: The file size a delta-rs-written mirror table gets (bench/merge_layout.py: per-MERGE time against size).
TARGET_FILE_BYTES = 1024 * 1024
#: The most ranges a MERGE's key predicate names: each is one more OR term for delta-rs's file pruning to check
#: per file, and past a few the skipped gaps are small.
MAX_KEY_RANGES = 8


#: Units of a byte count as Spark and Delta write one (`64mb`, `1g`, `1048576`): binary multiples, any case.
_BYTE_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30,
               "gb": 1 << 30, "t": 1 << 40, "tb": 1 << 40}


class FileSizeError(TableError):
    """A table's `delta.targetFileSize` is no byte count binlake can write files by."""


def parse_byte_size(text: str) -> int | None:
    """`text` as a number of bytes (`1048576`, `64mb`, `1 GB`); None when it is none, or not above zero."""
    match = re.fullmatch(r"\s*(\d+)\s*([A-Za-z]*)\s*", text)
    if match is None or match.group(2).lower() not in _BYTE_UNITS:
        return None
    size = int(match.group(1)) * _BYTE_UNITS[match.group(2).lower()]
    return size if size > 0 else None


def target_file_bytes(properties: Mapping[str, str | None], *, table: str | None = None) -> int:
    """The size binlake writes a table's files by: its `delta.targetFileSize` when set (a person may choose larger
    files, e.g. for a large table that changes in a few places), else `TARGET_FILE_BYTES`.

    Raises:
        FileSizeError: the property is set to something that is no byte count.
    """
    value = properties.get(TARGET_FILE_SIZE_PROPERTY)
    if value is None or value == "":
        return TARGET_FILE_BYTES
    size = parse_byte_size(value)
    if size is None:
        raise FileSizeError(
            f"the Delta table's {TARGET_FILE_SIZE_PROPERTY} is '{value}', which is no byte count",
            remedy=f"set it to a size such as 1048576 or 64mb (ALTER TABLE delta.`<path>` SET TBLPROPERTIES "
            f"('{TARGET_FILE_SIZE_PROPERTY}' = '1mb')), or unset it for binlake's default "
            f"({TARGET_FILE_BYTES} bytes); nothing was written",
            table=table,
        )
    return size


def key_ranges(values: Iterable[Any], limit: int = MAX_KEY_RANGES) -> list[tuple[Any, Any]]:
    """Sorted, disjoint `(low, high)` ranges that together hold every value (integers or integral Decimals):
    the sorted distinct values cut at their `limit - 1` largest gaps. Empty for no values."""
    ordered = sorted(set(values))
    if not ordered:
        return []
    gaps = sorted(range(1, len(ordered)), key=lambda index: ordered[index] - ordered[index - 1], reverse=True)
    cuts = sorted(gaps[: max(0, limit - 1)])
    ranges = []
    start = 0
    for cut in cuts:
        ranges.append((ordered[start], ordered[cut - 1]))
        start = cut
    ranges.append((ordered[start], ordered[-1]))
    return ranges


def ranges_predicate(column: str, ddl: str, ranges: Sequence[tuple[Any, Any]]) -> str:
    """`(<column> BETWEEN a AND b OR …)` for an integer or DECIMAL(20,0) column (`column` quoted and aliased by
    the caller); a DECIMAL's literals are cast to the column's type (a key past 2^63 is no BIGINT)."""
    if not ranges:
        raise ValueError("a key predicate needs at least one range")

    def literal(value: Any) -> str:
        if ddl.startswith("decimal"):
            return f"CAST('{Decimal(value)}' AS DECIMAL(20, 0))"
        return str(int(value))

    terms = [f"{column} BETWEEN {literal(low)} AND {literal(high)}" for low, high in ranges]
    return terms[0] if len(terms) == 1 else "(" + " OR ".join(terms) + ")"


__all__ = [
    "MAX_KEY_RANGES", "TARGET_FILE_BYTES", "TARGET_FILE_SIZE_PROPERTY", "FileSizeError", "key_ranges",
    "parse_byte_size", "ranges_predicate", "target_file_bytes",
]
