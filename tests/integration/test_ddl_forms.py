"""DDL forms on a real MariaDB: each is applied exactly, evolves the Delta table, or stops only its table loudly.

Delta is compared with what the server shows (pymysql), and read once with the `deltalake` package.
"""

from __future__ import annotations

from typing import Any

from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import CDC_PASSWORD, CDC_USER, delta_rows, scan_rows, source_rows, sql


def _errors(results: list[Any]) -> dict[str, str]:
    return {table.table: table.error for result in results for table in result.tables if table.error}


def _row_events(server: Any, log_file: str, log_pos: int, database: str) -> list[tuple[str, str]]:
    """The row events the server logged from a position on, as (kind, table)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    kinds = {WriteRowsEvent: "write", UpdateRowsEvent: "update", DeleteRowsEvent: "delete"}
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": server.port, "user": CDC_USER, "passwd": CDC_PASSWORD},
        server_id=4242, log_file=log_file, log_pos=int(log_pos), resume_stream=True, blocking=False,
        only_events=list(kinds), only_schemas=[database],
    )
    try:
        return [(kinds[type(event)], event.table) for event in stream]
    finally:
        stream.close()


def test_multi_table_drop_rename_and_create_or_replace_stop_each_table(mariadb, database, make_config) -> None:
    db = database
    names = ["a", "b", "x", "z", "r", "sbr", "keep"]
    sql(
        mariadb,
        *[f"CREATE TABLE {db}.{name} (id INT PRIMARY KEY, v INT)" for name in names],
        *[f"INSERT INTO {db}.{name} VALUES (1, 1)" for name in names],
    )
    config = make_config([f"{db}.{name}" for name in names])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(
        mariadb,
        f"DROP TABLE {db}.a, {db}.b",
        f"RENAME TABLE {db}.x TO {db}.x_old, {db}.z TO {db}.z_old",
        f"CREATE OR REPLACE TABLE {db}.r (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.r VALUES (1, 100), (2, 200)",
        f"INSERT INTO {db}.keep VALUES (2, 2)",
        "SET SESSION binlog_format = 'STATEMENT'",
        f"UPDATE {db}.sbr SET v = v + 1",  # logged as a QUERY event, no row event
    )
    errors = _errors(pipeline.sync(until_caught_up=True))
    assert sorted(errors) == sorted(f"{db}.{name}" for name in ["a", "b", "x", "z", "r", "sbr"])
    assert "binlog_format=ROW" in errors[f"{db}.sbr"]
    assert "RENAME TABLE" in errors[f"{db}.z"] and "binlake snapshot --table" in errors[f"{db}.z"]
    assert "CREATE OR REPLACE" in errors[f"{db}.r"] and f"binlake snapshot --table {db}.r" in errors[f"{db}.r"]
    assert delta_rows(config, f"{db}.r") == [(1, 1)], "the replacing table's rows were not merged over the old ones"
    assert delta_rows(config, f"{db}.keep") == source_rows(mariadb, f"{db}.keep")


def test_comments_do_not_hide_truncate_or_alter(mariadb, database, make_config) -> None:
    db = database
    sql(
        mariadb,
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE {db}.u (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.t VALUES (1, 1), (2, 2)",
        f"INSERT INTO {db}.u VALUES (1, -2147483648)",
    )
    config = make_config([f"{db}.t", f"{db}.u"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(
        mariadb,
        f"/* app */ TRUNCATE TABLE {db}.t",
        f"INSERT INTO {db}.t VALUES (3, 3)",
        f"/* m */ ALTER TABLE {db}.u MODIFY v BIGINT",
        f"INSERT INTO {db}.u VALUES (2, 9223372036854775807)",
    )
    assert not _errors(pipeline.sync(until_caught_up=True))
    assert delta_rows(config, f"{db}.t") == [(3, 3)]
    assert delta_rows(config, f"{db}.u") == source_rows(mariadb, f"{db}.u") == [(1, -2147483648), (2, 2**63 - 1)]


def test_partition_maintenance(mariadb, database, make_config) -> None:
    """DROP / TRUNCATE / EXCHANGE PARTITION remove or swap rows without row events (MariaDB logs only the
    statement): the table stops. REORGANIZE PARTITION keeps every row: the table flows on."""
    db = database
    partitioned = (
        "(id INT PRIMARY KEY, v INT) PARTITION BY RANGE (id) "
        "(PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (20), PARTITION p2 VALUES LESS THAN (30))"
    )
    names = ["dropped", "truncated", "exchanged", "reorganized"]
    sql(
        mariadb,
        *[f"CREATE TABLE {db}.{name} {partitioned}" for name in names],
        *[f"INSERT INTO {db}.{name} VALUES (1, 1), (15, 15), (25, 25)" for name in names],
        f"CREATE TABLE {db}.swap (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.swap VALUES (5, 500)",
    )
    config = make_config([f"{db}.{name}" for name in names])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    start = sql(mariadb, "SHOW MASTER STATUS")[0]
    sql(
        mariadb,
        f"ALTER TABLE {db}.dropped DROP PARTITION p0",
        f"ALTER TABLE {db}.truncated TRUNCATE PARTITION p1, p2",
        f"ALTER TABLE {db}.exchanged EXCHANGE PARTITION p0 WITH TABLE {db}.swap",
        f"ALTER TABLE {db}.reorganized REORGANIZE PARTITION p1, p2 INTO (PARTITION p12 VALUES LESS THAN (30))",
        f"INSERT INTO {db}.reorganized VALUES (16, 16)",
    )
    assert _row_events(mariadb, start[0], start[1], db) == [("write", "reorganized")], (
        "DROP / TRUNCATE / EXCHANGE PARTITION write no row event: only their statement tells the rows are gone"
    )
    errors = _errors(pipeline.sync(until_caught_up=True))
    assert sorted(errors) == [f"{db}.dropped", f"{db}.exchanged", f"{db}.truncated"]
    assert "DROP PARTITION p0" in errors[f"{db}.dropped"] and "binlake snapshot --table" in errors[f"{db}.dropped"]
    assert delta_rows(config, f"{db}.reorganized") == source_rows(mariadb, f"{db}.reorganized")
    ddl_log = pipeline.read_state().tables[f"{db}.reorganized"].ddl_log
    assert not ddl_log, "REORGANIZE PARTITION does not pause the table"


def test_widening_evolves_and_add_index_does_not_pause(mariadb, database, make_config) -> None:
    db = database
    sql(
        mariadb,
        f"CREATE TABLE {db}.w (id INT PRIMARY KEY, s VARCHAR(5), i INT, d DECIMAL(5,2), ti TINYINT, "
        "iu INT UNSIGNED, f FLOAT, c CHAR(3))",
        f"INSERT INTO {db}.w VALUES (1, 'abcde', -2147483648, -999.99, -128, 4294967295, 3.3, 'xy'), "
        "(2, '', 7, 0.25, 127, 0, -0.1, '')",
        f"CREATE TABLE {db}.n (id INT PRIMARY KEY, s VARCHAR(50), v INT)",
        f"INSERT INTO {db}.n VALUES (1, 'ab', 1)",
    )
    config = make_config([f"{db}.w", f"{db}.n"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(
        mariadb,
        f"ALTER TABLE {db}.w ADD INDEX by_i (i)",
        f"INSERT INTO {db}.w VALUES (3, 'q', 3, 3.5, 3, 3, 3.5, 'z')",
        f"ALTER TABLE {db}.w MODIFY s VARCHAR(200), MODIFY c VARCHAR(10)",
        f"ALTER TABLE {db}.w MODIFY i BIGINT, MODIFY ti SMALLINT, MODIFY iu BIGINT UNSIGNED",
        f"ALTER TABLE {db}.w MODIFY d DECIMAL(12,4), MODIFY f DOUBLE",
        f"INSERT INTO {db}.w VALUES (4, REPEAT('é', 200), 9223372036854775807, 12345678.1234, -32768, "
        "18446744073709551615, 1e300, 'ten chars!')",
        f"UPDATE {db}.w SET d = d + 0.0001 WHERE id = 2",
        f"ALTER TABLE {db}.n MODIFY v INT NOT NULL",  # no NULL in v: nothing changed, the table flows on
        f"INSERT INTO {db}.n VALUES (2, 'cd', 2)",
    )
    assert not _errors(pipeline.sync(until_caught_up=True))
    assert delta_rows(config, f"{db}.n") == [(1, "ab", 1), (2, "cd", 2)]
    # Decisions use the server's current column definitions, so the narrowing comes after that sync.
    sql(mariadb, f"ALTER TABLE {db}.n MODIFY s VARCHAR(10)")  # narrowing still stops
    errors = _errors(pipeline.sync(until_caught_up=True))
    assert list(errors) == [f"{db}.n"] and "changed type from varchar(50) to varchar(10)" in errors[f"{db}.n"]
    expected = source_rows(mariadb, f"{db}.w")
    assert delta_rows(config, f"{db}.w") == expected
    table_state = pipeline.read_state().tables[f"{db}.w"]
    assert not [entry for entry in table_state.ddl_log if "ADD INDEX" in entry["statement"]], "ADD INDEX paused"
    actions = [entry["action"] for entry in table_state.ddl_log]
    assert actions and all(action.startswith(("widened", "superseded")) for action in actions), actions
    assert "widened" in actions[-1]

    # An independent reader: the deltalake package (delta-rs) reads the rewritten table (no typeWidening feature).
    from deltalake import DeltaTable

    path = pipeline.table_path(f"{db}.w")
    assert "typeWidening" not in (DeltaTable(path).protocol().reader_features or [])
    assert sorted(scan_rows(path)) == expected


def test_added_columns_show_the_servers_values_in_old_rows(mariadb, database, make_config) -> None:
    db = database
    sql(
        mariadb,
        f"CREATE TABLE {db}.g (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.g VALUES (1, 1), (2, -7), (3, 30)",
    )
    config = make_config([f"{db}.g"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(
        mariadb,
        f"ALTER TABLE {db}.g ADD COLUMN n INT NOT NULL, ADD COLUMN e ENUM('q', 'r') NOT NULL, "
        "ADD COLUMN s VARCHAR(3) NOT NULL, ADD COLUMN x INT DEFAULT (v + 100), "
        "ADD COLUMN ts TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)",
        f"UPDATE {db}.g SET v = 2 WHERE id = 2",
        f"ALTER TABLE {db}.g ADD COLUMN gs INT AS (v * 10) STORED, ADD COLUMN gv VARCHAR(20) AS (CONCAT('v=', v)) "
        "VIRTUAL",
        f"DELETE FROM {db}.g WHERE id = 3",
        f"INSERT INTO {db}.g (id, v, n, e, s) VALUES (4, 4, 4, 'r', 'abc')",
    )
    assert not _errors(pipeline.sync(until_caught_up=True))
    columns = "id, v, n, e, s, x, ts, gs, gv"
    expected = sorted(sql(mariadb, f"SELECT {columns} FROM {db}.g"))
    assert expected[0][2:6] == (0, "q", "", 101) and expected[0][7:] == (10, "v=1")
    frame = pipeline.spark().read.format("delta").load(pipeline.table_path(f"{db}.g"))
    assert sorted(tuple(row) for row in frame.select(*columns.split(", ")).collect()) == expected
    table_state = pipeline.read_state().tables[f"{db}.g"]
    assert table_state.consistent, "consistent again once the offset passed the back-fill's high watermark"
    assert any("back-filled" in entry["action"] for entry in table_state.ddl_log)


def test_an_added_column_followed_by_truncate_before_any_row_still_evolves(mariadb, database, make_config) -> None:
    """Found by the fuzzer (seed 7001 round 47): the TRUNCATE was taken as the DDL that decides the shape."""
    db = database
    sql(mariadb, f"CREATE TABLE {db}.t (k VARCHAR(8) PRIMARY KEY, v INT)", f"INSERT INTO {db}.t VALUES ('a', 1)")
    config = make_config([f"{db}.t"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"ALTER TABLE {db}.t ADD COLUMN a1 TIME(2) NOT NULL", f"# hash\nTRUNCATE TABLE {db}.t")

    assert not _errors(pipeline.sync(until_caught_up=True))
    frame = pipeline.spark().read.format("delta").load(pipeline.table_path(f"{db}.t"))
    assert frame.columns == ["k", "v", "a1"] and frame.count() == 0

    sql(mariadb, f"INSERT INTO {db}.t VALUES ('b', 2, '-00:00:01.25')")
    assert not _errors(pipeline.sync(until_caught_up=True))
    assert delta_rows(config, f"{db}.t") == [("b", 2, "-00:00:01.25")]


def test_a_datetime_column_added_to_a_table_that_had_none(mariadb, database, make_config) -> None:
    """Found by the fuzzer (seed 7001 round 26): the Delta table lacked the timestampNtz feature, every sync failed."""
    db = database
    sql(mariadb, f"CREATE TABLE {db}.t (id BIGINT UNSIGNED PRIMARY KEY, v DECIMAL(20,20))",
        f"INSERT INTO {db}.t VALUES (18446744073709551615, -0.00000000000000000001)")
    config = make_config([f"{db}.t"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"/*!40101 */ ALTER TABLE {db}.t ADD COLUMN a1 DATETIME(5)",
        f"INSERT INTO {db}.t VALUES (1, 0.5, '8559-10-04 11:26:39.00001')")

    assert not _errors(pipeline.sync(until_caught_up=True))
    assert [row[2] for row in delta_rows(config, f"{db}.t")] == [
        __import__("datetime").datetime(8559, 10, 4, 11, 26, 39, 10), None]


def test_float_and_double_defaults_of_added_columns_are_the_stored_values(mariadb, database, make_config) -> None:
    """Found by the fuzzer (seed 9001 round 9): information_schema shows a FLOAT default rounded to 6 digits."""
    db = database
    sql(mariadb, f"CREATE TABLE {db}.t (id INT PRIMARY KEY)", f"INSERT INTO {db}.t VALUES (1), (2)")
    config = make_config([f"{db}.t"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"ALTER TABLE {db}.t ADD COLUMN f FLOAT DEFAULT -8.142314867864764e+29, "
        "ADD COLUMN d DOUBLE DEFAULT 0.30000000000000004")

    assert not _errors(pipeline.sync(until_caught_up=True))
    server = sql(mariadb, f"SELECT id, CAST(f AS DOUBLE), d FROM {db}.t ORDER BY id")
    frame = pipeline.spark().read.format("delta").load(pipeline.table_path(f"{db}.t"))
    lake = sorted((row["id"], float(row["f"]), row["d"]) for row in frame.collect())
    assert lake == [tuple(row) for row in server] and lake[0][2] == 0.30000000000000004
