"""Reconciliation: is a Delta copy equal to its source table? One implementation for the CLI, the demo and Dagster.

A table is split into chunks by primary-key range
(or, when the leading key column is not an integer, by a hash of the key).
For every chunk both sides compute a row count and a content digest — the sum
of a 60-bit hash of each row's canonical text:

    MySQL  → one aggregate query per chunk, over an index range; no row leaves the server
    Delta  → one Spark job that groups every row into its chunk

The canonical text of a value is derived from the one type mapping
(`cdc_lib.types.spark_type_ddl`), so both engines produce the same bytes for the
same value. FLOAT and DOUBLE columns have no common text form; each is compared
per chunk by its non-null count, its sum and a sum weighted by a hash of the
row's key (so values swapped between rows do not cancel out), within the
type's own precision: 6 significant digits for FLOAT (what MySQL prints, and
so what a JDBC snapshot reads), 12 for DOUBLE.

A mismatch is *confirmed* when the source did not move during the check and
the table's offset was at the end of the binlog (so the copy had every
change), or when it persists in a second pass taken after the pipeline caught
up with the point the first pass saw. Otherwise it may be changes still in
flight, and is reported as such.

Only the chunks that differ are then compared row by row (at most `detail_chunks` of
them): each side sends the key, the row digest and the float values of those
chunks' rows, which tells which keys are missing from Delta, which are extra, and
which hold other values. The cost of that detail follows the drift, not the table.

A soft-delete or history table is compared on its live rows (not deleted; the current versions), without
binlake's metadata columns (`table_modes.live_rows`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pymysql

from cdc_lib import source as mysql
from cdc_lib.errors import NotSnapshottedError
from cdc_lib.key_ranges import integer_cuts, is_integer, row_count, table_sql
from cdc_lib.offsets import PipelineState
from cdc_lib.positions import BinlogPosition
from cdc_lib.source import TableRef
from cdc_lib.table_modes import live_rows
from cdc_lib.types import ColumnInfo, quote_identifier, spark_type_ddl

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from cdc_lib.pipeline import Pipeline

ChunkMode = Literal["key_range", "key_hash"]

_FLOAT_TARGETS = {"float", "double"}
_TEXT_KINDS = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"}
_NULL_MARK = "N"
# Relative precision a value keeps through the text protocol: FLT_DIG = 6 digits for FLOAT, DBL_DIG = 15 for DOUBLE.
_RELATIVE_PRECISION = {"float": 1e-6, "double": 1e-12}
# The same for one value rather than a sum, where no rounding errors average out: MySQL's 6-digit text of a
# FLOAT is off by up to half a unit in the 6th significant digit, 5e-6 of the value.
_ROW_RELATIVE_PRECISION = {"float": 1e-5, "double": 1e-12}
_KEY_WEIGHTS = 997
#: Rows per chunk unless the caller says otherwise (the CLI's --chunk-rows, the Dagster resource's setting).
DEFAULT_CHUNK_ROWS = 100_000


# -- canonical text, one definition per engine ----------------------------------------------------


def hashed_columns(columns: Iterable[ColumnInfo]) -> list[ColumnInfo]:
    """Columns that take part in the row digest (every column but FLOAT/DOUBLE)."""
    return [column for column in columns if spark_type_ddl(column) not in _FLOAT_TARGETS]


def float_columns(columns: Iterable[ColumnInfo]) -> list[ColumnInfo]:
    return [column for column in columns if spark_type_ddl(column) in _FLOAT_TARGETS]


def mysql_text(column: ColumnInfo) -> str:
    """SQL giving the canonical text of a column's value as bytes (NULL stays NULL)."""
    quoted = quote_identifier(column.name)
    kind = column.data_type.lower()
    target = spark_type_ddl(column)
    if kind in ("bit", "year"):
        text = f"CAST(CAST({quoted} AS UNSIGNED) AS CHAR)"
    elif target == "binary":
        text = f"HEX({quoted})"
    elif target in ("timestamp", "timestamp_ntz"):
        text = f"DATE_FORMAT({quoted}, '%Y-%m-%d %H:%i:%s.%f')"
    elif kind in _TEXT_KINDS:
        text = f"CONVERT({quoted} USING utf8mb4)"
    else:
        text = f"CAST({quoted} AS CHAR)"
    return f"CAST({text} AS BINARY)"


