"""From empty to consistent: snapshot while a writer writes, then binlog batches, then a row-by-row comparison."""

from __future__ import annotations

import random
import threading

from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from tests.conftest import delta_rows, source_rows, sql


def create_shop(server: LocalMariaDB, db: str) -> None:
    sql(
        server,
        f"CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, balance DECIMAL(12,2))",
        f"CREATE TABLE {db}.orders (id BIGINT PRIMARY KEY, customer_id INT, amount DECIMAL(10,2), "
        "placed DATETIME(6), note VARCHAR(100))",
        f"CREATE TABLE {db}.`lines` (order_id BIGINT, line_no INT, sku VARCHAR(12), qty INT, "
        "PRIMARY KEY (order_id, line_no))",
        f"INSERT INTO {db}.customers SELECT seq, CONCAT('c', seq), seq / 7 FROM {db}.seq_1_to_300",
        f"INSERT INTO {db}.orders SELECT seq, 1 + seq % 300, seq * 1.5, "
        f"TIMESTAMP('2026-01-01') + INTERVAL seq SECOND, NULL FROM {db}.seq_1_to_3000",
        f"INSERT INTO {db}.`lines` SELECT o.seq, l.seq, CONCAT('S', l.seq), l.seq FROM {db}.seq_1_to_3000 o "
        f"JOIN {db}.seq_1_to_2 l",
    )


class Writer(threading.Thread):
    """Random multi-row transactions against the source until stopped."""

    def __init__(self, server: LocalMariaDB, db: str, seed: int) -> None:
        super().__init__(daemon=True)
        self.server, self.db, self.random = server, db, random.Random(seed)
        self.stop_event = threading.Event()
        self.transactions = 0
        self.next_id = 100_000 + seed * 10_000

    def run(self) -> None:
        connection = self.server.admin_connection(self.db)
        try:
            while not self.stop_event.is_set():
                with connection.cursor() as cursor:
                    cursor.execute("START TRANSACTION")
                    for _ in range(self.random.randint(1, 5)):
                        self.one_change(cursor)
                    cursor.execute("COMMIT")
                self.transactions += 1
        finally:
            connection.close()

    def one_change(self, cursor: object) -> None:
        choice = self.random.random()
        order = self.random.randint(1, 3000)
        if choice < 0.35:
            self.next_id += 1
            cursor.execute(  # type: ignore[attr-defined]
                "INSERT INTO orders VALUES (%s, %s, %s, NOW(6), 'w')", (self.next_id, order % 300, order / 3)
            )
            cursor.execute("INSERT INTO `lines` VALUES (%s, 1, 'W', 1)", (self.next_id,))  # type: ignore[attr-defined]
        elif choice < 0.7:
            cursor.execute(  # type: ignore[attr-defined]
                "UPDATE orders SET amount = amount + 1, note = 'u' WHERE id BETWEEN %s AND %s", (order, order + 3)
            )
        elif choice < 0.85:
            cursor.execute("DELETE FROM `lines` WHERE order_id = %s AND line_no = 2", (order,))  # type: ignore[attr-defined]
        else:
            cursor.execute(  # type: ignore[attr-defined]
                "UPDATE customers SET balance = balance - 1 WHERE id = %s", (order % 300 + 1,)
            )

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=30)


def test_snapshot_under_writes_then_sync_is_row_for_row_equal(mariadb, database, make_config) -> None:
    db = database
    create_shop(mariadb, db)
    tables = [f"{db}.customers", f"{db}.orders", f"{db}.lines"]
    config = make_config(tables, snapshot__rows_per_partition=800)
    pipeline = Pipeline(config)

    writer = Writer(mariadb, db, seed=1)
    writer.start()
    try:
        snapshots = pipeline.snapshot()
    finally:
        writer.stop()
    assert writer.transactions > 0, "the writer must have written while the snapshot ran"
    assert {result.table for result in snapshots} == set(tables)
    assert all(result.partitions > 1 for result in snapshots if result.table != f"{db}.customers")

    # Multi-row transactions with inserts, updates, deletes and primary-key changes.
    sql(
        mariadb,
        "START TRANSACTION",
        f"INSERT INTO {db}.orders VALUES (900001, 1, 1.00, '2026-02-02 02:02:02.5', 'new'), "
        f"(900002, 2, 2.00, NULL, NULL)",
        f"UPDATE {db}.orders SET id = id + 500000 WHERE id BETWEEN 100 AND 120",
        f"DELETE FROM {db}.`lines` WHERE order_id BETWEEN 200 AND 260",
        "COMMIT",
        "START TRANSACTION",
        f"UPDATE {db}.`lines` SET line_no = line_no + 10 WHERE order_id BETWEEN 300 AND 310",
        f"INSERT INTO {db}.customers VALUES (5000, 'zoë 😀', NULL)",
        f"UPDATE {db}.customers SET name = 'renamed' WHERE id = 5000",
        f"DELETE FROM {db}.customers WHERE id = 5000",
        f"INSERT INTO {db}.customers VALUES (5000, 'back again', 1.25)",
        "COMMIT",
    )
    results = pipeline.sync(until_caught_up=True)
    assert results[-1].reached_end
    assert sum(result.row_changes for result in results) > 0

    for table in tables:
        assert delta_rows(config, table) == source_rows(mariadb, table), table
    statuses = {status.table: status for status in pipeline.status()}
    assert all(statuses[table].consistent and statuses[table].lag_bytes == 0 for table in tables)
    assert all(statuses[table].lag_events == 0 and statuses[table].lag_seconds == 0 for table in tables)
    assert all(result.matches for result in reconcile(pipeline))


