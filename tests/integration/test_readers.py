"""The Delta tables binlake writes, opened by the readers people use, compared with the source after each stage.

Readers: Spark (delta-spark), `deltalake` (delta-rs) through `to_pyarrow_table()` (the pandas path) and through
its `QueryBuilder` scan (DataFusion), and Polars (`pl.read_delta`). Stages: snapshot,
MERGEs with inserts/updates/deletes, ADD COLUMN, a widening (INT → BIGINT, a column rewrite), TRUNCATE + new rows.
The source side is PyMySQL's SELECT. docs/readers.md lists the versions proven here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.config.model import PipelineConfig
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline
from tests.conftest import scan_rows, sql

Rows = list[tuple[Any, ...]]

#: The reader features delta-rs 1.6.6 (and so Polars) opens, and which binlake's default tables may carry.
READABLE_FEATURES = {"timestampNtz"}


def _normal(value: Any) -> Any:
    """One spelling per value across readers: aware timestamps as naive UTC, decimals by value."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, Decimal):
        return value.normalize()
    return value


def _sorted(rows: list[tuple[Any, ...]] | list[dict[str, Any]]) -> Rows:
    tuples = [tuple(row.values()) if isinstance(row, dict) else tuple(row) for row in rows]
    return sorted((tuple(_normal(value) for value in row) for row in tuples), key=lambda row: row[0])


def _source(server: LocalMariaDB, table: str, columns: list[str]) -> Rows:
    names = ", ".join(f"`{name}`" for name in columns)
    # TIMESTAMP in UTC, as binlake stores it.
    return _sorted(sql(server, "SET time_zone = '+00:00'", f"SELECT {names} FROM {table}"))


def _spark(pipeline: Pipeline, path: str, columns: list[str]) -> Rows:
    frame = pipeline.spark().read.format("delta").load(path)
    return _sorted([tuple(row) for row in frame.select(*[f"`{name}`" for name in columns]).collect()])


def _pyarrow(path: str, columns: list[str]) -> Rows:
    from deltalake import DeltaTable

    return _sorted(DeltaTable(path).to_pyarrow_table(columns=columns).to_pylist())


def _scan(path: str, columns: list[str]) -> Rows:
    return _sorted(scan_rows(path, columns))


def _polars(path: str, columns: list[str]) -> Rows:
    import polars as pl

    return _sorted(pl.read_delta(path).select(columns).rows())


READERS: dict[str, Callable[[str, list[str]], Rows]] = {
    "deltalake to_pyarrow_table": _pyarrow,
    "deltalake QueryBuilder scan": _scan,
    "polars read_delta": _polars,
}


def _reader_features(path: str) -> set[str]:
    from deltalake import DeltaTable

    return set(DeltaTable(path).protocol().reader_features or [])


def _assert_every_reader_sees_the_source(
    server: LocalMariaDB, pipeline: Pipeline, table: str, columns: list[str], stage: str
) -> None:
    path = pipeline.table_path(table)
    expected = _source(server, table, columns)
    assert _reader_features(path) <= READABLE_FEATURES, f"{stage}: {_reader_features(path)}"
    assert _spark(pipeline, path, columns) == expected, f"{stage}: Spark"
    for name, reader in READERS.items():
        assert reader(path, columns) == expected, f"{stage}: {name}"


def _sync(pipeline: Pipeline) -> None:
    results = pipeline.sync(until_caught_up=True)
    errors = {table.table: table.error for result in results for table in result.tables if table.error}
    assert not errors, errors


def _create_table(server: LocalMariaDB, db: str) -> str:
    sql(
        server,
        f"CREATE TABLE {db}.t (id INT PRIMARY KEY, amount DECIMAL(12,2), at DATETIME(6), ts TIMESTAMP(6) NULL, "
        "name VARCHAR(50), n INT) CHARACTER SET utf8mb4",
        f"INSERT INTO {db}.t VALUES (1, 12.50, '2024-02-29 23:59:59.123456', '2024-03-01 08:00:00.5', "
        "'Ærøskøbing ✓ 東京', 7), (2, NULL, NULL, NULL, NULL, NULL), "
        f"(3, -0.01, '1970-01-01 00:00:00', '2038-01-19 03:14:07.999999', 'plain', -2147483648)",
        f"INSERT INTO {db}.t SELECT seq, seq * 1.25, '2025-06-30 12:00:00', NULL, CONCAT('r', seq), seq "
        f"FROM {db}.seq_10_to_200",
    )
    return f"{db}.t"


