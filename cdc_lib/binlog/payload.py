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
before its bytes are read.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator
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


class PayloadError(ValueError):
    """A payload event binlake cannot open: another compression type, or bytes that do not decode."""


class PayloadTooLargeError(BinlakeError):
    """An event inside a compressed transaction is larger than binlake holds in memory at once."""


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


def inner_events(body: bytes, *, end_pos: int, max_event_bytes: int, where: str) -> Iterator[bytes]:
    """The events inside a payload event's body, one at a time: each its 19-byte header and body (no checksum).

    Each inner event's log_pos is set to `end_pos`, the payload event's end: an inner event has no position
    of its own, and the transaction it belongs to ends where the payload event ends, so a commit read inside
    lands there and a resume never starts inside a payload. `where` (file:position) names the event in errors.

    Raises:
        PayloadError: another compression type than zstd, or bytes that do not decode (at any point of the
            iteration: the events before were yielded already).
        PayloadTooLargeError: an inner event larger than `max_event_bytes`.
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
            if size > max_event_bytes:
                raise PayloadTooLargeError(
                    f"the compressed transaction (binlog_transaction_compression) at {where} holds an event of "
                    f"{size} bytes, more than batch.max_payload_event_bytes ({max_event_bytes}); binlake does not "
                    "hold a larger one in memory; nothing of this batch was applied",
                    remedy="raise batch.max_payload_event_bytes in the pipeline config above that size (the driver "
                    "then holds that many bytes at once, plus its decoded rows), and run the sync again",
                )
            total += size
            if total > header.uncompressed_size:
                raise PayloadError(f"the payload decompresses to more than the {header.uncompressed_size} bytes "
                                   "its header says")
            rest = _exactly(reader, size - _HEADER_BYTES)
            if len(rest) < size - _HEADER_BYTES:
                raise PayloadError("the payload ends inside an event")
            yield head[:13] + struct.pack("<I", end_pos) + head[17:] + rest
    except zstandard.ZstdError as exc:
        raise PayloadError(f"zstd: {exc}") from None
    if total != header.uncompressed_size:
        raise PayloadError(f"the payload decompresses to {total} bytes, its header says {header.uncompressed_size}")
