"""Whether CDC can work on a server: its binlog settings and the binlake user's grants, checked by every command
that reads the source before it writes anything."""

from __future__ import annotations

import re

import pymysql

from cdc_lib.errors import MissingGrantError, ServerSettingsError, SourceConnectionError
from cdc_lib.source.binlog_status import current_position
from cdc_lib.source.server import query, server_flavour

REQUIRED_SETTINGS = {
    "log_bin": "ON",
    "binlog_format": "ROW",
    "binlog_row_image": "FULL",
}
#: MINIMAL (MySQL 8.0's and 8.4's default) logs no column names: the reader names a table map's columns from the
#: table's schema by position, checked against the types, signedness and charsets MINIMAL does log
#: (cdc_lib/binlog/column_positions.py). MariaDB's NO_LOG (its default) logs none of those, which leaves the
#: types alone to check a mapping by: refused, as a server without the variable (before MySQL 8.0.1, MariaDB 10.5).
ROW_METADATA_SETTING = "binlog_row_metadata"
ROW_METADATA_VALUES = frozenset({"FULL", "MINIMAL"})
#: What the binlake user needs on *.* besides SELECT on the followed tables (MariaDB ≥ 10.5 names).
LEAST_PRIVILEGE_GRANTS = "REPLICATION SLAVE, BINLOG MONITOR"

#: MySQL 8 only (MariaDB has no such variable): PARTIAL_JSON logs a JSON update as a diff against the old
#: document, which the reader applies to the before image (`cdc_lib.binlog.json_diff`): with
#: binlog_row_image=FULL, required above, that image always carries the old document. A value binlake does
#: not know (a later server's new option) is refused.
PARTIAL_JSON_SETTING = "binlog_row_value_options"
PARTIAL_JSON_VALUES = frozenset({"", "PARTIAL_JSON"})
#: A replica applying in IDEMPOTENT mode turns a duplicate-key INSERT into an overwrite, and with log_*_updates
#: it logs what it did: the append path of a batch (`batch.append_inserts`) needs that logged as a change of an
#: existing row, never as an INSERT. MySQL 8.0.26 renamed both and keeps the old names as aliases (MariaDB has the
#: old ones only): the new name comes first, so a remedy names the one the server's manual uses.
EXEC_MODE_SETTINGS = ("replica_exec_mode", "slave_exec_mode")
LOG_REPLICA_UPDATES_SETTINGS = ("log_replica_updates", "log_slave_updates")


