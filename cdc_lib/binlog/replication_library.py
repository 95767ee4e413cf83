"""python-mysql-replication's internals in one place: the private attributes binlake reads, and the version read.

binlake reaches past the library's public API where the API has no way in: a table map parsed once per
connection (the library's `TableMapEvent` constructor is replaced), the bytes of a rows event that
`row_decoder` decodes itself, the stream's name-mangled settings, a rows event rebuilt from a decompressed
packet, and the events inside a MySQL TRANSACTION_PAYLOAD parsed as the stream parses its own. None of that is
a contract: another release may rename or repurpose any of these attributes without a word, and rows would
then decode wrongly or not at all. So every reader refuses a version other than `VERIFIED_VERSION`
(`check_version`), and no other module touches the library's private attributes
(tests/unit/binlog/test_replication_library.py scans for it). Upgrading the library means re-reading each
function here against the new release's source, then moving `VERIFIED_VERSION` and the pin in pyproject.toml
together.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from pymysqlreplication import BinLogStreamReader, binlogstream
from pymysqlreplication.column import Column
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.event import BinLogEvent, PreviousGtidsEvent
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    PartialUpdateRowsEvent,
    TableMapEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from cdc_lib.binlog import json_binary
from cdc_lib.errors import BinlakeError
from cdc_lib.model.gtid_sets import GtidSetError, MysqlGtidSet
from cdc_lib.model.json_text import MySqlJson

#: The python-mysql-replication release whose private attributes this module was checked against.
VERIFIED_VERSION = "1.0.17"


class _MetadataAdviceFilter(logging.Filter):
    """Drops the library's warning, at each stream it opens, that binlog_row_metadata is not FULL.

    binlake checks the setting itself (`source.checks`) and reads MINIMAL table maps by position
    (`column_positions`), so the advice is wrong for binlake's users, and a follow mode that opens a stream per batch
    would repeat it at every batch.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return "BINLOG_ROW_METADATA = FULL" not in record.getMessage()


_library_log = logging.getLogger("pymysqlreplication")
if not any(isinstance(existing, _MetadataAdviceFilter) for existing in _library_log.filters):
    _library_log.addFilter(_MetadataAdviceFilter())

#: The library's distribution name (it is imported as `pymysqlreplication`).
DISTRIBUTION = "mysql-replication"


class ReplicationLibraryError(BinlakeError):
    """The installed python-mysql-replication is not the release binlake's binlog reader was checked against."""


@functools.cache
def installed_version() -> str | None:
    """The installed python-mysql-replication's version, or None when its metadata cannot be found."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def check_version() -> None:
    """Refuse to read the binlog through a library release whose private attributes were not checked."""
    installed = installed_version()
    if installed != VERIFIED_VERSION:
        raise ReplicationLibraryError(
            f"python-mysql-replication {installed or '(version unknown)'} is installed, but binlake reads private "
            f"attributes of {VERIFIED_VERSION} (cdc_lib/binlog/replication_library.py), which another release may "
            "change without notice",
            remedy=f"install the pinned release: pip install {DISTRIBUTION}=={VERIFIED_VERSION}",
        )


# -- the packets ---------------------------------------------------------------------------------


def unread_bytes(wrapper: Any) -> tuple[bytes, int] | None:
    """A packet's bytes and the offset the library has read them up to.

    None when the library pushed bytes back (its data buffer), so the offset is not where the unread bytes
    start, or when the packet does not keep its bytes as PyMySQL 1.x does.
    """
    if getattr(wrapper, "_BinLogPacketWrapper__data_buffer", b"?"):
        return None
    packet = wrapper.packet
    data, start = getattr(packet, "_data", None), getattr(packet, "_position", None)
    if not isinstance(data, bytes) or not isinstance(start, int):
        return None
    return data, start


def rows_decoded(event: Any) -> bool:
    """Whether the library has decoded a rows event's rows already (its packet is then past them)."""
    return getattr(event, "_RowsEvent__rows", None) is not None


# -- the table maps ------------------------------------------------------------------------------

#: The attribute of a reader's connection that holds its table maps by their bytes (`_table_map_init`).
_TABLE_MAPS = "_binlake_table_maps"
#: Distinct table maps kept per reader connection: a read sees one per followed table and table version.
TABLE_MAPS_KEPT = 4096
# The library's own constructor, kept once even if this module is imported again (a reload must not wrap ours).
parse_table_map = getattr(TableMapEvent, "_binlake_library_init", TableMapEvent.__init__)


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
        parse_table_map(self, from_packet, event_size, table_map, ctl_connection, **settings)
        if getattr(self, "_processed", True) and getattr(self, "columns", None):
            keep_unnamed_metadata(self)
        if cache is not None and key is not None and self._processed and len(cache) < TABLE_MAPS_KEPT:
            cache[key] = self
        return
    self.__dict__.update(parsed.__dict__)
    self.packet, self.table_map, self.timestamp = from_packet, table_map, from_packet.timestamp
    table_map[self.table_id] = self.table_obj


