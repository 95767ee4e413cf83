"""Lock-free table snapshots: low watermark, parallel JDBC read split on the primary key, high watermark."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pymysql

from cdc_lib.changes.columns import ColumnShape
from cdc_lib.common.faults import failpoint
from cdc_lib.config.model import SnapshotConfig, SourceConfig
from cdc_lib.errors import BooleanValueError, SurrogateTextError, TableError, ZeroDateError, ZeroDateKeyError
from cdc_lib.model.charsets import surrogate_test
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import TEXT_TRANSFERRED_TEMPORALS, jdbc_select_expression, quote_identifier, spark_type_ddl
from cdc_lib.source.key_ranges import LARGE_TABLE_ROWS, integer_cuts, is_integer, row_count, table_sql
from cdc_lib.source.server import query

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession



def jdbc_url(source: SourceConfig) -> str:
    options = [
        "permitMysqlScheme",
        "tinyInt1isBit=false",
        "yearIsDateType=false",
        "sessionVariables=time_zone='+00:00'",
        f"connectTimeout={min(source.connect_timeout, source.network_timeout_seconds) * 1000}",
        # A silent server fails the task's read after the bound instead of holding the Spark job for ever
        # (the driver's default is no bound); Spark's task retry then opens a new connection.
        f"socketTimeout={source.network_timeout_seconds * 1000}",
    ]
    if source.ssl_ca:
        # As on the pymysql side: the certificate must chain to ssl_ca and name source.host.
        options += ["sslMode=verify-full", f"serverSslCert={source.ssl_ca}"]
    return f"jdbc:mysql://{source.host}:{source.port}/?" + "&".join(options)


def jdbc_properties(source: SourceConfig) -> dict[str, str]:
    return {
        "user": source.user,
        "password": source.password,
        "driver": "org.mariadb.jdbc.Driver",
        "preferTimestampNTZ": "true",
        "fetchsize": "10000",
    }


def unused_name(name: str, schema: TableSchema) -> str:
    """`name`, with underscores appended until no column of the table has it (MySQL and Spark compare column
    names case-insensitively): a column the read adds beside the table's never takes one of theirs."""
    taken = {column.lower() for column in schema.column_names}
    while name.lower() in taken:
        name += "_"
    return name


def key_alias(index: int, schema: TableSchema) -> str:
    """The name a primary-key column is read under, raw, beside its converted value (see `read_table`)."""
    return unused_name(f"_binlake_key_{index}", schema)


@dataclass(frozen=True, kw_only=True)
class ChunkPredicates:
    """A table split on its primary key: WHERE clauses over `key_alias` columns, in key order, covering every
    key exactly once (the first and last open-ended)."""

    predicates: list[str]
    #: The row count the plan was sized from (InnoDB's estimate for a large table).
    rows_estimated: int
    #: "integer" (cut arithmetically between MIN and MAX), "walk" (boundaries found on the key index) or "one".
    method: str


def plan_snapshot_chunks(
    connection: pymysql.connections.Connection, schema: TableSchema, *, rows_per_chunk: int
) -> ChunkPredicates:
    """Split the table into chunks of about `rows_per_chunk` rows.

    A one-column integer key is cut arithmetically between MIN and MAX (two index lookups); any other key by
    walking its index `rows_per_chunk` keys at a time (`_walked_boundaries`): one pass over the index, never an
    OFFSET scan from the start. MySQL compares the boundaries, in the key columns' own types and collations.
    """
    rows = row_count(connection, schema.table)
    if rows <= rows_per_chunk:
        return ChunkPredicates(predicates=["1=1"], rows_estimated=rows, method="one")
    if _integer_key(schema):
        cuts = integer_cuts(connection, schema.table, schema.primary_key[0], ranges=math.ceil(rows / rows_per_chunk))
        return ChunkPredicates(predicates=_integer_predicates(schema, cuts), rows_estimated=rows, method="integer")
    bounds = _walked_boundaries(connection, schema, step=rows_per_chunk)
    return ChunkPredicates(predicates=_walked_predicates(schema, bounds), rows_estimated=rows, method="walk")


