"""Each bad input gets one clear error naming the remedy, and nothing is half-written."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cdc_lib.errors import (
    BinlogPurgedError,
    MissingGrantError,
    ServerSettingsError,
    SourceConnectionError,
    TableError,
)
from cdc_lib.local_mariadb import LocalMariaDB, free_port
from cdc_lib.pipeline import Pipeline
from tests.conftest import CDC_PASSWORD, run_cli, sql, write_config_file


@pytest.fixture(scope="module")
def binlog_off_server(tmp_path_factory: pytest.TempPathFactory):
    server = LocalMariaDB(tmp_path_factory.mktemp("nobinlog"), server_id=21, extra_options={"log-bin": ""})
    server.start()
    server.create_cdc_user("binlake_test", CDC_PASSWORD)
    yield server
    server.stop()


def nothing_written(config) -> bool:
    return not Path(config.sink.path).exists()


def test_wrong_password(make_config, database) -> None:
    config = make_config([f"{database}.t"], source__password="wrong-password-123")
    with pytest.raises(SourceConnectionError, match="refused the credentials") as raised:
        Pipeline(config).snapshot()
    assert "wrong-password-123" not in str(raised.value)
    assert nothing_written(config)


def test_unreachable_server(make_config, database) -> None:
    config = make_config([f"{database}.t"], source__port=free_port())
    with pytest.raises(SourceConnectionError, match="cannot reach"):
        Pipeline(config).validate()


def test_binlog_off(binlog_off_server, make_config) -> None:
    sql(binlog_off_server, "CREATE DATABASE IF NOT EXISTS x", "CREATE TABLE IF NOT EXISTS x.t (id INT PRIMARY KEY)")
    config = make_config(["x.t"], source__port=binlog_off_server.port)
    with pytest.raises(ServerSettingsError, match="log_bin is 'OFF'") as raised:
        Pipeline(config).snapshot()
    assert "my.cnf" in raised.value.remedy
    assert nothing_written(config)


@pytest.mark.parametrize(
    ("setting", "bad_value"),
    [("binlog_format", "STATEMENT"), ("binlog_format", "MIXED"), ("binlog_row_image", "MINIMAL"),
     ("binlog_row_metadata", "MINIMAL")],
)
def test_wrong_binlog_settings(mariadb, make_config, database, setting: str, bad_value: str) -> None:
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY)")
    config = make_config([f"{database}.t"])
    original = sql(mariadb, f"SELECT @@GLOBAL.{setting}")[0][0]
    sql(mariadb, f"SET GLOBAL {setting} = '{bad_value}'")
    try:
        with pytest.raises(ServerSettingsError, match=f"{setting} is '{bad_value}'"):
            Pipeline(config).validate()
        with pytest.raises(ServerSettingsError):
            Pipeline(config).sync()
    finally:
        sql(mariadb, f"SET GLOBAL {setting} = '{original}'")
    assert nothing_written(config)


def test_table_without_primary_key_and_missing_table(mariadb, make_config, database) -> None:
    sql(mariadb, f"CREATE TABLE {database}.nopk (a INT, b INT)")
    with pytest.raises(TableError, match="no primary key") as raised:
        Pipeline(make_config([f"{database}.nopk"])).snapshot()
    assert "ADD PRIMARY KEY" in raised.value.remedy
    with pytest.raises(TableError, match="does not exist"):
        Pipeline(make_config([f"{database}.missing"])).validate()


def test_missing_grants(mariadb, make_config, database) -> None:
    sql(
        mariadb,
        f"CREATE TABLE {database}.t (id INT PRIMARY KEY)",
        "CREATE USER IF NOT EXISTS 'weak'@'127.0.0.1' IDENTIFIED BY 'weak-pw'",
        f"GRANT SELECT ON {database}.* TO 'weak'@'127.0.0.1'",
    )
    config = make_config([f"{database}.t"], source__user="weak", source__password="weak-pw")
    with pytest.raises(MissingGrantError, match="REPLICATION"):
        Pipeline(config).validate()


def purge_all_but_newest(server: LocalMariaDB) -> None:
    """PURGE skips files a connected reader still uses; end leftover dumps until the purge takes."""
    sql(server, "FLUSH BINARY LOGS")
    newest = sql(server, "SHOW MASTER STATUS")[0][0]
    for _ in range(20):
        sql(server, f"PURGE BINARY LOGS TO '{newest}'")
        if [row[0] for row in sql(server, "SHOW BINARY LOGS")] == [newest]:
            return
        for row in sql(server, "SHOW PROCESSLIST"):
            if str(row[4]).startswith("Binlog Dump"):
                sql(server, f"KILL CONNECTION {row[0]}")
        time.sleep(0.5)
    pytest.fail("the server kept old binlogs")


def test_purged_binlog_position(mariadb, make_config, database) -> None:
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {database}.t VALUES (1, 1)")
    config = make_config([f"{database}.t"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    purge_all_but_newest(mariadb)
    with pytest.raises(BinlogPurgedError, match="re-snapshot"):
        pipeline.validate()
    result = pipeline.sync()[0]
    assert "is gone" in result.skipped_tables[f"{database}.t"]
    assert pipeline.status()[0].error is not None
    pipeline.snapshot([f"{database}.t"])
    assert pipeline.read_state().tables[f"{database}.t"].error is None


def test_cli_prints_one_line_and_hides_the_password(make_config, database, tmp_path) -> None:
    config = make_config([f"{database}.t"])
    path = write_config_file(config, tmp_path / "binlake.yaml")
    result = run_cli(path, "validate", env={"BINLAKE_TEST_PASSWORD": "not-the-password-xyz"})
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("binlake: error:") and "remedy:" in lines[0]
    assert "not-the-password-xyz" not in result.stderr + result.stdout
    missing = run_cli(tmp_path / "absent.yaml", "status")
    assert missing.returncode != 0 and "does not exist" in missing.stderr
