"""Reading one micro-batch from the binlog.

The binlog is read once, from the smallest table offset, and each committed
transaction is handed to the tables whose own offset it lies past. A batch
ends only at a transaction boundary (XID, COMMIT, or a DDL statement), after
`max_events` row changes or `max_seconds`, or at the end of the binlog.
"""

from __future__ import annotations

import datetime as dt
import operator
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.constants import NONE_SOURCE
from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_lib.config import BatchConfig, SourceConfig
from cdc_lib.errors import BinlogPurgedError, SchemaChangeError, ServerSettingsError, SourceConnectionError
from cdc_lib.events import Row, TableChanges
from cdc_lib.positions import BinlogPosition
from cdc_lib.row_decoder import FastRows
from cdc_lib.source import TableRef, TableSchema, connection_settings
from cdc_lib.types import binlog_converter

_DDL_TABLE = re.compile(
    r"^\s*(?:ALTER|DROP|RENAME|TRUNCATE|CREATE)\s+(?:ONLINE\s+|IGNORE\s+)?(?:TABLE\s+)?(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
    r"(?:`?(\w+)`?\.)?`?(\w+)`?",
    re.IGNORECASE,
)
_TRUNCATE = re.compile(r"^\s*TRUNCATE\s", re.IGNORECASE)


@dataclass(frozen=True)
class TableCursor:
    """A table as the reader sees it: its offset and the schema rows decode into."""

    name: str
    position: BinlogPosition
    schema: TableSchema


@dataclass
class TableDecoder:
    """Turns the reader's row dicts into tuples in schema order, converting only where needed."""

    schema: TableSchema
    conversions: tuple[tuple[int, Callable[[Any], Any]], ...]
    key_positions: tuple[int, ...]
    set_columns: frozenset[str]
    pick: Callable[[dict[str, Any]], Any]
    width: int
    fast: FastRows

    @classmethod
    def for_schema(cls, schema: TableSchema) -> TableDecoder:
        names = schema.column_names
        conversions = []
        for index, column in enumerate(schema.columns):
            converter = binlog_converter(column)
            if converter is not None:
                conversions.append((index, converter))
        getter = operator.itemgetter(*names)
        return cls(
            schema=schema,
            conversions=tuple(conversions),
            key_positions=tuple(names.index(key) for key in schema.primary_key),
            set_columns=frozenset(column.name for column in schema.columns if column.data_type.lower() == "set"),
            pick=getter if len(names) > 1 else (lambda values: (getter(values),)),
            width=len(names),
            fast=FastRows(schema),
        )

    def row(self, values: dict[str, Any], none_sources: dict[str, str] | None = None) -> Row:
        if self.set_columns and none_sources:
            # The reader reports an empty SET as None; only its none_sources tell it from NULL.
            for name in self.set_columns:
                if none_sources.get(name) == NONE_SOURCE.EMPTY_SET:
                    values = {**values, name: ""}
        if len(values) != self.width:
            raise _schema_changed(self.schema, values)
        try:
            picked = self.pick(values)
        except KeyError as missing:
            raise _schema_changed(self.schema, values) from missing
        if not self.conversions:
            return picked  # type: ignore[no-any-return]
        row = list(picked)
        for index, convert in self.conversions:
            value = row[index]
            if value is not None:
                row[index] = convert(value)
        return tuple(row)


def _schema_changed(schema: TableSchema, values: dict[str, Any]) -> Exception:
    table = schema.table.name
    if any(str(key).startswith("UNKNOWN_COL") for key in values):
        return ServerSettingsError("binlog_row_metadata", "MINIMAL", "FULL")
    added = [key for key in values if key not in schema.column_names]
    missing = [name for name in schema.column_names if name not in values]
    return SchemaChangeError(
        f"columns changed in the binlog (added: {added or '-'}, missing: {missing or '-'})",
        remedy=f"re-snapshot the table: binlake snapshot --table {table}",
        table=table,
    )


@dataclass(frozen=True)
class TableFailure:
    """A table that must stop: `position` is the boundary before the transaction that broke it."""

    error: Exception
    position: BinlogPosition


@dataclass(frozen=True)
class SchemaChange:
    """A DDL statement on a followed table; the table pauses there until the pipeline has handled it."""

    statement: str
    before: BinlogPosition
    after: BinlogPosition


@dataclass
class BatchRead:
    """What one read of the binlog produced."""

    start: BinlogPosition
    end: BinlogPosition
    changes: dict[str, TableChanges] = field(default_factory=dict)
    table_errors: dict[str, TableFailure] = field(default_factory=dict)
    schema_changes: dict[str, SchemaChange] = field(default_factory=dict)
    events_read: int = 0
    row_changes: int = 0
    transactions: int = 0
    reached_end: bool = False
    last_event_time: dt.datetime | None = None
    seconds: float = 0.0

    def stopped(self, name: str) -> bool:
        return name in self.table_errors or name in self.schema_changes

    def relevant_changes(self) -> dict[str, TableChanges]:
        return {name: changes for name, changes in self.changes.items() if not changes.empty}


