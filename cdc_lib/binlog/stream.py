"""Reading one micro-batch from the binlog.

The binlog is read once, from the smallest table offset, and each committed
transaction is handed to the tables whose own offset it lies past. A batch
ends only at a transaction boundary (XID, COMMIT, or a DDL statement), after
`max_events` row changes or `max_seconds`, or at the end of the binlog.

This module holds the replication connection and the loop over its events; what each event does to the
batch is `cdc_lib.binlog.batch.BinlogRead`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader

from cdc_lib.binlog.batch import BatchRead, BinlogRead, SpillNeeded, SpillPlan, TableCursor
from cdc_lib.binlog.event_types import (
    COMPRESSED_ROWS,
    QUERY_COMPRESSED_EVENT,
    EventType,
    compressed_table_id,
    handling_of,
    query_text,
    raw_event,
    uncompressed_query,
)
from cdc_lib.binlog.filter_window import FilterWindow
from cdc_lib.binlog.gtid_events import GTID_TAGGED_LOG_EVENT, tagged_gtid
from cdc_lib.binlog.payload import Oversized, PayloadError, inner_events
from cdc_lib.binlog.replication_library import (
    GtidDumpRequest,
    caching_table_maps,
    check_version,
    payload_event,
    stream_setting,
)
from cdc_lib.binlog.transaction import XaId
from cdc_lib.changes.spill import default_spill_root
from cdc_lib.common.faults import failpoint
from cdc_lib.config.model import BatchConfig, SourceConfig
from cdc_lib.errors import SilentConnectionError, UnreadableEventError
from cdc_lib.model.gtid_sets import GtidSetError, MysqlGtidSet
from cdc_lib.model.positions import BinlogPosition, ServerIdentity
from cdc_lib.model.tables import TableRef
from cdc_lib.source.mysql_errors import ReadingBinlog, mysql_error
from cdc_lib.source.server import SILENT_REMEDY, connection_settings, identity_checked
from cdc_lib.source.silence import StreamSilent, end_silent_session, heartbeat_period, silence_detecting

log = logging.getLogger("binlake")


def open_stream(
    source: SourceConfig,
    start: BinlogPosition,
    *,
    events: list[type] | None,
    tables: list[TableRef],
    gtid_state: str | None = None,
    server: ServerIdentity | None = None,
) -> BinLogStreamReader:
    """A non-blocking binlog dump from `start` (or from a GTID state) to the current end.

    A GTID state is sent as the server's flavour asks: to MariaDB as `@slave_connect_state`, to MySQL (a
    server with a `server_uuid`) as the GTID set of a COM_BINLOG_DUMP_GTID, encoded by binlake so that tagged
    GTIDs go too (`replication_library.GtidDumpRequest`).

    `events=None` asks for every event, those the library cannot parse included (closed world).
    With `server` (the identity the control connection read), every connection the reader opens,
    reconnects included, must reach that same server (`source.identity_checked`).
    """
    check_version()
    mysql_gtid = gtid_state is not None and server is not None and server.server_uuid is not None
    checked = pymysql.connect if server is None else identity_checked(
        server, role="binlog", host=f"{source.host}:{source.port}"
    )
    return BinLogStreamReader(
        pymysql_wrapper=caching_table_maps(silence_detecting(checked)),
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
        is_mariadb=gtid_state is not None and not mysql_gtid,
        auto_position=GtidDumpRequest(MysqlGtidSet.parse(gtid_state).encode()) if mysql_gtid else gtid_state,
        only_events=events,
        filter_non_implemented_events=events is not None,
        only_schemas=sorted({table.database for table in tables}),
        only_tables=sorted({table.table for table in tables}),
        enable_logging=False,
    )


#: Event types already warned about in this process (an unknown harmless type is logged once).
_logged_types: set[int] = set()


def _log_once(code: int, text: str) -> None:
    if code not in _logged_types:
        _logged_types.add(code)
        log.warning("binlog event type %d: %s (passed; logged once)", code, text)


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
        plan = SpillPlan(spilled, batch.max_buffered_changes, root)
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
        except SpillNeeded as needed:
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
    plan: SpillPlan,
    progress: Callable[[], None] | None = None,
) -> BatchRead:
    read = BinlogRead(source, cursors, server, plan)
    result = read.result
    failpoint("before_binlog_stream")
    stream = open_stream(
        source, read.start, events=None, tables=[cursor.schema.table for cursor in cursors],
        gtid_state=read.start_state, server=server,
    )
    started = time.monotonic()
    payloads = PayloadsOpened(
        stream, batch.max_payload_event_bytes, current_file=lambda: read.current_file,
        # Events of the payload read before the failure may have been handed out: every table stops, so none of
        # them is applied.
        on_error=lambda where, exc: read.stop_all(
            f"the compressed transaction (binlog_transaction_compression) ending at {where} could not be "
            f"read ({exc})",
            "SET GLOBAL binlog_transaction_compression=OFF (MySQL then writes transactions uncompressed), then "
            "re-snapshot the tables: binlake snapshot",
        ),
        oversized=read.pass_oversized,
    )
    # A row filter comparing text: events are read a window ahead, so its comparisons go to the server once a window.
    window = None if read.answers is None else FilterWindow(payloads.events(), read, lambda: payloads.inside)
    try:
        for event in payloads.events() if window is None else window:
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
                if code == GTID_TAGGED_LOG_EVENT:
                    _tagged_gtid_event(read, stream, event)
                else:
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
                read.stop_all(f"the binlog holds a {kind.name} event at {read.current_file}:{event.packet.log_pos} "
                              f"({kind.why}), which binlake cannot turn into row changes",
                              "re-snapshot the tables: binlake snapshot --table db.t")
                continue
            inside = payloads.inside if window is None else window.inside
            if read.transaction is None and not inside and (
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
        reading = ReadingBinlog(read.start, read.start_state, tuple(sorted(read.by_name)))
        raise mysql_error(exc, source, reading) from None
    except BaseException:
        read.discard_spills()
        raise
    finally:
        stream.close()
        read.close()
    read.finish()
    result.seconds = time.monotonic() - started
    return result


def _tagged_gtid_event(read: BinlogRead, stream: BinLogStreamReader, event: Any) -> None:
    """A GTID_TAGGED event (MySQL 8.3+) opens its group with the tagged GTID binlake reads from its bytes."""
    raw = raw_event(event, checksum=stream_setting(stream, "use_checksum"))
    try:
        gtid = tagged_gtid(raw.data[raw.body_start:raw.body_end])
    except GtidSetError as exc:
        read.gtid_event(event)
        # Without its GTID the offsets' GTID sets would miss the transaction: a failover would replay it.
        read.stop_all(f"{exc.cause} at {read.current_file}:{event.packet.log_pos}", exc.remedy or "")
        return
    read.gtid_event(event, gtid)


class PayloadsOpened:
    """The stream's events, with each MySQL compressed transaction (TRANSACTION_PAYLOAD) replaced by its events.

    The inner events are parsed by the library as the stream parses its own (`replication_library.payload_event`)
    and carry the payload event's end as their log_pos (`payload.inner_events`), so a reader handles them exactly
    as the same transaction written uncompressed, and its commit lands at the payload's end. Every reader of the
    binlog goes through this (the sync's batches, the snapshot's window scan, the schema probe): a reader that
    iterated the stream itself would pass over the rows and table maps inside a payload without a word.

    A payload that cannot be opened raises `PayloadError` (with `where`), unless `on_error` takes it; an inner
    event beyond the bound raises `PayloadTooLargeError`, unless `oversized` takes it (`payload.Oversized`).
    """

    def __init__(
        self, stream: BinLogStreamReader, max_event_bytes: int, *, current_file: Callable[[], str],
        on_error: Callable[[str, PayloadError], None] | None = None, oversized: Oversized | None = None,
    ) -> None:
        self.stream, self.max_event_bytes = stream, max_event_bytes
        self.current_file, self.on_error, self.oversized = current_file, on_error, oversized
        #: True while a payload's events are handed out: a batch never ends inside one, since the offset after
        #: any of its events is the payload's end, past the events not read yet.
        self.inside = False

    def __iter__(self) -> Iterator[Any]:
        return self.events()

    def events(self) -> Iterator[Any]:
        for event in self.stream:
            if handling_of(event.event_type, event.packet.flags).handling != "payload":
                yield event
                continue
            self.inside = True
            try:
                yield from self._opened(event)
            finally:
                self.inside = False

    def _opened(self, event: Any) -> Iterator[Any]:
        end = event.packet.log_pos
        where = f"{self.current_file()}:{end}"
        raw = raw_event(event, checksum=stream_setting(self.stream, "use_checksum"))
        inners = inner_events(raw.data[raw.body_start:raw.body_end], end_pos=end,
                              max_event_bytes=self.max_event_bytes, where=where, oversized=self.oversized)
        try:
            # One event ahead: the payload's last event (its commit) is handed out only once the rest of the
            # payload has decoded and matched its header, and with `inside` cleared, so a batch may end there.
            current = next(inners, None)
            while current is not None:
                following = next(inners, None)
                if following is None:
                    self.inside = False
                decoded = payload_event(self.stream, current)
                if decoded is not None:
                    yield decoded
                current = following
        except PayloadError as exc:
            if self.on_error is None:
                raise
            self.on_error(where, exc)


#: Types the library parses itself (its own harmless events are not worth a log line).
_LIBRARY_TYPES = frozenset({0, 1, 3, 5, 13, 14, 15, 17, 19, 27, 29, 35, 160, 161, 163, 164})


def _stop_by_table_id(read: BinlogRead, stream: BinLogStreamReader, event: Any, kind: EventType) -> None:
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
