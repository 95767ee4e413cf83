"""Row images of one table decoded both ways binlake can: the generated fast reader and the library's path."""

from __future__ import annotations

from typing import Any

from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_lib.binlog.stream import open_stream
from cdc_lib.binlog.table_rows import TableDecoder
from cdc_lib.config.model import PipelineConfig
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef
from cdc_lib.source.server import connect, describe_table

#: An image as compared: repr tells 1 from True from Decimal('1'), Decimal('1.0') from Decimal('1'), and naive from
#: UTC datetimes.
Shown = tuple[str, ...]


def typed(row: tuple[Any, ...]) -> Shown:
    return tuple(repr(value) for value in row)


def decode_both_ways(config: PipelineConfig, table: str,
                     start: BinlogPosition) -> tuple[list[Shown], list[Shown], TableDecoder]:
    """Every row image of `table` after `start`: decoded from the bytes (the fast reader), and by the library."""
    connection = connect(config.source)
    try:
        schema = describe_table(connection, TableRef.parse(table))
    finally:
        connection.close()
    decoder = TableDecoder.for_schema(schema)
    stream = open_stream(config.source, start, events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
                         tables=[schema.table])
    fast: list[Shown] = []
    library: list[Shown] = []
    try:
        for event in stream:
            if f"{event.schema}.{event.table}" != table:
                continue
            whole = decoder.fast.images(event) or []
            fast.extend(typed(row) for row in whole)
            _assert_keys_only_agree(decoder, event, whole)
            for row in event.rows:
                if isinstance(event, UpdateRowsEvent):
                    library.append(typed(decoder.row(row["before_values"], row.get("before_none_sources"))))
                    library.append(typed(decoder.row(row["after_values"], row.get("after_none_sources"))))
                else:
                    library.append(typed(decoder.row(row["values"], row.get("none_sources"))))
    finally:
        stream.close()
    return fast, library, decoder


def _assert_keys_only_agree(decoder: TableDecoder, event: Any, whole: list[tuple[Any, ...]]) -> None:
    """The mirror's decode of the same event (`old_keys_only`): an insert's and an update's after images whole, a
    delete's and an update's before images their key columns only, every other column stepped over exactly."""
    if not whole:
        return
    fallbacks = decoder.fast.fallback_events
    keyed = decoder.fast.images(event, old_keys_only=True)
    assert keyed is not None and decoder.fast.fallback_events == fallbacks, "the key-only decode fell back"
    keys = set(decoder.key_positions)
    for number, (ours, full) in enumerate(zip(keyed, whole, strict=True)):
        old = isinstance(event, DeleteRowsEvent) or (isinstance(event, UpdateRowsEvent) and number % 2 == 0)
        expected = tuple(value if not old or index in keys else None for index, value in enumerate(full))
        assert typed(ours) == typed(expected), f"image {number} of a {type(event).__name__}"
