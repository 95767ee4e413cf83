"""A TINYINT(1) column landed as a Delta boolean (`sink.tables.<t>.types.<column>: boolean`, docs/types.md) against
the real MariaDB, on the snapshot's road and the binlog's: 0, 1 and NULL land as false, true and NULL (read back with
delta-rs, not binlake), and any other value stops its table with the remedy on either road while the others flow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from cdc_lib.errors import BooleanValueError, ColumnRulesError
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.reconcile.reconcile import reconcile
from tests.conftest import sql

FLAGS = {"types": {"active": "boolean"}}


def _create(mariadb: Any, table: str, values: str) -> None:
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, active BOOLEAN, qty TINYINT(1) NOT NULL)",
        f"INSERT INTO {table} VALUES {values}", database=table.partition(".")[0])


def _delta(config: Any, table: str) -> tuple[pa.Schema, list[dict[str, Any]]]:
    frame = DeltaTable(Pipeline(config).table_path(table)).to_pyarrow_table()
    return frame.schema, sorted(frame.to_pylist(), key=lambda row: row["id"])


def test_zero_one_null_land_as_booleans_on_both_roads_and_a_two_stops_only_its_table(
    mariadb: Any, database: str, make_config: Any
) -> None:
    table, other = f"{database}.flags", f"{database}.others"
    _create(mariadb, table, "(1, 0, 5), (2, 1, 0), (3, NULL, 1)")
    _create(mariadb, other, "(1, 2, 2)")  # no override: TINYINT(1) stays a number there, 2 included
    config = make_config([table, other], sink__tables={table: FLAGS})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    schema, rows = _delta(config, table)
    assert schema.field("active").type == pa.bool_()
    assert schema.field("qty").type == pa.int8()  # only the named column is overridden
    assert rows == [{"id": 1, "active": False, "qty": 5}, {"id": 2, "active": True, "qty": 0},
                    {"id": 3, "active": None, "qty": 1}]

    sql(mariadb, f"INSERT INTO {table} VALUES (4, 1, 1), (5, 0, 1), (6, NULL, 1)",
        f"UPDATE {table} SET active = 1 - active WHERE id IN (1, 2)", f"UPDATE {table} SET active = 0 WHERE id = 3")
    pipeline.sync(until_caught_up=True)
    assert pipeline.read_state().tables[table].error is None
    schema, rows = _delta(config, table)
    assert schema.field("active").type == pa.bool_()
    assert [(row["id"], row["active"]) for row in rows] == [
        (1, True), (2, False), (3, False), (4, True), (5, False), (6, None)]
    (report,) = reconcile(Pipeline(config), [table])
    assert report.matches and not report.schema_differences, report

    # A 2 is no boolean: the table stops with the remedy, nothing of the batch lands, the other table flows.
    sql(mariadb, f"UPDATE {table} SET active = 2 WHERE id = 4", f"INSERT INTO {table} VALUES (7, 1, 1)",
        f"UPDATE {other} SET active = 3, qty = qty + 1")
    pipeline.sync(until_caught_up=True)
    state = pipeline.read_state()
    error = state.tables[table].error
    assert error is not None, "a 2 must not become true"
    assert "'active'" in error and "boolean" in error and f"binlake snapshot --table {table}" in error, error
    assert state.tables[other].error is None
    assert [(row["id"], row["active"]) for row in _delta(config, table)[1]] == [
        (1, True), (2, False), (3, False), (4, True), (5, False), (6, None)]
    assert [(row["active"], row["qty"]) for row in _delta(config, other)[1]] == [(3, 3)]

    # The snapshot road refuses the same value: a re-snapshot of the table with the 2 still in it.
    with pytest.raises(BooleanValueError, match="remedy") as refused:
        pipeline.snapshot(tables=[table])
    assert "'active'" in str(refused.value) and "2" in str(refused.value)


def test_a_negative_value_refuses_the_snapshot_with_the_remedy(
    mariadb: Any, database: str, make_config: Any
) -> None:
    table = f"{database}.flags"
    _create(mariadb, table, "(1, 0, 0), (2, -1, 0)")
    config = make_config([table], sink__tables={table: FLAGS})
    with pytest.raises(BooleanValueError, match="remedy") as refused:
        Pipeline(config).snapshot()
    assert "-1" in str(refused.value)


@pytest.mark.parametrize(("types", "named"), [
    ({"qty": "boolean", "id": "boolean"}, "primary key column 'id'"),
    ({"wide": "boolean"}, "column 'wide' (tinyint(4))"),
    ({"missing": "boolean"}, "column 'missing'"),
])
def test_an_override_on_a_column_that_is_no_tinyint_1_refuses_the_snapshot(
    types: dict[str, str], named: str, mariadb: Any, database: str, make_config: Any
) -> None:
    table = f"{database}.flags"
    sql(mariadb, f"CREATE TABLE {table} (id TINYINT(1) PRIMARY KEY, wide TINYINT, qty TINYINT(1))",
        f"INSERT INTO {table} VALUES (1, 1, 1)", database=database)
    config = make_config([table], sink__tables={table: {"types": types}})
    with pytest.raises(ColumnRulesError, match="remedy") as refused:
        Pipeline(config).snapshot()
    assert named in str(refused.value)
    assert not Path(Pipeline(config).table_path(table)).exists(), "nothing was written"
