"""Every binlog event type the reader can meet, and what it does with each (the reader's closed world).

The reader asks the server for every event (no `only_events` filter), so nothing is dropped unseen:
each event's type code is looked up in `EVENT_TYPES`. A code missing there gets `handling_of`'s
verdict: an event flagged LOG_EVENT_IGNORABLE_F (which servers set on events a replica that does not
know them may skip) is logged once and passed; any other unknown event stops every followed table
the read covers, as a replica stops on an event it cannot apply.

MariaDB's compressed events (`log_bin_compress=ON`) are decoded here: the QUERY_COMPRESSED statement
text, and compressed rows events are rebuilt as the plain rows event they stand for, which the
library and the fast decoder then read like any other. MySQL's compressed transactions
(`binlog_transaction_compression=ON`) are opened by `cdc_lib.binlog.payload`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any, Literal

#: rows: row images of one table, applied · gtid: starts an event group · xid: commits one ·
#: xa_prepare: ends an XA PREPARE group (or commits a one-phase XA) · query: a statement, read by
#: transaction control or `ddl.table_effects` · rotate: the next binlog file · harmless: cannot change
#: a row (headers, context for the next statement, annotations, heartbeats) · stop_table: changes rows
#: of the table its table id names in a way binlake cannot apply · stop_all: may change rows of any
#: table and cannot be read · context: the library keeps it (table maps) · payload: a MySQL compressed
#: transaction, whose events are decompressed and read as if they stood in the binlog themselves.
Handling = Literal["rows", "gtid", "xid", "xa_prepare", "query", "rotate", "harmless", "stop_table", "stop_all",
                   "context", "payload"]


@dataclass(frozen=True)
class EventType:
    code: int
    name: str
    handling: Handling
    why: str = ""


_TYPES = (
    EventType(0, "UNKNOWN_EVENT", "harmless", "never written"),
    EventType(1, "START_EVENT_V3", "harmless", "file header of pre-5.0 servers"),
    EventType(2, "QUERY_EVENT", "query"),
    EventType(3, "STOP_EVENT", "harmless", "the server stopped; the next file follows"),
    EventType(4, "ROTATE_EVENT", "rotate"),
    EventType(5, "INTVAR_EVENT", "harmless", "AUTO_INCREMENT context of the next statement, which is read itself"),
    EventType(6, "LOAD_EVENT", "stop_all", "LOAD DATA of 3.23-era servers: rows without row images"),
    EventType(7, "SLAVE_EVENT", "harmless", "never written"),
    EventType(8, "CREATE_FILE_EVENT", "stop_all", "LOAD DATA of 4.0-era servers"),
    EventType(9, "APPEND_BLOCK_EVENT", "harmless", "file data for a later LOAD statement, which is read itself"),
    EventType(10, "EXEC_LOAD_EVENT", "stop_all", "LOAD DATA of 4.0-era servers"),
    EventType(11, "DELETE_FILE_EVENT", "harmless", "drops a LOAD DATA file"),
    EventType(12, "NEW_LOAD_EVENT", "stop_all", "LOAD DATA of 4.x servers: rows without row images"),
    EventType(13, "RAND_EVENT", "harmless", "RAND() seed of the next statement"),
    EventType(14, "USER_VAR_EVENT", "harmless", "user variable of the next statement"),
    EventType(15, "FORMAT_DESCRIPTION_EVENT", "harmless", "file header"),
    EventType(16, "XID_EVENT", "xid"),
    EventType(17, "BEGIN_LOAD_QUERY_EVENT", "harmless", "file data for a later LOAD statement"),
    EventType(18, "EXECUTE_LOAD_QUERY_EVENT", "query", "statement-based LOAD DATA: its statement is read"),
    EventType(19, "TABLE_MAP_EVENT", "context"),
    EventType(20, "PRE_GA_WRITE_ROWS_EVENT", "stop_table", "5.1 beta rows format"),
    EventType(21, "PRE_GA_UPDATE_ROWS_EVENT", "stop_table", "5.1 beta rows format"),
    EventType(22, "PRE_GA_DELETE_ROWS_EVENT", "stop_table", "5.1 beta rows format"),
    EventType(23, "WRITE_ROWS_EVENT_V1", "rows"),
    EventType(24, "UPDATE_ROWS_EVENT_V1", "rows"),
    EventType(25, "DELETE_ROWS_EVENT_V1", "rows"),
    EventType(26, "INCIDENT_EVENT", "stop_all", "the server lost events (e.g. LOST_EVENTS): the binlog is incomplete"),
    EventType(27, "HEARTBEAT_LOG_EVENT", "harmless", "keep-alive"),
    EventType(28, "IGNORABLE_LOG_EVENT", "harmless", "flagged ignorable"),
    EventType(29, "ROWS_QUERY_LOG_EVENT", "harmless", "the statement behind the next rows events (annotation)"),
    EventType(30, "WRITE_ROWS_EVENT_V2", "rows"),
    EventType(31, "UPDATE_ROWS_EVENT_V2", "rows"),
    EventType(32, "DELETE_ROWS_EVENT_V2", "rows"),
    EventType(33, "GTID_LOG_EVENT", "gtid"),
    EventType(34, "ANONYMOUS_GTID_LOG_EVENT", "gtid", "MySQL with gtid_mode=OFF: starts a group, no GTID"),
    EventType(35, "PREVIOUS_GTIDS_LOG_EVENT", "harmless", "file header"),
    EventType(36, "TRANSACTION_CONTEXT_EVENT", "harmless", "group replication certification data"),
    EventType(37, "VIEW_CHANGE_EVENT", "harmless", "group replication membership"),
    EventType(38, "XA_PREPARE_LOG_EVENT", "xa_prepare"),
    EventType(39, "PARTIAL_UPDATE_ROWS_EVENT", "rows",
              "binlog_row_value_options=PARTIAL_JSON: JSON diffs applied to the FULL before image (json_diff)"),
    EventType(40, "TRANSACTION_PAYLOAD_EVENT", "payload",
              "binlog_transaction_compression=ON: a zstd-compressed group, decompressed and its events read"),
    EventType(41, "HEARTBEAT_LOG_EVENT_V2", "harmless", "keep-alive"),
    EventType(42, "GTID_TAGGED_LOG_EVENT", "gtid", "MySQL 8.3+ tagged GTID: starts a group"),
    EventType(160, "ANNOTATE_ROWS_EVENT", "harmless", "MariaDB: the statement behind the next rows events"),
    EventType(161, "BINLOG_CHECKPOINT_EVENT", "harmless", "MariaDB: crash-recovery checkpoint"),
    EventType(162, "GTID_EVENT", "gtid", "MariaDB GTID (its flags mark standalone, XA prepare and XA completion)"),
    EventType(163, "GTID_LIST_EVENT", "harmless", "MariaDB: file header with the GTID state"),
    EventType(164, "START_ENCRYPTION_EVENT", "harmless", "MariaDB: the server decrypts before sending"),
    EventType(165, "QUERY_COMPRESSED_EVENT", "query", "MariaDB log_bin_compress: decoded, then read as a QUERY"),
    EventType(166, "WRITE_ROWS_COMPRESSED_EVENT_V1", "rows", "MariaDB log_bin_compress: decoded"),
    EventType(167, "UPDATE_ROWS_COMPRESSED_EVENT_V1", "rows", "MariaDB log_bin_compress: decoded"),
    EventType(168, "DELETE_ROWS_COMPRESSED_EVENT_V1", "rows", "MariaDB log_bin_compress: decoded"),
    EventType(169, "WRITE_ROWS_COMPRESSED_EVENT", "rows", "MariaDB log_bin_compress (v2 rows): decoded"),
    EventType(170, "UPDATE_ROWS_COMPRESSED_EVENT", "rows", "MariaDB log_bin_compress (v2 rows): decoded"),
    EventType(171, "DELETE_ROWS_COMPRESSED_EVENT", "rows", "MariaDB log_bin_compress (v2 rows): decoded"),
)

EVENT_TYPES: dict[int, EventType] = {event_type.code: event_type for event_type in _TYPES}

#: Header flag of events a server that does not know them may skip (MySQL and MariaDB alike).
LOG_EVENT_IGNORABLE_F = 0x80

QUERY_COMPRESSED_EVENT = 165
#: A compressed rows event's type → the plain rows event it stands for.
COMPRESSED_ROWS = {166: 23, 167: 24, 168: 25, 169: 30, 170: 31, 171: 32}
_UPDATE_TYPES = frozenset({24, 31})
_V2_TYPES = frozenset({30, 31, 32})


def handling_of(code: int, flags: int) -> EventType:
    """What the reader does with an event of type `code` (header `flags`); see the module docstring."""
    known = EVENT_TYPES.get(code)
    if known is not None:
        return known
    if flags & LOG_EVENT_IGNORABLE_F:
        return EventType(code, f"event type {code}", "harmless", "unknown, flagged ignorable by the server")
    return EventType(code, f"event type {code}", "stop_all", "unknown to binlake, and not flagged ignorable")


# -- MariaDB compressed events ------------------------------------------------------------------


class CompressedEventError(ValueError):
    """A compressed event whose bytes do not decode."""


def _uncompress(data: bytes, offset: int, end: int) -> bytes:
    """MariaDB's compressed block: a header byte 0x8N (N = bytes of length), the length (big-endian), zlib."""
    header = data[offset]
    if header & 0xE0 != 0x80:
        raise CompressedEventError(f"bad compression header byte 0x{header:02x}")
    length_bytes = header & 0x07
    if not 1 <= length_bytes <= 4:
        raise CompressedEventError(f"bad length-of-length {length_bytes}")
    expected = int.from_bytes(data[offset + 1: offset + 1 + length_bytes], "big")
    try:
        plain = zlib.decompress(data[offset + 1 + length_bytes: end])
    except zlib.error as exc:
        raise CompressedEventError(f"zlib: {exc}") from None
    if len(plain) != expected:
        raise CompressedEventError(f"uncompressed {len(plain)} bytes, the header says {expected}")
    return plain


