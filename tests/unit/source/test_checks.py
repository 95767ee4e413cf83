"""The server checks without a server: binlog settings and grants, answered by a fake connection."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from cdc_lib.errors import MissingGrantError, ServerSettingsError, SourceConnectionError
from cdc_lib.source.checks import check_server_settings
from tests.unit.source.fake_connection import FakeConnection

GOOD = [("log_bin", "ON"), ("binlog_format", "ROW"), ("binlog_row_image", "FULL"), ("binlog_row_metadata", "FULL")]
GRANTS = [("GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%`",)]


def server(variables: list[tuple[str, str]], grants: list[tuple[str]] = GRANTS, status: Any = None) -> FakeConnection:
    return FakeConnection({
        "SELECT VERSION(), @@version_comment": [("10.11.19-MariaDB-0+deb12u1-log", "Debian 12")],
        "SHOW GLOBAL VARIABLES": variables,
        "SHOW GRANTS": grants,
        "SHOW BINLOG STATUS": status if status is not None else [("mysql-bin.000003", 157)],
        "SELECT @@GLOBAL.gtid_binlog_pos": [("0-1-5",)],
        "SELECT @@GLOBAL.server_id": [(1,)],
        "SELECT @@hostname, @@port, @@GLOBAL.log_bin_basename": [("db-1", 3306, "/var/lib/mysql/mysql-bin")],
        "SELECT @@GLOBAL.server_uuid": pymysql.err.OperationalError(1193, "Unknown system variable 'server_uuid'"),
    })


def test_mysql_partial_json_is_accepted_and_an_unknown_row_value_option_refused() -> None:
    assert check_server_settings(server(GOOD))["binlog_format"] == "ROW"
    assert check_server_settings(server([*GOOD, ("binlog_row_value_options", "")]))
    # PARTIAL_JSON diffs apply to the FULL before image (cdc_lib/binlog/json_diff.py), which is required anyway.
    assert check_server_settings(server([*GOOD, ("binlog_row_value_options", "PARTIAL_JSON")]))
    with pytest.raises(ServerSettingsError, match="binlog_row_value_options is 'SOME_FUTURE_OPTION'") as raised:
        check_server_settings(server([*GOOD, ("binlog_row_value_options", "SOME_FUTURE_OPTION")]))
    assert "binlog_row_value_options=''" in raised.value.remedy


def test_minimal_row_metadata_is_accepted_and_no_log_refused() -> None:
    # MINIMAL (MySQL 8's default) logs no column names: the reader names them from the schema by position.
    minimal = [*GOOD[:3], ("binlog_row_metadata", "MINIMAL")]
    assert check_server_settings(server(minimal))["binlog_row_metadata"] == "MINIMAL"
    for value in ("NO_LOG", None):
        variables = GOOD[:3] if value is None else [*GOOD[:3], ("binlog_row_metadata", value)]
        with pytest.raises(ServerSettingsError, match=f"binlog_row_metadata is '{value or '<missing>'}', binlake "
                           "needs 'MINIMAL' or 'FULL'") as raised:
            check_server_settings(server(variables))
        assert "binlog_row_metadata=MINIMAL or FULL" in raised.value.remedy


def test_mysql_transaction_compression_and_mariadb_log_bin_compress_are_not_refused() -> None:
    # The binlog reader opens MySQL's TRANSACTION_PAYLOAD events (cdc_lib/binlog/payload.py, issue 27).
    assert check_server_settings(server([*GOOD, ("binlog_transaction_compression", "OFF")]))
    assert check_server_settings(server([*GOOD, ("binlog_transaction_compression", "ON")]))
    # MariaDB's per-event compression is for the binlog reader to decode or stop on, not a server refusal.
    assert check_server_settings(server([*GOOD, ("log_bin_compress", "ON")]))


def test_settings_check_also_checks_grants_before_any_work() -> None:
    with pytest.raises(MissingGrantError, match="REPLICATION SLAVE"):
        check_server_settings(server(GOOD, grants=[("GRANT SELECT ON `shop`.* TO `cdc`@`%`",)]))
    denied = pymysql.err.OperationalError(1227, "Access denied; you need the BINLOG MONITOR privilege")
    with pytest.raises(MissingGrantError, match=r"binlog position \(SHOW BINLOG STATUS\)") as raised:
        check_server_settings(server(GOOD, status=denied))
    assert raised.value.remedy.startswith("GRANT BINLOG MONITOR ON *.* TO the binlake user (the server is MariaDB 10")
    # MariaDB's REPLICATION SLAVE ADMIN manages a replica; it does not allow a binlog dump.
    with pytest.raises(MissingGrantError, match="REPLICATION SLAVE"):
        check_server_settings(server(GOOD, grants=[("GRANT REPLICATION SLAVE ADMIN, BINLOG MONITOR ON *.* TO c",)]))
    assert check_server_settings(server(GOOD, grants=[("GRANT REPLICATION REPLICA, BINLOG MONITOR ON *.* TO c",)]))
    # A connection lost during the check is not a missing grant.
    lost = pymysql.err.OperationalError(2013, "Lost connection to server during query")
    with pytest.raises(SourceConnectionError, match="lost the connection to the MySQL server at db.example:3306"):
        check_server_settings(server(GOOD, status=lost))
