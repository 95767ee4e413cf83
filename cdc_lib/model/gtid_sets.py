"""MySQL GTID sets, tagged GTIDs (8.3+) included: the text MySQL shows, set arithmetic, and the binary encoding.

A MySQL GTID is `uuid:number` or, from 8.3 on, `uuid:tag:number` (`SET gtid_next='AUTOMATIC:tag'`). A GTID set
maps each (uuid, tag) pair to intervals of transaction numbers. Its canonical text, as `@@gtid_executed` shows
it: UUIDs in ascending order, joined by commas; after each UUID its untagged intervals, then each tag (in
ascending order) followed by its intervals: `55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2`. A tag is
``[a-z_][a-z0-9_]{0,31}``, compared without case and shown in lower case (MySQL's "Replication with GTIDs",
8.4 reference manual, "GTID Format and Storage").

The binary encoding (MySQL's `Gtid_set::encode`) is what COM_BINLOG_DUMP_GTID sends and what a PREVIOUS_GTIDS
event holds. Untagged format: an 8-byte little-endian count of UUIDs, then per UUID its 16 bytes, an 8-byte
count of intervals and each interval as two 8-byte numbers, start and end + 1. Tagged format (version 1, used
only when some GTID carries a tag, so a server before 8.3 still reads an untagged set): the first 8 bytes are
the format byte 1, a 6-byte count of (uuid, tag) pairs and the format byte 1 again, and after each UUID comes
its tag as a length (a `mysql::serialization` variable-length integer) and its bytes. binlake writes this
encoding from MySQL's documentation; the PREVIOUS_GTIDS events of the real binlog fixtures (tests/fixtures/
mysql-binlogs/rust_mysql_common) decode with it.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from cdc_lib.errors import BinlakeError

_UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
_TAG = re.compile(r"^[a-z_][a-z0-9_]{0,31}$")
_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")
#: A MySQL GTID number is positive and below 2^63 (rpl_gno is a signed 64-bit integer).
_GNO_MAX = (1 << 63) - 1
_TAGGED_FORMAT = 1

#: (uuid in canonical text, tag or "") — what MySQL calls a TSID.
Tsid = tuple[str, str]
#: Inclusive intervals of transaction numbers, sorted and disjoint, none adjacent to the next.
Intervals = tuple[tuple[int, int], ...]


class GtidSetError(BinlakeError):
    """A MySQL GTID set (or GTID) that cannot be parsed or decoded."""


def _uuid(text: str) -> str:
    compact = text.strip().lower()
    if not _UUID.match(compact):
        raise GtidSetError(f"'{text}' is not a server UUID", remedy="check the GTID set's text")
    hexa = compact.replace("-", "")
    return f"{hexa[:8]}-{hexa[8:12]}-{hexa[12:16]}-{hexa[16:20]}-{hexa[20:]}"


def _tag(text: str) -> str:
    tag = text.strip().lower()  # tags compare without case; MySQL shows them in lower case
    if not _TAG.match(tag):
        raise GtidSetError(f"'{text}' is not a GTID tag ([a-z_][a-z0-9_]{{0,31}})", remedy="check the GTID set's text")
    return tag


def _normalized(intervals: Iterable[tuple[int, int]]) -> Intervals:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def _subtract(mine: Intervals, theirs: Intervals) -> Intervals:
    left: list[tuple[int, int]] = []
    for start, end in mine:
        for other_start, other_end in theirs:
            if other_end < start or other_start > end:
                continue
            if other_start > start:
                left.append((start, other_start - 1))
            start = other_end + 1
            if start > end:
                break
        if start <= end:
            left.append((start, end))
    return tuple(left)


@dataclass(frozen=True)
class MysqlGtidSet:
    """A MySQL GTID set: each (uuid, tag) with its intervals. Immutable; the operations return new sets."""

    intervals: tuple[tuple[Tsid, Intervals], ...] = ()

    # -- building ----------------------------------------------------------------------------------

    @classmethod
    def of(cls, entries: Mapping[Tsid, Iterable[tuple[int, int]]]) -> MysqlGtidSet:
        kept = {tsid: _normalized(found) for tsid, found in entries.items()}
        return cls(tuple(sorted((tsid, found) for tsid, found in kept.items() if found)))

    @classmethod
    def parse(cls, text: str | None) -> MysqlGtidSet:
        """A set from MySQL's text (`@@gtid_executed`, Executed_Gtid_Set); None and '' are the empty set.

        Raises:
            GtidSetError: the text is not a GTID set.
        """
        entries: dict[Tsid, list[tuple[int, int]]] = {}
        for part in (text or "").replace("\n", "").split(","):
            if not part.strip():
                continue
            fields = part.split(":")
            uuid, tag = _uuid(fields[0]), ""
            for field in fields[1:]:
                match = _INTERVAL.match(field.strip())
                if match is None:
                    tag = _tag(field)
                    continue
                start = int(match.group(1))
                end = int(match.group(2)) if match.group(2) else start
                if not 0 < start <= end <= _GNO_MAX:
                    raise GtidSetError(f"'{field}' in '{part}' is not an interval of transaction numbers",
                                       remedy="check the GTID set's text")
                entries.setdefault((uuid, tag), []).append((start, end))
        return cls.of(dict(entries))

    def add(self, gtid: str) -> MysqlGtidSet:
        """The set with one more transaction, `uuid:number` or `uuid:tag:number`."""
        tsid, number = parse_gtid(gtid)
        # The common case, once per transaction a read passes: the next number of a source's last interval.
        for index, (known, found) in enumerate(self.intervals):
            if known == tsid and found and found[-1][1] + 1 == number:
                grown = (*found[:-1], (found[-1][0], number))
                return MysqlGtidSet((*self.intervals[:index], (tsid, grown), *self.intervals[index + 1:]))
        return self.union(MysqlGtidSet.of({tsid: [(number, number)]}))

    # -- reading -----------------------------------------------------------------------------------

    def __bool__(self) -> bool:
        return bool(self.intervals)

    def __iter__(self) -> Iterator[tuple[Tsid, Intervals]]:
        return iter(self.intervals)

    def _by_tsid(self) -> dict[Tsid, Intervals]:
        return dict(self.intervals)

    @property
    def tagged(self) -> bool:
        return any(tag for (_, tag), _ in self.intervals)

    def __str__(self) -> str:
        by_uuid: dict[str, list[str]] = {}
        for (uuid, tag), found in self.intervals:  # sorted: the untagged ("") entry of a UUID comes first
            parts = by_uuid.setdefault(uuid, [uuid])
            if tag:
                parts.append(tag)
            parts.extend(f"{start}" if start == end else f"{start}-{end}" for start, end in found)
        return ",".join(":".join(parts) for parts in by_uuid.values())

    def contains_gtid(self, gtid: str) -> bool:
        tsid, number = parse_gtid(gtid)
        return any(start <= number <= end for start, end in self._by_tsid().get(tsid, ()))

    def contains(self, other: MysqlGtidSet) -> bool:
        """Whether every transaction of `other` is in this set."""
        return not other.difference(self)

    # -- arithmetic --------------------------------------------------------------------------------

    def union(self, other: MysqlGtidSet) -> MysqlGtidSet:
        entries: dict[Tsid, list[tuple[int, int]]] = {}
        for tsid, found in (*self.intervals, *other.intervals):
            entries.setdefault(tsid, []).extend(found)
        return MysqlGtidSet.of(dict(entries))

    def difference(self, other: MysqlGtidSet) -> MysqlGtidSet:
        """The transactions of this set that `other` lacks."""
        theirs = other._by_tsid()
        return MysqlGtidSet.of({tsid: _subtract(found, theirs.get(tsid, ())) for tsid, found in self.intervals})

    def intersection(self, other: MysqlGtidSet) -> MysqlGtidSet:
        return self.difference(self.difference(other))

    # -- binary ------------------------------------------------------------------------------------

    def encode(self) -> bytes:
        """MySQL's `Gtid_set::encode`: the untagged format unless some GTID has a tag (see the module docstring)."""
        tagged = self.tagged
        count = len(self.intervals)
        if tagged:
            out = bytearray([_TAGGED_FORMAT]) + count.to_bytes(6, "little") + bytes([_TAGGED_FORMAT])
        else:
            out = bytearray(struct.pack("<Q", count))
        for (uuid, tag), found in self.intervals:
            out += bytes.fromhex(uuid.replace("-", ""))
            if tagged:
                out += encode_varlen(len(tag)) + tag.encode("ascii")
            out += struct.pack("<Q", len(found))
            for start, end in found:
                out += struct.pack("<QQ", start, end + 1)
        return bytes(out)

    @classmethod
    def decode(cls, data: bytes) -> MysqlGtidSet:
        """A set from its binary encoding (a PREVIOUS_GTIDS event's body, a COM_BINLOG_DUMP_GTID's data).

        Raises:
            GtidSetError: the bytes are not an encoded GTID set.
        """
        try:
            return cls._decode(data)
        except (struct.error, IndexError, ValueError) as exc:
            raise GtidSetError(f"an encoded GTID set could not be read ({exc})",
                               remedy="report it with the binlog bytes") from None

    @classmethod
    def _decode(cls, data: bytes) -> MysqlGtidSet:
        tagged = data[0] == _TAGGED_FORMAT and data[7] == _TAGGED_FORMAT
        count = int.from_bytes(data[1:7], "little") if tagged else struct.unpack_from("<Q", data)[0]
        offset = 8
        # A (uuid, tag) listed twice (MySQL writes each once) keeps both lists of intervals, merged by `of`.
        entries: dict[Tsid, list[tuple[int, int]]] = {}
        for _ in range(count):
            uuid = _uuid(data[offset:offset + 16].hex())
            offset += 16
            tag = ""
            if tagged:
                length, offset = decode_varlen(data, offset)
                tag = data[offset:offset + length].decode("ascii")
                offset += length
            (found,) = struct.unpack_from("<Q", data, offset)
            offset += 8
            intervals = []
            for _ in range(found):
                start, end = struct.unpack_from("<QQ", data, offset)
                offset += 16
                intervals.append((start, end - 1))
            entries.setdefault((uuid, tag), []).extend(intervals)
        return cls.of(entries)


