"""A followed table's rows events → row tuples in schema order, folded into the table's changes.

`TableDecoder` holds what one table needs to decode: the fast decoder (`row_decoder.FastRows`), and for the
library's row dicts the picking, conversions, empty SETs and zero dates. `fold_rows` feeds a rows event through
it into a fold; the sync's batch read and the snapshot correction both decode through here, so values are the same.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pymysqlreplication.constants import NONE_SOURCE
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cdc_lib.binlog.json_diff import DiffNotApplicable, DiffVector, apply_diffs, read_diffs
from cdc_lib.binlog.replication_library import keep_partial_json_bytes, parse_binary_json
from cdc_lib.binlog.row_decoder import FastRows, prepare_columns
from cdc_lib.changes.columns import ColumnShape
from cdc_lib.changes.events import Row, TableChanges
from cdc_lib.config.model import ZeroDatePolicy
from cdc_lib.errors import (
    SchemaChangeError,
    UnreadableEventError,
    ZeroDateError,
    ZeroDateKeyError,
)
from cdc_lib.model.collated import Question, TextAnswers
from cdc_lib.model.json_text import MySqlJson
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import binlog_converter


@dataclass
class TableDecoder:
    """Turns the reader's row dicts into tuples in schema order, converting only where needed."""

    schema: TableSchema
    conversions: tuple[tuple[int, Callable[[Any], Any]], ...]
    key_positions: tuple[int, ...]
    set_columns: frozenset[str]
    pick: Callable[[dict[str, Any]], Any]
    width: int
    fast: FastRows
    #: (index, name, is TIMESTAMP) of DATE, DATETIME and TIMESTAMP columns, which may hold zero dates.
    temporal: tuple[tuple[int, str, bool], ...] = ()
    zero_dates: ZeroDatePolicy = "null"
    #: (index, name) of the key columns among them: a zero date there is refused under any policy (no NULL key).
    temporal_keys: tuple[tuple[int, str], ...] = ()
    #: The table's column projection and masks (cdc_lib.changes.columns): applied to each decoded row before it is
    #: folded, so no excluded or clear masked value reaches a fold, a spill file or a message. `key_positions` are
    #: positions in the shaped row.
    shape: ColumnShape | None = None
    #: The server's answers to the row filter's text comparisons (cdc_lib.model.collated); None when it has none.
    answers: TextAnswers | None = None

    @property
    def asks_server(self) -> bool:
        """Whether the table's row filter compares text: each rows event's images are prefetched (`prefetch`)."""
        return self.shape is not None and self.shape.row_filter is not None and self.shape.row_filter.asks_server

    def prefetch(self, images: list[Row]) -> None:
        """Ask the server, at once, every text comparison the row filter needs for `images` and has no answer for."""
        if self.answers is not None:
            self.answers.prefetch(self.questions_of(images, []))

    def questions_of(self, images: list[Row], into: list[Question]) -> list[Question]:
        """`into`, with every text comparison the row filter asks of `images` appended."""
        if self.shape is not None and self.shape.row_filter is not None:
            questions = self.shape.row_filter.questions
            into.extend(question for image in images for question in questions(image))
        return into

    @classmethod
    def for_schema(cls, schema: TableSchema, *, zero_dates: ZeroDatePolicy = "null",
                   shape: ColumnShape | None = None, answers: TextAnswers | None = None) -> TableDecoder:
        names = schema.column_names
        conversions = []
        for index, column in enumerate(schema.columns):
            converter = binlog_converter(column)
            if converter is not None:
                conversions.append((index, converter))
        getter = operator.itemgetter(*names)
        temporal = tuple(
            (index, column.name, column.data_type.lower() == "timestamp")
            for index, column in enumerate(schema.columns)
            if column.data_type.lower() in ("date", "datetime", "timestamp")
        )
        # The fast decoder turns a zero date into None like a NULL; under `error` only the library's
        # none_sources tell the two apart, so such tables decode through the library.
        library_only = zero_dates == "error" and bool(temporal)
        return cls(
            schema=schema,
            conversions=tuple(conversions),
            key_positions=tuple(
                (names if shape is None else shape.schema.column_names).index(key) for key in schema.primary_key
            ),
            set_columns=frozenset(column.name for column in schema.columns if column.data_type.lower() == "set"),
            pick=getter if len(names) > 1 else (lambda values: (getter(values),)),
            width=len(names),
            temporal=temporal,
            zero_dates=zero_dates,
            temporal_keys=tuple((index, name) for index, name, _ in temporal if name in schema.primary_key),
            fast=FastRows(schema, library_only=library_only),
            shape=shape,
            answers=answers,
        )

    def check_keys(self, rows: list[Row]) -> None:
        """Refuse a row whose temporal key decoded to None: a key column is NOT NULL, so it held a zero date."""
        for index, name in self.temporal_keys:
            if any(row[index] is None for row in rows):
                raise ZeroDateKeyError(self.schema.table.name, name)

    def row(self, values: dict[str, Any], none_sources: dict[str, str] | None = None) -> Row:
        """A row image in the shape the sink holds (projected, masked)."""
        row = self.source_row(values, none_sources)
        return row if self.shape is None else self.shape.apply(row)

    def source_row(self, values: dict[str, Any], none_sources: dict[str, str] | None = None) -> Row:
        """A row image in source schema order, converted but not yet shaped (what a row filter tests)."""
        if self.set_columns and none_sources:
            # The reader reports an empty SET as None; only its none_sources tell it from NULL.
            for name in self.set_columns:
                if none_sources.get(name) == NONE_SOURCE.EMPTY_SET:
                    values = {**values, name: ""}
        if len(values) != self.width:
            raise _schema_changed(self.schema, values)
        try:
            picked = self.pick(values)
        except KeyError as missing:
            raise _schema_changed(self.schema, values) from missing
        zero = self._zero_dates(values, none_sources) if self.temporal else ()
        if not self.conversions and not zero:
            return picked  # type: ignore[no-any-return]
        row = list(picked)
        for index, convert in self.conversions:
            value = row[index]
            if value is not None:
                row[index] = convert(value)
        for index in zero:
            row[index] = None
        return tuple(row)

    def _zero_dates(self, values: dict[str, Any], none_sources: dict[str, str] | None) -> list[int]:
        """Indexes of zero or partial dates in a row; raises instead under the `error` policy.

        The reader decodes a zero DATE/DATETIME as None (its none_sources tell it from NULL) and a
        zero TIMESTAMP as the epoch, which no real TIMESTAMP holds (their range starts at 00:00:01 UTC).
        """
        found = []
        for index, name, is_timestamp in self.temporal:
            if is_timestamp:
                zero = values.get(name) == _EPOCH
            else:
                zero = values.get(name) is None and (none_sources or {}).get(name) in _OUT_OF_RANGE
            if zero:
                if any(index == key for key, _ in self.temporal_keys):
                    raise ZeroDateKeyError(self.schema.table.name, name)
                if self.zero_dates == "error":
                    raise ZeroDateError(self.schema.table.name, name)
                found.append(index)
        return found


