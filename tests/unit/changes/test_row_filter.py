"""Row filters as pure logic: the predicate's parser, its three-valued evaluator, its SQL, the config key, and the
fold of insert/update/delete images through a filter (cdc_lib.model.row_filter, cdc_lib.binlog.table_rows)."""

from __future__ import annotations

import copy
import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from cdc_lib.binlog.table_rows import TableDecoder, fold_delete, fold_insert, fold_update
from cdc_lib.changes.columns import column_shape
from cdc_lib.changes.events import TableChanges
from cdc_lib.config.model import ColumnMask, ColumnRules
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ColumnRulesError, ConfigError
from cdc_lib.model.row_filter import FilterSyntaxError, bind_filter, parse_filter
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from tests.unit.config.documents import VALID

SCHEMA = TableSchema(
    table=TableRef("shop", "orders"),
    columns=(
        ColumnInfo("id", "bigint", "bigint(20)", False),
        ColumnInfo("qty", "int", "int(11)", True),
        ColumnInfo("total", "decimal", "decimal(10,2)", True, numeric_precision=10, numeric_scale=2),
        ColumnInfo("day", "date", "date", True),
        ColumnInfo("at", "datetime", "datetime(6)", True, datetime_precision=6),
        ColumnInfo("code", "varchar", "varchar(10)", True, character_set="utf8mb4"),
        ColumnInfo("ratio", "double", "double", True),
        ColumnInfo("stamp", "timestamp", "timestamp", True),
    ),
    primary_key=("id",),
)


def row(id: int = 1, qty: int | None = 5, total: Decimal | str | None = Decimal("10.00"), day: dt.date | None = None,
        at: dt.datetime | None = None, code: str | None = None) -> tuple[Any, ...]:
    return (id, qty, total, day, at, code, None, None)


def truth(predicate: str, values: tuple[Any, ...], collations: dict[str, str] | None = None) -> bool | None:
    return bind_filter(predicate, SCHEMA, collations).test(values)


# -- three-valued logic ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("predicate", "expected"), [
    ("qty = 5", True), ("qty <> 5", False), ("qty != 4", True), ("qty > 4 AND qty < 6", True),
    ("qty IS NULL", False), ("qty IS NOT NULL", True),
    ("qty IN (1, 5)", True), ("qty NOT IN (1, 5)", False), ("qty BETWEEN 5 AND 5", True),
    ("qty NOT BETWEEN 6 AND 9", True), ("NOT (qty = 5)", False), ("(qty = 1 OR qty = 5) AND id = 1", True),
])
def test_comparisons_on_values(predicate: str, expected: bool) -> None:
    assert truth(predicate, row()) is expected


@pytest.mark.parametrize(("predicate", "expected"), [
    ("qty = 5", None), ("qty <> 5", None), ("NOT qty = 5", None), ("qty IN (1, 2)", None),
    ("qty NOT IN (1, 2)", None), ("qty BETWEEN 1 AND 9", None), ("qty NOT BETWEEN 1 AND 9", None),
    ("qty IS NULL", True), ("qty = 5 OR id = 1", True), ("qty = 5 OR id = 2", None),
    ("qty = 5 AND id = 2", False), ("qty = 5 AND id = 1", None), ("NOT (qty = 5 AND id = 2)", True),
])
def test_null_is_unknown_and_unknown_does_not_match(predicate: str, expected: bool | None) -> None:
    values = row(qty=None)
    assert truth(predicate, values) is expected
    assert bind_filter(predicate, SCHEMA).matches(values) is (expected is True)


def test_decimals_compare_exactly_and_integers_against_decimal_literals() -> None:
    assert truth("total = 10", row(total=Decimal("10.00"))) is True
    assert truth("total > 10.001", row(total=Decimal("10.00"))) is False
    assert truth("total >= 0.1", row(total=Decimal("0.10"))) is True  # as a float 0.1 would not be exact
    assert truth("qty > 4.5", row(qty=5)) is True and truth("qty < 5.0000001", row(qty=5)) is True
    assert truth("qty = -3", row(qty=-3)) is True
    assert truth("id = 9223372036854775807", row(id=9223372036854775807)) is True
    assert truth("id < 9223372036854775807", row(id=9223372036854775806)) is True
    assert truth("total < 1.5", row(total="1.49999999999999999999999999999999999999999"))  # a DECIMAL(65,x) as text


