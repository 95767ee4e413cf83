"""How reconciliation cuts a table into chunks, and each chunk's tally (row count, digest sum) on either side.

MySQL computes a chunk's tally over an index range (or a GROUP BY of hash buckets), no row leaving the server;
Spark groups every Delta row into its chunk in one job. The row digests are `cdc_lib.reconcile.digests`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pymysql

from cdc_lib.model.tables import TableRef
from cdc_lib.model.types import ColumnInfo, quote_identifier
from cdc_lib.reconcile.digests import mysql_digest, mysql_row_text, spark_digest, spark_row_text
from cdc_lib.source import server as mysql
from cdc_lib.source.key_ranges import integer_cuts, is_integer, table_sql

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

ChunkMode = Literal["key_range", "key_hash"]


# -- chunks ---------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ChunkPlan:
    """How a table is cut: key ranges split at `boundaries`, or `buckets` hash buckets of the key."""

    mode: ChunkMode
    key: tuple[ColumnInfo, ...]
    boundaries: tuple[Any, ...] = ()
    buckets: int = 1

    @property
    def chunks(self) -> int:
        return len(self.boundaries) + 1 if self.mode == "key_range" else self.buckets

    def bounds(self, chunk: int) -> tuple[Any | None, Any | None]:
        """Inclusive lower and exclusive upper key of a range chunk (None: unbounded)."""
        lower = self.boundaries[chunk - 1] if chunk > 0 else None
        upper = self.boundaries[chunk] if chunk < len(self.boundaries) else None
        return lower, upper

    def describe(self, chunk: int) -> str:
        if self.mode == "key_hash":
            return f"hash bucket {chunk}/{self.buckets} of ({', '.join(c.name for c in self.key)})"
        lower, upper = self.bounds(chunk)
        name = self.key[0].name
        if lower is None and upper is None:
            return "whole table"
        if lower is None:
            return f"{name} < {upper}"
        if upper is None:
            return f"{name} >= {lower}"
        return f"{lower} <= {name} < {upper}"


def bucket_expression(value: Column, boundaries: list[Any], offset: int = 0) -> Column:
    """Index of the range holding `value` — a balanced tree of comparisons, log2(chunks) deep."""
    from pyspark.sql import functions as F

    if not boundaries:
        return F.lit(offset)
    middle = len(boundaries) // 2
    return F.when(value < F.lit(boundaries[middle]), bucket_expression(value, boundaries[:middle], offset)).otherwise(
        bucket_expression(value, boundaries[middle + 1 :], offset + middle + 1)
    )


def plan_chunks(
    connection: pymysql.connections.Connection,
    ref: TableRef,
    key: tuple[ColumnInfo, ...],
    *,
    rows: int,
    chunk_rows: int,
    max_chunks: int,
) -> ChunkPlan:
    """Cut a table into chunks of about `chunk_rows` rows (at most `max_chunks` of them).

    An integer leading key column is cut into ranges of equal width (`cdc_lib.source.key_ranges`, as the snapshot
    does); any other key into buckets of a hash of the whole key, since MySQL and Spark order text differently.
    """
    chunk_rows = max(chunk_rows, math.ceil(rows / max_chunks) if max_chunks else chunk_rows, 1)
    lead = key[0]
    if is_integer(lead):
        ranges = max(1, math.ceil(rows / chunk_rows))
        cuts = tuple(integer_cuts(connection, ref, lead.name, ranges=ranges))
        return ChunkPlan(mode="key_range", key=key, boundaries=cuts)
    return ChunkPlan(mode="key_hash", key=key, buckets=max(1, math.ceil(rows / chunk_rows)))


# -- tallies --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkTally:
    """One chunk of one side: its row count and the exact sum of its rows' digests."""

    rows: int
    digest: int


EMPTY_TALLY = ChunkTally(rows=0, digest=0)


def _tally(row: tuple[Any, ...]) -> ChunkTally:
    return ChunkTally(rows=int(row[0] or 0), digest=int(row[1] or 0))


