"""The row detail of the chunks that differ: each side's keys and row digests, compared key by key.

Its cost follows the drift, not the table: only the drifting chunks' rows are read (`cdc_lib.reconcile.reconcile`
chooses them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pymysql

from cdc_lib.model.tables import TableRef
from cdc_lib.model.types import ColumnInfo
from cdc_lib.reconcile.chunks import ChunkPlan, chunk_where, filtered_table_sql, spark_chunk
from cdc_lib.reconcile.digests import mysql_digest, mysql_text, spark_digest, spark_text
from cdc_lib.source import server as mysql

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class RowDrift:
    """The drifting chunks compared row by row: which keys differ, and how.

    Keys are given as the canonical text of each key column (the same text on both sides).
    """

    chunks: tuple[int, ...]
    missing: int
    extra: int
    differing: int
    missing_keys: tuple[tuple[str, ...], ...] = ()
    extra_keys: tuple[tuple[str, ...], ...] = ()
    differing_keys: tuple[tuple[str, ...], ...] = ()
    #: Keys Delta holds in more than one row (a primary key must be unique), and (a sample of) them with the
    #: number of rows each holds.
    duplicated: int = 0
    duplicated_keys: tuple[tuple[tuple[str, ...], int], ...] = ()

    @property
    def rows(self) -> int:
        """How many keys the comparison found wrong, of every kind."""
        return self.missing + self.extra + self.differing + self.duplicated

    @property
    def sample_keys(self) -> list[list[str]]:
        """A few keys of each kind, missing first."""
        duplicated = tuple(key for key, _ in self.duplicated_keys)
        keys = (*self.missing_keys, *self.extra_keys, *self.differing_keys, *duplicated)
        return [list(key) for key in keys][:_SAMPLE_KEYS]

    def to_json(self) -> dict[str, Any]:
        return {
            "chunks": list(self.chunks),
            "missing": self.missing,
            "extra": self.extra,
            "differing": self.differing,
            "duplicated": self.duplicated,
            "missing_keys": [list(key) for key in self.missing_keys],
            "extra_keys": [list(key) for key in self.extra_keys],
            "differing_keys": [list(key) for key in self.differing_keys],
            "duplicated_keys": [{"key": list(key), "rows": rows} for key, rows in self.duplicated_keys],
        }


_SAMPLE_KEYS = 5


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)


def source_rows(
    connection: pymysql.connections.Connection,
    ref: TableRef,
    plan: ChunkPlan,
    columns: list[ColumnInfo],
    chunks: Iterable[int],
    *,
    row_filter: str | None = None,
) -> dict[tuple[str, ...], int]:
    """Key text → row digest of every source row in `chunks` (that `row_filter`'s SQL lands), computed by the
    server."""
    selected = ", ".join([*(mysql_text(column) for column in plan.key), mysql_digest(columns)])
    width = len(plan.key)
    rows: dict[tuple[str, ...], int] = {}
    for chunk in chunks:
        where = chunk_where(connection, plan, chunk)
        for row in mysql.query(connection, f"SELECT {selected} FROM {filtered_table_sql(ref, row_filter)}{where}"):
            rows[tuple(_text(value) for value in row[:width])] = int(row[width] or 0)
    return rows


def delta_rows(
    frame: DataFrame, plan: ChunkPlan, columns: list[ColumnInfo], chunks: Iterable[int]
) -> dict[tuple[str, ...], list[int]]:
    """Key text → the row digests of every Delta row in `chunks` with that key (more than one: a duplicated key),
    in one Spark job."""
    from pyspark.sql import functions as F

    chunked = frame.withColumn("__chunk", spark_chunk(plan)).where(F.col("__chunk").isin(sorted(set(chunks))))
    selected = chunked.select(*(spark_text(column) for column in plan.key), spark_digest(columns))
    width = len(plan.key)
    rows: dict[tuple[str, ...], list[int]] = {}
    for row in selected.collect():
        rows.setdefault(tuple(_text(value) for value in row[:width]), []).append(int(row[width] or 0))
    return rows


def _key_order(key: tuple[str, ...]) -> tuple[tuple[int, int, str], ...]:
    """Integers in numeric order, other text as text."""
    return tuple((0, int(part), "") if part.lstrip("-").isdigit() else (1, 0, part) for part in key)


def compare_rows(
    chunks: Iterable[int], source: dict[tuple[str, ...], int], delta: dict[tuple[str, ...], list[int]]
) -> RowDrift:
    """Keys only the source has (missing), only Delta has (extra), in both with other values (differing), and keys
    Delta holds more than once (duplicated, whatever their values: counted there only)."""
    duplicated = sorted((key for key, digests in delta.items() if len(digests) > 1), key=_key_order)
    missing = sorted(source.keys() - delta.keys(), key=_key_order)
    extra = sorted(key for key in delta.keys() - source.keys() if len(delta[key]) == 1)
    extra.sort(key=_key_order)
    differing = sorted(
        (key for key in source.keys() & delta.keys() if delta[key] != [source[key]] and len(delta[key]) == 1),
        key=_key_order,
    )
    return RowDrift(
        chunks=tuple(sorted(chunks)),
        missing=len(missing),
        extra=len(extra),
        differing=len(differing),
        missing_keys=tuple(missing[:_SAMPLE_KEYS]),
        extra_keys=tuple(extra[:_SAMPLE_KEYS]),
        differing_keys=tuple(differing[:_SAMPLE_KEYS]),
        duplicated=len(duplicated),
        duplicated_keys=tuple((key, len(delta[key])) for key in duplicated[:_SAMPLE_KEYS]),
    )


__all__ = ["RowDrift", "compare_rows", "delta_rows", "source_rows"]
