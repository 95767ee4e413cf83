"""Binlog runway: how long the server keeps the binlog a table's offset needs, shared by `status` and Dagster.

The server purges a binlog file once it is older than `binlog_expire_logs_seconds`
(or `expire_logs_days`); a file's age counts from when it was closed, which is when the
next file was created. The runway of a table is the time left before the file holding
its offset is purged; past it the table can only be re-snapshotted.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pymysql

from cdc_lib.config.model import SourceConfig
from cdc_lib.model.positions import BinlogPosition, ServerIdentity
from cdc_lib.source import binlog_status
from cdc_lib.source import server as mysql
from cdc_lib.source.mysql_errors import ProbingBinlogFile, mysql_error

if TYPE_CHECKING:
    # Not the pipeline class, which asks this module for its status: anything with its config and state.
    from cdc_lib.state.context import PipelineView

#: Below this many hours of runway `binlake status` flags a table (the Dagster check has its own setting).
DEFAULT_RUNWAY_WARN_HOURS = 72.0

#: `expire_logs_days` only before MySQL 8.2 (and on MariaDB); `binlog_expire_logs_auto_purge` from MySQL 8.0.29: OFF
#: stops every automatic purge whatever the expiry says. A variable the server lacks is simply not in the answer.
EXPIRY_VARIABLES = (
    "binlog_expire_logs_seconds", "expire_logs_days", "binlog_expire_logs_auto_purge", "max_binlog_total_size",
    "binlog_space_limit",
)


@dataclass(frozen=True)
class ExpirySettings:
    """How the server expires binlogs: by age (seconds) and/or by total size (bytes)."""

    expire_seconds: float | None
    size_limit_bytes: int | None

    @classmethod
    def from_variables(cls, variables: dict[str, str]) -> ExpirySettings:
        if variables.get("binlog_expire_logs_auto_purge", "ON").upper() in ("OFF", "0"):
            # MySQL 8.0.29+: the server purges nothing by itself (only PURGE BINARY LOGS does), so no runway ends.
            return cls(expire_seconds=None, size_limit_bytes=None)
        seconds = _number(variables.get("binlog_expire_logs_seconds"))
        days = _number(variables.get("expire_logs_days"))
        expire = seconds if seconds else (days * 86_400 if days else None)
        limits = [_number(variables.get(name)) for name in ("max_binlog_total_size", "binlog_space_limit")]
        size_limit = next((int(limit) for limit in limits if limit), None)
        return cls(expire_seconds=expire, size_limit_bytes=size_limit)

    @classmethod
    def read(cls, connection: pymysql.connections.Connection) -> ExpirySettings:
        names = ", ".join(f"'{name}'" for name in EXPIRY_VARIABLES)
        rows = mysql.query(connection, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
        return cls.from_variables({str(name).lower(): str(value) for name, value in rows})


def _number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else 0.0
    except ValueError:
        return 0.0


@dataclass(frozen=True)
class TableRunway:
    table: str
    needed_file: str
    oldest_on_server: str | None
    purged: bool
    rotated_at: dt.datetime | None
    runway_seconds: float | None
    expiry: ExpirySettings
    bytes_from_offset: int
    oldest_age_seconds: float | None = None

    def warning(self, warn_hours: float = DEFAULT_RUNWAY_WARN_HOURS) -> bool:
        """Purged already, or purged by age within `warn_hours`."""
        return self.purged or (self.runway_seconds is not None and self.runway_seconds < warn_hours * 3600)

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "needed_file": self.needed_file,
            "oldest_on_server": self.oldest_on_server,
            "oldest_on_server_age_seconds": self.oldest_age_seconds,
            "purged": self.purged,
            "rotated_at": None if self.rotated_at is None else self.rotated_at.isoformat(),
            "runway_seconds": self.runway_seconds,
            "expire_seconds": self.expiry.expire_seconds,
            "size_limit_bytes": self.expiry.size_limit_bytes,
            "bytes_from_offset": self.bytes_from_offset,
        }


def runway_seconds(
    *, expiry: ExpirySettings, rotated_at: dt.datetime | None, now: dt.datetime
) -> float | None:
    """Seconds before a file is purged by age; None when the server never purges by age.

    A file still being written (`rotated_at` None) cannot expire before it is closed,
    so its runway is at least the full expiry period.
    """
    if expiry.expire_seconds is None:
        return None
    if rotated_at is None:
        return expiry.expire_seconds
    return (rotated_at - now).total_seconds() + expiry.expire_seconds


def table_runways(
    source: SourceConfig,
    connection: pymysql.connections.Connection,
    positions: dict[str, BinlogPosition],
    *,
    logs: list[tuple[str, int]] | None = None,
    server: ServerIdentity | None = None,
    now: dt.datetime | None = None,
) -> dict[str, TableRunway]:
    """Runway of each position on the connected server; positions written on another server are left out."""
    now = now or dt.datetime.now(dt.UTC)
    logs = binlog_status.binary_logs(connection) if logs is None else logs
    expiry = ExpirySettings.read(connection)
    names = [name for name, _ in logs]
    created: dict[str, dt.datetime | None] = {}

    def created_at(log_file: str) -> dt.datetime | None:
        if log_file not in created:
            created[log_file] = _file_created_at(source, log_file, server=server)
        return created[log_file]

    oldest_created = created_at(names[0]) if names and positions else None
    oldest_age = None if oldest_created is None else round((now - oldest_created).total_seconds(), 1)
    result = {}
    for table, position in sorted(positions.items()):
        if not position.written_on(server):
            continue
        needed = position.file
        purged = needed not in names
        rotated_at = None
        if not purged and names.index(needed) + 1 < len(names):
            rotated_at = created_at(names[names.index(needed) + 1])
        result[table] = TableRunway(
            table=table,
            needed_file=needed,
            oldest_on_server=names[0] if names else None,
            purged=purged,
            rotated_at=rotated_at,
            runway_seconds=0.0 if purged else runway_seconds(expiry=expiry, rotated_at=rotated_at, now=now),
            expiry=expiry,
            bytes_from_offset=binlog_status.bytes_behind(position, logs),
            oldest_age_seconds=oldest_age,
        )
    return result


def binlog_runway(
    pipeline: PipelineView, tables: list[str] | None = None, *, now: dt.datetime | None = None
) -> dict[str, TableRunway]:
    """Runway of each snapshotted table's binlog offset (tables with a recorded error are left out)."""
    state = pipeline.read_state()
    chosen = {
        name: table_state.position
        for name, table_state in state.tables.items()
        if (tables is None or name in tables) and not table_state.error
    }
    with mysql.source_connection(pipeline.config.source) as connection:
        server = mysql.server_identity(connection)
        return table_runways(pipeline.config.source, connection, chosen, server=server, now=now)


