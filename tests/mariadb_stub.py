"""The protocol stub (tests/mysql_stub.py) flavoured as MariaDB 10.5: it serves real MariaDB binlog files as that
server does, where binlake and python-mysql-replication can observe it.

The suite's own MariaDB (tests/conftest.py) is a Debian 10.11; a MariaDB binlog written by another version
(tests/fixtures/mysql-binlogs/rust_mysql_common/mariadb-bin.000001, 10.5.15) can only be replayed through a stub.
What it answers was listed by running binlake's sync against the suite's MariaDB with the general log on (the
statements below are all it and python-mysql-replication send, a file/position dump and a GTID dump) and is what a
MariaDB 10.5 answers; where 10.5 and 10.11 differ, the MariaDB documentation and source (sql/sql_repl.cc) decide:

- the handshake: the version prefixed with "5.5.5-" (what MariaDB before 11 sends so old clients take it for a
  MySQL 5.5), `mysql_native_password` as the default plugin, the CLIENT_MYSQL bit (CLIENT_LONG_PASSWORD) cleared,
  which is how a MariaDB server says it is one, and MariaDB's extended capabilities in the last four filler bytes;
  `VERSION()` without the prefix, `@@version_comment` "mariadb.org binary distribution" (the ~focal packages);
- `SHOW BINLOG STATUS` (10.5.2+) and `SHOW MASTER STATUS`: File, Position, Binlog_Do_DB, Binlog_Ignore_DB (no GTID
  column: the GTID state is `@@gtid_binlog_pos`); `SHOW BINARY LOGS` / `SHOW MASTER LOGS`: Log_name, File_size;
  all of them need BINLOG MONITOR (REPLICATION CLIENT is its old name, which SHOW GRANTS prints as BINLOG MONITOR);
  `SHOW BINARY LOG STATUS` (MySQL 8.2+) is a syntax error;
- `@@gtid_binlog_pos`, `@@gtid_current_pos`, `@@gtid_binlog_state` from the files' GTID_LIST and GTID events;
  MySQL's `@@gtid_executed`, `@@server_uuid`, `binlog_row_value_options` are unknown; `BINLOG_GTID_POS(file, pos)`;
- the replica's session variables (`@master_binlog_checksum`, `@mariadb_slave_capability`, `@slave_connect_state`,
  `@slave_gtid_strict_mode`, `@slave_gtid_ignore_duplicates`), read by COM_BINLOG_DUMP as MariaDB's binlog sender
  reads them (`_binlog_dump` says how the stream differs from MySQL's).

Where the stub is not MariaDB (each case is refused with a message that says so): only a non-blocking dump, only
a replica with `@mariadb_slave_capability` 4 (python-mysql-replication always sets it; MariaDB would rewrite events
into dummies for older replicas), and a position inside an event is refused outright (MariaDB would read the bytes
there as an event and fail on them); GTID strict mode's refusal of a state that falls in a hole of the binlog
(a missing sequence number between two logged ones) is not made.
"""

from __future__ import annotations

import hashlib
import re
import struct
import threading
import zlib
from dataclasses import dataclass, field
from typing import Any

from tests.mysql_stub import (
    BINLOG_DUMP_NON_BLOCK,
    CLIENT_LONG_PASSWORD,
    CLIENT_SSL,
    ER_SOURCE_FATAL_ERROR_READING_BINLOG,
    EVENT_HEADER_LENGTH,
    FORMAT_DESCRIPTION_EVENT,
    LOG_EVENT_ARTIFICIAL_F,
    SERVER_CAPABILITIES,
    SERVER_STATUS_AUTOCOMMIT,
    BinlogEvent,
    BinlogFile,
    MySQLStub,
    StubError,
    StubTable,
    _eof,
    _fake_rotate,
    _Wire,
)

