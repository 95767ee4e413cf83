"""Whether the server we are connected to still holds the history a stored offset refers to, and how to resume.

A stored offset carries the file/offset, the GTID state there and the identity of the server that
wrote it. On that same server the file/offset is used (the classic dump). On another server with
the same history (a replica promoted, or the config switched to a replica) file/offsets differ, so
the read starts from the GTID state instead and the positions it writes belong to the new server:
on MariaDB from the table's GTID state (one domain), on MySQL from its executed GTID set, tagged GTIDs
included (COM_BINLOG_DUMP_GTID: the server sends every transaction the set lacks). Anything else — a
server without our last transaction, a binlog restarted by `RESET MASTER` —
stops the sync before anything is written: reading on would silently skip or repeat changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import pymysql

from cdc_lib.errors import ServerHistoryError
from cdc_lib.model.gtid_sets import GtidSetError, MysqlGtidSet, is_mysql_set
from cdc_lib.model.positions import BinlogPosition, is_mariadb_state, parse_state, state_contains
from cdc_lib.source.server import query, server_flavour

ResumeMode = Literal["position", "gtid"]


@dataclass(frozen=True)
class Resume:
    """How one table resumes: by file/offset, by GTID, or at `translated` (the server end, same GTID state)."""

    mode: ResumeMode
    translated: BinlogPosition | None = None


def _remedy(table: str) -> str:
    return (
        "if the source is a replica that is still catching up, wait for it and rerun; otherwise re-snapshot the "
        f"table: binlake snapshot --table {table} (Dagster: backfill its asset), or point source.host/port back "
        "at a server that holds the history"
    )


def plan_resume(
    table: str, stored: BinlogPosition, server_end: BinlogPosition, logs: list[tuple[str, int]],
    *, purged: str | None = None,
) -> Resume:
    """Decide how `table` resumes from `stored` on the server whose binlog ends at `server_end`.

    `purged` is a MySQL server's `@@gtid_purged` (`mysql_gtid_purged`): a GTID dump from another server
    needs every transaction the table lacks still in the binlog.

    Raises:
        ServerHistoryError: the server lacks the history of `stored`, or its binlog was reset, or (MySQL) it
            purged transactions the table has not applied.
    """
    theirs = server_end.gtid
    mysql = is_mysql_set(stored.gtid) or is_mysql_set(theirs)
    moved = not stored.written_on(server_end.server)
    lacking = not state_contains(theirs, stored.gtid) and (
        is_mariadb_state(stored.gtid) and is_mariadb_state(theirs) or mysql and (moved or theirs is not None)
    )
    if lacking:
        missing = f" (it lacks {_missing(stored.gtid, theirs)})" if mysql else ""
        raise ServerHistoryError(
            f"the server ({server_end.server}) does not have the last transaction this table applied: its GTID "
            f"state is '{theirs}', the table's offset is {stored}{missing} — the binlog was reset (RESET MASTER), or "
            "this is a server with another history, or a replica that has not caught up",
            remedy=_remedy(table),
            table=table,
        )
    if stored.written_on(server_end.server):
        _check_offset_exists(table, stored, server_end, logs)
        return Resume("position")
    if not stored.gtid and stored.gtid != "":
        raise ServerHistoryError(
            f"the offset {stored} was written on {stored.server} without a GTID, and the server is now "
            f"{server_end.server}: its file/offset mean nothing here",
            remedy=_remedy(table),
            table=table,
        )
    if mysql:
        return _mysql_resume(table, stored, server_end, purged)
    if len(parse_state(stored.gtid)) > 1:
        raise ServerHistoryError(
            f"the offset {stored} spans several GTID domains and the server changed to {server_end.server}; "
            "binlake resumes on another server only within one GTID domain",
            remedy=_remedy(table),
            table=table,
        )
    if parse_state(stored.gtid) == parse_state(theirs):
        # Nothing happened since our offset: the server's end is exactly our point in its own coordinates.
        return Resume("gtid", translated=server_end)
    return Resume("gtid")


def _missing(mine: str | None, theirs: str | None) -> str:
    try:
        return str(MysqlGtidSet.parse(mine).difference(MysqlGtidSet.parse(theirs)))
    except GtidSetError:
        return "transactions of another flavour"


def _mysql_resume(table: str, stored: BinlogPosition, server_end: BinlogPosition, purged: str | None) -> Resume:
    """On another MySQL server holding every transaction of the table's set: a GTID dump from that set, unless
    the server purged transactions the set lacks (MySQL would refuse the dump: ER_MASTER_HAS_PURGED_REQUIRED_GTIDS)."""
    mine = MysqlGtidSet.parse(stored.gtid)
    needed = MysqlGtidSet.parse(purged).difference(mine)
    if needed:
        raise ServerHistoryError(
            f"the server ({server_end.server}) has purged transactions this table has not applied: its gtid_purged "
            f"is '{purged}', the table's offset is {stored}, so {needed} are no longer in its binlog",
            remedy=_remedy(table),
            table=table,
        )
    if mine == MysqlGtidSet.parse(server_end.gtid):
        # Nothing happened since our offset: the server's end is exactly our point in its own coordinates.
        return Resume("gtid", translated=server_end)
    return Resume("gtid")


def mysql_gtid_purged(
    connection: pymysql.connections.Connection, offsets: Iterable[BinlogPosition], server_end: BinlogPosition
) -> str | None:
    """A MySQL server's `@@GLOBAL.gtid_purged` when some offset was written on another server (else None: on the
    same server a file/offset is read, and MariaDB has no GTID set to check)."""
    if server_flavour(connection).mariadb or all(offset.written_on(server_end.server) for offset in offsets):
        return None
    try:
        value = query(connection, "SELECT @@GLOBAL.gtid_purged")[0][0]
    except pymysql.MySQLError:
        return None  # unknown here: the dump itself refuses what the server purged (mysql_errors maps it)
    return None if value is None else str(value).replace("\n", "")


def _check_offset_exists(
    table: str, stored: BinlogPosition, server_end: BinlogPosition, logs: list[tuple[str, int]]
) -> None:
    """On the same server: a file numbered past the newest, or an offset past its file's end, means a reset."""
    sizes = dict(logs)
    beyond = stored.file_sequence > server_end.file_sequence or (
        stored.file in sizes and stored.pos > sizes[stored.file]
    )
    if beyond:
        raise ServerHistoryError(
            f"the table's offset {stored} lies past the end of the server's binlog ({server_end}): the binlog "
            "was reset (RESET MASTER) or restored from an older backup",
            remedy=_remedy(table),
            table=table,
        )