def _packed_int(data: bytes, offset: int) -> tuple[int, int]:
    first = data[offset]
    if first < 251:
        return first, offset + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None:
        raise CompressedEventError(f"bad packed integer 0x{first:02x}")
    return int.from_bytes(data[offset + 1: offset + 1 + width], "little"), offset + 1 + width


@dataclass(frozen=True)
class RawEvent:
    """An event's full packet (OK byte, 19-byte header, body, checksum) as the server sent it."""

    data: bytes
    checksum: int  # bytes of checksum at the end (4 with CRC32, else 0)

    @property
    def event_type(self) -> int:
        return self.data[5]

    @property
    def body_start(self) -> int:
        return 20

    @property
    def body_end(self) -> int:
        return len(self.data) - self.checksum


def raw_event(event: Any, *, checksum: bool) -> RawEvent:
    """The bytes of an event the library left unparsed (NotImplementedEvent keeps its packet)."""
    return RawEvent(bytes(event.packet.packet.get_all_data()), 4 if checksum else 0)


def compressed_table_id(raw: RawEvent) -> int:
    """The table id in a compressed rows event's (uncompressed) post-header."""
    start = raw.body_start
    return int.from_bytes(raw.data[start: start + 6], "little")


def uncompressed_rows_packet(raw: RawEvent) -> bytes:
    """The packet of the plain rows event a MariaDB compressed rows event stands for.

    Post-header (table id, flags, v2 extra data), column count and column bitmaps are stored as is;
    only the row images are compressed.
    """
    plain_type = COMPRESSED_ROWS.get(raw.event_type)
    if plain_type is None:
        raise CompressedEventError(f"event type {raw.event_type} is not a compressed rows event")
    data, offset, end = raw.data, raw.body_start + 8, raw.body_end
    if plain_type in _V2_TYPES:
        extra = int.from_bytes(data[offset: offset + 2], "little")
        if extra < 2:
            raise CompressedEventError(f"bad v2 extra-data length {extra}")
        offset += extra
    columns, offset = _packed_int(data, offset)
    bitmap = (columns + 7) // 8
    offset += bitmap * (2 if plain_type in _UPDATE_TYPES else 1)
    if offset >= end:
        raise CompressedEventError("the event ends before its row images")
    rows = _uncompress(data, offset, end)
    body = data[raw.body_start: offset] + rows
    size = 19 + len(body) + raw.checksum
    # Header: OK byte, timestamp, type, server id, event size, next position, flags.
    header = data[:5] + bytes([plain_type]) + data[6:10] + struct.pack("<I", size) + data[14:20]
    # The checksum bytes are kept only for the length; the library checks them only when asked to.
    return header + body + data[raw.body_end:]


@dataclass(frozen=True)
class CompressedQuery:
    schema: str
    statement: str


def uncompressed_query(raw: RawEvent, *, post_header: int = 13) -> CompressedQuery:
    """The default schema and statement of a MariaDB QUERY_COMPRESSED event."""
    data, offset, end = raw.data, raw.body_start, raw.body_end
    schema_length = data[offset + 8]
    status_length = int.from_bytes(data[offset + 11: offset + 13], "little")
    offset += post_header + status_length
    schema = data[offset: offset + schema_length].decode("utf-8", errors="replace")
    offset += schema_length + 1  # the schema name ends with a NUL byte
    statement = _uncompress(data, offset, end).decode("utf-8", errors="replace")
    return CompressedQuery(schema, statement)


def query_text(value: Any) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value or "")