QUERY_EVENT, XID_EVENT = 2, 16
ANNOTATE_ROWS_EVENT, BINLOG_CHECKPOINT_EVENT, GTID_EVENT, GTID_LIST_EVENT = 160, 161, 162, 163
#: COM_BINLOG_DUMP flag (MariaDB): send ANNOTATE_ROWS events; without it a replica that tolerates holes gets none.
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02
#: @mariadb_slave_capability: MARIA_SLAVE_CAPABILITY_TOLERATE_HOLES (events may be left out of the stream) and
#: MARIA_SLAVE_CAPABILITY_GTID (the replica reads GTID and GTID_LIST events), MariaDB's sql/log_event.h.
CAPABILITY_TOLERATE_HOLES, CAPABILITY_GTID = 2, 4
#: MariaDB GTID event flags2: a group without a COMMIT (DDL), which ends with its one statement.
FL_STANDALONE = 0x01
#: Common-header flag of a FORMAT_DESCRIPTION the server is still writing to; the sender clears it (the CRC32 is
#: computed without it, so the checksum still holds).
LOG_EVENT_BINLOG_IN_USE_F = 0x01
#: Events that belong to the group of the statement that follows them (Log_event::is_part_of_group): a skipped
#: stand-alone group ends with the first event that is not one of them.
_PART_OF_GROUP = frozenset({5, 13, 14, 19, 23, 24, 25, 30, 31, 32, 160, 162, 166, 167, 168, 169, 170, 171})
#: MariaDB extended capabilities (10.5): PROGRESS, COM_MULTI, STMT_BULK_OPERATIONS, EXTENDED_TYPE_INFO.
MARIADB_CAPABILITIES = 0x0F
UTF8MB4_GENERAL_CI = 45

Gtid = tuple[int, int, int]  # domain_id, server_id, seq_no


def _parse_state(text: str) -> list[Gtid]:
    """A MariaDB GTID state ("0-1-2,1-5-7"); raises ValueError on anything else."""
    state = []
    for part in (part.strip() for part in text.split(",")):
        if part:
            domain, server, sequence = (int(number) for number in part.split("-"))
            state.append((domain, server, sequence))
    return state


def _format_state(gtids: list[Gtid]) -> str:
    return ",".join(f"{domain}-{server}-{sequence}" for domain, server, sequence in sorted(gtids))


def _gtid_of(event: BinlogEvent) -> tuple[Gtid, int]:
    """A GTID event's GTID (body: seq_no, domain_id; server_id from the header) and its flags2."""
    sequence, domain, flags2 = struct.unpack_from("<QIB", event.raw, EVENT_HEADER_LENGTH)
    return (domain, event.server_id, sequence), flags2


def _gtid_list_of(event: BinlogEvent) -> list[Gtid]:
    """A GTID_LIST event's GTIDs (body: a 28-bit count with 4 flag bits, then domain, server, seq_no each)."""
    count = struct.unpack_from("<I", event.raw, EVENT_HEADER_LENGTH)[0] & 0x0FFFFFFF
    offset = EVENT_HEADER_LENGTH + 4
    gtids = []
    for _ in range(count):
        domain, server, sequence = struct.unpack_from("<IIQ", event.raw, offset)
        gtids.append((domain, server, sequence))
        offset += 16
    return gtids


def _ends_transaction(event: BinlogEvent, checksum: bool) -> bool:
    """An XID, or a QUERY whose statement is COMMIT or ROLLBACK (Query_log_event::peek_is_commit_rollback)."""
    if event.type_code == XID_EVENT:
        return True
    if event.type_code != QUERY_EVENT:
        return False
    body = event.raw[EVENT_HEADER_LENGTH:len(event.raw) - (4 if checksum else 0)]
    database_length = body[8]
    status_length = struct.unpack_from("<H", body, 11)[0]
    statement = body[13 + status_length + database_length + 1:]
    return statement.strip().upper() in (b"COMMIT", b"ROLLBACK")


def _with_crc(event: bytes, checksum: bool) -> bytes:
    return event[:-4] + struct.pack("<I", zlib.crc32(event[:-4])) if checksum else event


