"""The one mapping from a MySQL/MariaDB error to the `BinlakeError` that says what to do.

A pymysql error carries a code and the server's (or client's) message. What it means depends on
what binlake was doing: an access-denied at login is a wrong password, error 1236 from a binlog
dump is a purged file, or history the server lacks when the dump started from a GTID state; a
lost connection is "cannot reach" before login and "lost the connection" after it. Callers say
what they were doing with one of the `Doing` values and raise what `mysql_error` returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pymysql

from cdc_lib.config.model import SourceConfig
from cdc_lib.errors import BinlakeError, BinlogPurgedError, ServerHistoryError, SourceConnectionError
from cdc_lib.model.positions import BinlogPosition

#: Client and server error codes that mean the connection itself is gone.
CONNECTION_LOST_CODES = frozenset({2002, 2003, 2005, 2006, 2013, 2055, 4031})
#: MySQL: insecure transport prohibited (MariaDB answers 1045 instead).
TLS_REQUIRED = 3159
ACCESS_DENIED = 1045
UNKNOWN_DATABASE = 1049
#: The binlog dump cannot start: the file is purged, or the server lacks the GTID history asked for.
BINLOG_UNAVAILABLE = 1236
#: ER_SPECIFIC_ACCESS_DENIED_ERROR (REPLICATION SLAVE missing) and ER_DBACCESS_DENIED_ERROR.
BINLOG_ACCESS_DENIED = frozenset({1227, 1044})
#: MariaDB: a newer binlog dump with the same server_id took over and the server dropped this one.
DUPLICATE_SERVER_ID = 4052
SSL_CONNECTION_ERROR = 2026
#: ER_PLUGIN_IS_NOT_LOADED at login: the account's authentication plugin is not in the server. MySQL 8.4 loads
#: mysql_native_password only with mysql_native_password=ON, and 9.0 removed it.
PLUGIN_NOT_LOADED = 1524


@dataclass(frozen=True)
class Connecting:
    """Opening a connection (`source.connect`).

    `server_offers_tls`: the server's handshake offered TLS, which binlake knows once the handshake
    arrived; with it, an access-denied on a connection without TLS may be `require_secure_transport`.
    """

    server_offers_tls: bool = False


@dataclass(frozen=True)
class Querying:
    """Running a statement on an open connection (`source.query`)."""


@dataclass(frozen=True)
class ReadingBinlog:
    """A binlog dump from `start`, or from the MariaDB GTID state `gtid_state` when one is given, for `tables`."""

    start: BinlogPosition
    gtid_state: str | None = None
    #: The tables the read serves ("db.table"): what a refused dump tells the user to re-snapshot.
    tables: tuple[str, ...] = ()


@dataclass(frozen=True)
class ProbingBinlogFile:
    """Reading the first event of one binlog file for its creation time (the binlog runway).

    Unlike a batch read, a file purged under the probe or another probe with the same id is
    nothing a person must act on: a later probe sees the server's new state.
    """

    log_file: str


Doing = Connecting | Querying | ReadingBinlog | ProbingBinlogFile


class _Where(NamedTuple):
    host: str
    port: int
    user: str
    ssl_ca: str | None

    @property
    def login(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def server(self) -> str:
        return f"{self.host}:{self.port}"


def error_code(exc: BaseException) -> int | None:
    """The MySQL error code of a pymysql error (None for other exceptions and codeless errors)."""
    if isinstance(exc, pymysql.MySQLError) and exc.args and isinstance(exc.args[0], int):
        return exc.args[0]
    return None


def error_message(exc: BaseException) -> str:
    """The server's or client's message of a pymysql error, without the code ('' when it has none)."""
    if isinstance(exc, pymysql.MySQLError) and len(exc.args) > 1:
        return str(exc.args[1])
    return ""


def error_text(exc: BaseException) -> str:
    """Code and message on one line, shortened, for a cause that quotes the error."""
    if isinstance(exc, pymysql.MySQLError) and len(exc.args) > 1:
        return f"MySQL error {exc.args[0]}: {str(exc.args[1])[:200]}"
    return f"{exc.__class__.__name__}: {str(exc)[:200]}"


def connection_lost(exc: BaseException) -> bool:
    """Whether the error means the connection itself is gone (the same call can succeed later)."""
    return isinstance(exc, pymysql.err.InterfaceError) or error_code(exc) in CONNECTION_LOST_CODES


def mysql_error(
    exc: pymysql.MySQLError, source: SourceConfig | pymysql.connections.Connection, doing: Doing
) -> BinlakeError:
    """The `BinlakeError`, with its remedy and retryable flag, that a pymysql error means.

    Args:
        exc: what pymysql raised.
        source: the source settings the connection was made with; or, for `Querying`, the open
            connection itself (its host and port name the server).
        doing: what binlake was doing when the error came.

    Returns:
        The error to raise (`raise mysql_error(...) from None`: the pymysql traceback adds nothing).
    """
    where = _where(source)
    code = error_code(exc)
    if isinstance(doing, Connecting):
        tls = _tls_failure(where, exc)
        if tls is not None:
            return tls
    if code == TLS_REQUIRED:
        return SourceConnectionError(
            f"the server at {where.server} requires TLS and source.ssl_ca is not set",
            remedy="set source.ssl_ca to the PEM file of the CA that signed the server certificate",
            retryable=False,
        )
    if code == ACCESS_DENIED:
        return _access_denied(where, offers_tls=isinstance(doing, Connecting) and doing.server_offers_tls)
    if isinstance(doing, Connecting):
        return _connect_failure(where, exc)
    if isinstance(doing, Querying):
        return _query_failure(where, exc)
    if code in BINLOG_ACCESS_DENIED:
        return SourceConnectionError(
            "the user may not read the binlog",
            remedy="GRANT REPLICATION SLAVE ON *.* TO the binlake user",
            retryable=False,
        )
    if isinstance(doing, ProbingBinlogFile):
        return SourceConnectionError(
            f"reading the start of binlog {doing.log_file} failed ({error_text(exc)})",
            remedy="check that the binlake user has REPLICATION SLAVE",
        )
    return _read_failure(exc, doing)


def _where(source: SourceConfig | pymysql.connections.Connection) -> _Where:
    if isinstance(source, SourceConfig):
        return _Where(source.host, source.port, source.user, source.ssl_ca)
    return _Where(str(source.host), int(source.port), str(getattr(source, "user", "") or ""), None)


def _tls_failure(where: _Where, exc: pymysql.MySQLError) -> BinlakeError | None:
    """A TLS handshake that failed although source.ssl_ca asks for TLS: no TLS offered, or a bad certificate."""
    message = error_message(exc)
    if not where.ssl_ca or not (
        "CERTIFICATE_VERIFY_FAILED" in message or "SSL" in message or error_code(exc) == SSL_CONNECTION_ERROR
    ):
        return None
    if "doesn't support" in message or "not support" in message:
        return SourceConnectionError(
            f"source.ssl_ca is set but the server at {where.server} does not offer TLS",
            remedy="configure TLS on the server (ssl_cert, ssl_key), or remove source.ssl_ca",
            retryable=False,
        )
    reason = message.split("certificate verify failed:", 1)[-1].split("(_ssl", 1)[0].strip(" )")
    return SourceConnectionError(
        f"TLS to {where.server} failed: the server certificate does not check out "
        f"against source.ssl_ca {where.ssl_ca} ({reason[:160]})",
        remedy="set source.ssl_ca to the CA that signed the server certificate, and source.host to a "
        "name or IP address the certificate lists",
        retryable=False,
    )


def _access_denied(where: _Where, *, offers_tls: bool) -> BinlakeError:
    if offers_tls and not where.ssl_ca:
        return SourceConnectionError(
            f"the server refused the credentials of {where.login} (access denied) over a connection without "
            "TLS; the server offers TLS and source.ssl_ca is not set, and a server that requires secure "
            "transport (require_secure_transport=ON) refuses such logins as access denied",
            remedy="if the server requires TLS, set source.ssl_ca to the CA certificate of the server; "
            "otherwise check source.user and the password variable",
            retryable=False,
        )
    return SourceConnectionError(
        f"the server refused the credentials of {where.login} (access denied)",
        remedy="check source.user and the password variable; the user needs the grants listed in the README",
        retryable=False,
    )


def _connect_failure(where: _Where, exc: pymysql.MySQLError) -> BinlakeError:
    code = error_code(exc)
    if code in CONNECTION_LOST_CODES:
        return SourceConnectionError(
            f"cannot reach the MySQL server at {where.server}",
            remedy="check source.host and source.port, and that the server is running and reachable",
        )
    if code == UNKNOWN_DATABASE:
        return SourceConnectionError(
            f"unknown database for {where.login}", remedy="check source.tables", retryable=False
        )
    if code == PLUGIN_NOT_LOADED:
        # Not a passing fault: every login of this account fails the same way until the account or server changes.
        return SourceConnectionError(
            f"cannot log in as {where.login}: the account authenticates with a plugin the server does not load "
            f"({error_text(exc)}); MySQL 8.4 disables mysql_native_password by default and 9.0 removed it",
            remedy=f"ALTER USER '{where.user}'@'%' IDENTIFIED WITH caching_sha2_password BY '<password>' (binlake "
            "logs in with caching_sha2_password, over TLS or by the RSA key exchange); on MySQL 8.4 only, starting "
            "the server with mysql_native_password=ON also works",
            retryable=False,
        )
    return SourceConnectionError(
        f"cannot connect as {where.login} ({error_text(exc)})", remedy="check the source settings and the server's log"
    )


def _query_failure(where: _Where, exc: pymysql.MySQLError) -> BinlakeError:
    if connection_lost(exc):
        return SourceConnectionError(
            f"lost the connection to the MySQL server at {where.server} ({error_text(exc)})",
            remedy="check that the server is running and reachable, then rerun: "
            "nothing past the last committed batch was applied",
        )
    # `source.query` lets these through for its caller to judge; a caller that gives up on one says so here.
    return SourceConnectionError(
        f"the MySQL server at {where.server} refused a statement ({error_text(exc)})",
        remedy="check the server's log and the binlake user's grants",
        retryable=False,
    )


def _read_failure(exc: pymysql.MySQLError, doing: ReadingBinlog) -> BinlakeError:
    code = error_code(exc)
    message = error_message(exc)
    # The command a person can run as it stands: the tables of the read, else the form of the argument.
    snapshot = "binlake snapshot " + (" ".join(f"--table {table}" for table in doing.tables) or "--table db.table")
    if code == BINLOG_UNAVAILABLE and doing.gtid_state is not None:
        # MariaDB says why at the end of a long message ("... it probably means that the slave has diverged ...").
        return ServerHistoryError(
            f"the server cannot send the binlog from GTID state '{doing.gtid_state}' ({message[:400]}): it lacks the "
            "history the offsets were written in",
            remedy=f"re-snapshot the tables: {snapshot} (Dagster: backfill), or point "
            "source.host/port back at a server with that history",
        )
    if code == BINLOG_UNAVAILABLE:
        return BinlogPurgedError(
            f"the server cannot send the binlog from {doing.start} ({message[:160]})",
            remedy=f"re-snapshot the affected tables: {snapshot}",
        )
    if code == DUPLICATE_SERVER_ID:
        return SourceConnectionError(
            "another replica or binlake pipeline connected to the server with the same source.server_id, "
            "and the server dropped this reader",
            remedy="give every binlake pipeline and every replica of this server its own source.server_id",
            retryable=False,
        )
    return SourceConnectionError(
        f"reading the binlog failed (MySQL error {code}: {message[:160]})",
        remedy="retry; check the server's availability and log",
    )


__all__ = [
    "CONNECTION_LOST_CODES",
    "Connecting",
    "Doing",
    "ProbingBinlogFile",
    "Querying",
    "ReadingBinlog",
    "connection_lost",
    "error_code",
    "error_message",
    "error_text",
    "mysql_error",
]
