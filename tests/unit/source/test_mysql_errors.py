"""The one MySQL error mapper, driven with real pymysql errors for every code it knows, per doing-context."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from cdc_lib.config.model import SourceConfig
from cdc_lib.errors import BinlakeError, BinlogPurgedError, ServerHistoryError, SourceConnectionError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.source.mysql_errors import (
    CONNECTION_LOST_CODES,
    Connecting,
    Doing,
    ProbingBinlogFile,
    Querying,
    ReadingBinlog,
    connection_lost,
    error_code,
    error_message,
    error_text,
    mysql_error,
)


def source(**overrides: Any) -> SourceConfig:
    values: dict[str, Any] = {"host": "db.example", "port": 3306, "user": "cdc", "password": "s3cret",
                              "server_id": 7, "tables": ("shop.orders",)}
    return SourceConfig(**{**values, **overrides})


class OpenConnection:
    """What `Querying` reads from a connection: where it goes."""

    host, port, user = "db.example", 3306, "cdc"


def error(code: int, message: str = "boom") -> pymysql.err.OperationalError:
    return pymysql.err.OperationalError(code, message)


START = BinlogPosition("mysql-bin.000007", 1234)
READING = ReadingBinlog(START)
READING_GTID = ReadingBinlog(START, gtid_state="0-1-42")
PROBING = ProbingBinlogFile("mysql-bin.000003")
LOGIN_CONTEXTS: list[Doing] = [Connecting(), Connecting(server_offers_tls=True), READING, READING_GTID, PROBING]
BINLOG_CONTEXTS: list[Doing] = [READING, READING_GTID, PROBING]


def check(described: BinlakeError, kind: type[BinlakeError], *, retryable: bool, cause: str = "",
          remedy: str = "") -> None:
    assert type(described) is kind
    assert described.retryable is retryable
    assert cause in described.cause
    assert remedy in described.remedy
    assert "s3cret" not in str(described)


# -- login refusals: the same wherever binlake logs in --------------------------------------------------


@pytest.mark.parametrize("doing", LOGIN_CONTEXTS, ids=repr)
def test_access_denied_is_written_once_and_names_the_login(doing: Doing) -> None:
    described = mysql_error(error(1045, "Access denied for user 'cdc'@'10.0.0.5' (using password: YES)"),
                            source(), doing)
    check(described, SourceConnectionError, retryable=False,
          cause="the server refused the credentials of cdc@db.example:3306 (access denied)",
          remedy="check source.user and the password variable")


def test_access_denied_with_a_server_offering_tls_and_no_ssl_ca_points_at_ssl_ca() -> None:
    hinted = mysql_error(error(1045, "Access denied"), source(), Connecting(server_offers_tls=True))
    check(hinted, SourceConnectionError, retryable=False,
          cause="the server offers TLS and source.ssl_ca is not set", remedy="set source.ssl_ca")
    # With source.ssl_ca set the connection used TLS, so TLS cannot be why it was refused.
    plain = mysql_error(error(1045, "Access denied"), source(ssl_ca="/ca.pem"), Connecting(server_offers_tls=True))
    check(plain, SourceConnectionError, retryable=False, cause="refused the credentials of cdc@db.example:3306")
    assert "ssl_ca" not in str(plain)
    # Not known to offer TLS (no handshake seen, or a binlog read): no guess about TLS.
    for doing in (Connecting(), READING, PROBING):
        assert "ssl_ca" not in str(mysql_error(error(1045, "Access denied"), source(), doing))


@pytest.mark.parametrize("doing", LOGIN_CONTEXTS, ids=repr)
def test_insecure_transport_refused_asks_for_ssl_ca(doing: Doing) -> None:
    described = mysql_error(error(3159, "Connections using insecure transport are prohibited"), source(), doing)
    check(described, SourceConnectionError, retryable=False, cause="db.example:3306 requires TLS",
          remedy="set source.ssl_ca")


# -- connecting -------------------------------------------------------------------------------------------


def test_a_certificate_that_does_not_check_out_names_ssl_ca_and_host() -> None:
    message = ("Can't connect to MySQL server on 'db.example' ([SSL: CERTIFICATE_VERIFY_FAILED] certificate verify "
               "failed: self-signed certificate in certificate chain (_ssl.c:1006))")
    described = mysql_error(error(2003, message), source(ssl_ca="/ca.pem"), Connecting(server_offers_tls=True))
    check(described, SourceConnectionError, retryable=False,
          cause="TLS to db.example:3306 failed: the server certificate does not check out against source.ssl_ca "
          "/ca.pem (self-signed certificate in certificate chain)",
          remedy="set source.ssl_ca to the CA that signed the server certificate, and source.host")
    # Without source.ssl_ca binlake asked for no TLS: the same code is an unreachable server.
    unreachable = mysql_error(error(2003, message), source(), Connecting())
    check(unreachable, SourceConnectionError, retryable=True, cause="cannot reach")


def test_ssl_ca_against_a_server_without_tls() -> None:
    described = mysql_error(error(2026, "SSL connection error: SSL is required but the server doesn't support it"),
                            source(ssl_ca="/ca.pem"), Connecting())
    check(described, SourceConnectionError, retryable=False,
          cause="source.ssl_ca is set but the server at db.example:3306 does not offer TLS",
          remedy="or remove source.ssl_ca")


@pytest.mark.parametrize("code", sorted(CONNECTION_LOST_CODES))
def test_an_unreachable_server_is_retryable_and_names_host_and_port(code: int) -> None:
    described = mysql_error(error(code, "Connection refused"), source(), Connecting())
    check(described, SourceConnectionError, retryable=True, cause="cannot reach the MySQL server at db.example:3306",
          remedy="check source.host and source.port")


def test_unknown_database_and_anything_else_at_connect() -> None:
    check(mysql_error(error(1049, "Unknown database 'x'"), source(), Connecting()), SourceConnectionError,
          retryable=False, cause="unknown database for cdc@db.example:3306", remedy="check source.tables")
    check(mysql_error(error(1040, "Too many connections"), source(), Connecting()), SourceConnectionError,
          retryable=True, cause="cannot connect as cdc@db.example:3306 (MySQL error 1040: Too many connections)",
          remedy="check the source settings")


# -- querying an open connection --------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(CONNECTION_LOST_CODES))
def test_a_lost_connection_while_querying_says_nothing_was_applied(code: int) -> None:
    described = mysql_error(error(code, "Lost connection to server during query"), OpenConnection(), Querying())
    check(described, SourceConnectionError, retryable=True,
          cause=f"lost the connection to the MySQL server at db.example:3306 (MySQL error {code}: Lost connection",
          remedy="nothing past the last committed batch was applied")


def test_a_closed_connection_is_lost_too() -> None:
    closed = pymysql.err.InterfaceError(0, "")
    assert connection_lost(closed)
    check(mysql_error(closed, OpenConnection(), Querying()), SourceConnectionError, retryable=True,
          cause="lost the connection to the MySQL server at db.example:3306")


def test_a_refused_statement_is_not_retryable() -> None:
    described = mysql_error(error(1142, "SELECT command denied"), OpenConnection(), Querying())
    check(described, SourceConnectionError, retryable=False, cause="db.example:3306 refused a statement",
          remedy="grants")
    assert not connection_lost(error(1142))


# -- reading the binlog -----------------------------------------------------------------------------------


def test_a_purged_binlog_position_asks_for_a_re_snapshot() -> None:
    described = mysql_error(error(1236, "Could not find first log file name in binary log index file"), source(),
                            READING)
    check(described, BinlogPurgedError, retryable=False,
          cause="the server cannot send the binlog from mysql-bin.000007:1234 (Could not find first log file",
          remedy="re-snapshot the affected tables")


def test_missing_gtid_history_asks_for_a_re_snapshot_or_the_old_server() -> None:
    described = mysql_error(error(1236, "Error: connecting slave requested to start from GTID 0-1-42"), source(),
                            READING_GTID)
    check(described, ServerHistoryError, retryable=False,
          cause="cannot send the binlog from GTID state '0-1-42' (Error: connecting slave",
          remedy="re-snapshot the tables")
    assert "source.host/port back at a server with that history" in described.remedy


@pytest.mark.parametrize("doing", BINLOG_CONTEXTS, ids=repr)
@pytest.mark.parametrize("code", [1227, 1044])
def test_a_user_without_replication_slave_is_told_to_grant_it(code: int, doing: Doing) -> None:
    described = mysql_error(error(code, "Access denied; you need (at least one of) the REPLICATION SLAVE privilege"),
                            source(), doing)
    check(described, SourceConnectionError, retryable=False, cause="the user may not read the binlog",
          remedy="GRANT REPLICATION SLAVE ON *.* TO the binlake user")


def test_a_duplicate_server_id_names_the_setting() -> None:
    described = mysql_error(error(4052, "A slave with the same server_uuid/server_id as this slave has connected"),
                            source(), READING)
    check(described, SourceConnectionError, retryable=False, cause="the same source.server_id",
          remedy="its own source.server_id")


@pytest.mark.parametrize("code", [2013, 1040, 1317])
def test_anything_else_while_reading_is_retryable(code: int) -> None:
    for doing in (READING, READING_GTID):
        described = mysql_error(error(code, "Lost connection to server during query"), source(), doing)
        check(described, SourceConnectionError, retryable=True,
              cause=f"reading the binlog failed (MySQL error {code}: Lost connection", remedy="retry")


# -- probing one binlog file (the runway) -----------------------------------------------------------------


@pytest.mark.parametrize("code", [1236, 4052, 2013])
def test_a_probe_that_fails_otherwise_is_retryable(code: int) -> None:
    # A file purged under the probe, or another probe with the same id: a later probe sees the new state,
    # so neither a re-snapshot nor a server_id change is the remedy.
    described = mysql_error(error(code, "gone"), source(), PROBING)
    check(described, SourceConnectionError, retryable=True,
          cause=f"reading the start of binlog mysql-bin.000003 failed (MySQL error {code}: gone)",
          remedy="REPLICATION SLAVE")


# -- the helpers ------------------------------------------------------------------------------------------


def test_error_parts() -> None:
    lost = error(2013, "Lost connection " + "x" * 300)
    assert error_code(lost) == 2013 and error_code(ValueError("2013")) is None
    assert error_message(lost).startswith("Lost connection") and error_message(pymysql.err.OperationalError()) == ""
    assert error_text(lost) == "MySQL error 2013: " + ("Lost connection " + "x" * 300)[:200]
    assert error_text(ValueError("bad")) == "ValueError: bad"
    assert connection_lost(lost) and not connection_lost(error(1045)) and not connection_lost(ValueError())