def _fake_gtid_list(server_id: int, gtids: list[Gtid], log_pos: int, checksum: bool) -> bytes:
    """The GTID_LIST MariaDB's sender makes up once a GTID dump reaches the replica's position (fake_gtid_list_event):
    timestamp 0, LOG_EVENT_ARTIFICIAL_F, log_pos the end of the group just skipped, the binlog state seen so far."""
    body = struct.pack("<I", len(gtids)) + b"".join(struct.pack("<IIQ", *gtid) for gtid in sorted(gtids))
    size = EVENT_HEADER_LENGTH + len(body) + (4 if checksum else 0)
    header = struct.pack("<IBIIIH", 0, GTID_LIST_EVENT, server_id, size, log_pos, LOG_EVENT_ARTIFICIAL_F)
    event = header + body
    return event + struct.pack("<I", zlib.crc32(event)) if checksum else event


def _format_description(event: BinlogEvent, *, clear_position: bool, clear_created: bool, checksum: bool) -> bytes:
    """The file's FORMAT_DESCRIPTION as MariaDB's send_format_descriptor_event sends it: the in-use flag cleared
    always; log_pos and `created` zeroed for a dump from past the file's start; `created` zeroed for a GTID dump
    that has not reached the replica's position yet (so the replica keeps its temporary tables)."""
    raw = bytearray(event.raw)
    raw[17] &= ~LOG_EVENT_BINLOG_IN_USE_F & 0xFF
    created = EVENT_HEADER_LENGTH + 2 + 50
    if clear_position:
        raw[13:17] = bytes(4)
    if clear_position or clear_created:
        raw[created:created + 4] = bytes(4)
        return _with_crc(bytes(raw), checksum)
    return bytes(raw)


def binlog_state(files: list[BinlogFile]) -> list[Gtid]:
    """`@@gtid_binlog_state` at the end of `files`: the last GTID per domain and server, from the first file's
    GTID_LIST on."""
    state: dict[tuple[int, int], int] = {}
    for number, file in enumerate(files):
        for event in file.events:
            if event.type_code == GTID_LIST_EVENT and number == 0:
                state.update({(domain, server): sequence for domain, server, sequence in _gtid_list_of(event)})
            elif event.type_code == GTID_EVENT:
                (domain, server, sequence), _ = _gtid_of(event)
                state[(domain, server)] = sequence
    return [(domain, server, sequence) for (domain, server), sequence in state.items()]


def binlog_pos(files: list[BinlogFile]) -> list[Gtid]:
    """`@@gtid_binlog_pos`: the last GTID logged in each domain."""
    last: dict[int, Gtid] = {}
    for number, file in enumerate(files):
        for event in file.events:
            if event.type_code == GTID_LIST_EVENT and number == 0:
                for gtid in _gtid_list_of(event):
                    if gtid[0] not in last or gtid[2] > last[gtid[0]][2]:
                        last[gtid[0]] = gtid
            elif event.type_code == GTID_EVENT:
                gtid, _ = _gtid_of(event)
                last[gtid[0]] = gtid
    return list(last.values())


def mariadb_variables() -> dict[str, str]:
    """The global variables binlake and python-mysql-replication may ask a MariaDB 10.5 for (sorted by name, as
    SHOW VARIABLES lists them): its defaults, except what binlake needs (ROW, FULL images, FULL metadata). No
    MySQL-only ones (`server_uuid`, `gtid_executed`, `gtid_mode`, `binlog_row_value_options`,
    `binlog_transaction_compression`, the `replica` names of 8.0.26)."""
    return {
        "binlog_annotate_row_events": "ON",
        "binlog_checksum": "CRC32",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "expire_logs_days": "0",
        "gtid_binlog_pos": "",
        "gtid_binlog_state": "",
        "gtid_current_pos": "",
        "gtid_domain_id": "0",
        "gtid_slave_pos": "",
        "gtid_strict_mode": "OFF",
        "hostname": "mariadb-105",
        "log_bin": "ON",
        "log_bin_basename": "/var/lib/mysql/mariadb-bin",
        "log_slave_updates": "OFF",
        "port": "3306",
        "require_secure_transport": "OFF",
        "server_id": "1",
        "slave_exec_mode": "STRICT",
    }