def mysql_row_text(columns: list[ColumnInfo]) -> str:
    """Length-prefixed concatenation, so no value can shift into its neighbour."""
    fields = [f"IFNULL(CONCAT(LENGTH({mysql_text(c)}), ':', {mysql_text(c)}), '{_NULL_MARK}')" for c in columns]
    return f"CONCAT({', '.join(fields)})" if fields else "''"


def mysql_digest(columns: list[ColumnInfo]) -> str:
    return f"CAST(CONV(LEFT(MD5({mysql_row_text(columns)}), 15), 16, 10) AS UNSIGNED)"


def spark_text(column: ColumnInfo) -> Column:
    from pyspark.sql import functions as F

    value = F.col(quote_identifier(column.name))
    target = spark_type_ddl(column)
    if target == "binary":
        return F.hex(value)
    if target in ("timestamp", "timestamp_ntz"):
        return F.date_format(value, "yyyy-MM-dd HH:mm:ss.SSSSSS")
    if target == "string":
        return value
    return value.cast("string")


def spark_row_text(columns: list[ColumnInfo]) -> Column:
    from pyspark.sql import functions as F

    fields = [
        F.coalesce(F.concat(F.octet_length(spark_text(c)).cast("string"), F.lit(":"), spark_text(c)), F.lit(_NULL_MARK))
        for c in columns
    ]
    return F.concat(*fields) if fields else F.lit("")


def spark_digest(columns: list[ColumnInfo]) -> Column:
    from pyspark.sql import functions as F

    return F.conv(F.substring(F.md5(spark_row_text(columns)), 1, 15), 16, 10).cast("decimal(38,0)")


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

    An integer leading key column is cut into ranges of equal width (`cdc_lib.key_ranges`, as the snapshot
    does); any other key into buckets of a hash of the whole key, since MySQL and Spark order text differently.
    """
    chunk_rows = max(chunk_rows, math.ceil(rows / max_chunks) if max_chunks else chunk_rows, 1)
    lead = key[0]
    if is_integer(lead):
        ranges = max(1, math.ceil(rows / chunk_rows))
        cuts = tuple(integer_cuts(connection, ref, lead.name, ranges=ranges))
        return ChunkPlan(mode="key_range", key=key, boundaries=cuts)
    if any(spark_type_ddl(column) in _FLOAT_TARGETS for column in key):
        return ChunkPlan(mode="key_hash", key=key, buckets=1)
    return ChunkPlan(mode="key_hash", key=key, buckets=max(1, math.ceil(rows / chunk_rows)))


# -- tallies --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloatTally:
    """One FLOAT/DOUBLE column of one chunk: non-null count, sum, sum of magnitudes, key-weighted sum."""

    count: int = 0
    total: float = 0.0
    magnitude: float = 0.0
    weighted: float = 0.0

    def same_as(self, other: FloatTally, precision: float) -> bool:
        scale = max(self.magnitude, other.magnitude)
        slack = precision * scale + 1e-300
        return (
            self.count == other.count
            and abs(self.total - other.total) <= slack
            and abs(self.weighted - other.weighted) <= slack * _KEY_WEIGHTS
        )


@dataclass(frozen=True)
class ChunkTally:
    rows: int
    digest: int
    floats: tuple[FloatTally, ...] = ()

    def same_as(self, other: ChunkTally, precisions: tuple[float, ...]) -> bool:
        if (self.rows, self.digest) != (other.rows, other.digest):
            return False
        return all(
            mine.same_as(theirs, precision)
            for mine, theirs, precision in zip(self.floats, other.floats, precisions, strict=True)
        )


def _empty(floats: int) -> ChunkTally:
    return ChunkTally(rows=0, digest=0, floats=(FloatTally(),) * floats)


def _tally(row: tuple[Any, ...], floats: int) -> ChunkTally:
    """A chunk's tally from a result row: count, digest, then four values per float column."""
    rows, digest = int(row[0] or 0), int(row[1] or 0)
    values = [0.0 if value is None else float(value) for value in row[2 : 2 + 4 * floats]]
    tallies = tuple(
        FloatTally(count=int(values[index]), total=values[index + 1], magnitude=values[index + 2],
                   weighted=values[index + 3])
        for index in range(0, 4 * floats, 4)
    )
    return ChunkTally(rows=rows, digest=digest, floats=tallies)