def test_dates_and_datetimes_at_their_edges() -> None:
    day = dt.date(2024, 2, 29)
    assert truth("day = DATE '2024-02-29'", row(day=day)) is True
    assert truth("day >= '2024-02-29' AND day < '2024-03-01'", row(day=day)) is True
    assert truth("day BETWEEN DATE '2024-01-01' AND DATE '2024-02-28'", row(day=day)) is False
    midnight = dt.datetime(2024, 3, 1)
    assert truth("at = DATE '2024-03-01'", row(at=midnight)) is True  # a date against a DATETIME is its midnight
    assert truth("at > TIMESTAMP '2024-03-01 00:00:00'", row(at=midnight)) is False
    assert truth("at < '2024-03-01 00:00:00.000001'", row(at=midnight)) is True
    assert truth("day IS NULL", row(day=None)) is True  # a zero date decodes to None, and is NULL in Delta too


def test_text_under_a_bin_collation_pads_and_compares_by_code_point() -> None:
    padded = {"code": "utf8mb4_bin"}
    assert truth("code = 'ab'", row(code="ab  "), padded) is True  # PAD SPACE: trailing spaces do not count
    assert truth("code < 'ab'", row(code="ab\t"), padded) is True  # 'ab\t' < 'ab ' as the server pads it
    assert truth("code = 'Ab'", row(code="ab"), padded) is False
    assert truth("code > 'z'", row(code="é"), padded) is True
    assert truth("code = 'ab'", row(code="ab  "), {"code": "utf8mb4_nopad_bin"}) is False
    assert truth("code IN ('x', 'it''s')", row(code="it's"), padded) is True


# -- refusals ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("predicate", [
    "qty = 1; DROP TABLE t", "qty = 1 -- x", "qty = 1 # x", "qty = 1 /* x */", 'code = "x"', "code = 'a\\'b'",
    "qty = NULL", "qty + 1 = 2", "lower(code) = 'x'", "qty = 1 AND", "qty", "(qty = 1", "qty = 1)", "",
    "qty LIKE 'a%'", "1 = qty", "qty = 1e3", "day = DATE '2024-02-30'", "day = DATE 2024", "qty NOT = 1",
])
def test_text_outside_the_subset_is_refused(predicate: str) -> None:
    with pytest.raises(FilterSyntaxError):
        parse_filter(predicate)


@pytest.mark.parametrize(("predicate", "why"), [
    ("gone = 1", "does not have"), ("ratio > 1", "double"), ("stamp > '2024-01-01'", "time zone"),
    ("code = 'x'", "collation"), ("qty = 'x'", "not a number"), ("day = 20240101", "is a number"),
    ("day = '2024-01-01 10:00:00'", "datetime"), ("qty > DATE '2024-01-01'", "not a number"),
])
def test_what_does_not_fit_the_schema_is_refused_with_a_remedy(predicate: str, why: str) -> None:
    with pytest.raises(ColumnRulesError, match=why) as raised:
        bind_filter(predicate, SCHEMA)
    assert "sink.tables.shop.orders" in (raised.value.remedy or "")


def test_text_compare_is_refused_under_a_case_insensitive_collation() -> None:
    with pytest.raises(ColumnRulesError, match="utf8mb4_general_ci"):
        bind_filter("code = 'x'", SCHEMA, {"code": "utf8mb4_general_ci"})
    assert truth("code IS NULL", row(), {"code": "utf8mb4_general_ci"}) is True  # NULL tests need no collation


def test_a_dropped_filter_column_stops_even_a_lenient_shape() -> None:
    gone = TableSchema(SCHEMA.table, SCHEMA.columns[:1] + SCHEMA.columns[2:], ("id",))
    with pytest.raises(ColumnRulesError, match="'qty'"):
        column_shape(gone, None, strict=False, row_filter="qty > 1")


# -- SQL -----------------------------------------------------------------------------------------------------


def test_the_sql_is_rendered_from_the_tree_not_the_text() -> None:
    bound = bind_filter("qty>=1 and (total in (1.50, 2) or not day < '2024-01-01') AND `at` IS NOT NULL", SCHEMA)
    zero_null = "IF(YEAR(`day`) = 0 OR MONTH(`day`) = 0 OR DAYOFMONTH(`day`) = 0, NULL, `day`)"
    at = "IF(YEAR(`at`) = 0 OR MONTH(`at`) = 0 OR DAYOFMONTH(`at`) = 0, NULL, `at`)"
    assert bound.sql == (f"((`qty` >= 1) AND ((`total` IN (1.50, 2)) OR (NOT ({zero_null} < DATE'2024-01-01'))) "
                         f"AND ({at} IS NOT NULL))")
    assert bind_filter("code = 'it''s'", SCHEMA, {"code": "utf8mb4_bin"}).sql == "(`code` = 'it''s')"


