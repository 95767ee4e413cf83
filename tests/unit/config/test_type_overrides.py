"""Type overrides (`sink.tables.<t>.types.<column>: boolean`, docs/types.md): parsing, and the TINYINT(1) → boolean
rule on rows as pure logic (the same function shapes binlog rows)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cdc_lib.changes.columns import column_shape
from cdc_lib.config.model import ColumnRules
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import BooleanValueError, ColumnRulesError, ConfigError
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo, spark_type_ddl
from tests.unit.config.documents import VALID

SCHEMA = TableSchema(
    table=TableRef("shop", "orders"),
    columns=(
        ColumnInfo("id", "int", "int(11)", False),
        ColumnInfo("active", "tinyint", "tinyint(1)", True),
        ColumnInfo("level", "tinyint", "tinyint(4)", True),
    ),
    primary_key=("id",),
)


def _document(**table: Any) -> dict[str, Any]:
    document = copy.deepcopy(VALID)
    document["sink"]["tables"] = {"shop.orders": table}
    return document


def test_a_boolean_override_is_parsed_and_recorded_with_the_landing_rules() -> None:
    sink = parse_config(_document(types={"active": "boolean"})).sink
    rules = sink.column_rules_for("shop.orders")
    assert rules is not None and dict(rules.types) == {"active": "boolean"}
    assert sink.landing_rules_for("shop.orders")["types"] == {"active": "boolean"}
    # No override: the recorded rules are what they were before overrides existed (no stop after an upgrade).
    assert "types" not in parse_config(_document(mode="mirror")).sink.landing_rules_for("shop.orders")


@pytest.mark.parametrize(("table", "problem"), [
    ({"types": {"active": "bool"}}, "must be one of: boolean"),
    ({"types": {"active": "boolean"}, "columns": {"exclude": ["active"]}}, "left out"),
    ({"types": {"active": "boolean"}, "columns": {"include": ["id"]}}, "left out"),
    ({"types": {"active": "boolean"}, "mask": {"active": {"redact": None}}}, "masked"),
    ({"types": ["active"]}, "types"),
])
def test_an_override_that_cannot_hold_is_refused_at_load(table: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_config(_document(**table))


def test_zero_and_one_become_false_and_true_and_null_stays_null() -> None:
    shape = column_shape(SCHEMA, ColumnRules(types={"active": "boolean"}))
    assert shape is not None
    assert [shape.apply((1, value, 3)) for value in (0, 1, None)] == [(1, False, 3), (1, True, 3), (1, None, 3)]
    active = shape.schema.columns[1]
    assert spark_type_ddl(active) == "boolean" and spark_type_ddl(shape.schema.columns[2]) == "tinyint"


@pytest.mark.parametrize("value", [2, -1, 127])
def test_any_other_value_is_refused_not_taken_as_true(value: int) -> None:
    shape = column_shape(SCHEMA, ColumnRules(types={"active": "boolean"}))
    assert shape is not None
    with pytest.raises(BooleanValueError, match="remedy") as refused:
        shape.apply((1, value, 3))
    assert f"holds {value}" in str(refused.value) and "types.active" in str(refused.value)


@pytest.mark.parametrize(("types", "named"), [
    ({"level": "boolean"}, "only TINYINT(1)"),
    ({"id": "boolean"}, "primary key column 'id'"),
    ({"nope": "boolean"}, "column 'nope'"),
])
def test_an_override_on_a_column_that_is_no_tinyint_1_is_refused_against_the_schema(
    types: dict[str, Any], named: str
) -> None:
    with pytest.raises(ColumnRulesError, match="remedy") as refused:
        column_shape(SCHEMA, ColumnRules(types=types))
    assert named in str(refused.value)
