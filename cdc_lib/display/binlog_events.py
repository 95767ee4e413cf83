"""`binlake binlog decode`'s output: decoded binlog events as text (a block per transaction) or as JSON Lines.

The JSON keys are stable (docs/cli.md lists them): every object has every key, null where it does not apply. Values
are binlake's (what Delta receives): numbers as JSON numbers, DECIMAL as a string, dates and timestamps in ISO 8601,
bytes as {"hex": "…"}; JSON columns hold their text, as in Delta.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import Any

from cdc_lib.binlog.decode import DecodedEvent
from cdc_lib.binlog.decode_rows import RowChange
from cdc_lib.binlog.json_diff import DiffVector

#: The JSON Lines keys, in order (docs/cli.md).
JSON_KEYS = ("file", "pos", "end", "in_payload", "type", "code", "verdict", "why", "transaction", "gtid", "table",
             "operation", "rows", "columns", "metadata", "statement", "error", "remedy", "notes")


def json_value(value: Any) -> Any:
    """A decoded value as JSON (see the module docstring)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, (bytes, bytearray)):
        return {"hex": bytes(value).hex()}
    if isinstance(value, DiffVector):
        return {"hex": value.data.hex()}
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(key): json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(item) for item in value]
    return str(value)


def to_json(event: DecodedEvent) -> dict[str, Any]:
    document = {key: json_value(getattr(event, key)) for key in JSON_KEYS if key != "rows"}
    document["rows"] = [
        {"before": json_value(row.before), "after": json_value(row.after), "diffs": json_value(row.diffs)}
        for row in event.rows
    ]
    return {key: document[key] for key in JSON_KEYS}


def json_lines(events: Iterable[DecodedEvent]) -> Iterator[str]:
    for event in events:
        yield json.dumps(to_json(event), ensure_ascii=False)


def text_value(value: Any) -> str:
    """A decoded value as mysqlbinlog -v writes it, near enough: 'text', 0xBYTES, NULL, numbers bare."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        escaped = json.dumps(value, ensure_ascii=False)[1:-1].replace('\\"', '"').replace("'", "\\'")
        return f"'{escaped}'"
    if isinstance(value, (bytes, bytearray)):
        return "0x" + bytes(value).hex().upper() if value else "''"
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        return f"'{value.isoformat(sep=' ')}'"
    if isinstance(value, (dt.date, dt.time)):
        return f"'{value.isoformat()}'"
    if isinstance(value, DiffVector):
        return "<partial JSON diff>"
    return str(value)


def _image(values: dict[str, Any]) -> str:
    return ", ".join(f"{name}={text_value(value)}" for name, value in values.items())


def _row_lines(operation: str | None, row: RowChange) -> Iterator[str]:
    if row.before is not None:
        yield f"    {'before' if row.after is not None else (operation or 'row')}: {_image(row.before)}"
    if row.after is not None:
        yield f"    {'after ' if row.before is not None else (operation or 'row')}: {_image(row.after)}"
    for name, diffs in row.diffs.items():
        for diff in diffs:
            value = "" if diff["operation"] == "REMOVE" else f" {json.dumps(json_value(diff['value']))}"
            yield f"    diff {name}: {diff['operation']} {diff['path']}{value}"


def text_lines(events: Iterable[DecodedEvent]) -> Iterator[str]:
    """A block per transaction (its number and GTID), a line per event: where, what, the verdict and why."""
    file: str | None = None
    transaction: int | None = None
    for event in events:
        if event.file != file:
            file = event.file
            yield f"# file {file}"
        if event.transaction != transaction:
            transaction = event.transaction
            if transaction is not None:
                yield f"# transaction {transaction}" + (f"  GTID {event.gtid}" if event.gtid else "")
        where = f"at {event.pos}" + (f" (compressed, event {event.in_payload})" if event.in_payload else "")
        line = f"{where:<30} {event.type:<28} {event.verdict}"
        what = " ".join(part for part in (event.operation, event.table) if part)
        if what:
            line += f"  {what}"
        if event.why:
            line += f" — {event.why}"
        yield line + f"  [end {event.end}]"
        indent = "    "
        if event.gtid and event.transaction is None:
            yield f"{indent}GTIDs: {event.gtid}"
        if event.statement is not None:
            yield f"{indent}{' '.join(event.statement.split())}"
        if event.columns:
            yield f"{indent}metadata {event.metadata}: " + ", ".join(
                f"{column['name']} {column['type']}" + ("" if column["nullable"] else " NOT NULL")
                + (" KEY" if column["key"] else "")
                + (f" {column['charset']}" if column["charset"] else "")
                for column in event.columns
            )
        for row in event.rows:
            yield from _row_lines(event.operation, row)
        for note in event.notes:
            yield f"{indent}note: {note}"
        if event.error:
            yield f"{indent}ERROR {event.error} — remedy: {event.remedy}"