def precisions(floats: list[ColumnInfo], *, per_row: bool = False) -> tuple[float, ...]:
    """Relative precision of each float column's sums (or, `per_row`, of its single values)."""
    table = _ROW_RELATIVE_PRECISION if per_row else _RELATIVE_PRECISION
    return tuple(table[spark_type_ddl(column)] for column in floats)


def _mysql_aggregates(hashed: list[ColumnInfo], floats: list[ColumnInfo], key: tuple[ColumnInfo, ...]) -> str:
    parts = ["COUNT(*)", f"SUM({mysql_digest(hashed)})"]
    weight = f"(CAST(CONV(LEFT(MD5({mysql_row_text(list(key))}), 4), 16, 10) AS UNSIGNED) % {_KEY_WEIGHTS} + 1)"
    for column in floats:
        value = quote_identifier(column.name)
        parts += [f"COUNT({value})", f"SUM({value})", f"SUM(ABS({value}))", f"SUM({value} * {weight})"]
    return ", ".join(parts)


def _mysql_key_bucket(plan: ChunkPlan) -> str:
    return f"CAST(CONV(LEFT(MD5({mysql_row_text(list(plan.key))}), 8), 16, 10) AS UNSIGNED) % {plan.buckets}"


def source_tallies(
    connection: pymysql.connections.Connection,
    ref: TableRef,
    plan: ChunkPlan,
    hashed: list[ColumnInfo],
    floats: list[ColumnInfo],
    *,
    only: set[int] | None = None,
) -> dict[int, ChunkTally]:
    """Per-chunk tallies computed by the server: one range query per chunk, or one GROUP BY for buckets."""
    table, aggregates = table_sql(ref), _mysql_aggregates(hashed, floats, plan.key)
    tallies: dict[int, ChunkTally] = {}
    if plan.mode == "key_hash":
        bucket = _mysql_key_bucket(plan)
        for row in mysql.query(connection, f"SELECT {bucket} AS chunk, {aggregates} FROM {table} GROUP BY chunk"):
            if only is None or int(row[0]) in only:
                tallies[int(row[0])] = _tally(row[1:], len(floats))
        return tallies
    for chunk in range(plan.chunks):
        if only is not None and chunk not in only:
            continue
        where = _chunk_where(connection, plan, chunk)
        tallies[chunk] = _tally(mysql.query(connection, f"SELECT {aggregates} FROM {table}{where}")[0], len(floats))
    return tallies


def _chunk_where(connection: pymysql.connections.Connection, plan: ChunkPlan, chunk: int) -> str:
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


def _spark_chunk(plan: ChunkPlan) -> Column:
    from pyspark.sql import functions as F

    if plan.mode == "key_range":
        return bucket_expression(F.col(quote_identifier(plan.key[0].name)), list(plan.boundaries))
    key_hash = F.conv(F.substring(F.md5(spark_row_text(list(plan.key))), 1, 8), 16, 10).cast("bigint")
    return F.pmod(key_hash, F.lit(plan.buckets))


def delta_tallies(
    frame: DataFrame,
    plan: ChunkPlan,
    hashed: list[ColumnInfo],
    floats: list[ColumnInfo],
    *,
    only: set[int] | None = None,
) -> dict[int, ChunkTally]:
    """Per-chunk tallies of the Delta table, all chunks in one Spark job."""
    from pyspark.sql import functions as F

    chunked = frame.withColumn("__chunk", _spark_chunk(plan))
    if only is not None:
        chunked = chunked.where(F.col("__chunk").isin(sorted(only)))
    aggregates = [F.count(F.lit(1)), F.sum(spark_digest(hashed))]
    key_hash = F.conv(F.substring(F.md5(spark_row_text(list(plan.key))), 1, 4), 16, 10).cast("bigint")
    weight = F.pmod(key_hash, F.lit(_KEY_WEIGHTS)) + 1
    for column in floats:
        value = F.col(quote_identifier(column.name)).cast("double")
        aggregates += [F.count(value), F.sum(value), F.sum(F.abs(value)), F.sum(value * weight)]
    rows = chunked.groupBy("__chunk").agg(*aggregates).collect()
    return {int(row[0]): _tally(tuple(row[1:]), len(floats)) for row in rows}


