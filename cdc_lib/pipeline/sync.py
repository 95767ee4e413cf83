"""Sync: read the binlog in micro-batches and MERGE each table's share into its Delta table.

Data flow of one batch: judge every table's offset against this server (carried over by GTID,
or stopped when purged) → read the binlog once from the smallest table offset → take the next
batch sequence (saved before any Delta commit carries it) → per table, in order: MERGE its
changes in one idempotent Delta commit (as its mode keeps them: mirror, soft delete, history),
move its offset to the batch end, take it past any ALTER it paused at → save every offset at
once (compare-and-swap). Spark starts only if some changed table takes the Spark writer
(`batch.writer`; mirror tables go to delta-rs where it writes them exactly).

The per-table steps compute the table's next `TableState` as a value; `run_batch` alone puts
states into the pipeline state and saves it.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pymysql

from cdc_lib.binlog.batch import BatchRead, SchemaChange, TableCursor, TableFailure
from cdc_lib.binlog.stream import read_batch
from cdc_lib.changes import metadata_columns, routing
from cdc_lib.changes.columns import column_shape, with_ignored
from cdc_lib.changes.events import HistoryChanges, TableChanges
from cdc_lib.changes.spill import SpilledChanges
from cdc_lib.common.failures import Retrying
from cdc_lib.common.faults import failpoint
from cdc_lib.common.logs import about_table
from cdc_lib.errors import BinlogPurgedError, ColumnRulesError, FencedCommitError, IcebergMetadataError, RoutingError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.pipeline.read_ahead import ReadAhead
from cdc_lib.pipeline.schema_changes import apply_schema_change
from cdc_lib.pipeline.table_failures import write_failure, write_with_retries
from cdc_lib.sink import choice, merge
from cdc_lib.sink.choice import Engine
from cdc_lib.sink.spark import modes as spark_modes
from cdc_lib.sink.spark.parallel_apply import apply_all, run_all
from cdc_lib.source import binlog_status, checks
from cdc_lib.source import server as mysql
from cdc_lib.source.history import Resume, mysql_gtid_purged, plan_resume
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.heartbeat import stall_bound
from cdc_lib.state.offset_store import StateHandle
from cdc_lib.state.offsets import PipelineState, TableState, utc_now
from cdc_lib.state.snapshot_documents import settle_snapshots, snapshot_begun
from cdc_lib.state.table_offsets import moves_forward, reached, reconcile_with_delta
from cdc_lib.status.catch_up import record_of_batch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("binlake")


@dataclass(frozen=True, kw_only=True)
class TableBatchResult:
    table: str
    inserted: int
    updated: int
    deleted: int
    rows_written: int
    delta_version: int | None
    position: str
    error: str | None = None
    #: `Retrying.describe()` when the write met a passing fault: nothing applied, retried by a later batch.
    retrying: str | None = None
    #: Wall time of the table's Delta commit (its MERGE or append, retries included); 0 when nothing was written.
    commit_seconds: float = 0.0


@dataclass(kw_only=True)
class SyncResult:
    """One micro-batch."""

    batch_seq: int | None
    start: str
    end: str
    events_read: int
    row_changes: int
    transactions: int
    seconds: float
    reached_end: bool
    spark_started: bool
    tables: list[TableBatchResult] = field(default_factory=list)
    skipped_tables: dict[str, str] = field(default_factory=dict)
    #: Tables left alone this batch because a snapshot of theirs is in flight (not an error; docs/snapshots.md).
    snapshots_in_flight: dict[str, str] = field(default_factory=dict)
    #: Tables whose write met a passing fault, this batch or earlier (`Retrying.describe()`): retried later.
    retrying_tables: dict[str, str] = field(default_factory=dict)
    end_position: BinlogPosition | None = None
    schema_changes: list[str] = field(default_factory=list)
    #: Wall time of the whole batch (`seconds` is its binlog read): read, Delta commits, offset write.
    wall_seconds: float = 0.0

    @property
    def rows_per_second(self) -> float:
        return self.row_changes / self.seconds if self.seconds else 0.0


def sync(context: PipelineContext, *, until_caught_up: bool = False) -> list[SyncResult]:
    """Run one micro-batch (or batches until the binlog end seen at start is reached), under the pipeline's lease."""
    handle = context.handle()
    results: list[SyncResult] = []
    with mysql.source_connection(context.config.source) as connection:
        checks.check_server_settings(connection, append_inserts=context.config.batch.append_inserts)
        # The heartbeat keeps the lease however long the batches take; each Delta commit first checks it.
        # ... while the work moves: a runner stuck on a wait lets the lease run out (docs/production.md).
        state = handle.acquire(heartbeat=True, stall_seconds=stall_bound(context.config.source.network_timeout_seconds))
        try:
            with handle.working():  # reads every table's Delta log: many S3 calls, each bounded by boto3's timeouts
                reconcile_with_delta(context, state, connection)
            target = binlog_status.current_position(connection)
            handle.progress()
            if until_caught_up:
                run_until_caught_up(context, handle, connection, target, on_batch=results.append)
            else:
                results.append(run_batch(context, handle, connection))
        finally:
            handle.release()
    return results