_EPOCH = dt.datetime(1970, 1, 1)
_OUT_OF_RANGE = frozenset(
    {NONE_SOURCE.OUT_OF_DATE_RANGE, NONE_SOURCE.OUT_OF_DATETIME_RANGE, NONE_SOURCE.OUT_OF_DATETIME2_RANGE}
)


def _schema_changed(schema: TableSchema, values: dict[str, Any]) -> Exception:
    table = schema.table.name
    if any(str(key).startswith("UNKNOWN_COL") for key in values):
        # prepare_columns names a nameless table map by position before any row is read; a column the library
        # still calls UNKNOWN_COL<n> means that did not happen, and a name is not guessed here.
        return SchemaChangeError(
            "the binlog names no columns (binlog_row_metadata is MINIMAL or NO_LOG) and they were not matched to "
            "the table's schema by position",
            remedy=f"report this as a binlake bug; meanwhile SET GLOBAL binlog_row_metadata=FULL (and in my.cnf) and "
            f"re-snapshot: binlake snapshot --table {table}",
            table=table,
        )
    added = [key for key in values if key not in schema.column_names]
    missing = [name for name in schema.column_names if name not in values]
    return SchemaChangeError(
        f"columns changed in the binlog (added: {added or '-'}, missing: {missing or '-'})",
        remedy=f"re-snapshot the table: binlake snapshot --table {table}",
        table=table,
    )