def _open_stream(
    source: SourceConfig, start: BinlogPosition, *, events: list[type], tables: list[TableRef]
) -> BinLogStreamReader:
    """A non-blocking binlog dump from `start` to the current end, for the given tables only."""
    return BinLogStreamReader(
        connection_settings=connection_settings(source),
        server_id=source.server_id,
        resume_stream=True,
        log_file=start.file,
        log_pos=start.pos,
        blocking=False,
        # The library's MariaDB mode ignores log_file/log_pos and dumps from the first binlog;
        # the classic file/position dump works on MariaDB and MySQL alike.
        is_mariadb=False,
        only_events=events,
        only_schemas=sorted({table.database for table in tables}),
        only_tables=sorted({table.table for table in tables}),
        enable_logging=False,
    )


def read_batch(
    source: SourceConfig,
    cursors: list[TableCursor],
    batch: BatchConfig,
) -> BatchRead:
    """Read committed transactions past the smallest table offset; see the module docstring."""
    start = min((cursor.position for cursor in cursors), key=lambda position: position.sort_key)
    by_name = {cursor.name: cursor for cursor in cursors}
    decoders = {cursor.name: TableDecoder.for_schema(cursor.schema) for cursor in cursors}
    result = BatchRead(start=start, end=start)
    stream = _open_stream(
        source,
        start,
        events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent, RotateEvent,
                MariadbGtidEvent, GtidEvent],
        tables=[cursor.schema.table for cursor in cursors],
    )
    started = time.monotonic()
    transaction_start = start
    pending: dict[str, TableChanges] = {}
    pending_rows = 0
    gtid: str | None = start.gtid
    current_file = start.file
    in_transaction = False

    def commit(end_pos: int, event_time: int) -> None:
        nonlocal transaction_start, pending, pending_rows, in_transaction
        in_transaction = False
        end = BinlogPosition(current_file, end_pos, gtid)
        for name, changes in pending.items():
            if result.stopped(name) or transaction_start < by_name[name].position:
                continue
            result.changes.setdefault(name, TableChanges(decoders[name].key_positions)).merge_from(changes)
        result.row_changes += pending_rows
        result.transactions += 1
        result.end = end
        result.last_event_time = dt.datetime.fromtimestamp(event_time, dt.UTC)
        transaction_start = end
        pending, pending_rows = {}, 0

    try:
        for event in stream:
            result.events_read += 1
            if isinstance(event, RotateEvent):
                current_file = event.next_binlog
                if not in_transaction and not pending:
                    # Between transactions a rotation is a boundary too: idle tables follow it.
                    transaction_start = BinlogPosition(current_file, event.position, gtid)
                    if transaction_start > result.end:
                        result.end = transaction_start
                continue
            if isinstance(event, (MariadbGtidEvent, GtidEvent)):
                gtid = event.gtid
                in_transaction = True
                continue
            if isinstance(event, XidEvent):
                commit(event.packet.log_pos, event.timestamp)
            elif isinstance(event, QueryEvent):
                statement = _query_text(event.query)
                upper = statement.lstrip().upper()
                if upper.startswith("BEGIN") or upper.startswith("XA START") or upper.startswith("SAVEPOINT"):
                    in_transaction = True
                    continue
                altered: str | None = None
                before = transaction_start
                if not upper.startswith("COMMIT"):
                    altered = _apply_ddl(
                        statement, _query_text(event.schema), by_name, pending, decoders, result, transaction_start
                    )
                commit(event.packet.log_pos, event.timestamp)
                if altered is not None:
                    result.schema_changes[altered] = SchemaChange(statement[:2000], before, result.end)
            else:
                name = f"{event.schema}.{event.table}"
                decoder = decoders.get(name)
                if decoder is None or result.stopped(name):
                    continue
                changes = pending.get(name)
                if changes is None:
                    changes = pending[name] = TableChanges(decoder.key_positions)
                try:
                    folded = _fold_rows(event, decoder, changes)
                except (SchemaChangeError, ServerSettingsError) as exc:
                    if not transaction_start < by_name[name].position:
                        result.table_errors[name] = TableFailure(exc, transaction_start)
                    pending.pop(name, None)
                    continue
                pending_rows += folded
                continue
            if result.row_changes >= batch.max_events or time.monotonic() - started >= batch.max_seconds:
                break
        else:
            result.reached_end = True
            if not in_transaction and not pending:
                # Trailing non-transaction events (a new file's header, checkpoints) are passed too.
                tail = BinlogPosition(stream.log_file or current_file, int(stream.log_pos or 0), gtid)
                if tail.file == current_file and tail > result.end:
                    result.end = tail
    except pymysql.MySQLError as exc:
        raise _describe_read_failure(exc, start) from None
    finally:
        stream.close()
    result.seconds = time.monotonic() - started
    return result