def _table_map_bytes(wrapper: Any, event_size: int) -> bytes | None:
    """The event's body (post-header and payload, no checksum), or None if the packet is not where it starts."""
    found = unread_bytes(wrapper)
    if found is None:
        return None
    data, start = found
    if start + event_size > len(data):
        return None
    return data[start:start + event_size]


def keep_unnamed_metadata(event: Any) -> None:
    """Keep a nameless table map's SIGNEDNESS and charset metadata on its columns, as a named one's are kept.

    binlog_row_metadata=MINIMAL (MySQL 8.0's and 8.4's default) logs signedness and charsets but no column names;
    python-mysql-replication parses them and then applies them only in the branch that has names, so an INT
    UNSIGNED column reads as signed (3230202323 as -1064764973) and text has no charset. Here each column gets
    `binlake_binlog_unsigned` (the SIGNEDNESS bit of a numeric column, None without that metadata), the
    collation the binlog names, and `binlake_binlog_name` (its COLUMN_NAME, when a FULL table map is read by a
    stream that ignores optional metadata); `row_decoder.prepare_columns` then names the columns from the table's
    schema by position and checks them against it (`column_positions`). A table map with names is left as the
    library made it.
    """
    from pymysqlreplication.row_event import find_charset

    columns = event.columns
    if any(getattr(column, "name", None) is not None for column in columns):
        return
    metadata = event.optional_metadata
    dbms = getattr(event, "dbms", "mysql")
    # The library counts YEAR among the numeric columns that have a SIGNEDNESS bit; MySQL's Table_map writer
    # does not (is_numeric_type), so with a YEAR column the bits after it cannot be placed: none are kept.
    years = any(column.type == FIELD_TYPE.YEAR for column in columns)
    signedness = list(metadata.unsigned_column_list or []) if not years else []
    # A table map written with FULL metadata read on a stream that found the server at MINIMAL (the library decides
    # once, from the server's current setting) still carries its names: kept to check the mapping by.
    names = list(metadata.column_name_list or [])
    character = iter(metadata.charset_collation_list or [])
    labels = iter(metadata.enum_and_set_collation_list or [])
    for index, column in enumerate(columns):
        numeric = event._is_numeric_column(column.type)
        column.binlake_binlog_unsigned = bool(signedness[index]) if numeric and index < len(signedness) else None
        column.binlake_binlog_name = names[index] if len(names) == len(columns) else None
        if event._is_character_column(column.type, dbms=dbms):
            collation_id = next(character, None)
        elif event._is_enum_or_set_column(column.type):
            collation_id = next(labels, None)
        else:
            continue
        if collation_id is not None and column.collation_name is None:
            _, collation, _ = find_charset(str(collation_id), dbms=dbms)
            column.collation_name = collation


TableMapEvent._binlake_library_init = parse_table_map
TableMapEvent.__init__ = _table_map_init


#: MySQL 9's VECTOR column type in a table map (MYSQL_TYPE_VECTOR), which the library does not know.
MYSQL_TYPE_VECTOR = 242
_library_column_init = getattr(Column, "_binlake_library_init", Column.__init__)


def _column_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """The library's Column constructor, also reading a VECTOR column's one metadata byte.

    A table map's column metadata are read column by column with no length check, so a type the library does not
    know shifts every later column's metadata, the null bitmap and the optional metadata (names, charsets) of the
    table. MySQL writes one byte for VECTOR, as for a BLOB (the byte count of the value's length). Reading it keeps
    the table map right, so a VECTOR table stops by name (`types.vector_refusal`) instead of misreading its
    other columns.
    """
    _library_column_init(self, *args, **kwargs)
    if len(args) == 2 and args[0] == MYSQL_TYPE_VECTOR:
        self.length_size = args[1].read_uint8()


Column._binlake_library_init = _library_column_init
Column.__init__ = _column_init


def caching_table_maps(connect: Callable[..., Any]) -> Callable[..., Any]:
    """A connection factory whose connections keep the table maps they carry (`_table_map_init`), and send a
    COM_BINLOG_DUMP_GTID with its true length (`_gtid_dump_length`)."""

    def connect_caching(**settings: Any) -> Any:
        if "db" in settings:  # the library's name for it, which PyMySQL deprecates
            settings["database"] = settings.pop("db")
        connection = connect(**settings)
        setattr(connection, _TABLE_MAPS, {})
        _gtid_dump_length(connection)
        return connection

    return connect_caching


