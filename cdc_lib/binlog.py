"""Reading one micro-batch from the binlog.

The binlog is read once, from the smallest table offset, and each committed
transaction is handed to the tables whose own offset it lies past. A batch
ends only at a transaction boundary (XID, COMMIT, or a DDL statement), after
`max_events` row changes or `max_seconds`, or at the end of the binlog.
"""

from __future__ import annotations

import datetime as dt
import operator
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.constants import NONE_SOURCE
from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_lib.config import BatchConfig, SourceConfig, ZeroDatePolicy
from cdc_lib.ddl import table_effects
from cdc_lib.errors import (
    BinlogPurgedError,
    SchemaChangeError,
    ServerHistoryError,
    ServerSettingsError,
    SourceConnectionError,
    ZeroDateError,
)
from cdc_lib.events import Row, TableChanges
from cdc_lib.faults import failpoint
from cdc_lib.positions import (
    BinlogPosition,
    ServerIdentity,
    advance_state,
    earliest_state,
    is_mariadb_state,
    transaction_applied,
)
from cdc_lib.row_decoder import FastRows
from cdc_lib.source import TableRef, TableSchema, connection_settings
from cdc_lib.types import binlog_converter


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
    #: (index, name, is TIMESTAMP) of DATE, DATETIME and TIMESTAMP columns, which may hold zero dates.
    temporal: tuple[tuple[int, str, bool], ...] = ()
    zero_dates: ZeroDatePolicy = "null"

    @classmethod
    def for_schema(cls, schema: TableSchema, *, zero_dates: ZeroDatePolicy = "null") -> TableDecoder:
        names = schema.column_names
        conversions = []
        for index, column in enumerate(schema.columns):
            converter = binlog_converter(column)
            if converter is not None:
                conversions.append((index, converter))
        getter = operator.itemgetter(*names)
        temporal = tuple(
            (index, column.name, column.data_type.lower() == "timestamp")
            for index, column in enumerate(schema.columns)
            if column.data_type.lower() in ("date", "datetime", "timestamp")
        )
        # The fast decoder turns a zero date into None like a NULL; under `error` only the library's
        # none_sources tell the two apart, so such tables decode through the library.
        library_only = zero_dates == "error" and bool(temporal)
        return cls(
            schema=schema,
            conversions=tuple(conversions),
            key_positions=tuple(names.index(key) for key in schema.primary_key),
            set_columns=frozenset(column.name for column in schema.columns if column.data_type.lower() == "set"),
            pick=getter if len(names) > 1 else (lambda values: (getter(values),)),
            width=len(names),
            temporal=temporal,
            zero_dates=zero_dates,
            fast=FastRows(schema, library_only=library_only),
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
        zero = self._zero_dates(values, none_sources) if self.temporal else ()
        if not self.conversions and not zero:
            return picked  # type: ignore[no-any-return]
        row = list(picked)
        for index, convert in self.conversions:
            value = row[index]
            if value is not None:
                row[index] = convert(value)
        for index in zero:
            row[index] = None
        return tuple(row)

    def _zero_dates(self, values: dict[str, Any], none_sources: dict[str, str] | None) -> list[int]:
        """Indexes of zero or partial dates in a row; raises instead under the `error` policy.

        The reader decodes a zero DATE/DATETIME as None (its none_sources tell it from NULL) and a
        zero TIMESTAMP as the epoch, which no real TIMESTAMP holds (their range starts at 00:00:01 UTC).
        """
        found = []
        for index, name, is_timestamp in self.temporal:
            if is_timestamp:
                zero = values.get(name) == _EPOCH
            else:
                zero = values.get(name) is None and bool(none_sources) and none_sources.get(name) in _OUT_OF_RANGE
            if zero:
                if self.zero_dates == "error":
                    raise ZeroDateError(self.schema.table.name, name)
                found.append(index)
        return found


_EPOCH = dt.datetime(1970, 1, 1)
_OUT_OF_RANGE = frozenset(
    {NONE_SOURCE.OUT_OF_DATE_RANGE, NONE_SOURCE.OUT_OF_DATETIME_RANGE, NONE_SOURCE.OUT_OF_DATETIME2_RANGE}
)


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
    #: Read from the tables' GTID state on a server other than the one their offsets were written on.
    by_gtid: bool = False

    def stopped(self, name: str) -> bool:
        return name in self.table_errors or name in self.schema_changes

    def relevant_changes(self) -> dict[str, TableChanges]:
        return {name: changes for name, changes in self.changes.items() if not changes.empty}


def _open_stream(
    source: SourceConfig,
    start: BinlogPosition,
    *,
    events: list[type],
    tables: list[TableRef],
    gtid_state: str | None = None,
) -> BinLogStreamReader:
    """A non-blocking binlog dump from `start` (or from a MariaDB GTID state) to the current end."""
    return BinLogStreamReader(
        connection_settings=connection_settings(source),
        server_id=source.server_id,
        resume_stream=True,
        log_file=None if gtid_state is not None else start.file,
        log_pos=None if gtid_state is not None else start.pos,
        blocking=False,
        # The library's MariaDB mode ignores log_file/log_pos and sends @slave_connect_state (strict mode)
        # instead, so it serves only the GTID dump; the classic file/position dump works on both servers.
        is_mariadb=gtid_state is not None,
        auto_position=gtid_state,
        only_events=events,
        only_schemas=sorted({table.database for table in tables}),
        only_tables=sorted({table.table for table in tables}),
        enable_logging=False,
    )


def read_batch(
    source: SourceConfig,
    cursors: list[TableCursor],
    batch: BatchConfig,
    *,
    server: ServerIdentity | None = None,
) -> BatchRead:
    """Read committed transactions past the smallest table offset; see the module docstring.

    `server` is the identity of the server connected to. When some offset was written on another
    server, the read starts from the earliest GTID state of the tables (MariaDB) and each
    transaction goes to the tables whose GTID state does not contain it yet; the positions it
    reports are offsets on `server`, once the first transaction fixed where the read stands.
    """
    start = min((cursor.position for cursor in cursors), key=lambda position: position.sort_key)
    by_gtid = server is not None and any(not cursor.position.written_on(server) for cursor in cursors)
    by_name = {cursor.name: cursor for cursor in cursors}
    decoders = {
        cursor.name: TableDecoder.for_schema(cursor.schema, zero_dates=source.zero_dates) for cursor in cursors
    }
    result = BatchRead(start=start, end=start, by_gtid=by_gtid)
    start_state = earliest_state([cursor.position.gtid for cursor in cursors]) if by_gtid else None
    stream = _open_stream(
        source,
        start,
        events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, XidEvent, QueryEvent, RotateEvent,
                MariadbGtidEvent, GtidEvent],
        tables=[cursor.schema.table for cursor in cursors],
        gtid_state=start_state,
    )
    started = time.monotonic()
    transaction_start = start
    pending: dict[str, TableChanges] = {}
    pending_rows = 0
    gtid: str | None = start_state if by_gtid else start.gtid
    transaction_gtid: str | None = None
    identity = server or start.server
    current_file = start.file
    in_transaction = False
    # A GTID dump skips the transactions we have on the server side, so offsets seen before the first
    # transaction arrives may lie before skipped ones: only commits anchor positions on the new server.
    anchored = not by_gtid

    def behind(name: str) -> bool:
        """Whether the current transaction lies before the table's own offset (it has it already)."""
        if by_gtid:
            return transaction_gtid is not None and transaction_applied(by_name[name].position.gtid, transaction_gtid)
        return transaction_start < by_name[name].position

    def resume_point(name: str) -> BinlogPosition:
        """Where a table that stops at the current transaction resumes.

        Before a GTID read has anchored on this server, `transaction_start` may still be another table's
        offset (ahead of this one); resuming there would skip transactions, so the table keeps its own.
        """
        return transaction_start if anchored else by_name[name].position

    def commit(end_pos: int, event_time: int) -> None:
        nonlocal transaction_start, pending, pending_rows, in_transaction, anchored, transaction_gtid
        in_transaction = False
        anchored = True
        end = BinlogPosition(current_file, end_pos, gtid, identity)
        for name, changes in pending.items():
            if result.stopped(name) or behind(name):
                continue
            result.changes.setdefault(name, TableChanges(decoders[name].key_positions)).merge_from(changes)
        result.row_changes += pending_rows
        result.transactions += 1
        result.end = end
        result.last_event_time = dt.datetime.fromtimestamp(event_time, dt.UTC)
        transaction_start = end
        transaction_gtid = None
        pending, pending_rows = {}, 0

    try:
        for event in stream:
            result.events_read += 1
            if isinstance(event, RotateEvent):
                current_file = event.next_binlog
                if not in_transaction and not pending and anchored:
                    # Between transactions a rotation is a boundary too: idle tables follow it.
                    transaction_start = BinlogPosition(current_file, event.position, gtid, identity)
                    if transaction_start > result.end or not result.end.written_on(identity):
                        result.end = transaction_start
                continue
            if isinstance(event, (MariadbGtidEvent, GtidEvent)):
                transaction_gtid = event.gtid
                gtid = _advance_gtid(gtid, event.gtid)
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
                if not upper.startswith("COMMIT"):
                    altered = _apply_ddl(
                        statement, _query_text(event.schema), by_name, pending, decoders, result, resume_point,
                        behind,
                    )
                before = resume_point(altered) if altered is not None else transaction_start
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
                    if not result.row_changes and not pending_rows:
                        failpoint("binlog_mid_read")  # once per batch, after its first rows event
                except ZeroDateError as exc:
                    if behind(name):
                        continue  # a transaction the table has already: its rows are dropped at the commit
                    # Nothing of this batch reaches the table: it stays where it was, stopped.
                    result.table_errors[name] = TableFailure(exc, by_name[name].position)
                    result.changes.pop(name, None)
                    pending.pop(name, None)
                    continue
                except (SchemaChangeError, ServerSettingsError) as exc:
                    if not behind(name):
                        result.table_errors[name] = TableFailure(exc, resume_point(name))
                    pending.pop(name, None)
                    continue
                pending_rows += folded
                continue
            if result.row_changes >= batch.max_events or time.monotonic() - started >= batch.max_seconds:
                break
        else:
            result.reached_end = True
            if not in_transaction and not pending and anchored:
                # Trailing non-transaction events (a new file's header, checkpoints) are passed too.
                tail = BinlogPosition(stream.log_file or current_file, int(stream.log_pos or 0), gtid, identity)
                if tail.file == current_file and tail > result.end:
                    result.end = tail
    except pymysql.MySQLError as exc:
        raise _describe_read_failure(exc, start, gtid_state=start_state) from None
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
    resume_point: Callable[[str], BinlogPosition],
    behind: Callable[[str], bool],
) -> str | None:
    """Handle a DDL statement; return the table name when the table must pause for a schema change."""
    altered: str | None = None
    for effect in table_effects(statement, default_schema, by_name):
        name = effect.table
        if result.stopped(name) or behind(name):
            continue
        if effect.kind == "truncate":
            pending.setdefault(name, TableChanges(decoders[name].key_positions)).truncate()
        elif effect.kind == "schema":
            altered = name
        elif effect.kind == "stop":
            error = SchemaChangeError(effect.cause, remedy=effect.remedy, table=name)
            result.table_errors[name] = TableFailure(error, resume_point(name))
    return altered


