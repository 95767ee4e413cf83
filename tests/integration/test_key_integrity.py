"""Keys stay keys in Delta (issue 24, cases 3 and 4): one row per primary key, whatever the source did off the log.

Case 4: a key deleted with `sql_log_bin=0` and inserted again is not appended beside its old row; the append path
keeps only keys the table's file statistics prove absent (cdc_lib.sink.key_absence), on both writers.
Case 3: a key the type mapping would turn into NULL (a zero or partial date) stops its table with a refusal that
names the column, while the other tables of the pipeline go on.
"""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.errors import KeyMappingError, ZeroDateKeyError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.delta_log import read_log_tail
from tests.conftest import scan_rows, source_rows, sql


def _last_commit_metadata(pipeline: Pipeline, table: str) -> dict[str, Any]:
    log = sorted((Path(pipeline.table_path(table)) / "_delta_log").glob("*.json"))[-1]
    for line in log.read_text().split("\n"):
        action = json.loads(line) if line.strip() else {}
        if "commitInfo" in action:
            return dict(json.loads(action["commitInfo"]["userMetadata"]))
    raise AssertionError(f"{log} has no commitInfo")


def _assert_one_row_per_key_and_equal_to_source(mariadb: Any, pipeline: Pipeline, table: str) -> None:
    delta = sorted(scan_rows(pipeline.table_path(table)))
    doubled = [key for key, count in Counter(row[0] for row in delta).items() if count > 1]
    assert not doubled, f"{table}: keys held twice in Delta: {doubled}"
    assert delta == source_rows(mariadb, table)


@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_a_key_deleted_off_the_binlog_and_inserted_again_is_held_once(mariadb, database, make_config,
                                                                       writer) -> None:
    table = f"{database}.t"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL, label VARCHAR(20))",
        f"INSERT INTO {table} SELECT seq, seq, 'start' FROM {database}.seq_1_to_100")
    pipeline = Pipeline(make_config([table], batch__writer=writer))
    pipeline.snapshot()
    # A first batch takes the table past its snapshot's window: from then on it is consistent at its offset.
    sql(mariadb, f"INSERT INTO {table} VALUES (101, 1, 'warm-up')")
    pipeline.sync(until_caught_up=True)
    sql(
        mariadb,
        "SET SESSION sql_log_bin = 0",  # an operator's repair, or what a failover to a lagging replica looks like
        f"DELETE FROM {table} WHERE id IN (5, 6)",
        "SET SESSION sql_log_bin = 1",
        f"INSERT INTO {table} VALUES (5, 55, 'again')",
        f"INSERT INTO {table} VALUES (6, 66, 'brief')",
        f"DELETE FROM {table} WHERE id = 6",  # born and gone in the batch: the old row 6 must leave Delta too
        f"INSERT INTO {table} VALUES (1000, 1, 'new')",
    )
    pipeline.sync(until_caught_up=True)
    rows = [row for row in scan_rows(pipeline.table_path(table)) if row[0] in (5, 6)]
    assert rows == [(5, 55, "again")], f"Delta holds {rows} for keys 5 and 6"
    _assert_one_row_per_key_and_equal_to_source(mariadb, pipeline, table)
    # The fast path stays where it is proven: auto-increment-like inserts past the largest key are appended.
    sql(mariadb, f"INSERT INTO {table} SELECT 2000 + seq, seq, 'tail' FROM {database}.seq_1_to_50")
    pipeline.sync(until_caught_up=True)
    assert _last_commit_metadata(pipeline, table).get("path") == "append"
    _assert_one_row_per_key_and_equal_to_source(mariadb, pipeline, table)


LENIENT = "SET SESSION sql_mode = ''"  # per session: any client may still write zero dates, whatever the server's


def test_zero_date_keys_stop_their_table_on_both_paths_while_the_others_sync(mariadb, database, make_config) -> None:
    db = database
    sql(
        mariadb,
        LENIENT,
        f"CREATE TABLE {db}.z (d DATE PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.z VALUES ('2024-00-10', 1), ('2024-00-11', 2)",  # the case
        f"CREATE TABLE {db}.y (id INT, at DATETIME(3), v INT, PRIMARY KEY (id, at))",
        f"INSERT INTO {db}.y VALUES (1, '2024-01-01 10:00:00.5', 1)",
        f"CREATE TABLE {db}.other (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO {db}.other VALUES (1, 1)",
    )
    z, y, other = f"{db}.z", f"{db}.y", f"{db}.other"
    pipeline = Pipeline(make_config([z, y, other]))
    # The snapshot path: the read refuses the key before anything is written for the table.
    with pytest.raises(ZeroDateKeyError, match="primary-key column 'd' holds a zero or partial date") as raised:
        pipeline.snapshot([z])
    assert raised.value.table == z and "2024-00-1" in str(raised.value)
    assert f"binlake snapshot --table {z}" in raised.value.remedy
    assert read_log_tail(pipeline.table_path(z), application="-") is None and z not in pipeline.read_state().tables
    pipeline.snapshot([y, other])

    # The binlog path: a zero date arrives in y's key; y stops where it was, z waits for its snapshot, other flows.
    before = pipeline.read_state().tables[y]
    sql(mariadb, f"INSERT INTO {other} VALUES (2, 2)", LENIENT, f"INSERT INTO {y} VALUES (2, '2024-05-00 00:00:00', 2)",
        f"UPDATE {z} SET v = 10 WHERE d = '2024-00-10'", f"DELETE FROM {z} WHERE d = '2024-00-11'")
    sql(mariadb, f"UPDATE {other} SET v = 20 WHERE id = 1")
    results = pipeline.sync(until_caught_up=True)
    failed = [table for result in results for table in result.tables if table.table == y and table.error]
    assert failed and "primary-key column 'at' holds a zero or partial date" in str(failed[0].error)
    after = pipeline.read_state().tables[y]
    assert after.error and after.position == before.position and after.delta_version == before.delta_version
    assert scan_rows(pipeline.table_path(y)) == [(1, dt.datetime(2024, 1, 1, 10, 0, 0, 500_000), 1)]
    assert sorted(scan_rows(pipeline.table_path(other))) == [(1, 20), (2, 2)]

    # Corrected at the source, the table the remedy names snapshots.
    sql(mariadb, f"UPDATE {z} SET d = '2024-01-10' WHERE d = '2024-00-10'")
    pipeline.snapshot([z])
    assert scan_rows(pipeline.table_path(z)) == [(dt.date(2024, 1, 10), 10)]


