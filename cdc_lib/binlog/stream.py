"""Reading one micro-batch from the binlog.

The binlog is read once, from the smallest table offset, and each committed
transaction is handed to the tables whose own offset it lies past. A batch
ends only at a transaction boundary (XID, COMMIT, or a DDL statement), after
`max_events` row changes or `max_seconds`, or at the end of the binlog.
"""

from __future__ import annotations

import datetime as dt
import logging
import operator
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.constants import NONE_SOURCE
from pymysqlreplication.event import MariadbGtidEvent, QueryEvent
from pymysqlreplication.row_event import DeleteRowsEvent, TableMapEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_lib.binlog.ddl import table_effects
from cdc_lib.binlog.event_types import (
    COMPRESSED_ROWS,
    QUERY_COMPRESSED_EVENT,
    EventType,
    compressed_table_id,
    handling_of,
    raw_event,
    uncompressed_query,
    uncompressed_rows_packet,
)
from cdc_lib.binlog.row_decoder import FastRows
from cdc_lib.binlog.transaction import (
    OpenTransaction,
    PreparedXas,
    Transactional,
    XaId,
    engine_kind,
    parse_xid,
)
from cdc_lib.changes.events import CommitStamp, Row, TableChanges, batch_changes
from cdc_lib.changes.spill import ChangeLog, SpilledChanges, SpillSegment, default_spill_root, spill_folder
from cdc_lib.common.faults import failpoint
from cdc_lib.config.model import BatchConfig, SourceConfig, TableMode, ZeroDatePolicy
from cdc_lib.errors import (
    KeyMappingError,
    MissingGrantError,
    RowDecodeError,
    SchemaChangeError,
    ServerSettingsError,
    SilentConnectionError,
    TableError,
    UnreadableEventError,
    ZeroDateError,
    ZeroDateKeyError,
)
from cdc_lib.model.positions import (
    BinlogPosition,
    ServerIdentity,
    advance_state,
    earliest_state,
    is_mariadb_state,
    transaction_applied,
)
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import binlog_converter, check_key_columns
from cdc_lib.source.mysql_errors import ReadingBinlog, error_message, mysql_error
from cdc_lib.source.server import SILENT_REMEDY, connection_settings, identity_checked, query, source_connection
from cdc_lib.source.silence import StreamSilent, end_silent_session, heartbeat_period, silence_detecting

log = logging.getLogger("binlake")


@dataclass(frozen=True)
class TableCursor:
    """A table as the reader sees it: its offset and the schema rows decode into."""

    name: str
    position: BinlogPosition
    schema: TableSchema
    #: How the table keeps changes (config.TableMode): soft-delete and history tables fold with commit stamps.
    mode: TableMode = "mirror"


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
    #: (index, name) of the key columns among them: a zero date there is refused under any policy (no NULL key).
    temporal_keys: tuple[tuple[int, str], ...] = ()

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
            temporal_keys=tuple((index, name) for index, name, _ in temporal if name in schema.primary_key),
            fast=FastRows(schema, library_only=library_only),
        )

    def check_keys(self, rows: list[Row]) -> None:
        """Refuse a row whose temporal key decoded to None: a key column is NOT NULL, so it held a zero date."""
        for index, name in self.temporal_keys:
            if any(row[index] is None for row in rows):
                raise ZeroDateKeyError(self.schema.table.name, name)

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
                zero = values.get(name) is None and (none_sources or {}).get(name) in _OUT_OF_RANGE
            if zero:
                if any(index == key for key, _ in self.temporal_keys):
                    raise ZeroDateKeyError(self.schema.table.name, name)
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
    #: Tables with rows in an XA branch prepared and not yet committed or rolled back in what was read:
    #: their offset stays at the start of its PREPARE group (see `end_for`).
    held: dict[str, BinlogPosition] = field(default_factory=dict)

    def end_for(self, name: str) -> BinlogPosition:
        """Where the table's offset goes after this read.

        A table stopped by an error or paused at a DDL stays at that boundary. A table with rows in a
        branch still prepared stays before its PREPARE, even though later transactions of the read are
        applied to it: the next read replays from there, and replaying a stretch of binlog that was
        applied already converges to the same rows (every change carries full row images and the fold
        keeps the last one per key), while the branch's rows are read again with their COMMIT.
        """
        failure = self.table_errors.get(name)
        if failure is not None:
            return failure.position
        change = self.schema_changes.get(name)
        if change is not None:
            return change.before
        return self.held.get(name, self.end)

    def stopped(self, name: str) -> bool:
        return name in self.table_errors or name in self.schema_changes

    def relevant_changes(self) -> dict[str, TableChanges]:
        return {name: changes for name, changes in self.changes.items() if not changes.empty}


#: The attribute of a reader's connection that holds its table maps by their bytes (`_table_map_init`).
_TABLE_MAPS = "_binlake_table_maps"
#: Distinct table maps kept per reader connection: a read sees one per followed table and table version.
_TABLE_MAPS_KEPT = 4096
# The library's own constructor, kept once even if this module is imported again (a reload must not wrap ours).
_parse_table_map = getattr(TableMapEvent, "_binlake_library_init", TableMapEvent.__init__)


