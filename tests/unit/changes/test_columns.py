"""Column rules: parsing (`sink.tables.<t>.columns`, `.mask`) and `ColumnShape` on rows, as pure logic."""

from __future__ import annotations

import copy
import hashlib
import hmac
from decimal import Decimal
from typing import Any

import pytest

from cdc_lib.changes.columns import column_shape, sink_schema
from cdc_lib.config.model import ColumnMask, ColumnRules
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ColumnRulesError, ConfigError
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from tests.unit.config.documents import VALID

SCHEMA = TableSchema(
    table=TableRef("shop", "orders"),
    columns=(
        ColumnInfo("id", "bigint", "bigint(20) unsigned", False),
        ColumnInfo("email", "varchar", "varchar(80)", True, character_set="utf8mb4"),
        ColumnInfo("ssn", "varchar", "varchar(20)", True, character_set="utf8mb4"),
        ColumnInfo("note", "text", "text", True, character_set="utf8mb4"),
        ColumnInfo("total", "decimal", "decimal(10,2)", True, numeric_precision=10, numeric_scale=2),
    ),
    primary_key=("id",),
)
ENV = {"K": "secret"}


def rules(**mask: ColumnMask) -> ColumnRules:
    return ColumnRules(exclude=("note",), mask=mask)


def test_a_row_is_cut_and_masked_and_the_key_stays() -> None:
    partial = ColumnMask(kind="partial", keep_first=1, keep_last=2, fill="#")
    shape = column_shape(SCHEMA, rules(email=ColumnMask(kind="hash", key_env="K"), ssn=partial), environ=ENV)
    assert shape is not None and shape.schema.column_names == ("id", "email", "ssn", "total")
    row = shape.apply((7, "a@b.c", "123456789", "clear note", Decimal("1.50")))
    assert row == (7, hmac.new(b"secret", b"a@b.c", hashlib.sha256).hexdigest(), "1######89", Decimal("1.50"))
    assert shape.apply((8, None, "abc", None, None)) == (8, None, "###", None), "NULL stays NULL; short: all fill"
    assert shape.schema.columns[1].column_type == "char(64)"


def test_the_hash_is_the_same_for_an_int_and_a_decimal_of_one_number() -> None:
    # An unsigned BIGINT reaches a Spark UDF as a Decimal, and the binlog road as an int.
    schema = TableSchema(SCHEMA.table, (*SCHEMA.columns, ColumnInfo("badge", "bigint", "bigint(20) unsigned", True)),
                         ("id",))
    shape = column_shape(schema, ColumnRules(mask={"badge": ColumnMask(kind="hash", key_env="K")}), environ=ENV)
    assert shape is not None and shape.masks[5](12) == shape.masks[5](Decimal(12))


def test_redact_writes_the_constant_even_for_null_and_truncate_cuts() -> None:
    shape = column_shape(SCHEMA, rules(email=ColumnMask(kind="redact", value="x"),
                                       ssn=ColumnMask(kind="truncate", length=2)), environ=ENV)
    assert shape is not None and shape.apply((1, None, "12345", "n", None)) == (1, "x", "12", None)


@pytest.mark.parametrize(("rules_", "message"), [
    (ColumnRules(include=("email",)), "primary key column 'id' is left out"),
    (ColumnRules(mask={"id": ColumnMask(kind="hash", key_env="K")}), "primary key column 'id' is masked"),
    (ColumnRules(exclude=("nope",)), "column 'nope'"),
    (ColumnRules(exclude=("email",), mask={"email": ColumnMask(kind="redact")}), "both left out and masked"),
    (ColumnRules(mask={"total": ColumnMask(kind="hash", key_env="K")}), "hash takes text"),
    (ColumnRules(mask={"total": ColumnMask(kind="redact", value="0")}), "text columns only"),
    (ColumnRules(mask={"email": ColumnMask(kind="hash", key_env="UNSET")}), "UNSET"),
])
def test_refusals_name_the_column(rules_: ColumnRules, message: str) -> None:
    with pytest.raises(ColumnRulesError, match=message):
        column_shape(SCHEMA, rules_, environ=ENV)


def test_not_strict_a_dropped_column_no_longer_matters_and_the_sink_schema_needs_no_key() -> None:
    gone = TableSchema(SCHEMA.table, SCHEMA.columns[:3], ("id",))
    shaped = sink_schema(gone, rules(email=ColumnMask(kind="hash", key_env="UNSET_TOO")), strict=False)
    assert shaped.column_names == ("id", "email", "ssn") and shaped.columns[1].column_type == "char(64)"


def parsed(entry: dict[str, Any]) -> ColumnRules | None:
    document = copy.deepcopy(VALID)
    document["sink"]["tables"] = {"shop.orders": entry}
    return parse_config(document).sink.column_rules_for("shop.orders")


def test_parse() -> None:
    assert parsed({"columns": {"include": ["id", "email"]},
                   "mask": {"email": {"hash": {"key_env": "K"}}, "ssn": {"partial": {"keep_last": 4}},
                            "a": {"redact": None}, "b": {"truncate": 3}}}) == ColumnRules(
        include=("id", "email"),
        mask={"email": ColumnMask(kind="hash", key_env="K"), "ssn": ColumnMask(kind="partial", keep_last=4),
              "a": ColumnMask(kind="redact"), "b": ColumnMask(kind="truncate", length=3)},
    )
    assert parsed({"mode": "mirror"}) is None


@pytest.mark.parametrize("entry", [
    {"columns": {"include": ["a"], "exclude": ["b"]}},
    {"columns": {"only": ["a"]}},
    {"columns": {"exclude": []}},
    {"mask": {"a": {"hash": {}}}},
    {"mask": {"a": {"scramble": 1}}},
    {"mask": {"a": {"partial": {"fill": "**"}}}},
    {"mode": "history", "columns": {"exclude": ["a"]}},
])
def test_parse_refusals(entry: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        parsed(entry)


@pytest.mark.parametrize("mode_at", ["table", "pipeline"])
@pytest.mark.parametrize("mode", ["soft_delete", "history"])
def test_masks_alone_on_a_soft_delete_or_history_table_are_refused_with_the_remedy(mode: str, mode_at: str) -> None:
    """Those modes' snapshot correction decodes binlog rows without the rules: a mask alone (no column list) is
    refused as loudly as a list, where the mode is the table's own and where it is the pipeline's."""
    document = copy.deepcopy(VALID)
    entry: dict[str, Any] = {"mask": {"email": {"redact": None}}}
    if mode_at == "table":
        entry["mode"] = mode
    else:
        document["sink"]["mode"] = mode
    document["sink"]["tables"] = {"shop.orders": entry}
    with pytest.raises(ConfigError, match=f"mirror tables only, not mode {mode}") as raised:
        parse_config(document)
    assert "land the table as a mirror" in (raised.value.remedy or "")