def partition_predicates(
    connection: pymysql.connections.Connection,
    schema: TableSchema,
    settings: SnapshotConfig,
    *,
    default_parallelism: int,
) -> tuple[list[str], int]:
    """WHERE clauses that split the table into primary-key ranges of similar size for one parallel read, and the
    (estimated) row count. Split as `plan_chunks` splits, into at most `max_partitions` ranges."""
    rows = row_count(connection, schema.table)
    wanted = math.ceil(rows / settings.rows_per_partition) if rows else 1
    if rows >= LARGE_TABLE_ROWS:
        wanted = max(wanted, default_parallelism)
    partitions = max(1, min(wanted, settings.max_partitions))
    if partitions == 1:
        return ["1=1"], rows
    if _integer_key(schema):
        cuts = integer_cuts(connection, schema.table, schema.primary_key[0], ranges=partitions)
        return _integer_predicates(schema, cuts), rows
    bounds = _walked_boundaries(connection, schema, step=math.ceil(rows / partitions), most=partitions - 1)
    return _walked_predicates(schema, bounds), rows


def keyed_table_sql(schema: TableSchema) -> str:
    """The table with its key also under `key_alias` names: what the chunk predicates are written against."""
    keys = ", ".join(
        f"{quote_identifier(column)} AS {quote_identifier(key_alias(index, schema))}"
        for index, column in enumerate(schema.primary_key)
    )
    return f"(SELECT *, {keys} FROM {table_sql(schema.table)}) AS binlake_keyed"


def _integer_key(schema: TableSchema) -> bool:
    if len(schema.primary_key) != 1:
        return False
    column = next(column for column in schema.columns if column.name == schema.primary_key[0])
    return is_integer(column)


def _integer_predicates(schema: TableSchema, cuts: list[int]) -> list[str]:
    # Range i holds the keys from cut i-1 (inclusive) to cut i (exclusive).
    key = quote_identifier(key_alias(0, schema))
    predicates = []
    lower: int | None = None
    for cut in cuts:
        predicates.append(f"{key} < {cut}" if lower is None else f"{key} >= {lower} AND {key} < {cut}")
        lower = cut
    predicates.append(f"{key} >= {lower}" if lower is not None else "1=1")
    return predicates


def compare_key(columns: list[str], literals: list[str], operator: str) -> str:
    """`(columns) <operator> (literals)` in key order, spelled out column by column (`>` or `<=`).

    `(a, b) > (1, 'x')` becomes `a > 1 OR (a = 1 AND b > 'x')`: the form MySQL's range optimizer reads as
    index ranges on every version, where a row constructor comparison may fall back to a scan.
    """
    strict = {">": ">", "<=": "<"}[operator]
    terms = []
    for index, (column, literal) in enumerate(zip(columns, literals, strict=True)):
        equal = [f"{c} = {v}" for c, v in zip(columns[:index], literals[:index], strict=True)]
        last = operator if index == len(columns) - 1 else strict
        terms.append(" AND ".join([*equal, f"{column} {last} {literal}"]))
    return terms[0] if len(terms) == 1 else " OR ".join(f"({term})" for term in terms)


def _walked_boundaries(
    connection: pymysql.connections.Connection, schema: TableSchema, *, step: int, most: int | None = None
) -> list[list[str]]:
    """Inclusive upper bounds (SQL literals per key column) of consecutive runs of `step` keys, found by walking
    the key index: each query reads the next `step` keys after the previous bound and keeps the last one."""
    table = table_sql(schema.table)
    quoted = [quote_identifier(column) for column in schema.primary_key]
    columns = ", ".join(quoted)
    descending = ", ".join(f"{column} DESC" for column in quoted)
    bounds: list[list[str]] = []
    while most is None or len(bounds) < most:
        where = "" if not bounds else f"WHERE {compare_key(quoted, bounds[-1], '>')}"
        found = query(
            connection,
            f"SELECT {columns}, COUNT(*) OVER () FROM "
            f"(SELECT {columns} FROM {table} {where} ORDER BY {columns} LIMIT {int(step)}) AS binlake_walk "
            f"ORDER BY {descending} LIMIT 1",
        )
        if not found or int(found[0][-1]) < step:
            return bounds
        bounds.append([connection.escape(value) for value in found[0][:-1]])
    return bounds