# -- the config key ------------------------------------------------------------------------------------------


def parsed(entry: dict[str, Any]) -> str | None:
    document = copy.deepcopy(VALID)
    document["sink"]["tables"] = {"shop.orders": entry}
    return parse_config(document).sink.row_filter_for("shop.orders")


def test_config_key() -> None:
    assert parsed({"filter": "qty > 1"}) == "qty > 1"
    assert parsed({}) is None
    with pytest.raises(ConfigError, match=r"sink\.tables\.shop\.orders\.filter.*comment"):
        parsed({"filter": "qty > 1 -- all"})
    with pytest.raises(ConfigError, match="string"):
        parsed({"filter": 3})


# -- folding images through the filter -----------------------------------------------------------------------

SMALL = TableSchema(
    table=TableRef("shop", "orders"),
    columns=(ColumnInfo("id", "int", "int(11)", False), ColumnInfo("qty", "int", "int(11)", True),
             ColumnInfo("email", "varchar", "varchar(80)", True, character_set="utf8mb4")),
    primary_key=("id",),
)


def folded(steps: list[tuple[str, tuple[Any, ...], tuple[Any, ...] | None]],
           rules: ColumnRules | None = None) -> TableChanges:
    shape = column_shape(SMALL, rules, row_filter="qty > 10", environ={"K": "k"})
    decoder = TableDecoder.for_schema(SMALL, shape=shape)
    changes = TableChanges(decoder.key_positions)
    for operation, first, second in steps:
        if operation == "insert":
            fold_insert(decoder, changes, first)
        elif operation == "delete":
            fold_delete(decoder, changes, first)
        else:
            assert second is not None
            fold_update(decoder, changes, first, second)
    return changes


def test_inserts_and_deletes_outside_the_filter_are_dropped() -> None:
    changes = folded([("insert", (1, 11, "a"), None), ("insert", (2, 10, "b"), None), ("insert", (3, None, "c"), None),
                      ("delete", (4, 11, "d"), None), ("delete", (5, 1, "e"), None)])
    assert changes.rows == {(1,): ("upsert", (1, 11, "a")), (4,): ("delete", None)}


def test_updates_move_rows_in_and_out() -> None:
    changes = folded([
        ("update", (1, 11, "a"), (1, 12, "a")),  # in → in: update
        ("update", (2, 11, "b"), (2, 5, "b")),  # in → out: delete
        ("update", (3, 5, "c"), (3, 50, "c")),  # out → in: arrives
        ("update", (4, 5, "d"), (4, 6, "d")),  # out → out: dropped
        ("update", (5, 11, "e"), (6, 11, "e")),  # in → in under a new key: the old key leaves
        ("update", (7, 11, "f"), (8, 1, "f")),  # in → out under a new key: only the old key is deleted
        ("update", (9, 1, "g"), (10, 99, "g")),  # out → in under a new key: only the new key arrives
    ])
    assert changes.rows == {
        (1,): ("upsert", (1, 12, "a")), (2,): ("delete", None), (3,): ("upsert", (3, 50, "c")),
        (5,): ("delete", None), (6,): ("upsert", (6, 11, "e")), (7,): ("delete", None),
        (10,): ("upsert", (10, 99, "g")),
    }
    # A row that enters the filter is not claimed new to Delta (a filter edited without a re-snapshot may have
    # left it there), so it is merged, never appended as a second row under its key.
    assert (3,) not in changes.new_keys and (10,) not in changes.new_keys


def test_the_filter_sees_the_clear_value_of_a_masked_column() -> None:
    rules = ColumnRules(mask={"qty": ColumnMask(kind="hash", key_env="K")})
    changes = folded([("insert", (1, 11, "a"), None), ("insert", (2, 9, "b"), None)], rules)
    ((key, (operation, stored)),) = changes.rows.items()
    assert key == (1,) and operation == "upsert" and stored is not None
    assert stored[0] == 1 and isinstance(stored[1], str) and len(stored[1]) == 64  # landed hashed, chosen in clear
