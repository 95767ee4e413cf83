"""`binlake demo`: a private MariaDB, a small shop, a snapshot, live changes, a sync, a status and a verdict."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cdc_lib.config.load import load_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.display.report import format_reconciliation, format_status

DEMO_USER = "binlake"
DEMO_PASSWORD_ENV = "BINLAKE_DEMO_PASSWORD"
DEMO_PASSWORD_DEFAULT = "binlake-demo-pw"

SHOP_SCHEMA = (
    "CREATE DATABASE shop CHARACTER SET utf8mb4",
    "CREATE TABLE shop.customers (id INT PRIMARY KEY, email VARCHAR(120) NOT NULL, name VARCHAR(80), "
    "created_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3))",
    "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(12,2) NOT NULL, "
    "status ENUM('new','paid','shipped','cancelled') NOT NULL, placed_at DATETIME(6) NOT NULL, note TEXT)",
    "CREATE TABLE shop.order_lines (order_id BIGINT, line_no INT, sku VARCHAR(16) NOT NULL, qty INT NOT NULL, "
    "PRIMARY KEY (order_id, line_no))",
    "INSERT INTO shop.customers (id, email, name) SELECT seq, CONCAT('c', seq, '@example.com'), "
    "CONCAT('Customer ', seq) FROM shop.seq_1_to_200",
    "INSERT INTO shop.orders SELECT seq, 1 + seq % 200, ROUND(seq * 1.37, 2), 'new', "
    "TIMESTAMP('2026-01-01') + INTERVAL seq MINUTE, NULL FROM shop.seq_1_to_2000",
    "INSERT INTO shop.order_lines SELECT o.seq, l.seq, CONCAT('SKU-', (o.seq * l.seq) % 97), l.seq "
    "FROM shop.seq_1_to_2000 o JOIN shop.seq_1_to_3 l",
)

LIVE_CHANGES = (
    "START TRANSACTION",
    "INSERT INTO shop.orders SELECT 2000 + seq, 1 + seq % 200, 9.99 * seq, 'new', NOW(6), 'live 😀' "
    "FROM shop.seq_1_to_50",
    "INSERT INTO shop.order_lines SELECT 2000 + seq, 1, 'SKU-NEW', 2 FROM shop.seq_1_to_50",
    "COMMIT",
    "UPDATE shop.orders SET status = 'paid' WHERE id % 7 = 0",
    "START TRANSACTION",
    "DELETE FROM shop.order_lines WHERE order_id BETWEEN 10 AND 19",
    "DELETE FROM shop.orders WHERE id BETWEEN 10 AND 19",
    "COMMIT",
    "UPDATE shop.order_lines SET line_no = line_no + 10 WHERE order_id = 42",
    "UPDATE shop.customers SET email = 'vip@example.com', name = 'Zoë' WHERE id = 1",
)


def demo_config_text(port: int, lake: Path) -> str:
    return (
        "pipeline: shop\n"
        "source:\n"
        f"  host: 127.0.0.1\n  port: {port}\n  user: {DEMO_USER}\n"
        f'  password: "${{{DEMO_PASSWORD_ENV}:-{DEMO_PASSWORD_DEFAULT}}}"\n'
        "  server_id: 5701\n"
        "  tables: [shop.customers, shop.orders, shop.order_lines]\n"
        # The change data feed of shop.orders feeds the demo's downstream asset (orchestration/demo.py).
        f"sink:\n  path: {lake}\n  tables:\n    shop.orders: {{change_data_feed: true}}\n"
        f"offsets: {{uri: {lake / '_offsets'}}}\n"
        'spark: {master: "local[2]"}\n'
        "batch: {max_events: 100000, max_seconds: 60}\n"
    )


def start_demo_database(workdir: Path) -> LocalMariaDB:
    database = LocalMariaDB(workdir / "mariadb", server_id=1)
    port_file = workdir / "mariadb.port"
    if database.pid_path.exists() and port_file.exists():
        database.port = int(port_file.read_text())
        try:
            database.admin_connection().close()
            return database
        except Exception:
            database.pid_path.unlink(missing_ok=True)
    database.start()
    port_file.write_text(str(database.port))
    return database


def run_demo(workdir: str, *, keep_running: bool = False) -> int:
    from cdc_lib.pipeline.pipeline import Pipeline
    from cdc_lib.reconcile.reconcile import reconcile

    root = Path(workdir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    print(f"[1/6] starting a private MariaDB under {root / 'mariadb'} (binlog ROW, FULL image, FULL metadata)")
    database = start_demo_database(root)
    try:
        password = os.environ.get(DEMO_PASSWORD_ENV, DEMO_PASSWORD_DEFAULT)
        database.create_cdc_user(DEMO_USER, password)
        database.execute("DROP DATABASE IF EXISTS shop", *SHOP_SCHEMA)
        lake = root / "lake"
        shutil.rmtree(lake, ignore_errors=True)
        config_path = root / "binlake.yaml"
        config_path.write_text(demo_config_text(database.port, lake))
        print(f"      MariaDB on 127.0.0.1:{database.port}; config written to {config_path}")
        pipeline = Pipeline(load_config(config_path))
        print("[2/6] validate")
        for line in pipeline.validate():
            print(f"      ok  {line}")
        print("[3/6] snapshot (parallel JDBC, no locks)")
        for result in pipeline.snapshot():
            print(f"      {result.table}: {result.rows} rows in {result.seconds:.1f}s → Delta v{result.delta_version}")
        print("[4/6] live changes: inserts, updates, deletes and a primary-key change in multi-row transactions")
        database.execute(*LIVE_CHANGES)
        print("[5/6] sync --until-caught-up")
        for batch in pipeline.sync(until_caught_up=True):
            print(
                f"      batch {batch.batch_seq}: {batch.row_changes} row changes, {batch.transactions} transactions"
            )
            for table in batch.tables:
                print(f"        {table.table}: +{table.inserted} ~{table.updated} -{table.deleted}")
        print(format_status(pipeline.status()))
        print("[6/6] reconcile (chunk digests computed by MySQL and Spark; rows of any differing chunk)")
        reports = reconcile(pipeline)
        for report in reports:
            for line in format_reconciliation(report):
                print(f"      {line}")
        ok = all(report.matches for report in reports)
        print(f"verdict: {'every table matches its source' if ok else 'DRIFT found'}")
        print(f"next: BINLAKE_CONFIG={config_path} binlake status   (add --keep-running to keep MariaDB up)")
        return 0 if ok else 1
    finally:
        if not keep_running:
            database.stop()
            (root / "mariadb.port").unlink(missing_ok=True)