def fold_rows(event: Any, decoder: TableDecoder, changes: TableChanges, ahead: list[Row] | None = None) -> int:
    """Fold the event's rows into `changes`; returns how many row changes it carried.

    `ahead`: the event's images, decoded already by the fast decoder (`BinlogRead.decode_ahead`).
    """
    if event.event_type == PARTIAL_UPDATE_ROWS_EVENT:
        return fold_partial_update(event, decoder, changes)
    # The mirror's fold of a table without a filter or a shape reads only the keys of a delete's images and of an
    # update's before images (TableChanges.update_rows, delete_rows): the decoder steps over their other columns.
    whole_event = decoder.shape is None and type(changes) is TableChanges
    images = ahead if ahead is not None else decoder.fast.images(event, old_keys_only=whole_event)
    if images is not None:
        if decoder.temporal_keys:
            decoder.check_keys(images)
        if decoder.asks_server:
            decoder.prefetch(images)  # one round trip for the event's missing answers (none once a read prefetched)
        if whole_event:
            # The mirror's fold of a table without a filter or a shape: the whole event in one call, the same fold.
            if isinstance(event, UpdateRowsEvent):
                changes.update_rows(images)
                return len(images) // 2
            (changes.insert_rows if isinstance(event, WriteRowsEvent) else changes.delete_rows)(images)
            return len(images)
        if isinstance(event, UpdateRowsEvent):
            images_in_order = iter(images)
            for before, after in zip(images_in_order, images_in_order, strict=True):
                fold_update(decoder, changes, before, after)
            return len(images) // 2
        fold = fold_insert if isinstance(event, WriteRowsEvent) else fold_delete
        for row in images:
            fold(decoder, changes, row)
        return len(images)
    require_full_images(event, decoder.schema.table.name)
    if isinstance(event, UpdateRowsEvent):
        updates = [
            (decoder.source_row(row["before_values"], row.get("before_none_sources")),
             decoder.source_row(row["after_values"], row.get("after_none_sources")))
            for row in event.rows
        ]
        if decoder.asks_server:
            decoder.prefetch([image for pair in updates for image in pair])
        for before, after in updates:
            fold_update(decoder, changes, before, after)
    elif isinstance(event, (WriteRowsEvent, DeleteRowsEvent)):
        rows = [decoder.source_row(row["values"], row.get("none_sources")) for row in event.rows]
        if decoder.asks_server:
            decoder.prefetch(rows)
        fold = fold_insert if isinstance(event, WriteRowsEvent) else fold_delete
        for image in rows:
            fold(decoder, changes, image)
    return len(event.rows)


# -- one row image each, through the table's row filter and shape ---------------------------------------------
#
# The filter tests source rows (unmasked, every column); only a row that passes is shaped and folded. An UPDATE is
# judged on both images: a row that leaves the filter is deleted from the table, one that enters it arrives as an
# upsert of its (new) key — not as an INSERT, which would claim the key absent from Delta: a filter edited without
# a re-snapshot may have left the row there, and an appended duplicate key is never an outcome.


def _shaped(decoder: TableDecoder, row: Row) -> Row:
    return row if decoder.shape is None else decoder.shape.apply(row)


def _passes(decoder: TableDecoder, row: Row) -> bool:
    test = None if decoder.shape is None else decoder.shape.row_filter
    return test is None or test.matches(row, decoder.answers)


def fold_insert(decoder: TableDecoder, changes: TableChanges, row: Row) -> None:
    if _passes(decoder, row):
        changes.insert(_shaped(decoder, row))


def fold_delete(decoder: TableDecoder, changes: TableChanges, row: Row) -> None:
    if _passes(decoder, row):
        changes.delete(_shaped(decoder, row))


def fold_update(decoder: TableDecoder, changes: TableChanges, before: Row, after: Row) -> None:
    was, now = _passes(decoder, before), _passes(decoder, after)
    if was and now:
        changes.update(_shaped(decoder, before), _shaped(decoder, after))
    elif was:
        changes.delete(_shaped(decoder, before))
    elif now:
        arrived = getattr(changes, "key_arrived", None)  # the snapshot correction's fold has only the three
        (arrived or changes.insert)(_shaped(decoder, after))


