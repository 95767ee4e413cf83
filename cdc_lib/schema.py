"""Schema changes: decide what an ALTER on a followed table means for its Delta copy.

Added columns evolve the Delta schema (and existing rows get the column's constant default,
as MySQL shows them). Dropped, renamed or retyped columns and a changed primary key stop the
table with an error naming the remedy, because guessing would copy wrong data silently.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc_lib.errors import SchemaChangeError
from cdc_lib.source import TableSchema
from cdc_lib.types import ColumnInfo, spark_type_ddl

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
_SIMPLE_STRING = re.compile(r"^'([^'\\]*)'$")


@dataclass(frozen=True)
class SchemaDiff:
    added: list[ColumnInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def compatible(self) -> bool:
        return not self.problems


def compare_schemas(stored: TableSchema, current: TableSchema) -> SchemaDiff:
    """What changed from the schema binlake follows to the server's current one."""
    current_by_name = {column.name: column for column in current.columns}
    problems = []
    for column in stored.columns:
        now = current_by_name.get(column.name)
        if now is None:
            problems.append(f"column '{column.name}' was dropped or renamed")
        elif spark_type_ddl(now) != spark_type_ddl(column) or now.column_type != column.column_type:
            problems.append(f"column '{column.name}' changed type from {column.column_type} to {now.column_type}")
    if stored.primary_key != current.primary_key:
        problems.append(f"primary key changed from {list(stored.primary_key)} to {list(current.primary_key)}")
    stored_names = set(stored.column_names)
    added = [column for column in current.columns if column.name not in stored_names]
    return SchemaDiff(added=added, problems=problems)


def schema_with_columns(current: TableSchema, names: list[str], *, table: str) -> TableSchema:
    """The server's current column definitions, narrowed to the columns the binlog had at a point in time."""
    by_name = {column.name: column for column in current.columns}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise SchemaChangeError(
            f"columns {unknown} appear in the binlog but no longer on the server (a later DDL changed them)",
            remedy=f"re-snapshot the table: binlake snapshot --table {table}",
            table=table,
        )
    return TableSchema(
        table=current.table, columns=tuple(by_name[name] for name in names), primary_key=current.primary_key
    )


def default_literal(column: ColumnInfo, *, table: str) -> str | None:
    """The Spark SQL literal existing rows show for an added column, or None when that is NULL."""
    default = column.column_default
    if default is None or default.upper() == "NULL":
        return None
    if _NUMBER.match(default):
        return f"CAST({default} AS {spark_type_ddl(column)})"
    match = _SIMPLE_STRING.match(default)
    if match:
        return f"CAST('{match.group(1)}' AS {spark_type_ddl(column)})"
    raise SchemaChangeError(
        f"added column '{column.name}' has default {default}, whose value in existing rows binlake cannot know",
        remedy=f"re-snapshot the table: binlake snapshot --table {table}",
        table=table,
    )


def evolve_delta_table(spark: SparkSession, path: str, diff: SchemaDiff, *, table: str) -> None:
    """Add the new columns to the Delta table (if not there yet) and fill existing rows with their default."""
    literals = {column.name: default_literal(column, table=table) for column in diff.added}
    existing = set(spark.read.format("delta").load(path).columns)
    missing = [column for column in diff.added if column.name not in existing]
    if missing:
        definitions = ", ".join(f"`{column.name}` {spark_type_ddl(column)}" for column in missing)
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({definitions})")
    assignments = [f"`{name}` = {literal}" for name, literal in literals.items() if literal is not None]
    if assignments:
        spark.sql(f"UPDATE delta.`{path}` SET {', '.join(assignments)}")
