"""Reconciliation: is a Delta copy equal to its source table? One implementation for the CLI, the demo and Dagster.

A table is split into chunks by primary-key range
(or, when the leading key column is not an integer, by a hash of the key).
For every chunk both sides compute a row count and a content digest — the sum
of a 60-bit hash (MD5) of each row's canonical text:

    MySQL  → one aggregate query per chunk, over an index range; no row leaves the server
    Delta  → one Spark job that groups every row into its chunk

The canonical text of a value is derived from the one type mapping
(`cdc_lib.model.types.spark_type_ddl`), so both engines produce the same bytes for the
same value, and the comparison is exact for every type (docs/production.md, "Reconcile"):

- FLOAT and DOUBLE are written as their exact binary value, `<mantissa>p<exponent>` (the integer mantissa
  of the IEEE 754 encoding and its power of two), computed by exact arithmetic alone in both engines
  (scaling by powers of two, comparisons, integer casts), so any changed bit changes the text. Neither
  engine's decimal text serves: MariaDB prints a FLOAT with 6 digits, and Java 17 (Spark) does not print
  the shortest round-trip digits. +0 and -0 are one value ("0"), as MySQL compares and prints them.
- BLOB/TEXT/JSON values are represented by the MD5 of their bytes, so no row text outgrows
  `max_allowed_packet` (past it MySQL's HEX() and CONCAT() return NULL, which would read as a NULL value).
- The digests are summed as exact integers (MySQL's DECIMAL SUM, Spark's decimal(38,0)): no value can make
  the sum overflow or lose a digit, whatever the column types hold.

What it cannot tell: two different chunk contents whose digest sums agree (about one chance in 2^60 per
differing chunk), and +0 from -0.

A mismatch is *confirmed* when the source did not move during the check and
the table's offset was at the end of the binlog (so the copy had every
change), or when it persists in a second pass taken after the pipeline caught
up with the point the first pass saw. Otherwise it may be changes still in
flight, and is reported as such. A key held by several Delta rows is confirmed
drift whatever is in flight: no change makes a primary key hold two rows.

Only the chunks that differ are then compared row by row (at most `detail_chunks` of
them): each side sends the key and the row digest of those chunks' rows, which tells
which keys are missing from Delta, which are extra, which hold other values, and which
Delta holds more than once. The cost of that detail follows the drift, not the table.

A soft-delete or history table is compared on its live rows (not deleted; the current versions), without
binlake's metadata columns (`table_modes.live_rows`).

Each table's verdict is stored beside the pipeline state (`cdc_lib.state.reconcile_verdicts`) for `binlake status`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pymysql

from cdc_lib.changes.modes import live_rows
from cdc_lib.errors import NotSnapshottedError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef
from cdc_lib.model.types import ColumnInfo, quote_identifier, spark_type_ddl
from cdc_lib.source import binlog_status
from cdc_lib.source import server as mysql
from cdc_lib.source.key_ranges import integer_cuts, is_integer, row_count, table_sql
from cdc_lib.state.offsets import PipelineState, utc_now
from cdc_lib.state.reconcile_verdicts import Verdict, VerdictKind, record_verdict

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from cdc_lib.pipeline.pipeline import Pipeline

ChunkMode = Literal["key_range", "key_hash"]

_FLOAT_TARGETS = {"float", "double"}
_TEXT_KINDS = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "json"}
# Kinds whose values may be megabytes long: represented by the MD5 of their bytes (see the module docstring).
_LONG_KINDS = {"tinytext", "text", "mediumtext", "longtext", "json", "tinyblob", "blob", "mediumblob", "longblob"}
_NULL_MARK = "N"
# The smallest normal DOUBLE, 2^-1022; below it the exponent is fixed at -1074 (subnormals).
_MIN_NORMAL = "2.2250738585072014e-308"
# Powers of two as exact DOUBLE literals (repr round-trips), so that the server computes no POW for them.
_TWO_200 = repr(2.0**200)
_TWO_537 = repr(2.0**537)
#: Rows per chunk unless the caller says otherwise (the CLI's --chunk-rows, the Dagster resource's setting).
DEFAULT_CHUNK_ROWS = 100_000


# -- canonical text, one definition per engine ----------------------------------------------------


def _mysql_exact_float(quoted: str) -> str:
    """SQL giving a FLOAT/DOUBLE's exact binary value as `[-]<mantissa>p<exponent>` ("0" for ±0, NULL stays NULL).

    A normal |x| = m·2^(e-52) with m an integer in [2^52, 2^53). FLOOR(LOG2(|x|)) may be one off next to a power
    of two, so e is that guess corrected by comparing |x| with the powers of two around it (exact comparisons;
    the guess is kept within [-1022, 1023] so that no power overflows). m is |x| scaled by 2^(52-e), in two
    steps below 1 so that no factor overflows; a subnormal is m·2^-1074. Every step is exact in IEEE 754 double
    arithmetic (a FLOAT widens to DOUBLE exactly), and the number of LOG2/POW calls is kept low: they are the
    cost of the whole digest.
    """
    magnitude = f"ABS({quoted})"
    guess = f"LEAST(GREATEST(FLOOR(LOG2({magnitude})), -1022), 1023)"
    exponent = (f"({guess} + ({guess} < 1023 AND {magnitude} >= POW(2, LEAST({guess} + 1, 1023))) "
                f"- ({magnitude} < POW(2, {guess})))")
    mantissa = (
        f"CASE WHEN {magnitude} < {_MIN_NORMAL} THEN {magnitude} * {_TWO_537} * {_TWO_537} "
        f"WHEN {magnitude} < 1 THEN {magnitude} * {_TWO_200} * POW(2, -148 - {exponent}) "
        f"ELSE {magnitude} * POW(2, 52 - {exponent}) END"
    )
    power = f"CASE WHEN {magnitude} < {_MIN_NORMAL} THEN -1074 ELSE {exponent} - 52 END"
    return (
        f"CASE WHEN {quoted} = 0 THEN '0' ELSE CONCAT(IF({quoted} < 0, '-', ''), "
        f"CAST(CAST({mantissa} AS UNSIGNED) AS CHAR), 'p', CAST(CAST({power} AS SIGNED) AS CHAR)) END"
    )


def _spark_exact_float(column: Column) -> Column:
    """`_mysql_exact_float` in Spark, step for step: the same text for the same value. NaN and ±Infinity (which
    MySQL cannot hold) get texts MySQL never produces."""
    from pyspark.sql import functions as F

    value = column.cast("double")
    magnitude = F.abs(value)
    guess = F.least(F.greatest(F.floor(F.log2(magnitude)), F.lit(-1022)), F.lit(1023))
    above = ((guess < 1023) & (magnitude >= F.pow(F.lit(2.0), F.least(guess + 1, F.lit(1023))))).cast("int")
    below = (magnitude < F.pow(F.lit(2.0), guess)).cast("int")
    exponent = guess + above - below
    subnormal = magnitude < F.lit(float.fromhex("0x1p-1022"))
    mantissa = (
        F.when(subnormal, magnitude * F.lit(2.0**537) * F.lit(2.0**537))
        .when(magnitude < 1, magnitude * F.lit(2.0**200) * F.pow(F.lit(2.0), -148 - exponent))
        .otherwise(magnitude * F.pow(F.lit(2.0), 52 - exponent))
    )
    power = F.when(subnormal, F.lit(-1074)).otherwise(exponent - 52)
    exact = F.concat(
        F.when(value < 0, F.lit("-")).otherwise(F.lit("")),
        mantissa.cast("bigint").cast("string"), F.lit("p"), power.cast("bigint").cast("string"),
    )
    return (
        F.when(F.isnan(value), F.lit("NaN"))
        .when(magnitude == F.lit(float("inf")), F.when(value < 0, F.lit("-Inf")).otherwise(F.lit("Inf")))
        .when(value == 0, F.lit("0"))
        .otherwise(exact)
    )


def mysql_text(column: ColumnInfo) -> str:
    """SQL giving the canonical text of a column's value as bytes (NULL stays NULL)."""
    quoted = quote_identifier(column.name)
    kind = column.data_type.lower()
    target = spark_type_ddl(column)
    if target in _FLOAT_TARGETS:
        text = _mysql_exact_float(quoted)
    elif kind in _LONG_KINDS:
        text = f"MD5({quoted})" if target == "binary" else f"MD5(CONVERT({quoted} USING utf8mb4))"
    elif kind in ("bit", "year"):
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


