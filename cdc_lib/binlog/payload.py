"""MySQL's TRANSACTION_PAYLOAD event (type 40, `binlog_transaction_compression=ON`, 8.0.20+), opened.

MySQL writes each compressed transaction as one event whose body is a header of TLV fields (field type,
length of the value, value; each a packed integer) ended by a zero field type, then the compressed bytes: a
zstd frame holding the transaction's events back to back (QUERY BEGIN, TABLE_MAP, rows events, XID). Those
inner events have the 19-byte common header but no checksum, and log_pos 0: they have no position of their
own in the binlog, only the payload event has one.

The inner events are decompressed one at a time (a zstd stream), so memory holds the compressed event (the
library has read it whole already; about two more copies of its body while it is opened) and two inner events
(the reader looks one ahead), never the whole
transaction; an inner event larger than `batch.max_payload_event_bytes` is refused (`PayloadTooLargeError`)
before its bytes are read. A caller may take the refusal per table (`oversized`): a rows event of a table the
reader does not follow is passed over, one of a followed table stops that table, and in both cases the event's
bytes are read through in small pieces and dropped, never held.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import zstandard

from cdc_lib.errors import BinlakeError

TRANSACTION_PAYLOAD_EVENT = 40
#: `binary_log::transaction::compression::type`: the only two values MySQL defines.
ZSTD, NONE = 0, 255
#: TLV field types of the payload header (`Transaction_payload_event::fields`).
_END_MARK, _PAYLOAD_SIZE, _COMPRESSION_TYPE, _UNCOMPRESSED_SIZE = 0, 1, 2, 3
_HEADER_BYTES = 19
#: zstd's own default limit on a frame's window (2^27 bytes): what decompressing may hold besides the events.
#: MySQL compresses at level 3, whose window is far smaller; a frame asking for more is refused as corrupt.
MAX_WINDOW_BYTES = 1 << 27
#: Rows events (v1 23-25, v2 30-32, PARTIAL_UPDATE_ROWS 39) and TABLE_MAP: what names the table of an inner event.
#: Their post-header starts with the 6-byte table id (MySQL writes the 8-byte-post-header form since 5.6; a
#: compressed transaction exists only on 8.0.20+).
_ROWS_EVENTS = frozenset({23, 24, 25, 30, 31, 32, 39})
_TABLE_MAP = 19
_TABLE_ID_BYTES = 6
#: How much of an event passed over is read at once.
_DISCARD_CHUNK = 1 << 20


class PayloadError(ValueError):
    """A payload event binlake cannot open: another compression type, or bytes that do not decode."""


class PayloadTooLargeError(BinlakeError):
    """An event inside a compressed transaction is larger than binlake holds in memory at once."""


#: Told of an event beyond the bound: the table its rows belong to ('database.table', None when it is not a rows
#: event of a mapped table) and the refusal. True: pass the event over (its bytes are dropped unread); False:
#: raise the refusal, which ends the payload.
Oversized = Callable[[str | None, PayloadTooLargeError], bool]


@dataclass(frozen=True)
class PayloadHeader:
    compression_type: int
    payload_size: int
    uncompressed_size: int
    #: Offset of the compressed bytes in the event body.
    payload_start: int


def _packed_int(data: bytes, offset: int) -> tuple[int, int]:
    """A packed (length-encoded) integer: one byte below 251, else 0xfc/0xfd/0xfe and 2/3/8 bytes."""
    if offset >= len(data):
        raise PayloadError("the payload header ends inside a field")
    first = data[offset]
    if first < 251:
        return first, offset + 1
    width = {252: 2, 253: 3, 254: 8}.get(first)
    if width is None or offset + 1 + width > len(data):
        raise PayloadError(f"bad packed integer 0x{first:02x} in the payload header")
    return int.from_bytes(data[offset + 1: offset + 1 + width], "little"), offset + 1 + width


def parse_header(body: bytes) -> PayloadHeader:
    """The TLV header of a payload event's body (the bytes after the 19-byte common header, no checksum)."""
    fields: dict[int, int] = {}
    offset = 0
    while True:
        field, offset = _packed_int(body, offset)
        if field == _END_MARK:
            break
        length, offset = _packed_int(body, offset)
        end = offset + length
        if end > len(body):
            raise PayloadError(f"payload header field {field} runs past the event")
        if field in (_PAYLOAD_SIZE, _COMPRESSION_TYPE, _UNCOMPRESSED_SIZE):
            value, used = _packed_int(body[:end], offset)
            if used != end:
                raise PayloadError(f"payload header field {field}: {length} bytes hold a {used - offset}-byte value")
            fields[field] = value
        offset = end  # a field type this reader does not know is skipped by its length
    missing = {_PAYLOAD_SIZE, _COMPRESSION_TYPE} - fields.keys()
    if missing:
        raise PayloadError(f"the payload header lacks field(s) {sorted(missing)}")
    header = PayloadHeader(fields[_COMPRESSION_TYPE], fields[_PAYLOAD_SIZE],
                           fields.get(_UNCOMPRESSED_SIZE, fields[_PAYLOAD_SIZE]), offset)
    if header.payload_size != len(body) - offset:
        raise PayloadError(f"the header says {header.payload_size} payload bytes, the event holds {len(body) - offset}")
    return header


