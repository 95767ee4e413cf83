"""A source table's name and schema: what every stage from the binlog to the sink calls a table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cdc_lib.model.types import ColumnInfo


@dataclass(frozen=True, order=True)
class TableRef:
    database: str
    table: str

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"

    def __str__(self) -> str:
        return self.name

    @classmethod
    def parse(cls, name: str) -> TableRef:
        database, _, table = name.partition(".")
        return cls(database, table)


@dataclass(frozen=True)
class TableSchema:
    table: TableRef
    columns: tuple[ColumnInfo, ...]
    primary_key: tuple[str, ...]

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    def to_json(self) -> dict[str, Any]:
        return {"columns": [column.to_json() for column in self.columns], "primary_key": list(self.primary_key)}

    @classmethod
    def from_json(cls, table: TableRef, data: dict[str, Any]) -> TableSchema:
        return cls(
            table=table,
            columns=tuple(ColumnInfo.from_json(column) for column in data["columns"]),
            primary_key=tuple(data["primary_key"]),
        )
