"""Rows and statements as `binlake binlog decode` shows them (`cdc_lib.binlog.decode`).

A rows event the sync applies is shown as the sync's decoder gives it; one it stops at is shown as
python-mysql-replication reads it (the columns its image holds, in binlake's values where they convert), so a user
sees what the binlog holds and why it is not applied. Statements never show a password or its hash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cdc_lib.binlog.json_diff import OPERATIONS, DiffVector, read_diffs
from cdc_lib.binlog.replication_library import keep_partial_json_bytes, parse_binary_json
from cdc_lib.binlog.table_rows import PARTIAL_UPDATE_ROWS_EVENT
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import binlog_converter


@dataclass
class RowChange:
    """One row of a rows event: before and after image (column → binlake's value); a diff per partial JSON column."""

    before: dict[str, Any] | None
    after: dict[str, Any] | None
    diffs: dict[str, list[dict[str, Any]]] = field(default_factory=dict)



#: Where a statement may go on with a password or its hash: CREATE/ALTER USER … IDENTIFIED, SET PASSWORD,
#: PASSWORD('…'), …_PASSWORD = '…' (CHANGE REPLICATION SOURCE). A column named password is not one of them.
_PASSWORD = re.compile(r"(\bIDENTIFIED\b|\bSET\s+PASSWORD\b|\bPASSWORD\s*\(|\b\w+_PASSWORD\s*=).*",
                       re.IGNORECASE | re.DOTALL)


def redacted(statement: str) -> str:
    """A statement with whatever follows IDENTIFIED, SET PASSWORD, PASSWORD( or X_PASSWORD= cut: a password or its
    hash is never shown."""
    return _PASSWORD.sub(lambda match: f"{match.group(1).rstrip('(= ')} <redacted>", statement)


def json_diffs(after: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    found = {}
    for name, value in after.items():
        if isinstance(value, DiffVector):
            found[str(name)] = [
                {"operation": OPERATIONS.get(diff.operation, str(diff.operation)), "path": diff.path_text,
                 "value": diff.value}
                for diff in read_diffs(value.data, parse_binary_json)
            ]
    return found


def library_rows(event: Any, schema: TableSchema) -> list[RowChange]:
    """What the library reads of a rows event the sync stops at: each present column in binlake's values."""
    converters = {column.name: binlog_converter(column) for column in schema.columns}
    try:
        if event.event_type == PARTIAL_UPDATE_ROWS_EVENT:
            keep_partial_json_bytes(event)
        rows = event.rows
    except Exception:  # noqa: BLE001 - the error shown already says why; there is nothing more to show
        return []
    changes = []

    def image(values: dict[str, Any] | None) -> dict[str, Any] | None:
        if values is None:
            return None
        shown = {}
        for name, value in values.items():
            convert = converters.get(name)
            try:
                shown[str(name)] = convert(value) if convert is not None and value is not None and not isinstance(
                    value, DiffVector) else value
            except Exception:  # noqa: BLE001 - shown as the library read it
                shown[str(name)] = value
        return shown

    for row in rows:
        if "values" in row:
            values = row["values"]
            present = _present(values, event.columns_present_bitmap)
            insert = event.event_type in (23, 30)
            changes.append(RowChange(None if insert else image(present), image(present) if insert else None))
        else:
            change = RowChange(image(_present(row["before_values"], event.columns_present_bitmap)),
                               image(_present(row["after_values"], getattr(event, "columns_present_bitmap2", None))))
            change.diffs = json_diffs(row["after_values"])
            changes.append(change)
    return changes


def _present(values: dict[str, Any], bitmap: bytes | None) -> dict[str, Any]:
    """The columns a row image holds (the library reads an absent column as None)."""
    if bitmap is None:
        return values
    mask = int.from_bytes(bitmap, "little")
    return {name: value for index, (name, value) in enumerate(values.items()) if mask >> index & 1}
