"""A routed source's fold: its keys and rows followed by the source's names, and the predicate of its rows."""

from __future__ import annotations

from cdc_lib.changes import routing
from cdc_lib.changes.events import TableChanges
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo

REF = TableRef("shop_1", "orders_1")


def test_the_routed_schema_closes_the_key_with_the_source_columns() -> None:
    schema = TableSchema(REF, (ColumnInfo("id", "int", "int(11)", False), ColumnInfo("v", "int", "int(11)", True)),
                         ("id",))
    routed = routing.routed_schema(schema)
    assert routed.column_names == ("id", "v", "_binlake_source_db", "_binlake_source_table")
    assert routed.primary_key == ("id", "_binlake_source_db", "_binlake_source_table")
    assert routing.routed_schema(routed) == routed


def test_keys_and_rows_carry_the_source_and_the_input_is_kept() -> None:
    changes = TableChanges((0,))
    changes.insert((1, "a"))
    changes.insert((2, "b"))
    changes.delete((2, "b"))
    changes.insert((3, "c"))
    changes.truncated = True
    routed = routing.with_source(changes, REF)
    assert routed.rows[(1, "shop_1", "orders_1")] == ("upsert", (1, "a", "shop_1", "orders_1"))
    assert (1,) in changes.rows, "the input fold is unchanged"
    assert routed.truncated and routed.inserted == changes.inserted
    assert routed.new_keys == {(key[0], "shop_1", "orders_1") for key in changes.new_keys}
    # Later changes fold by the widened key.
    routed.delete((1, "a", "shop_1", "orders_1"))
    assert routed.rows[(1, "shop_1", "orders_1")][0] == "delete"


def test_the_scope_quotes_names_and_values() -> None:
    assert routing.scope(REF, alias="t") == (
        "t.`_binlake_source_db` = 'shop_1' AND t.`_binlake_source_table` = 'orders_1'"
    )
    assert routing.scope(TableRef("o'b", "a\\c")) == (
        "`_binlake_source_db` = 'o\\'b' AND `_binlake_source_table` = 'a\\\\c'"
    )