def test_key_types_the_mapping_cannot_keep_apart_are_refused_at_validate_and_snapshot(mariadb, database,
                                                                                      make_config) -> None:
    db = database
    sql(mariadb, f"CREATE TABLE {db}.e (k ENUM('', 'a') PRIMARY KEY)",
        f"CREATE TABLE {db}.c (k VARCHAR(9) CHARACTER SET cp1251 PRIMARY KEY)",
        LENIENT, f"INSERT INTO {db}.e VALUES (''), ('x')",  # 'x' is stored as the error value, shown as ''
        f"INSERT INTO {db}.c VALUES (x'3f'), (x'98')")  # both show as '?'
    assert sql(mariadb, f"SELECT COUNT(*), COUNT(DISTINCT CONVERT(k USING utf8mb4)) FROM {db}.e") == [(2, 1)]
    assert sql(mariadb, f"SELECT COUNT(*), COUNT(DISTINCT CONVERT(k USING utf8mb4)) FROM {db}.c") == [(2, 1)]
    for table, why in ((f"{db}.e", "ENUM with an empty member"), (f"{db}.c", "cp1251, in which bytes 0x3F and 0x98")):
        pipeline = Pipeline(make_config([table]))
        with pytest.raises(KeyMappingError, match=why):
            pipeline.validate()
        with pytest.raises(KeyMappingError, match=why) as raised:
            pipeline.snapshot()
        assert raised.value.table == table and f"binlake snapshot --table {table}" in raised.value.remedy
        assert read_log_tail(pipeline.table_path(table), application="-") is None


EDGE_COLUMNS = (
    "f FLOAT, g DOUBLE, t TIME(6), dc DECIMAL(65,30), e ENUM('a','b','c'), s SET('a','b'), bn BINARY(4), "
    "y YEAR, ts TIMESTAMP(6) NULL, dtm DATETIME(6), dd DATE, bt BIT(64), u BIGINT UNSIGNED, l VARCHAR(8) "
    "CHARACTER SET latin1 COLLATE latin1_bin"
)
#: Distinct values per column (each a key type), the close calls of each type: float32 neighbours, doubles that
#: print alike to 15 digits, negative TIME fractions, 30-digit scales, the ENUM error value, BINARY padding.
EDGE_ROWS = (
    "(1, 0.1, 0.3, '-00:00:01.250000', 1.5, '', '', x'61', 0, '1970-01-01 00:00:01', '1000-01-01 00:00:00', "
    "'0001-01-01', 0, 0, x'81')",
    "(2, 0.10000001, 0.30000000000000004, '-00:00:01.750000', 1.500000000000000000000000000001, 'a', 'a', x'610001', "
    "1901, '2038-01-19 03:14:07.999999', '2024-01-01 00:00:00.000001', '1582-10-10', x'ffffffffffffffff', "
    "18446744073709551615, x'8d')",
    "(3, 16777216, 5e-324, '838:59:59.000000', -1.5, 'b', 'a,b', x'00000061', 2155, '2024-03-31 01:00:00', "
    "'9999-12-31 23:59:59.999999', '9999-12-31', x'7fffffffffffffff', 9223372036854775808, 'a ')",
    "(4, -1.5, 1e308, '-838:59:59.000000', 0, 'c', 'b', x'ffffffff', 2000, '2000-01-01 00:00:00', "
    "'2000-01-01 00:00:00', '2000-01-01', 1, 1, 'a')",
)


def test_edge_values_of_key_types_stay_distinct_on_both_paths(mariadb, database, make_config) -> None:
    db = database
    sql(mariadb, LENIENT, f"CREATE TABLE {db}.snap (id INT PRIMARY KEY, {EDGE_COLUMNS})",
        f"CREATE TABLE {db}.logged LIKE {db}.snap", f"INSERT INTO {db}.snap VALUES {', '.join(EDGE_ROWS)}")
    pipeline = Pipeline(make_config([f"{db}.snap", f"{db}.logged"]))
    pipeline.snapshot()
    sql(mariadb, LENIENT, f"INSERT INTO {db}.logged SELECT * FROM {db}.snap")
    pipeline.sync(until_caught_up=True)
    width = len(source_rows(mariadb, f"{db}.snap")[0])
    for table in ("snap", "logged"):
        rows = sorted(scan_rows(pipeline.table_path(f"{db}.{table}")))
        assert len(rows) == len(EDGE_ROWS)
        for index in range(1, width):
            values = [row[index] for row in rows]
            assert None not in values and len(set(values)) == len(rows), f"{table} column {index}: {values}"
    snapshot, logged = (sorted(scan_rows(pipeline.table_path(f"{db}.{table}"))) for table in ("snap", "logged"))
    assert snapshot == logged