# -- row detail of the drifting chunks ------------------------------------------------------------

#: A row as both sides describe it for the row-level comparison: digest of the hashed columns, float values.
RowFacts = tuple[int, tuple[float | None, ...]]


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

    @property
    def sample_keys(self) -> list[list[str]]:
        """A few keys of each kind, missing first."""
        return [list(key) for key in (*self.missing_keys, *self.extra_keys, *self.differing_keys)][:_SAMPLE_KEYS]

    def to_json(self) -> dict[str, Any]:
        return {
            "chunks": list(self.chunks),
            "missing": self.missing,
            "extra": self.extra,
            "differing": self.differing,
            "missing_keys": [list(key) for key in self.missing_keys],
            "extra_keys": [list(key) for key in self.extra_keys],
            "differing_keys": [list(key) for key in self.differing_keys],
        }


_SAMPLE_KEYS = 5


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)


def _floats(values: Iterable[Any]) -> tuple[float | None, ...]:
    return tuple(None if value is None else float(value) for value in values)


def source_rows(
    connection: pymysql.connections.Connection,
    ref: TableRef,
    plan: ChunkPlan,
    hashed: list[ColumnInfo],
    floats: list[ColumnInfo],
    chunks: Iterable[int],
) -> dict[tuple[str, ...], RowFacts]:
    """Key text → (digest, float values) of every source row in `chunks`, computed by the server."""
    keys = [mysql_text(column) for column in plan.key]
    selected = ", ".join([*keys, mysql_digest(hashed), *(quote_identifier(column.name) for column in floats)])
    width = len(plan.key)
    rows: dict[tuple[str, ...], RowFacts] = {}
    for chunk in chunks:
        where = _chunk_where(connection, plan, chunk)
        for row in mysql.query(connection, f"SELECT {selected} FROM {table_sql(ref)}{where}"):
            rows[tuple(_text(value) for value in row[:width])] = (int(row[width] or 0), _floats(row[width + 1 :]))
    return rows


def delta_rows(
    frame: DataFrame, plan: ChunkPlan, hashed: list[ColumnInfo], floats: list[ColumnInfo], chunks: Iterable[int]
) -> dict[tuple[str, ...], RowFacts]:
    """Key text → (digest, float values) of every Delta row in `chunks`, in one Spark job."""
    from pyspark.sql import functions as F

    chunked = frame.withColumn("__chunk", _spark_chunk(plan)).where(F.col("__chunk").isin(sorted(set(chunks))))
    selected = chunked.select(
        *(spark_text(column) for column in plan.key),
        spark_digest(hashed),
        *(F.col(quote_identifier(column.name)).cast("double") for column in floats),
    )
    width = len(plan.key)
    return {
        tuple(_text(value) for value in row[:width]): (int(row[width] or 0), _floats(row[width + 1 :]))
        for row in selected.collect()
    }


def _same_float(mine: float | None, theirs: float | None, precision: float) -> bool:
    if mine is None or theirs is None:
        return mine is None and theirs is None
    return abs(mine - theirs) <= precision * max(abs(mine), abs(theirs)) + 1e-300


def _same_row(mine: RowFacts, theirs: RowFacts, tolerances: tuple[float, ...]) -> bool:
    return mine[0] == theirs[0] and all(
        _same_float(a, b, precision) for a, b, precision in zip(mine[1], theirs[1], tolerances, strict=True)
    )


def _key_order(key: tuple[str, ...]) -> tuple[tuple[int, int, str], ...]:
    """Integers in numeric order, other text as text."""
    return tuple((0, int(part), "") if part.lstrip("-").isdigit() else (1, 0, part) for part in key)


