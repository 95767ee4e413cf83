"""The step between a soft-delete or history table's last snapshot wave and its completion (docs/snapshots.md).

A chunked snapshot reads each chunk at its own moment tᵢ after the first low watermark L. A mirror or a
soft-delete table needs no more: replaying full row images by key from L makes it exact. A history table does:
its first version of a key must be the row AS OF L, or two changes between L and tᵢ would be replayed on top of
the later row (A→B→C read as C gives C, B, C). The binlog between L and the last high watermark H holds what is
needed: the before-image of each key's first row event there is its row at L (an INSERT, or the new key of a
key-changing UPDATE: the key did not exist at L).

Data flow: the binlog [L, H] of this one table, read with the sync's own stream, decoder and row fold
(`cdc_lib.binlog.stream`, `cdc_lib.binlog.table_rows`: values decode exactly as the sync decodes them) → refuse a
TRUNCATE or DDL of the table in that stretch (`SnapshotWindowError`: no replay can make such a snapshot exact) → history
only: every row image of the stretch, in binlog order, staged to Parquet in parts (`BeforeImages`; memory stays bounded
by a part, as `cdc_lib.changes.spill` bounds a huge transaction) → Spark keeps each key's first → one idempotent Delta
MERGE, SetTransaction = the snapshot's app id + the version after the waves' (on record in the snapshot document before
the commit), that puts each such key back to its row at L, or removes it when it had none.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pymysql
from pymysqlreplication.event import QueryEvent

from cdc_lib.binlog.ddl import table_effects
from cdc_lib.binlog.event_types import (
    COMPRESSED_ROWS,
    QUERY_COMPRESSED_EVENT,
    compressed_table_id,
    handling_of,
    query_text,
    raw_event,
    uncompressed_query,
    uncompressed_rows_packet,
)
from cdc_lib.binlog.payload import PayloadError, PayloadTooLargeError
from cdc_lib.binlog.replication_library import rebuilt_rows_event, stream_setting
from cdc_lib.binlog.stream import PayloadsOpened, open_stream
from cdc_lib.binlog.table_rows import TableDecoder, fold_rows
from cdc_lib.changes.columns import column_shape
from cdc_lib.changes.events import Row, TableChanges
from cdc_lib.changes.modes import IS_CURRENT, SEQUENCE, VALID_FROM, VALID_TO, sequence_of, timestamp_micros
from cdc_lib.common.faults import failpoint
from cdc_lib.config.model import SourceConfig
from cdc_lib.errors import BinlakeError, UnreadableEventError
from cdc_lib.model.collated import TextAnswers
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import copied_from, matched_on, quote_identifier
from cdc_lib.sink import delta_log
from cdc_lib.sink.commits import OPERATION_COLUMN
from cdc_lib.sink.spark.commit import IdempotentCommit
from cdc_lib.sink.spark.staging import StagedChanges
from cdc_lib.source.mysql_errors import ReadingBinlog, mysql_error
from cdc_lib.source.text_compare import ServerComparisons, answer_cache
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.offsets import utc_now
from cdc_lib.state.snapshot_documents import Correction, DocumentHandle, SnapshotDocument, snapshot_application

if TYPE_CHECKING:
    from pyspark.sql import Column

log = logging.getLogger("binlake")

#: Row images held in memory before they are written out as one staged Parquet part.
_PART_ROWS = 50_000
#: The staged images' order in the binlog: a key's first image is its row at the first low watermark.
_ORDINAL = "_binlake_ordinal"
#: Op of a staged image: `r` the key's row before this change, `a` the key had no row before it.
_ROW, _ABSENT = "r", "a"


class SnapshotWindowError(BinlakeError):
    """The table was truncated or altered between its snapshot's watermarks: the chunks read after that cannot be
    made into the table as of the first low watermark, so the snapshot is not installed."""


@dataclass
class BeforeImages(TableChanges):
    """Each row event's image of the row BEFORE the change, per key, in binlog order: `r` rows (an UPDATE's
    before-image, a DELETE's row), `a` rows (an INSERT, the arriving key of a key-changing UPDATE: no row before).

    A row fold like the sync's (`cdc_lib.binlog.table_rows.fold_rows` feeds it). The images go to `staged` (Parquet
    parts of `_PART_ROWS`), never all in memory; without `staged` nothing is kept (a soft-delete table only needs the
    scan's checks).
    """

    staged: StagedChanges | None = None
    images: int = 0
    buffer: list[tuple[Any, ...]] = field(default_factory=list)

    def insert(self, row: Row) -> None:
        self._add(row, _ABSENT)  # a storage engine inserts only where no row is

    def update(self, before: Row, after: Row) -> None:
        self._add(before, _ROW)
        if self._key(after) != self._key(before):
            self._add(after, _ABSENT)  # moved onto a key that was free until then

    def delete(self, row: Row) -> None:
        self._add(row, _ROW)

    def _add(self, row: Row, operation: str) -> None:
        if self.staged is None:
            return
        self.buffer.append((*row, self.images, operation))
        self.images += 1
        if len(self.buffer) >= _PART_ROWS:
            self.flush()

    def flush(self) -> None:
        if self.staged is not None and self.buffer:
            self.staged.add(self.buffer)
            self.buffer = []


@dataclass(frozen=True)
class WindowScan:
    """What the binlog between a snapshot's watermarks holds for its table."""

    #: Row images staged (0 without `staged`).
    images: int
    events: int
    seconds: float


def scan_window(
    source: SourceConfig, schema: TableSchema, low: BinlogPosition, high: BinlogPosition, *,
    max_payload_event_bytes: int, staged: StagedChanges | None = None, row_filter: str | None = None,
) -> WindowScan:
    """Read the binlog from `low` to `high` for one table; stage its row images (`BeforeImages`) into `staged`.

    `row_filter` (docs/row-filters.md): images are judged as the sync judges them, so a key's first image is its
    row at the low watermark within the filter: a row that entered the filter after it is `a` (none there), one
    that left it is its before image.

    Raises:
        SnapshotWindowError: a TRUNCATE, a DDL or an event binlake cannot apply touched the table in the stretch.
    """
    name = schema.table.name
    shape = None if row_filter is None else column_shape(schema, None, row_filter=row_filter)
    # A filter comparing text asks the server, as the sync's read does (cdc_lib.source.text_compare).
    asking = shape is not None and shape.row_filter is not None and shape.row_filter.asks_server
    comparisons = ServerComparisons(source) if asking else None
    answers = None if comparisons is None else TextAnswers(comparisons, answer_cache(source))
    decoder = TableDecoder.for_schema(schema, zero_dates=source.zero_dates, shape=shape, answers=answers)
    images = BeforeImages(decoder.key_positions, staged=staged)
    started = time.monotonic()
    events = 0
    # Every event type (the closed world): a compressed statement or an unknown event is classified, not skipped.
    stream = open_stream(source, low, events=None, tables=[schema.table], server=low.server)
    window = _Window(low.file)
    # A MySQL compressed transaction is opened and its events scanned like any other: its rows may be the table's.
    opened = PayloadsOpened(stream, max_payload_event_bytes, current_file=lambda: window.current_file)
    try:
        for event, position in window.events_up_to(opened, high):
            events += 1
            _scan_event(stream, event, position, name, decoder, images)
    except pymysql.MySQLError as exc:
        raise mysql_error(exc, source, ReadingBinlog(low)) from None
    except (PayloadError, PayloadTooLargeError, UnreadableEventError) as exc:
        # What the sync would stop the table for stops the snapshot the same way, on record (`_scan`).
        _refuse(name, f"an event binlake cannot read ({exc}) after {low}")
    finally:
        stream.close()
        if comparisons is not None:
            comparisons.close()
    images.flush()
    return WindowScan(images=images.images, events=events, seconds=time.monotonic() - started)


@dataclass
class _Window:
    """The binlog file a window scan is in (rotations move it), for positions and messages."""

    current_file: str

    def events_up_to(self, events: Iterable[Any], high: BinlogPosition) -> Iterator[tuple[Any, BinlogPosition]]:
        """The events that end at or before `high`, each with the position after it."""
        for event in events:
            if handling_of(event.event_type, event.packet.flags).handling == "rotate":
                self.current_file = event.next_binlog
                continue
            end = BinlogPosition(self.current_file, int(event.packet.log_pos))
            if end > high:
                return  # a transaction boundary: everything up to `high` has been read
            yield event, end


def _scan_event(
    stream: Any, event: Any, position: BinlogPosition, name: str, decoder: TableDecoder, images: BeforeImages
) -> None:
    code = event.event_type
    kind = handling_of(code, event.packet.flags)
    if kind.handling == "rows":
        if code in COMPRESSED_ROWS:
            raw = raw_event(event, checksum=stream_setting(stream, "use_checksum"))
            table = stream.table_map.get(compressed_table_id(raw))
            if table is None or f"{table.schema}.{table.table}" != name:
                return
            event = rebuilt_rows_event(stream, uncompressed_rows_packet(raw))
            if event is None:
                return
        if f"{event.schema}.{event.table}" == name:
            fold_rows(event, decoder, images)
        return
    if kind.handling == "query":
        if code == QUERY_COMPRESSED_EVENT:
            decoded = uncompressed_query(raw_event(event, checksum=stream_setting(stream, "use_checksum")))
            statement, schema = decoded.statement, decoded.schema
        elif isinstance(event, QueryEvent):
            statement, schema = query_text(event.query), query_text(event.schema)
        else:
            statement, schema = query_text(getattr(event, "query", "")), query_text(getattr(event, "schema", ""))
        for effect in table_effects(statement, schema, (name,)):
            if effect.table == name and effect.kind != "none":
                _refuse(name, f"{'a TRUNCATE' if effect.kind == 'truncate' else 'a DDL'} of the table "
                        f"({statement[:120]}) at {position}")
        return
    if kind.handling == "stop_table":
        table_id = getattr(event, "table_id", None)
        table = stream.table_map.get(table_id) if table_id is not None else None
        if table is None or f"{table.schema}.{table.table}" == name:
            _refuse(name, f"a {kind.name} event ({kind.why}) at {position}")
    elif kind.handling == "stop_all":
        _refuse(name, f"a {kind.name} event ({kind.why}) at {position}")


def _refuse(name: str, what: str) -> None:
    raise SnapshotWindowError(
        f"{what} lies between the snapshot's watermarks: the chunks read after it cannot be made into the table as "
        "of the snapshot's start (rows it removed are in no chunk and in no row event); the snapshot is not "
        "installed",
        remedy=f"start the snapshot over: binlake snapshot --table {name} --restart",
        table=name,
    )


# -- the step ------------------------------------------------------------------------------------------


def finish_mode_snapshot(
    context: PipelineContext, handle: DocumentHandle, document: SnapshotDocument, *,
    before_commit: Callable[[], None] | None = None,
) -> None:
    """Scan the binlog between the watermarks (and correct a history table), then mark the snapshot complete.

    Run after the last wave, under the table lease held by `handle`. Idempotent across crashes: the correction
    commit's version is on record before it is made, and a run that finds it in the Delta log only records it.
    `before_commit` is called right before the Delta commit (the lease check).

    Raises:
        SnapshotWindowError: a TRUNCATE or DDL of the table between the watermarks (recorded as `refused`).
    """
    name = document.table
    ref = TableRef.parse(name)
    schema = TableSchema.from_json(ref, document.schema)
    history = document.mode == "history"
    if document.correction is None:
        document.correction = Correction(txn_version=len(document.waves) + 1)
        handle.save()
    correction = document.correction
    application = snapshot_application(context, name, document.snapshot_id)
    path = context.table_path(name)
    committed = _committed_correction(context, path, application, correction.txn_version)
    if committed is not None:
        # A run died after the commit and before the document recorded it: the commit is not made twice.
        log.warning("snapshot of %s: correction commit found in the Delta log (version %d)", name,
                    committed.delta_version)
        correction.delta_version, correction.keys = committed.delta_version, int(committed.metadata.get("keys", 0))
    elif not correction.done:
        if history:
            spark = context.spark()
            with StagedChanges(spark, schema, ((_ORDINAL, "bigint"),)) as staged:
                scan = _scan(context, handle, schema, document, staged)
                if scan.images:
                    if before_commit is not None:
                        before_commit()
                    correction.delta_version, correction.keys = _correct_history(
                        context, schema, document, staged, application
                    )
                    failpoint("after_snapshot_correction_commit")
        else:
            _scan(context, handle, schema, document, None)
    if correction.delta_version is not None:
        metrics = delta_log.commit_metrics(path, correction.delta_version, storage=context.sink)
        correction.rows_change = metrics.get("numTargetRowsInserted", 0) - metrics.get("numTargetRowsDeleted", 0)
    correction.done = True
    document.refused = None
    document.status = "complete"
    document.finished_at = utc_now().isoformat()
    handle.save()


def _scan(
    context: PipelineContext, handle: DocumentHandle, schema: TableSchema, document: SnapshotDocument,
    staged: StagedChanges | None,
) -> WindowScan:
    """The scan of [first low, last high]; a refusal is put on record (the sync reports it) before it is raised."""
    try:
        scan = scan_window(context.config.source, schema, document.low, document.high, staged=staged,
                           max_payload_event_bytes=context.config.batch.max_payload_event_bytes,
                           row_filter=context.config.sink.row_filter_for(schema.table.name))
    except SnapshotWindowError as exc:
        document.refused = exc.cause
        handle.save()
        raise
    log.info("snapshot of %s: %d binlog events between %s and %s read in %.1fs, %d row images", document.table,
             scan.events, document.low, document.high, scan.seconds, scan.images)
    return scan


def _committed_correction(
    context: PipelineContext, path: str, application: str, txn_version: int
) -> delta_log.BinlakeCommit | None:
    tail = delta_log.read_log_tail(path, application=application, storage=context.sink)
    commit = tail.last_binlake_commit if tail is not None else None
    if commit is None or commit.txn_version < txn_version or commit.metadata.get("step") != "correction":
        return None
    return commit


def _correct_history(
    context: PipelineContext, schema: TableSchema, document: SnapshotDocument, staged: StagedChanges,
    application: str,
) -> tuple[int, int]:
    """One MERGE: each changed key's wave row is replaced by its row at the first low watermark, or removed when
    the key had no row then; a key the waves did not read gets that row inserted. Every row of a chunked snapshot
    is its key's only version, so the key alone matches. Returns the commit's Delta version and the keys."""
    from delta.tables import DeltaTable
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    spark = context.spark()
    path = context.table_path(document.table)
    assert document.correction is not None and document.snapshot_time is not None
    moment = timestamp_micros(dt.datetime.fromisoformat(document.snapshot_time))
    operation = OPERATION_COLUMN
    keys = [F.col(quote_identifier(key)) for key in schema.primary_key]
    first_image = Window.partitionBy(*keys).orderBy(F.col(_ORDINAL))
    first = (
        staged.frame().withColumn("_binlake_rank", F.row_number().over(first_image))
        .where(F.col("_binlake_rank") == 1).drop("_binlake_rank", _ORDINAL)
    )
    key_count = first.count()
    key_condition = matched_on(schema.primary_key)
    data: dict[str, str | Column] = {**copied_from("s", schema.column_names)}
    opened: dict[str, str | Column] = {
        **data, f"`{VALID_FROM}`": f"timestamp_micros({moment})", f"`{VALID_TO}`": "CAST(NULL AS TIMESTAMP)",
        f"`{IS_CURRENT}`": "true", f"`{SEQUENCE}`": f"CAST({sequence_of(0, 0)} AS BIGINT)",
    }
    metadata = {
        "pipeline": context.config.pipeline, "table": document.table, "snapshot_id": document.snapshot_id,
        "step": "correction", "keys": key_count, "snapshot_low": document.low.to_json(),
        "snapshot_high": document.high.to_json(), "mode": document.mode, "consistent": False,
    }
    builder = (
        DeltaTable.forPath(spark, path).alias("t").merge(first.alias("s"), key_condition)
        .whenMatchedDelete(condition=f"s.{quote_identifier(operation)} = '{_ABSENT}'")
        .whenMatchedUpdate(set=data)
        .whenNotMatchedInsert(condition=f"s.{quote_identifier(operation)} = '{_ROW}'", values=opened)
    )
    with IdempotentCommit(spark, application, document.correction.txn_version, metadata):
        builder.execute()
    return delta_log.version_of(path, application, document.correction.txn_version, context.sink), key_count


__all__ = ["BeforeImages", "SnapshotWindowError", "WindowScan", "finish_mode_snapshot", "scan_window"]
