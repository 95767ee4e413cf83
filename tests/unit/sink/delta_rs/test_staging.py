"""A mirror fold staged for delta-rs a column at a time holds exactly what the record-by-record staging held."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from cdc_lib.changes.events import TableChanges
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from cdc_lib.sink.delta_rs.writer import arrow_fold, arrow_records
from cdc_lib.sink.spark.staging import mirror_records

SCHEMA = TableSchema(
    TableRef.parse("shop.lines"),
    (
        ColumnInfo("amount", "decimal", "decimal(12,2)", False, 12, 2),
        ColumnInfo("order_id", "bigint", "bigint(20)", False),
        ColumnInfo("note", "varchar", "varchar(20)", True),
        ColumnInfo("line", "smallint", "smallint(6)", False),
        ColumnInfo("at", "timestamp", "timestamp(6)", False, datetime_precision=6),
    ),
    ("order_id", "line"),  # a key in other columns than the first, in another order than the table's
)
AT = dt.datetime(2026, 11, 24, 6, 40, 12, 345678, tzinfo=dt.UTC)


def fold(*, upserts: int, deletes: int) -> TableChanges:
    changes = TableChanges((1, 3))
    for number in range(upserts):
        changes.insert((Decimal(f"-{number}12.25"), 9_007_199_254_740_993 + number, None if number % 3 else "é",
                        -32768 + number, AT))
    for number in range(deletes):
        changes.delete((Decimal("0.01"), -7 - number, "gone", 32767 - number, AT))
    return changes


@pytest.mark.parametrize(("upserts", "deletes"), [(5, 3), (4, 0), (0, 2), (0, 0)])
def test_column_staging_equals_record_staging(upserts: int, deletes: int) -> None:
    changes = fold(upserts=upserts, deletes=deletes)
    by_column = arrow_fold(SCHEMA, changes.upserts(), changes.deleted_keys())
    by_record = arrow_records(SCHEMA, mirror_records(SCHEMA, changes))
    assert by_column.schema == by_record.schema
    assert by_column.to_pylist() == by_record.to_pylist()
    assert by_column.num_rows == upserts + deletes
    if deletes:
        last = by_column.to_pylist()[-1]
        assert last == {"amount": None, "order_id": -7 - deletes + 1, "note": None, "line": 32767 - deletes + 1,
                        "at": None, "_binlake_op": "d"}