def _self_delimited(column: ColumnInfo) -> bool:
    """The column's text has an alphabet without ';' (an exact float, an MD5): a terminator delimits it, and the
    text is computed once rather than twice (once more for its length)."""
    return spark_type_ddl(column) in _FLOAT_TARGETS or column.data_type.lower() in _LONG_KINDS


def mysql_row_text(columns: list[ColumnInfo]) -> str:
    """Length-prefixed (or terminated) values, so no value can shift into its neighbour."""
    fields = [
        f"IFNULL(CONCAT({mysql_text(c)}, ';'), '{_NULL_MARK}')" if _self_delimited(c)
        else f"IFNULL(CONCAT(LENGTH({mysql_text(c)}), ':', {mysql_text(c)}), '{_NULL_MARK}')"
        for c in columns
    ]
    return f"CONCAT({', '.join(fields)})" if fields else "''"


def mysql_digest(columns: list[ColumnInfo]) -> str:
    return f"CAST(CONV(LEFT(MD5({mysql_row_text(columns)}), 15), 16, 10) AS UNSIGNED)"


def spark_text(column: ColumnInfo) -> Column:
    from pyspark.sql import functions as F

    value = F.col(quote_identifier(column.name))
    target = spark_type_ddl(column)
    if target in _FLOAT_TARGETS:
        return _spark_exact_float(value)
    if column.data_type.lower() in _LONG_KINDS:
        return F.md5(value)  # a string's UTF-8 bytes, or the bytes of a binary
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
        F.coalesce(F.concat(spark_text(c), F.lit(";")), F.lit(_NULL_MARK)) if _self_delimited(c)
        else F.coalesce(F.concat(F.octet_length(spark_text(c)).cast("string"), F.lit(":"), spark_text(c)),
                        F.lit(_NULL_MARK))
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