#: MySQL's PARTIAL_UPDATE_ROWS_EVENT: an UPDATE whose after image may hold JSON diffs (`json_diff`).
PARTIAL_UPDATE_ROWS_EVENT = 39


def fold_partial_update(event: Any, decoder: TableDecoder, changes: TableChanges) -> int:
    """Fold a PARTIAL_UPDATE_ROWS event: each partial JSON column's diffs applied to its before image's document.

    The before image is the only old document the reader has, so both images must be full (binlog_row_image=FULL):
    a minimal image lacks the old document (and other columns' values), and the table stops instead.

    Raises:
        UnreadableEventError: an image is not full, or a diff cannot be applied exactly.
    """
    table = decoder.schema.table.name
    require_full_images(event, table, "the old JSON document a partial JSON update (PARTIAL_UPDATE_ROWS, "
                        "binlog_row_value_options=PARTIAL_JSON) applies to is not in the binlog")
    prepare_columns(event.columns, decoder.schema)
    if not keep_partial_json_bytes(event):
        raise UnreadableEventError(
            "a partial JSON update (PARTIAL_UPDATE_ROWS) was read by python-mysql-replication before binlake could "
            "keep its diffs whole",
            remedy=f"report this as a binlake bug; meanwhile SET GLOBAL binlog_row_value_options='' and re-snapshot: "
            f"binlake snapshot --table {table}",
            table=table,
        )
    pairs = []
    for row in event.rows:
        before, after = row["before_values"], row["after_values"]
        patched = None
        for name, value in after.items():
            if not isinstance(value, DiffVector):
                continue
            if patched is None:
                patched = dict(after)
            patched[name] = _patched_document(table, name, before.get(name), value)
        pairs.append((decoder.source_row(before, row.get("before_none_sources")),
                      decoder.source_row(patched if patched is not None else after, row.get("after_none_sources"))))
    if decoder.asks_server:
        decoder.prefetch([image for pair in pairs for image in pair])
    for source_before, source_after in pairs:
        fold_update(decoder, changes, source_before, source_after)
    return len(event.rows)


def _patched_document(table: str, column: str, document: Any, vector: DiffVector) -> Any:
    remedy = (f"SET GLOBAL binlog_row_value_options='' (and in my.cnf) so JSON updates are logged whole, then "
              f"re-snapshot: binlake snapshot --table {table}")
    if document is None:
        raise UnreadableEventError(
            f"a partial JSON update of column '{column}' has no old document to apply to (the before image holds "
            "NULL), which MySQL itself rejects",
            remedy=remedy, table=table,
        )
    try:
        old = document.document if isinstance(document, MySqlJson) else document
        return MySqlJson(apply_diffs(old, read_diffs(vector.data, parse_binary_json)))
    except DiffNotApplicable as exc:
        raise UnreadableEventError(
            f"a partial JSON update of column '{column}' cannot be applied exactly: {exc}", remedy=remedy, table=table,
        ) from None


def require_full_images(event: Any, table: str, missing: str = "") -> None:
    """Refuse a rows event whose row images lack a column (binlog_row_image MINIMAL or NOBLOB).

    The global setting is checked up front, but a session may still log MINIMAL images (SET SESSION
    binlog_row_image); python-mysql-replication then reads each absent column as None, which would reach Delta as
    a NULL (or, for an after image without the key, as a row under a NULL key). Only a full image is a row.

    Raises:
        UnreadableEventError: a row image lacks a column.
    """
    full = (1 << event.number_of_columns) - 1
    first = "before" if isinstance(event, UpdateRowsEvent) else "row"
    for image, bitmap in ((first, getattr(event, "columns_present_bitmap", None)),
                          ("after", getattr(event, "columns_present_bitmap2", None))):
        if bitmap is None or int.from_bytes(bitmap, "little") & full == full:
            continue
        raise UnreadableEventError(
            f"a rows event of the table has a {image} image without every column (binlog_row_image is not FULL, "
            "for the server or the session that wrote it): "
            f"{missing or 'the values of the absent columns are not in the binlog'}",
            remedy=f"SET GLOBAL binlog_row_image=FULL (and in my.cnf), make sure no session sets it otherwise, then "
            f"re-snapshot: binlake snapshot --table {table}",
            table=table,
        )