def compare_rows(
    chunks: Iterable[int],
    source: dict[tuple[str, ...], RowFacts],
    delta: dict[tuple[str, ...], RowFacts],
    tolerances: tuple[float, ...],
) -> RowDrift:
    """Keys only the source has (missing), only Delta has (extra), and in both with other values (differing)."""
    missing = sorted(source.keys() - delta.keys(), key=_key_order)
    extra = sorted(delta.keys() - source.keys(), key=_key_order)
    differing = sorted(
        (key for key in source.keys() & delta.keys() if not _same_row(source[key], delta[key], tolerances)),
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
    )


# -- reconciliation -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ChunkMismatch:
    chunk: int
    where: str
    source_rows: int
    delta_rows: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ReconciliationReport:
    table: str
    mode: ChunkMode
    chunks: int
    columns: int
    source_rows: int
    delta_rows: int
    mismatches: tuple[ChunkMismatch, ...]
    schema_differences: tuple[str, ...]
    confirmed: bool
    rechecked: bool
    seconds: float
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: Row-level comparison of (the first `detail_chunks` of) the mismatched chunks; None when none differ.
    drift: RowDrift | None = None

    @property
    def matches(self) -> bool:
        return not self.mismatches and not self.schema_differences and self.source_rows == self.delta_rows

    def to_json(self) -> dict[str, Any]:
        return {
            **{key: value for key, value in self.__dict__.items() if key not in ("mismatches", "drift")},
            "mismatches": [mismatch.to_json() for mismatch in self.mismatches],
            "drift": self.drift.to_json() if self.drift is not None else None,
            "matches": self.matches,
        }


def _at_end(state: PipelineState, table: str, logs: list[tuple[str, int]], server_end: BinlogPosition) -> bool:
    table_state = state.tables.get(table)
    if table_state is None or not table_state.position.written_on(server_end.server):
        return False  # an offset from another server says nothing about this server's files
    return mysql.bytes_behind(table_state.position, logs) == 0