def check_server_settings(
    connection: pymysql.connections.Connection, *, append_inserts: bool = False
) -> dict[str, str]:
    """Raise unless CDC can work: binlog on, ROW format, FULL image, MINIMAL or FULL metadata, no unknown row value
    option, and the user may read the binlog and its position.

    MySQL's `binlog_transaction_compression=ON` is read (cdc_lib/binlog/payload.py), as is MariaDB's
    `log_bin_compress`: neither is refused here.

    With `append_inserts` (the sync's `batch.append_inserts`), also refuse a MySQL replica whose binlog might
    log an overwrite as an INSERT (`inserts_may_overwrite`): appending such a row would duplicate its key.

    Every command that reads the source calls this before it writes anything.

    Raises:
        ServerSettingsError: a binlog setting is wrong.
        MissingGrantError: the user lacks REPLICATION SLAVE or BINLOG MONITOR / REPLICATION CLIENT.
    """
    names = ", ".join(
        f"'{name}'" for name in (
            *REQUIRED_SETTINGS, ROW_METADATA_SETTING, PARTIAL_JSON_SETTING, *EXEC_MODE_SETTINGS,
            *LOG_REPLICA_UPDATES_SETTINGS,
        )
    )
    rows = query(connection, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")
    actual = {str(name).lower(): str(value).upper() for name, value in rows}
    for setting, expected in REQUIRED_SETTINGS.items():
        value = actual.get(setting, "<missing>")
        if value != expected:
            raise ServerSettingsError(setting, value, expected)
    metadata = actual.get(ROW_METADATA_SETTING, "<missing>")
    if metadata not in ROW_METADATA_VALUES:
        raise ServerSettingsError(
            ROW_METADATA_SETTING, metadata, "MINIMAL' or 'FULL",
            remedy=f"set {ROW_METADATA_SETTING}=MINIMAL or FULL in the server's my.cnf (or SET GLOBAL) and restart "
            "it; FULL also names the columns in the binlog, so no mapping by position is needed",
        )
    if actual.get(PARTIAL_JSON_SETTING, "") not in PARTIAL_JSON_VALUES:
        raise ServerSettingsError(
            PARTIAL_JSON_SETTING,
            actual[PARTIAL_JSON_SETTING],
            "PARTIAL_JSON",
            remedy=f"SET GLOBAL {PARTIAL_JSON_SETTING}='' or 'PARTIAL_JSON' (and in my.cnf): binlake reads whole "
            "values and PARTIAL_JSON diffs in the binlog, not this option",
        )
    if append_inserts and inserts_may_overwrite(actual) and not server_flavour(connection).mariadb:
        # MariaDB logs such an overwrite as an UPDATE (or a DELETE and an INSERT), which the append path never
        # takes (tests/integration/test_failover.py shows it); MySQL is expected to do the same, but there is
        # no MySQL server here to show it, so binlake does not rely on it.
        mode = next(name for name in EXEC_MODE_SETTINGS if actual.get(name) == "IDEMPOTENT")
        raise ServerSettingsError(
            mode, "IDEMPOTENT", "STRICT",
            remedy=f"this MySQL server is a replica that applies in IDEMPOTENT mode and logs what it applies; "
            f"binlake cannot show that its binlog never records an overwrite as an INSERT: set "
            f"batch.append_inserts: false in the pipeline config (every change is then MERGEd), or SET GLOBAL "
            f"{mode}='STRICT' on the replica",
        )
    check_grants(connection)
    return actual


def inserts_may_overwrite(settings: dict[str, str]) -> bool:
    """True when the server's binlog may hold an INSERT of a key that already existed (see EXEC_MODE_SETTINGS)."""
    idempotent = any(settings.get(name) == "IDEMPOTENT" for name in EXEC_MODE_SETTINGS)
    return idempotent and any(settings.get(name) in ("ON", "1") for name in LOG_REPLICA_UPDATES_SETTINGS)


#: REPLICATION SLAVE under its MySQL and MariaDB names (MariaDB ≥ 10.5.1 also accepts REPLICATION REPLICA);
#: not MariaDB's REPLICATION SLAVE ADMIN, which manages a replica and does not let the user read the binlog.
_REPLICATION_SLAVE = re.compile(r"\bREPLICATION (?:SLAVE|REPLICA)\b(?! ADMIN)")


def check_grants(connection: pymysql.connections.Connection) -> None:
    """Raise MissingGrantError unless the user may read the binlog and its status."""
    flavour = server_flavour(connection)
    grants = " ".join(str(row[0]).upper() for row in query(connection, "SHOW GRANTS"))
    if "ALL PRIVILEGES ON *.*" in grants:
        return
    if not _REPLICATION_SLAVE.search(grants):
        raise MissingGrantError(
            "the user lacks the REPLICATION SLAVE privilege",
            remedy=f"GRANT {flavour.least_privilege_grants} ON *.* TO the binlake user ({flavour.grant_note})",
        )
    try:
        current_position(connection)
    except SourceConnectionError as exc:
        if exc.retryable:
            raise
        raise MissingGrantError(
            f"the user may not read the binlog position ({flavour.status_statements[0]})",
            remedy=f"GRANT {flavour.position_privilege} ON *.* TO the binlake user ({flavour.grant_note})",
        ) from None

