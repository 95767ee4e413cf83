"""A session that logs MINIMAL row images on a server whose global setting is FULL: its table stops, never NULLs.

`validate` checks the global binlog_row_image, but any session may `SET SESSION binlog_row_image='MINIMAL'`
(the MySQL session that wrote tests/fixtures/mysql-binlogs/rust_mysql_common/json.binlog.000001 did). Its UPDATE
then logs the key alone before and the changed columns alone after; python-mysql-replication reads every absent
column as None. Delta is read back with `deltalake`, not binlake's reader.
"""

from __future__ import annotations

from deltalake import DeltaTable

from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import sql


def delta_table(pipeline: Pipeline, table: str) -> list[tuple[object, ...]]:
    data = DeltaTable(pipeline.table_path(table)).to_pyarrow_table().to_pylist()
    return sorted((row["id"], row["v"], row["note"]) for row in data)


def test_a_minimal_image_stops_its_table_and_other_tables_flow(mariadb, make_config, database) -> None:
    minimal, full = f"{database}.minimal", f"{database}.full"
    for table in (minimal, full):
        sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT, note VARCHAR(20))",
            f"INSERT INTO {table} VALUES (1, 1, 'a'), (2, 2, 'b')")
    config = make_config([minimal, full])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    connection = mariadb.admin_connection(database)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION binlog_row_image = 'MINIMAL'")
            # MINIMAL logs the old key alone before and the changed columns alone after: `note` is absent.
            cursor.execute(f"UPDATE {minimal} SET id = 3, v = 30 WHERE id = 2")
            cursor.execute("SET SESSION binlog_row_image = 'FULL'")
            cursor.execute(f"UPDATE {full} SET note = 'c' WHERE id = 1")
    finally:
        connection.close()
    pipeline.sync()
    state = pipeline.read_state().tables
    error = state[minimal].error
    assert error is not None and "without every column" in error and "binlog_row_image=FULL" in error
    # Before the fix the sync succeeded and Delta held (3, 30, None): the absent `note` read as NULL. Now the
    # table stops where it was.
    assert delta_table(pipeline, minimal) == [(1, 1, "a"), (2, 2, "b")]
    assert state[full].error is None
    assert delta_table(pipeline, full) == [(1, 1, "c"), (2, 2, "b")]
