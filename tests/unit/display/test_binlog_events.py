"""`binlake binlog decode`'s values as JSON and as text."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from cdc_lib.binlog.decode import DecodedEvent
from cdc_lib.binlog.decode_rows import RowChange
from cdc_lib.display.binlog_events import JSON_KEYS, json_value, text_lines, text_value, to_json


@pytest.mark.parametrize(("value", "as_json", "as_text"), [
    (None, None, "NULL"),
    (-3, -3, "-3"),
    (Decimal("250.00"), "250.00", "250.00"),
    ("it's\n", "it's\n", "'it\\'s\\n'"),
    (b"\x05", {"hex": "05"}, "0x05"),
    (b"", {"hex": ""}, "''"),
    (dt.date(1990, 8, 1), "1990-08-01", "'1990-08-01'"),
    (dt.datetime(2022, 4, 20, 22, 18, 4, tzinfo=dt.UTC), "2022-04-20T22:18:04+00:00", "'2022-04-20 22:18:04+00:00'"),
])
def test_values(value: Any, as_json: Any, as_text: str) -> None:
    assert json_value(value) == as_json
    assert text_value(value) == as_text


def test_every_key_is_in_every_object_and_a_transaction_makes_a_block() -> None:
    event = DecodedEvent(file="binlog.000001", pos=100, end=150, code=30, type="WRITE_ROWS_EVENT_V2",
                         verdict="applied", transaction=2, gtid="0-1-5", table="db.t", operation="insert",
                         rows=[RowChange(None, {"id": 1, "b": b"\x01"})])
    document = to_json(event)
    assert list(document) == list(JSON_KEYS)
    assert document["rows"] == [{"before": None, "after": {"id": 1, "b": {"hex": "01"}}, "diffs": {}}]
    assert list(text_lines([event])) == [
        "# file binlog.000001",
        "# transaction 2  GTID 0-1-5",
        f"{'at 100':<30} {'WRITE_ROWS_EVENT_V2':<28} applied  insert db.t  [end 150]",
        "    insert: id=1, b=0x01",
    ]