def run_until_caught_up(
    context: PipelineContext,
    handle: StateHandle,
    connection: pymysql.connections.Connection,
    target: BinlogPosition,
    *,
    on_batch: Callable[[SyncResult], None],
    open_ended: bool = False,
    min_interval: float = 0.0,
    should_stop: Callable[[], bool] | None = None,
) -> BinlogPosition | None:
    """Batches until `target` (the binlog end seen before them) is reached: `binlake sync --until-caught-up`, and
    each catch-up of follow mode. `handle` holds the lease; every batch's result goes to `on_batch`.

    A batch is caught up when it reached the binlog end, read no transaction, or ended at or past `target`; one
    that took a table to an ALTER is never the last (the table resumes in the next batch). The next batch is read
    while the current one is written (`ReadAhead`). Open-ended (follow mode), the read-ahead goes on past `target`
    too: a source that wrote during the batch has its next batch read already, so the batches go on back to back,
    each read overlapping the previous one's write, until a batch finds nothing new; `min_interval` is the cycle
    floor (`ReadAhead`). Every read starts after `target` was asked for, so the last one, which reached the binlog
    end, covers it.

    Returns:
        Where the binlog is known to hold nothing more to write (`target`, or past it when the source wrote
        meanwhile); None when `should_stop` ended the batches first (it is asked after each batch that is not
        the last).
    """
    read_ahead = ReadAhead(context.config, target, open_ended=open_ended, min_interval=min_interval,
                           progress=handle.progress)
    try:
        while True:
            result = run_batch(context, handle, connection, read_ahead)
            on_batch(result)
            caught_up = result.reached_end or result.transactions == 0 or (
                result.end_position is not None and result.end_position >= target
            )
            # Open-ended, the next batch's read is under way when this one carried transactions; if it found
            # nothing, the catch-up ends without running it (an idle follower writes nothing, not even its offsets).
            if caught_up and not result.schema_changes and (
                not open_ended or not read_ahead.reading or read_ahead.found_nothing()
            ):
                # Where the binlog is known to hold nothing more to write: past `target` when the source wrote
                # meanwhile. Returning `target` there would make a follower's next look at the end start a batch
                # that reads nothing and still saves its offsets, in what should be quiet time.
                return max((point for point in (target, result.end_position, read_ahead.dropped_end)
                            if point is not None and point.written_on(target.server)), key=_sort_key)
            if should_stop is not None and should_stop():
                return None
    finally:
        read_ahead.close()


