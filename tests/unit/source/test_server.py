"""The source connection without a server: flavours, TLS options, lost connections, failure wording."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from cdc_lib.config.model import SourceConfig
from cdc_lib.errors import SourceConnectionError
from cdc_lib.snapshot.jdbc_read import jdbc_url
from cdc_lib.source.mysql_errors import Connecting, mysql_error
from cdc_lib.source.server import ServerFlavour, connection_settings, query
from tests.unit.source.fake_connection import FakeConnection


def source(**overrides: Any) -> SourceConfig:
    values: dict[str, Any] = {"host": "db.example", "port": 3306, "user": "cdc", "password": "pw",
                              "server_id": 7, "tables": ("shop.orders",)}
    return SourceConfig(**{**values, **overrides})


@pytest.mark.parametrize(
    ("version", "comment", "mariadb", "numbers", "statements", "privilege"),
    [
        ("10.11.19-MariaDB-0+deb12u1-log", "Debian 12", True, (10, 11, 19),
         ("SHOW BINLOG STATUS", "SHOW MASTER STATUS"), "BINLOG MONITOR"),
        ("11.4.4-MariaDB", "mariadb.org binary distribution", True, (11, 4, 4),
         ("SHOW BINLOG STATUS", "SHOW MASTER STATUS"), "BINLOG MONITOR"),
        ("5.5.5-10.4.34-MariaDB", "", True, (10, 4, 34), ("SHOW MASTER STATUS", "SHOW BINLOG STATUS"),
         "REPLICATION CLIENT"),
        ("8.0.36-28", "Percona Server (GPL), Release 28", False, (8, 0, 36),
         ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"), "REPLICATION CLIENT"),
        ("8.2.0", "MySQL Community Server - GPL", False, (8, 2, 0),
         ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"), "REPLICATION CLIENT"),
        ("8.4.3", "MySQL Community Server - GPL", False, (8, 4, 3),
         ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"), "REPLICATION CLIENT"),
        ("9.1.0-log", "MySQL Community Server - GPL", False, (9, 1, 0),
         ("SHOW BINARY LOG STATUS", "SHOW MASTER STATUS"), "REPLICATION CLIENT"),
    ],
)
def test_server_flavour_picks_the_statement_and_grant_names(version: str, comment: str, mariadb: bool,
                                                            numbers: tuple[int, int, int], statements: tuple[str, str],
                                                            privilege: str) -> None:
    flavour = ServerFlavour.parse(version, comment)
    assert (flavour.mariadb, flavour.version, flavour.status_statements, flavour.position_privilege) == (
        mariadb, numbers, statements, privilege)


def test_a_lost_connection_is_a_retryable_binlake_error() -> None:
    for error in (pymysql.err.OperationalError(2006, "MySQL server has gone away"), pymysql.err.InterfaceError(0, "")):
        with pytest.raises(SourceConnectionError) as raised:
            query(FakeConnection({"SELECT": error}), "SELECT 1")
        assert raised.value.retryable
    with pytest.raises(pymysql.err.OperationalError):  # other server errors stay for the caller to judge
        query(FakeConnection({"SELECT": pymysql.err.OperationalError(1193, "Unknown system variable")}),
              "SELECT @@x")


def test_tls_is_verified_everywhere_or_off_everywhere() -> None:
    assert connection_settings(source())["ssl_disabled"] is True
    assert "sslMode" not in jdbc_url(source())
    settings = connection_settings(source(ssl_ca="/etc/binlake/ca.pem"))
    assert settings["ssl_ca"] == "/etc/binlake/ca.pem"
    assert settings["ssl_verify_cert"] and settings["ssl_verify_identity"] and "ssl_disabled" not in settings
    assert "sslMode=verify-full&serverSslCert=/etc/binlake/ca.pem" in jdbc_url(source(ssl_ca="/etc/binlake/ca.pem"))
    assert "pw" not in jdbc_url(source(ssl_ca="/etc/binlake/ca.pem"))


@pytest.mark.parametrize(
    ("error", "ssl_ca", "offers_tls", "cause", "retryable"),
    [
        ((1045, "Access denied for user"), None, False, "refused the credentials of cdc@db.example:3306", False),
        ((1045, "Access denied for user"), None, True, "the server offers TLS and source.ssl_ca is not set", False),
        ((3159, "Connections using insecure transport are prohibited"), None, True, "requires TLS", False),
        ((2003, "Can't connect to MySQL server on 'db.example' ([SSL: CERTIFICATE_VERIFY_FAILED] certificate "
                "verify failed: self-signed certificate in certificate chain (_ssl.c:1006))"), "/ca.pem", True,
         "the server certificate does not check out against source.ssl_ca /ca.pem (self-signed certificate", False),
        ((2026, "SSL connection error: SSL is required but the server doesn't support it"), "/ca.pem", False,
         "does not offer TLS", False),
        ((2003, "Can't connect to MySQL server on 'db.example' ([Errno 111] Connection refused)"), None, False,
         "cannot reach the MySQL server at db.example:3306", True),
    ],
)
def test_connect_failures_name_the_cause(error: tuple[int, str], ssl_ca: str | None, offers_tls: bool, cause: str,
                                         retryable: bool) -> None:
    described = mysql_error(pymysql.err.OperationalError(*error), source(ssl_ca=ssl_ca),
                            Connecting(server_offers_tls=offers_tls))
    assert cause in str(described)
    assert described.retryable is retryable
    assert "pw" not in str(described).replace("password", "")