# -- the MySQL GTID dump ---------------------------------------------------------------------------

#: The command byte of COM_BINLOG_DUMP_GTID.
COM_BINLOG_DUMP_GTID = 0x1E


@dataclass(frozen=True)
class GtidDumpRequest:
    """A MySQL GTID set encoded by binlake (`MysqlGtidSet.encode`), passed as the stream's `auto_position`.

    python-mysql-replication 1.0.17 encodes `auto_position` with its own GtidSet, which knows no tags (its
    parser refuses `uuid:tag:n`); `_gtid_set` hands this object to the library's packet builder instead,
    which asks only for `encoded_length` and `encoded()`. Always true: the library tests `auto_position` for
    truth to choose the GTID dump, and an empty set is a GTID dump too (from the first transaction).
    """

    data: bytes

    def __bool__(self) -> bool:
        return True

    @property
    def encoded_length(self) -> int:
        return len(self.data)

    def encoded(self) -> bytes:
        return self.data


# The library's own GtidSet, kept once even if this module is imported again.
_library_gtid_set = getattr(binlogstream, "_binlake_library_gtid_set", binlogstream.GtidSet)


def _gtid_set(value: Any) -> Any:
    return value if isinstance(value, GtidDumpRequest) else _library_gtid_set(value)


binlogstream._binlake_library_gtid_set = _library_gtid_set
binlogstream.GtidSet = _gtid_set


def _previous_gtids_init(self: Any, from_packet: Any, event_size: int, table_map: dict[int, Any],
                         ctl_connection: Any, **settings: Any) -> None:
    """PreviousGtidsEvent's constructor, reading the set with binlake's decoder (`MysqlGtidSet.decode`).

    python-mysql-replication 1.0.17 reads only the untagged format: a MySQL 8.3+ file whose PREVIOUS_GTIDS holds
    a tagged GTID (format 1) makes it read past the event and fail, which a GTID dump (sent from a file's start)
    always meets. binlake passes the event (a file header); its set is kept as text for a reader that prints it.
    """
    BinLogEvent.__init__(self, from_packet, event_size, table_map, ctl_connection, **settings)
    try:
        found = MysqlGtidSet.decode(self.packet.read(event_size))
    except GtidSetError:
        found = MysqlGtidSet()
    self._n_sid = len(found.intervals)
    self._gtids = str(found).split(",") if found else []
    self._previous_gtids = str(found)


PreviousGtidsEvent.__init__ = _previous_gtids_init


def _gtid_dump_length(connection: Any) -> None:
    """Send COM_BINLOG_DUMP_GTID with the length its bytes have.

    python-mysql-replication 1.0.17 writes the packet's 3-byte length 4 bytes short (it counts an 8-byte file
    name and a 4-byte position where it writes a 3-byte name and an 8-byte position), so a server would read the
    GTID set cut short. The packet goes through PyMySQL's `_write_bytes` in one piece: its length is set right
    there, and every other packet passes untouched.
    """
    write = getattr(connection, "_write_bytes", None)
    if write is None:
        return

    def write_bytes(data: bytes) -> None:
        if len(data) > 4 and data[4] == COM_BINLOG_DUMP_GTID and data[3] == 0:
            data = (len(data) - 4).to_bytes(3, "little") + data[3:]
        write(data)

    connection._write_bytes = write_bytes


# -- the stream ----------------------------------------------------------------------------------

def stream_setting(stream: BinLogStreamReader, name: str) -> Any:
    """A private attribute of the stream (python-mysql-replication 1.0.17 keeps its settings name-mangled)."""
    return getattr(stream, f"_BinLogStreamReader__{name}")


def rebuilt_rows_event(stream: BinLogStreamReader, packet_bytes: bytes) -> Any:
    """The library's rows event for a rebuilt (decompressed) packet, read with the stream's own settings."""
    # The library keeps an event only if its exact class is allowed: a PARTIAL_UPDATE_ROWS left out here would
    # come back as None, and its rows would be dropped unseen.
    allowed = frozenset({WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent, PartialUpdateRowsEvent})
    return _wrapper(stream, packet_bytes, allowed, checksum=stream_setting(stream, "use_checksum")).event