def _mysql_aggregates(columns: list[ColumnInfo]) -> str:
    # SUM of BIGINT UNSIGNED is a DECIMAL(65): exact for any number of 60-bit digests a table can hold.
    return f"COUNT(*), SUM({mysql_digest(columns)})"


def _mysql_key_bucket(plan: ChunkPlan) -> str:
    return f"CAST(CONV(LEFT(MD5({mysql_row_text(list(plan.key))}), 8), 16, 10) AS UNSIGNED) % {plan.buckets}"


def source_tallies(
    connection: pymysql.connections.Connection,
    ref: TableRef,
    plan: ChunkPlan,
    columns: list[ColumnInfo],
    *,
    only: set[int] | None = None,
    row_filter: str | None = None,
) -> dict[int, ChunkTally]:
    """Per-chunk tallies computed by the server: one range query per chunk, or one GROUP BY for buckets.

    `row_filter`: the table's row filter as SQL (`BoundFilter.sql`): only the rows it lands are tallied.
    """
    table, aggregates = filtered_table_sql(ref, row_filter), _mysql_aggregates(columns)
    tallies: dict[int, ChunkTally] = {}
    if plan.mode == "key_hash":
        bucket = _mysql_key_bucket(plan)
        for row in mysql.query(connection, f"SELECT {bucket} AS chunk, {aggregates} FROM {table} GROUP BY chunk"):
            if only is None or int(row[0]) in only:
                tallies[int(row[0])] = _tally(row[1:])
        return tallies
    for chunk in range(plan.chunks):
        if only is not None and chunk not in only:
            continue
        where = chunk_where(connection, plan, chunk)
        tallies[chunk] = _tally(mysql.query(connection, f"SELECT {aggregates} FROM {table}{where}")[0])
    return tallies


def filtered_table_sql(ref: TableRef, row_filter: str | None) -> str:
    """The table to select from: itself, or the rows of its row filter (docs/row-filters.md) as a derived table."""
    if row_filter is None:
        return table_sql(ref)
    return f"(SELECT * FROM {table_sql(ref)} WHERE {row_filter}) AS binlake_filtered"


def chunk_where(connection: pymysql.connections.Connection, plan: ChunkPlan, chunk: int) -> str:
    """The WHERE clause (with its leading space; empty for the whole table) selecting one chunk's rows."""
    if plan.mode == "key_hash":
        return f" WHERE {_mysql_key_bucket(plan)} = {chunk}"
    lead = quote_identifier(plan.key[0].name)
    lower, upper = plan.bounds(chunk)
    conditions = []
    if lower is not None:
        conditions.append(f"{lead} >= {connection.escape(lower)}")
    if upper is not None:
        conditions.append(f"{lead} < {connection.escape(upper)}")
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


def spark_chunk(plan: ChunkPlan) -> Column:
    from pyspark.sql import functions as F

    if plan.mode == "key_range":
        return bucket_expression(F.col(quote_identifier(plan.key[0].name)), list(plan.boundaries))
    key_hash = F.conv(F.substring(F.md5(spark_row_text(list(plan.key))), 1, 8), 16, 10).cast("bigint")
    return F.pmod(key_hash, F.lit(plan.buckets))


def delta_tallies(
    frame: DataFrame, plan: ChunkPlan, columns: list[ColumnInfo], *, only: set[int] | None = None
) -> dict[int, ChunkTally]:
    """Per-chunk tallies of the Delta table, all chunks in one Spark job."""
    from pyspark.sql import functions as F

    chunked = frame.withColumn("__chunk", spark_chunk(plan))
    if only is not None:
        chunked = chunked.where(F.col("__chunk").isin(sorted(only)))
    rows = chunked.groupBy("__chunk").agg(F.count(F.lit(1)), F.sum(spark_digest(columns))).collect()
    return {int(row[0]): _tally(tuple(row[1:])) for row in rows}


__all__ = [
    "EMPTY_TALLY",
    "ChunkMode",
    "ChunkPlan",
    "ChunkTally",
    "bucket_expression",
    "chunk_where",
    "delta_tallies",
    "filtered_table_sql",
    "plan_chunks",
    "source_tallies",
    "spark_chunk",
]
