"""Rows of an Arrow table as the Iceberg tests compare them with the source and with delta-rs."""

from __future__ import annotations

import datetime as dt
from typing import Any


def normal(value: Any) -> Any:
    # DATETIME lands as a wall-clock time; a reader may hand it back tagged UTC.
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def sorted_rows(frame: Any) -> list[tuple[Any, ...]]:
    """Each row as a tuple of normal values, sorted."""
    return sorted(tuple(normal(value) for value in row.values()) for row in frame.to_pylist())
