"""MySQL 8.4 where binlake can observe it, against the protocol stub in tests/mysql_stub.py.

No MySQL server can be installed here; docs/servers.md says which behaviours this proves and which
paths are written from MySQL's documentation only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from cdc_lib.config.model import PipelineConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import MissingGrantError, ServerSettingsError, SourceConnectionError
from cdc_lib.model.positions import BinlogPosition, ServerIdentity
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.source import binlog_status, checks
from cdc_lib.source import server as mysql
from cdc_lib.status import runway
from tests.mysql_stub import SHOP_ORDERS, UUID, MySQLStub


@pytest.fixture
def stub() -> Iterator[MySQLStub]:
    server = MySQLStub(extra=dict(SHOP_ORDERS)).start()
    yield server
    server.stop()


def config_for(server: MySQLStub, tmp_path: Path, **source: Any) -> PipelineConfig:
    return parse_config({
        "pipeline": "shop",
        "source": {"host": "127.0.0.1", "port": server.port, "user": server.user, "password": server.password,
                   "server_id": 4242, "tables": ["shop.orders"], "connect_timeout": 5, **source},
        "sink": {"path": str(tmp_path / "lake")},
        "offsets": {"uri": str(tmp_path / "lake" / "_offsets")},
    })


def test_position_on_mysql_84_is_read_with_show_binary_log_status(stub: MySQLStub, tmp_path: Path) -> None:
    with mysql.source_connection(config_for(stub, tmp_path).source) as connection:
        flavour = mysql.server_flavour(connection)
        position = binlog_status.current_position(connection)
        again = binlog_status.current_position(connection)
    assert not flavour.mariadb and flavour.version == (8, 4, 3)
    assert position == again == BinlogPosition(
        file="binlog.000003", pos=157, gtid=f"{UUID}:1-57", server=ServerIdentity(server_id=1, server_uuid=UUID)
    )
    # Asked once per connection; the statement 8.4 removed is never sent, nor MariaDB's variables.
    assert stub.queries.count("SELECT VERSION(), @@version_comment") == 1
    assert "SHOW MASTER STATUS" not in stub.queries
    assert stub.queries.count("SHOW BINARY LOG STATUS") == 2
    assert not any("gtid_binlog_pos" in sql for sql in stub.queries)


def test_mysql_80_still_gets_show_master_status_and_a_misleading_version_falls_back(tmp_path: Path) -> None:
    with MySQLStub(version="8.0.40") as server, mysql.source_connection(config_for(server, tmp_path).source) as c:
        assert binlog_status.current_position(c).file == "binlog.000003"
    assert "SHOW MASTER STATUS" in server.queries and "SHOW BINARY LOG STATUS" not in server.queries
    # VERSION() says 8.0 (a proxy, a relabelled build) but the server is 8.4: the 1064 is answered by the new name.
    with MySQLStub(reported_version="8.0.40-proxy") as server, \
            mysql.source_connection(config_for(server, tmp_path).source) as connection:
        assert binlog_status.current_position(connection).pos == 157
    assert server.queries[-2:] == ["SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"]


def test_settings_and_grants_pass_on_mysql_84_with_its_least_privilege_grants(stub: MySQLStub, tmp_path: Path) -> None:
    with mysql.source_connection(config_for(stub, tmp_path).source) as connection:
        settings = checks.check_server_settings(connection)
    assert settings["binlog_format"] == "ROW" and settings["binlog_row_value_options"] == ""


def test_validate_runs_end_to_end_against_mysql_84(stub: MySQLStub, tmp_path: Path) -> None:
    checked = Pipeline(config_for(stub, tmp_path)).validate()
    assert any("grants: replication and binlog status readable" in line for line in checked)
    assert "SHOW MASTER STATUS" not in stub.queries


@pytest.mark.parametrize(
    ("grants", "message", "remedy"),
    [
        # REPLICATION CLIENT contains "REPLICA" but does not allow a binlog dump.
        (["GRANT REPLICATION CLIENT ON *.* TO `cdc`@`%`"], "lacks the REPLICATION SLAVE privilege",
         "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.*"),
        (["GRANT REPLICATION SLAVE ON *.* TO `cdc`@`%`"],
         r"may not read the binlog position \(SHOW BINARY LOG STATUS\)", "GRANT REPLICATION CLIENT ON *.*"),
    ],
)
def test_each_missing_mysql_grant_is_named(stub: MySQLStub, tmp_path: Path, grants: list[str], message: str,
                                           remedy: str) -> None:
    stub.grants = grants
    with pytest.raises(MissingGrantError, match=message) as raised:
        Pipeline(config_for(stub, tmp_path)).validate()
    assert remedy in raised.value.remedy and "the server is MySQL 8.4.3" in raised.value.remedy
    assert not (tmp_path / "lake").exists()


def test_mysql_transaction_compression_is_not_refused_by_validate(stub: MySQLStub, tmp_path: Path) -> None:
    # Issue 27: the binlog reader opens TRANSACTION_PAYLOAD events (tests/unit/binlog/test_payload.py).
    stub.variables["binlog_transaction_compression"] = "ON"
    Pipeline(config_for(stub, tmp_path)).validate()


def test_caching_sha2_full_authentication_by_rsa_then_fast_authentication(stub: MySQLStub, tmp_path: Path) -> None:
    source = config_for(stub, tmp_path).source
    for _ in range(2):
        mysql.connect(source).close()
    # MySQL 8.4's default plugin: the first login (empty server cache) exchanges the RSA key without TLS.
    assert stub.logins == ["sha2-full-rsa", "sha2-fast"]
    with pytest.raises(SourceConnectionError, match="refused the credentials"):
        mysql.connect(config_for(stub, tmp_path, password="wrong").source)


def test_caching_sha2_without_the_cryptography_package_is_a_clear_error(stub: MySQLStub, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pymysql._auth, "_have_cryptography", False)  # as if `cryptography` were not installed
    with pytest.raises(SourceConnectionError, match="needs the Python package 'cryptography'") as raised:
        mysql.connect(config_for(stub, tmp_path).source)
    assert not raised.value.retryable
    assert "pip install cryptography" in raised.value.remedy and "source.ssl_ca" in raised.value.remedy
    # A user already in the server's cache logs in by fast authentication, which needs no RSA.
    stub.sha2_cache.add(stub.user)
    mysql.connect(config_for(stub, tmp_path).source).close()
    assert stub.logins == ["sha2-fast"]


def test_mysql_native_password_still_works(tmp_path: Path) -> None:
    with MySQLStub(auth_plugin="mysql_native_password", version="8.0.40") as server:
        mysql.connect(config_for(server, tmp_path).source).close()
    assert server.logins == ["native"]


def test_runway_and_the_binlog_reader_send_nothing_84_lacks(stub: MySQLStub, tmp_path: Path) -> None:
    """Runway reads expiry and binlog sizes; python-mysql-replication, given a file and offset as binlake always
    gives it, asks for checksum and row metadata settings and starts the dump without a status statement."""
    source = config_for(stub, tmp_path).source
    with mysql.source_connection(source) as connection:
        expiry = runway.ExpirySettings.read(connection)  # 8.4 removed expire_logs_days
        logs = binlog_status.binary_logs(connection)
    assert expiry.expire_seconds == 2_592_000 and expiry.size_limit_bytes is None
    assert logs == [("binlog.000002", 1_201), ("binlog.000003", 157)]
    assert runway._file_created_at(source, "binlog.000002") is None  # the stub sends no events
    assert "<COM_BINLOG_DUMP binlog.000002:4>" in stub.queries
    assert not any(status in stub.queries for status in ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"))
    assert "SHOW GLOBAL VARIABLES LIKE 'BINLOG_CHECKSUM'" in stub.queries


def test_an_idempotent_mysql_replica_logging_its_updates_refuses_the_append_path(stub: MySQLStub,
                                                                                 tmp_path: Path) -> None:
    stub.variables.update(replica_exec_mode="IDEMPOTENT", log_replica_updates="ON")
    config = config_for(stub, tmp_path)
    with pytest.raises(ServerSettingsError, match="replica_exec_mode is 'IDEMPOTENT', binlake needs 'STRICT'") \
            as raised:
        Pipeline(config).validate()
    assert "batch.append_inserts: false" in raised.value.remedy
    assert "SET GLOBAL replica_exec_mode='STRICT'" in raised.value.remedy
    # Without the append path every change is MERGEd, which an overwrite logged as an INSERT cannot mislead.
    without_append = dataclasses.replace(config, batch=dataclasses.replace(config.batch, append_inserts=False))
    assert Pipeline(without_append).validate()
    stub.variables["log_replica_updates"] = "OFF"
    assert Pipeline(config).validate()