def _table_map_init(self: Any, from_packet: Any, event_size: int, table_map: dict[int, Any], ctl_connection: Any,
                    **settings: Any) -> None:
    """TableMapEvent's constructor, parsing a table map once per reader connection rather than once per event.

    The server logs a table map before every rows event group (three per transaction of an insert, an update
    and a delete): python-mysql-replication parsed each anew, ~60 µs or a sixth of a busy read's CPU. Equal
    bytes (table id, names, column types, metadata, optional metadata) on the same connection, with the
    same reader settings, parse to the same table map, so the first parse is reused (its `Table` too,
    which `row_decoder.FastRows` then recognises by identity). Connections binlake did not mark (another
    reader in the process) and checksummed verification parse as the library does.
    """
    cache: dict[bytes, Any] | None = getattr(ctl_connection, _TABLE_MAPS, None)
    key = _table_map_bytes(from_packet, event_size) if cache is not None and not settings.get("verify_checksum") \
        else None
    parsed = cache.get(key) if cache is not None and key is not None else None
    if parsed is None:
        _parse_table_map(self, from_packet, event_size, table_map, ctl_connection, **settings)
        if cache is not None and key is not None and self._processed and len(cache) < _TABLE_MAPS_KEPT:
            cache[key] = self
        return
    self.__dict__.update(parsed.__dict__)
    self.packet, self.table_map, self.timestamp = from_packet, table_map, from_packet.timestamp
    table_map[self.table_id] = self.table_obj


def _table_map_bytes(wrapper: Any, event_size: int) -> bytes | None:
    """The event's body (post-header and payload, no checksum), or None if the packet is not where it starts."""
    if getattr(wrapper, "_BinLogPacketWrapper__data_buffer", b"?"):
        return None
    packet = wrapper.packet
    data, start = getattr(packet, "_data", None), getattr(packet, "_position", None)
    if not isinstance(data, bytes) or not isinstance(start, int) or start + event_size > len(data):
        return None
    return data[start:start + event_size]


TableMapEvent._binlake_library_init = _parse_table_map
TableMapEvent.__init__ = _table_map_init


def _caching_table_maps(connect: Callable[..., Any]) -> Callable[..., Any]:
    """A connection factory whose connections keep the table maps they carry (`_table_map_init`)."""

    def connect_caching(**settings: Any) -> Any:
        if "db" in settings:  # the library's name for it, which PyMySQL deprecates
            settings["database"] = settings.pop("db")
        connection = connect(**settings)
        setattr(connection, _TABLE_MAPS, {})
        return connection

    return connect_caching


def open_stream(
    source: SourceConfig,
    start: BinlogPosition,
    *,
    events: list[type] | None,
    tables: list[TableRef],
    gtid_state: str | None = None,
    server: ServerIdentity | None = None,
) -> BinLogStreamReader:
    """A non-blocking binlog dump from `start` (or from a MariaDB GTID state) to the current end.

    `events=None` asks for every event, those the library cannot parse included (closed world).
    With `server` (the identity the control connection read), every connection the reader opens,
    reconnects included, must reach that same server (`source.identity_checked`).
    """
    checked = pymysql.connect if server is None else identity_checked(
        server, role="binlog", host=f"{source.host}:{source.port}"
    )
    return BinLogStreamReader(
        pymysql_wrapper=_caching_table_maps(silence_detecting(checked)),
        # With read/write timeouts (source.network_timeout_seconds): a silent server ends the read (StreamSilent).
        connection_settings=connection_settings(source),
        # The server sends a heartbeat when it has nothing to send for this long, so a live server is never
        # mistaken for a silent one (the library sets MASTER_HEARTBEAT_PERIOD from it on each stream connection).
        slave_heartbeat=heartbeat_period(source.network_timeout_seconds),
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
        filter_non_implemented_events=events is not None,
        only_schemas=sorted({table.database for table in tables}),
        only_tables=sorted({table.table for table in tables}),
        enable_logging=False,
    )


# MariaDB GTID event flags (sql/log_event.h).
_FL_STANDALONE = 1
_FL_PREPARED_XA = 64
_FL_COMPLETED_XA = 128

_LEADING_COMMENTS = re.compile(r"^(?:\s+|/\*(?!!).*?\*/|--[^\n]*(?:\n|$)|#[^\n]*(?:\n|$))*", re.DOTALL)
_NAME = r"(?:`(?P<q>(?:[^`]|``)+)`|(?P<n>[\w$]+))"
_CONTROL = (
    ("begin", re.compile(r"(?:BEGIN(?:\s+WORK)?|START\s+TRANSACTION\b.*)\s*;?\s*$", re.IGNORECASE | re.DOTALL)),
    ("commit", re.compile(r"COMMIT\b(?:\s+WORK)?(?:\s+AND\s+(?:NO\s+)?CHAIN)?(?:\s+(?:NO\s+)?RELEASE)?\s*;?\s*$",
                          re.IGNORECASE)),
    ("rollback_to", re.compile(r"ROLLBACK(?:\s+WORK)?\s+TO\s+(?:SAVEPOINT\s+)?" + _NAME, re.IGNORECASE)),
    ("rollback", re.compile(r"ROLLBACK\b(?:\s+WORK)?(?:\s+AND\s+(?:NO\s+)?CHAIN)?(?:\s+(?:NO\s+)?RELEASE)?\s*;?\s*$",
                            re.IGNORECASE)),
    ("savepoint", re.compile(r"SAVEPOINT\s+" + _NAME, re.IGNORECASE)),
    ("release", re.compile(r"RELEASE\s+SAVEPOINT\s+" + _NAME, re.IGNORECASE)),
    ("xa_start", re.compile(r"XA\s+(?:START|BEGIN)\b(?P<xid>.*)", re.IGNORECASE | re.DOTALL)),
    ("xa_end", re.compile(r"XA\s+END\b(?P<xid>.*)", re.IGNORECASE | re.DOTALL)),
    ("xa_prepare", re.compile(r"XA\s+PREPARE\b(?P<xid>.*)", re.IGNORECASE | re.DOTALL)),
    ("xa_commit", re.compile(r"XA\s+COMMIT\b(?P<xid>.*)", re.IGNORECASE | re.DOTALL)),
    ("xa_rollback", re.compile(r"XA\s+ROLLBACK\b(?P<xid>.*)", re.IGNORECASE | re.DOTALL)),
)


@dataclass(frozen=True)
class Control:
    """A transaction-control statement: its kind, and the savepoint name or XA id it names."""

    kind: str
    name: str = ""
    xid: XaId | None = None
    one_phase: bool = False