def run_batch(
    context: PipelineContext,
    handle: StateHandle,
    connection: pymysql.connections.Connection,
    read_ahead: ReadAhead | None = None,
) -> SyncResult:
    """One micro-batch; `handle` holds the lease. The only place a batch changes the pipeline state.

    A table's new state goes into `handle.state` as soon as it is known, so that a run that fails
    later in the batch still releases (with the lease) what Delta committed; offsets are saved once,
    after every table's Delta commit.
    """
    state = handle.state
    started, clock = utc_now(), time.monotonic()
    logs = binlog_status.binary_logs(connection)
    # Asked per batch: an earlier batch of this sync may have read past the end seen when it started.
    server_end = binlog_status.current_position(connection)
    # Complete snapshots are installed first; a table whose snapshot is in flight waits (its Delta table is
    # being rewritten under another app id): one listing of the offset store when none is.
    with handle.working():  # lists the offset store, may install a snapshot: S3 calls bounded by boto3's timeouts
        in_flight = settle_snapshots(context, handle, connection)
    purged = mysql_gtid_purged(connection, [table.position for table in state.tables.values()], server_end)
    plans = _resume_plans(state, server_end, logs, purged)
    skipped: dict[str, str] = {}
    backing_off: dict[str, str] = {}
    cursors = []
    for name, table_state in sorted(state.tables.items()):
        if name in in_flight:
            continue
        if table_state.retrying is not None and not table_state.error and not table_state.retrying.due(started):
            # A passing fault's back-off: the table waits at its offset, the others go on (invariant 14).
            backing_off[name] = table_state.retrying.describe()
            continue
        if not table_state.error:
            table_state = _resumed(connection, name, table_state, plans[name], logs)
            state.tables[name] = table_state
        if table_state.error:
            skipped[name] = table_state.error
            continue
        schema = TableSchema.from_json(TableRef.parse(name), table_state.schema)
        try:
            # Not strict: a column the rules name may have been dropped by a DDL since the snapshot checked them.
            # Columns ignore_new_columns ignored are left out as excluded ones are (they live in the state).
            rules = with_ignored(context.config.sink.column_rules_for(name), table_state.ignored_columns)
            shape = column_shape(schema, rules, strict=False,
                                 row_filter=context.config.sink.row_filter_for(name))
        except ColumnRulesError as exc:
            # A rule that no longer fits (a hash key unset in this environment): the table stops at its offset, on
            # record, so that status and the Dagster checks show it (not only this run's log); the others go on.
            stop = ColumnRulesError(exc.cause, remedy=f"{exc.remedy}; then binlake resume --table {name}", table=name)
            log.error("%s", stop, extra=about_table(name))
            state.tables[name] = replace(table_state, error=str(stop))
            skipped[name] = str(stop)
            continue
        landing = context.config.sink.landing_rules_for(name)
        if table_state.landing is None or _recorded_before_key_checks(table_state.landing, landing):
            # A state of before the record (or of before hash key checks were recorded): it adopts today's.
            table_state = state.tables[name] = replace(table_state, landing=landing)
        elif table_state.landing != landing:
            recorded = table_state.landing
            changed = sorted(key for key in {**landing, **recorded} if landing.get(key) != recorded.get(key))
            rekeyed = _rekeyed_columns(recorded, landing)
            stop = ColumnRulesError(
                f"sink.tables.{name}: the hash key of column(s) {', '.join(rekeyed)} is not the key the table's "
                "snapshot hashed with (same variable, another value); hashes of the new key beside the old ones "
                "would silently break joins and counts on the column",
                remedy=f"restore the key the snapshot used, then binlake resume --table {name}; or re-snapshot the "
                f"table under the new key: binlake snapshot --table {name}",
                table=name,
            ) if rekeyed else ColumnRulesError(
                f"sink.tables.{name}: its {', '.join(changed)} changed since the table's snapshot; applying changes "
                "under other rules would leave rows and values landed under the old ones beside the new (a column "
                "in clear before its mask, rows a new filter leaves out)",
                remedy=f"re-snapshot the table under the new rules: binlake snapshot --table {name} (or put the "
                f"rules back as they were: {table_state.landing}, then binlake resume --table {name})",
                table=name,
            )
            log.error("%s", stop, extra=about_table(name))
            state.tables[name] = replace(table_state, error=str(stop))
            skipped[name] = str(stop)
            continue
        cursors.append(
            TableCursor(
                name=name,
                position=table_state.position,
                schema=schema,
                mode=context.config.sink.mode_for(name),
                metadata_columns=context.config.sink.metadata_columns_for(name),
                shape=shape,
            )
        )
    if not cursors:
        handle.save()
        return SyncResult(
            batch_seq=None, start="-", end="-", events_read=0, row_changes=0, transactions=0, seconds=0.0,
            reached_end=True, spark_started=False, tables=[], skipped_tables=skipped,
            snapshots_in_flight=in_flight, retrying_tables=backing_off,
        )
    read = _read(context, cursors, server_end, read_ahead, handle.progress)
    relevant = read.relevant_changes()
    seq: int | None = None
    # The batch's applied time (metadata columns): taken with its sequence, so every commit of the batch, and a
    # commit retried after a conflict, writes the same value; a batch that never committed is read again later
    # under a new sequence and time, as if it had first run then.
    applied_at = utc_now()
    if relevant:
        state.batch_seq += 1
        seq = state.batch_seq
        # On record before a Delta commit carries it, so no later batch reuses it.
        handle.save()
    now = utc_now().isoformat()
    with handle.working():  # Spark and delta-rs bound their own waits (JDBC, S3 timeouts); a big MERGE may run long
        outcomes, spark_used = _write_tables(
            context, cursors, state, read, relevant, seq=seq, server_end=server_end, now=now,
            check_lease=handle.check_lease, applied_at=applied_at,
        )
    table_results = []
    first_error: BaseException | None = None
    for cursor in cursors:
        written = outcomes[cursor.name]
        if isinstance(written, BaseException):
            first_error = first_error or written
            continue
        state.tables[cursor.name] = written.state
        if cursor.name in read.schema_changes:
            handle.check_lease()  # taking a table past an ALTER may commit to Delta
        with handle.working():  # a schema change may back-fill a column with Spark
            settled = _settle_table(context, connection, cursor, written, read.schema_changes.get(cursor.name))
        state.tables[cursor.name] = settled.state
        spark_used = spark_used or settled.spark_used
        table_results.append(settled.result)
        if settled.state.retrying is not None:
            backing_off[cursor.name] = settled.state.retrying.describe()
    if first_error is not None:
        # What the other tables committed is in `state`, released with the lease; this batch ends here.
        raise first_error
    state.record_batch(record_of_batch(  # what the batch cost, for the catch-up estimate; saved with the offsets
        connection, start=read.start, end=read.end, reached_end=read.reached_end, started_at=started,
        seconds=time.monotonic() - clock, server_end=server_end, logs=logs,
    ))
    failpoint("before_offset_write")
    handle.save()
    return SyncResult(
        batch_seq=seq,
        start=str(read.start),
        end=str(read.end),
        events_read=read.events_read,
        row_changes=read.row_changes,
        transactions=read.transactions,
        seconds=read.seconds,
        reached_end=read.reached_end,
        spark_started=spark_used,
        tables=table_results,
        skipped_tables=skipped,
        snapshots_in_flight=in_flight,
        retrying_tables=backing_off,
        end_position=read.end,
        schema_changes=sorted(read.schema_changes),
        wall_seconds=time.monotonic() - clock,
    )