def _walked_predicates(schema: TableSchema, bounds: list[list[str]]) -> list[str]:
    # Chunk i holds the keys after bound i-1 up to bound i (inclusive); the last, those after the last bound.
    keys = [quote_identifier(key_alias(index, schema)) for index in range(len(schema.primary_key))]
    predicates = []
    lower: list[str] | None = None
    for bound in bounds:
        upper = compare_key(keys, bound, "<=")
        predicates.append(upper if lower is None else f"({compare_key(keys, lower, '>')}) AND ({upper})")
        lower = bound
    predicates.append(compare_key(keys, lower, ">") if lower is not None else "1=1")
    return predicates


#: Bracket the column name (and what follows) in the error a snapshot's read raises on a value it refuses, to
#: find it in Spark's exception text: a zero date under `zero_dates: error`, a surrogate code point.
ZERO_DATE_MARK = "binlake-zero-date:"
ZERO_DATE_KEY_MARK = "binlake-zero-date-key:"  # in a primary-key column, under any `zero_dates`
SURROGATE_MARK = "binlake-surrogate:"
BOOLEAN_MARK = "binlake-boolean:"  # a value other than 0, 1 in a column landed as boolean


def read_refusal_in(exc: BaseException, table: str) -> TableError | None:
    """The TableError a failed snapshot read carries in its (JVM) exception text, if any."""
    text = str(exc)
    if BOOLEAN_MARK in text:
        parts = text.split(BOOLEAN_MARK)
        return BooleanValueError(table, parts[1], parts[2][:40] if len(parts) > 3 else None)
    if SURROGATE_MARK in text:
        return SurrogateTextError(table, text.split(SURROGATE_MARK)[1])
    if ZERO_DATE_KEY_MARK in text:
        parts = text.split(ZERO_DATE_KEY_MARK)
        return ZeroDateKeyError(table, parts[1], parts[2][:40] if len(parts) > 3 else None)
    if ZERO_DATE_MARK not in text:
        return None
    parts = text.split(ZERO_DATE_MARK)
    return ZeroDateError(table, parts[1], parts[2][:40] if len(parts) > 3 else None)


def _surrogate_flag(index: int, schema: TableSchema) -> str:
    return unused_name(f"binlake_surrogate_{index}", schema)


def read_table(
    spark: SparkSession, source: SourceConfig, schema: TableSchema, predicates: list[str], *,
    shape: ColumnShape | None = None,
) -> DataFrame:
    """The table as Spark reads it over JDBC, cast to the one type mapping.

    With a `shape` (cdc_lib.changes.columns), only its columns are selected, only the rows its row filter matches,
    and its masks run on the values right after the read, in the same Spark stage, before anything writes or caches
    them.
    """
    from pyspark.sql import functions as F

    if shape is not None:
        schema = TableSchema(table=schema.table, primary_key=schema.primary_key,
                             columns=tuple(schema.columns[index] for index in shape.kept))

    expressions = ", ".join(jdbc_select_expression(column) for column in schema.columns)
    # The key is read raw too, under its own names: the predicates compare it in its own type and collation,
    # not as the converted value (an ENUM as text would sort differently from its index).
    keys = ", ".join(
        f"{quote_identifier(column)} AS {quote_identifier(key_alias(index, schema))}"
        for index, column in enumerate(schema.primary_key)
    )
    expressions = f"{expressions}, {keys}" if keys else expressions
    # The JDBC driver hands over U+FFFD for a surrogate code point; the server itself finds them, row by row.
    surrogate_tests = {
        index: test for index, column in enumerate(schema.columns)
        if column.character_set and (test := surrogate_test(quote_identifier(column.name), column.character_set))
    }
    for index, test in surrogate_tests.items():
        expressions += f", ({test}) AS {quote_identifier(_surrogate_flag(index, schema))}"
    table = table_sql(schema.table)
    # The row filter is rendered from the same parsed predicate the binlog road evaluates (cdc_lib.model.row_filter);
    # its literals are binlake's rendering, never the config's text, so nothing of the text reaches the server raw.
    where = "" if shape is None or shape.row_filter is None else f" WHERE {shape.row_filter.sql}"
    subquery = f"(SELECT {expressions} FROM {table}{where}) AS binlake_snapshot"
    properties: dict[str, Any] = jdbc_properties(source)
    frame = spark.read.jdbc(jdbc_url(source), subquery, predicates=predicates, properties=properties)
    columns = []
    for index, column in enumerate(schema.columns):
        value = F.col(quote_identifier(column.name))
        target = spark_type_ddl(column)
        # Zero and partial dates ('0000-00-00') arrive as text (so the driver's zeroDateTimeBehavior never
        # applies) and become NULL, as they do on the binlog path — or fail the write under the `error` policy.
        text_temporal = column.data_type.lower() in TEXT_TRANSFERRED_TEMPORALS
        converted = value.try_cast(target) if text_temporal else value.cast(target)
        if text_temporal:
            # Year 0000 with a month and day ('0000-01-01') is valid text to Spark but no Python or Arrow reader
            # holds it, and the binlog path cannot represent it: a partial date like '2024-00-10'.
            converted = F.when(value.startswith("0000-"), F.lit(None)).otherwise(converted)
        key = column.name in schema.primary_key  # a NULL key is no key: refused under any policy
        if text_temporal and (key or source.zero_dates == "error"):
            mark = ZERO_DATE_KEY_MARK if key else ZERO_DATE_MARK
            message = F.concat(F.lit(f"{mark}{column.name}{mark}"), value, F.lit(mark))
            converted = F.when(value.isNotNull() & converted.isNull(), F.raise_error(message)).otherwise(converted)
        if index in surrogate_tests:
            refusal = F.raise_error(F.lit(f"{SURROGATE_MARK}{column.name}{SURROGATE_MARK}"))
            flag = F.col(quote_identifier(_surrogate_flag(index, schema)))
            converted = F.when(flag == 1, refusal).otherwise(converted)
        columns.append(converted.alias(column.name) if shape is None else _masked(converted, column.name, shape))
    failpoint("before_snapshot_write")
    return frame.select(*columns)


