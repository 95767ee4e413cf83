"""Source-side checks that need no server: settings, TLS options, failure wording."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from cdc_lib.config import SourceConfig
from cdc_lib.errors import MissingGrantError, ServerSettingsError, SourceConnectionError
from cdc_lib.snapshot import jdbc_url
from cdc_lib.source import _describe_connect_failure, check_server_settings, connection_settings, query


class FakeCursor:
    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.rows: list[tuple[Any, ...]] = []

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, arguments: Any = None) -> None:
        for prefix, answer in self.answers.items():
            if sql.startswith(prefix):
                if isinstance(answer, BaseException):
                    raise answer
                self.rows = answer
                return
        raise AssertionError(f"unexpected query {sql}")

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


class FakeConnection:
    host, port = "db.example", 3306

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers

    def cursor(self) -> FakeCursor:
        return FakeCursor(self.answers)


GOOD = [("log_bin", "ON"), ("binlog_format", "ROW"), ("binlog_row_image", "FULL"), ("binlog_row_metadata", "FULL")]
GRANTS = [("GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `cdc`@`%`",)]


def server(variables: list[tuple[str, str]], grants: list[tuple[str]] = GRANTS, status: Any = None) -> FakeConnection:
    return FakeConnection({
        "SHOW GLOBAL VARIABLES": variables,
        "SHOW GRANTS": grants,
        "SHOW MASTER STATUS": status if status is not None else [("mysql-bin.000003", 157)],
        "SELECT @@GLOBAL.gtid_binlog_pos": [("0-1-5",)],
        "SELECT @@GLOBAL.server_id": [(1,)],
        "SELECT @@GLOBAL.server_uuid": pymysql.err.OperationalError(1193, "Unknown system variable 'server_uuid'"),
    })


def source(**overrides: Any) -> SourceConfig:
    values: dict[str, Any] = {"host": "db.example", "port": 3306, "user": "cdc", "password": "pw",
                              "server_id": 7, "tables": ("shop.orders",)}
    return SourceConfig(**{**values, **overrides})


def test_mysql_partial_json_is_refused_and_mariadb_has_no_such_variable() -> None:
    assert check_server_settings(server(GOOD))["binlog_format"] == "ROW"
    assert check_server_settings(server([*GOOD, ("binlog_row_value_options", "")]))
    with pytest.raises(ServerSettingsError, match="binlog_row_value_options is 'PARTIAL_JSON'") as raised:
        check_server_settings(server([*GOOD, ("binlog_row_value_options", "PARTIAL_JSON")]))
    assert "binlog_row_value_options=''" in raised.value.remedy


def test_settings_check_also_checks_grants_before_any_work() -> None:
    with pytest.raises(MissingGrantError, match="REPLICATION SLAVE"):
        check_server_settings(server(GOOD, grants=[("GRANT SELECT ON `shop`.* TO `cdc`@`%`",)]))
    denied = pymysql.err.OperationalError(1227, "Access denied; you need the BINLOG MONITOR privilege")
    with pytest.raises(MissingGrantError, match="SHOW MASTER STATUS"):
        check_server_settings(server(GOOD, status=denied))
    # A connection lost during the check is not a missing grant.
    lost = pymysql.err.OperationalError(2013, "Lost connection to server during query")
    with pytest.raises(SourceConnectionError, match="lost the connection to the MySQL server at db.example:3306"):
        check_server_settings(server(GOOD, status=lost))


def test_a_lost_connection_is_a_retryable_binlake_error() -> None:
    for error in (pymysql.err.OperationalError(2006, "MySQL server has gone away"), pymysql.err.InterfaceError(0, "")):
        with pytest.raises(SourceConnectionError) as raised:
            query(FakeConnection({"SELECT": error}), "SELECT 1")  # type: ignore[arg-type]
        assert raised.value.retryable
    with pytest.raises(pymysql.err.OperationalError):  # other server errors stay for the caller to judge
        query(FakeConnection({"SELECT": pymysql.err.OperationalError(1193, "Unknown system variable")}),  # type: ignore[arg-type]
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
    described = _describe_connect_failure(source(ssl_ca=ssl_ca), pymysql.err.OperationalError(*error),
                                          server_offers_tls=offers_tls)
    assert cause in str(described)
    assert described.retryable is retryable
    assert "pw" not in str(described).replace("password", "")
