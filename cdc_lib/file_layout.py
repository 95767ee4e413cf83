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

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

#: The table property delta-rs sizes its written files by (write, MERGE, DELETE, OPTIMIZE).
TARGET_FILE_SIZE_PROPERTY = "delta.targetFileSize"
#: The file size a delta-rs-written mirror table gets (bench/merge_layout.py: per-MERGE time against size).
TARGET_FILE_BYTES = 1024 * 1024
#: The most ranges a MERGE's key predicate names: each is one more OR term for delta-rs's file pruning to check
#: per file, and past a few the skipped gaps are small.
MAX_KEY_RANGES = 8


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


__all__ = ["MAX_KEY_RANGES", "TARGET_FILE_BYTES", "TARGET_FILE_SIZE_PROPERTY", "key_ranges", "ranges_predicate"]
