"""Where the server's binlog is: its end and the GTID state that matches it, the binlog files it still keeps,
and how far a position is behind."""

from __future__ import annotations

from typing import Any

import pymysql

from cdc_lib.errors import BinlogPurgedError, ServerSettingsError, SourceConnectionError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.source.mysql_errors import connection_lost, error_code, error_text
from cdc_lib.source.server import query, server_flavour, server_identity

#: ER_PARSE_ERROR: how a server answers a statement its grammar does not have (MySQL 8.4 and
#: SHOW MASTER STATUS, a MySQL before 8.2 and SHOW BINARY LOG STATUS).
PARSE_ERROR = 1064


def current_position(connection: pymysql.connections.Connection) -> BinlogPosition:
    """The binlog end with the GTID state that matches it exactly, and the identity of the server.

    MySQL reports file, offset and executed GTID set in one binlog status row (SHOW BINARY LOG
    STATUS from 8.2, SHOW MASTER STATUS before). MariaDB needs a second query for `gtid_binlog_pos`,
    so that query brackets the status read and the read is repeated when a commit slipped in
    between (a GTID state ahead of its offset would skip a transaction).
    """
    server = server_identity(connection)
    for _ in range(10):
        before = server_gtid(connection)
        rows = status_rows(connection)
        file_name, position = str(rows[0][0]), int(rows[0][1])
        if len(rows[0]) > 4:  # MySQL: Executed_Gtid_Set, consistent with the offset by construction
            executed = str(rows[0][4] or "").replace("\n", "")
            return BinlogPosition(file=file_name, pos=position, gtid=executed or None, server=server)
        if before == server_gtid(connection):
            return BinlogPosition(file=file_name, pos=position, gtid=before, server=server)
    # A busy server: ask it which state the offset itself stands for (reads the file up to the offset).
    gtid = query(connection, "SELECT BINLOG_GTID_POS(%s, %s)", (file_name, position))[0][0]
    return BinlogPosition(file=file_name, pos=position, gtid=None if gtid is None else str(gtid), server=server)


def binlog_end(connection: pymysql.connections.Connection) -> tuple[str, int]:
    """The binlog file and offset where the next transaction will be written (no GTID state, no identity)."""
    rows = status_rows(connection)
    return str(rows[0][0]), int(rows[0][1])


def status_rows(connection: pymysql.connections.Connection) -> list[tuple[Any, ...]]:
    """The binlog status row, by the statement this server's flavour and version have.

    A parse error (1064) on the expected statement tries the other name once: a build whose version
    string misleads (a fork, a proxy that rewrites VERSION()) still gets its position read.
    """
    flavour = server_flavour(connection)
    preferred, other = flavour.status_statements
    try:
        try:
            rows = query(connection, preferred)
        except pymysql.MySQLError as exc:
            if error_code(exc) != PARSE_ERROR:
                raise
            preferred = other
            rows = query(connection, other)
    except pymysql.MySQLError as exc:
        # What a refused status statement means depends on the flavour's privilege names, known only here.
        raise SourceConnectionError(
            f"{preferred} failed on {flavour} ({error_text(exc)})",
            remedy=f"grant {flavour.position_privilege} to the binlake user",
            retryable=connection_lost(exc),
        ) from None
    if not rows:
        raise ServerSettingsError("log_bin", "OFF", "ON")
    return rows



def server_gtid(connection: pymysql.connections.Connection) -> str | None:
    """MariaDB `gtid_binlog_pos` ('' before the first transaction), else MySQL `gtid_executed`."""
    variables = ("@@GLOBAL.gtid_binlog_pos",) if server_flavour(connection).mariadb else ("@@GLOBAL.gtid_executed",)
    for variable in variables:
        try:
            value = query(connection, f"SELECT {variable}")[0][0]
        except pymysql.MySQLError:
            continue
        return None if value is None else str(value).replace("\n", "")
    return None


def binary_logs(connection: pymysql.connections.Connection) -> list[tuple[str, int]]:
    return [(str(row[0]), int(row[1])) for row in query(connection, "SHOW BINARY LOGS")]


def bytes_behind(position: BinlogPosition, logs: list[tuple[str, int]]) -> int:
    """Binlog bytes between a position and the end of the newest log."""
    behind = 0
    counting = False
    for name, size in logs:
        if name == position.file:
            counting = True
            behind += max(size - position.pos, 0)
        elif counting:
            behind += size
    if not counting and logs:
        return sum(size for _, size in logs)
    return behind


def events_behind(
    connection: pymysql.connections.Connection,
    position: BinlogPosition,
    logs: list[tuple[str, int]],
    *,
    cap: int = 100_000,
) -> int:
    """Binlog events after a position, counted up to `cap` (status reports ">= cap" beyond it)."""
    names = [name for name, _ in logs]
    if position.file not in names:
        return cap
    counted = 0
    for name in names[names.index(position.file):]:
        start = position.pos if name == position.file else 4
        rows = query(connection, f"SHOW BINLOG EVENTS IN %s FROM {int(start)} LIMIT {cap - counted + 1}", (name,))
        # Every file after the first starts with a format description event that is not a change.
        counted += max(len(rows) - (0 if name == position.file else 1), 0)
        if counted >= cap:
            return cap
    return counted


def check_position_available(
    connection: pymysql.connections.Connection,
    position: BinlogPosition,
    *,
    table: str | None = None,
    logs: list[tuple[str, int]] | None = None,
) -> None:
    """Raise BinlogPurgedError if the server no longer keeps the binlog file of a position.

    Pass `logs` (SHOW BINARY LOGS) when checking several positions, to ask the server once.
    """
    names = [name for name, _ in (binary_logs(connection) if logs is None else logs)]
    if position.file not in names:
        oldest = names[0] if names else "<none>"
        raise BinlogPurgedError(
            f"binlog {position.file} needed from {position} is gone (oldest on server: {oldest})",
            remedy=f"re-snapshot: binlake snapshot --table {table}" if table else "re-snapshot the affected tables",
            table=table,
        )

