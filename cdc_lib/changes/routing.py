"""Routed tables: many source tables in one Delta table (`sink.routes`; docs/routing.md).

    _binlake_source_db      STRING  the source table's database
    _binlake_source_table   STRING  the source table's name

Both follow the source's columns and close the target's key (the source's primary key, then these two), so
equal keys of two shards are two rows. They are constants of the source table: the sync adds them to its fold
(`with_source`) and the snapshot to its frame, so both writers write the routed schema (`routed_schema`) as
they write any other; `scope` is the predicate of one source's rows (a re-snapshot's replaceWhere, a TRUNCATE's
delete), so nothing one shard writes ever reaches another shard's rows.
"""

from __future__ import annotations

from cdc_lib.changes.events import TableChanges
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo, quote_identifier

SOURCE_DB = "_binlake_source_db"
SOURCE_TABLE = "_binlake_source_table"
#: In the order they follow the source's columns (and its key).
NAMES = (SOURCE_DB, SOURCE_TABLE)


def _column(name: str) -> ColumnInfo:
    # MySQL names are at most 64 characters; a VARCHAR maps to Spark's `string` on both roads.
    return ColumnInfo(name=name, data_type="varchar", column_type="varchar(64)", nullable=False,
                      character_set="utf8mb4")


COLUMNS = tuple(_column(name) for name in NAMES)


def routed_schema(schema: TableSchema) -> TableSchema:
    """The target's Delta schema for rows of `schema`'s table: the source's columns, then `NAMES`, which also
    close the key. A schema that already ends with them is returned as it is."""
    if schema.column_names[-len(NAMES):] == NAMES:
        return schema
    return TableSchema(table=schema.table, columns=(*schema.columns, *COLUMNS),
                       primary_key=(*schema.primary_key, *NAMES))


def source_values(table: TableRef) -> tuple[str, str]:
    """The values of `NAMES` on the rows of `table`."""
    return table.database, table.table


def with_source(changes: TableChanges, table: TableRef) -> TableChanges:
    """`changes` of `table` as rows of the routed schema: each key and each upsert row followed by the source's
    names, as a new fold (the input is kept, so a commit retried after a conflict writes the same rows)."""
    values = source_values(table)
    rows = {
        (*key, *values): (operation, None if row is None else (*row, *values))
        for key, (operation, row) in changes.rows.items()
    }
    # The key positions in the widened row: the source key's, then the two appended columns (the last two).
    return TableChanges((*changes.key_positions, -2, -1), rows=rows, truncated=changes.truncated,
                        inserted=changes.inserted, updated=changes.updated, deleted=changes.deleted,
                        new_keys={(*key, *values) for key in changes.new_keys})


def sql_string(value: str) -> str:
    """`value` as a Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def scope(table: TableRef, *, alias: str | None = None) -> str:
    """The Spark SQL predicate of `table`'s rows in the target (`alias`: the target's alias in a MERGE)."""
    prefix = f"{alias}." if alias else ""
    return " AND ".join(
        f"{prefix}{quote_identifier(name)} = {sql_string(value)}"
        for name, value in zip(NAMES, source_values(table), strict=True)
    )


__all__ = ["COLUMNS", "NAMES", "SOURCE_DB", "SOURCE_TABLE", "routed_schema", "scope", "source_values",
           "sql_string", "with_source"]
