"""Whether the server we are connected to still holds the history a stored offset refers to, and how to resume.

A stored offset carries the file/offset, the GTID state there and the identity of the server that
wrote it. On that same server the file/offset is used (the classic dump). On another server with
the same history (a replica promoted, or the config switched to a replica) file/offsets differ, so
the read starts from the GTID state instead and the positions it writes belong to the new server.
Anything else — a server without our last transaction, a binlog restarted by `RESET MASTER` —
stops the sync before anything is written: reading on would silently skip or repeat changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cdc_lib.errors import ServerHistoryError
from cdc_lib.model.positions import BinlogPosition, is_mariadb_state, parse_state, state_contains

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
    table: str, stored: BinlogPosition, server_end: BinlogPosition, logs: list[tuple[str, int]]
) -> Resume:
    """Decide how `table` resumes from `stored` on the server whose binlog ends at `server_end`.

    Raises:
        ServerHistoryError: the server lacks the history of `stored`, or its binlog was reset.
    """
    theirs = server_end.gtid
    if is_mariadb_state(stored.gtid) and is_mariadb_state(theirs) and not state_contains(theirs, stored.gtid):
        raise ServerHistoryError(
            f"the server ({server_end.server}) does not have the last transaction this table applied: its GTID "
            f"state is '{theirs}', the table's offset is {stored} — the binlog was reset (RESET MASTER), or this "
            "is a server with another history, or a replica that has not caught up",
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
    if not is_mariadb_state(stored.gtid):
        raise ServerHistoryError(
            f"the offset {stored} was written on {stored.server} and the server is now {server_end.server}; "
            "resuming a MySQL GTID set on another server is not supported yet",
            remedy=_remedy(table),
            table=table,
        )
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