def test_batches_end_at_transaction_boundaries(mariadb, database, make_config) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    config = make_config([f"{db}.t"], batch__max_events=10)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    # One transaction of 25 rows is larger than max_events: the batch must take all of it.
    sql(mariadb, "START TRANSACTION", f"INSERT INTO {db}.t SELECT seq, seq FROM {db}.seq_1_to_25", "COMMIT")
    sql(mariadb, f"INSERT INTO {db}.t VALUES (100, 1)")
    behind = pipeline.status()[0]
    assert behind.lag_bytes is not None and behind.lag_events is not None and behind.lag_seconds is not None
    assert behind.lag_bytes > 0 and behind.lag_events >= 2 and behind.lag_seconds >= 0
    first = pipeline.sync()[0]
    assert first.row_changes == 25 and not first.reached_end
    assert len(delta_rows(config, f"{db}.t")) == 25
    rest = pipeline.sync(until_caught_up=True)
    assert sum(result.row_changes for result in rest) == 1
    assert delta_rows(config, f"{db}.t") == source_rows(mariadb, f"{db}.t")


def test_resnapshot_of_one_table_leaves_the_other_syncing(mariadb, database, make_config) -> None:
    db = database
    sql(
        mariadb,
        f"CREATE TABLE {db}.a (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE {db}.b (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.a VALUES (1, 1)",
        f"INSERT INTO {db}.b VALUES (1, 1)",
    )
    config = make_config([f"{db}.a", f"{db}.b"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"INSERT INTO {db}.a VALUES (2, 2)", f"INSERT INTO {db}.b VALUES (2, 2)")
    pipeline.sync(until_caught_up=True)
    before = pipeline.read_state().tables[f"{db}.b"].position
    sql(mariadb, f"INSERT INTO {db}.a VALUES (3, 3)")
    pipeline.snapshot([f"{db}.a"])
    state = pipeline.read_state()
    assert state.tables[f"{db}.b"].position == before, "re-snapshotting a must not rewind b"
    sql(mariadb, f"UPDATE {db}.a SET v = 30 WHERE id = 3", f"INSERT INTO {db}.b VALUES (3, 3)")
    pipeline.sync(until_caught_up=True)
    for table in (f"{db}.a", f"{db}.b"):
        assert delta_rows(config, table) == source_rows(mariadb, table)


def test_many_batches_with_read_ahead_land_every_change(mariadb, database, make_config) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)", f"CREATE TABLE {db}.u (id INT PRIMARY KEY)")
    config = make_config([f"{db}.t", f"{db}.u"], batch__max_events=7)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    for round_number in range(6):
        sql(
            mariadb,
            "START TRANSACTION",
            f"INSERT INTO {db}.t SELECT seq + {round_number * 10}, seq FROM {db}.seq_1_to_5",
            f"UPDATE {db}.t SET v = v + 1 WHERE id % 3 = {round_number % 3}",
            "COMMIT",
            f"INSERT INTO {db}.u VALUES ({round_number})",
            f"DELETE FROM {db}.t WHERE id = {round_number * 7}",
        )
    results = pipeline.sync(until_caught_up=True)
    assert len(results) >= 4, "small batches: the backlog needs several, read ahead one by one"
    assert results[-1].reached_end
    for table in (f"{db}.t", f"{db}.u"):
        assert delta_rows(config, table) == source_rows(mariadb, table)
