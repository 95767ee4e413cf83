"""Taking a table past an ALTER the binlog reader paused it at: evolve its Delta table, or stop it with the remedy.

Added columns evolve the Delta schema (back-filled from the source when the server filled
them in without row events), widened columns are retyped; drops, renames and narrowing stop
the table (invariant 9). Either way the DDL goes into the table's `ddl_log`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Any

import pymysql

from cdc_lib.binlog.batch import SchemaChange, TableCursor, TableFailure
from cdc_lib.binlog.column_positions import name_by_position
from cdc_lib.binlog.probes import SUPERSEDED, UnnamedColumns, columns_after_ddl
from cdc_lib.changes.columns import column_shape, sink_schema, with_ignored
from cdc_lib.changes.modes import live_rows
from cdc_lib.common.logs import about_table
from cdc_lib.config.model import ColumnRules
from cdc_lib.errors import BinlakeError, ColumnRulesError, SchemaChangeAwaitingApproval, SchemaChangeError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.row_filter import parse_filter
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo, quote_identifier
from cdc_lib.pipeline.schema_diff import compare_schemas, evolve_delta_table, needs_backfill, schema_with_columns
from cdc_lib.pipeline.schema_policy import policy_hold
from cdc_lib.pipeline.table_failures import table_write_failure
from cdc_lib.sink.catalog import check_after_schema_change
from cdc_lib.sink.spark import writer as spark_writer
from cdc_lib.snapshot.jdbc_read import partition_predicates, read_refusal_in, read_table
from cdc_lib.source import binlog_status
from cdc_lib.source import server as mysql
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.offsets import TableState, utc_now

log = logging.getLogger("binlake")

#: A table's DDL log keeps this many of its latest entries.
DDL_LOG_ENTRIES = 100
#: The DDL log's action of a DDL whose shape a later one decides (no row between them).
SUPERSEDED_ACTION = "superseded by a later DDL"


@dataclass(frozen=True, kw_only=True)
class SchemaChangeOutcome:
    """The table's state after the DDL, the failure that stops it (if any), and whether Spark was needed."""

    state: TableState
    failure: TableFailure | None
    spark_used: bool


