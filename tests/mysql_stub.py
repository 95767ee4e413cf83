"""A MySQL-protocol stub server for tests: behaves like a MySQL 8.4 server where binlake can observe it.

No MySQL server package can be installed here (Debian ships MariaDB only), so the paths that differ on
MySQL 8.4 are proven against this stub instead: the handshake (protocol v10, the server version string,
`caching_sha2_password` as the default plugin, fast authentication from the server's cache and full
authentication with the RSA key exchange that pymysql does without TLS), text result sets, OK and ERR
packets, and the statements binlake sends. What it answers is MySQL 8.4's documented behaviour:

- `SHOW MASTER STATUS` is a syntax error (1064) from 8.4 on; `SHOW BINARY LOG STATUS` (8.2+) answers
  File, Position, Binlog_Do_DB, Binlog_Ignore_DB, Executed_Gtid_Set, and needs REPLICATION CLIENT (1227);
- `SHOW BINARY LOGS` answers Log_name, File_size, Encrypted;
- MariaDB-only variables (`gtid_binlog_pos`) are unknown (1193);
- `version` picks what that MySQL version has (`mysql_variables`, `answer`): 8.0.x, 8.4.x or 9.x variables
  (`expire_logs_days` until 8.2, `default_authentication_plugin` until 8.4, the `*_replica_*` names from 8.0.26,
  `binlog_expire_logs_auto_purge` from 8.0.29), statements (`SHOW BINARY LOG STATUS` from 8.2, the MASTER/SLAVE
  statements until 8.4, `SHOW REPLICAS` from 8.0.22) and `mysql_native_password` (on in 8.0, off unless
  `mysql_native_password=ON` in 8.4, gone in 9.0: a login with it is refused with 1524);
- with `tls` (an `ssl.SSLContext`) it offers CLIENT_SSL and upgrades the connection when the client asks, so
  `caching_sha2_password` full authentication takes the password in clear inside TLS (no RSA); with
  `require_secure_transport` a login without TLS is refused with 3159, as MySQL does;
- COM_BINLOG_DUMP without binlog files answers end-of-stream at once (a non-blocking dump at the binlog's end):
  enough to see which statements python-mysql-replication sends before it streams.
- Given binlog files (`MySQLStub.serving`: real MySQL binlog bytes, tests/fixtures/mysql-binlogs/), it is a
  binlog source: `SHOW BINARY LOGS`, the binlog status, `@@binlog_checksum`, `@@server_id` and the version come
  from the files, and COM_BINLOG_DUMP streams them as MySQL's binlog sender does (`_binlog_dump` says how);
  COM_BINLOG_DUMP_GTID streams every transaction the replica's GTID set lacks (`_binlog_dump_gtid`), tagged
  GTIDs included. `rewritten_binlog` builds another server's binlog from real events (a promoted replica's
  history: the same transactions at other positions), so a test can fail a pipeline over between servers.
- Given table definitions (`StubTable`), it answers the information_schema statements binlake sends to find and
  describe tables (`_information_schema` says which, and the one place it is not MySQL).

It is a single in-process server on a free loopback port, one thread per connection; `queries` records
every statement received, in order, for the tests to assert on.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import ssl
import struct
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Capability flags (https://dev.mysql.com/doc/dev/mysql-server/latest/group__group__cs__capabilities__flags.html).
CLIENT_LONG_PASSWORD = 0x1
CLIENT_FOUND_ROWS = 0x2
CLIENT_LONG_FLAG = 0x4
CLIENT_CONNECT_WITH_DB = 0x8
CLIENT_PROTOCOL_41 = 0x200
CLIENT_SSL = 0x800
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_MULTI_STATEMENTS = 0x10000
CLIENT_MULTI_RESULTS = 0x20000
CLIENT_PLUGIN_AUTH = 0x80000
CLIENT_CONNECT_ATTRS = 0x100000
CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA = 0x200000
#: Without CLIENT_SSL, added when the stub has a `tls` context: without TLS, pymysql's caching_sha2_password
#: full authentication must use RSA.
SERVER_CAPABILITIES = (
    CLIENT_LONG_PASSWORD | CLIENT_FOUND_ROWS | CLIENT_LONG_FLAG | CLIENT_CONNECT_WITH_DB | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS | CLIENT_SECURE_CONNECTION | CLIENT_MULTI_STATEMENTS | CLIENT_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH | CLIENT_CONNECT_ATTRS | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
)
SERVER_STATUS_AUTOCOMMIT = 0x2

COM_QUIT, COM_INIT_DB, COM_QUERY, COM_PING, COM_BINLOG_DUMP, COM_REGISTER_SLAVE = 0x01, 0x02, 0x03, 0x0E, 0x12, 0x15
COM_BINLOG_DUMP_GTID = 0x1E
#: COM_BINLOG_DUMP flag: answer EOF at the end of the binlog instead of waiting for more.
BINLOG_DUMP_NON_BLOCK = 0x01
MYSQL_TYPE_LONGLONG, MYSQL_TYPE_VAR_STRING = 0x08, 0xFD
UTF8MB4_0900_AI_CI = 255



@dataclass(frozen=True)
class StubError(Exception):
    """An ERR packet the stub answers with."""

    code: int
    message: str
    sqlstate: str = "HY000"


def _parse_error(near: str) -> StubError:
    return StubError(
        1064,
        "You have an error in your SQL syntax; check the manual that corresponds to your MySQL server version "
        f"for the right syntax to use near '{near}' at line 1",
        "42000",
    )


# -- binlog files ------------------------------------------------------------------------------------
# Binlog format v4 (https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_replication_binlog_event.html):
# the magic bytes, then events with a 19-byte common header (timestamp, type code, server_id, event_size,
# log_pos = the event's end, flags).

BINLOG_MAGIC = b"\xfebin"
EVENT_HEADER_LENGTH = 19
ROTATE_EVENT, FORMAT_DESCRIPTION_EVENT = 4, 15
QUERY_EVENT, XID_EVENT, GTID_EVENT, PREVIOUS_GTIDS_EVENT, GTID_TAGGED_EVENT = 2, 16, 33, 35, 42
#: Events that open a transaction (GTID, ANONYMOUS_GTID, GTID_TAGGED), and events outside every transaction.
_GROUP_STARTS = frozenset({GTID_EVENT, 34, GTID_TAGGED_EVENT})
_NOT_IN_GROUPS = frozenset({3, ROTATE_EVENT, FORMAT_DESCRIPTION_EVENT, PREVIOUS_GTIDS_EVENT})
#: Common-header flag of an event the server made up for the stream (not in the file): the fake ROTATE.
LOG_EVENT_ARTIFICIAL_F = 0x20
#: ER_MASTER_FATAL_ERROR_READING_BINLOG (ER_SOURCE_FATAL_ERROR_READING_BINLOG from 8.0.26): every refused dump.
ER_SOURCE_FATAL_ERROR_READING_BINLOG = 1236


@dataclass(frozen=True)
class BinlogEvent:
    """One event of a binlog file, its bytes as the file holds them (header, body, checksum)."""

    pos: int
    type_code: int
    server_id: int
    raw: bytes


@dataclass(frozen=True)
class BinlogFile:
    """A binlog file the stub serves under `name` (a real server's file name, e.g. "binlog.000018")."""

    name: str
    data: bytes

    @classmethod
    def read(cls, path: Path, name: str | None = None) -> BinlogFile:
        return cls(name or path.name, path.read_bytes())

    @property
    def events(self) -> list[BinlogEvent]:
        if self.data[:4] != BINLOG_MAGIC:
            raise ValueError(f"{self.name} is not a binlog file (no magic bytes)")
        events, pos = [], 4
        while pos < len(self.data):
            _, type_code, server_id, size = struct.unpack_from("<IBII", self.data, pos)
            events.append(BinlogEvent(pos, type_code, server_id, self.data[pos:pos + size]))
            pos += size
        return events

    @property
    def format_description(self) -> BinlogEvent:
        first = self.events[0]
        if first.type_code != FORMAT_DESCRIPTION_EVENT:
            raise ValueError(f"{self.name} does not start with a FORMAT_DESCRIPTION event")
        return first

    @property
    def server_version(self) -> str:
        """The FORMAT_DESCRIPTION's server version (50 bytes after the 2-byte binlog version)."""
        body = self.format_description.raw[EVENT_HEADER_LENGTH:]
        return body[2:52].rstrip(b"\0").decode()

    @property
    def checksum(self) -> str:
        """binlog_checksum as the file was written: the FORMAT_DESCRIPTION's last byte before its own CRC32."""
        return "CRC32" if self.format_description.raw[-5] == 1 else "NONE"

    @property
    def rotates_to(self) -> str | None:
        """The next file's name, when the file ends with the ROTATE the server writes on closing it."""
        last = self.events[-1]
        if last.type_code != ROTATE_EVENT:
            return None
        checksum = 4 if self.checksum == "CRC32" else 0
        return last.raw[EVENT_HEADER_LENGTH + 8:len(last.raw) - checksum].decode()


def _with_checksum(event: bytes, checksum: bool) -> bytes:
    return event + struct.pack("<I", zlib.crc32(event)) if checksum else event


def _fake_rotate(server_id: int, name: str, position: int, checksum: bool) -> bytes:
    """The ROTATE MySQL's binlog sender makes up to open a dump (Binlog_sender::fake_rotate_event): timestamp and
    log_pos 0, LOG_EVENT_ARTIFICIAL_F, the position and file name the dump starts at; a CRC32 when the replica
    announced it reads checksums."""
    body = struct.pack("<Q", position) + name.encode()
    size = EVENT_HEADER_LENGTH + len(body) + (4 if checksum else 0)
    header = struct.pack("<IBIIIH", 0, ROTATE_EVENT, server_id, size, 0, LOG_EVENT_ARTIFICIAL_F)
    return _with_checksum(header + body, checksum)


def _format_description_for(event: BinlogEvent, start: int, checksum: bool) -> bytes:
    """The file's FORMAT_DESCRIPTION as the binlog sender sends it first: as in the file for a dump from the file's
    start; for a dump from further on, with log_pos 0 (the replica must not take it for a position, as
    Binlog_sender::send_format_description_event marks it) and its checksum computed again."""
    if start <= 4:
        return event.raw
    bare = event.raw[:-4] if checksum else event.raw  # without its checksum
    patched = bare[:13] + struct.pack("<I", 0) + bare[17:]
    return _with_checksum(patched, checksum)


# -- server versions ---------------------------------------------------------------------------------

def version_tuple(version: str) -> tuple[int, int, int]:
    major, minor, patch = ([int(part) for part in re.findall(r"\d+", version)[:3]] + [0, 0, 0])[:3]
    return major, minor, patch


def mysql_variables(version: str) -> dict[str, str]:
    """The global variables binlake may ask for, as a MySQL of `version` has them (its defaults, except what
    binlake needs: `binlog_row_metadata=FULL`, GTIDs on). From MySQL's option and variable change lists
    (dev.mysql.com/doc/mysqld-version-reference): `binlog_transaction_compression` from 8.0.20, the `replica`
    names of `log_slave_updates` and `slave_exec_mode` from 8.0.26 (the old names stay, deprecated),
    `binlog_expire_logs_auto_purge` from 8.0.29, `expire_logs_days` removed in 8.2.0,
    `default_authentication_plugin` removed in 8.4.0, where `mysql_native_password` (OFF) appeared; 9.0 removed
    that plugin and its variable. `binlog_format` is deprecated from 8.0.34 and still there."""
    at = version_tuple(version)
    variables = {
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_row_metadata": "FULL",
        "binlog_row_value_options": "",
        "binlog_checksum": "CRC32",
        "binlog_expire_logs_seconds": "2592000",
        "log_slave_updates": "ON",
        "slave_exec_mode": "STRICT",
        "require_secure_transport": "OFF",
        "server_id": "1",
        "server_uuid": "3e11fa47-71ca-11e1-9e33-c80aa9429562",
        "hostname": "mysql-stub",
        "port": "3306",
        "log_bin_basename": "/var/lib/mysql/binlog",
        "gtid_mode": "ON",
        "enforce_gtid_consistency": "ON",
        "gtid_executed": "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-57",
    }
    if at >= (8, 0, 20):
        variables["binlog_transaction_compression"] = "OFF"
    if at >= (8, 0, 26):
        variables.update(log_replica_updates="ON", replica_exec_mode="STRICT")
    if at >= (8, 0, 29):
        variables["binlog_expire_logs_auto_purge"] = "ON"
    if at < (8, 2, 0):
        variables["expire_logs_days"] = "0"
    if at < (8, 4, 0):
        variables["default_authentication_plugin"] = "caching_sha2_password"
    elif at < (9, 0, 0):
        variables["mysql_native_password"] = "OFF"
    return variables


#: Variables MySQL 8.0.26 gave a new name, keeping the old one as a deprecated alias of the same variable.
_RENAMED_VARIABLES = (("log_slave_updates", "log_replica_updates"), ("slave_exec_mode", "replica_exec_mode"))


# -- tables ------------------------------------------------------------------------------------------

_INTEGER_PRECISION = {"tinyint": 3, "smallint": 5, "mediumint": 7, "int": 10, "bigint": 19}
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"})


@dataclass(frozen=True)
class StubColumn:
    """A column as information_schema.COLUMNS describes it, from its type as SHOW CREATE TABLE writes it."""

    name: str
    column_type: str
    nullable: bool = True
    default: str | None = None
    charset: str = "utf8mb4"
    generated: bool = False

    @property
    def data_type(self) -> str:
        return re.split(r"[\s(]", self.column_type.strip(), maxsplit=1)[0].lower()

    def information_schema(self) -> tuple[Any, ...]:
        """COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION,
        COLUMN_DEFAULT, CHARACTER_SET_NAME, COLLATION_NAME, as MySQL 8 fills them for this type."""
        data_type, arguments = self.data_type, [int(n) for n in re.findall(r"\d+", self.column_type.split(")")[0])]
        precision: int | None = None
        scale: int | None = None
        fsp: int | None = None
        if data_type in _INTEGER_PRECISION:
            unsigned_bigint = data_type == "bigint" and "unsigned" in self.column_type.lower()
            precision = 20 if unsigned_bigint else _INTEGER_PRECISION[data_type]
            scale = 0
        elif data_type in ("decimal", "numeric"):
            precision, scale = (arguments + [10, 0])[0], (arguments[1:] + [0])[0]
        elif data_type == "bit":
            precision = (arguments + [1])[0]
        elif data_type in ("time", "datetime", "timestamp"):
            fsp = (arguments + [0])[0]
        charset = self.charset if data_type in _TEXT_TYPES else None
        # MySQL 8's default collation of each character set the stub's tables use.
        collation = None if charset is None else ("utf8mb4_0900_ai_ci" if charset == "utf8mb4" else
                                                  "binary" if charset == "binary" else f"{charset}_general_ci")
        return (self.name, data_type, self.column_type, "YES" if self.nullable else "NO", precision, scale, fsp,
                self.default, charset, collation)


@dataclass(frozen=True)
class StubTable:
    """A table the stub's information_schema knows (an InnoDB base table)."""

    database: str
    name: str
    columns: tuple[StubColumn, ...]
    primary_key: tuple[str, ...]


@dataclass
class MySQLStub:
    """The server's state; tests change it between connections (it is read per statement)."""

    version: str = "8.4.3"
    version_comment: str = "MySQL Community Server - GPL"
    auth_plugin: str = "caching_sha2_password"
    user: str = "cdc"
    password: str = "cdc-password"
    #: Global variables as SHOW GLOBAL VARIABLES shows them: `mysql_variables(version)` (that version's defaults
    #: plus what binlake needs), with the ones given here set over them.
    variables: dict[str, str] = field(default_factory=dict)
    grants: list[str] = field(default_factory=lambda: [
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`",
        # MySQL shows a dynamic privilege on a line of its own; the snapshot's log_status read needs it.
        "GRANT BACKUP_ADMIN ON *.* TO `cdc`@`%`",
        "GRANT SELECT ON `shop`.* TO `cdc`@`%`",
    ])
    binary_logs: list[tuple[str, int]] = field(
        default_factory=lambda: [("binlog.000002", 1_201), ("binlog.000003", 157)]
    )
    #: Result sets for other statements, by the statement's start (e.g. the information_schema queries).
    extra: dict[str, tuple[list[str], list[tuple[Any, ...]]] | StubError] = field(default_factory=dict)
    #: What VERSION() answers when it differs from the handshake's version (a proxy, a relabelled build).
    reported_version: str | None = None
    #: Statements received, in order (COM_BINLOG_DUMP is recorded as "<COM_BINLOG_DUMP file:pos>").
    queries: list[str] = field(default_factory=list)
    #: Statements answered with an ERR packet, as "statement -> code": what this server version rejects.
    refused: list[str] = field(default_factory=list)
    #: Users in the server's caching_sha2_password cache: fast authentication succeeds for them. MySQL empties
    #: it on restart and FLUSH PRIVILEGES, so the first login after either takes the full (RSA) path, which adds them.
    sha2_cache: set[str] = field(default_factory=set)
    #: How each login authenticated: "native", "sha2-fast", "sha2-full-rsa", "sha2-full-tls".
    logins: list[str] = field(default_factory=list)
    #: Per successful login, whether the connection was inside TLS.
    secure_logins: list[bool] = field(default_factory=list)
    #: Binlog files the server keeps, oldest first; when set they replace `binary_logs` and COM_BINLOG_DUMP
    #: streams them (see `serving`).
    binlogs: list[BinlogFile] = field(default_factory=list)
    #: Tables information_schema shows.
    tables: list[StubTable] = field(default_factory=list)
    #: TLS the server offers (CLIENT_SSL), with its certificate loaded; None: no TLS, as before.
    tls: ssl.SSLContext | None = None

    @classmethod
    def serving(cls, files: list[BinlogFile], tables: list[StubTable], **settings: Any) -> MySQLStub:
        """A server whose binlog is `files`: the version, server_id and binlog_checksum its files were written with.

        A file that ends with the ROTATE of its closing names the file the server went on in; MySQL starts
        every file with a FORMAT_DESCRIPTION, so the stub keeps that next file holding only this one's
        FORMAT_DESCRIPTION (the same bytes: position 4 and its end are the same in every file).
        """
        files = list(files)
        following = files[-1].rotates_to
        if following is not None:
            files.append(BinlogFile(following, BINLOG_MAGIC + files[-1].format_description.raw))
        stub = cls(version=files[-1].server_version, binlogs=files, tables=list(tables), **settings)
        stub.variables["binlog_checksum"] = files[-1].checksum
        stub.variables["server_id"] = str(files[-1].format_description.server_id)
        return stub

    def __post_init__(self) -> None:
        self.variables = {**mysql_variables(self.version), **self.variables}
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._rsa_key: Any = None
        self._clients: list[socket.socket] = []
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> MySQLStub:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self._listener = listener
        self.port = listener.getsockname()[1]
        thread = threading.Thread(target=self._accept, name="mysql-stub-accept", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
            self._listener = None
        # Like a server shutting down, close the connections still open (a client may keep one after its work).
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> MySQLStub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _accept(self) -> None:
        listener = self._listener  # `stop` clears the attribute while this thread may still be in accept()
        assert listener is not None
        thread_id = 7
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            thread_id += 1
            with self._lock:
                self._clients.append(client)
            thread = threading.Thread(target=self._serve, args=(client, thread_id), daemon=True)
            thread.start()
            self._threads.append(thread)

    # -- wire ----------------------------------------------------------------------------------------

    def _serve(self, client: socket.socket, thread_id: int) -> None:
        wire = _Wire(client)
        try:
            if self._authenticate(wire, thread_id):
                self.secure_logins.append(wire.sock is not client)
                self._commands(wire)
        except (ConnectionError, OSError, EOFError):
            pass
        finally:
            wire.sock.close()  # the TLS socket when the connection was upgraded (it owns the descriptor then)
            client.close()

    def _upgrade_to_tls(self, wire: _Wire, client: socket.socket) -> None:
        """Wrap the connection in TLS after the client's SSLRequest, as MySQL does before the HandshakeResponse."""
        assert self.tls is not None
        secure = self.tls.wrap_socket(client, server_side=True)
        with self._lock:  # `stop` shuts the connections down: the TLS socket is the one that works now
            self._clients = [secure if open_client is client else open_client for open_client in self._clients]
        wire.sock = secure

    def _native_password_loaded(self) -> bool:
        """mysql_native_password: loaded in 8.0, only with mysql_native_password=ON in 8.4, removed in 9.0."""
        if self._version() >= (9, 0, 0):
            return False
        if self._version() >= (8, 4, 0):
            return self.variables.get("mysql_native_password", "OFF") == "ON"
        return True

    def _authenticate(self, wire: _Wire, thread_id: int) -> bool:
        salt = bytes(b % 94 + 33 for b in os.urandom(20))  # printable and never NUL, like MySQL's
        wire.send(self._handshake(thread_id, salt))
        response = wire.receive()
        secure = False  # whether the connection went inside TLS
        if len(response) == 32 and struct.unpack("<I", response[:4])[0] & CLIENT_SSL and self.tls is not None:
            # An SSLRequest: the first 32 bytes of a HandshakeResponse41; the rest follows inside TLS.
            self._upgrade_to_tls(wire, wire.sock)
            secure = True
            response = wire.receive()
        user, auth_response, plugin = _parse_handshake_response(response)
        if self.variables.get("require_secure_transport") == "ON" and not secure:
            wire.send(_err(StubError(
                3159, "Connections using insecure transport are prohibited while --require_secure_transport=ON."
            )))
            return False
        if user != self.user:
            return self._deny(wire, user)
        if self.auth_plugin == "mysql_native_password" and not self._native_password_loaded():
            # The account's plugin is not there (8.4 without mysql_native_password=ON, any 9.x).
            wire.send(_err(StubError(1524, "Plugin 'mysql_native_password' is not loaded")))
            return False
        if self.auth_plugin == "mysql_native_password":
            if plugin != "mysql_native_password":
                wire.send(b"\xfe" + b"mysql_native_password\0" + salt + b"\0")
                auth_response = wire.receive()
            if auth_response != _native_scramble(self.password.encode(), salt):
                return self._deny(wire, user)
            self.logins.append("native")
            wire.send(_ok())
            return True
        # caching_sha2_password, MySQL 8's default.
        if plugin != "caching_sha2_password":
            wire.send(b"\xfe" + b"caching_sha2_password\0" + salt + b"\0")
            auth_response = wire.receive()
        if auth_response != _sha2_scramble(self.password.encode(), salt):
            return self._deny(wire, user)
        with self._lock:
            cached = user in self.sha2_cache
        if cached:
            wire.send(b"\x01\x03")  # fast_auth_success, then OK
            self.logins.append("sha2-fast")
            wire.send(_ok())
            return True
        wire.send(b"\x01\x04")  # perform_full_authentication
        request = wire.receive()
        if secure:
            # Inside TLS the client sends the password itself, NUL-terminated: no key exchange.
            if request != self.password.encode() + b"\0":
                return self._deny(wire, user)
            with self._lock:
                self.sha2_cache.add(user)
            self.logins.append("sha2-full-tls")
            wire.send(_ok())
            return True
        if request != b"\x02":  # without TLS, only the RSA key exchange
            return self._deny(wire, user)
        wire.send(b"\x01" + self._public_key_pem())
        encrypted = wire.receive()
        if self._decrypt_password(encrypted, salt) != self.password.encode() + b"\0":
            return self._deny(wire, user)
        with self._lock:
            self.sha2_cache.add(user)
        self.logins.append("sha2-full-rsa")
        wire.send(_ok())
        return True

    def _deny(self, wire: _Wire, user: str) -> bool:
        wire.send(_err(StubError(1045, f"Access denied for user '{user}'@'localhost' (using password: YES)", "28000")))
        return False

    def _handshake(self, thread_id: int, salt: bytes) -> bytes:
        capabilities = SERVER_CAPABILITIES | (CLIENT_SSL if self.tls is not None else 0)
        return (
            b"\x0a" + self.version.encode() + b"\0"
            + struct.pack("<I", thread_id)
            + salt[:8] + b"\0"
            + struct.pack("<H", capabilities & 0xFFFF)
            + bytes([UTF8MB4_0900_AI_CI])
            + struct.pack("<H", SERVER_STATUS_AUTOCOMMIT)
            + struct.pack("<H", capabilities >> 16)
            + bytes([len(salt) + 1])
            + b"\0" * 10
            + salt[8:] + b"\0"
            + self.auth_plugin.encode() + b"\0"
        )

    def _public_key_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        with self._lock:
            if self._rsa_key is None:
                self._rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        return self._rsa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def _decrypt_password(self, encrypted: bytes, salt: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        try:
            plain = self._rsa_key.decrypt(
                encrypted, padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
            )
        except ValueError:
            return b""
        return bytes(byte ^ salt[i % len(salt)] for i, byte in enumerate(plain))

    def _commands(self, wire: _Wire) -> None:
        # Whether this connection announced that it reads event checksums (SET @master_binlog_checksum, or its
        # 8.0.26+ name @source_binlog_checksum).
        checksum_aware = False
        while True:
            packet = wire.receive(new_command=True)
            command, body = packet[0], packet[1:]
            if command == COM_QUIT:
                return
            if command in (COM_PING, COM_INIT_DB, COM_REGISTER_SLAVE):
                wire.send(_ok())
                continue
            if command == COM_BINLOG_DUMP:
                position, flags, _server_id = struct.unpack("<IHI", body[:10])
                self.queries.append(f"<COM_BINLOG_DUMP {body[10:].decode()}:{position}>")
                if not self.binlogs:
                    wire.send(b"\xfe\0\0\0\0")  # end of a non-blocking dump
                    continue
                try:
                    self._binlog_dump(wire, body[10:].decode(), position, flags, checksum_aware)
                except StubError as error:
                    wire.send(_err(error))
                continue
            if command == COM_BINLOG_DUMP_GTID:
                flags, _server_id, name_size = struct.unpack_from("<HII", body)
                position, data_size = struct.unpack_from("<QI", body, 10 + name_size)
                requested = decode_gtid_set(body[10 + name_size + 12:10 + name_size + 12 + data_size])
                self.queries.append(f"<COM_BINLOG_DUMP_GTID {format_gtid_set(requested)}>")
                try:
                    self._binlog_dump_gtid(wire, requested, flags, checksum_aware)
                except StubError as error:
                    wire.send(_err(error))
                continue
            if command != COM_QUERY:
                wire.send(_err(StubError(1047, "Unknown command", "08S01")))
                continue
            sql = body.decode("utf-8")
            self.queries.append(sql)
            if sql.strip().upper().startswith(("SET @MASTER_BINLOG_CHECKSUM", "SET @SOURCE_BINLOG_CHECKSUM")):
                checksum_aware = True
            try:
                result = self.answer(sql)
            except StubError as error:
                wire.send(_err(error))
                continue
            if result is None:
                wire.send(_ok())
            else:
                for reply in _result_set(*result):
                    wire.send(reply)

    # -- binlog dump ---------------------------------------------------------------------------------

    def _binlog_dump(self, wire: _Wire, name: str, position: int, flags: int, checksum_aware: bool) -> None:
        """Stream the binlog from `name`:`position` as MySQL's binlog sender does (sql/rpl_binlog_sender.cc):
        a fake ROTATE naming the start, the file's FORMAT_DESCRIPTION, then every event from `position` on, the
        following files each from its FORMAT_DESCRIPTION on; each event in a packet of its own after an OK byte
        (0x00), with the checksum the file holds. A non-blocking dump (BINLOG_DUMP_NON_BLOCK, as binlake's) ends
        with an EOF packet at the end of the last file; a blocking one would wait for new events, which the stub
        never has, so it is refused.

        Raises:
            StubError: 1236 as MySQL refuses the dump: an unknown file, a position that is not an event's start,
                a replica that does not read checksums from a server that writes them.
        """
        names = [file.name for file in self.binlogs]
        if name not in names:
            raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG,
                            "Could not find first log file name in binary log index file")
        first = self.binlogs[names.index(name)]
        checksum = first.checksum == "CRC32"
        if checksum and not checksum_aware:
            raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG,
                            "Replica can not handle replication events with the checksum that source is configured "
                            "to log")
        if position < 4 or (position not in {event.pos for event in first.events} and position != len(first.data)):
            raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG,
                            f"Client requested source to start replication from invalid position {position}")
        self._stream(wire, names.index(name), position, flags, checksum, skipped=None)

    def _stream(self, wire: _Wire, first: int, position: int, flags: int, checksum: bool,
                skipped: GtidSet | None) -> None:
        """The dump's events from file `first` at `position` on; transactions whose GTID is in `skipped` left out."""
        if not flags & BINLOG_DUMP_NON_BLOCK:
            raise StubError(1105, "mysql stub: only a non-blocking dump (BINLOG_DUMP_NON_BLOCK) is served")
        server_id = int(self.variables.get("server_id", "1"))
        wire.send(b"\0" + _fake_rotate(server_id, self.binlogs[first].name, position, checksum))
        for index, file in enumerate(self.binlogs[first:]):
            start = position if index == 0 else 4
            events = file.events
            wire.send(b"\0" + _format_description_for(events[0], start, checksum))
            skipping = False
            for event in events[1:]:
                if event.type_code in _GROUP_STARTS or event.type_code in _NOT_IN_GROUPS:
                    gtid = event_gtid(event) if skipped is not None else None
                    skipping = gtid is not None and gtid_in(skipped or {}, *gtid)
                if event.pos >= start and not skipping:
                    wire.send(b"\0" + event.raw)
        wire.send(_eof())

    def _binlog_dump_gtid(self, wire: _Wire, requested: GtidSet, flags: int, checksum_aware: bool) -> None:
        """Stream what a replica with GTID set `requested` lacks, as MySQL's binlog sender does for
        COM_BINLOG_DUMP_GTID (sql/rpl_binlog_sender.cc, "Replication with GTIDs"): refused (1236) when the source
        purged transactions the set lacks or the set holds transactions the source never had;
        else from the start of the newest file whose PREVIOUS_GTIDS the set contains (a fake ROTATE to it,
        its FORMAT_DESCRIPTION), every transaction whose GTID is in the set left out.
        """
        if not self.binlogs:
            wire.send(b"\xfe\0\0\0\0")
            return
        purged = parse_gtid_set(self.variables.get("gtid_purged", ""))
        if not gtid_set_contains(requested, purged):
            # ER_SOURCE_HAS_PURGED_REQUIRED_GTIDS (1789) is the sender's reason; the replica reads it as a 1236.
            raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG, "Cannot replicate because the source purged "
                            "required binary logs. Replicate the missing transactions from elsewhere, or provision a "
                            "new replica from backup.")
        if not gtid_set_contains(parse_gtid_set(self.variables.get("gtid_executed", "")), requested):
            raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG, "Replica has more GTIDs than the source has, "
                            "using the source's SERVER_UUID.")
        checksum = self.binlogs[0].checksum == "CRC32"
        if checksum and not checksum_aware:
            raise StubError(ER_SOURCE_FATAL_ERROR_READING_BINLOG,
                            "Replica can not handle replication events with the checksum that source is configured "
                            "to log")
        first = 0
        for index, file in enumerate(self.binlogs):
            previous = next((event for event in file.events if event.type_code == PREVIOUS_GTIDS_EVENT), None)
            body = previous.raw[EVENT_HEADER_LENGTH:len(previous.raw) - (4 if checksum else 0)] if previous else b""
            if not previous or gtid_set_contains(requested, decode_gtid_set(body)):
                first = index
        self._stream(wire, first, 4, flags, checksum, skipped=requested)

    def _logs(self) -> list[tuple[str, int]]:
        if self.binlogs:
            return [(file.name, len(file.data)) for file in self.binlogs]
        return self.binary_logs

    # -- statements --------------------------------------------------------------------------------

    def answer(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]] | None:
        """Columns and rows of a result set, None for OK; raises StubError for an ERR packet (recorded in
        `refused`)."""
        try:
            return self._answer(sql)
        except StubError as error:
            self.refused.append(f"{' '.join(sql.split())} -> {error.code}")
            raise

    def _answer(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]] | None:
        text = " ".join(sql.strip().rstrip(";").split())
        upper = text.upper()
        for start, result in self.extra.items():
            if upper.startswith(" ".join(start.split()).upper()):
                if isinstance(result, StubError):
                    raise result
                return result
        if upper.startswith("SET "):
            return None
        if upper == "SHOW MASTER STATUS":
            if self._version() >= (8, 4, 0):
                raise _parse_error("MASTER STATUS")
            return self._binlog_status()
        if upper == "SHOW BINARY LOG STATUS":
            if self._version() < (8, 2, 0):
                raise _parse_error("BINARY LOG STATUS")
            return self._binlog_status()
        if upper in ("SHOW BINARY LOGS", "SHOW MASTER LOGS"):
            if upper == "SHOW MASTER LOGS" and self._version() >= (8, 4, 0):
                raise _parse_error("MASTER LOGS")
            self._require("REPLICATION CLIENT", "SUPER, REPLICATION CLIENT")
            return ["Log_name", "File_size", "Encrypted"], [(name, size, "No") for name, size in self._logs()]
        if upper in ("SHOW SLAVE HOSTS", "SHOW SLAVE STATUS", "SHOW REPLICAS", "SHOW REPLICA STATUS"):
            return self._replication_statement(upper)
        if upper == "SHOW GRANTS":
            return [f"Grants for {self.user}@%"], [(grant,) for grant in self.grants]
        match = re.match(r"^SHOW (?:GLOBAL |SESSION )?VARIABLES (WHERE VARIABLE_NAME IN|LIKE) (.*)$", upper)
        if match:
            wanted = [name.lower() for name in re.findall(r"'([^']*)'", text)]
            rows = [(name, value) for name, value in self._global_variables().items()
                    if any(re.fullmatch(pattern.replace("%", ".*").replace("_", "."), name) for pattern in wanted)]
            return ["Variable_name", "Value"], rows
        if upper == "SELECT LOCAL FROM PERFORMANCE_SCHEMA.LOG_STATUS":
            return self._log_status()
        if "INFORMATION_SCHEMA." in upper:
            return self._information_schema(text)
        if upper.startswith("SELECT "):
            return self._select(text[len("SELECT "):])
        raise StubError(1105, f"mysql stub: no answer for {text[:80]!r}")

    def _information_schema(self, text: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The information_schema statements binlake sends (`cdc_lib.source.server`, `cdc_lib.binlog.stream`,
        `cdc_lib.pipeline.schema_changes`), answered from `tables` (the origins of some real binlog fixtures created
        their test tables in the `mysql` schema, as MySQL lets a user do).
        """
        upper = text.upper()
        named = re.search(r"TABLE_SCHEMA = '((?:[^'\\]|\\.)*)' AND TABLE_NAME = '((?:[^'\\]|\\.)*)'", text)
        table = next((t for t in self.tables if named and (t.database, t.name) == named.groups()), None)
        if upper.startswith("SELECT TABLE_SCHEMA, TABLE_NAME FROM INFORMATION_SCHEMA.TABLES"):
            return ["TABLE_SCHEMA", "TABLE_NAME"], [(t.database, t.name) for t in self.tables]
        if upper.startswith("SELECT TABLE_SCHEMA, TABLE_NAME, ENGINE FROM INFORMATION_SCHEMA.TABLES"):
            return ["TABLE_SCHEMA", "TABLE_NAME", "ENGINE"], [(t.database, t.name, "InnoDB") for t in self.tables]
        if upper.startswith("SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE"):
            columns = ["COLUMN_NAME", "DATA_TYPE", "COLUMN_TYPE", "IS_NULLABLE", "NUMERIC_PRECISION", "NUMERIC_SCALE",
                       "DATETIME_PRECISION", "COLUMN_DEFAULT", "CHARACTER_SET_NAME", "COLLATION_NAME"]
            return columns, [column.information_schema() for column in (table.columns if table else ())]
        if upper.startswith("SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.KEY_COLUMN_USAGE"):
            return ["COLUMN_NAME"], [(name,) for name in (table.primary_key if table else ())]
        if upper.startswith("SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS") and "GENERATED" not in upper:
            # python-mysql-replication's own query for names a TABLE_MAP lacks (`use_column_name_cache`).
            return ["COLUMN_NAME"], [(column.name,) for column in (table.columns if table else ())]
        if upper.startswith("SELECT COLUMN_NAME FROM INFORMATION_SCHEMA.COLUMNS") and "GENERATED" in upper:
            asked = set(re.findall(r"'([^']*)'", text.split("COLUMN_NAME IN", 1)[-1]))
            generated = [(c.name,) for c in (table.columns if table else ()) if c.generated and c.name in asked]
            return ["COLUMN_NAME"], generated
        raise StubError(1105, f"mysql stub: no answer for {text[:80]!r}")

    def _global_variables(self) -> dict[str, str]:
        """`variables`, where an old name and its 8.0.26 `replica` name are one variable: a test that sets the new
        name sets both, as `SET GLOBAL` does on MySQL."""
        variables = dict(self.variables)
        for old, new in _RENAMED_VARIABLES:
            if old in variables and new in variables:
                variables[old] = variables[new]
        return variables

    def _version(self) -> tuple[int, int, int]:
        return version_tuple(self.version)

    def _require(self, privilege: str, names: str) -> None:
        joined = " ".join(self.grants).upper()
        if privilege not in joined and "ALL PRIVILEGES ON *.*" not in joined:
            raise StubError(
                1227, f"Access denied; you need (at least one of) the {names} privilege(s) for this operation", "42000"
            )

    def _replication_statement(self, upper: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The replica statements of a server that has no replicas and is none: SHOW REPLICAS and SHOW REPLICA
        STATUS from 8.0.22, their SLAVE names until 8.4 removed them (binlake sends none of them)."""
        old = "SLAVE" in upper
        if (old and self._version() >= (8, 4, 0)) or (not old and self._version() < (8, 0, 22)):
            raise _parse_error(upper.removeprefix("SHOW "))
        self._require("REPLICATION", "REPLICATION SLAVE" if "HOSTS" in upper or "REPLICAS" in upper
                      else "SUPER, REPLICATION CLIENT")
        if upper.endswith("STATUS"):
            return ["Replica_IO_State", "Source_Host"], []
        return ["Server_Id", "Host", "Port", "Source_Id", "Replica_UUID"], []

    def _log_status(self) -> tuple[list[str], list[tuple[Any, ...]]]:
        """performance_schema.log_status (8.0.14+): its LOCAL column, the binlog end and gtid_executed as one JSON
        document; the manual asks for BACKUP_ADMIN (and SELECT on the table, which the stub does not check)."""
        if self._version() < (8, 0, 14):
            raise StubError(1146, "Table 'performance_schema.log_status' doesn't exist", "42S02")
        self._require("BACKUP_ADMIN", "BACKUP_ADMIN")
        name, size = self._logs()[-1]
        local = {"gtid_executed": self.variables.get("gtid_executed", ""), "binary_log_file": name,
                 "binary_log_position": size}
        return ["LOCAL"], [(json.dumps(local),)]

    def _binlog_status(self) -> tuple[list[str], list[tuple[Any, ...]]]:
        self._require("REPLICATION CLIENT", "SUPER, REPLICATION CLIENT")
        columns = ["File", "Position", "Binlog_Do_DB", "Binlog_Ignore_DB", "Executed_Gtid_Set"]
        if self.variables.get("log_bin", "ON") != "ON":
            return columns, []
        name, size = self._logs()[-1]
        return columns, [(name, size, "", "", self.variables.get("gtid_executed", ""))]

    def _select(self, expressions: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        names: list[str] = []
        row: list[str | int] = []
        for expression in (part.strip() for part in expressions.split(",")):
            names.append(expression)
            lowered = expression.lower()
            if lowered == "version()":
                row.append(self.reported_version or self.version)
            elif lowered in ("1", "@@version_comment"):
                row.append(1 if lowered == "1" else self.version_comment)
            elif lowered.startswith("@@"):
                variable = lowered.removeprefix("@@").removeprefix("global.").removeprefix("session.")
                if variable == "version":
                    row.append(self.version)
                elif variable in self._global_variables():
                    value = self._global_variables()[variable]
                    row.append(int(value) if value.isdigit() else value)
                else:
                    raise StubError(1193, f"Unknown system variable '{variable}'")
            else:
                raise StubError(1105, f"mysql stub: no answer for SELECT {expression!r}")
        return names, [tuple(row)]


class _Wire:
    """MySQL packets over a socket: 3-byte length, 1-byte sequence id."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sequence = 0

    def _exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise EOFError
            data += chunk
        return data

    def receive(self, *, new_command: bool = False) -> bytes:
        header = self._exactly(4)
        length = int.from_bytes(header[:3], "little")
        if new_command:
            self.sequence = 0
        if header[3] != self.sequence:
            raise ConnectionError(f"packet sequence {header[3]}, expected {self.sequence}")
        self.sequence = (header[3] + 1) % 256
        return self._exactly(length)

    def send(self, payload: bytes) -> None:
        self.sock.sendall(len(payload).to_bytes(3, "little") + bytes([self.sequence]) + payload)
        self.sequence = (self.sequence + 1) % 256


def _lenenc_int(value: int) -> bytes:
    if value < 251:
        return bytes([value])
    if value < 2**16:
        return b"\xfc" + struct.pack("<H", value)
    if value < 2**24:
        return b"\xfd" + struct.pack("<I", value)[:3]
    return b"\xfe" + struct.pack("<Q", value)


def _lenenc_str(value: bytes) -> bytes:
    return _lenenc_int(len(value)) + value


def _read_lenenc_int(data: bytes, offset: int) -> tuple[int, int]:
    first = data[offset]
    if first < 251:
        return first, offset + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}[first]
    return int.from_bytes(data[offset + 1:offset + 1 + width], "little"), offset + 1 + width


def _parse_handshake_response(data: bytes) -> tuple[str, bytes, str]:
    """User, auth response and plugin name of a HandshakeResponse41."""
    flags = struct.unpack("<I", data[:4])[0]
    offset = 32
    end = data.index(b"\0", offset)
    user = data[offset:end].decode()
    offset = end + 1
    if flags & CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA:
        length, offset = _read_lenenc_int(data, offset)
    else:
        length, offset = data[offset], offset + 1
    auth = data[offset:offset + length]
    offset += length
    if flags & CLIENT_CONNECT_WITH_DB and offset < len(data):
        offset = data.index(b"\0", offset) + 1
    plugin = ""
    if flags & CLIENT_PLUGIN_AUTH and offset < len(data):
        end = data.index(b"\0", offset)
        plugin = data[offset:end].decode()
    return user, auth, plugin


def _native_scramble(password: bytes, salt: bytes) -> bytes:
    """XOR(SHA1(password), SHA1(nonce + SHA1(SHA1(password)))), as the server checks it."""
    stage1 = hashlib.sha1(password).digest()
    mask = hashlib.sha1(salt[:20] + hashlib.sha1(stage1).digest()).digest()
    return bytes(a ^ b for a, b in zip(stage1, mask, strict=True))


def _sha2_scramble(password: bytes, salt: bytes) -> bytes:
    """XOR(SHA256(password), SHA256(SHA256(SHA256(password)) + nonce)), as the server checks it."""
    first = hashlib.sha256(password).digest()
    second = hashlib.sha256(hashlib.sha256(first).digest() + salt[:20]).digest()
    return bytes(a ^ b for a, b in zip(first, second, strict=True))


def _ok() -> bytes:
    return b"\x00" + _lenenc_int(0) + _lenenc_int(0) + struct.pack("<HH", SERVER_STATUS_AUTOCOMMIT, 0)


def _eof() -> bytes:
    return b"\xfe" + struct.pack("<HH", 0, SERVER_STATUS_AUTOCOMMIT)


def _err(error: StubError) -> bytes:
    return b"\xff" + struct.pack("<H", error.code) + b"#" + error.sqlstate.encode() + error.message.encode()


def _column(name: str, numeric: bool) -> bytes:
    encoded = name.encode()
    return (
        _lenenc_str(b"def") + _lenenc_str(b"") + _lenenc_str(b"") + _lenenc_str(b"")
        + _lenenc_str(encoded) + _lenenc_str(encoded)
        + b"\x0c"
        + struct.pack("<H", 63 if numeric else UTF8MB4_0900_AI_CI)
        + struct.pack("<I", 21 if numeric else 1024)
        + bytes([MYSQL_TYPE_LONGLONG if numeric else MYSQL_TYPE_VAR_STRING])
        + struct.pack("<H", 0x20 if numeric else 0)  # UNSIGNED for numbers
        + b"\0" + b"\0\0"
    )


def _result_set(columns: list[str], rows: list[tuple[Any, ...]]) -> list[bytes]:
    numeric = [bool(rows) and all(isinstance(row[i], int) for row in rows) for i in range(len(columns))]
    packets = [_lenenc_int(len(columns))]
    packets += [_column(name, numeric[i]) for i, name in enumerate(columns)]
    packets.append(_eof())
    for row in rows:
        packets.append(b"".join(b"\xfb" if value is None else _lenenc_str(str(value).encode()) for value in row))
    packets.append(_eof())
    return packets


#: The stub's server_uuid (`server_uuid` in its variables), for tests that build its positions.
UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

#: information_schema answers for one table shop.orders (id BIGINT primary key, note VARCHAR(20)).
SHOP_ORDERS: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {
    "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES": (
        ["TABLE_SCHEMA", "TABLE_NAME"], [("shop", "orders")]),
    "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE": (
        ["COLUMN_NAME", "DATA_TYPE", "COLUMN_TYPE", "IS_NULLABLE", "NUMERIC_PRECISION", "NUMERIC_SCALE",
         "DATETIME_PRECISION", "COLUMN_DEFAULT", "CHARACTER_SET_NAME", "COLLATION_NAME"],
        [("id", "bigint", "bigint", "NO", 19, 0, None, None, None, None),
         ("note", "varchar", "varchar(20)", "YES", None, None, None, None, "utf8mb4", "utf8mb4_0900_ai_ci")]),
    "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE": (["COLUMN_NAME"], [("id",)]),
}


# -- GTID sets and another server's binlog ------------------------------------------------------------
# Written for the stub apart from binlake's own (cdc_lib/model/gtid_sets.py), from MySQL's documentation of
# Gtid_set::encode and of mysql::serialization, and checked on the real fixtures' PREVIOUS_GTIDS events:
# what binlake sends is decoded by code it does not share.

#: (uuid, tag or "") → inclusive intervals of transaction numbers.
GtidSet = dict[tuple[str, str], list[tuple[int, int]]]


def parse_gtid_set(text: str) -> GtidSet:
    found: GtidSet = {}
    for part in text.replace("\n", "").split(","):
        if not part.strip():
            continue
        uuid, *fields = part.strip().lower().split(":")
        tag = ""
        for piece in fields:
            if not piece[0].isdigit():
                tag = piece
                continue
            start, _, end = piece.partition("-")
            found.setdefault((uuid, tag), []).append((int(start), int(end or start)))
    return found


def format_gtid_set(gtids: GtidSet) -> str:
    by_uuid: dict[str, list[str]] = {}
    for (uuid, tag), intervals in sorted(gtids.items()):
        parts = by_uuid.setdefault(uuid, [uuid])
        parts += [tag] if tag else []
        parts += [f"{a}" if a == b else f"{a}-{b}" for a, b in sorted(intervals)]
    return ",".join(":".join(parts) for parts in by_uuid.values())


def gtid_in(gtids: GtidSet, uuid: str, tag: str, number: int) -> bool:
    return any(start <= number <= end for start, end in gtids.get((uuid, tag), []))


def gtid_set_contains(outer: GtidSet, inner: GtidSet) -> bool:
    return all(gtid_in(outer, uuid, tag, number) for (uuid, tag), intervals in inner.items()
               for start, end in intervals for number in range(start, end + 1))


def _read_varlen(data: bytes, offset: int) -> tuple[int, int]:
    """mysql::serialization: as many bytes as the first byte has trailing ones, plus one; the value above them."""
    if data[offset] == 0xFF:
        return int.from_bytes(data[offset + 1:offset + 9], "little"), offset + 9
    size = 1
    while data[offset] >> (size - 1) & 1:
        size += 1
    return int.from_bytes(data[offset:offset + size], "little") >> size, offset + size


def _varlen(value: int) -> bytes:
    size = next((n for n in range(1, 9) if value < 1 << (7 * n)), 9)
    if size == 9:
        return b"\xff" + value.to_bytes(8, "little")
    return ((value << size) | (1 << (size - 1)) - 1).to_bytes(size, "little")


def _uuid_text(raw: bytes) -> str:
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def decode_gtid_set(data: bytes) -> GtidSet:
    """Gtid_set::encode's bytes: an 8-byte count, or (tagged format 1) format byte, 6-byte count, format byte."""
    tagged = len(data) >= 8 and data[0] == 1 and data[7] == 1
    count = int.from_bytes(data[1:7] if tagged else data[:8], "little")
    found: GtidSet = {}
    offset = 8
    for _ in range(count):
        uuid, tag = _uuid_text(data[offset:offset + 16]), ""
        offset += 16
        if tagged:
            length, offset = _read_varlen(data, offset)
            tag, offset = data[offset:offset + length].decode(), offset + length
        (intervals,) = struct.unpack_from("<Q", data, offset)
        offset += 8
        for _ in range(intervals):
            start, end = struct.unpack_from("<QQ", data, offset)
            found.setdefault((uuid, tag), []).append((start, end - 1))
            offset += 16
    return found


def encode_gtid_set(gtids: GtidSet) -> bytes:
    tagged = any(tag for _, tag in gtids)
    entries = sorted(gtids.items())
    out = bytes([1]) + len(entries).to_bytes(6, "little") + bytes([1]) if tagged else struct.pack("<Q", len(entries))
    for (uuid, tag), intervals in entries:
        out += bytes.fromhex(uuid.replace("-", "")) + (_varlen(len(tag)) + tag.encode() if tagged else b"")
        out += struct.pack("<Q", len(intervals)) + b"".join(struct.pack("<QQ", a, b + 1) for a, b in sorted(intervals))
    return out


def event_gtid(event: BinlogEvent) -> tuple[str, str, int] | None:
    """(uuid, tag, number) of a GTID or GTID_TAGGED event, else None."""
    body = event.raw[EVENT_HEADER_LENGTH:]
    if event.type_code == GTID_EVENT:  # flags (1), SID (16), GNO (8)
        return _uuid_text(body[1:17]), "", struct.unpack_from("<q", body, 17)[0]
    if event.type_code != GTID_TAGGED_EVENT:
        return None
    try:
        return _tagged(body)
    except (IndexError, UnicodeDecodeError):
        return None  # a damaged event (a test's): streamed as it is, for the reader to refuse


def _tagged(body: bytes) -> tuple[str, str, int]:
    offset = _read_varlen(body, _read_varlen(body, _read_varlen(body, 0)[1])[1])[1]  # version, size, last field
    uuid, tag, number = "", "", 0
    while not tag:
        field_id, offset = _read_varlen(body, offset)
        if field_id == 1:
            octets = []
            for _ in range(16):
                octet, offset = _read_varlen(body, offset)
                octets.append(octet)
            uuid = _uuid_text(bytes(octets))
        elif field_id == 2:
            coded, offset = _read_varlen(body, offset)
            number = coded >> 1 if not coded & 1 else -(coded >> 1) - 1
        elif field_id == 3:
            length, offset = _read_varlen(body, offset)
            tag = body[offset:offset + length].decode()
        else:
            _, offset = _read_varlen(body, offset)
    return uuid, tag, number


def make_event(type_code: int, server_id: int, body: bytes, *, checksum: bool = True, timestamp: int = 0) -> bytes:
    """An event's bytes (log_pos 0: `rewritten_binlog` sets it)."""
    size = EVENT_HEADER_LENGTH + len(body) + (4 if checksum else 0)
    return _with_checksum(struct.pack("<IBIIIH", timestamp, type_code, server_id, size, 0, 0) + body, checksum)


def previous_gtids_event(gtids: GtidSet, server_id: int, *, checksum: bool = True) -> bytes:
    return make_event(PREVIOUS_GTIDS_EVENT, server_id, encode_gtid_set(gtids), checksum=checksum)


def tagged_gtid_event(uuid: str, tag: str, number: int, server_id: int, *, checksum: bool = True) -> bytes:
    """A GTID_TAGGED event as MySQL 9.x writes one (the fields of the real fixture's, in its order)."""
    fields = [(0, _varlen(0)), (1, b"".join(_varlen(octet) for octet in bytes.fromhex(uuid.replace("-", "")))),
              (2, _varlen(number << 1)), (3, _varlen(len(tag)) + tag.encode()), (4, _varlen(0)), (5, _varlen(2)),
              (6, _varlen(1_770_368_687_207_196)), (8, _varlen(296)), (9, _varlen(90600))]
    rest = _varlen(0) + b"".join(_varlen(field_id) + value for field_id, value in fields)
    size = 1 + len(rest) + 1
    size += len(_varlen(size)) - 1
    return make_event(GTID_TAGGED_EVENT, server_id, _varlen(1) + _varlen(size) + rest, checksum=checksum)


def with_gtid(event: BinlogEvent, uuid: str, number: int, server_id: int) -> bytes:
    """A copy of a GTID event naming another transaction, written by `server_id`."""
    body = event.raw[EVENT_HEADER_LENGTH:-4]
    body = body[:1] + bytes.fromhex(uuid.replace("-", "")) + struct.pack("<q", number) + body[25:]
    return make_event(GTID_EVENT, server_id, body, timestamp=struct.unpack_from("<I", event.raw)[0])


def rewritten_binlog(name: str, events: list[bytes], *, server_id: int, checksum: bool = True) -> BinlogFile:
    """A binlog file of `events` (the first a FORMAT_DESCRIPTION, now `server_id`'s), each placed after the
    previous one: its log_pos (the event's end) and checksum computed for its new place. Replicated events keep
    the server_id of the server that wrote them first, as a replica's binlog does."""
    data = bytearray(BINLOG_MAGIC)
    for index, raw in enumerate(events):
        bare = bytearray(raw[:-4] if checksum else raw)
        struct.pack_into("<I", bare, 13, len(data) + len(raw))
        if index == 0:
            struct.pack_into("<I", bare, 5, server_id)
        data += _with_checksum(bytes(bare), checksum)
    return BinlogFile(name, bytes(data))
