"""Binlog files read from disk, event by event, and handed to python-mysql-replication as a server's dump would.

`binlake binlog decode` reads binlog files offline through the same code as the sync (`cdc_lib.binlog.decode`). The
library reads events only from a connection: `BinLogStreamReader.fetchone` asks it for one packet per event (an OK
byte, then the event as the file holds it: header, body and, with binlog_checksum=CRC32, the checksum), and before
that asks a few settings over SQL. `FileConnection` answers both from the files, in process and without a socket: the
settings from the first file's FORMAT_DESCRIPTION (server version, checksum), the packets from the files in order,
then the EOF packet a non-blocking dump ends with. MySQL's sender frames events the same way (tests/mysql_stub.py).

`FileEvents` checks what a server would have refused to send: a file without the magic bytes, an event cut short by
the file's end, and a start position that is not an event's first byte.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pymysql.protocol import MysqlPacket

from cdc_lib.errors import BinlogFileError
from cdc_lib.model.gtid_sets import GtidSetError, MysqlGtidSet

#: Every binlog file (v4, MySQL 5.0+ and MariaDB) starts with these bytes.
MAGIC = b"\xfebin"
HEADER_BYTES = 19
FORMAT_DESCRIPTION_EVENT = 15
PREVIOUS_GTIDS_LOG_EVENT = 35
#: FORMAT_DESCRIPTION body: binlog version (2), server version (50), create timestamp (4), header length (1).
_SERVER_VERSION = slice(HEADER_BYTES + 2, HEADER_BYTES + 52)
#: The checksum algorithm byte sits before the FORMAT_DESCRIPTION's own 4 checksum bytes (MySQL 5.6.1+, MariaDB 5.3+).
_CRC32 = 1
#: A non-blocking COM_BINLOG_DUMP ends with an EOF packet, which tells the library the binlog ends here.
_EOF_PACKET = b"\xfe\x00\x00\x02\x00"


@dataclass(frozen=True)
class FileEvent:
    """One event as a file holds it, with where it starts."""

    file: str
    pos: int
    raw: bytes

    @property
    def type_code(self) -> int:
        return self.raw[4]

    @property
    def end(self) -> int:
        return self.pos + len(self.raw)


@dataclass(frozen=True)
class FileFormat:
    """What the first FORMAT_DESCRIPTION says about the files: the settings a server would answer."""

    server_version: str
    checksum: bool


def previous_gtids(event: FileEvent, *, checksum: bool) -> str | None:
    """The GTID set of a PREVIOUS_GTIDS event, untagged or tagged (MySQL 8.3+), or None when it does not decode."""
    body = event.raw[HEADER_BYTES:len(event.raw) - (4 if checksum else 0)]
    try:
        return str(MysqlGtidSet.decode(body))
    except GtidSetError:
        return None


def _remedy_for(path: Path) -> str:
    return f"give binlake binlog decode a binlog file as the server wrote it (or a byte-exact copy); {path} is not one"


class FileEvents:
    """The events of `paths` in order, from `start` in the first file to before `stop` in the last.

    Each file's FORMAT_DESCRIPTION is always handed out (the library needs it to read the events after it), marked
    by `shown` as False when it lies before `start`.
    """

    def __init__(self, paths: Sequence[Path], *, start: int | None = None, stop: int | None = None) -> None:
        if not paths:
            raise BinlogFileError("no binlog file given", remedy="name one or more binlog files")
        self.paths = [Path(path) for path in paths]
        self.start, self.stop = start, stop
        self.format = self._format(self.paths[0])
        self._iterator: Iterator[tuple[FileEvent, bool]] | None = None
        #: The event last handed out (the one the library is reading), and whether it is shown or only context.
        self.current: FileEvent | None = None
        self.shown = True
        #: PREVIOUS_GTIDS events handed out, which the library is told to skip (it cannot parse MySQL 8.4's tagged
        #: form): the reader shows them from here.
        self.skipped: list[FileEvent] = []

    def next_event(self) -> FileEvent | None:
        """The next event (None at the end), kept as `current` for the reader to place what the library parsed."""
        if self._iterator is None:
            self._iterator = iter(self)
        found = next(self._iterator, None)
        self.current, self.shown = found if found is not None else (None, True)
        if self.current is not None and self.shown and self.current.type_code == PREVIOUS_GTIDS_LOG_EVENT:
            self.skipped.append(self.current)
        return self.current

    def _format(self, path: Path) -> FileFormat:
        data = _read_head(path)
        description = data[4:]
        if len(description) < HEADER_BYTES or description[4] != FORMAT_DESCRIPTION_EVENT:
            raise BinlogFileError(f"{path} does not start with a FORMAT_DESCRIPTION event", remedy=_remedy_for(path))
        size = struct.unpack_from("<I", description, 9)[0]
        if len(description) < size or size < HEADER_BYTES + 57:
            raise BinlogFileError(f"{path} ends inside its FORMAT_DESCRIPTION event", remedy=_remedy_for(path))
        version = description[_SERVER_VERSION].split(b"\x00", 1)[0].decode("ascii", errors="replace")
        return FileFormat(version, description[size - 5] == _CRC32)

    def __iter__(self) -> Iterator[tuple[FileEvent, bool]]:
        """(event, shown): `shown` is False for a FORMAT_DESCRIPTION handed out only as context."""
        last = len(self.paths) - 1
        for index, path in enumerate(self.paths):
            checksum = self._format(path).checksum
            if checksum != self.format.checksum:
                raise BinlogFileError(
                    f"{path} was written with binlog_checksum {'CRC32' if checksum else 'NONE'}, "
                    f"{self.paths[0]} with {'CRC32' if self.format.checksum else 'NONE'}",
                    remedy="decode files written with different binlog_checksum settings in separate runs",
                )
            start = self.start if index == 0 and self.start is not None else 4
            stop = self.stop if index == last else None
            yield from _events(path, start, stop)


def _read_head(path: Path) -> bytes:
    try:
        with path.open("rb") as file:
            head = file.read(4 + 4096)
    except OSError as exc:
        raise BinlogFileError(f"{path} cannot be read ({exc.strerror or exc})",
                              remedy="check the path and its permissions") from None
    if head[:4] != MAGIC:
        raise BinlogFileError(f"{path} is not a binlog file: it does not start with the bytes fe 62 69 6e",
                              remedy=_remedy_for(path))
    return head


def _events(path: Path, start: int, stop: int | None) -> Iterator[tuple[FileEvent, bool]]:
    data = path.read_bytes()
    name = path.name
    if start < 4 or start > len(data):
        raise BinlogFileError(f"--start {start} lies outside {name} (4 to {len(data)})",
                              remedy="give a position the decode's output shows as an event's start ('at')")
    pos, previous, started = 4, 4, start == 4
    while pos < len(data):
        if stop is not None and pos >= stop:
            return
        if len(data) - pos < HEADER_BYTES:
            raise _truncated(name, pos, len(data))
        size = struct.unpack_from("<I", data, pos + 9)[0]
        if size < HEADER_BYTES:
            raise BinlogFileError(f"{name}:{pos}: an event header gives the size {size}, less than a header",
                                  remedy=_remedy_for(path))
        if pos + size > len(data):
            raise _truncated(name, pos, len(data), size)
        event = FileEvent(name, pos, data[pos:pos + size])
        if not started and pos >= start:
            if pos != start:
                raise BinlogFileError(
                    f"--start {start} is not where an event of {name} starts (the event before it starts at "
                    f"{previous}, the next at {pos})",
                    remedy="give a position the decode's output shows as an event's start ('at')",
                )
            started = True
        if started:
            yield event, True
        elif event.type_code == FORMAT_DESCRIPTION_EVENT:
            yield event, False
        previous, pos = pos, pos + size


def _truncated(name: str, pos: int, length: int, size: int | None = None) -> BinlogFileError:
    what = f"its {size}-byte event" if size is not None else "an event header"
    return BinlogFileError(
        f"{name} ends at byte {length}, inside {what} starting at {pos}: the file is cut short (a copy of a binlog "
        "the server was still writing, or a partial download)",
        remedy=f"copy the file again once the server has rotated past it, or decode up to the cut: --stop {pos}",
    )


class FileConnection:
    """A stand-in for the PyMySQL connection python-mysql-replication reads its dump from: the files' events as
    packets, and the server settings it asks for answered from the files (see the module docstring)."""

    def __init__(self, events: FileEvents, **settings: Any) -> None:
        self.events = events
        self.encoding = self.charset = "utf8mb4"
        self.dict_rows = settings.get("cursorclass") is not None  # the library's control connection asks for dicts

    # What the library calls on a connection ---------------------------------------------------

    def cursor(self, *_: Any) -> SettingsCursor:
        return SettingsCursor(self)

    def get_server_info(self) -> str:
        return self.events.format.server_version

    def _write_bytes(self, data: bytes) -> None:
        """The COM_BINLOG_DUMP the library sends: the files are read from their own start positions instead."""

    def _read_packet(self) -> MysqlPacket:
        event = self.events.next_event()
        if event is None:
            return MysqlPacket(_EOF_PACKET, self.encoding)
        return MysqlPacket(b"\x00" + event.raw, self.encoding)

    def close(self) -> None:
        """Nothing to close: the files are read whole, one at a time."""


class SettingsCursor:
    """Answers the statements the library runs before a dump: the checksum, the row metadata, column names."""

    def __init__(self, connection: FileConnection) -> None:
        self.connection = connection
        self.row: tuple[str, str] | None = None

    def execute(self, statement: str, *_: Any) -> int:
        text = statement.upper()
        if "BINLOG_CHECKSUM" in text and text.startswith("SHOW"):
            self.row = ("binlog_checksum", "CRC32" if self.connection.events.format.checksum else "NONE")
        elif "BINLOG_ROW_METADATA" in text:
            # The library then reads each TABLE_MAP's optional metadata (names, signedness, charsets) as it stands.
            self.row = ("binlog_row_metadata", "FULL")
        else:
            self.row = None  # SET statements; information_schema (no server: names come from the TABLE_MAP only)
        return 0

    def fetchone(self) -> Any:
        if self.row is None:
            return None
        return {"Variable_name": self.row[0], "Value": self.row[1]} if self.connection.dict_rows else self.row

    def fetchall(self) -> list[Any]:
        return []

    def close(self) -> None:
        pass
