"""Delta column types as Iceberg types, and field ids that stay with a column's name across schema changes.

Spark and delta-rs write Parquet without Iceberg field ids, so readers map columns by name through the table's
name mapping (`schema.name-mapping.default`); the ids only have to be stable, which keeps an Iceberg reader's
view of an existing column the same across an ADD COLUMN. Plain data (no pyiceberg) so it is cheap to test.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cdc_lib.errors import IcebergMetadataError

#: Delta primitive type → Iceberg primitive type (the spec's names). byte and short are stored as Parquet INT32
#: with a width annotation, which Iceberg's `int` reads exactly.
_PRIMITIVES = {
    "boolean": "boolean", "byte": "int", "short": "int", "integer": "int", "long": "long", "float": "float",
    "double": "double", "string": "string", "binary": "binary", "date": "date",
    # Delta's `timestamp` is an instant (UTC-adjusted), `timestamp_ntz` a wall-clock time.
    "timestamp": "timestamptz", "timestamp_ntz": "timestamp",
}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
#: The type changes Iceberg allows on one field id (the spec's "type promotion"); any other change of a column's
#: type would make old files read wrong under the same id.
_PROMOTIONS = {("int", "long"), ("float", "double")}


@dataclass(frozen=True)
class Column:
    """One column of the Iceberg schema: its field id, name, Iceberg type and whether it may be null."""

    field_id: int
    name: str
    type: str
    required: bool


def iceberg_type(delta_type: str, *, column: str, table: str | None = None) -> str:
    """The Iceberg type (`decimal(p, s)` for decimals) of a Delta primitive type; raise for what has none exact."""
    if delta_type in _PRIMITIVES:
        return _PRIMITIVES[delta_type]
    decimal = _DECIMAL.fullmatch(delta_type)
    if decimal is not None and int(decimal.group(1)) <= 38:
        return f"decimal({decimal.group(1)}, {decimal.group(2)})"
    raise IcebergMetadataError(
        f"column {column} has Delta type {delta_type}, which binlake does not map to an Iceberg type exactly",
        remedy="leave the column out (sink.tables.<t>.columns.exclude) or drop iceberg for the table; docs/iceberg.md",
        table=table,
    )


def _promotable(old: str, new: str) -> bool:
    if old == new or (old, new) in _PROMOTIONS:
        return True
    old_decimal, new_decimal = _DECIMAL.fullmatch(old), _DECIMAL.fullmatch(new)
    # A decimal may widen its precision, never change its scale.
    return (old_decimal is not None and new_decimal is not None and old_decimal.group(2) == new_decimal.group(2)
            and int(new_decimal.group(1)) >= int(old_decimal.group(1)))


def assign_ids(
    fields: Sequence[tuple[str, str, bool]],
    known: Mapping[str, tuple[int, str]],
    last_id: int,
    *,
    table: str | None = None,
) -> tuple[list[Column], int]:
    """The Iceberg columns of a Delta schema (`fields`: name, Delta type, nullable), and the new last field id.

    `known` is every column name the table's Iceberg metadata has had, with its id and type: a name keeps its id
    (Delta without column mapping reads a column by name too, so a dropped and re-added column is the old one to
    both); a new name takes the next id after `last_id`, never one used before.
    """
    columns = []
    for name, delta_type, nullable in fields:
        kind = iceberg_type(delta_type, column=name, table=table)
        if name in known:
            field_id, old = known[name]
            if not _promotable(old, kind):
                raise IcebergMetadataError(
                    f"column {name} changed type from {old} to {kind}, which Iceberg cannot read from the files "
                    "written before under the same field id",
                    remedy="re-snapshot the table after removing its metadata/ folder, or drop iceberg for it",
                    table=table,
                )
        else:
            last_id += 1
            field_id = last_id
        columns.append(Column(field_id=field_id, name=name, type=kind, required=not nullable))
    return columns, last_id


def name_mapping(columns: Sequence[Column]) -> list[dict[str, object]]:
    """The Iceberg name mapping (`schema.name-mapping.default`) of a flat schema: each id to its column's name."""
    return [{"field-id": column.field_id, "names": [column.name]} for column in columns]


__all__ = ["Column", "assign_ids", "iceberg_type", "name_mapping"]