def _resume_plans(
    state: PipelineState, server_end: BinlogPosition, logs: list[tuple[str, int]], purged: str | None
) -> dict[str, Resume]:
    # Every table is judged before any offset moves: a server without our history stops the whole sync.
    return {
        name: plan_resume(name, table_state.position, server_end, logs, purged=purged)
        for name, table_state in sorted(state.tables.items())
        if not table_state.error
    }


def _resumed(
    connection: pymysql.connections.Connection,
    name: str,
    table_state: TableState,
    plan: Resume,
    logs: list[tuple[str, int]],
) -> TableState:
    """The table at the start of the batch: its offset carried over to this server, or stopped when purged."""
    position = table_state.position
    if plan.translated is not None:
        log.warning("%s: offset %s carried over to %s (same GTID state)", name, position, plan.translated,
                    extra=about_table(name))
        position = plan.translated
    try:
        if plan.mode == "position" or plan.translated is not None:
            binlog_status.check_position_available(connection, position, table=name, logs=logs)
    except BinlogPurgedError as exc:
        log.error("%s: the table stops: %s", name, exc, extra=about_table(name))
        return replace(table_state, position=position, error=str(exc))
    return replace(table_state, position=position)


def _read(
    context: PipelineContext,
    cursors: list[TableCursor],
    server_end: BinlogPosition,
    read_ahead: ReadAhead | None,
    progress: Callable[[], None] | None = None,
) -> BatchRead:
    read = read_ahead.take(cursors) if read_ahead is not None else None
    began = read_ahead.began if read is not None and read_ahead is not None else None
    if read is None:
        began = time.monotonic()
        read = read_batch(context.config.source, cursors, context.config.batch, server=server_end.server,
                          progress=progress)
    more_known = (
        read_ahead is not None and not read.by_gtid and read.end < read_ahead.target and not read.reached_end
    )
    # Following a busy source (`open_ended`), the binlog grows while this batch is written: read on from here.
    busy = read_ahead is not None and read_ahead.open_ended and not read.by_gtid and read.transactions > 0
    if read_ahead is not None and (more_known or busy) and not (read.table_errors or read.schema_changes or read.held):
        # Decode the next batch while this one is MERGEd: Spark works in the JVM, the reader in Python. A read that
        # stopped short of the binlog end goes on at once; one that reached it, no earlier than the cycle floor.
        read_ahead.start(
            [
                TableCursor(
                    name=c.name, position=max(c.position, read.end, key=_sort_key), schema=c.schema, mode=c.mode,
                    metadata_columns=c.metadata_columns, shape=c.shape,
                )
                for c in cursors
            ],
            not_before=began + read_ahead.min_interval if read.reached_end and began is not None else None,
        )
    return read


