"""The MySQL/MariaDB server: connecting to it (settings, TLS, bounded waits), its flavour and identity, and what
it says about the followed tables. `checks` asks whether CDC can work on it, `binlog_status` where its binlog is."""

from __future__ import annotations

import fnmatch
import re
import ssl
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pymysql
import pymysql.cursors
from pymysql.constants import CLIENT

from cdc_lib.config.model import SourceConfig
from cdc_lib.errors import (
    ConfigError,
    ServerMismatchError,
    SilentConnectionError,
    SourceConnectionError,
    TableError,
)
from cdc_lib.model.positions import ServerIdentity
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo, check_key_columns, spark_type_ddl
from cdc_lib.source.mysql_errors import Connecting, Querying, connection_lost, mysql_error


@dataclass(frozen=True)
class ServerFlavour:
    """MariaDB or MySQL, and which version: the statement and grant names differ between them.

    Read once per connection (`server_flavour`) from `SELECT VERSION(), @@version_comment`.
    MariaDB always puts "MariaDB" in VERSION() ("10.11.19-MariaDB-0+deb12u1-log"); MySQL and its
    builds (Percona, cloud services) report "8.4.3", "8.0.36-28", "9.1.0-log".
    """

    mariadb: bool
    version: tuple[int, int, int]
    version_text: str = ""

    @classmethod
    def parse(cls, version: str, comment: str = "") -> ServerFlavour:
        text = str(version)
        match = re.match(r"^(?:5\.5\.5-)?(\d+)\.(\d+)\.(\d+)", text)
        numbers = (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else (0, 0, 0)
        mariadb = "mariadb" in text.lower() or "mariadb" in str(comment).lower()
        return cls(mariadb=mariadb, version=numbers, version_text=text)

    def __str__(self) -> str:
        return f"{'MariaDB' if self.mariadb else 'MySQL'} {self.version_text or '.'.join(map(str, self.version))}"

    @property
    def status_statements(self) -> tuple[str, str]:
        """The statement that reads the binlog end on this server, then the one to try on a parse error.

        MySQL 8.2 added SHOW BINARY LOG STATUS and 8.4 removed SHOW MASTER STATUS; MariaDB 10.5.2
        added SHOW BINLOG STATUS as the new name and keeps SHOW MASTER STATUS (11.4 still has it).
        """
        if self.mariadb:
            if self.version >= (10, 5, 2):
                return ("SHOW BINLOG STATUS", "SHOW MASTER STATUS")
            return ("SHOW MASTER STATUS", "SHOW BINLOG STATUS")
        if self.version >= (8, 2, 0):
            return ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS")
        return ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS")

    @property
    def position_privilege(self) -> str:
        """The privilege that lets the user read the binlog position and list the binlogs."""
        return "BINLOG MONITOR" if self.mariadb and self.version >= (10, 5, 0) else "REPLICATION CLIENT"

    @property
    def least_privilege_grants(self) -> str:
        return f"REPLICATION SLAVE, {self.position_privilege}"

    @property
    def grant_note(self) -> str:
        """Which names this server takes, so a remedy copied to the other flavour is not wrong."""
        if self.position_privilege == "BINLOG MONITOR":
            return f"the server is {self}; MySQL and MariaDB before 10.5 take REPLICATION CLIENT instead"
        return f"the server is {self}; MariaDB 10.5 and later take BINLOG MONITOR instead"


#: One flavour per open connection; a connection is only ever to one server.
_FLAVOURS: weakref.WeakKeyDictionary[pymysql.connections.Connection, ServerFlavour] = weakref.WeakKeyDictionary()


def server_flavour(connection: pymysql.connections.Connection) -> ServerFlavour:
    """The server's flavour and version, asked once per connection."""
    try:
        return _FLAVOURS[connection]
    except (KeyError, TypeError):
        pass
    row = query(connection, "SELECT VERSION(), @@version_comment")[0]
    flavour = ServerFlavour.parse(str(row[0]), str(row[1] or ""))
    try:
        _FLAVOURS[connection] = flavour
    except TypeError:  # an object that cannot be weakly referenced: ask again next time
        pass
    return flavour


def connection_settings(source: SourceConfig) -> dict[str, Any]:
    """pymysql keyword arguments for the source; the binlog reader connects with the same ones.

    With `source.ssl_ca` every connection uses TLS, checks the server certificate against that CA
    and the certificate's names against `source.host` (the JDBC snapshot does the same). Without it
    TLS is off: pymysql would otherwise negotiate TLS that checks nothing, while the JDBC driver
    would not use TLS at all, so a server that requires TLS is refused at the first connection.
    """
    settings: dict[str, Any] = {
        "host": source.host,
        "port": source.port,
        "user": source.user,
        "password": source.password,
        "connect_timeout": min(source.connect_timeout, source.network_timeout_seconds),
        # Without these a server that stops answering (a NAT or load balancer that forgot the flow, a paused VM,
        # a half-open connection after a failover) keeps a read waiting forever: pymysql's default is no bound.
        # The read bound also covers the handshake after the TCP connect.
        "read_timeout": source.network_timeout_seconds,
        "write_timeout": source.network_timeout_seconds,
        "charset": "utf8mb4",
    }
    if source.ssl_ca:
        settings.update(ssl_ca=source.ssl_ca, ssl_verify_cert=True, ssl_verify_identity=True)
    else:
        settings["ssl_disabled"] = True
    return settings


def connect(source: SourceConfig) -> pymysql.connections.Connection:
    """Open an autocommit connection to the source.

    Raises:
        SourceConnectionError: unreachable (retryable), refused, or TLS that does not check out.
        ConfigError: `source.ssl_ca` cannot be read.
    """
    settings = connection_settings(source)
    try:
        connection = pymysql.connections.Connection(**settings, autocommit=True, defer_connect=True)
    except (OSError, ssl.SSLError) as exc:
        # pymysql loads the CA file before it connects.
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc.__class__.__name__
        raise ConfigError(
            "source.ssl_ca",
            f"cannot load the CA certificate {source.ssl_ca} ({reason})",
            remedy="point source.ssl_ca at the PEM file of the CA that signed the server certificate",
        ) from None
    try:
        connection.connect()
    except pymysql.MySQLError as exc:
        if timed_out(exc):
            raise SilentConnectionError(
                f"the MySQL server at {source.host}:{source.port} accepted the connection but did not answer within "
                f"{source.network_timeout_seconds}s (source.network_timeout_seconds)",
                remedy=SILENT_REMEDY,
            ) from None
        offers_tls = bool(getattr(connection, "server_capabilities", 0) & CLIENT.SSL)
        raise mysql_error(exc, source, Connecting(server_offers_tls=offers_tls)) from None
    except RuntimeError as exc:
        # pymysql needs `cryptography` for caching_sha2_password's full authentication without TLS
        # (MySQL 8's default plugin: the first login after a server restart or FLUSH PRIVILEGES).
        if "cryptography" not in str(exc):
            raise
        raise SourceConnectionError(
            f"cannot log in as {source.user}@{source.host}:{source.port}: the server asks for caching_sha2_password "
            "(or sha256_password) full authentication, which needs the Python package 'cryptography' "
            "to encrypt the password without TLS, and it is not installed",
            remedy="install it into binlake's environment (pip install cryptography; binlake's package depends on "
            "it), or set source.ssl_ca so the password travels over verified TLS",
            retryable=False,
        ) from None
    return connection


@contextmanager
def source_connection(source: SourceConfig) -> Iterator[pymysql.connections.Connection]:
    connection = connect(source)
    try:
        query(connection, "SET time_zone = '+00:00'")
        yield connection
    finally:
        connection.close()


def query(connection: pymysql.connections.Connection, sql: str, arguments: Any = None) -> list[tuple[Any, ...]]:
    """Run one statement and return its rows.

    Raises:
        SourceConnectionError: (retryable) the connection broke, e.g. the server went away mid-run.
    """
    try:
        with connection.cursor() as cursor:
            cursor.execute(sql, arguments)
            return list(cursor.fetchall())
    except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as exc:
        if timed_out(exc):
            raise SilentConnectionError(
                f"the MySQL server at {connection.host}:{connection.port} did not answer a statement within "
                f"{connection._read_timeout}s (source.network_timeout_seconds)",
                remedy=SILENT_REMEDY,
            ) from None
        if connection_lost(exc):
            raise mysql_error(exc, connection, Querying()) from None
        raise


#: What to do about a connection that went silent, for every place that reports one.
SILENT_REMEDY = (
    "rerun: nothing past the last committed batch was applied, and the lease is released or runs out; if it "
    "recurs, check the network between binlake and the server (firewall, NAT or load balancer idle timeouts), "
    "or raise source.network_timeout_seconds for a server that is slow to answer"
)


def timed_out(exc: BaseException) -> bool:
    """Whether a pymysql error is a socket wait that ran past its bound (`read_timeout`, `write_timeout`).

    pymysql reports it as a lost connection (2013 / 2006) raised while handling the socket's TimeoutError,
    which is then the error's context: the one way to tell silence from a connection the server closed.
    """
    return isinstance(exc, pymysql.MySQLError) and isinstance(exc.__context__, TimeoutError)


def server_identity(connection: pymysql.connections.Connection) -> ServerIdentity:
    """`@@server_id`, plus `@@server_uuid` where the server has one (MySQL; MariaDB has none), and the
    fingerprint that tells two servers with the same `server_id` apart (host name, port, binlog base name)."""
    server_id = int(query(connection, "SELECT @@GLOBAL.server_id")[0][0])
    try:
        hostname, port, basename = query(connection, "SELECT @@hostname, @@port, @@GLOBAL.log_bin_basename")[0]
    except pymysql.MySQLError as exc:
        if connection_lost(exc):
            raise
        hostname = port = basename = None  # a server (or proxy) without these variables: server_id alone
    uuid: Any = None
    if not server_flavour(connection).mariadb:
        try:
            uuid = query(connection, "SELECT @@GLOBAL.server_uuid")[0][0]
        except pymysql.MySQLError:
            uuid = None
    return ServerIdentity(
        server_id=server_id,
        server_uuid=None if uuid is None else str(uuid),
        hostname=None if hostname is None else str(hostname),
        port=None if port is None else int(port),
        binlog_basename=None if basename is None else str(basename),
    )


def identity_checked(
    expected: ServerIdentity, *, role: str, host: str
) -> Callable[..., pymysql.connections.Connection]:
    """A pymysql `connect` that refuses a connection reaching another server than `expected`.

    Handed to the binlog reader as its connection factory, so the check runs on the very connection
    that then carries the binlog dump, at every connect and every reconnect of it: behind a load
    balancer or after a DNS failover each TCP connection may land on another server.

    Raises:
        ServerMismatchError: the new connection reached another server (it is closed first).
    """

    def connect_checked(**settings: Any) -> pymysql.connections.Connection:
        connection = pymysql.connections.Connection(**settings)
        # The reader's control connection returns dicts; `query` reads tuples, so ask with the plain cursor.
        cursor_class, connection.cursorclass = connection.cursorclass, pymysql.cursors.Cursor
        try:
            actual = server_identity(connection)
        except BaseException:
            connection.close()
            raise
        finally:
            connection.cursorclass = cursor_class
        if not actual.same_server(expected):
            connection.close()
            raise ServerMismatchError(role, expected.describe(), actual.describe(), host=host)
        return connection

    return connect_checked


#: Schemas the server keeps for itself: a wildcard never reaches into them.
SYSTEM_SCHEMAS = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
#: The server's own tables in the `mysql` schema (MySQL 8.0-9.x and MariaDB 10.x-11.x manuals, "The mysql System
#: Schema" / "The mysql Database Tables"). The server changes many of them through statements the binlog logs as SQL
#: (GRANT, CREATE USER, INSTALL PLUGIN, CREATE EVENT...), never as row changes, so a copy would drift without a word.
#: Other tables in `mysql` are tables a user created there (some projects' test data does): copied when named.
SERVER_SYSTEM_TABLES = frozenset({
    # grants and accounts
    "user", "global_grants", "global_priv", "db", "tables_priv", "columns_priv", "procs_priv", "proxies_priv",
    "default_roles", "role_edges", "roles_mapping", "password_history", "password_reuse_check_history",
    # stored objects, plugins, components
    "component", "event", "func", "plugin", "proc", "servers",
    # logs, help, time zones
    "general_log", "slow_log", "help_category", "help_keyword", "help_relation", "help_topic",
    "time_zone", "time_zone_leap_second", "time_zone_name", "time_zone_transition", "time_zone_transition_type",
    # replication
    "gtid_executed", "gtid_slave_pos", "ndb_binlog_index", "slave_master_info", "slave_relay_log_info",
    "slave_worker_info", "replication_asynchronous_connection_failover",
    "replication_asynchronous_connection_failover_managed", "replication_group_configuration_version",
    "replication_group_member_actions", "transaction_registry",
    # optimizer statistics and costs
    "innodb_index_stats", "innodb_table_stats", "server_cost", "engine_cost", "column_stats", "index_stats",
    "table_stats",
    # audit log and firewall plugins
    "audit_log_filter", "audit_log_user", "firewall_group_allowlist", "firewall_groups", "firewall_membership",
    "firewall_users", "firewall_whitelist",
})


def resolve_tables(connection: pymysql.connections.Connection, patterns: tuple[str, ...]) -> list[TableRef]:
    """Expand `db.table` and `db.*` patterns against the server; a named table must exist.

    A wildcard never matches a table in the server's own schemas. A table named exactly there is copied when a
    user created it (the `mysql` schema holds some); the server's own tables are refused (`SERVER_SYSTEM_TABLES`).
    """
    rows = query(
        connection, "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'BASE TABLE'"
    )
    existing = sorted(TableRef(str(database), str(table)) for database, table in rows)
    chosen: list[TableRef] = []
    for pattern in patterns:
        if "*" in pattern or "?" in pattern or "[" in pattern:
            matched = [
                ref for ref in existing
                if ref.database.lower() not in SYSTEM_SCHEMAS and fnmatch.fnmatchcase(ref.name, pattern)
            ]
            if not matched and "*" not in pattern:
                raise TableError(
                    f"no table on the server matches {pattern}, or the binlake user may not SELECT it",
                    remedy="fix source.tables in the config, or GRANT SELECT on the database to the binlake user",
                    table=pattern,
                )
        else:
            matched = [ref for ref in existing if ref.name == pattern]
            if not matched:
                raise TableError(
                    f"table {pattern} does not exist on the server, or the binlake user may not SELECT it",
                    remedy=f"create it, GRANT SELECT ON {pattern.partition('.')[0]}.* TO the binlake user, "
                    "or fix source.tables in the config",
                    table=pattern,
                )
            _refuse_server_table(matched[0])
        chosen.extend(ref for ref in matched if ref not in chosen)
    return chosen


def _refuse_server_table(ref: TableRef) -> None:
    database = ref.database.lower()
    if database not in SYSTEM_SCHEMAS or (database == "mysql" and ref.table.lower() not in SERVER_SYSTEM_TABLES):
        return
    raise TableError(
        f"table {ref.name} is one of the server's own tables: the server changes it through statements that the "
        "binlog logs as SQL (GRANT, CREATE USER, INSTALL PLUGIN...), not as row changes, so no copy of it stays "
        "exact",
        remedy=f"remove {ref.name} from source.tables; to copy what it holds, copy it into a table of your own "
        "database (e.g. INSERT ... SELECT on a schedule) and list that table",
        table=ref.name,
    )


def describe_table(connection: pymysql.connections.Connection, ref: TableRef) -> TableSchema:
    """Columns and primary key of a table; a table without primary key is refused."""
    rows = query(
        connection,
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, NUMERIC_PRECISION, NUMERIC_SCALE, "
        "DATETIME_PRECISION, COLUMN_DEFAULT, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (ref.database, ref.table),
    )
    if not rows:
        raise TableError(
            f"table {ref.name} does not exist on the server, or the binlake user may not SELECT it",
            remedy=f"create it, GRANT SELECT ON {ref.database}.* TO the binlake user, or fix source.tables",
            table=ref.name,
        )
    columns = tuple(
        ColumnInfo(
            name=str(name),
            data_type=str(data_type),
            column_type=str(column_type),
            nullable=str(nullable) == "YES",
            numeric_precision=None if precision is None else int(precision),
            numeric_scale=None if scale is None else int(scale),
            datetime_precision=None if datetime_precision is None else int(datetime_precision),
            column_default=None if default is None else str(default),
            character_set=None if charset is None else str(charset),
            collation=None if collation is None else str(collation),
        )
        for name, data_type, column_type, nullable, precision, scale, datetime_precision, default, charset, collation
        in rows
    )
    for column in columns:
        spark_type_ddl(column, table=ref.name)
    key_rows = query(
        connection,
        "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
        "AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
        (ref.database, ref.table),
    )
    primary_key = tuple(str(row[0]) for row in key_rows)
    if not primary_key:
        raise TableError(
            f"table {ref.name} has no primary key, so changes cannot be matched to rows",
            remedy=f"ALTER TABLE {ref.name} ADD PRIMARY KEY (...), or remove it from source.tables",
            table=ref.name,
        )
    check_key_columns(columns, primary_key, table=ref.name)  # a key the type mapping keeps distinct
    return TableSchema(table=ref, columns=columns, primary_key=primary_key)