def probe_server_id(server_id: int) -> int:
    """A replica id for short probes, distinct from the pipeline's own (a server drops a duplicate's dump)."""
    return (server_id + 0x2F00_0000) % (2**32 - 1) or 1


def file_created_at(pipeline: PipelineView, log_file: str) -> dt.datetime | None:
    """Creation time of a binlog file: the timestamp of its format description event."""
    return _file_created_at(pipeline.config.source, log_file)


def _file_created_at(
    source: SourceConfig, log_file: str, *, server: ServerIdentity | None = None
) -> dt.datetime | None:
    """With `server`, the probe's connection must reach that server: a file of the same name on another
    server (after a failover behind one address) was created at another time."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import FormatDescriptionEvent

    checked = None if server is None else mysql.identity_checked(
        server, role="binlog probe", host=f"{source.host}:{source.port}"
    )
    stream = BinLogStreamReader(
        pymysql_wrapper=checked,
        connection_settings=mysql.connection_settings(source),
        server_id=probe_server_id(source.server_id),
        resume_stream=True,
        log_file=log_file,
        log_pos=4,
        blocking=False,
        is_mariadb=False,
        only_events=[FormatDescriptionEvent],
        enable_logging=False,
    )
    try:
        for event in stream:
            if event.timestamp:
                return dt.datetime.fromtimestamp(event.timestamp, dt.UTC)
        return None
    except pymysql.MySQLError as exc:
        raise mysql_error(exc, source, ProbingBinlogFile(log_file)) from None
    finally:
        stream.close()


__all__ = [
    "DEFAULT_RUNWAY_WARN_HOURS",
    "ExpirySettings",
    "TableRunway",
    "binlog_runway",
    "file_created_at",
    "probe_server_id",
    "runway_seconds",
    "table_runways",
]