def reconcile_table(
    pipeline: Pipeline,
    table: str,
    *,
    chunk_rows: int = DEFAULT_CHUNK_ROWS,
    max_chunks: int = 1024,
    recheck_after_seconds: float = 0.0,
    recheck_timeout_seconds: float = 600.0,
    detail_chunks: int = 8,
) -> ReconciliationReport:
    """Compare a table's source and Delta copy chunk by chunk; see the module docstring.

    Args:
        chunk_rows: rows per chunk (raised so that there are at most `max_chunks`).
        recheck_after_seconds: when a mismatch is not confirmed, wait this long, then
            (once the table's offset reaches the binlog end the first pass saw, within
            `recheck_timeout_seconds`) compare the mismatched chunks again. 0 disables it.
        detail_chunks: compare the rows of at most this many mismatched chunks, to name the
            keys that differ (`ReconciliationReport.drift`). 0 disables it.

    Raises:
        NotSnapshottedError: the table has no snapshot yet.
        BinlakeError: the source or the offset store cannot be read.
    """
    started = time.monotonic()
    pipeline.require_snapshot(table)
    ref = TableRef.parse(table)
    spark = pipeline.spark()
    path = pipeline.table_path(table)
    frame = live_rows(spark.read.format("delta").load(path))
    with mysql.source_connection(pipeline.config.source) as connection:
        schema = mysql.describe_table(connection, ref)
        delta_names = set(frame.columns)
        differences = [f"column {c} is not in the Delta table" for c in schema.column_names if c not in delta_names]
        extra = sorted(delta_names - set(schema.column_names))
        differences += [f"column {c} is only in the Delta table" for c in extra]
        columns = [column for column in schema.columns if column.name in delta_names]
        hashed, floats = hashed_columns(columns), float_columns(columns)
        key = tuple(column for column in schema.columns if column.name in schema.primary_key)
        key = tuple(sorted(key, key=lambda column: schema.primary_key.index(column.name)))

        end_before = mysql.current_position(connection)
        quiet_table = _at_end(pipeline.read_state(), table, mysql.binary_logs(connection), end_before)
        rows = row_count(connection, ref)
        plan = plan_chunks(connection, ref, key, rows=rows, chunk_rows=chunk_rows, max_chunks=max_chunks)
        source = source_tallies(connection, ref, plan, hashed, floats)
        delta = delta_tallies(frame, plan, hashed, floats)
        end_after = mysql.current_position(connection)
        mismatched = _mismatched(source, delta, precisions(floats))
        confirmed = quiet_table and end_before.same_point(end_after)
        notes: list[str] = []
        rechecked = False
        if mismatched and not confirmed and recheck_after_seconds > 0:
            rechecked = True
            caught_up = _wait_for_offset(pipeline, table, end_after, recheck_after_seconds, recheck_timeout_seconds)
            if caught_up:
                only = set(mismatched)
                for tallies in (source, delta):
                    tallies.update({chunk: _empty(len(floats)) for chunk in only})
                source.update(source_tallies(connection, ref, plan, hashed, floats, only=only))
                frame = live_rows(spark.read.format("delta").load(path))
                delta.update(delta_tallies(frame, plan, hashed, floats, only=only))
                mismatched = _mismatched({c: source[c] for c in only}, {c: delta[c] for c in only}, precisions(floats))
                confirmed = True
                notes.append("mismatched chunks were compared again after the pipeline caught up")
            else:
                notes.append("the pipeline did not catch up in time for a second pass")
        elif mismatched and not confirmed:
            notes.append("the source changed during the check or the table had unapplied changes")
        drift = None
        if mismatched and detail_chunks > 0:
            chosen = mismatched[:detail_chunks]
            drift = compare_rows(
                chosen,
                source_rows(connection, ref, plan, hashed, floats, chosen),
                delta_rows(frame, plan, hashed, floats, chosen),
                precisions(floats, per_row=True),
            )
    empty = _empty(len(floats))
    mismatches = tuple(
        ChunkMismatch(
            chunk=chunk, where=plan.describe(chunk), source_rows=source.get(chunk, empty).rows,
            delta_rows=delta.get(chunk, empty).rows,
        )
        for chunk in sorted(mismatched)
    )
    return ReconciliationReport(
        table=table,
        mode=plan.mode,
        chunks=plan.chunks,
        columns=len(columns),
        source_rows=sum(tally.rows for tally in source.values()),
        delta_rows=sum(tally.rows for tally in delta.values()),
        mismatches=mismatches,
        schema_differences=tuple(differences),
        confirmed=confirmed or not mismatches,
        rechecked=rechecked,
        seconds=time.monotonic() - started,
        notes=tuple(notes),
        drift=drift,
    )


def reconcile(pipeline: Pipeline, tables: list[str] | None = None, **options: Any) -> list[ReconciliationReport]:
    """`reconcile_table` for each of `tables` (default: every table with offsets), with the same options.

    Raises:
        NotSnapshottedError: a chosen table has no snapshot yet.
        BinlakeError: the source or the offset store cannot be read.
    """
    names = tables or sorted(pipeline.read_state().tables)
    return [reconcile_table(pipeline, name, **options) for name in names]


def _mismatched(
    source: dict[int, ChunkTally], delta: dict[int, ChunkTally], tolerances: tuple[float, ...]
) -> list[int]:
    empty = _empty(len(tolerances))
    return [
        chunk
        for chunk in sorted(set(source) | set(delta))
        if not source.get(chunk, empty).same_as(delta.get(chunk, empty), tolerances)
    ]


def _wait_for_offset(
    pipeline: Pipeline, table: str, target: BinlogPosition, pause: float, timeout: float
) -> bool:
    time.sleep(pause)
    deadline = time.monotonic() + timeout
    while True:
        table_state = pipeline.read_state().tables.get(table)
        if table_state is None:
            raise NotSnapshottedError(
                "the table's snapshot vanished during the check", remedy="re-run the check", table=table
            )
        if table_state.position >= target:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(pause, 15.0))


__all__ = [
    "DEFAULT_CHUNK_ROWS",
    "ChunkMismatch",
    "ChunkPlan",
    "ChunkTally",
    "FloatTally",
    "ReconciliationReport",
    "RowDrift",
    "reconcile",
    "reconcile_table",
]