@dataclass(frozen=True, kw_only=True)
class _Written:
    """A table after its share of the batch went into Delta (or failed to) and its offset moved to the batch end."""

    state: TableState
    #: What went into Delta; None when nothing did.
    changes: TableChanges | None
    failure: TableFailure | None
    commit_seconds: float = 0.0


def _write_tables(
    context: PipelineContext,
    cursors: list[TableCursor],
    state: PipelineState,
    read: BatchRead,
    relevant: dict[str, TableChanges],
    *,
    seq: int | None,
    server_end: BinlogPosition,
    now: str,
    check_lease: Callable[[], None],
    applied_at: dt.datetime,
) -> tuple[dict[str, _Written | BaseException], bool]:
    """Every table's share of the batch written to Delta: the changed tables `batch.apply_threads` at a time
    (each its own idempotent commit), the others only moving their offsets; and whether Spark wrote any.

    Each changed table's engine is chosen first (`choice.writer_for`, `batch.writer`): the SparkSession is
    built only when some table takes Spark, whose tables each get a Spark session of their own
    (`parallel_apply`); delta-rs tables run on plain threads (delta-rs releases the GIL while it merges).
    """
    changed = [cursor for cursor in cursors if seq is not None and relevant.get(cursor.name) is not None]
    routes = context.config.sink.route_for
    engines = {
        # A routed table is written by Spark only (docs/routing.md); the config refuses `delta-rs` for it.
        cursor.name: "spark" if routes(cursor.name) is not None else choice.writer_for(
            context.config.batch.writer, mode=cursor.mode, changes=relevant[cursor.name],
            path=context.table_path(cursor.name), storage=context.sink, table=cursor.name,
            spark_conf=context.config.spark.conf,
        ).engine
        for cursor in changed
    }

    def write(spark: SparkSession | None, cursor: TableCursor) -> _Written:
        return _write_table(
            context, spark, cursor, state.tables[cursor.name], read, relevant.get(cursor.name),
            seq=seq, server_end=server_end, now=now, check_lease=check_lease, engine=engines.get(cursor.name),
            applied_at=applied_at,
        )

    outcomes: dict[str, _Written | BaseException] = {}
    on_spark = [cursor for cursor in changed if engines[cursor.name] == "spark"]
    on_delta_rs = [cursor for cursor in changed if engines[cursor.name] == "delta-rs"]
    if on_spark:
        spark = context.spark()  # started here, not by the first of several threads
        threads = context.config.batch.threads_for(len(on_spark))
        if len({context.table_path(cursor.name) for cursor in on_spark}) < len(on_spark):
            # Two sources of one routed table: one writer at a time, so neither commit conflicts with the other.
            threads = 1
        for cursor, outcome in zip(on_spark, apply_all(spark, on_spark, write, threads=threads), strict=True):
            outcomes[cursor.name] = outcome
    if on_delta_rs:
        threads = context.config.batch.threads_for(len(on_delta_rs), delta_rs=True)
        for cursor, outcome in zip(on_delta_rs, run_all(on_delta_rs, write, threads=threads), strict=True):
            outcomes[cursor.name] = outcome
    for cursor in cursors:
        if cursor.name not in outcomes:
            outcomes[cursor.name] = write(None, cursor)
    return outcomes, bool(on_spark)


