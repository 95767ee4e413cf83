"""INVISIBLE columns (MariaDB 10.3+, MySQL 8.0.23+) and a generated-invisible-primary-key-shaped table.

An invisible column is in every row image of the binlog but not in `SELECT *`; a snapshot that read `SELECT *`
would lack it while the binlog has it. binlake names every column (information_schema lists invisible ones, with
EXTRA 'INVISIBLE'), so both paths carry it. MySQL's `sql_generate_invisible_primary_key=ON` adds
`my_row_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT INVISIBLE PRIMARY KEY`; the same column is declared here by
hand on MariaDB (which has no GIPK), and the table is keyed on it. Delta is read with delta-rs, and compared with
the server's own `SELECT <every column>`; reconcile then finds both tables equal, over every column.
"""

from __future__ import annotations

from typing import Any

from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile_table
from tests.conftest import scan_rows, sql

PLAIN = "id INT PRIMARY KEY, a VARCHAR(10), secret INT INVISIBLE, b INT, hidden_text VARCHAR(20) INVISIBLE"
PLAIN_COLUMNS = ["id", "a", "secret", "b", "hidden_text"]
GIPK = "my_row_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT INVISIBLE PRIMARY KEY, name VARCHAR(20), qty INT"
GIPK_COLUMNS = ["my_row_id", "name", "qty"]


def server_rows(mariadb: Any, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(sql(mariadb, f"SELECT {', '.join(columns)} FROM {table}"))


def test_invisible_columns_land_on_both_paths_and_a_gipk_table_is_keyed_on_my_row_id(
    mariadb, database, make_config
) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.plain ({PLAIN})", f"CREATE TABLE {db}.gipk ({GIPK})",
        f"INSERT INTO {db}.plain (id, a, secret, b, hidden_text) VALUES (1, 'one', 11, 100, 'h1'), "
        "(2, 'two', NULL, 200, 'h2'), (3, 'three', 33, 300, NULL)",
        f"INSERT INTO {db}.gipk (name, qty) VALUES ('apple', 1), ('pear', 2), ('apple', 3)")
    assert sql(mariadb, f"SELECT * FROM {db}.plain WHERE id = 1") == [(1, "one", 100)]  # what SELECT * shows
    extras = dict(sql(mariadb, "SELECT COLUMN_NAME, EXTRA FROM information_schema.COLUMNS "
                               f"WHERE TABLE_SCHEMA = '{db}' AND TABLE_NAME = 'plain'"))
    assert "INVISIBLE" in extras["secret"].upper()

    config = make_config([f"{db}.plain", f"{db}.gipk"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    state = pipeline.read_state().tables
    assert TableSchema.from_json(TableRef.parse(f"{db}.gipk"), state[f"{db}.gipk"].schema).primary_key == ("my_row_id",)
    assert "secret" in TableSchema.from_json(TableRef.parse(f"{db}.plain"), state[f"{db}.plain"].schema).column_names
    for table, columns in ((f"{db}.plain", PLAIN_COLUMNS), (f"{db}.gipk", GIPK_COLUMNS)):
        assert sorted(scan_rows(pipeline.table_path(table), columns)) == server_rows(mariadb, table, columns)

    # Binlog changes that touch only invisible columns, a key that is invisible, and deletes by it.
    sql(mariadb, f"INSERT INTO {db}.plain (id, a, secret, b, hidden_text) VALUES (4, 'four', 44, 400, 'h4')",
        f"UPDATE {db}.plain SET secret = 22, hidden_text = 'changed' WHERE id = 2",
        f"UPDATE {db}.plain SET secret = NULL WHERE id = 1",
        f"DELETE FROM {db}.plain WHERE id = 3",
        f"INSERT INTO {db}.gipk (name, qty) VALUES ('plum', 4)",
        f"UPDATE {db}.gipk SET qty = qty + 10 WHERE name = 'apple'",
        f"DELETE FROM {db}.gipk WHERE name = 'pear'")
    results = pipeline.sync(until_caught_up=True)
    assert all(table.error is None for result in results for table in result.tables)
    for table, columns in ((f"{db}.plain", PLAIN_COLUMNS), (f"{db}.gipk", GIPK_COLUMNS)):
        assert sorted(scan_rows(pipeline.table_path(table), columns)) == server_rows(mariadb, table, columns)
    assert sorted(scan_rows(pipeline.table_path(f"{db}.gipk"), GIPK_COLUMNS)) == [
        (1, "apple", 11), (3, "apple", 13), (4, "plum", 4)]
    # Reconcile compares every column, invisible ones included (a SELECT * would miss them and count fewer).
    for table, columns in ((f"{db}.plain", PLAIN_COLUMNS), (f"{db}.gipk", GIPK_COLUMNS)):
        report = reconcile_table(pipeline, table, chunk_rows=100)
        assert report.matches and report.columns == len(columns), report