def transaction_control(statement: str) -> Control | None:
    """The transaction-control statement `statement` is (leading comments aside), or None for any other."""
    text = _LEADING_COMMENTS.sub("", statement, count=1)
    for kind, pattern in _CONTROL:
        match = pattern.match(text)
        if match is None:
            continue
        groups = match.groupdict()
        name = (groups.get("q") or "").replace("``", "`") or groups.get("n") or ""
        xid_text = groups.get("xid")
        xid = parse_xid(xid_text) if xid_text is not None else None
        one_phase = kind == "xa_commit" and bool(re.search(r"\bONE\s+PHASE\b", xid_text or "", re.IGNORECASE))
        return Control(kind, name, xid, one_phase)
    return None


#: Event types already warned about in this process (an unknown harmless type is logged once).
_logged_types: set[int] = set()


def _log_once(code: int, text: str) -> None:
    if code not in _logged_types:
        _logged_types.add(code)
        log.warning("binlog event type %d: %s (passed; logged once)", code, text)


class _Read:
    """One read of the binlog: the table cursors, the open event group, and what the read has produced.

    Transaction boundaries: an XID, a COMMIT or ROLLBACK statement, a standalone statement (DDL), an
    XA PREPARE (its rows are parked until the XA COMMIT or XA ROLLBACK group), and the XA COMMIT or
    XA ROLLBACK statement itself. A batch ends only at one of them.
    """

    def __init__(self, source: SourceConfig, cursors: list[TableCursor], server: ServerIdentity | None,
                 spill: _SpillPlan | None = None) -> None:
        self.source = source
        self.spill = spill or _SpillPlan()
        self.logs: dict[str, ChangeLog] = {}
        self.start = min((cursor.position for cursor in cursors), key=lambda position: position.sort_key)
        self.by_gtid = server is not None and any(not cursor.position.written_on(server) for cursor in cursors)
        self.by_name = {cursor.name: cursor for cursor in cursors}
        self.decoders = {
            cursor.name: TableDecoder.for_schema(cursor.schema, zero_dates=source.zero_dates) for cursor in cursors
        }
        self.result = BatchRead(start=self.start, end=self.start, by_gtid=self.by_gtid)
        for cursor in cursors:  # a table snapshotted before binlake refused its key type stops where it is
            try:
                check_key_columns(cursor.schema.columns, cursor.schema.primary_key, table=cursor.name)
            except KeyMappingError as exc:
                self.result.table_errors[cursor.name] = TableFailure(exc, cursor.position)
        self.modes = {cursor.name: cursor.mode for cursor in cursors}
        # Only soft-delete and history tables need each commit's time and order (mirror tables skip the cost).
        self.stamped = any(mode != "mirror" for mode in self.modes.values())
        self.start_state = earliest_state([cursor.position.gtid for cursor in cursors]) if self.by_gtid else None
        self.gtid: str | None = self.start_state if self.by_gtid else self.start.gtid
        self.identity = server or self.start.server
        self.current_file = self.start.file
        # A GTID dump skips the transactions we have on the server side, so offsets seen before the first
        # transaction arrives may lie before skipped ones: only commits anchor positions on the new server.
        self.anchored = not self.by_gtid
        self.boundary = self.start  # where the open (or next) event group starts
        self.transaction: OpenTransaction | None = None
        #: Inside BEGIN … COMMIT (rather than between groups, or after a GTID of a standalone statement).
        self.begun = False
        self.prepared = PreparedXas()
        self.engines: dict[str, Transactional] | None = None
        self.altered: dict[str, str] = {}  # table → DDL statement of the open group that changed its shape
        self.rows_seen = False

    # -- positions --------------------------------------------------------------------------

    def behind(self, name: str, start: BinlogPosition, gtid: str | None) -> bool:
        """Whether a transaction (starting at `start`, GTID `gtid`) lies before the table's own offset."""
        if self.by_gtid:
            return gtid is not None and transaction_applied(self.by_name[name].position.gtid, gtid)
        return start < self.by_name[name].position

    def resume_point(self, name: str) -> BinlogPosition:
        """Where a table that stops at the open group resumes.

        Before a GTID read has anchored on this server, the boundary may still be another table's offset
        (ahead of this one); resuming there would skip transactions, so the table keeps its own.
        """
        return self.boundary if self.anchored else self.by_name[name].position

    def open(self) -> OpenTransaction:
        if self.transaction is None:
            self.transaction = OpenTransaction(self.boundary, self._key_positions, mode_of=self.modes.__getitem__,
                                               spill_fold=self._spill_segment)
        return self.transaction

    def _key_positions(self, name: str) -> tuple[int, ...]:
        return self.decoders[name].key_positions

    # -- spilling (cdc_lib.changes.spill) -------------------------------------------------------------

    def _log_of(self, name: str) -> ChangeLog:
        change_log = self.logs.get(name)
        if change_log is None:
            change_log = self.logs[name] = ChangeLog(
                spill_folder(self.spill.root, name), self.by_name[name].schema, mode=self.modes[name],
                key_positions=self.decoders[name].key_positions, limit=self.spill.limit,
            )
        return change_log

    def _spill_segment(self, name: str) -> TableChanges | None:
        if name not in self.spill.tables:
            return None
        return SpillSegment(self.decoders[name].key_positions, log=self._log_of(name))

    def _batch_fold(self, name: str) -> TableChanges:
        if name in self.spill.tables:
            return SpilledChanges(self.decoders[name].key_positions, log=self._log_of(name))
        return batch_changes(self.modes[name], self.decoders[name].key_positions)

    def check_buffered(self, name: str, transaction: OpenTransaction) -> None:
        """Past `batch.max_buffered_changes` row images of one table in memory, the read restarts spilling it."""
        if name in self.spill.tables:
            return
        folded = self.result.changes.get(name)
        if transaction.buffered(name) + (folded.buffered if folded is not None else 0) > self.spill.limit:
            raise _SpillNeeded(name)

    def discard_spills(self) -> None:
        for change_log in self.logs.values():
            change_log.remove()

    def applies_to(self, name: str) -> bool:
        transaction = self.transaction
        start = transaction.start if transaction is not None else self.boundary
        gtid = transaction.gtid if transaction is not None else None
        return not self.result.stopped(name) and not self.behind(name, start, gtid)

    # -- stopping tables --------------------------------------------------------------------

    def stop(self, name: str, error: Exception) -> None:
        """Stop a table at the open group: its earlier transactions of this read still apply."""
        if not self.applies_to(name):
            return
        self.result.table_errors[name] = TableFailure(error, self.resume_point(name))
        if self.transaction is not None:
            self.transaction.discard_table(name)

    def stop_all(self, cause: str, remedy: str) -> None:
        for name in self.by_name:
            self.stop(name, UnreadableEventError(cause, remedy=remedy, table=name))

    # -- event groups -----------------------------------------------------------------------

    def gtid_event(self, event: Any) -> None:
        gtid = getattr(event, "gtid", None)
        self.transaction = None
        self.altered = {}
        transaction = self.open()
        if gtid:
            transaction.gtid = gtid
            self.gtid = _advance_gtid(self.gtid, gtid)
        flags = getattr(event, "flags", 0) if isinstance(event, MariadbGtidEvent) else None
        # MariaDB: a GTID without FL_STANDALONE opens the group as BEGIN would (no BEGIN event follows).
        self.begun = flags is not None and not flags & _FL_STANDALONE

    def commit(self, end_pos: int, event_time: int, changes: dict[str, TableChanges] | None = None,
               *, rows: int | None = None, start: BinlogPosition | None = None, gtid: str | None = None) -> None:
        """End the open group at `end_pos` (binlog offset after its last event), applying `changes`."""
        transaction = self.transaction
        if changes is None:
            changes = transaction.folded() if transaction is not None else {}
            rows = transaction.row_changes if transaction is not None else 0
            start = transaction.start if transaction is not None else self.boundary
            gtid = transaction.gtid if transaction is not None else None
        result = self.result
        before = self.boundary
        self.anchored = True
        end = BinlogPosition(self.current_file, end_pos, self.gtid, self.identity)
        stamp = (
            CommitStamp(dt.datetime.fromtimestamp(event_time, dt.UTC), result.transactions + 1, end)
            if self.stamped else None
        )
        for name, table_changes in changes.items():
            if result.stopped(name) or self.behind(name, start or before, gtid):
                continue
            folded = result.changes.get(name)
            if folded is None:
                folded = result.changes[name] = self._batch_fold(name)
            folded.merge_from(table_changes, stamp)
        for name, statement in self.altered.items():
            if not result.stopped(name):
                result.schema_changes[name] = SchemaChange(statement[:2000], self.resume_point(name), end)
        result.row_changes += rows or 0
        result.transactions += 1
        result.end = end
        result.last_event_time = dt.datetime.fromtimestamp(event_time, dt.UTC)
        self.end_group(end)

    def end_group(self, end: BinlogPosition) -> None:
        self.boundary = end
        self.transaction = None
        self.begun = False
        self.altered = {}

    # -- rows -------------------------------------------------------------------------------

    def rows_event(self, event: Any) -> None:
        name = f"{event.schema}.{event.table}"
        decoder = self.decoders.get(name)
        if decoder is None or self.result.stopped(name):
            return
        transaction = self.open()
        changes = transaction.changes_for(name)
        try:
            fold_rows(event, decoder, changes)
            if not self.rows_seen:
                self.rows_seen = True
                failpoint("binlog_mid_read")  # once per batch, after its first rows event
        except ZeroDateError as exc:
            if not self.applies_to(name):
                return  # a transaction the table has already: its rows are dropped at the commit
            # Nothing of this batch reaches the table: it stays where it was, stopped.
            self.result.table_errors[name] = TableFailure(exc, self.by_name[name].position)
            self.result.changes.pop(name, None)
            transaction.discard_table(name)
        except (SchemaChangeError, ServerSettingsError) as exc:
            self.stop(name, exc)
            transaction.discard_table(name)
        except Exception as exc:  # noqa: BLE001 - any decode failure belongs to this table alone
            self.stop(name, _decode_error(name, event, exc, self.boundary))
            transaction.discard_table(name)
        else:
            self.check_buffered(name, transaction)

    def compressed_rows(self, stream: BinLogStreamReader, event: Any) -> None:
        raw = raw_event(event, checksum=stream_setting(stream, "use_checksum"))
        table = stream.table_map.get(compressed_table_id(raw))
        name = f"{table.schema}.{table.table}" if table is not None else None
        if name not in self.decoders:
            return  # not a followed table (their table maps are the only ones kept)
        try:
            decoded = rebuilt_rows_event(stream, uncompressed_rows_packet(raw))
        except Exception as exc:  # noqa: BLE001 - an undecodable compressed event stops its table
            self.stop(name, UnreadableEventError(
                f"a compressed rows event (log_bin_compress) at {self.current_file}:{event.packet.log_pos} "
                f"could not be decoded ({exc.__class__.__name__}: {exc})",
                remedy=f"SET GLOBAL log_bin_compress=OFF, then re-snapshot: binlake snapshot --table {name}",
                table=name,
            ))
            return
        if decoded is not None:
            self.rows_event(decoded)

    # -- statements -------------------------------------------------------------------------

    def query(self, statement: str, schema: str, end_pos: int, event_time: int) -> None:
        control = transaction_control(statement)
        if control is None:
            self.statement(statement, schema)
            if not self.begun:
                self.commit(end_pos, event_time)  # a standalone statement is its own group
            return
        kind = control.kind
        if kind in ("begin", "xa_start"):
            self.open().xa = control.xid
            self.begun = True
        elif kind == "commit":
            self.commit(end_pos, event_time)
        elif kind == "savepoint":
            self.open().savepoint(control.name)
        elif kind == "release":
            self.open().release(control.name)
        elif kind in ("rollback_to", "rollback"):
            transaction = self.open()
            engines = self.table_engines() if not transaction.empty else {}
            kind_of = lambda name: engines.get(name, "unknown")  # noqa: E731
            if kind == "rollback":
                unknown = transaction.rollback(kind_of)
            else:
                unknown = transaction.rollback_to(control.name, kind_of)
            for name in unknown:
                self.stop(name, UnreadableEventError(
                    f"a partial rollback ({statement[:80]}) touched the table, whose storage engine binlake "
                    "does not know to be transactional or not",
                    remedy=f"use InnoDB (or MyISAM/Aria) for the table, then re-snapshot: "
                    f"binlake snapshot --table {name}",
                    table=name,
                ))
            if kind == "rollback":
                self.commit(end_pos, event_time)  # what persisted (non-transactional tables) applies
        elif kind == "xa_end":
            pass  # the branch's rows are complete; XA PREPARE (or a one-phase commit) follows
        elif kind == "xa_prepare":
            self.xa_prepare(control.xid, end_pos)
        elif kind in ("xa_commit", "xa_rollback"):
            if control.one_phase and self.transaction is not None and not self.transaction.empty:
                self.commit(end_pos, event_time)  # MySQL may log a one-phase commit as its statement
                return
            self.xa_resolve(control.xid, commit=kind == "xa_commit", end_pos=end_pos, event_time=event_time)

    def statement(self, statement: str, schema: str) -> None:
        """A statement that is not transaction control: what it does to followed tables decides."""
        for effect in table_effects(statement, schema, self.by_name):
            name = effect.table
            if name not in self.by_name or not self.applies_to(name):
                continue
            if self.prepared.holding(name) is not None and effect.kind != "none":
                # A prepared XA branch holds the table's locks, so its DDL cannot run before the branch
                # ends; should one come anyway the table stops rather than lose the branch's rows.
                self.stop(name, SchemaChangeError(
                    f"a statement changed the table while an XA transaction on it was prepared: {statement[:120]}",
                    remedy=f"re-snapshot the table: binlake snapshot --table {name}", table=name,
                ))
                continue
            if effect.kind == "truncate":
                self.open().changes_for(name).truncate()
            elif effect.kind == "schema":
                self.altered.setdefault(name, statement)
            elif effect.kind == "stop":
                self.stop(name, SchemaChangeError(effect.cause, remedy=effect.remedy, table=name))

    # -- XA ---------------------------------------------------------------------------------

    def xa_prepare(self, xid: XaId | None, end_pos: int) -> None:
        """XA PREPARE ends the branch's event group; its rows wait for the XA COMMIT."""
        transaction = self.open()
        xid = xid or transaction.xa or XaId(b"")
        self.prepared.prepare(transaction, xid)
        self.anchored = True
        end = BinlogPosition(self.current_file, end_pos, self.gtid, self.identity)
        # Tables without rows in the branch may move past it; those with rows are held (see `finish`).
        self.result.end = end
        self.end_group(end)

    def xa_resolve(self, xid: XaId | None, *, commit: bool, end_pos: int, event_time: int) -> None:
        prepared = self.prepared.resolve(xid) if xid is not None else None
        if prepared is None:
            # Its PREPARE lies before the read: no followed table still waits for it (a table's offset
            # never moves past an unresolved PREPARE of its rows, and a snapshot starts before one).
            self.commit(end_pos, event_time, {}, rows=0)
            return
        if commit:
            self.commit(end_pos, event_time, prepared.changes, rows=prepared.row_changes, start=prepared.start,
                        gtid=prepared.gtid)
        else:
            self.commit(end_pos, event_time, {}, rows=0)

    # -- engines ----------------------------------------------------------------------------

    def table_engines(self) -> dict[str, Transactional]:
        """Each followed table's engine kind, asked once per read (only when a rollback is logged)."""
        if self.engines is None:
            refs = [cursor.schema.table for cursor in self.by_name.values()]
            placeholders = ", ".join(["(%s, %s)"] * len(refs))
            arguments = [part for ref in refs for part in (ref.database, ref.table)]
            with source_connection(self.source) as connection:
                rows = query(connection, "SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE FROM information_schema.TABLES "
                             f"WHERE (TABLE_SCHEMA, TABLE_NAME) IN ({placeholders})", arguments)
            self.engines = {f"{row[0]}.{row[1]}": engine_kind(row[2]) for row in rows}
        return self.engines

    # -- the end ----------------------------------------------------------------------------

    def finish(self) -> None:
        """Tables with rows in a branch still prepared keep their offset before its PREPARE."""
        result = self.result
        for prepared in self.prepared.by_xid.values():
            for name in prepared.changes:
                if name not in self.by_name or self.behind(name, prepared.start, prepared.gtid):
                    continue
                held = min(result.held.get(name, prepared.start), prepared.start, key=_sort_key)
                failure = result.table_errors.get(name)
                if failure is not None:
                    if held < failure.position:
                        result.table_errors[name] = TableFailure(failure.error, held)
                elif name not in result.schema_changes:
                    result.held[name] = held


