"""Short reads of the binlog that answer one question each, apart from the batch read.

`columns_after_ddl`: a table's columns right after a DDL, as the binlog's next table map records them (the
schema-change handling's evidence). `before_prepared_xa`: a snapshot's low watermark moved back before the
PREPARE of an XA branch still prepared, so the branch's rows are read with their commit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pymysql
from pymysqlreplication.event import MariadbGtidEvent, QueryEvent

from cdc_lib.binlog.column_positions import unnamed
from cdc_lib.binlog.ddl import table_effects
from cdc_lib.binlog.event_types import QUERY_COMPRESSED_EVENT, query_text, raw_event, uncompressed_query
from cdc_lib.binlog.payload import PayloadError
from cdc_lib.binlog.replication_library import stream_setting
from cdc_lib.binlog.stream import PayloadsOpened, open_stream
from cdc_lib.binlog.transaction import XaId
from cdc_lib.config.model import SourceConfig
from cdc_lib.errors import MissingGrantError, TableError, UnreadableEventError
from cdc_lib.model.positions import BinlogPosition, is_mariadb_state
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.source.mysql_errors import ReadingBinlog, error_message, mysql_error
from cdc_lib.source.server import query

log = logging.getLogger("binlake")


SUPERSEDED = "superseded"


@dataclass(frozen=True)
class UnnamedColumns:
    """A table map without column names (binlog_row_metadata=MINIMAL): its columns, to be matched by position."""

    columns: tuple[Any, ...]


def columns_after_ddl(
    source: SourceConfig, table: TableSchema, position: BinlogPosition, *, max_payload_event_bytes: int,
    max_events: int = 1_000_000,
) -> list[str] | UnnamedColumns | str | None:
    """The table's column names right after a DDL, as the binlog itself records them.

    Returns the names from the next table-map event of the table (its columns as `UnnamedColumns` when it names
    none); `SUPERSEDED` when another shape-changing (or stopping) DDL on the table comes first, which then
    decides; None when the binlog ends first (the server's current schema is then the one after the DDL).
    """
    from pymysqlreplication.row_event import TableMapEvent

    # Every event, so that a compressed DDL (log_bin_compress) is read too; on the server that wrote the
    # position, since a file of the same name elsewhere holds other events.
    stream = open_stream(source, position, events=None, tables=[table.table], server=position.server)
    name = table.table.name
    # A MySQL compressed transaction holds the table maps of its rows: opened, not passed over.
    # The stream's own file name (it follows rotates), so that an error names the file the event is in.
    events = PayloadsOpened(stream, max_payload_event_bytes,
                            current_file=lambda: str(stream.log_file or position.file))
    try:
        for seen, event in enumerate(events):
            if seen >= max_events:
                break
            if isinstance(event, TableMapEvent):
                if f"{event.schema}.{event.table}" == name:
                    if unnamed(event.columns):
                        return UnnamedColumns(tuple(event.columns))
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
    except PayloadError as exc:
        raise UnreadableEventError(
            f"the table's columns after a DDL cannot be read from the binlog: a compressed transaction after "
            f"{position} could not be opened ({exc})",
            remedy="SET GLOBAL binlog_transaction_compression=OFF (MySQL then writes transactions uncompressed), "
            f"then re-snapshot the table: binlake snapshot --table {name}",
            table=name,
        ) from None
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