def _fold_rows(event: Any, decoder: TableDecoder, changes: TableChanges) -> int:
    """Fold the event's rows into `changes`; returns how many row changes it carried."""
    images = decoder.fast.images(event)
    if images is not None:
        if isinstance(event, UpdateRowsEvent):
            pairs = iter(images)
            for before, after in zip(pairs, pairs, strict=True):
                changes.update(before, after)
            return len(images) // 2
        fold = changes.insert if isinstance(event, WriteRowsEvent) else changes.delete
        for row in images:
            fold(row)
        return len(images)
    if isinstance(event, WriteRowsEvent):
        for row in event.rows:
            changes.insert(decoder.row(row["values"], row.get("none_sources")))
    elif isinstance(event, UpdateRowsEvent):
        for row in event.rows:
            changes.update(
                decoder.row(row["before_values"], row.get("before_none_sources")),
                decoder.row(row["after_values"], row.get("after_none_sources")),
            )
    elif isinstance(event, DeleteRowsEvent):
        for row in event.rows:
            changes.delete(decoder.row(row["values"], row.get("none_sources")))
    return len(event.rows)


def _apply_ddl(
    statement: str,
    default_schema: str,
    by_name: dict[str, TableCursor],
    pending: dict[str, TableChanges],
    decoders: dict[str, TableDecoder],
    result: BatchRead,
    transaction_start: BinlogPosition,
) -> str | None:
    """Handle a DDL statement; return the table name when the table must pause for a schema change."""
    match = _DDL_TABLE.match(statement)
    if not match:
        return None
    name = f"{match.group(1) or default_schema}.{match.group(2)}"
    if name not in by_name or result.stopped(name) or transaction_start < by_name[name].position:
        return None
    if _TRUNCATE.match(statement):
        pending.setdefault(name, TableChanges(decoders[name].key_positions)).truncate()
        return None
    keyword = statement.split(None, 1)[0].upper()
    if keyword == "ALTER":
        return name
    if keyword in ("DROP", "RENAME"):
        error = SchemaChangeError(
            f"the table was dropped or renamed: {statement[:120]}",
            remedy=f"remove {name} from source.tables, or re-create it and run binlake snapshot --table {name}",
            table=name,
        )
        result.table_errors[name] = TableFailure(error, transaction_start)
    return None


def _query_text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value or "")


def _describe_read_failure(exc: pymysql.MySQLError, start: BinlogPosition) -> Exception:
    code = exc.args[0] if exc.args else None
    message = str(exc.args[1]) if len(exc.args) > 1 else ""
    if code == 1236:
        return BinlogPurgedError(
            f"the server cannot send the binlog from {start} ({message[:160]})",
            remedy="re-snapshot the affected tables: binlake snapshot --table db.t",
        )
    if code == 1045:
        return SourceConnectionError(
            "the server refused the credentials", remedy="check source.user and the password", retryable=False
        )
    if code in (1227, 1044):
        return SourceConnectionError(
            "the user may not read the binlog",
            remedy="GRANT REPLICATION SLAVE ON *.* TO the binlake user",
            retryable=False,
        )
    if code == 4052:  # MariaDB: a newer dump with the same server_id took over
        return SourceConnectionError(
            "another replica or binlake pipeline connected to the server with the same source.server_id, "
            "and the server dropped this reader",
            remedy="give every binlake pipeline and every replica of this server its own source.server_id",
            retryable=False,
        )
    return SourceConnectionError(
        f"reading the binlog failed (MySQL error {code}: {message[:160]})",
        remedy="retry; check the server's availability and log",
    )


SUPERSEDED = "superseded"


def columns_after_ddl(
    source: SourceConfig, table: TableSchema, position: BinlogPosition, *, max_events: int = 1_000_000
) -> list[str] | str | None:
    """The table's column names right after a DDL, as the binlog itself records them.

    Returns the names from the next table-map event of the table; `SUPERSEDED` when another
    DDL on the table comes first (so this one changed no row's shape); None when the binlog
    ends first (the server's current schema is then the one after the DDL).
    """
    from pymysqlreplication.row_event import TableMapEvent

    stream = _open_stream(source, position, events=[TableMapEvent, QueryEvent], tables=[table.table])
    name = table.table.name
    try:
        for seen, event in enumerate(stream):
            if seen >= max_events:
                break
            if isinstance(event, TableMapEvent):
                if f"{event.schema}.{event.table}" == name:
                    return [str(column.name) for column in event.columns]
            elif isinstance(event, QueryEvent):
                match = _DDL_TABLE.match(_query_text(event.query))
                if match and f"{match.group(1) or _query_text(event.schema)}.{match.group(2)}" == name:
                    return SUPERSEDED
    except pymysql.MySQLError as exc:
        raise _describe_read_failure(exc, position) from None
    finally:
        stream.close()
    return None