def _write_table(
    context: PipelineContext,
    spark: SparkSession | None,
    cursor: TableCursor,
    table_state: TableState,
    read: BatchRead,
    changes: TableChanges | None,
    *,
    seq: int | None,
    server_end: BinlogPosition,
    now: str,
    check_lease: Callable[[], None],
    engine: Engine | None = None,
    applied_at: dt.datetime | None = None,
) -> _Written:
    """`engine` is None for a table that has nothing to write (its offset only moves)."""
    name = cursor.name
    failure = read.table_errors.get(name)
    end = read.end_for(name)
    written = table_state
    commit_seconds = 0.0
    held = read.held.get(name)
    if held is not None and (isinstance(changes, HistoryChanges) or (
        isinstance(changes, SpilledChanges) and cursor.mode == "history"
    )):
        # The offset stays at the held PREPARE and the next batch reads what follows again: no version twice.
        changes.drop_after(held)
    writing = changes is not None and seq is not None and engine is not None
    if writing and snapshot_begun(context, name):
        # A snapshot of the table began after this batch listed the snapshots: its first wave may already have
        # replaced the table. Nothing is written and the offset stays; the snapshot's install replaces the state.
        log.warning("%s: a snapshot began during the batch; the table waits for it", name, extra=about_table(name))
        return _Written(state=table_state, changes=None, failure=None)
    if changes is not None and seq is not None and engine is not None:
        failpoint("before_delta_commit")
        # A runner that lost its lease stops here (LeaseLostError): the new holder reconciles from the Delta log.
        check_lease()
        metadata = {
            "pipeline": context.config.pipeline, "table": name, "batch_seq": seq,
            # The table's own offset: the read starts at the smallest of all tables' offsets, and a table
            # takes only the events past its own (a resumed table whose commit landed before a crash).
            "start": max(read.start, cursor.position, key=_sort_key).to_json(), "end": end.to_json(),
        }
        batch_changes: TableChanges = changes
        commit_started = time.monotonic()
        try:
            # A commit conflict with another writer is tried again on a fresh snapshot of the table.
            version = write_with_retries(
                lambda: _merge(context, spark, cursor, batch_changes, table_state, read, seq=seq, engine=engine,
                               metadata=metadata, applied_at=applied_at),
                name, check_lease=check_lease,
            )
        except FencedCommitError as exc:
            # A re-snapshot claimed the table after the check above (cdc_lib/sink/fencing.py): the Delta log refused
            # the commit. As when the check sees it: nothing written, the offset stays, the install replaces it.
            log.warning("%s: %s; the table waits for the snapshot", name, exc.cause, extra=about_table(name))
            return _Written(state=table_state, changes=None, failure=None)
        except Exception as exc:  # noqa: BLE001 - sorted by `write_failure`; the run's own re-raised
            # Nothing of this batch reached the table: it waits (a passing fault) or stops where it stood.
            outcome = write_failure(exc, name, previous=table_state.retrying)
            if isinstance(outcome, Retrying):
                return _Written(state=replace(table_state, retrying=outcome), changes=None, failure=None)
            failure = TableFailure(error=outcome, position=table_state.position)
            end = table_state.position
            changes = None
        else:
            failpoint("after_delta_commit")
            commit_seconds = time.monotonic() - commit_started
            written = replace(written, applied_seq=seq, delta_version=version, last_change_at=now, retrying=None,
                              rows_applied=_counted(written.rows_applied, batch_changes))
    if moves_forward(written.position, end, server_end):
        written = replace(written, position=end, retrying=None if failure is None else written.retrying)
    return _Written(state=written, changes=changes, failure=failure, commit_seconds=commit_seconds)


