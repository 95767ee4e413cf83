"""Consistent low watermarks and the binlog connection's server identity, against the real MariaDB.

A failpoint between the snapshot transaction's start and the table's metadata lock
(`watermark_before_lock`) and one before the binlog dump opens (`before_binlog_stream`) pause the
run while the test commits a row, runs a DDL, or points the TCP proxy at another server.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pymysql
import pytest

from cdc_lib.binlog.probes import columns_after_ddl
from cdc_lib.binlog.stream import open_stream
from cdc_lib.common.faults import PAUSE_FILE_VARIABLE, PAUSE_VARIABLE
from cdc_lib.config.model import PipelineConfig
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.errors import MissingGrantError, ServerMismatchError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.snapshot.watermarks import consistent_low_watermark, racing_ddl
from cdc_lib.source import binlog_status
from cdc_lib.source import server as mysql
from cdc_lib.status.runway import table_runways
from tests.conftest import delta_rows, scan_rows, source_rows, sql
from tests.integration.conftest import backlog, make_items
from tests.net_proxy import TcpProxy


class Pause:
    """Runs `actions` in turn, one per arrival at a paused failpoint, then lets the run go on."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str,
                 actions: list[Callable[[], None]]) -> None:
        self.flag = tmp_path / f"{name}.paused"
        self.actions = list(actions)
        self.arrivals = 0
        self.errors: list[BaseException] = []
        monkeypatch.setenv(PAUSE_VARIABLE, name)
        monkeypatch.setenv(PAUSE_FILE_VARIABLE, str(self.flag))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            if self.flag.exists():
                self.arrivals += 1
                try:
                    if self.actions:
                        self.actions.pop(0)()
                except BaseException as exc:  # noqa: BLE001 - reported by the test
                    self.errors.append(exc)
                self.flag.unlink()
            time.sleep(0.02)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        assert not self.errors, self.errors


@pytest.fixture
def pause(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Callable[..., Pause]]:
    made: list[Pause] = []

    def factory(name: str, *actions: Callable[[], None]) -> Pause:
        made.append(Pause(monkeypatch, tmp_path, name, list(actions)))
        return made[-1]

    yield factory
    for item in made:
        item.close()


def alter_events(server: LocalMariaDB, database: str, since: BinlogPosition) -> list[tuple[str, int, str]]:
    """(file, end_log_pos, statement) of every ALTER TABLE on `database` in the server's binlog since `since`."""
    found = []
    files = [str(row[0]) for row in sql(server, "SHOW BINARY LOGS")]
    for file_name in files[files.index(since.file):]:
        start = since.pos if file_name == since.file else 4
        for row in sql(server, f"SHOW BINLOG EVENTS IN '{file_name}' FROM {start}"):
            if row[2] == "Query" and "ALTER TABLE" in str(row[5]) and database in str(row[5]):
                found.append((file_name, int(row[4]), str(row[5])))
    return found


def watermark(config: PipelineConfig, table: str) -> tuple[BinlogPosition, TableSchema]:
    with mysql.source_connection(config.source) as connection:
        return consistent_low_watermark(connection, TableRef.parse(table))


def test_low_watermark_is_the_consistent_snapshot_position(mariadb, database, make_config, pause) -> None:
    table = f"{database}.w"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, amount DECIMAL(9,2))",
        f"INSERT INTO {table} VALUES (1, 12.25), (2, -3.75)")
    config = make_config([table])
    with mysql.source_connection(config.source) as connection:
        before = binlog_status.current_position(connection)
    committed_during: list[BinlogPosition] = []

    def commit_a_row() -> None:
        # Committed after the snapshot transaction began and before it locked the table.
        sql(mariadb, f"INSERT INTO {table} VALUES (3, 99.5)")
        with mysql.source_connection(config.source) as other:
            committed_during.append(binlog_status.current_position(other))

    paused = pause("watermark_before_lock", commit_a_row)
    with mysql.source_connection(config.source) as connection:
        low, schema = consistent_low_watermark(connection, TableRef.parse(table))
        # The transaction (and its metadata lock) ended while the connection stays open: a DDL that waits
        # at most a second goes through.
        sql(mariadb, "SET SESSION lock_wait_timeout = 1", f"ALTER TABLE {table} ADD COLUMN later INT")

    assert paused.arrivals == 1
    # Nothing committed between `before` and the transaction: the watermark is exactly there, with its GTID state.
    assert (low.file, low.pos, low.gtid) == (before.file, before.pos, before.gtid)
    assert low.server == before.server and low.server is not None and low.server.server_id == 11
    # The row committed while the transaction was open lies after the watermark: the replay will carry it.
    assert low < committed_during[0]
    assert schema.column_names == ("id", "amount") and schema.primary_key == ("id",)