@dataclass(frozen=True)
class _SpillPlan:
    """Which tables a read spills to Parquet (cdc_lib.changes.spill), past how many row images, and where."""

    tables: frozenset[str] = frozenset()
    limit: int = BatchConfig.max_buffered_changes
    root: Path = field(default_factory=default_spill_root)


class _SpillNeeded(Exception):  # noqa: N818 - a signal to read_batch, never raised out of it
    def __init__(self, table: str) -> None:
        super().__init__(table)
        self.table = table


def read_batch(
    source: SourceConfig,
    cursors: list[TableCursor],
    batch: BatchConfig,
    *,
    server: ServerIdentity | None = None,
    progress: Callable[[], None] | None = None,
) -> BatchRead:
    """Read committed transactions past the smallest table offset; see the module docstring.

    `progress` is called now and then while events arrive (the lease's heartbeat renews only while they do).
    A binlog connection silent for `source.network_timeout_seconds` ends the read; it is read once more from
    its start (a transaction boundary: nothing of it was applied) on new connections, and a second silence
    raises `SilentConnectionError` (retryable).

    `server` is the identity of the server connected to. When some offset was written on another
    server, the read starts from the earliest GTID state of the tables (MariaDB) and each
    transaction goes to the tables whose GTID state does not contain it yet; the positions it
    reports are offsets on `server`, once the first transaction fixed where the read stands.

    When a table's changes outgrow `batch.max_buffered_changes` row images, the read starts again from
    its start with that table spilled to Parquet (cdc_lib.changes.spill): re-reading at most that many changes
    buys a log that starts with the batch, so nothing held in memory has to be converted.
    """
    root = Path(batch.spill_path) if batch.spill_path else default_spill_root()
    spilled: frozenset[str] = frozenset()
    silences = 0
    while True:
        plan = _SpillPlan(spilled, batch.max_buffered_changes, root)
        try:
            return _read_once(source, cursors, batch, server, plan, progress)
        except StreamSilent as silent:
            silences += 1
            if silences > _SILENT_RETRIES:
                raise SilentConnectionError(
                    f"the binlog connection to {source.host}:{source.port} stayed silent for {silent.seconds}s "
                    f"(source.network_timeout_seconds), {silences} times in a row; nothing of this batch was applied",
                    remedy=SILENT_REMEDY,
                ) from None
            log.warning("the binlog connection to %s:%s was silent for %ss; reading the batch again from its start "
                        "on a new connection", source.host, source.port, silent.seconds)
            end_silent_session(source, silent)
        except _SpillNeeded as needed:
            log.info("%s: more than %d changes in one batch; reading the batch again with them spilled to %s",
                     needed.table, batch.max_buffered_changes, root)
            spilled = spilled | {needed.table}