def test_every_reader_opens_every_table_binlake_writes_by_default(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig]
) -> None:
    db = database
    table = _create_table(mariadb, db)
    pipeline = Pipeline(make_config([table]))
    columns = ["id", "amount", "at", "ts", "name", "n"]

    pipeline.snapshot()
    _assert_every_reader_sees_the_source(mariadb, pipeline, table, columns, "snapshot")

    sql(
        mariadb,
        f"INSERT INTO {db}.t VALUES (4, 99999.99, '2000-01-01 00:00:00.000001', NOW(6), 'ñandú', 4)",
        f"UPDATE {db}.t SET name = 'ünïcode ✓', amount = amount + 1 WHERE id IN (1, 50)",
        f"UPDATE {db}.t SET name = 'was null', ts = '2001-09-09 01:46:40' WHERE id = 2",
        f"DELETE FROM {db}.t WHERE id IN (3, 20, 21, 150)",
    )
    _sync(pipeline)
    _assert_every_reader_sees_the_source(mariadb, pipeline, table, columns, "MERGE with deletes")

    sql(
        mariadb,
        f"ALTER TABLE {db}.t ADD COLUMN note VARCHAR(20) DEFAULT 'née'",
        f"INSERT INTO {db}.t (id, name, note) VALUES (5, 'after add', NULL)",
        f"UPDATE {db}.t SET note = 'changed' WHERE id = 10",
    )
    _sync(pipeline)
    columns.append("note")
    _assert_every_reader_sees_the_source(mariadb, pipeline, table, columns, "ADD COLUMN")

    sql(
        mariadb,
        f"ALTER TABLE {db}.t MODIFY n BIGINT",
        f"INSERT INTO {db}.t (id, n, name) VALUES (6, 9223372036854775807, 'wide')",
        f"DELETE FROM {db}.t WHERE id = 11",
    )
    _sync(pipeline)
    _assert_every_reader_sees_the_source(mariadb, pipeline, table, columns, "INT → BIGINT")

    sql(
        mariadb,
        f"TRUNCATE TABLE {db}.t",
        f"INSERT INTO {db}.t (id, amount, at, ts, name, n, note) VALUES "
        "(7, 1.00, '2026-01-01 00:00:00', '2026-01-01 00:00:00', 'после', 1, 'x'), "
        "(8, NULL, NULL, NULL, NULL, NULL, NULL)",
    )
    _sync(pipeline)
    _assert_every_reader_sees_the_source(mariadb, pipeline, table, columns, "TRUNCATE + new rows")
    assert len(_source(mariadb, table, columns)) == 2


def _has_deletion_vector_files(path: str) -> bool:
    """Whether any commit added a file with a deletion vector (a MERGE that marked rows instead of rewriting)."""
    return any('"deletionVector":{' in log.read_text() for log in Path(path, "_delta_log").glob("*.json"))


def test_deletion_vectors_per_table_trade_pyarrow_readers_for_cheap_merges(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig]
) -> None:
    """A table with `deletion_vectors: true` is read by Spark, delta-rs's scan and Polars, refused by delta-rs's
    `to_pyarrow_table()` (the pandas path); a re-snapshot with the setting off drops the feature and every reader
    opens it again."""
    from deltalake.exceptions import DeltaProtocolError

    db = database
    table = _create_table(mariadb, db)
    sql(mariadb, f"CREATE TABLE {db}.other (id INT PRIMARY KEY, v INT)", f"INSERT INTO {db}.other VALUES (1, 1)")
    other = f"{db}.other"
    columns = ["id", "amount", "at", "ts", "name", "n"]
    config = make_config([table, other], sink__tables={table: {"deletion_vectors": True}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    sql(mariadb, f"DELETE FROM {db}.t WHERE id IN (1, 30, 31)", f"UPDATE {db}.t SET n = 0 WHERE id = 40",
        f"DELETE FROM {db}.other WHERE id = 1")
    _sync(pipeline)

    path = pipeline.table_path(table)
    expected = _source(mariadb, table, columns)
    assert "deletionVectors" in _reader_features(path)
    assert _has_deletion_vector_files(path), "the MERGE marked rows with a deletion vector"
    assert _spark(pipeline, path, columns) == expected
    assert _scan(path, columns) == expected
    with pytest.raises(DeltaProtocolError, match="deletionVectors"):
        _pyarrow(path, columns)
    # Polars 2.x applies deletion vectors itself (it no longer goes through to_pyarrow_table()).
    assert _polars(path, columns) == expected
    # The setting is per table: the pipeline's other table keeps the default.
    assert "deletionVectors" not in _reader_features(pipeline.table_path(other))
    _assert_every_reader_sees_the_source(mariadb, pipeline, other, ["id", "v"], "other table")

    # Turning it off and re-snapshotting rebuilds the table without the feature.
    pipeline = Pipeline(make_config([table, other], pipeline=config.pipeline, server_id=config.source.server_id))
    pipeline.snapshot([table])
    _assert_every_reader_sees_the_source(mariadb, pipeline, table, columns, "re-snapshot without deletion vectors")
    sql(mariadb, f"DELETE FROM {db}.t WHERE id = 50")
    _sync(pipeline)
    _assert_every_reader_sees_the_source(mariadb, pipeline, table, columns, "MERGE after the re-snapshot")