def _native_hash(password: str) -> str:
    """The mysql_native_password hash SHOW GRANTS prints: '*' and SHA1(SHA1(password)) in upper-case hex."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


def _mariadb_parse_error(near: str) -> StubError:
    return StubError(
        1064,
        "You have an error in your SQL syntax; check the manual that corresponds to your MariaDB server version "
        f"for the right syntax to use near '{near}' at line 1",
        "42000",
    )


@dataclass
class MariaDBStub(MySQLStub):
    """MySQLStub answering as MariaDB 10.5 (see the module docstring); `serving` gives it MariaDB binlog files."""

    version: str = "10.5.15-MariaDB-1:10.5.15+maria~focal-log"
    version_comment: str = "mariadb.org binary distribution"
    auth_plugin: str = "mysql_native_password"
    #: Global variables as SHOW GLOBAL VARIABLES shows them: `mariadb_variables()`, with the ones given here set over
    #: them (not MySQL's: the MySQL stub's `mysql_variables` are replaced).
    variables: dict[str, str] = field(default_factory=dict)
    grants: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        given = dict(self.variables)
        super().__post_init__()
        self.variables = {**mariadb_variables(), **given}
        if not self.grants:
            self.grants = [
                f"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `{self.user}`@`%` IDENTIFIED BY "
                f"PASSWORD '{_native_hash(self.password)}'",
            ]
        # The replica's session: user variables per connection (each connection is served on its own thread).
        self._session = threading.local()

    @classmethod
    def serving(cls, files: list[BinlogFile], tables: list[StubTable], **settings: Any) -> MariaDBStub:
        """A MariaDB server whose binlog is `files`, its GTID variables read from them."""
        stub = super().serving(files, tables, **settings)
        assert isinstance(stub, MariaDBStub)
        position = _format_state(binlog_pos(stub.binlogs))
        stub.variables.update(gtid_binlog_pos=position, gtid_current_pos=position,
                              gtid_binlog_state=_format_state(binlog_state(stub.binlogs)))
        return stub

    def start(self) -> MariaDBStub:
        super().start()
        self.variables["port"] = str(self.port)
        return self

    # -- wire ----------------------------------------------------------------------------------------

    def _handshake(self, thread_id: int, salt: bytes) -> bytes:
        """MariaDB's handshake v10. The capabilities are the MySQL stub's (TLS only with `tls`; no compression,
        which MariaDB would offer and the stub does not speak) with CLIENT_MYSQL cleared; the collation is the
        server's, utf8mb4_general_ci (45), as the file's ENUM_AND_SET_DEFAULT_CHARSET shows."""
        capabilities = SERVER_CAPABILITIES & ~CLIENT_LONG_PASSWORD  # CLIENT_MYSQL cleared: a MariaDB server
        capabilities |= CLIENT_SSL if self.tls is not None else 0
        return (
            b"\x0a" + b"5.5.5-" + self.version.encode() + b"\0"
            + struct.pack("<I", thread_id)
            + salt[:8] + b"\0"
            + struct.pack("<H", capabilities & 0xFFFF)
            + bytes([UTF8MB4_GENERAL_CI])
            + struct.pack("<H", SERVER_STATUS_AUTOCOMMIT)
            + struct.pack("<H", capabilities >> 16)
            + bytes([len(salt) + 1])
            + b"\0" * 6 + struct.pack("<I", MARIADB_CAPABILITIES)
            + salt[8:] + b"\0"
            + self.auth_plugin.encode() + b"\0"
        )

    def session(self) -> dict[str, str]:
        """This connection's user variables (`SET @name = value`), names in lower case, values unquoted."""
        variables: dict[str, str] | None = getattr(self._session, "variables", None)
        if variables is None:
            variables = self._session.variables = {}
        return variables

    # -- statements --------------------------------------------------------------------------------

    def _native_password_loaded(self) -> bool:
        return True  # MariaDB's default plugin, in every version

    def _log_status(self) -> tuple[list[str], list[tuple[Any, ...]]]:
        raise StubError(1146, "Table 'performance_schema.log_status' doesn't exist", "42S02")  # MySQL 8.0.14+ only

    def _replication_statement(self, upper: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        # binlake sends none of them; MariaDB's columns differ from MySQL's, so the stub does not pretend.
        raise StubError(1105, f"mariadb stub: no answer for {upper!r}")

    def _answer(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]] | None:
        """MariaDB's answer where it differs from MySQL's, else the MySQL stub's; a SET keeps the session's user
        variables for the binlog dump."""
        text = " ".join(sql.strip().rstrip(";").split())
        upper = text.upper()
        if any(upper.startswith(" ".join(start.split()).upper()) for start in self.extra):
            return super()._answer(sql)
        if upper.startswith("SET "):
            for name, value in re.findall(r"@(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|[^,\s]+)", text[4:]):
                if value.startswith("@@"):  # e.g. @master_binlog_checksum = @@global.binlog_checksum
                    value = self.variables.get(value.lower().removeprefix("@@").removeprefix("global."), "")
                self.session()[name.lower()] = value.strip("'")
            return None
        if upper in ("SHOW BINLOG STATUS", "SHOW MASTER STATUS"):
            self._require_monitor()
            columns = ["File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB"]
            if self.variables.get("log_bin") != "ON":
                return columns, []
            name, size = self._logs()[-1]
            return columns, [(name, size, "", "")]
        if upper == "SHOW BINARY LOG STATUS":
            raise _mariadb_parse_error("LOG STATUS")
        if upper in ("SHOW BINARY LOGS", "SHOW MASTER LOGS"):
            self._require_monitor()
            return ["Log_name", "File_size"], list(self._logs())
        if upper == "SHOW GRANTS":
            return [f"Grants for {self.user}@%"], [(grant,) for grant in self.grants]
        match = re.fullmatch(r"SHOW BINLOG EVENTS(?: IN '([^']*)')?(?: FROM (\d+))?(?: LIMIT (?:(\d+), ?)?(\d+))?",
                             text, flags=re.IGNORECASE)
        if match:
            return self._binlog_events(match[1], int(match[2] or 4), int(match[3] or 0),
                                       None if match[4] is None else int(match[4]))
        match = re.fullmatch(r"SELECT BINLOG_GTID_POS\('([^']*)', ?(\d+)\)", text, flags=re.IGNORECASE)
        if match:
            return [f"BINLOG_GTID_POS('{match[1]}', {match[2]})"], [(self._gtid_pos(match[1], int(match[2])),)]
        return super()._answer(sql)

    def _require_monitor(self) -> None:
        joined = " ".join(self.grants).upper()
        if not any(name in joined for name in ("BINLOG MONITOR", "REPLICATION CLIENT", "SUPER", "ALL PRIVILEGES")):
            raise StubError(
                1227, "Access denied; you need (at least one of) the BINLOG MONITOR privilege(s) for this operation",
                "42000",
            )

    def _binlog_events(self, name: str | None, start: int, skip: int,
                       limit: int | None) -> tuple[list[str], list[tuple[Any, ...]]]:
        """SHOW BINLOG EVENTS [IN name] [FROM start] [LIMIT [skip,] limit], as MariaDB 10.5 words each row."""
        self._require_monitor()
        failed = "Error when executing command SHOW BINLOG EVENTS: "
        file = next((file for file in self.binlogs if file.name == (name or self.binlogs[0].name)), None)
        if file is None:
            raise StubError(1220, failed + "Could not find target log")
        if start > len(file.data):
            raise StubError(1220, failed + f"Invalid pos specified. Requested from pos:{start} is greater than "
                                           f"actual file size:{len(file.data)}")
        events = [event for event in file.events if event.pos >= start]
        if start not in {event.pos for event in file.events} and start != len(file.data):
            raise StubError(1220, failed + "Wrong offset or I/O error")
        checksum = file.checksum == "CRC32"
        rows = [(file.name, event.pos, _EVENT_NAMES.get(event.type_code, "Unknown"), event.server_id,
                 event.pos + len(event.raw), _event_info(event, checksum)) for event in events]
        rows = rows[skip:] if limit is None else rows[skip:skip + limit]
        return ["Log_name", "Pos", "Event_type", "Server_id", "End_log_pos", "Info"], rows

    def _gtid_pos(self, name: str, position: int) -> str | None:
        """BINLOG_GTID_POS: the state at `name`:`position`, from the file's GTID_LIST and the GTIDs before it; NULL
        for an unknown file or a position that is not an event's start (MariaDB adds a warning)."""
        file = next((file for file in self.binlogs if file.name == name), None)
        if file is None or (position not in {event.pos for event in file.events} and position != len(file.data)):
            return None
        last: dict[int, Gtid] = {}
        for event in file.events:
            if event.pos >= position:
                break
            if event.type_code == GTID_LIST_EVENT:
                last.update({gtid[0]: gtid for gtid in _gtid_list_of(event)})
            elif event.type_code == GTID_EVENT:
                gtid, _ = _gtid_of(event)
                last[gtid[0]] = gtid
        return _format_state(list(last.values()))

    # -- binlog dump ---------------------------------------------------------------------------------

    def _binlog_dump(self, wire: _Wire, name: str, position: int, flags: int, checksum_aware: bool) -> None:
        """Stream the binlog as MariaDB's binlog sender does (sql/sql_repl.cc, mysql_binlog_send), where it differs
        from MySQL's:

        - a GTID dump: with `@slave_connect_state` set, the file name and position are ignored; the stream starts
          at the start of the newest file whose GTID_LIST the replica's state contains, and skips every event
          group of a domain up to the replica's GTID there (and any group of another server_id before it); once
          the replica's GTID has gone by, a made-up GTID_LIST with the binlog state so far follows its group;
        - ANNOTATE_ROWS events are left out unless the dump asked for them (BINLOG_SEND_ANNOTATE_ROWS_EVENT);
        - the FORMAT_DESCRIPTION goes without its in-use flag, and a fake ROTATE opens every file, not only the
          first;
        - the errors: a position outside the file, a GTID the binlog does not hold, a state older than the
          oldest file.

        Raises:
            StubError: 1236 as MariaDB refuses the dump; 1105 where the stub is not MariaDB (module docstring).
        """
        session = self.session()
        checksum = checksum_aware and session.get("master_binlog_checksum", "").upper() != "NONE"
        if not flags & BINLOG_DUMP_NON_BLOCK:
            raise StubError(1105, "mariadb stub: only a non-blocking dump (BINLOG_DUMP_NON_BLOCK) is served")
        if int(session.get("mariadb_slave_capability", "0") or 0) < CAPABILITY_GTID:
            raise StubError(1105, "mariadb stub: only a replica with @mariadb_slave_capability=4 is served")
        skipping: dict[int, Gtid] | None = None
        names = [file.name for file in self.binlogs]
        name = name.split("\0", 1)[0] or names[0]  # a C string to MariaDB; empty: the first file
        if "slave_connect_state" in session:
            try:
                requested = _parse_state(session["slave_connect_state"])
            except ValueError:
                raise StubError(1105, "Out of memory or malformed slave request when obtaining start position "
                                      "from GTID state") from None
            self._check_start_state(requested)
            name, skipping = self._gtid_start_file(requested)
            position = 4
        if name not in names:
            raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG,
                            "Could not find first log file name in binary log index file")
        first = self.binlogs[names.index(name)]
        if position < 4 or position > len(first.data):
            raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG, _located(
                "Client requested master to start replication from impossible position", name, position, 4, 4))
        if position != len(first.data) and position not in {event.pos for event in first.events}:
            raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG, _located(
                "bogus data in log event", name, position, position, position))
        server_id = int(self.variables.get("server_id", "1"))
        seen: dict[tuple[int, int], int] = {}  # the binlog state the fake GTID_LIST reports
        skip: str | None = None  # "transaction" or "standalone" while a group is skipped
        fake_list_due = False
        for index, file in enumerate(self.binlogs[names.index(name):]):
            start = position if index == 0 else 4
            wire.send(b"\0" + _fake_rotate(server_id, file.name, start, checksum))
            events = file.events
            if events[0].type_code != FORMAT_DESCRIPTION_EVENT:
                raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG,
                                "Failed to find format descriptor event in start of binlog")
            written_with_checksum = file.checksum == "CRC32"
            if written_with_checksum and not checksum_aware:
                raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG, _located(
                    "Slave can not handle replication events with the checksum that master is configured to log",
                    name, position, 4, len(events[0].raw) + 4))
            wire.send(b"\0" + _format_description(
                events[0], clear_position=start > 4, clear_created=bool(skipping), checksum=written_with_checksum))
            for event in events[1:]:
                if event.pos < start:
                    continue
                if event.type_code == GTID_EVENT and skipping:
                    gtid, flags2 = _gtid_of(event)
                    seen[gtid[:2]] = gtid[2]
                    wanted = skipping.get(gtid[0])
                    if wanted is not None:
                        if gtid[1] != wanted[1] or gtid[2] <= wanted[2]:
                            skip = "standalone" if flags2 & FL_STANDALONE else "transaction"
                        if gtid[1] == wanted[1] and gtid[2] >= wanted[2]:
                            fake_list_due = True
                            del skipping[gtid[0]]
                if skip == "standalone":
                    if event.type_code not in _PART_OF_GROUP:
                        skip = None
                elif skip == "transaction":
                    if _ends_transaction(event, written_with_checksum):
                        skip = None
                elif event.type_code != ANNOTATE_ROWS_EVENT or flags & BINLOG_SEND_ANNOTATE_ROWS_EVENT:
                    wire.send(b"\0" + event.raw)
                if fake_list_due and skip is None:
                    state = [(domain, server, sequence) for (domain, server), sequence in seen.items()]
                    wire.send(b"\0" + _fake_gtid_list(server_id, state, event.pos + len(event.raw),
                                                      written_with_checksum))
                    fake_list_due = False
        wire.send(_eof())

    def _check_start_state(self, requested: list[Gtid]) -> None:
        """check_slave_start_position: each GTID of the replica's state must be in the binlog."""
        logged: set[Gtid] = set()
        for file in self.binlogs:
            for event in file.events:
                if event.type_code == GTID_EVENT:
                    logged.add(_gtid_of(event)[0])
                elif event.type_code == GTID_LIST_EVENT:
                    logged.update(_gtid_list_of(event))
        latest = {gtid[0]: gtid[2] for gtid in binlog_pos(self.binlogs)}
        for gtid in requested:
            if gtid in logged:
                continue
            text = f"{gtid[0]}-{gtid[1]}-{gtid[2]}"
            if latest.get(gtid[0], 0) > gtid[2]:
                raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG, (
                    f"Error: connecting slave requested to start from GTID {text}, which is not in the master's "
                    "binlog. Since the master's binlog contains GTIDs with higher sequence numbers, it probably "
                    "means that the slave has diverged due to executing extra erroneous transactions"))
            raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG, (
                f"Error: connecting slave requested to start from GTID {text}, which is not in the master's binlog"))

    def _gtid_start_file(self, requested: list[Gtid]) -> tuple[str, dict[int, Gtid]]:
        """gtid_find_binlog_file: the newest file whose GTID_LIST the state contains, and what to skip in it (a
        domain whose GTID is the list's own starts at the file's start: nothing to skip)."""
        state = {gtid[0]: gtid for gtid in requested}
        for file in reversed(self.binlogs):
            listed = next((_gtid_list_of(event) for event in file.events if event.type_code == GTID_LIST_EVENT), [])
            if all(gtid[0] in state and state[gtid[0]][2] >= gtid[2] for gtid in listed):
                skipping = dict(state)
                for gtid in listed:
                    if state[gtid[0]] == gtid:
                        del skipping[gtid[0]]
                return file.name, skipping
        raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG, (
            "Could not find GTID state requested by slave in any binlog files. Probably the slave state is too old "
            "and required binlog files have been purged."))