#: A silent binlog connection is read again from the batch start this many times before the run stops.
_SILENT_RETRIES = 1
#: `progress` is called once per this many events plus one (a mask: cheaper than a clock per event).
_PROGRESS_EVERY = 255


def _read_once(
    source: SourceConfig,
    cursors: list[TableCursor],
    batch: BatchConfig,
    server: ServerIdentity | None,
    plan: _SpillPlan,
    progress: Callable[[], None] | None = None,
) -> BatchRead:
    read = _Read(source, cursors, server, plan)
    result = read.result
    failpoint("before_binlog_stream")
    stream = open_stream(
        source, read.start, events=None, tables=[cursor.schema.table for cursor in cursors],
        gtid_state=read.start_state, server=server,
    )
    started = time.monotonic()
    try:
        for event in stream:
            result.events_read += 1
            if progress is not None and not result.events_read & _PROGRESS_EVERY:
                progress()
            code = event.event_type
            kind = handling_of(code, event.packet.flags)
            handling = kind.handling
            if handling == "rows":
                if code in COMPRESSED_ROWS:
                    read.compressed_rows(stream, event)
                else:
                    read.rows_event(event)
                continue
            if handling == "rotate":
                read.current_file = event.next_binlog
                if read.transaction is None and not read.begun and read.anchored:
                    # Between transactions a rotation is a boundary too: idle tables follow it.
                    read.boundary = BinlogPosition(read.current_file, event.position, read.gtid, read.identity)
                    if read.boundary > result.end or not result.end.written_on(read.identity):
                        result.end = read.boundary
                continue
            if handling == "gtid":
                read.gtid_event(event)
                continue
            if handling in ("harmless", "context"):
                if code not in _LIBRARY_TYPES:
                    _log_once(code, kind.why or kind.name)
                continue
            if handling == "xid":
                read.commit(event.packet.log_pos, event.timestamp)
            elif handling == "xa_prepare":
                if event.one_phase:
                    read.commit(event.packet.log_pos, event.timestamp)
                else:
                    xid = XaId(event.xid_gtrid, event.xid_bqual, event.xid_format_id)
                    read.xa_prepare(xid, event.packet.log_pos)
            elif handling == "query":
                if code == QUERY_COMPRESSED_EVENT:
                    try:
                        decoded = uncompressed_query(raw_event(event, checksum=stream_setting(stream, "use_checksum")))
                    except Exception as exc:  # noqa: BLE001 - an unreadable statement may touch any table
                        read.stop_all(
                            f"a compressed statement (log_bin_compress) at {read.current_file}:{event.packet.log_pos} "
                            f"could not be decoded ({exc.__class__.__name__}: {exc})",
                            "SET GLOBAL log_bin_compress=OFF, then re-snapshot the tables: binlake snapshot",
                        )
                        if not read.begun:
                            read.commit(event.packet.log_pos, event.timestamp)
                        continue
                    statement, schema = decoded.statement, decoded.schema
                else:
                    statement, schema = query_text(event.query), query_text(event.schema)
                read.query(statement, schema, event.packet.log_pos, event.timestamp)
            elif handling == "stop_table":
                _stop_by_table_id(read, stream, event, kind)
                continue
            else:  # stop_all
                remedy = ("SET GLOBAL binlog_transaction_compression=OFF, then re-snapshot the tables: binlake snapshot"
                          if code == 40 else "re-snapshot the tables: binlake snapshot --table db.t")
                read.stop_all(f"the binlog holds a {kind.name} event at {read.current_file}:{event.packet.log_pos} "
                              f"({kind.why}), which binlake cannot turn into row changes", remedy)
                continue
            if read.transaction is None and (
                result.row_changes >= batch.max_events or time.monotonic() - started >= batch.max_seconds
            ):
                # While an XA branch is prepared, the tables with rows in it stay before its PREPARE and the
                # next read starts there again: so this read goes on to the binlog end, or reads of the same
                # size would replay the same stretch forever. Changes fold per key, so memory stays bounded.
                if not read.prepared.by_xid:
                    break
        else:
            result.reached_end = True
            if read.transaction is None and not read.begun and read.anchored:
                # Trailing non-transaction events (a new file's header, checkpoints) are passed too.
                tail = BinlogPosition(stream.log_file or read.current_file, int(stream.log_pos or 0), read.gtid,
                                      read.identity)
                if tail.file == read.current_file and tail > result.end:
                    result.end = tail
    except pymysql.MySQLError as exc:
        read.discard_spills()
        raise mysql_error(exc, source, ReadingBinlog(read.start, read.start_state)) from None
    except BaseException:
        read.discard_spills()
        raise
    finally:
        stream.close()
    read.finish()
    result.seconds = time.monotonic() - started
    return result


