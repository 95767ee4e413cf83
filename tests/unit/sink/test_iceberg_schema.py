"""Delta types as Iceberg types, and field ids that stay with a column across schema changes (cdc_lib/sink/iceberg)."""

from __future__ import annotations

import re

import pytest

from cdc_lib.errors import IcebergMetadataError
from cdc_lib.sink.iceberg.schema import Column, assign_ids, iceberg_type, name_mapping


@pytest.mark.parametrize(("delta", "iceberg"), [
    ("boolean", "boolean"), ("byte", "int"), ("short", "int"), ("integer", "int"), ("long", "long"),
    ("float", "float"), ("double", "double"), ("string", "string"), ("binary", "binary"), ("date", "date"),
    ("timestamp", "timestamptz"), ("timestamp_ntz", "timestamp"), ("decimal(12,2)", "decimal(12, 2)"),
    ("decimal(38,0)", "decimal(38, 0)"),
])
def test_each_delta_type_binlake_writes_has_its_exact_iceberg_type(delta: str, iceberg: str) -> None:
    assert iceberg_type(delta, column="c") == iceberg


@pytest.mark.parametrize("delta", ["variant", "decimal(39,0)", "void", "interval"])
def test_a_type_without_an_exact_iceberg_type_is_refused(delta: str) -> None:
    with pytest.raises(IcebergMetadataError, match=re.escape(f"column c has Delta type {delta}")) as raised:
        iceberg_type(delta, column="c", table="shop.t")
    assert raised.value.remedy


def test_a_new_table_numbers_its_columns_from_one() -> None:
    columns, last = assign_ids([("id", "integer", False), ("v", "string", True)], {}, 0)
    assert columns == [Column(1, "id", "int", True), Column(2, "v", "string", False)] and last == 2
    assert name_mapping(columns) == [{"field-id": 1, "names": ["id"]}, {"field-id": 2, "names": ["v"]}]


def test_existing_columns_keep_their_ids_and_a_new_one_takes_the_next_never_used() -> None:
    known = {"id": (1, "int"), "v": (2, "string"), "gone": (3, "long")}
    columns, last = assign_ids([("extra", "date", True), ("id", "integer", False), ("v", "string", True)], known, 3)
    assert [(column.name, column.field_id) for column in columns] == [("extra", 4), ("id", 1), ("v", 2)]
    assert last == 4


def test_a_column_dropped_and_added_again_keeps_its_id_as_delta_reads_it_by_name() -> None:
    columns, last = assign_ids([("gone", "long", True)], {"gone": (3, "long")}, 5)
    assert columns[0].field_id == 3 and last == 5


@pytest.mark.parametrize(("old", "new"), [("int", "long"), ("float", "double"), ("decimal(9, 2)", "decimal(12,2)")])
def test_a_promotion_iceberg_allows_keeps_the_id(old: str, new: str) -> None:
    delta = {"long": "long", "double": "double", "decimal(12,2)": "decimal(12,2)"}[new]
    columns, _ = assign_ids([("c", delta, True)], {"c": (7, old)}, 7)
    assert columns[0].field_id == 7


@pytest.mark.parametrize(("old", "delta"), [("long", "integer"), ("string", "long"), ("decimal(9, 2)", "decimal(9,3)")])
def test_another_type_change_is_refused(old: str, delta: str) -> None:
    with pytest.raises(IcebergMetadataError, match="changed type"):
        assign_ids([("c", delta, True)], {"c": (7, old)}, 7, table="shop.t")
