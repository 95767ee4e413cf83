"""The server-flavour paths on the suite's real MariaDB 10.11 (docs/servers.md lists what each test proves)."""

from __future__ import annotations

from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.source import binlog_status, checks
from cdc_lib.source import server as mysql
from tests.conftest import sql


def test_mariadb_flavour_reads_its_position_with_show_binlog_status(mariadb: LocalMariaDB, make_config,
                                                                    database: str) -> None:
    config = make_config([f"{database}.t"])
    sql(mariadb, f"CREATE TABLE {database}.t (id INT PRIMARY KEY)", f"INSERT INTO {database}.t VALUES (1)")
    with mysql.source_connection(config.source) as connection:
        flavour = mysql.server_flavour(connection)
        position = binlog_status.current_position(connection)
        assert flavour.mariadb and flavour.version >= (10, 11, 0)
        assert flavour.status_statements[0] == "SHOW BINLOG STATUS" and flavour.position_privilege == "BINLOG MONITOR"
        # The new name and the old one answer the same row on MariaDB 10.11.
        assert mysql.query(connection, "SHOW BINLOG STATUS") == mysql.query(connection, "SHOW MASTER STATUS")
    file_name, offset = sql(mariadb, "SHOW MASTER STATUS")[0][:2]
    gtid = sql(mariadb, "SELECT @@GLOBAL.gtid_binlog_pos")[0][0]
    assert (position.file, position.pos, position.gtid) == (file_name, offset, gtid)
    assert position.server is not None and position.server.server_uuid is None


def test_a_wrong_guess_of_the_statement_falls_back_on_the_parse_error(mariadb: LocalMariaDB, make_config,
                                                                     database: str) -> None:
    """MariaDB 10.11 has no SHOW BINARY LOG STATUS (1064): a server taken for MySQL 8.4 still gets its position."""
    config = make_config([f"{database}.t"])
    with mysql.source_connection(config.source) as connection:
        expected = binlog_status.current_position(connection)
        mysql._FLAVOURS[connection] = mysql.ServerFlavour(mariadb=False, version=(8, 4, 3), version_text="8.4.3")
        assert binlog_status.status_rows(connection)[0][:2] == (expected.file, expected.pos)


def test_mariadb_log_bin_compress_is_not_a_settings_refusal(mariadb: LocalMariaDB, make_config,
                                                           database: str) -> None:
    """MariaDB's per-event compression is the binlog reader's to decode or stop on, as MySQL's
    binlog_transaction_compression (no such variable on MariaDB) is (tests/unit/binlog/test_payload.py)."""
    config = make_config([f"{database}.t"])
    sql(mariadb, "SET GLOBAL log_bin_compress = ON")
    try:
        with mysql.source_connection(config.source) as connection:
            settings = checks.check_server_settings(connection)
        assert "binlog_transaction_compression" not in settings
    finally:
        sql(mariadb, "SET GLOBAL log_bin_compress = OFF")