#: Types the library parses itself (its own harmless events are not worth a log line).
_LIBRARY_TYPES = frozenset({0, 1, 3, 5, 13, 14, 15, 17, 19, 27, 29, 35, 160, 161, 163, 164})


def stream_setting(stream: BinLogStreamReader, name: str) -> Any:
    """A private attribute of the stream (python-mysql-replication 1.0.17 keeps its settings name-mangled)."""
    return getattr(stream, f"_BinLogStreamReader__{name}")


def rebuilt_rows_event(stream: BinLogStreamReader, packet_bytes: bytes) -> Any:
    """The library's rows event for a rebuilt (decompressed) packet, read with the stream's own settings."""
    from pymysql.protocol import MysqlPacket
    from pymysqlreplication.packet import BinLogPacketWrapper

    wrapper = BinLogPacketWrapper(
        MysqlPacket(packet_bytes, stream._ctl_connection.encoding),
        stream.table_map,
        stream._ctl_connection,
        stream.mysql_version,
        stream_setting(stream, "use_checksum"),
        frozenset({WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent}),
        stream_setting(stream, "only_tables"),
        stream_setting(stream, "ignored_tables"),
        stream_setting(stream, "only_schemas"),
        stream_setting(stream, "ignored_schemas"),
        stream_setting(stream, "freeze_schema"),
        stream_setting(stream, "ignore_decode_errors"),
        False,  # the checksum bytes belong to the compressed event
        stream_setting(stream, "optional_meta_data"),
        False,
        stream_setting(stream, "use_column_name_cache"),
        stream_setting(stream, "post_header_lengths"),
    )
    return wrapper.event