def apply_schema_change(
    context: PipelineContext,
    connection: pymysql.connections.Connection,
    cursor: TableCursor,
    table_state: TableState,
    change: SchemaChange,
) -> SchemaChangeOutcome:
    """Evolve the table past an ALTER, or stop it with the remedy; record the DDL either way.

    `table_state` is left as it is: the outcome carries the new state.
    """
    name = cursor.name
    entry = {"statement": change.statement, "position": change.before.to_json(), "at": utc_now().isoformat()}
    high: BinlogPosition | None = None
    try:
        names_after = columns_after_ddl(context.config.source, cursor.schema, change.after,
                                        max_payload_event_bytes=context.config.batch.max_payload_event_bytes)
        if names_after == SUPERSEDED:
            # Another DDL on the table follows before any row: that one decides the shape.
            return SchemaChangeOutcome(
                state=replace(
                    table_state,
                    position=change.after,
                    ddl_log=_logged(table_state, entry, SUPERSEDED_ACTION),
                ),
                failure=None,
                spark_used=False,
            )
        current = mysql.describe_table(connection, cursor.schema.table)
        if isinstance(names_after, UnnamedColumns):
            # MINIMAL row metadata names no columns: the next table map must be the server's current table by
            # position (count, types, type metadata), or which columns it had after this DDL is not known.
            name_by_position(list(names_after.columns), current, against="the server's table now")
        elif isinstance(names_after, list):
            current = schema_with_columns(current, names_after, table=name)
        row_filter = context.config.sink.row_filter_for(name)
        if row_filter is not None:
            # A DDL that drops, renames or retypes a column the row filter reads leaves no exact answer to which
            # rows land: the table stops here, at the DDL, until the filter is fixed (ColumnRulesError's remedy).
            column_shape(current, None, strict=False, row_filter=row_filter)
            _check_filter_collations(cursor.schema, current, row_filter)
        # Compared as the sink holds them: a change to a column the table leaves out (or that an include list
        # does not name) changes no Delta column, and a hashed column stays CHAR(64) whatever its source type.
        ignored = table_state.ignored_columns
        rules = with_ignored(context.config.sink.column_rules_for(name), ignored)
        # Not strict with ignored columns: one of them may since have been dropped (it stays ignored by name).
        landed_before = sink_schema(cursor.schema, rules, strict=not ignored)
        diff = compare_schemas(landed_before, sink_schema(current, rules, strict=False))
        if diff.added and context.config.sink.schema_policy_for(name) == "ignore_new_columns":
            # The added columns are left out from here on, as excluded ones: the Delta table keeps its columns.
            ignored = (*ignored, *(column.name for column in diff.added if column.name not in ignored))
            rules = with_ignored(context.config.sink.column_rules_for(name), ignored)
            diff = compare_schemas(landed_before, sink_schema(current, rules, strict=False))
        gone = [column for column in cursor.schema.column_names
                if column not in current.column_names and column not in landed_before.column_names]
        if gone and diff.added and _renames(change.statement, table_state):
            # A left-out column renamed to a name the rules land (an exclude list that does not name it): the
            # sink sees a column added, but the rows keep their values, which an added column's NULL or default
            # (and no binlog event) would silently lose. A drop and a separate add land exactly, as added columns.
            raise SchemaChangeError(
                f"columns {gone}, which the column rules leave out, became landed columns "
                f"{[column.name for column in diff.added]} by a rename: the renamed column's values are in no "
                "binlog event to land",
                remedy=f"take the old names {gone} out of sink.tables.{name} (a snapshot checks them; list the "
                       f"new name to keep it out), then re-snapshot the table: binlake snapshot --table {name}",
                table=name,
            )
        if diff.compatible and diff.tightened:
            _check_no_nulls(context, table_state, name, diff.tightened)
        if not diff.compatible:
            raise SchemaChangeError(
                f"incompatible schema change ({'; '.join(diff.problems)})",
                remedy=f"re-snapshot the table: binlake snapshot --table {name}",
                table=name,
            )
        table_state, held = policy_hold(
            context, name, table_state, statement=change.statement, before=change.before, diff=diff
        )
        if held is not None:
            raise held
        generated = _generated_columns(connection, cursor.schema.table, [column.name for column in diff.added])
        backfill = needs_backfill(diff, generated)
        if diff.added or diff.retyped:
            evolve_delta_table(context.spark(), context.table_path(name), diff, table=name, generated=generated,
                               clustering=context.config.sink.layout_for(name).cluster_by)
            check_after_schema_change(context, name)
        if backfill:
            high = _backfill(context, connection, current, backfill, rules)
    except Exception as exc:  # noqa: BLE001 - sorted by `table_write_failure`; the rest re-raised
        error = exc if isinstance(exc, BinlakeError) else table_write_failure(
            exc, name, doing="evolving the Delta table past the schema change"
        )
        if isinstance(exc, SchemaChangeAwaitingApproval):
            log.warning("%s: the table waits at a schema change: %s", name, error, extra=about_table(name))
        elif isinstance(exc, BinlakeError):  # table_write_failure logs the others
            log.error("%s: the table stops at a schema change: %s", name, error, extra=about_table(name))
        return SchemaChangeOutcome(
            state=replace(table_state, ddl_log=_logged(table_state, entry, f"stopped: {error.cause}")),
            failure=TableFailure(error=error, position=change.before),
            spark_used=False,
        )
    added = [column.name for column in diff.added]
    actions = []
    if added:
        actions.append(f"added columns {added}")
    if backfill:
        actions.append(f"back-filled {[column.name for column in backfill]} from the source up to {high}")
    if diff.widened:
        actions.append(
            "widened " + ", ".join(f"{after.name} {before.column_type} -> {after.column_type}"
                                   for before, after in diff.widened)
        )
    evolved = replace(
        table_state,
        schema=current.to_json(),
        position=change.after,
        ddl_log=_logged(table_state, entry, "; ".join(actions) or "no column change"),
        ignored_columns=ignored,
    )
    if high is not None:
        # The back-filled values are the source's as of the read; rows changed since arrive as full row
        # images from the binlog. Until the offset passes the read's high watermark, the table may show
        # a mix of both — the same argument, and the same flag, as a snapshot's watermarks.
        evolved = replace(evolved, snapshot_high=high, consistent=False)
    log.info("%s: schema change applied (%s)", name, change.statement[:120], extra=about_table(name))
    return SchemaChangeOutcome(
        state=evolved, failure=None, spark_used=bool(diff.added or diff.retyped or diff.tightened)
    )


_RENAME = re.compile(r"\bRENAME\s+COLUMN\b|\bCHANGE\s+(COLUMN\s+)?[`\w]", re.IGNORECASE)


