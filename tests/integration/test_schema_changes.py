"""Schema changes are handled, never guessed: ADD COLUMN evolves, TRUNCATE empties, DROP stops only that table."""

from __future__ import annotations

from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import delta_rows, scan_rows, source_rows, sql


def test_added_columns_evolve_the_delta_table(mariadb, database, make_config) -> None:
    db = database
    sql(
        mariadb,
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10), b INT)",
        f"INSERT INTO {db}.t VALUES (1, 'x', 10), (2, 'y', 20)",
    )
    config = make_config([f"{db}.t"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(
        mariadb,
        f"INSERT INTO {db}.t VALUES (3, 'before', 30)",
        f"ALTER TABLE {db}.t ADD COLUMN c INT NOT NULL DEFAULT 7",
        f"INSERT INTO {db}.t VALUES (4, 'after', 40, 41)",
        f"ALTER TABLE {db}.t ADD COLUMN m VARCHAR(5) DEFAULT 'dflt' AFTER a",
        f"UPDATE {db}.t SET m = 'set', c = 8 WHERE id = 1",
    )
    results = pipeline.sync(until_caught_up=True)
    assert not [table.error for result in results for table in result.tables if table.error]
    columns = ["id", "a", "m", "b", "c"]
    expected = sorted(sql(mariadb, f"SELECT {', '.join(columns)} FROM {db}.t"))
    from cdc_lib.sink.spark.session import spark_session

    frame = spark_session(config.spark).read.format("delta").load(pipeline.table_path(f"{db}.t"))
    assert sorted(tuple(row) for row in frame.select(*columns).collect()) == expected
    table_state = pipeline.read_state().tables[f"{db}.t"]
    assert table_state.error is None
    assert [entry["action"] for entry in table_state.ddl_log] == ["added columns ['c']", "added columns ['m']"]


def test_truncate_empties_the_delta_table(mariadb, database, make_config) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {db}.t VALUES (1, 1), (2, 2)")
    config = make_config([f"{db}.t"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"INSERT INTO {db}.t VALUES (3, 3)", f"TRUNCATE TABLE {db}.t", f"INSERT INTO {db}.t VALUES (9, 9)")
    pipeline.sync(until_caught_up=True)
    assert delta_rows(config, f"{db}.t") == [(9, 9)]


def test_dropped_column_stops_only_that_table(mariadb, database, make_config) -> None:
    db = database
    sql(
        mariadb,
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a INT, b INT)",
        f"CREATE TABLE {db}.other (id INT PRIMARY KEY)",
        f"INSERT INTO {db}.t VALUES (1, 1, 1)",
    )
    config = make_config([f"{db}.t", f"{db}.other"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(
        mariadb,
        f"UPDATE {db}.t SET a = 2 WHERE id = 1",
        f"ALTER TABLE {db}.t DROP COLUMN b",
        f"INSERT INTO {db}.t VALUES (2, 2)",
        f"INSERT INTO {db}.other VALUES (5)",
    )
    results = pipeline.sync(until_caught_up=True)
    errors = [table.error for result in results for table in result.tables if table.table == f"{db}.t" and table.error]
    assert errors and "dropped or renamed" in errors[0] and "binlake snapshot --table" in errors[0]
    assert delta_rows(config, f"{db}.t") == [(1, 2, 1)], "the change before the DROP was applied, none after"
    assert delta_rows(config, f"{db}.other") == [(5,)]
    status = {entry.table: entry for entry in pipeline.status()}
    assert status[f"{db}.t"].error and not status[f"{db}.other"].error

    pipeline.snapshot([f"{db}.t"])
    sql(mariadb, f"INSERT INTO {db}.t VALUES (3, 3)")
    pipeline.sync(until_caught_up=True)
    assert delta_rows(config, f"{db}.t") == source_rows(mariadb, f"{db}.t")


def test_tables_created_and_dropped_under_a_pattern(mariadb, database, make_config) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.first (id INT PRIMARY KEY, v INT)", f"INSERT INTO {db}.first VALUES (1, 1)")
    config = make_config([f"{db}.*"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(
        mariadb,
        f"CREATE TABLE {db}.second (id INT PRIMARY KEY, label VARCHAR(10))",
        f"INSERT INTO {db}.second VALUES (1, 'new')",
        f"INSERT INTO {db}.first VALUES (2, 2)",
        f"DROP TABLE {db}.first",
    )
    results = pipeline.sync(until_caught_up=True)
    by_table = {table.table: table for result in results for table in result.tables}
    # The change before the DROP landed; the DROP itself stops the table with the remedy, nothing else breaks.
    assert delta_rows(config, f"{db}.first") == [(1, 1), (2, 2)]
    dropped_error = by_table[f"{db}.first"].error
    assert dropped_error and "dropped or renamed" in dropped_error
    status = {entry.table: entry for entry in pipeline.status()}
    assert f"{db}.second" in status and not status[f"{db}.second"].snapshotted
    assert status[f"{db}.first"].error, "a dropped table keeps showing its error until it is dealt with"

    pipeline.snapshot([f"{db}.second"])
    sql(mariadb, f"INSERT INTO {db}.second VALUES (2, 'later')")
    pipeline.sync(until_caught_up=True)
    assert delta_rows(config, f"{db}.second") == [(1, "new"), (2, "later")]


def test_added_decimal_over_38_digits_keeps_its_default_exactly(mariadb, database, make_config) -> None:
    """DECIMAL(p > 38) is the server's text in Delta; existing rows get the added column's default as the server
    shows it (fuzzer seed 12001 round 312: a 65-digit default stopped the table)."""
    db = database
    sql(mariadb, f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {db}.t VALUES (1, 1), (2, 2)")
    config = make_config([f"{db}.t"])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(
        mariadb,
        f"ALTER TABLE {db}.t ADD COLUMN big DECIMAL(65,0) "
        "DEFAULT 98504143200495581393645188385466430908405308889142809641032701534",
        f"ALTER TABLE {db}.t ADD COLUMN tiny DECIMAL(65,30) DEFAULT -0.000000000000000000000000000001",
        f"INSERT INTO {db}.t (id, v) VALUES (3, 3)",
    )
    results = pipeline.sync(until_caught_up=True)
    assert not [table.error for result in results for table in result.tables if table.error]
    expected = sorted(sql(mariadb, f"SELECT id, CAST(big AS CHAR), CAST(tiny AS CHAR) FROM {db}.t"))
    assert expected[0][1:] == ("98504143200495581393645188385466430908405308889142809641032701534",
                               "-0.000000000000000000000000000001")
    # Read back by delta-rs's scan path, not by binlake.
    assert sorted(scan_rows(pipeline.table_path(f"{db}.t"), ["id", "big", "tiny"])) == expected