def _counted(rows_applied: dict[str, int], changes: TableChanges) -> dict[str, int]:
    """The table's rows applied per operation (`TableState.rows_applied`) with this batch's added."""
    added = {"insert": changes.inserted, "update": changes.updated, "delete": changes.deleted}
    return {operation: rows_applied.get(operation, 0) + count for operation, count in added.items()}


def _merge(
    context: PipelineContext,
    spark: SparkSession | None,
    cursor: TableCursor,
    changes: TableChanges,
    table_state: TableState,
    read: BatchRead,
    *,
    seq: int,
    engine: Engine,
    metadata: dict[str, Any],
    applied_at: dt.datetime | None = None,
) -> int:
    """Write the table's share of the batch in one idempotent Delta commit, as its mode keeps changes."""
    name = cursor.name
    schema = cursor.sink_schema
    if cursor.metadata_columns:
        # The fold's rows carry their source commit time; the batch's applied time follows (docs/readers.md).
        assert applied_at is not None, "a batch that writes takes its applied time"
        moment = metadata_columns.applied_time(applied_at)
        schema = metadata_columns.extended_schema(schema)
        changes = metadata_columns.with_applied(changes, moment)
        metadata = {**metadata, metadata_columns.APPLIED_AT: moment.isoformat()}
    routed = context.config.sink.route_for(name) is not None
    scope = None
    if routed:
        # Many sources share the target (docs/routing.md): this source's rows carry its names, which close the key.
        if isinstance(changes, SpilledChanges):
            raise RoutingError(
                f"a batch of {name} spilled (more than batch.max_buffered_changes changes); a routed table's spilled "
                "batch is not written yet", remedy=f"raise batch.max_buffered_changes, then binlake resume --table "
                f"{name}", table=name,
            )
        schema = routing.routed_schema(schema)
        changes = routing.with_source(changes, TableRef.parse(name))
        scope = routing.scope(TableRef.parse(name), alias="t")
    if cursor.mode == "mirror":
        # Past the snapshot's high watermark the table is the source at its offset (given the Delta log shows
        # nothing applied past it, which merge_changes checks): inserted keys can be appended.
        consistent = table_state.consistent or reached(table_state.position, table_state.snapshot_high)
        # Not on a routed table: its key statistics mix the shards, so they prove no key absent.
        append = consistent and context.config.batch.append_inserts and not routed
        append_from = table_state.position if append else None
        return merge.merge_changes(
            spark, context.table_path(name), schema, changes,
            application=context.application(name), txn_version=seq, metadata=metadata, storage=context.sink,
            applied_through=read.end, append_from=append_from, writer=engine, scope=scope,
        )
    assert spark is not None, "soft-delete and history tables are written by Spark"
    return spark_modes.merge_mode_changes(
        spark, context.table_path(name), cursor.sink_schema, changes, mode=cursor.mode,
        application=context.application(name), txn_version=seq, metadata=metadata, storage=context.sink,
    )


@dataclass(frozen=True, kw_only=True)
class _Settled:
    """A table at the end of the batch."""

    state: TableState
    result: TableBatchResult
    spark_used: bool


