"""Schema changes: decide what an ALTER on a followed table means for its Delta copy.

Added columns evolve the Delta schema; existing rows get what the server shows for them (a constant
default is written directly, anything else — implicit NOT NULL defaults, CURRENT_TIMESTAMP, expressions,
generated columns — is back-filled from the source by the pipeline). Widening type changes (every old
value is kept as it is by the server) evolve: the Delta column is rewritten with an exact cast when its
Delta type changes. Narrowing, dropped, renamed or otherwise retyped columns and a changed primary key
stop the table with an error naming the remedy, because guessing would copy wrong data silently.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cdc_lib.changes import metadata_columns
from cdc_lib.errors import SchemaChangeError
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import ColumnInfo, quote_identifier, spark_type_ddl

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
_SIMPLE_STRING = re.compile(r"^'([^'\\]*)'$")


@dataclass(frozen=True)
class SchemaDiff:
    added: list[ColumnInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    #: Columns whose type widened: (before, after). Their Delta column changes when the Delta type does.
    widened: list[tuple[ColumnInfo, ColumnInfo]] = field(default_factory=list)
    #: Columns that became NOT NULL: the server turned any NULL into the type's zero value without row events.
    tightened: list[str] = field(default_factory=list)

    @property
    def compatible(self) -> bool:
        return not self.problems

    @property
    def retyped(self) -> dict[str, str]:
        """Columns whose Delta type changes, with the new Delta type."""
        return {
            after.name: spark_type_ddl(after)
            for before, after in self.widened
            if spark_type_ddl(before) != spark_type_ddl(after)
        }


def compare_schemas(stored: TableSchema, current: TableSchema) -> SchemaDiff:
    """What changed from the schema binlake follows to the server's current one."""
    current_by_name = {column.name: column for column in current.columns}
    problems = []
    widened = []
    tightened = []
    for column in stored.columns:
        now = current_by_name.get(column.name)
        if now is None:
            problems.append(f"column '{column.name}' was dropped or renamed")
            continue
        if now.column_type.lower() != column.column_type.lower() or spark_type_ddl(now) != spark_type_ddl(column):
            problem = widening_problem(column, now)
            if problem:
                problems.append(problem)
            else:
                widened.append((column, now))
        if column.nullable and not now.nullable:
            tightened.append(column.name)
    if stored.primary_key != current.primary_key:
        problems.append(f"primary key changed from {list(stored.primary_key)} to {list(current.primary_key)}")
    stored_names = set(stored.column_names)
    added = [column for column in current.columns if column.name not in stored_names]
    return SchemaDiff(added=added, problems=problems, widened=widened, tightened=tightened)


_INTEGER_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "integer": 32, "bigint": 64}
_TEXT_BYTES = {"tinytext": 2**8, "text": 2**16, "mediumtext": 2**24, "longtext": 2**32}
_BLOB_BYTES = {"tinyblob": 2**8, "blob": 2**16, "mediumblob": 2**24, "longblob": 2**32}
_LENGTH = re.compile(r"\((\d+)")


def _integer_range(column: ColumnInfo) -> tuple[int, int]:
    bits = _INTEGER_BITS[column.data_type.lower()]
    return (0, 2**bits - 1) if column.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _length(column: ColumnInfo) -> int:
    match = _LENGTH.search(column.column_type)
    return int(match.group(1)) if match else 0


def _subsequence(short: list[str], long: list[str]) -> bool:
    remaining = iter(long)
    return all(any(member == candidate for candidate in remaining) for member in short)


def widening_problem(before: ColumnInfo, after: ColumnInfo) -> str | None:
    """None when the server kept every value of `before` unchanged in `after` and Delta can hold it exactly.

    Narrowing changes are refused: without strict mode the server truncates values without row events.
    """
    old, new = before.data_type.lower(), after.data_type.lower()
    ok = False
    if old in _INTEGER_BITS and new in _INTEGER_BITS:
        low, high = _integer_range(before)
        new_low, new_high = _integer_range(after)
        ok = new_low <= low and high <= new_high
    elif old == "decimal" and new == "decimal":
        precision, scale = before.numeric_precision or 10, before.numeric_scale or 0
        new_precision, new_scale = after.numeric_precision or 10, after.numeric_scale or 0
        ok = (
            new_scale >= scale
            and new_precision - new_scale >= precision - scale
            and not (before.unsigned is False and after.unsigned)
            # Decimals over 38 digits are text with the scale's digits: only the same scale keeps the text.
            and (new_precision <= 38 or (precision > 38 and scale == new_scale))
        )
    elif old in ("float", "double") and new == "double":
        ok = True  # FLOAT → DOUBLE: the server keeps the float32 value exactly (3.3 reads 3.299999952316284)
    elif old in ("char", "varchar") and new in ("char", "varchar"):
        # CHAR → VARCHAR keeps the value as shown (CHAR is shown without its padding); VARCHAR → CHAR drops
        # trailing spaces.
        ok = _length(after) >= _length(before) and not (old == "varchar" and new == "char")
    elif old in ("char", "varchar", *_TEXT_BYTES) and new in _TEXT_BYTES:
        ok = new != "tinytext" and (old not in _TEXT_BYTES or _TEXT_BYTES[new] >= _TEXT_BYTES[old])
    elif old == "varbinary" and new == "varbinary":
        ok = _length(after) >= _length(before)
    elif old in ("varbinary", *_BLOB_BYTES) and new in _BLOB_BYTES:
        ok = new != "tinyblob" and (old not in _BLOB_BYTES or _BLOB_BYTES[new] >= _BLOB_BYTES[old])
    elif old == new == "enum":
        ok = set(before.set_members) <= set(after.set_members)  # values are labels
    elif old == new == "set":
        # A SET value is its members in definition order: kept when the old members keep their order.
        ok = _subsequence(before.set_members, after.set_members)
    elif old == new and old in ("datetime", "timestamp"):
        ok = (after.datetime_precision or 0) >= (before.datetime_precision or 0)
    elif old == new == "bit":
        ok = after.bit_width >= before.bit_width
    if ok:
        return None
    return f"column '{before.name}' changed type from {before.column_type} to {after.column_type}"


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


