"""Pure parts of cdc_lib/snapshot/watermarks.py, the identity fingerprint, and the MySQL path against the protocol stub.

The MySQL 8 path (performance_schema.log_status) cannot run against a real MySQL here; the stub
(tests/mysql_stub.py) answers what the MySQL manual documents, so these tests prove the statements
binlake sends and how it reads the answers, not MySQL's locking itself (docs/servers.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from cdc_lib.config.parse import parse_config
from cdc_lib.errors import MissingGrantError, ServerSettingsError, WatermarkRaceError
from cdc_lib.model.positions import BinlogPosition, ServerIdentity
from cdc_lib.model.tables import TableRef
from cdc_lib.snapshot.watermarks import (
    MAX_ATTEMPTS,
    _race_in,
    consistent_low_watermark,
    parse_log_status,
    split_use_prefix,
)
from cdc_lib.source import server as mysql
from tests.mysql_stub import SHOP_ORDERS, UUID, MySQLStub, StubError

TABLE = TableRef("shop", "orders")
AT = BinlogPosition("binlog.000007", 1_234)


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ("use `shop`; ALTER TABLE orders ADD COLUMN x INT", ("shop", "ALTER TABLE orders ADD COLUMN x INT")),
        ("use `we``ird`; DROP TABLE t", ("we`ird", "DROP TABLE t")),
        ("ALTER TABLE shop.orders DROP COLUMN note", ("", "ALTER TABLE shop.orders DROP COLUMN note")),
        ("use `shop`; CREATE TABLE t (a INT,\n b INT)", ("shop", "CREATE TABLE t (a INT,\n b INT)")),
    ],
)
def test_split_use_prefix(info: str, expected: tuple[str, str]) -> None:
    assert split_use_prefix(info) == expected


@pytest.mark.parametrize(
    ("event_type", "info", "races"),
    [
        ("Query", "use `shop`; ALTER TABLE orders ADD COLUMN price DECIMAL(7,3)", True),
        ("Query", "ALTER TABLE `shop`.`orders` MODIFY note VARCHAR(40)", True),
        ("Query_compressed", "use `shop`; ALTER TABLE orders DROP COLUMN note", True),
        ("Query", "use `shop`; DROP TABLE orders", True),
        ("Query", "use `shop`; RENAME TABLE orders_new TO orders", True),
        ("Query", "use `other`; ALTER TABLE orders ADD COLUMN x INT", False),  # other.orders
        ("Query", "use `shop`; ALTER TABLE customers ADD COLUMN x INT", False),
        ("Query", "use `shop`; ALTER TABLE orders ADD INDEX by_note (note)", False),  # no column changes
        ("Query", "use `shop`; TRUNCATE TABLE orders", False),  # rows, not shape
        ("Query", "BEGIN", False),
        ("Query", "COMMIT", False),
        ("Annotate_rows", "ALTER TABLE shop.orders ADD COLUMN x INT", False),  # the text of a row event
        ("Gtid", "BEGIN GTID 0-11-8", False),
        ("Query", b"use `shop`; ALTER TABLE orders ADD COLUMN caf\xc3\xa9 INT", True),
    ],
)
def test_which_binlog_events_race_the_watermark(event_type: str, info: Any, races: bool) -> None:
    race = _race_in(TABLE, event_type, info, AT)
    assert (race is not None) is races
    if race is not None:
        assert race.position == AT and "orders" in race.statement and not race.statement.startswith("use ")


def test_parse_log_status() -> None:
    server = ServerIdentity(1, UUID)
    local = json.dumps({"gtid_executed": f"{UUID}:1-57,\n{UUID[:-1]}7:1-3", "binary_log_file": "binlog.000003",
                        "binary_log_position": 157})
    position = parse_log_status(local.encode(), server)
    assert position == BinlogPosition("binlog.000003", 157, f"{UUID}:1-57,{UUID[:-1]}7:1-3", server)
    assert parse_log_status(json.dumps({"gtid_executed": "", "binary_log_file": "b.000001",
                                        "binary_log_position": 4}), None).gtid is None
    with pytest.raises(ServerSettingsError, match="log_bin"):
        parse_log_status(json.dumps({"gtid_executed": ""}), server)


def test_same_server_compares_the_fingerprint_only_where_both_know_it() -> None:
    basename = "/var/lib/mysql/mariadb-bin"
    one = ServerIdentity(1, None, hostname="db-a", port=3306, binlog_basename=basename)
    assert one.same_server(ServerIdentity(1, None, hostname="db-a", port=3306, binlog_basename=basename))
    assert one.same_server(ServerIdentity(1))  # an older record, or a server that hides its variables
    assert not one.same_server(ServerIdentity(1, None, hostname="db-b", port=3306))
    assert not one.same_server(ServerIdentity(1, None, hostname="db-a", port=3307))
    assert not one.same_server(ServerIdentity(2, None, hostname="db-a", port=3306))
    # Stored positions compare by server_id/uuid only: the fingerprint never turns an old offset into "another server".
    assert one == ServerIdentity(1) and hash(one) == hash(ServerIdentity(1))
    assert "db-a:3306" in one.describe() and "mariadb-bin" in one.describe()
    assert ServerIdentity(1).to_json() == one.to_json() == {"server_id": 1, "server_uuid": None}


# -- MySQL through the protocol stub ---------------------------------------------------------------


def log_status(file_name: str, position: int, gtid: str) -> dict[str, Any]:
    document = json.dumps({"gtid_executed": gtid, "binary_log_file": file_name, "binary_log_position": position})
    return {"SELECT LOCAL FROM performance_schema.log_status": (["LOCAL"], [(document,)])}


#: What a transaction-control statement and the metadata lock answer (an empty result does as an OK).
TRANSACTION: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {
    "START TRANSACTION WITH CONSISTENT SNAPSHOT": (["ok"], []),
    "COMMIT": (["ok"], []),
    "SELECT * FROM `shop`.`orders` LIMIT 0": (["id", "note"], []),
}
EVENT_COLUMNS = ["Log_name", "Pos", "Event_type", "Server_id", "End_log_pos", "Info"]


@pytest.fixture
def stub_factory() -> Iterator[Any]:
    started: list[MySQLStub] = []

    def start(extra: dict[str, Any]) -> MySQLStub:
        started.append(MySQLStub(extra={**SHOP_ORDERS, **TRANSACTION, **extra}).start())
        return started[-1]

    yield start
    for server in started:
        server.stop()


def watermark_on(server: MySQLStub) -> tuple[BinlogPosition, Any]:
    config = parse_config({
        "pipeline": "shop",
        "source": {"host": "127.0.0.1", "port": server.port, "user": server.user, "password": server.password,
                   "server_id": 4242, "tables": ["shop.orders"], "connect_timeout": 5},
        "sink": {"path": "/nonexistent/lake"},
    })
    with mysql.source_connection(config.source) as connection:
        return consistent_low_watermark(connection, TABLE)


def test_mysql_low_watermark_comes_from_log_status_read_before_the_snapshot(stub_factory: Any) -> None:
    # log_status at the binlog end (binlog.000003:157, the stub's SHOW BINARY LOG STATUS): nothing to scan.
    server = stub_factory(log_status("binlog.000003", 157, f"{UUID}:1-57"))
    low, schema = watermark_on(server)
    assert (low.file, low.pos, low.gtid) == ("binlog.000003", 157, f"{UUID}:1-57")
    assert low.server == ServerIdentity(1, UUID)
    assert schema.column_names == ("id", "note")
    sent = [query for query in server.queries if not query.startswith(("SET", "SELECT VERSION", "SELECT @@"))]
    assert sent[:3] == ["SELECT LOCAL FROM performance_schema.log_status", "START TRANSACTION WITH CONSISTENT SNAPSHOT",
                        "SELECT * FROM `shop`.`orders` LIMIT 0"]
    assert sent[-1] == "COMMIT" and "SHOW BINARY LOG STATUS" in sent
    assert not any("BINLOG_GTID_POS" in query or "binlog_snapshot" in query for query in server.queries)


def test_mysql_ddl_between_log_status_and_the_lock_retries_then_gives_up(stub_factory: Any) -> None:
    events = {
        "SHOW BINLOG EVENTS IN 'binlog.000002'": (EVENT_COLUMNS, [
            ("binlog.000002", 900, "Gtid", 1, 979, f"SET @@SESSION.GTID_NEXT= '{UUID}:56'"),
            ("binlog.000002", 979, "Query", 1, 1_150, "use `shop`; ALTER TABLE orders ADD COLUMN x INT"),
            ("binlog.000002", 1_150, "Rotate", 1, 1_201, "binlog.000003;pos=4"),
        ]),
        "SHOW BINLOG EVENTS IN 'binlog.000003'": (EVENT_COLUMNS, [
            ("binlog.000003", 4, "Format_desc", 1, 126, "Server ver: 8.4.3, Binlog ver: 4"),
        ]),
    }
    server = stub_factory({**log_status("binlog.000002", 900, f"{UUID}:1-55"), **events})
    with pytest.raises(WatermarkRaceError, match="ADD COLUMN x") as raised:
        watermark_on(server)
    assert raised.value.retryable and raised.value.table == "shop.orders"
    assert sum(query == "COMMIT" for query in server.queries) == MAX_ATTEMPTS, "each attempt ended its transaction"


def test_mysql_without_backup_admin_is_told_the_grant(stub_factory: Any) -> None:
    denied = StubError(1227, "Access denied; you need (at least one of) the BACKUP_ADMIN privilege(s)", "42000")
    server = stub_factory({"SELECT LOCAL FROM performance_schema.log_status": denied})
    with pytest.raises(MissingGrantError, match="performance_schema.log_status") as raised:
        watermark_on(server)
    assert "GRANT BACKUP_ADMIN ON *.*" in raised.value.remedy
    assert "START TRANSACTION WITH CONSISTENT SNAPSHOT" not in server.queries


def test_mysql_before_8_0_14_has_no_log_status(stub_factory: Any) -> None:
    missing = StubError(1146, "Table 'performance_schema.log_status' doesn't exist", "42S02")
    server = stub_factory({"SELECT LOCAL FROM performance_schema.log_status": missing})
    with pytest.raises(ServerSettingsError, match="8.0.14") as raised:
        watermark_on(server)
    assert "upgrade" in raised.value.remedy