def _advance_gtid(state: str | None, gtid: str) -> str:
    """The GTID state after transaction `gtid`: per domain on MariaDB, a growing GTID set on MySQL."""
    if is_mariadb_state(state) and is_mariadb_state(gtid):
        return advance_state(state, gtid)
    from pymysqlreplication.gtid import Gtid, GtidSet

    try:
        return str(GtidSet(state) + Gtid(gtid)).replace("\n", "")
    except Exception:  # noqa: BLE001 - an unparsable set still leaves the transaction's own GTID
        return gtid


def _query_text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value or "")


def _describe_read_failure(
    exc: pymysql.MySQLError, start: BinlogPosition, *, gtid_state: str | None = None
) -> Exception:
    code = exc.args[0] if exc.args else None
    message = str(exc.args[1]) if len(exc.args) > 1 else ""
    if code == 1236 and gtid_state is not None:
        return ServerHistoryError(
            f"the server cannot send the binlog from GTID state '{gtid_state}' ({message[:200]}): it lacks the "
            "history the offsets were written in",
            remedy="re-snapshot the tables: binlake snapshot --table db.t (Dagster: backfill), or point "
            "source.host/port back at a server with that history",
        )
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
                effects = table_effects(_query_text(event.query), _query_text(event.schema), (name,))
                if any(effect.kind != "none" for effect in effects):
                    return SUPERSEDED
    except pymysql.MySQLError as exc:
        raise _describe_read_failure(exc, position) from None
    finally:
        stream.close()
    return None