_EVENT_NAMES = {
    QUERY_EVENT: "Query", 3: "Stop", 4: "Rotate", FORMAT_DESCRIPTION_EVENT: "Format_desc", XID_EVENT: "Xid",
    19: "Table_map", 23: "Write_rows_v1", 24: "Update_rows_v1", 25: "Delete_rows_v1",
    ANNOTATE_ROWS_EVENT: "Annotate_rows", BINLOG_CHECKPOINT_EVENT: "Binlog_checkpoint", GTID_EVENT: "Gtid",
    GTID_LIST_EVENT: "Gtid_list",
}


def _event_info(event: BinlogEvent, checksum: bool) -> str:
    """SHOW BINLOG EVENTS' Info column for the event types a MariaDB binlog of row events holds (as 10.11 prints
    them, measured on the suite's server; 10.5 prints them alike)."""
    body = event.raw[EVENT_HEADER_LENGTH:len(event.raw) - (4 if checksum else 0)]
    code = event.type_code
    if code == FORMAT_DESCRIPTION_EVENT:
        version = body[2:52].rstrip(b"\0").decode()
        return f"Server ver: {version}, Binlog ver: {struct.unpack_from('<H', body)[0]}"
    if code == GTID_LIST_EVENT:
        return "[" + _format_state(_gtid_list_of(event)) + "]"
    if code == BINLOG_CHECKPOINT_EVENT:
        return body[4:4 + struct.unpack_from("<I", body)[0]].decode()
    if code == GTID_EVENT:
        (domain, server, sequence), flags2 = _gtid_of(event)
        return f"{'' if flags2 & FL_STANDALONE else 'BEGIN '}GTID {domain}-{server}-{sequence}"
    if code == ANNOTATE_ROWS_EVENT:
        return body.decode("utf-8", "replace")
    if code == XID_EVENT:
        return f"COMMIT /* xid={struct.unpack_from('<Q', body)[0]} */"
    if code == 19:
        table_id = int.from_bytes(body[:6], "little")
        database_length = body[8]
        database = body[9:9 + database_length].decode()
        table_length = body[10 + database_length]
        table = body[11 + database_length:11 + database_length + table_length].decode()
        return f"table_id: {table_id} ({database}.{table})"
    if code in (23, 24, 25):
        table_id, flags = int.from_bytes(body[:6], "little"), struct.unpack_from("<H", body, 6)[0]
        return f"table_id: {table_id}" + (" flags: STMT_END_F" if flags & 1 else "")
    if code == QUERY_EVENT:
        database_length, status_length = body[8], struct.unpack_from("<H", body, 11)[0]
        database = body[13 + status_length:13 + status_length + database_length].decode()
        statement = body[13 + status_length + database_length + 1:].decode("utf-8", "replace")
        return f"use `{database}`; {statement}" if database else statement
    if code == 4:
        return f"{body[8:].decode()};pos={struct.unpack_from('<Q', body)[0]}"
    return ""


def _located(message: str, name: str, start: int, last_event: int, last_byte: int) -> str:
    """A fatal dump error with the coordinates MariaDB appends to it."""
    return (f"{message}; the first event '{name}' at {start}, the last event read from '{name}' at {last_event}, "
            f"the last byte read from '{name}' at {last_byte}.")