def test_a_ddl_racing_the_lock_is_retried_and_the_schema_matches_the_position(
    mariadb, database, make_config, pause, caplog
) -> None:
    table = f"{database}.racing"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL)", f"INSERT INTO {table} VALUES (1, 7)")
    config = make_config([table])
    with mysql.source_connection(config.source) as connection:
        before = binlog_status.current_position(connection)

    def alter() -> None:
        sql(mariadb, f"ALTER TABLE {table} ADD COLUMN price DECIMAL(7,3) NOT NULL DEFAULT 12.125")

    paused = pause("watermark_before_lock", alter)
    with caplog.at_level(logging.WARNING, logger="binlake"):
        low, schema = watermark(config, table)

    assert paused.arrivals == 2, "the first attempt saw the ALTER and tried again"
    assert any("committed between the low watermark" in record.getMessage() for record in caplog.records)
    [(alter_file, alter_end, _)] = alter_events(mariadb, database, before)
    # The schema has the ALTER's column, and the position is past the ALTER: they describe the same moment.
    assert schema.column_names == ("id", "qty", "price")
    assert BinlogPosition(alter_file, alter_end) <= low
    assert before < low
    # Between the first attempt's position and the second one lies the ALTER the retry was about.
    race = None
    with mysql.source_connection(config.source) as connection:
        race = racing_ddl(connection, TableRef.parse(table), before, low)
    assert race is not None and "ADD COLUMN price" in race.statement


def test_ddl_on_another_table_or_an_index_does_not_retry(mariadb, database, make_config, pause) -> None:
    table, other = f"{database}.calm", f"{database}.busy"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, label VARCHAR(8))",
        f"CREATE TABLE {other} (id INT PRIMARY KEY)")

    def unrelated_ddl() -> None:
        sql(mariadb, f"ALTER TABLE {other} ADD COLUMN extra INT", f"ALTER TABLE {table} ADD INDEX by_label (label)")

    paused = pause("watermark_before_lock", unrelated_ddl)
    low, schema = watermark(make_config([table]), table)
    assert paused.arrivals == 1
    assert schema.column_names == ("id", "label")


def test_snapshot_with_a_racing_alter_reads_and_replays_one_schema(
    mariadb, database, make_config, pause
) -> None:
    table = f"{database}.orders"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL)",
        f"INSERT INTO {table} SELECT seq, seq * 3 FROM {database}.seq_1_to_40")
    config = make_config([table])

    def alter_and_write() -> None:
        sql(mariadb, f"ALTER TABLE {table} ADD COLUMN note VARCHAR(12) NULL",
            f"UPDATE {table} SET note = CONCAT('n', id) WHERE id <= 4")

    paused = pause("watermark_before_lock", alter_and_write)
    Pipeline(config).snapshot()
    assert paused.arrivals == 2
    state = Pipeline(config).read_state().tables[table]
    assert [column["name"] for column in state.schema["columns"]] == ["id", "qty", "note"]
    sql(mariadb, f"UPDATE {table} SET note = 'after' WHERE id = 40")
    Pipeline(config).sync(until_caught_up=True)
    assert delta_rows(config, table) == source_rows(mariadb, table)


# -- the binlog connection's server identity ---------------------------------------------------------


@pytest.fixture
def proxy(mariadb: LocalMariaDB) -> Iterator[TcpProxy]:
    forwarder = TcpProxy(mariadb.port).restore()
    yield forwarder
    forwarder.cut()


def through(config: PipelineConfig, proxy: TcpProxy) -> PipelineConfig:
    return dataclasses.replace(config, source=dataclasses.replace(config.source, port=proxy.port))


def test_sync_whose_binlog_connection_reaches_another_server_fails_before_any_commit(
    mariadb, own_mariadb, database, make_config, proxy, pause
) -> None:
    table = f"{database}.items"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL)",
        f"INSERT INTO {table} VALUES (1, 10), (2, 20)")
    config = through(make_config([table]), proxy)
    Pipeline(config).snapshot()
    stored = Pipeline(config).read_state().tables[table]
    sql(mariadb, f"INSERT INTO {table} VALUES (3, 30)", f"UPDATE {table} SET qty = 11 WHERE id = 1")

    def balancer_switches() -> None:
        # The control connection has read the positions on the session server; new connections land elsewhere.
        proxy.target_port = own_mariadb.port

    paused = pause("before_binlog_stream", balancer_switches)
    with pytest.raises(ServerMismatchError) as raised:
        Pipeline(config).sync()
    assert paused.arrivals == 1
    assert "server_id 11" in raised.value.expected and "server_id 31" in raised.value.actual
    assert "not at a load balancer" in raised.value.remedy and raised.value.retryable
    after = Pipeline(config).read_state().tables[table]
    assert after.position == stored.position and after.delta_version == stored.delta_version
    assert sorted(scan_rows(Pipeline(config).table_path(table))) == [(1, 10), (2, 20)]

    # Pointed back at one server, the next run loses nothing.
    proxy.target_port = mariadb.port
    Pipeline(config).sync(until_caught_up=True)
    assert delta_rows(config, table) == source_rows(mariadb, table) == [(1, 11), (2, 20), (3, 30)]