_EMPTY = ChunkTally(rows=0, digest=0)


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
) -> dict[int, ChunkTally]:
    """Per-chunk tallies computed by the server: one range query per chunk, or one GROUP BY for buckets."""
    table, aggregates = table_sql(ref), _mysql_aggregates(columns)
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
        where = _chunk_where(connection, plan, chunk)
        tallies[chunk] = _tally(mysql.query(connection, f"SELECT {aggregates} FROM {table}{where}")[0])
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
    frame: DataFrame, plan: ChunkPlan, columns: list[ColumnInfo], *, only: set[int] | None = None
) -> dict[int, ChunkTally]:
    """Per-chunk tallies of the Delta table, all chunks in one Spark job."""
    from pyspark.sql import functions as F

    chunked = frame.withColumn("__chunk", _spark_chunk(plan))
    if only is not None:
        chunked = chunked.where(F.col("__chunk").isin(sorted(only)))
    rows = chunked.groupBy("__chunk").agg(F.count(F.lit(1)), F.sum(spark_digest(columns))).collect()
    return {int(row[0]): _tally(tuple(row[1:])) for row in rows}


# -- row detail of the drifting chunks ------------------------------------------------------------


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
) -> dict[tuple[str, ...], int]:
    """Key text → row digest of every source row in `chunks`, computed by the server."""
    selected = ", ".join([*(mysql_text(column) for column in plan.key), mysql_digest(columns)])
    width = len(plan.key)
    rows: dict[tuple[str, ...], int] = {}
    for chunk in chunks:
        where = _chunk_where(connection, plan, chunk)
        for row in mysql.query(connection, f"SELECT {selected} FROM {table_sql(ref)}{where}"):
            rows[tuple(_text(value) for value in row[:width])] = int(row[width] or 0)
    return rows