def _settle_table(
    context: PipelineContext,
    connection: pymysql.connections.Connection,
    cursor: TableCursor,
    written: _Written,
    schema_change: SchemaChange | None,
) -> _Settled:
    """Take the table past the ALTER it paused at (if any), then mark it consistent or stopped."""
    table_state, failure, spark_used = written.state, written.failure, False
    if schema_change is not None and failure is None and table_state.retrying is None:
        outcome = apply_schema_change(context, connection, cursor, table_state, schema_change)
        table_state, failure, spark_used = outcome.state, outcome.failure, outcome.spark_used
    table_state = replace(
        table_state, consistent=table_state.consistent or reached(table_state.position, table_state.snapshot_high)
    )
    if failure is None and context.config.sink.iceberg_for(cursor.name):
        failure = _keep_iceberg_current(context, cursor.name, table_state.position)
    if failure:
        table_state = replace(table_state, error=str(failure.error))
    changes = written.changes
    result = TableBatchResult(
        table=cursor.name,
        inserted=changes.inserted if changes else 0,
        updated=changes.updated if changes else 0,
        deleted=changes.deleted if changes else 0,
        rows_written=changes.written_rows() if changes else 0,
        delta_version=table_state.delta_version,
        position=str(table_state.position),
        error=str(failure.error) if failure else None,
        retrying=table_state.retrying.describe() if table_state.retrying is not None and not failure else None,
        commit_seconds=round(written.commit_seconds, 6),
    )
    return _Settled(state=table_state, result=result, spark_used=spark_used)


def _keep_iceberg_current(context: PipelineContext, name: str, position: BinlogPosition) -> TableFailure | None:
    """Write the table's Iceberg snapshot of its newest Delta version (docs/iceberg.md), whichever engine committed
    it and whether or not this batch did: a run that died between its Delta commit and this write is healed here.
    A passing I/O fault waits for the next batch; a version Iceberg cannot describe exactly, or any other failure,
    stops this table only (invariant 12) rather than failing every table's batch after their Delta commits."""
    from cdc_lib.sink.iceberg import convert

    try:
        convert.refresh(context.table_path(name), table=name, storage=context.sink)
    except OSError as exc:
        log.warning("%s: Iceberg metadata not written (%s); the next batch writes it", name, exc,
                    extra=about_table(name))
    except IcebergMetadataError as exc:
        log.error("%s", exc, extra=about_table(name))
        return TableFailure(error=exc, position=position)
    except Exception as exc:  # noqa: BLE001 - pyiceberg's own errors: the table stops, on record, with a remedy
        stop = IcebergMetadataError(f"writing the Iceberg metadata failed: {exc!r}",
                                    remedy=f"see docs/iceberg.md; then binlake resume --table {name}", table=name)
        log.error("%s", stop, extra=about_table(name))
        return TableFailure(error=stop, position=position)
    return None


def _sort_key(position: BinlogPosition) -> tuple[int, str, int]:
    return position.sort_key


__all__ = ["SyncResult", "TableBatchResult", "run_batch", "run_until_caught_up", "sync"]



def _without_key_checks(record: dict[str, Any]) -> dict[str, Any]:
    masks = record.get("mask") or {}
    return {**record, "mask": {column: {key: value for key, value in mask.items() if key != "key_check"}
                               for column, mask in masks.items()}}


def _recorded_before_key_checks(recorded: dict[str, Any], landing: dict[str, Any]) -> bool:
    """`recorded` was written before hash masks recorded their key's check value, and is `landing` but for it."""
    if any("key_check" in mask for mask in (recorded.get("mask") or {}).values()):
        return False
    return _without_key_checks(landing) == recorded != landing


def _rekeyed_columns(recorded: dict[str, Any], landing: dict[str, Any]) -> list[str]:
    """The hash-masked columns whose key changed, when that is the only difference between the two records."""
    if _without_key_checks(recorded) != _without_key_checks(landing):
        return []
    before, after = recorded.get("mask") or {}, landing.get("mask") or {}
    return sorted(column for column, mask in after.items()
                  if before.get(column, {}).get("key_check") != mask.get("key_check"))
