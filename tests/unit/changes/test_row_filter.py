"""Row filters as pure logic: the predicate's parser, its three-valued evaluator, its SQL, the config key, and the
fold of insert/update/delete images through a filter (cdc_lib.model.row_filter, cdc_lib.binlog.table_rows)."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pytest

from cdc_lib.binlog.table_rows import TableDecoder, fold_delete, fold_insert, fold_update
from cdc_lib.changes.columns import column_shape
from cdc_lib.changes.events import TableChanges
from cdc_lib.config.model import ColumnMask, ColumnRules
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ColumnRulesError, ConfigError
from cdc_lib.model.collated import AnswerCache, Question, TextAnswers
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
        ColumnInfo("code", "varchar", "varchar(10)", True, character_set="utf8mb4", collation="utf8mb4_general_ci"),
        ColumnInfo("ratio", "double", "double", True),
        ColumnInfo("stamp", "timestamp", "timestamp", True),
        ColumnInfo("tag", "varbinary", "varbinary(8)", True),
        ColumnInfo("fixed", "binary", "binary(4)", True),
        ColumnInfo("old", "varchar", "varchar(10)", True, character_set="utf8mb4"),  # recorded without collation
    ),
    primary_key=("id",),
)


def row(id: int = 1, qty: int | None = 5, total: Decimal | str | None = Decimal("10.00"), day: dt.date | None = None,
        at: dt.datetime | None = None, code: str | None = None, tag: bytes | None = None,
        fixed: bytes | None = None) -> tuple[Any, ...]:
    return (id, qty, total, day, at, code, None, None, tag, fixed, None)


class FakeServer:
    """Answers text comparisons as a case-insensitive, PAD SPACE collation would (casefold, trailing blanks off),
    recording each call: a stand-in for the server, whose answers the evaluator must follow whatever Python says."""

    def __init__(self) -> None:
        self.calls: list[list[Question]] = []

    def __call__(self, questions: Sequence[Question]) -> list[int]:
        self.calls.append(list(questions))
        signs = []
        for _, _, value, literal in questions:
            a, b = value.rstrip(" ").casefold(), literal.rstrip(" ").casefold()
            signs.append(0 if a == b else (-1 if a < b else 1))
        return signs


def truth(predicate: str, values: tuple[Any, ...], answers: TextAnswers | None = None) -> bool | None:
    return bind_filter(predicate, SCHEMA).test(values, answers)


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


@pytest.mark.parametrize(("predicate", "value", "expected"), [
    ("code = 'active'", "Active", True), ("code <> 'active'", "ACTIVE ", False), ("code = 'eu'", "eu   ", True),
    ("code IN ('eu', 'us')", "US", True), ("code NOT IN ('eu', 'us')", "Uk", True),
    ("code BETWEEN 'a' AND 'c'", "B", True), ("code NOT BETWEEN 'a' AND 'c'", "B", False),
    ("code < 'b'", "A", True), ("code >= 'b'", "A", False), ("code <= 'a'", "A ", True), ("code > 'a'", "B", True),
    ("code = 'x'", None, None), ("code = 'x' OR qty = 5", None, True), ("NOT code IN ('a')", None, None),
    ("code IS NULL", None, True), ("code IS NOT NULL", "x", True),
])
def test_text_is_compared_by_the_servers_answers_not_by_python(predicate: str, value: str | None,
                                                              expected: bool | None) -> None:
    server = FakeServer()
    answers = TextAnswers(server)
    assert truth(predicate, row(code=value), answers) is expected
    # Python's == would say 'Active' <> 'active'; only the server's answers are used, each asked once.
    asked = [question for call in server.calls for question in call]
    assert len(asked) == len(set(asked))
    assert all(question[:2] == ("utf8mb4", "utf8mb4_general_ci") for question in asked)


def test_a_batch_asks_every_missing_comparison_in_one_round_trip_and_caches_the_answers() -> None:
    bound = bind_filter("code IN ('eu', 'us') OR (qty > 3 AND code <> 'gone')", SCHEMA)
    assert bound.asks_server
    images = [row(code=code) for code in ("EU", "eu", "Us", "fr", None, "EU", "GONE")]
    server = FakeServer()
    cache = AnswerCache()
    answers = TextAnswers(server, cache)
    answers.prefetch(question for image in images for question in bound.questions(image))
    assert len(server.calls) == 1  # one round trip for the batch
    assert len(server.calls[0]) == 5 * 3  # distinct values (EU, eu, Us, fr, GONE) × literals ('eu', 'us', 'gone')
    assert [bound.matches(image, answers) for image in images] == [True, True, True, True, False, True, False]
    assert len(server.calls) == 1  # evaluation asked nothing more
    later = TextAnswers(server, cache)  # the next batch: known answers come from the cache
    later.prefetch(bound.questions(row(code="eu")))
    assert len(server.calls) == 1
    later.prefetch(bound.questions(row(code="de")))
    assert len(server.calls) == 2 and len(server.calls[1]) == 3


def test_the_answer_cache_is_bounded_and_keyed_by_collation() -> None:
    cache = AnswerCache(max_entries=2, max_value_chars=5)
    cache.put(("utf8mb4", "utf8mb4_general_ci", "a", "A"), 0)
    cache.put(("utf8mb4", "utf8mb4_bin", "a", "A"), 1)
    assert cache.get(("utf8mb4", "utf8mb4_general_ci", "a", "A")) == 0
    assert cache.get(("utf8mb4", "utf8mb4_bin", "a", "A")) == 1
    cache.put(("latin1", "latin1_swedish_ci", "b", "B"), 0)
    assert len(cache) == 2 and cache.get(("utf8mb4", "utf8mb4_general_ci", "a", "A")) is None  # least recent out
    cache.put(("utf8mb4", "utf8mb4_bin", "long value", "x"), -1)
    assert cache.get(("utf8mb4", "utf8mb4_bin", "long value", "x")) is None  # long values are not kept


def test_text_without_answers_is_not_guessed() -> None:
    with pytest.raises(RuntimeError, match="server"):
        truth("code = 'x'", row(code="x"))


def test_binary_strings_compare_bytewise_without_padding() -> None:
    assert not bind_filter("tag = 'ab'", SCHEMA).asks_server
    assert truth("tag = 'ab'", row(tag=b"ab")) is True
    assert truth("tag = 'ab'", row(tag=b"AB")) is False  # no collation: bytes
    assert truth("tag = 'ab'", row(tag=b"ab ")) is False  # trailing blanks count
    assert truth("tag < 'ab'", row(tag=b"a")) is True  # a shorter prefix first
    assert truth("tag > 'a'", row(tag=b"\xff")) is True  # unsigned bytes
    assert truth("tag = 'é'", row(tag="é".encode())) is True  # the literal's utf8mb4 bytes
    assert truth("fixed = 'ab'", row(fixed=b"ab\x00\x00")) is False  # BINARY(4) holds its 0x00 padding
    assert truth("fixed = 'ab'", row(fixed=None)) is None


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
    ("tag > 5", "not a string"), ("qty = 'x'", "not a number"), ("day = 20240101", "is a number"),
    ("day = '2024-01-01 10:00:00'", "datetime"), ("qty > DATE '2024-01-01'", "not a number"),
])
def test_what_does_not_fit_the_schema_is_refused_with_a_remedy(predicate: str, why: str) -> None:
    with pytest.raises(ColumnRulesError, match=why) as raised:
        bind_filter(predicate, SCHEMA)
    assert "sink.tables.shop.orders" in (raised.value.remedy or "")


def test_text_compare_without_a_recorded_collation_asks_for_a_re_snapshot() -> None:
    with pytest.raises(ColumnRulesError, match="collation") as raised:
        bind_filter("old = 'x'", SCHEMA)
    assert "binlake snapshot --table shop.orders" in (raised.value.remedy or "")
    assert truth("old IS NULL", row()) is True  # NULL tests need no collation


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
    assert bind_filter("code = 'it''s'", SCHEMA).sql == "(`code` = 'it''s')"
    assert bind_filter("tag IN ('é', 'a')", SCHEMA).sql == "(`tag` IN ('é', 'a'))"


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


def test_a_text_filter_on_a_masked_column_asks_about_the_clear_value_and_lands_the_hash() -> None:
    schema = TableSchema(SMALL.table, SMALL.columns[:2] + (
        ColumnInfo("email", "varchar", "varchar(80)", True, character_set="utf8mb4", collation="utf8mb4_general_ci"),),
        ("id",))
    rules = ColumnRules(mask={"email": ColumnMask(kind="hash", key_env="K")})
    shape = column_shape(schema, rules, row_filter="email = 'ann@example.com'", environ={"K": "k"})
    server = FakeServer()
    decoder = TableDecoder.for_schema(schema, shape=shape, answers=TextAnswers(server))
    assert decoder.asks_server
    changes = TableChanges(decoder.key_positions)
    images = [(1, 1, "ANN@example.com"), (2, 1, "bob@example.com")]
    decoder.prefetch(images)
    for image in images:
        fold_insert(decoder, changes, image)
    assert len(server.calls) == 1 and {q[2] for q in server.calls[0]} == {"ANN@example.com", "bob@example.com"}
    ((key, (operation, stored)),) = changes.rows.items()
    assert key == (1,) and operation == "upsert" and stored is not None
    assert stored[2] != "ANN@example.com" and len(stored[2]) == 64  # chosen in clear, landed hashed