def _masked(column: Column, name: str, shape: ColumnShape) -> Column:
    """A selected column with its mask applied: the same Python function as the binlog road's (so a hash is equal
    on both), run as a UDF whose closure holds any secret; nothing of it is in the plan's text or a query."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    mask = shape.mask_of(name)
    if mask is None:
        return column.alias(name)
    kind = shape.schema.columns[shape.schema.column_names.index(name)]
    if getattr(mask, "boolean", False):
        # In Spark, not a UDF: the same rule as the binlog road's mask (0, 1, NULL), and any other value fails
        # the read with its column and value marked, which `read_refusal_in` turns into BooleanValueError.
        refusal = F.raise_error(F.concat(F.lit(f"{BOOLEAN_MARK}{name}{BOOLEAN_MARK}"), column.cast("string"),
                                         F.lit(BOOLEAN_MARK)))
        return (F.when(column.isNull(), F.lit(None).cast("boolean")).when(column == 0, F.lit(False))
                .when(column == 1, F.lit(True)).otherwise(refusal)).alias(name)
    if getattr(mask, "redact", False):
        constant = mask(None)
        return (F.lit(None) if constant is None else F.lit(constant)).cast(spark_type_ddl(kind)).alias(name)
    # The masks are closures (cdc_lib.changes.columns), which cloudpickle sends by value: a Python worker (a
    # cluster's executor, another `python3`) needs only the standard library to run them, not binlake.
    masked = F.udf(lambda value: None if value is None else mask(value), StringType())
    return masked(column).alias(name)


@dataclass(frozen=True, kw_only=True)
class SnapshotResult:
    table: str
    rows: int
    seconds: float
    partitions: int
    delta_version: int
    low_watermark: str
    high_watermark: str
    #: The catalog name the table got (catalog.enabled), and why it got none when registration failed.
    registered_as: str | None = None
    catalog_error: str | None = None
    #: A chunked snapshot: its chunks, those an earlier run had finished, and every chunk any run read (the
    #: re-read after a crash is `chunks_read - chunks`).
    chunks: int = 1
    chunks_resumed: int = 0
    chunks_read: int = 1
    #: In the pipeline state now; False: the running sync installs it at its next batch.
    installed: bool = True

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def wave_bytes_estimate(connection: pymysql.connections.Connection, ref: TableRef, rows: int) -> int:
    """About how many bytes `rows` rows of the table hold: InnoDB's average row length (data pages, off-page
    BLOB and TEXT pages included) times `rows`. An estimate sizes the choice only; 0 when InnoDB has none."""
    found = query(
        connection,
        "SELECT AVG_ROW_LENGTH FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (ref.database, ref.table),
    )
    average = int(found[0][0] or 0) if found else 0
    return average * rows