_NULL = "NULL"
_BACKFILL = "backfill"


def default_literal(column: ColumnInfo, *, generated: bool = False) -> str:
    """What existing rows show for an added column: a Spark SQL literal, `_NULL`, or `_BACKFILL`.

    `_BACKFILL` when only the server knows the value (implicit NOT NULL defaults such as 0, '', the first
    ENUM label or the zero date; CURRENT_TIMESTAMP; expressions; generated columns).
    """
    default = column.column_default
    if generated:
        return _BACKFILL
    if default is None or default.upper() == "NULL":
        return _NULL if column.nullable else _BACKFILL
    # FLOAT/DOUBLE defaults are not taken from information_schema: it shows them rounded (FLOAT to 6 digits).
    # Neither are DECIMALs over 38 digits: Delta holds them as the server's text, and Spark cannot parse the
    # literal as a number on the way there.
    if spark_type_ddl(column) == "string" and column.data_type.lower() in ("decimal", "numeric"):
        return _BACKFILL
    if column.data_type.lower() in ("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal",
                                    "numeric") and _NUMBER.match(default):
        return f"CAST({default} AS {spark_type_ddl(column)})"
    match = _SIMPLE_STRING.match(default)
    if match and column.data_type.lower() in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext"):
        return f"CAST('{match.group(1)}' AS {spark_type_ddl(column)})"
    return _BACKFILL


def needs_backfill(diff: SchemaDiff, generated: Collection[str]) -> list[ColumnInfo]:
    """The added columns whose values in existing rows must be read from the source."""
    return [column for column in diff.added if default_literal(column, generated=column.name in generated) == _BACKFILL]


def evolve_delta_table(
    spark: SparkSession, path: str, diff: SchemaDiff, *, table: str, generated: Collection[str] = (),
    clustering: tuple[str, ...] = (),
) -> None:
    """Retype widened columns, add the new columns (if not there yet) and fill existing rows' constant defaults.

    Columns that need a back-fill from the source are only added here (NULL until the pipeline back-fills them).
    `clustering`: the table's configured clustering columns, which a retype's overwrite resets and sets again.
    """
    from cdc_lib.sink.spark.uniform import check_uniform_writable
    from cdc_lib.sink.spark.writer import rewrite_column_types
    from cdc_lib.sink.storage import storage_for

    check_uniform_writable(spark, path, storage=storage_for(path), table=table)
    if diff.retyped:
        rewrite_column_types(spark, path, diff.retyped, clustering=clustering)
    literals = {column.name: default_literal(column, generated=column.name in generated) for column in diff.added}
    order = spark.read.format("delta").load(path).columns
    existing = set(order)
    missing = [column for column in diff.added if column.name not in existing]
    if missing:
        if any(spark_type_ddl(column) == "timestamp_ntz" for column in missing):
            # A table written without DATETIME columns lacks the feature, and Delta will not add it implicitly.
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')")
        source_columns = [name for name in order if name not in metadata_columns.NAMES]
        if len(source_columns) < len(order):
            # binlake's metadata columns stay last (docs/readers.md#metadata-columns): each new column goes after
            # the source's last one, one at a time so each AFTER names a column that is there.
            previous = source_columns[-1]
            for column in missing:
                spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({quote_identifier(column.name)} "
                          f"{spark_type_ddl(column)} AFTER {quote_identifier(previous)})")
                previous = column.name
        else:
            definitions = ", ".join(f"{quote_identifier(column.name)} {spark_type_ddl(column)}" for column in missing)
            spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({definitions})")
    assignments = [
        f"{quote_identifier(name)} = {literal}"
        for name, literal in literals.items()
        if literal not in (_NULL, _BACKFILL)
    ]
    if assignments:
        spark.sql(f"UPDATE delta.`{path}` SET {', '.join(assignments)}")
