"""Snapshot partitions: primary-key ranges that cover every row exactly once, for every kind of key."""

from __future__ import annotations

import math

import pytest

from cdc_lib.config.model import SnapshotConfig
from cdc_lib.model.tables import TableRef
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.snapshot.jdbc_read import keyed_table_sql, partition_predicates
from cdc_lib.source.server import describe_table, source_connection
from tests.conftest import scan_rows, source_rows, sql

TABLES = {
    "sparse_int": ("id INT PRIMARY KEY, v INT", "SELECT CAST(seq AS SIGNED) * 7 - 3000, seq FROM seq_1_to_2000"),
    "unsigned_big": ("id BIGINT UNSIGNED PRIMARY KEY, v INT",
                     "SELECT 18446744073709551615 - seq * 1000003, seq FROM seq_1_to_1500"),
    "composite": ("a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b)",
                  "SELECT seq % 13, CONCAT('k', seq), seq FROM seq_1_to_1800"),
    "text_key": ("k VARCHAR(20) PRIMARY KEY, v INT", "SELECT CONCAT('key-', seq), seq FROM seq_1_to_1700"),
    "empty": ("id BIGINT PRIMARY KEY, v INT", None),
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_partitions_cover_every_row_once(mariadb, database, make_config, table: str) -> None:
    columns, rows = TABLES[table]
    sql(mariadb, f"CREATE TABLE {table} ({columns})", database=database)
    if rows:
        sql(mariadb, f"INSERT INTO {table} {rows}", database=database)
    config = make_config([f"{database}.{table}"])
    settings = SnapshotConfig(rows_per_partition=300, max_partitions=6)
    with source_connection(config.source) as connection:
        schema = describe_table(connection, TableRef(database, table))
        predicates, estimated = partition_predicates(connection, schema, settings, default_parallelism=2)
    total = sql(mariadb, f"SELECT COUNT(*) FROM {table}", database=database)[0][0]
    keyed = keyed_table_sql(schema)
    counts = [sql(mariadb, f"SELECT COUNT(*) FROM {keyed} WHERE {where}", database=database)[0][0]
              for where in predicates]
    either = " OR ".join(f"({where})" for where in predicates)
    assert sum(counts) == total, f"rows counted twice or missed: {counts} vs {total}"
    assert sql(mariadb, f"SELECT COUNT(*) FROM {keyed} WHERE {either}", database=database)[0][0] == total
    assert estimated == total, "small tables are counted exactly"
    if total:
        assert len(predicates) == min(6, math.ceil(total / 300)), predicates
        assert min(counts) > 0 and max(counts) <= 3 * total // 6, counts
    else:
        assert predicates == ["1=1"]


@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_columns_named_like_the_reads_own_aliases_are_copied(mariadb, database, make_config, writer) -> None:
    """A snapshot's read adds columns beside the table's (the key under `_binlake_key_<i>`, a surrogate flag per
    text column): a table whose own columns carry those names, in any case, must come out whole, not collide."""
    table = f"{database}.aliased_{writer.replace('-', '_')}"
    sql(mariadb, f"CREATE TABLE {table} (`_binlake_key_0` INT PRIMARY KEY, `_BINLAKE_KEY_0_` VARCHAR(12), "
        "binlake_surrogate_1 VARCHAR(12), `Binlake_Surrogate_2` INT)",
        f"INSERT INTO {table} SELECT CAST(seq AS SIGNED) * 3 - 7, CONCAT('k', seq), CONCAT('ü', seq), seq % 11 "
        "FROM seq_1_to_900",
        database=database)
    config = make_config([table], snapshot__writer=writer, snapshot__rows_per_partition=250,
                         snapshot__max_partitions=4)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    assert sorted(scan_rows(pipeline.table_path(table))) == source_rows(mariadb, table)