def _check_filter_collations(before: TableSchema, after: TableSchema, row_filter: str) -> None:
    """A DDL that changes the character set or collation of a text column the row filter compares stops the table:
    the rows already landed were chosen under the old comparison, which the new one may not select alike
    (`'Active' = 'active'` under a _ci collation, not under _bin).

    Raises:
        ColumnRulesError: such a column's character set or collation changed.
    """
    was = {column.name: column for column in before.columns}
    for column in after.columns:
        old = was.get(column.name)
        if old is None or column.name not in parse_filter(row_filter).compared or old.collation is None:
            continue
        if (old.character_set, old.collation) != (column.character_set, column.collation):
            table = after.table.name
            raise ColumnRulesError(
                f"the row filter compares column '{column.name}', whose collation changed from {old.collation} to "
                f"{column.collation}: the rows it selects may differ from those landed",
                remedy=f"re-snapshot the table: binlake snapshot --table {table}", table=table,
            )


def _renames(statement: str, table_state: TableState) -> bool:
    """Whether the DDL, or one it superseded (no row between them), may rename a column (RENAME/CHANGE COLUMN).

    Read from the statements' text, so a word in a comment may count too: a stop with a remedy, never a loss.
    """
    statements = [statement]
    for logged in reversed(table_state.ddl_log):
        if logged.get("action") != SUPERSEDED_ACTION:
            break
        statements.append(str(logged.get("statement", "")))
    return any(_RENAME.search(text) for text in statements)


def _logged(table_state: TableState, entry: dict[str, Any], action: str) -> list[dict[str, Any]]:
    return [*table_state.ddl_log, {**entry, "action": action}][-DDL_LOG_ENTRIES:]


def _check_no_nulls(context: PipelineContext, table_state: TableState, name: str, columns: list[str]) -> None:
    """A column became NOT NULL: the server turned its NULLs into zero values without row events.

    The paused Delta table is the source just before the DDL (when it is consistent): without NULLs there,
    no value changed.
    """
    if table_state.consistent:
        # Only the live rows stand for the source now (earlier versions and deleted rows keep their NULLs).
        frame = live_rows(context.spark().read.format("delta").load(context.table_path(name)))
        condition = " OR ".join(f"{quote_identifier(column)} IS NULL" for column in columns)
        if not frame.where(condition).limit(1).collect():
            return
    raise SchemaChangeError(
        f"columns {columns} became NOT NULL, and the server may have replaced NULLs in them without row events",
        remedy=f"re-snapshot the table: binlake snapshot --table {name}",
        table=name,
    )


def _backfill(
    context: PipelineContext,
    connection: pymysql.connections.Connection,
    current: TableSchema,
    columns: list[ColumnInfo],
    rules: ColumnRules | None,
) -> BinlogPosition:
    """Read (key, columns) from the source and set them on the rows Delta has; return the read's high watermark."""
    name = current.table.name
    by_name = {column.name: column for column in current.columns}
    schema = TableSchema(
        table=current.table,
        # The source's columns (`columns` are as the sink holds them: a hashed one is CHAR(64) there).
        columns=tuple(by_name[key] for key in current.primary_key) + tuple(by_name[column.name] for column in columns),
        primary_key=current.primary_key,
    )
    predicates, _ = partition_predicates(
        connection, schema, context.config.snapshot,
        default_parallelism=context.spark().sparkContext.defaultParallelism,
    )
    shape = column_shape(schema, rules, strict=False)
    frame = read_table(context.spark(), context.config.source, schema, predicates, shape=shape)
    try:
        spark_writer.backfill_columns(
            context.spark(), context.table_path(name), frame, key=current.primary_key,
            columns=[column.name for column in columns],
        )
    except Exception as exc:
        refusal = read_refusal_in(exc, name)
        if refusal is None:
            raise
        raise refusal from None
    return binlog_status.current_position(connection)


def _generated_columns(connection: pymysql.connections.Connection, table: TableRef, names: list[str]) -> set[str]:
    """Which of `names` are generated columns (VIRTUAL or STORED): their value comes from the server."""
    if not names:
        return set()
    marks = ", ".join(["%s"] * len(names))
    rows = mysql.query(
        connection,
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
        f"AND COLUMN_NAME IN ({marks}) AND (IS_GENERATED = 'ALWAYS' OR EXTRA LIKE '%%GENERATED%%')",
        (table.database, table.table, *names),
    )
    return {str(row[0]) for row in rows}


__all__ = ["DDL_LOG_ENTRIES", "SchemaChangeOutcome", "apply_schema_change"]