def delta_rows(
    frame: DataFrame, plan: ChunkPlan, columns: list[ColumnInfo], chunks: Iterable[int]
) -> dict[tuple[str, ...], list[int]]:
    """Key text → the row digests of every Delta row in `chunks` with that key (more than one: a duplicated key),
    in one Spark job."""
    from pyspark.sql import functions as F

    chunked = frame.withColumn("__chunk", _spark_chunk(plan)).where(F.col("__chunk").isin(sorted(set(chunks))))
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

    @property
    def verdict(self) -> VerdictKind:
        if self.matches:
            return "match"
        return "drift" if self.confirmed else "unconfirmed"

    def to_verdict(self) -> Verdict:
        """What `binlake status` shows of this report (stored by `reconcile_table`)."""
        return Verdict(
            at=utc_now().isoformat(timespec="seconds"), verdict=self.verdict, source_rows=self.source_rows,
            delta_rows=self.delta_rows, mismatched_chunks=len(self.mismatches),
            drifting_rows=None if self.drift is None else self.drift.rows,
            duplicated_keys=0 if self.drift is None else self.drift.duplicated,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            **{key: value for key, value in self.__dict__.items() if key not in ("mismatches", "drift")},
            "mismatches": [mismatch.to_json() for mismatch in self.mismatches],
            "drift": self.drift.to_json() if self.drift is not None else None,
            "matches": self.matches,
            "verdict": self.verdict,
        }


def _at_end(state: PipelineState, table: str, logs: list[tuple[str, int]], server_end: BinlogPosition) -> bool:
    table_state = state.tables.get(table)
    if table_state is None or not table_state.position.written_on(server_end.server):
        return False  # an offset from another server says nothing about this server's files
    return binlog_status.bytes_behind(table_state.position, logs) == 0


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
        key = tuple(column for column in schema.columns if column.name in schema.primary_key)
        key = tuple(sorted(key, key=lambda column: schema.primary_key.index(column.name)))

        end_before = binlog_status.current_position(connection)
        quiet_table = _at_end(pipeline.read_state(), table, binlog_status.binary_logs(connection), end_before)
        rows = row_count(connection, ref)
        plan = plan_chunks(connection, ref, key, rows=rows, chunk_rows=chunk_rows, max_chunks=max_chunks)
        source = source_tallies(connection, ref, plan, columns)
        delta = delta_tallies(frame, plan, columns)
        end_after = binlog_status.current_position(connection)
        mismatched = _mismatched(source, delta)
        confirmed = quiet_table and end_before.same_point(end_after)
        notes: list[str] = []
        rechecked = False
        if mismatched and not confirmed and recheck_after_seconds > 0:
            rechecked = True
            caught_up = _wait_for_offset(pipeline, table, end_after, recheck_after_seconds, recheck_timeout_seconds)
            if caught_up:
                only = set(mismatched)
                for tallies in (source, delta):
                    tallies.update({chunk: _EMPTY for chunk in only})
                source.update(source_tallies(connection, ref, plan, columns, only=only))
                frame = live_rows(spark.read.format("delta").load(path))
                delta.update(delta_tallies(frame, plan, columns, only=only))
                mismatched = _mismatched({c: source[c] for c in only}, {c: delta[c] for c in only})
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
                chosen, source_rows(connection, ref, plan, columns, chosen), delta_rows(frame, plan, columns, chosen)
            )
            if drift.duplicated and not confirmed:
                # No change in flight makes a primary key hold two rows: that much is drift already.
                confirmed = True
                notes.append("Delta holds a primary key in more than one row, whatever changes are in flight")
    mismatches = tuple(
        ChunkMismatch(
            chunk=chunk, where=plan.describe(chunk), source_rows=source.get(chunk, _EMPTY).rows,
            delta_rows=delta.get(chunk, _EMPTY).rows,
        )
        for chunk in sorted(mismatched)
    )
    report = ReconciliationReport(
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
    record_verdict(pipeline.store, pipeline.config.pipeline, table, report.to_verdict())
    return report


def reconcile(pipeline: Pipeline, tables: list[str] | None = None, **options: Any) -> list[ReconciliationReport]:
    """`reconcile_table` for each of `tables` (default: every table with offsets), with the same options.

    Raises:
        NotSnapshottedError: a chosen table has no snapshot yet.
        BinlakeError: the source or the offset store cannot be read.
    """
    names = tables or sorted(pipeline.read_state().tables)
    return [reconcile_table(pipeline, name, **options) for name in names]


def _mismatched(source: dict[int, ChunkTally], delta: dict[int, ChunkTally]) -> list[int]:
    chunks = sorted(set(source) | set(delta))
    return [chunk for chunk in chunks if source.get(chunk, _EMPTY) != delta.get(chunk, _EMPTY)]


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
    "ReconciliationReport",
    "RowDrift",
    "reconcile",
    "reconcile_table",
]