def parse_gtid(gtid: str) -> tuple[Tsid, int]:
    """`uuid:number` or `uuid:tag:number` → ((uuid, tag), number).

    Raises:
        GtidSetError: the text is not one GTID.
    """
    fields = gtid.strip().split(":")
    if len(fields) not in (2, 3) or not fields[-1].strip().isdigit():
        raise GtidSetError(f"'{gtid}' is not a MySQL GTID (uuid:number or uuid:tag:number)",
                           remedy="check the GTID's text")
    tag = _tag(fields[1]) if len(fields) == 3 else ""
    return (_uuid(fields[0]), tag), int(fields[-1])


def is_mysql_set(text: str | None) -> bool:
    """Whether `text` names MySQL GTIDs (a server UUID leads some part); '' and None do not."""
    return bool(text) and any(_UUID.match(part.split(":")[0].strip().lower())
                              for part in str(text).replace("\n", "").split(",") if part.strip())


# -- mysql::serialization variable-length integers --------------------------------------------------------


def encode_varlen(value: int) -> bytes:
    """An unsigned integer in MySQL's serialization format: 1 to 9 bytes, the count in the first byte's low ones."""
    for size in range(1, 9):
        if value < 1 << (7 * size):
            return ((value << size) | ((1 << (size - 1)) - 1)).to_bytes(size, "little")
    return b"\xff" + value.to_bytes(8, "little")


def decode_varlen(data: bytes, offset: int) -> tuple[int, int]:
    """An unsigned variable-length integer at `offset`, and the offset after it.

    The number of trailing one bits of the first byte is the number of bytes that follow it (all eight: 0xff,
    then a plain 8-byte integer); the value is the little-endian bytes shifted right by their count.
    """
    first = data[offset]
    if first == 0xFF:
        return int.from_bytes(data[offset + 1:offset + 9], "little"), offset + 9
    size = 1
    while first & (1 << (size - 1)):
        size += 1
    if offset + size > len(data):
        raise ValueError(f"a {size}-byte integer at {offset} runs past the end ({len(data)} bytes)")
    return int.from_bytes(data[offset:offset + size], "little") >> size, offset + size


def decode_signed_varlen(data: bytes, offset: int) -> tuple[int, int]:
    """A signed variable-length integer: the unsigned one, zigzag-coded (0, -1, 1, -2, … as 0, 1, 2, 3, …)."""
    value, offset = decode_varlen(data, offset)
    return (value >> 1) ^ -(value & 1), offset
