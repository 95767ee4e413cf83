"""Lock-free table snapshots: low watermark, parallel JDBC read split on the primary key, high watermark."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pymysql

from cdc_lib.config import SnapshotConfig, SourceConfig
from cdc_lib.errors import ZeroDateError
from cdc_lib.faults import failpoint
from cdc_lib.key_ranges import LARGE_TABLE_ROWS, integer_cuts, is_integer, row_count, table_sql
from cdc_lib.source import TableSchema, query
from cdc_lib.types import TEXT_TRANSFERRED_TEMPORALS, jdbc_select_expression, quote_identifier, spark_type_ddl

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession



def jdbc_url(source: SourceConfig) -> str:
    options = [
        "permitMysqlScheme",
        "tinyInt1isBit=false",
        "yearIsDateType=false",
        "sessionVariables=time_zone='+00:00'",
        f"connectTimeout={source.connect_timeout * 1000}",
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


def _tuple(columns: tuple[str, ...]) -> str:
    quoted = ", ".join(quote_identifier(column) for column in columns)
    return f"({quoted})" if len(columns) > 1 else quoted


def partition_predicates(
    connection: pymysql.connections.Connection,
    schema: TableSchema,
    settings: SnapshotConfig,
    *,
    default_parallelism: int,
) -> tuple[list[str], int]:
    """WHERE clauses that split the table into primary-key ranges of similar size, and the (estimated) row count.

    A one-column integer key is split arithmetically between its MIN and MAX (`cdc_lib.key_ranges`, two
    index lookups); other keys by the key found at each boundary's offset, which costs a scan of the index up to it.
    """
    table = table_sql(schema.table)
    rows = row_count(connection, schema.table)
    wanted = math.ceil(rows / settings.rows_per_partition) if rows else 1
    if rows >= LARGE_TABLE_ROWS:
        wanted = max(wanted, default_parallelism)
    partitions = max(1, min(wanted, settings.max_partitions))
    if partitions == 1:
        return ["1=1"], rows
    if _integer_key(schema):
        cuts = integer_cuts(connection, schema.table, schema.primary_key[0], ranges=partitions)
        boundaries = [str(cut) for cut in cuts]
    else:
        boundaries = _offset_boundaries(connection, schema, table, partitions, rows)
    key = _tuple(schema.primary_key)
    predicates = []
    lower: str | None = None
    for boundary in boundaries:
        predicates.append(f"{key} < {boundary}" if lower is None else f"{key} >= {lower} AND {key} < {boundary}")
        lower = boundary
    predicates.append(f"{key} >= {lower}" if lower is not None else "1=1")
    return predicates, rows


def _integer_key(schema: TableSchema) -> bool:
    if len(schema.primary_key) != 1:
        return False
    column = next(column for column in schema.columns if column.name == schema.primary_key[0])
    return is_integer(column)


def _offset_boundaries(
    connection: pymysql.connections.Connection, schema: TableSchema, table: str, partitions: int, rows: int
) -> list[str]:
    columns = ", ".join(quote_identifier(c) for c in schema.primary_key)
    boundaries: list[str] = []
    for index in range(1, partitions):
        found = query(
            connection, f"SELECT {columns} FROM {table} ORDER BY {columns} LIMIT 1 OFFSET {rows * index // partitions}"
        )
        if not found:
            break
        literal = ", ".join(connection.escape(value) for value in found[0])
        boundary = f"({literal})" if len(schema.primary_key) > 1 else literal
        if boundary not in boundaries:
            boundaries.append(boundary)
    return boundaries


#: Brackets the column name in the error a snapshot raises on a zero date, to find it in Spark's exception.
ZERO_DATE_MARK = "binlake-zero-date:"


def zero_date_in(exc: BaseException, table: str) -> ZeroDateError | None:
    """The ZeroDateError a failed snapshot write carries in its (JVM) exception text, if any."""
    text = str(exc)
    if ZERO_DATE_MARK not in text:
        return None
    parts = text.split(ZERO_DATE_MARK)
    return ZeroDateError(table, parts[1], parts[2][:40] if len(parts) > 3 else None)


def read_table(
    spark: SparkSession, source: SourceConfig, schema: TableSchema, predicates: list[str]
) -> DataFrame:
    """The table as Spark reads it over JDBC, cast to the one type mapping."""
    from pyspark.sql import functions as F

    expressions = ", ".join(jdbc_select_expression(column) for column in schema.columns)
    table = table_sql(schema.table)
    subquery = f"(SELECT {expressions} FROM {table}) AS binlake_snapshot"
    properties: dict[str, Any] = jdbc_properties(source)
    frame = spark.read.jdbc(jdbc_url(source), subquery, predicates=predicates, properties=properties)
    columns = []
    for column in schema.columns:
        value = F.col(f"`{column.name}`")
        target = spark_type_ddl(column)
        # Zero and partial dates ('0000-00-00') arrive as text (so the driver's zeroDateTimeBehavior never
        # applies) and become NULL, as they do on the binlog path — or fail the write under the `error` policy.
        text_temporal = column.data_type.lower() in TEXT_TRANSFERRED_TEMPORALS
        converted = value.try_cast(target) if text_temporal else value.cast(target)
        if text_temporal:
            # Year 0000 with a month and day ('0000-01-01') is valid text to Spark but no Python or Arrow reader
            # holds it, and the binlog path cannot represent it: a partial date like '2024-00-10'.
            converted = F.when(value.startswith("0000-"), F.lit(None)).otherwise(converted)
        if text_temporal and source.zero_dates == "error":
            message = F.concat(F.lit(f"{ZERO_DATE_MARK}{column.name}{ZERO_DATE_MARK}"), value, F.lit(ZERO_DATE_MARK))
            converted = F.when(value.isNotNull() & converted.isNull(), F.raise_error(message)).otherwise(converted)
        columns.append(converted.alias(column.name))
    failpoint("before_snapshot_write")
    return frame.select(*columns)


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

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0