def _stop_by_table_id(read: _Read, stream: BinLogStreamReader, event: Any, kind: EventType) -> None:
    table_id = getattr(event, "table_id", None)
    if table_id is None:
        raw = raw_event(event, checksum=stream_setting(stream, "use_checksum"))
        table_id = compressed_table_id(raw)
    table = stream.table_map.get(table_id)
    name = f"{table.schema}.{table.table}" if table is not None else None
    if name in read.decoders:
        read.stop(name, UnreadableEventError(
            f"the binlog holds a {kind.name} event for the table ({kind.why}), which binlake cannot apply exactly",
            remedy="log full row images (binlog_row_image=FULL, binlog_row_value_options='' on MySQL), then "
            f"re-snapshot: binlake snapshot --table {name}",
            table=name,
        ))


def _decode_error(name: str, event: Any, exc: Exception, boundary: BinlogPosition) -> RowDecodeError:
    position = f"{boundary.file}:{getattr(event.packet, 'log_pos', '?')}"
    return RowDecodeError(
        f"a row event of the table at {position} could not be decoded ({exc.__class__.__name__}: {str(exc)[:200]})",
        remedy=f"check the table's column definitions and data at the source, then re-snapshot: "
        f"binlake snapshot --table {name}",
        table=name,
    )


def fold_rows(event: Any, decoder: TableDecoder, changes: TableChanges) -> int:
    """Fold the event's rows into `changes`; returns how many row changes it carried."""
    images = decoder.fast.images(event)
    if images is not None:
        if decoder.temporal_keys:
            decoder.check_keys(images)
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


def _sort_key(position: BinlogPosition) -> tuple[int, str, int]:
    return position.sort_key


def _advance_gtid(state: str | None, gtid: str) -> str:
    """The GTID state after transaction `gtid`: per domain on MariaDB, a growing GTID set on MySQL."""
    if is_mariadb_state(state) and is_mariadb_state(gtid):
        return advance_state(state, gtid)
    from pymysqlreplication.gtid import Gtid, GtidSet

    try:
        return str(GtidSet(state) + Gtid(gtid)).replace("\n", "")
    except Exception:  # noqa: BLE001 - an unparsable set still leaves the transaction's own GTID
        return gtid


def query_text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value or "")


SUPERSEDED = "superseded"


