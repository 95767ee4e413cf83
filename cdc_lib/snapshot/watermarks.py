"""Consistent low watermarks: a binlog position, and the table's schema exactly as it stood there.

A snapshot's low watermark is where the binlog replay of the table starts, and the schema the
snapshot is read and decoded with must be the table's schema at that very position: a column
added between the two would be in the snapshot but not in the first row events (or the reverse).

MariaDB (`consistent_low_watermark`):

1. `START TRANSACTION WITH CONSISTENT SNAPSHOT`; `binlog_snapshot_file` / `binlog_snapshot_position`
   (SHOW STATUS) are then the binlog position of the transaction's read view, fixed for the whole
   transaction (the server blocks commits for the instant it takes them together).
2. `SELECT * FROM t LIMIT 0` inside the transaction takes the table's shared metadata lock: no DDL on
   the table can commit until the transaction ends.
3. The table is described (`source.describe_table`; information_schema is not versioned, so this is
   the schema at the moment of the lock) and the binlog end is read, still under the lock.
4. The transaction ends (COMMIT): the lock is held for a handful of queries only, because a DDL
   waiting for it would queue every later statement on the table behind it.
5. The binlog between the snapshot position and that end is read (SHOW BINLOG EVENTS); a DDL there
   that changed or may have changed the table (`ddl.table_effects`) committed between the watermark
   and the lock, so the described schema is not the watermark's: try again. A DDL binlogs before it
   releases its metadata lock, so one that finished before our lock is in that stretch, and none can
   finish after it while we hold it.
6. The GTID state matching the position is `BINLOG_GTID_POS(file, pos)` (the server reads it off
   its binlog; `gtid_binlog_pos` is the global state at the moment of asking, not the snapshot's).

MySQL 8 has no `binlog_snapshot_*` status. The documented consistent read of file, offset and
executed GTID set together is `performance_schema.log_status` (MySQL ≥ 8.0.14, BACKUP_ADMIN). It is
read before the transaction starts, so the position lies at or before the read view (a low
watermark may be early: the replay from it converges); steps 2–5 are the same. Written from the
MySQL reference manual and not run against a MySQL server (docs/servers.md).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc_lib.binlog.ddl import table_effects
from cdc_lib.common.faults import failpoint
from cdc_lib.errors import (
    MissingGrantError,
    ServerSettingsError,
    SourceConnectionError,
    TableError,
    WatermarkRaceError,
)
from cdc_lib.model.positions import BinlogPosition, ServerIdentity
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.source.binlog_status import binary_logs, binlog_end
from cdc_lib.source.mysql_errors import error_code, error_text
from cdc_lib.source.server import ServerFlavour, describe_table, query, server_flavour, server_identity

log = logging.getLogger("binlake")

#: How often a DDL racing the watermark is tolerated before the snapshot gives up (retryable).
MAX_ATTEMPTS = 5
#: Events per SHOW BINLOG EVENTS page while looking for a racing DDL.
EVENTS_PAGE = 5_000

# MySQL/MariaDB error codes met here.
_TABLE_DEF_CHANGED = 1412  # ER_TABLE_DEF_CHANGED: the table was rebuilt after the read view was taken
_NO_SUCH_TABLE = 1146
_TABLE_ACCESS_DENIED = 1142
_SPECIFIC_ACCESS_DENIED = 1227
_DB_ACCESS_DENIED = 1044

#: SHOW BINLOG EVENTS shows a statement run with a current database as "use `db`; statement".
_USE_PREFIX = re.compile(r"^use `((?:[^`]|``)*)`; (.*)$", re.DOTALL)


@dataclass(frozen=True)
class Race:
    """A DDL that changed (or may have changed) the table between the watermark and the metadata lock."""

    position: BinlogPosition
    statement: str


def consistent_low_watermark(
    connection: pymysql.connections.Connection, table: TableRef
) -> tuple[BinlogPosition, TableSchema]:
    """The binlog position to start a table's snapshot replay from, and the table's schema at that position.

    The position carries the matching GTID state and the server's identity, like `source.current_position`.
    The transaction it opens on `connection` is ended before returning.

    Raises:
        WatermarkRaceError: (retryable) a DDL on the table raced every one of `MAX_ATTEMPTS` attempts.
        MissingGrantError: the user may not read the binlog events or (MySQL) `performance_schema.log_status`.
        TableError: the table is gone, not readable, or has no primary key.
    """
    flavour = server_flavour(connection)
    server = server_identity(connection)
    race: Race | None = None
    for attempt in range(1, MAX_ATTEMPTS + 1):
        low, schema, race = _attempt(connection, table, flavour, server)
        if race is None and schema is not None:
            if attempt > 1:
                log.info("%s: low watermark %s taken after %d attempts (a DDL raced the earlier ones)", table.name,
                         low, attempt)
            return low, schema
        assert race is not None
        log.warning("%s: a DDL at %s committed between the low watermark and the table's lock (%s); trying again",
                    table.name, race.position, _short(race.statement))
    assert race is not None
    raise WatermarkRaceError(
        f"a DDL on the table committed between the snapshot's low watermark and its lock {MAX_ATTEMPTS} times "
        f"in a row (last at {race.position}: {_short(race.statement)}), so no schema could be pinned to a position",
        remedy="snapshot the table again once the schema changes on it have finished",
        table=table.name,
    )


def _attempt(
    connection: pymysql.connections.Connection, table: TableRef, flavour: ServerFlavour, server: ServerIdentity
) -> tuple[BinlogPosition, TableSchema | None, Race | None]:
    """One try: the position, the schema described under the table's lock, and the DDL that raced them if any."""
    before_transaction = None if flavour.mariadb else mysql_log_status(connection, server)
    query(connection, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
    try:
        if before_transaction is None:
            file_name, position = _snapshot_position(connection)
        else:
            file_name, position = before_transaction.file, before_transaction.pos
        # Tests run a DDL here, from another connection, to race the lock below.
        failpoint("watermark_before_lock")
        if _lock(connection, table):
            schema: TableSchema | None = describe_table(connection, table)
            file_end, position_end = _binlog_end(connection, flavour)
        else:
            schema = None
    finally:
        # Ends the transaction and releases the metadata lock before anything slow happens.
        query(connection, "COMMIT")
    start = BinlogPosition(file_name, position)
    if schema is None:
        return start, None, Race(start, "the table was rebuilt after the snapshot began (error 1412)")
    race = racing_ddl(connection, table, start, BinlogPosition(file_end, position_end), flavour)
    if before_transaction is not None:
        return before_transaction, schema, race
    return BinlogPosition(file_name, position, _gtid_at(connection, file_name, position), server), schema, race


def _snapshot_position(connection: pymysql.connections.Connection) -> tuple[str, int]:
    """MariaDB's binlog position of the open consistent-snapshot transaction."""
    status = {str(name).lower(): value for name, value in query(connection, "SHOW STATUS LIKE 'binlog_snapshot_%'")}
    file_name, position = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
    if not file_name or position is None:
        raise ServerSettingsError("log_bin", "OFF", "ON")
    return str(file_name), int(position)


def _lock(connection: pymysql.connections.Connection, table: TableRef) -> bool:
    """Take the table's shared metadata lock inside the transaction; False when the read view cannot see it."""
    try:
        query(connection, f"SELECT * FROM {_quoted(table)} LIMIT 0")
    except pymysql.MySQLError as exc:
        code = error_code(exc)
        if code == _TABLE_DEF_CHANGED:
            return False
        if code in (_NO_SUCH_TABLE, _TABLE_ACCESS_DENIED, _DB_ACCESS_DENIED):
            raise TableError(
                f"table {table.name} does not exist on the server, or the binlake user may not SELECT it "
                f"({error_text(exc)})",
                remedy=f"create it, GRANT SELECT ON {table.database}.* TO the binlake user, or fix source.tables",
                table=table.name,
            ) from None
        raise
    return True


def _binlog_end(connection: pymysql.connections.Connection, flavour: ServerFlavour) -> tuple[str, int]:
    try:
        return binlog_end(connection)
    except SourceConnectionError as exc:
        if exc.retryable:
            raise
        raise MissingGrantError(
            f"the user may not read the binlog position ({exc.cause}), which binlake needs to pin a table's schema "
            "to its snapshot's low watermark",
            remedy=f"GRANT {flavour.position_privilege} ON *.* TO the binlake user ({flavour.grant_note})",
        ) from None


def _gtid_at(connection: pymysql.connections.Connection, file_name: str, position: int) -> str | None:
    """The MariaDB GTID state at a binlog position, as the server reads it off the binlog."""
    value = query(connection, "SELECT BINLOG_GTID_POS(%s, %s)", (file_name, position))[0][0]
    if value is None:
        # NULL: the file is gone or the position is not an event boundary; the offset still works by
        # file/position, only a carry-over to another server by GTID needs a later batch's state.
        log.warning("BINLOG_GTID_POS(%s, %d) is NULL; the low watermark carries no GTID state", file_name, position)
        return None
    return str(value)


def racing_ddl(
    connection: pymysql.connections.Connection,
    table: TableRef,
    start: BinlogPosition,
    end: BinlogPosition,
    flavour: ServerFlavour | None = None,
) -> Race | None:
    """The first statement between `start` and `end` in the binlog that changed (or may have changed) the table's
    shape, or None. A statement binlake cannot read that names the table counts as one (`ddl.table_effects`)."""
    flavour = flavour or server_flavour(connection)
    if end <= start:
        return None
    files = [name for name, _ in binary_logs(connection)]
    if start.file not in files:
        raise TableError(
            f"binlog {start.file} of the low watermark {start} was purged while the watermark was taken",
            remedy="keep binlogs longer (binlog_expire_logs_seconds), then snapshot again",
            table=table.name, retryable=True,
        )
    for file_name in files[files.index(start.file):]:
        offset = start.pos if file_name == start.file else 4
        while True:
            rows = _binlog_events(connection, flavour, file_name, offset)
            for row in rows:
                position = int(row[1])
                if file_name == end.file and position >= end.pos:
                    return None
                race = _race_in(table, str(row[2]), row[5], BinlogPosition(file_name, position))
                if race is not None:
                    return race
            if len(rows) < EVENTS_PAGE:
                break
            offset = int(rows[-1][4])  # End_log_pos of the last event: where the next one starts
        if file_name == end.file:
            return None
    return None


def _binlog_events(
    connection: pymysql.connections.Connection, flavour: ServerFlavour, file_name: str, offset: int
) -> list[tuple[Any, ...]]:
    statement = f"SHOW BINLOG EVENTS IN %s FROM {int(offset)} LIMIT {EVENTS_PAGE}"
    try:
        return query(connection, statement, (file_name,))
    except pymysql.MySQLError as exc:
        if error_code(exc) in (_SPECIFIC_ACCESS_DENIED, _DB_ACCESS_DENIED, _TABLE_ACCESS_DENIED):
            raise _grant_error(flavour, exc, "SHOW BINLOG EVENTS") from None
        raise


def _race_in(table: TableRef, event_type: str, info: Any, position: BinlogPosition) -> Race | None:
    """A racing DDL in one SHOW BINLOG EVENTS row (Event_type, Info), or None."""
    if event_type not in ("Query", "Query_compressed"):
        return None  # row events, GTIDs, XIDs, annotations (the text of row-logged DML) change no schema
    schema, statement = split_use_prefix(info.decode("utf-8", "replace") if isinstance(info, bytes) else str(info))
    effects = table_effects(statement, schema, (table.name,))
    if any(effect.kind in ("schema", "stop") for effect in effects):
        return Race(position, statement)
    return None


def split_use_prefix(info: str) -> tuple[str, str]:
    """(current database, statement) of a Query event as SHOW BINLOG EVENTS shows it ("use `db`; …")."""
    match = _USE_PREFIX.match(info)
    if match is None:
        return "", info
    return match.group(1).replace("``", "`"), match.group(2)


def mysql_log_status(connection: pymysql.connections.Connection, server: ServerIdentity) -> BinlogPosition:
    """MySQL's binlog file, offset and executed GTID set read together from `performance_schema.log_status`."""
    flavour = server_flavour(connection)
    try:
        rows = query(connection, "SELECT LOCAL FROM performance_schema.log_status")
    except pymysql.MySQLError as exc:
        code = error_code(exc)
        if code == _NO_SUCH_TABLE:
            raise ServerSettingsError(
                "version", flavour.version_text, "MySQL 8.0.14 or later (performance_schema.log_status)",
                remedy="upgrade the server to MySQL 8.0.14 or later: binlake reads the snapshot's binlog position "
                "and GTID set together from performance_schema.log_status",
            ) from None
        if code in (_SPECIFIC_ACCESS_DENIED, _TABLE_ACCESS_DENIED, _DB_ACCESS_DENIED):
            raise MissingGrantError(
                f"the user may not read performance_schema.log_status ({error_text(exc)}), where MySQL reports the "
                "binlog position and GTID set of a snapshot consistently",
                remedy="GRANT BACKUP_ADMIN ON *.* TO the binlake user, and GRANT SELECT ON "
                "performance_schema.log_status TO the binlake user (the MySQL manual asks for both)",
            ) from None
        raise
    if not rows:
        raise ServerSettingsError("log_bin", "OFF", "ON")
    return parse_log_status(rows[0][0], server)


def parse_log_status(local: Any, server: ServerIdentity | None) -> BinlogPosition:
    """The position in the LOCAL column of `performance_schema.log_status` (a JSON document)."""
    document = json.loads(local.decode() if isinstance(local, bytes) else str(local))
    file_name = document.get("binary_log_file")
    if not file_name:
        raise ServerSettingsError("log_bin", "OFF", "ON")
    gtid = str(document.get("gtid_executed") or "").replace("\n", "")
    return BinlogPosition(str(file_name), int(document["binary_log_position"]), gtid or None, server)


def _grant_error(flavour: ServerFlavour, exc: pymysql.MySQLError, statement: str) -> MissingGrantError:
    return MissingGrantError(
        f"the user may not run {statement} ({error_text(exc)}), which binlake needs to pin a table's schema to "
        "its snapshot's low watermark",
        remedy=f"GRANT {flavour.position_privilege} ON *.* TO the binlake user ({flavour.grant_note})",
    )


def _quoted(table: TableRef) -> str:
    return ".".join("`" + part.replace("`", "``") + "`" for part in (table.database, table.table))


def _short(statement: str) -> str:
    text = " ".join(statement.split())
    return text if len(text) <= 160 else text[:160] + " …"


__all__ = ["Race", "consistent_low_watermark", "mysql_log_status", "parse_log_status", "racing_ddl",
           "split_use_prefix"]