def test_a_reconnect_of_the_binlog_stream_is_checked_too(mariadb, own_mariadb, database, make_config, proxy) -> None:
    """The reader reconnects by itself after a lost connection (errors 2006/2013); that connection is checked too."""
    table = make_items(mariadb, database, 50)
    config = through(make_config([table]), proxy)
    with mysql.source_connection(config.source) as connection:
        start = binlog_status.current_position(connection)
    # Several MB of binlog, more than the loopback socket buffers hold, so the cut is felt mid-stream.
    backlog(mariadb, database, transactions=6, rows=1500)
    from pymysqlreplication.row_event import WriteRowsEvent

    stream = open_stream(config.source, start, events=[WriteRowsEvent], tables=[TableRef.parse(table)],
                          server=start.server)
    try:
        iterator = iter(stream)
        next(iterator)
        # A failover behind the name: the live connection drops, the next connection lands on another server.
        proxy.target_port = own_mariadb.port
        proxy.cut()
        proxy.restore()
        with pytest.raises(ServerMismatchError) as raised:
            for _ in iterator:
                pass
        assert "server_id 31" in raised.value.actual
    finally:
        stream.close()


def test_the_binlog_probes_refuse_another_server_too(mariadb, own_mariadb, database, make_config, proxy) -> None:
    """Reading the columns after a DDL and a binlog file's creation time open binlog connections of their own;
    behind a switched address they would read another server's file of the same name."""
    table = make_items(mariadb, database, 3)
    config = through(make_config([table]), proxy)
    with mysql.source_connection(config.source) as connection:
        schema = mysql.describe_table(connection, TableRef.parse(table))
        sql(mariadb, f"ALTER TABLE {table} ADD COLUMN note VARCHAR(12) NULL")
        start = binlog_status.current_position(connection)  # right after the DDL
        logs = binlog_status.binary_logs(connection)
    sql(mariadb, f"INSERT INTO {table} (id, qty, note) VALUES (1007, 7, 'after')")
    bound = config.batch.max_payload_event_bytes
    assert columns_after_ddl(config.source, schema, start, max_payload_event_bytes=bound) == [
        *schema.column_names, "note"]
    assert start.server is not None
    proxy.target_port = own_mariadb.port
    with pytest.raises(ServerMismatchError, match="server_id 31"):
        columns_after_ddl(config.source, schema, start, max_payload_event_bytes=bound)
    with mysql.source_connection(dataclasses.replace(config.source, port=mariadb.port)) as connection:
        with pytest.raises(ServerMismatchError, match="server_id 31"):
            table_runways(config.source, connection, {table: start}, logs=logs, server=start.server)


def test_a_server_with_the_same_server_id_is_told_apart(mariadb, own_mariadb, make_config) -> None:
    """Two unrelated MariaDB servers often share a server_id (1 by default); host name, port and binlog still differ."""
    own_mariadb.execute("SET GLOBAL server_id = 11")
    config = make_config(["x.y"])
    other = dataclasses.replace(config.source, port=own_mariadb.port)
    with mysql.source_connection(config.source) as connection:
        expected = mysql.server_identity(connection)
    with mysql.source_connection(other) as connection:
        actual = mysql.server_identity(connection)
    assert actual == expected, "equal as stored identities: same server_id, no uuid"
    assert not actual.same_server(expected) and actual.port == own_mariadb.port
    checked = mysql.identity_checked(expected, role="binlog", host="twin")
    with pytest.raises(ServerMismatchError, match=f"@@port [^ ]+:{own_mariadb.port}"):
        checked(**mysql.connection_settings(other))
    checked(**mysql.connection_settings(config.source)).close()


def test_identity_check_survives_the_readers_dict_cursor(mariadb, make_config) -> None:
    config = make_config(["x.y"])
    with mysql.source_connection(config.source) as connection:
        expected = mysql.server_identity(connection)
    checked = mysql.identity_checked(expected, role="binlog", host="session")
    connection = checked(**mysql.connection_settings(config.source), cursorclass=pymysql.cursors.DictCursor)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 AS one")
            assert cursor.fetchone() == {"one": 1}
    finally:
        connection.close()


def test_a_user_who_may_not_read_the_binlog_position_is_told_the_grant(mariadb, database, make_config) -> None:
    table = f"{database}.plain"
    user = f"sel_{database[-6:]}"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY)",
        f"CREATE USER '{user}'@'127.0.0.1' IDENTIFIED BY 'pw-12.25'",
        f"GRANT SELECT ON {database}.* TO '{user}'@'127.0.0.1'")
    try:
        config = make_config([table])
        limited = dataclasses.replace(config, source=dataclasses.replace(config.source, user=user,
                                                                         password="pw-12.25"))
        with mysql.source_connection(limited.source) as connection:
            with pytest.raises(MissingGrantError, match="binlog position") as raised:
                consistent_low_watermark(connection, TableRef.parse(table))
            # The refused attempt ended its transaction: the open connection holds no metadata lock.
            sql(mariadb, "SET SESSION lock_wait_timeout = 1", f"ALTER TABLE {table} ADD COLUMN later INT")
        assert "GRANT BINLOG MONITOR ON *.*" in raised.value.remedy
    finally:
        sql(mariadb, f"DROP USER '{user}'@'127.0.0.1'")