def columns_after_ddl(
    source: SourceConfig, table: TableSchema, position: BinlogPosition, *, max_events: int = 1_000_000
) -> list[str] | str | None:
    """The table's column names right after a DDL, as the binlog itself records them.

    Returns the names from the next table-map event of the table; `SUPERSEDED` when another
    shape-changing (or stopping) DDL on the table comes first, which then decides; None when the
    binlog ends first (the server's current schema is then the one after the DDL).
    """
    from pymysqlreplication.row_event import TableMapEvent

    # Every event, so that a compressed DDL (log_bin_compress) is read too; on the server that wrote the
    # position, since a file of the same name elsewhere holds other events.
    stream = open_stream(source, position, events=None, tables=[table.table], server=position.server)
    name = table.table.name
    try:
        for seen, event in enumerate(stream):
            if seen >= max_events:
                break
            if isinstance(event, TableMapEvent):
                if f"{event.schema}.{event.table}" == name:
                    return [str(column.name) for column in event.columns]
                continue
            if isinstance(event, QueryEvent):
                statement, schema = query_text(event.query), query_text(event.schema)
            elif event.event_type == QUERY_COMPRESSED_EVENT:
                decoded = uncompressed_query(raw_event(event, checksum=stream_setting(stream, "use_checksum")))
                statement, schema = decoded.statement, decoded.schema
            else:
                continue
            effects = table_effects(statement, schema, (name,))
            # Only a later shape change (or a stop) decides instead of this DDL; a TRUNCATE or an index
            # change between the DDL and the next row leaves the shape this DDL made.
            if any(effect.kind in ("schema", "stop") for effect in effects):
                return SUPERSEDED
    except pymysql.MySQLError as exc:
        raise mysql_error(exc, source, ReadingBinlog(position)) from None
    finally:
        stream.close()
    return None


def before_prepared_xa(
    source: SourceConfig, connection: pymysql.connections.Connection, low: BinlogPosition, table: TableRef
) -> BinlogPosition:
    """A snapshot's low watermark, moved back before the PREPARE of any XA branch still prepared.

    A branch prepared before the low watermark and committed after it is in neither the snapshot (its
    rows are not committed when the snapshot reads) nor the binlog read from the watermark (only its
    XA COMMIT lies there). Starting before its PREPARE replays the stretch in between, which converges
    (full row images), and reads the branch's rows together with their commit.
    """
    try:
        recovered = query(connection, "XA RECOVER")
    except pymysql.MySQLError as exc:
        # MySQL needs XA_RECOVER_ADMIN for this; MariaDB lets the replication user list every branch. Without
        # the list, a branch prepared before the snapshot and committed after it would be missed silently.
        raise MissingGrantError(
            f"XA RECOVER failed ({error_message(exc) or exc}): binlake cannot see XA transactions "
            "prepared before the snapshot, whose rows would be missed",
            remedy="GRANT XA_RECOVER_ADMIN ON *.* TO the binlake user (MySQL), then snapshot again",
            table=table.name,
        ) from None
    wanted = set()
    for format_id, gtrid_length, _, data in recovered:
        raw = data if isinstance(data, bytes) else str(data).encode()
        wanted.add(XaId(raw[: int(gtrid_length)], raw[int(gtrid_length):], int(format_id)))
    if not wanted:
        return low
    from pymysqlreplication.event import GtidEvent, RotateEvent, XAPrepareEvent

    files = [name for name, _ in query(connection, "SHOW BINARY LOGS")]
    files = [name for name in files if BinlogPosition(name, 0) <= BinlogPosition(low.file, 0)]
    earliest: BinlogPosition | None = None
    # Newest file first: a branch still prepared is most likely recent; stop once every one is found.
    for file_name in reversed(files):
        found = _prepares_in(source, file_name, low, table, (MariadbGtidEvent, GtidEvent, XAPrepareEvent, RotateEvent))
        for xid, start in found.items():
            if xid in wanted:
                wanted.discard(xid)
                earliest = start if earliest is None or start < earliest else earliest
        if not wanted:
            break
    if wanted:
        # Prepared, but no PREPARE up to the low watermark in the binlog the server still has (purged, or
        # prepared in the instant after the watermark was read): its rows could be in neither the snapshot
        # nor the binlog read.
        names = ", ".join(sorted(repr(xid) for xid in wanted))[:300]
        raise TableError(
            f"XA transactions are prepared on the server whose PREPARE binlake cannot find in the binlog before "
            f"the snapshot's low watermark {low} ({names})",
            remedy="commit or roll back the prepared XA transactions that XA RECOVER lists, then snapshot again",
            table=table.name,
            retryable=True,
        )
    if earliest is None:
        return low
    gtid: str | None = None
    if is_mariadb_state(low.gtid) or low.gtid in (None, ""):
        try:
            value = query(connection, "SELECT BINLOG_GTID_POS(%s, %s)", (earliest.file, earliest.pos))[0][0]
            gtid = None if value is None else str(value)
        except pymysql.MySQLError:
            gtid = None
    moved = BinlogPosition(earliest.file, earliest.pos, gtid, low.server)
    log.info("%s: snapshot low watermark moved back from %s to %s, before a prepared XA transaction", table.name,
             low, moved)
    return moved


def _prepares_in(
    source: SourceConfig, file_name: str, low: BinlogPosition, table: TableRef, events: tuple[type, ...]
) -> dict[XaId, BinlogPosition]:
    """XA PREPAREs in one binlog file (up to `low`), each with the start of its event group."""
    from pymysqlreplication.event import XAPrepareEvent

    stream = open_stream(source, BinlogPosition(file_name, 4), events=list(events), tables=[table], server=low.server)
    found: dict[XaId, BinlogPosition] = {}
    group_start: int | None = None
    try:
        for event in stream:
            if type(event).__name__ == "RotateEvent":
                if event.next_binlog != file_name:
                    break
                continue
            end = int(event.packet.log_pos)
            if file_name == low.file and end > low.pos:
                break
            if isinstance(event, XAPrepareEvent):
                if not event.one_phase and group_start is not None:
                    found[XaId(event.xid_gtrid, event.xid_bqual, event.xid_format_id)] = BinlogPosition(
                        file_name, group_start
                    )
            else:  # a GTID event starts a group
                group_start = end - int(event.packet.event_size)
    except pymysql.MySQLError as exc:
        raise mysql_error(exc, source, ReadingBinlog(BinlogPosition(file_name, 4))) from None
    finally:
        stream.close()
    return found