def payload_event(stream: BinLogStreamReader, event_bytes: bytes) -> Any:
    """The library's event for one event inside a TRANSACTION_PAYLOAD (header and body, no checksum), or None.

    What `BinLogStreamReader.fetchone` does for an event it reads off the wire is done here too: the packet is
    parsed with the stream's settings and the stream's table maps, a table map joins them, and an event the
    stream would filter out is None. The library's `fetchone` has no way to be fed bytes that did not come off
    the connection, so this is the one place that stands in for it.
    """
    # Inner events carry no checksum (the payload event's covers them), but the library's table map reads its
    # optional metadata while more than a checksum's 4 bytes are left in the packet, whatever the checksum
    # setting: without 4 bytes in their place, a trailing field of 4 bytes or less (SIGNEDNESS of a few columns,
    # SIMPLE_PRIMARY_KEY, a short COLUMN_NAME) would be skipped unseen. Past the event's size, nothing reads them.
    wrapper = _wrapper(stream, b"\x00" + event_bytes + bytes(4), stream_setting(stream, "allowed_events_in_packet"),
                       checksum=False)
    event = wrapper.event
    if event is None:
        return None
    if isinstance(event, TableMapEvent):
        stream.table_map[event.table_id] = event.get_table()
    if event.__class__ not in stream_setting(stream, "allowed_events"):
        return None
    return event


def _wrapper(stream: BinLogStreamReader, packet_bytes: bytes, allowed: frozenset[type], *, checksum: bool) -> Any:
    """The library's packet wrapper (which parses the event) for `packet_bytes`: an OK byte, then the event."""
    from pymysql.protocol import MysqlPacket
    from pymysqlreplication.packet import BinLogPacketWrapper

    return BinLogPacketWrapper(
        MysqlPacket(packet_bytes, stream._ctl_connection.encoding),
        stream.table_map,
        stream._ctl_connection,
        stream.mysql_version,
        checksum,
        allowed,
        stream_setting(stream, "only_tables"),
        stream_setting(stream, "ignored_tables"),
        stream_setting(stream, "only_schemas"),
        stream_setting(stream, "ignored_schemas"),
        stream_setting(stream, "freeze_schema"),
        stream_setting(stream, "ignore_decode_errors"),
        False,  # the checksum is not verified: a rebuilt packet's belongs to the compressed event
        stream_setting(stream, "optional_meta_data"),
        False,
        stream_setting(stream, "use_column_name_cache"),
        stream_setting(stream, "post_header_lengths"),
    )
# -- partial JSON (PARTIAL_UPDATE_ROWS) ----------------------------------------------------------

def keep_partial_json_bytes(event: Any) -> bool:
    """Make the library hand over a partial JSON column's diff vector as bytes (`json_diff.DiffVector`).

    python-mysql-replication 1.0.17 reads the partial-bits bitmap right but parses only the first diff of a
    vector and drops the rest unseen; so for this event's packet only, a partial value is read as its 4-byte
    length and bytes, which `json_diff.read_diffs` parses whole. False when the library has read the event's
    rows already (too late: their diffs are cut).
    """
    from cdc_lib.binlog.json_diff import DiffVector

    if rows_decoded(event):
        return False
    packet = event.packet
    library_read = packet.read_binary_json

    def read_binary_json(size: int, is_partial: bool) -> Any:
        if not is_partial:
            return library_read(size, is_partial)
        return DiffVector(packet.read(packet.read_uint_by_size(size)))

    packet.read_binary_json = read_binary_json
    return True


def parse_binary_json(data: bytes) -> Any:
    """A MySQL binary JSON value (type byte, then its body), decoded by binlake (`json_binary.decode`) as a full
    image's document is: the values of a partial update's diffs are binary JSON too."""
    return json_binary.decode(data)


def _read_binary_json(self: Any, size: int, is_partial: bool) -> Any:
    """The library's `read_binary_json` for a full JSON value: its bytes decoded by binlake, as `MySqlJson`.

    python-mysql-replication 1.0.17 decodes opaque scalars wrongly (a TIMESTAMP or blob as its bytes read as text
    with errors dropped; a DATE, TIME, DATETIME or DECIMAL as an object no JSON writer takes), and reads a
    zero-length value — JSON null to MySQL — as SQL NULL. A partial value (a diff vector) stays the library's,
    unless `keep_partial_json_bytes` took it over for the event.
    """
    if is_partial:
        return _library_read_binary_json(self, size, is_partial)
    return MySqlJson(json_binary.decode(self.read(self.read_uint_by_size(size))))


_library_read_binary_json = getattr(BinLogPacketWrapper, "_binlake_library_read_binary_json",
                                    BinLogPacketWrapper.read_binary_json)
BinLogPacketWrapper._binlake_library_read_binary_json = _library_read_binary_json
BinLogPacketWrapper.read_binary_json = _read_binary_json