def _exactly(reader: io.RawIOBase | io.BufferedIOBase | zstandard.ZstdDecompressionReader, size: int) -> bytes:
    """`size` bytes, or fewer only at the end of the stream (a stream reader may return short reads)."""
    parts: list[bytes] = []
    wanted = size
    while wanted:
        chunk = reader.read(wanted)
        if not chunk:
            break
        parts.append(chunk)
        wanted -= len(chunk)
    return b"".join(parts)


def _table_map_name(body: bytes) -> tuple[int, str] | None:
    """A TABLE_MAP body's table id and 'database.table' (table id, flags, then each name length-prefixed and
    NUL-ended); None when the body is too short to hold them (the library's parse reports that event)."""
    offset = _TABLE_ID_BYTES + 2
    names = []
    for _ in range(2):
        if offset >= len(body):
            return None
        length = body[offset]
        names.append(body[offset + 1: offset + 1 + length].decode("utf-8", "replace"))
        offset += length + 2
    if offset > len(body):
        return None
    return int.from_bytes(body[:_TABLE_ID_BYTES], "little"), ".".join(names)


def _discard(reader: io.RawIOBase | io.BufferedIOBase | zstandard.ZstdDecompressionReader, wanted: int) -> bool:
    """Read `wanted` bytes through and drop them, a piece at a time; False if the stream ends first."""
    while wanted:
        chunk = reader.read(min(wanted, _DISCARD_CHUNK))
        if not chunk:
            return False
        wanted -= len(chunk)
    return True


def inner_events(
    body: bytes, *, end_pos: int, max_event_bytes: int, where: str, oversized: Oversized | None = None,
) -> Iterator[bytes]:
    """The events inside a payload event's body, one at a time: each its 19-byte header and body (no checksum).

    Each inner event's log_pos is set to `end_pos`, the payload event's end: an inner event has no position
    of its own, and the transaction it belongs to ends where the payload event ends, so a commit read inside
    lands there and a resume never starts inside a payload. `where` (file:position) names the event in errors.

    Raises:
        PayloadError: another compression type than zstd, or bytes that do not decode (at any point of the
            iteration: the events before were yielded already).
        PayloadTooLargeError: an inner event larger than `max_event_bytes`, unless `oversized` passes it over.
    """
    header = parse_header(body)
    source = io.BytesIO(memoryview(body)[header.payload_start:])
    reader: io.BytesIO | zstandard.ZstdDecompressionReader
    if header.compression_type == ZSTD:
        decompressor = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW_BYTES)
        reader = decompressor.stream_reader(source, read_across_frames=True)
    elif header.compression_type == NONE:
        reader = source
    else:
        raise PayloadError(f"compression type {header.compression_type} (binlake reads zstd, type {ZSTD}, and none)")
    total = 0
    #: The payload's table maps (table id → name), for naming the table of an event beyond the bound.
    tables: dict[int, str] = {}
    try:
        while True:
            head = _exactly(reader, _HEADER_BYTES)
            if not head:
                break
            if len(head) < _HEADER_BYTES:
                raise PayloadError("the payload ends inside an event header")
            size = int.from_bytes(head[9:13], "little")
            if size < _HEADER_BYTES:
                raise PayloadError(f"an inner event of {size} bytes")
            total += size
            if total > header.uncompressed_size:
                raise PayloadError(f"the payload decompresses to more than the {header.uncompressed_size} bytes "
                                   "its header says")
            if size > max_event_bytes:
                table: str | None = None
                prefix = b""
                if head[4] in _ROWS_EVENTS:
                    prefix = _exactly(reader, _TABLE_ID_BYTES)
                    table = tables.get(int.from_bytes(prefix, "little"))
                refusal = PayloadTooLargeError(
                    f"the compressed transaction (binlog_transaction_compression) at {where} holds an event of "
                    f"{size} bytes{f' for {table}' if table else ''}, more than batch.max_payload_event_bytes "
                    f"({max_event_bytes}); binlake does not hold a larger one in memory; nothing of "
                    f"{'this table' if table else 'this batch'} from there on was applied",
                    remedy="raise batch.max_payload_event_bytes in the pipeline config above that size (the driver "
                    "then holds that many bytes at once, plus its decoded rows), and run the sync again"
                    + (f" (binlake resume --table {table} first)" if table else ""),
                    table=table,
                )
                if oversized is None or not oversized(table, refusal):
                    raise refusal
                if not _discard(reader, size - _HEADER_BYTES - len(prefix)):
                    raise PayloadError("the payload ends inside an event")
                continue
            rest = _exactly(reader, size - _HEADER_BYTES)
            if len(rest) < size - _HEADER_BYTES:
                raise PayloadError("the payload ends inside an event")
            if head[4] == _TABLE_MAP and (mapped := _table_map_name(rest)) is not None:
                tables[mapped[0]] = mapped[1]
            yield head[:13] + struct.pack("<I", end_pos) + head[17:] + rest
    except zstandard.ZstdError as exc:
        raise PayloadError(f"zstd: {exc}") from None
    if total != header.uncompressed_size:
        raise PayloadError(f"the payload decompresses to {total} bytes, its header says {header.uncompressed_size}")
