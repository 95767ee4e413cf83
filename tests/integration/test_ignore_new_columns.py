"""`schema_policy: ignore_new_columns` (docs/ddl.md#schema-policies): a column added on the source never reaches the
Delta table, as if excluded; other changes of shape evolve the table as under `evolve`; a re-snapshot lands all."""

from __future__ import annotations

from typing import Any

from deltalake import DeltaTable

from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from tests.conftest import scan_rows, sql


def _delta_columns(path: str) -> dict[str, str]:
    """The Delta table's columns and types, as delta-rs (not binlake) reads them."""
    return {field.name: str(field.type) for field in DeltaTable(path).to_pyarrow_table().schema}


def _source(mariadb: Any, db: str, columns: str) -> list[tuple[Any, ...]]:
    return sorted(sql(mariadb, f"SELECT {columns} FROM {db}.t"))


def test_an_added_column_is_never_landed_and_a_widening_still_evolves(mariadb, database, make_config) -> None:
    db = database
    table = f"{db}.t"
    sql(mariadb, f"CREATE TABLE {db}.t (id INT PRIMARY KEY, a VARCHAR(10), v INT)",
        f"INSERT INTO {db}.t VALUES (1, 'x', 1), (2, 'y', 2)")
    config = make_config([table], sink__tables={table: {"schema_policy": "ignore_new_columns"}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    path = pipeline.table_path(table)
    before = _delta_columns(path)
    assert "c" not in before
    sql(
        mariadb,
        f"INSERT INTO {db}.t VALUES (3, 'before', 3)",
        f"ALTER TABLE {db}.t ADD COLUMN c VARCHAR(20) NOT NULL DEFAULT 'secret'",
        f"INSERT INTO {db}.t VALUES (4, 'after', 4, 'c4')",
        f"UPDATE {db}.t SET c = 'c1', a = 'x1' WHERE id = 1",
        f"UPDATE {db}.t SET c = 'c2' WHERE id = 2",
        f"DELETE FROM {db}.t WHERE id = 3",
    )
    results = pipeline.sync(until_caught_up=True)
    assert not [entry.error for result in results for entry in result.tables if entry.error]
    assert _delta_columns(path) == before, "the Delta table keeps its columns"
    assert sorted(scan_rows(path, ["id", "a", "v"])) == _source(mariadb, db, "id, a, v")
    state = Pipeline(config).read_state().tables[table]
    assert state.ignored_columns == ("c",) and state.error is None
    assert "c" in [column["name"] for column in state.schema["columns"]], "the source's schema is tracked whole"

    # A widening evolves the table as under evolve; the ignored column stays out (after a restart: new Pipeline).
    sql(mariadb, f"ALTER TABLE {db}.t MODIFY v BIGINT",
        f"INSERT INTO {db}.t VALUES (5, 'wide', 5000000000, 'c5')", f"UPDATE {db}.t SET c = 'c4b' WHERE id = 4")
    results = Pipeline(config).sync(until_caught_up=True)
    assert not [entry.error for result in results for entry in result.tables if entry.error]
    after = _delta_columns(path)
    assert set(after) == set(before) and after["v"] == "int64" and before["v"] == "int32"
    assert sorted(scan_rows(path, ["id", "a", "v"])) == _source(mariadb, db, "id, a, v")
    # Reconciliation compares the source as it lands: the ignored column is not missing from Delta.
    (report,) = reconcile(Pipeline(config), [table])
    assert report.matches and not report.schema_differences, report

    # A re-snapshot lands the table's current columns and clears the list.
    Pipeline(config).snapshot([table])
    assert "c" in _delta_columns(path)
    assert Pipeline(config).read_state().tables[table].ignored_columns == ()
    sql(mariadb, f"INSERT INTO {db}.t VALUES (6, 'new', 6, 'c6')")
    Pipeline(config).sync(until_caught_up=True)
    assert sorted(scan_rows(path, ["id", "a", "v", "c"])) == _source(mariadb, db, "id, a, v, c")
