"""Server identity and GTID: resume on a replica after a switch; stop without our history or after RESET MASTER.

The module starts three small MariaDB instances of its own: a primary, a replica of it
(GTID replication, log_slave_updates) and an unrelated server with a history of its own.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pymysql
import pytest

from cdc_lib.config.model import PipelineConfig
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.errors import ServerHistoryError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.delta_log import read_log_tail
from tests.conftest import CDC_PASSWORD, CDC_USER, delta_rows, run_cli, source_rows, sql, write_config_file

SMALL = {
    "innodb-buffer-pool-size": "32M",
    "innodb-log-file-size": "16M",
    "max-connections": "40",
    "log-slave-updates": "ON",
    "gtid-strict-mode": "ON",
    "gtid-domain-id": "0",
}


@dataclasses.dataclass
class Servers:
    primary: LocalMariaDB
    replica: LocalMariaDB
    unrelated: LocalMariaDB


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    base = tmp_path_factory.mktemp("failover")
    started: list[LocalMariaDB] = []
    try:
        for name, server_id in (("primary", 31), ("replica", 32), ("unrelated", 33)):
            started.append(LocalMariaDB(base / name, server_id=server_id, extra_options=dict(SMALL)).start())
        primary, replica, unrelated = started
        # The binlake user reaches the replica through replication, like every other change.
        primary.create_cdc_user(CDC_USER, CDC_PASSWORD)
        primary.execute(
            "CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY 'repl-pw'",
            "GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1'",
        )
        replica.execute(
            f"CHANGE MASTER TO master_host='127.0.0.1', master_port={primary.port}, master_user='repl', "
            "master_password='repl-pw', master_use_gtid=slave_pos",
            "START SLAVE",
        )
        unrelated.create_cdc_user(CDC_USER, CDC_PASSWORD)
        yield Servers(primary, replica, unrelated)
    finally:
        for server in started:
            server.stop()


def gtid_pos(server: LocalMariaDB) -> str:
    return str(sql(server, "SELECT @@GLOBAL.gtid_binlog_pos")[0][0])


def wait_for_replica(servers: Servers, timeout: float = 30.0) -> None:
    target = gtid_pos(servers.primary)
    deadline = time.monotonic() + timeout
    while gtid_pos(servers.replica) != target:
        status = servers.replica.admin_connection()
        try:
            with status.cursor(pymysql.cursors.DictCursor) as cursor:
                cursor.execute("SHOW SLAVE STATUS")
                row = cursor.fetchone() or {}
        finally:
            status.close()
        assert not row.get("Last_SQL_Error") and not row.get("Last_IO_Error"), row
        assert time.monotonic() < deadline, f"replica stuck at {gtid_pos(servers.replica)}, primary at {target}"
        time.sleep(0.1)


def on_server(config: PipelineConfig, server: LocalMariaDB) -> PipelineConfig:
    return dataclasses.replace(config, source=dataclasses.replace(config.source, port=server.port))


def test_switch_to_replica_resumes_by_gtid_without_loss_or_duplicates(servers: Servers, make_config) -> None:
    primary, replica = servers.primary, servers.replica
    sql(
        primary,
        "CREATE DATABASE fo",
        "CREATE TABLE fo.items (id INT PRIMARY KEY, qty INT, note VARCHAR(20))",
        "CREATE TABLE fo.quiet (id INT PRIMARY KEY)",
        "INSERT INTO fo.items VALUES " + ", ".join(f"({i}, {i}, 'n{i}')" for i in range(1, 21)),
        "INSERT INTO fo.quiet VALUES (1)",
    )
    config = on_server(make_config(["fo.items", "fo.quiet"]), primary)
    Pipeline(config).snapshot()
    sql(primary, "UPDATE fo.items SET qty = qty + 100 WHERE id <= 5", "DELETE FROM fo.items WHERE id = 20")
    Pipeline(config).sync(until_caught_up=True)
    on_primary = Pipeline(config).read_state().tables["fo.items"].position
    assert on_primary.server is not None and on_primary.server.server_id == 31
    assert on_primary.gtid == gtid_pos(primary)

    # Changes the pipeline has not read yet when the source is switched.
    sql(
        primary,
        "INSERT INTO fo.items VALUES (21, 21, 'late'), (22, 22, 'late'), (23, 23, 'late')",
        "UPDATE fo.items SET note = 'moved' WHERE id IN (1, 2)",
        "DELETE FROM fo.items WHERE id = 3",
    )
    wait_for_replica(servers)
    # The replica's own file numbering diverges from the primary's, as it does in real life.
    sql(replica, "FLUSH LOCAL BINARY LOGS")
    switched = on_server(config, replica)
    results = Pipeline(switched).sync(until_caught_up=True)

    changed = [table for result in results for table in result.tables if table.table == "fo.items"]
    assert sum(t.inserted for t in changed) == 3
    assert sum(t.updated for t in changed) == 2
    assert sum(t.deleted for t in changed) == 1
    assert delta_rows(switched, "fo.items") == source_rows(replica, "fo.items") == source_rows(primary, "fo.items")
    replica_file, replica_pos = sql(replica, "SHOW MASTER STATUS")[0][:2]
    for name in ("fo.items", "fo.quiet"):
        position = Pipeline(switched).read_state().tables[name].position
        assert position.server is not None and position.server.server_id == 32, name
        # The replica's newest file, which the primary does not have: an offset only the replica can serve.
        assert position.file == replica_file != on_primary.file and 4 <= position.pos <= replica_pos, name

    # Later batches read the replica by file/offset again.
    sql(primary, "INSERT INTO fo.items VALUES (24, 24, 'after')", "UPDATE fo.items SET qty = 0 WHERE id = 4")
    wait_for_replica(servers)
    again = Pipeline(switched).sync(until_caught_up=True)
    assert not any(result.end_position and result.end_position.server is None for result in again)
    assert delta_rows(switched, "fo.items") == source_rows(replica, "fo.items")
    state = Pipeline(switched).read_state().tables["fo.items"]
    assert state.consistent and state.error is None and state.position.gtid == gtid_pos(replica)


def _stored(config: PipelineConfig, table: str) -> tuple[dict, int | None]:
    pipeline = Pipeline(config)
    tail = read_log_tail(pipeline.table_path(table), application=pipeline.application(table))
    assert tail is not None and tail.last_binlake_commit is not None
    return pipeline.read_state().tables[table].to_json(), tail.last_binlake_commit.delta_version


def test_unrelated_server_stops_with_a_clear_error_and_writes_nothing(servers: Servers, make_config) -> None:
    primary, unrelated = servers.primary, servers.unrelated
    sql(primary, "CREATE DATABASE other", "CREATE TABLE other.t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO other.t VALUES (1, 1)")
    config = on_server(make_config(["other.t"]), primary)
    Pipeline(config).snapshot()
    sql(primary, "INSERT INTO other.t VALUES (2, 2)")
    Pipeline(config).sync()
    # Same schema and names, but its own history, and more transactions than the primary in domain 0.
    sql(unrelated, "CREATE DATABASE other", "CREATE TABLE other.t (id INT PRIMARY KEY, v INT)",
        *[f"INSERT INTO other.t VALUES ({i}, {i})" for i in range(100, 100 + 40)])
    before = _stored(config, "other.t")

    with pytest.raises(ServerHistoryError) as raised:
        Pipeline(on_server(config, unrelated)).sync()
    assert "re-snapshot" in raised.value.remedy and "binlake snapshot --table" in raised.value.remedy
    assert "history" in str(raised.value)
    assert _stored(config, "other.t") == before


def test_reset_master_stops_with_a_clear_error_and_writes_nothing(
    servers: Servers, make_config, tmp_path: Path
) -> None:
    server = servers.unrelated
    sql(server, "CREATE DATABASE rm", "CREATE TABLE rm.t (id INT PRIMARY KEY, v INT)", "INSERT INTO rm.t VALUES (1, 1)")
    config = on_server(make_config(["rm.t"]), server)
    Pipeline(config).snapshot()
    sql(server, "INSERT INTO rm.t VALUES (2, 2)", "UPDATE rm.t SET v = 5 WHERE id = 1")
    Pipeline(config).sync()
    assert delta_rows(config, "rm.t") == source_rows(server, "rm.t")
    before = _stored(config, "rm.t")

    sql(server, "RESET MASTER", "INSERT INTO rm.t VALUES (3, 3)")
    run = run_cli(write_config_file(config, tmp_path / "binlake.yaml"), "sync")
    assert run.returncode == 2, run.stderr
    message = run.stderr.strip().splitlines()[-1]
    assert message.startswith("binlake: error: [rm.t]") and "RESET MASTER" in message
    assert "remedy:" in message and "re-snapshot the table: binlake snapshot --table rm.t" in message
    assert _stored(config, "rm.t") == before


def test_idempotent_replica_logs_an_overwrite_as_a_change_so_appended_inserts_stay_exact(
    servers: Servers, make_config
) -> None:
    """A replica in IDEMPOTENT mode that finds the key of a replicated INSERT already there overwrites the row.

    binlake's append path (batch.append_inserts, on by default) trusts a logged INSERT to be a new key. MariaDB
    logs the overwrite as an UPDATE (one unique key) or a DELETE + INSERT (more than one), never as a bare
    INSERT: with the path on, the copy of the replica stays exact, one row per key.
    """
    primary, replica = servers.primary, servers.replica
    sql(
        primary,
        "CREATE DATABASE idem",
        "CREATE TABLE idem.one_key (id INT PRIMARY KEY, note VARCHAR(20))",
        "CREATE TABLE idem.two_keys (id INT PRIMARY KEY, code VARCHAR(20) NOT NULL UNIQUE, qty DECIMAL(8,3))",
        "INSERT INTO idem.one_key VALUES (7, 'first'), (8, 'kept')",
        "INSERT INTO idem.two_keys VALUES (7, 'c-7', 12.250), (8, 'c-8', -7.125)",
    )
    wait_for_replica(servers)
    config = on_server(make_config(["idem.one_key", "idem.two_keys"]), replica)
    assert config.batch.append_inserts
    Pipeline(config).snapshot()
    # Past its snapshot's high watermark a table takes the append path for a batch of only new keys.
    sql(primary, "INSERT INTO idem.one_key VALUES (1, 'warm-up')", "INSERT INTO idem.two_keys VALUES (1, 'c-1', 1.5)")
    wait_for_replica(servers)
    Pipeline(config).sync(until_caught_up=True)
    assert all(state.consistent for state in Pipeline(config).read_state().tables.values())
    sql(replica, "STOP SLAVE", "SET GLOBAL slave_exec_mode = 'IDEMPOTENT'", "START SLAVE")
    try:
        # The primary forgets key 7 without telling the replica, then inserts it again: the replica still has it.
        sql(primary, "SET SESSION sql_log_bin = 0", "DELETE FROM idem.one_key WHERE id = 7",
            "DELETE FROM idem.two_keys WHERE id = 7")
        sql(primary, "INSERT INTO idem.one_key VALUES (7, 'second'), (9, 'new')",
            "INSERT INTO idem.two_keys VALUES (7, 'c-7b', 15.125), (9, 'c-9', 0.001)")
        wait_for_replica(servers)
        Pipeline(config).validate()  # MariaDB: the setting is no reason to refuse the append path
        Pipeline(config).sync(until_caught_up=True)
    finally:
        sql(replica, "STOP SLAVE", "SET GLOBAL slave_exec_mode = 'STRICT'", "START SLAVE")
    assert source_rows(replica, "idem.one_key") == [(1, "warm-up"), (7, "second"), (8, "kept"), (9, "new")]
    for table in ("idem.one_key", "idem.two_keys"):
        assert delta_rows(config, table) == source_rows(replica, table), table
        keys = [row[0] for row in delta_rows(config, table)]
        assert len(keys) == len(set(keys)) == 4, table
