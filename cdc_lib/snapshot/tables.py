"""Snapshotting tables into Delta and recording each one's watermarks as its offset.

A mirror table, and the first snapshot of a soft-delete or history table (no Delta table yet, one written in
another mode, or an unfinished chunked snapshot of it), is snapshotted in chunks under its own table lease
(`cdc_lib.snapshot.chunked`), while the sync goes on with the other tables; its result is installed into the
pipeline state by whoever holds the pipeline lease (this run, when it can take it at once; else the next sync
batch). docs/snapshots.md.

A re-snapshot of a soft-delete or history table already in that mode (a repair that keeps its tombstones or
history) is taken in one shot under the pipeline lease (`snapshot_table`): low
watermark (adjusted back before any prepared XA branch) → parallel JDBC read (`cdc_lib.snapshot.jdbc_read`) → one
Delta commit carrying the batch sequence as its SetTransaction version (its rows' history is ordered by
that sequence) → high watermark → the table's offset starts at the low watermark and the table counts as
consistent once its offset passes the high one.
"""

from __future__ import annotations

import logging
import time

import pymysql

from cdc_lib.binlog.probes import before_prepared_xa
from cdc_lib.changes.columns import column_shape
from cdc_lib.changes.modes import live_rows
from cdc_lib.common.faults import failpoint
from cdc_lib.common.logs import about_table
from cdc_lib.errors import ConcurrentRunError, TableError
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.sink import delta_log
from cdc_lib.sink.catalog import register_after_snapshot
from cdc_lib.sink.spark import modes as spark_modes
from cdc_lib.sink.spark import writer as spark_writer
from cdc_lib.snapshot.chunked import ChunkedOutcome, run_chunked_snapshot, server_time
from cdc_lib.snapshot.jdbc_read import SnapshotResult, partition_predicates, read_refusal_in, read_table
from cdc_lib.snapshot.progress import ProgressListener, SnapshotProgress
from cdc_lib.snapshot.watermarks import consistent_low_watermark
from cdc_lib.source import binlog_status, checks
from cdc_lib.source import server as mysql
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.offset_store import StateHandle
from cdc_lib.state.offsets import TableState, utc_now
from cdc_lib.state.snapshot_documents import SnapshotDocument, read_document, settle_snapshots
from cdc_lib.state.table_offsets import reconcile_with_delta

log = logging.getLogger("binlake")


def snapshot_tables(
    context: PipelineContext,
    tables: list[str] | None = None,
    *,
    progress: ProgressListener | None = None,
    restart: bool = False,
) -> list[SnapshotResult]:
    """Snapshot the chosen tables (all configured ones by default) into Delta.

    An unfinished snapshot of a table is resumed at its first unfinished chunk (a complete one not yet
    installed is installed), unless `restart` starts it over.

    Args:
        progress: called after each table's plan and after each wave (`cdc_lib.snapshot.progress`).
        restart: drop an unfinished snapshot of the table and start a new one.
    """
    results = []
    with mysql.source_connection(context.config.source) as connection:
        checks.check_server_settings(connection)
        chosen = choose_tables(context.configured_tables(connection), tables)
        schemas = [mysql.describe_table(connection, ref) for ref in chosen]  # refuses a table without a key
        context.sink.check_writable(context.config.sink.path)
        chunked = [schema for schema in schemas if _chunked(context, schema.table.name)]
        for schema in chunked:
            outcome = run_chunked_snapshot(context, connection, schema.table, progress=progress, restart=restart)
            results.append(_finish(context, connection, outcome))
        moded = [schema for schema in schemas if schema not in chunked]
        if moded:
            handle = context.handle()
            state = handle.acquire(heartbeat=True)
            try:
                reconcile_with_delta(context, state, connection)
                handle.save()
                for schema in moded:
                    results.append(snapshot_table(context, handle, connection, schema, progress=progress))
            finally:
                handle.release()
    for result in results:
        if context.config.sink.iceberg_for(result.table):
            # The snapshot's Delta version as an Iceberg snapshot (docs/iceberg.md); the syncs keep it current.
            from cdc_lib.sink.iceberg import convert

            convert.refresh(context.table_path(result.table), table=result.table, storage=context.sink)
    order = [schema.table.name for schema in schemas]
    return sorted(results, key=lambda result: order.index(result.table))


def _chunked(context: PipelineContext, name: str) -> bool:
    """Whether the table is snapshotted in chunks: always a mirror; a soft-delete or history table unless it is
    already in Delta in that mode with no chunked snapshot of it unfinished (then a one-shot repair MERGE keeps
    its tombstones or history: `spark_modes.write_mode_snapshot`)."""
    mode = context.config.sink.mode_for(name)
    if mode == "mirror":
        return True
    document, _ = read_document(context.store, context.config.pipeline, name)
    if document is not None and document.status != "abandoned":
        return True  # resume (or --restart) the first snapshot in flight
    existing = spark_modes.existing_mode(context.spark(), context.table_path(name),
                                         application=context.application(name), storage=context.sink)
    return existing != mode


def _finish(
    context: PipelineContext, connection: pymysql.connections.Connection, outcome: ChunkedOutcome
) -> SnapshotResult:
    """Register a complete chunked snapshot and install it now if the pipeline lease is free at once."""
    document = outcome.document
    name = document.table
    installed = try_install(context, connection, document)
    registration, catalog_error = register_after_snapshot(context, name)
    log.info("snapshot %s: %d rows in %.1fs (%d chunks, %d resumed)%s", name, document.rows_done, outcome.seconds,
             len(document.plan), outcome.chunks_resumed, "" if installed else "; installed by the next sync",
             extra=about_table(name))
    return SnapshotResult(
        table=name, rows=document.rows_in_table, seconds=outcome.seconds, partitions=len(document.plan),
        delta_version=document.waves[-1].delta_version if document.delta_version is None else document.delta_version,
        low_watermark=str(document.low),
        high_watermark=str(document.high), registered_as=registration.name if registration else None,
        catalog_error=catalog_error, chunks=len(document.plan), chunks_resumed=outcome.chunks_resumed,
        chunks_read=document.chunks_read, installed=installed,
    )


def try_install(
    context: PipelineContext, connection: pymysql.connections.Connection, document: SnapshotDocument
) -> bool:
    """Install a complete snapshot into the pipeline state when the pipeline lease can be taken at once; else the
    next sync batch does (a follow loop may hold the lease for an hour: never wait for it)."""
    handle = context.handle()
    try:
        state = handle.acquire()
    except ConcurrentRunError:
        log.info("snapshot of %s is complete; the running sync installs it at its next batch", document.table)
        return False
    try:
        reconcile_with_delta(context, state, connection)
        settle_snapshots(context, handle, connection)
    finally:
        handle.release()
    return True


def choose_tables(configured: list[TableRef], tables: list[str] | None) -> list[TableRef]:
    """The configured tables named in `tables`, in that order (all of them when `tables` is empty)."""
    if not tables:
        return configured
    names = {ref.name: ref for ref in configured}
    unknown = [name for name in tables if name not in names]
    if unknown:
        raise TableError(
            f"table {unknown[0]} is not among the configured tables ({', '.join(sorted(names)) or 'none'})",
            remedy="add it to source.tables, or fix the name",
            table=unknown[0],
        )
    return [names[name] for name in tables]


def snapshot_table(
    context: PipelineContext,
    handle: StateHandle,
    connection: pymysql.connections.Connection,
    schema: TableSchema,
    *,
    progress: ProgressListener | None = None,
) -> SnapshotResult:
    """Write one table's snapshot commit and record its watermarks; the lease is held by `handle`.

    `progress` hears the table's start and end (one chunk: this path reads the table in one wave).
    """
    name = schema.table.name
    path = context.table_path(name)
    started = time.monotonic()
    if progress is not None:
        progress(SnapshotProgress(table=name, chunks_done=0, chunks_total=1, rows_done=0, rows_estimated=0,
                                  elapsed_seconds=0.0))
    spark = context.spark()
    # The low watermark and the schema the table is read with, pinned to each other (cdc_lib/snapshot/watermarks.py).
    low, schema = consistent_low_watermark(connection, schema.table)
    low = before_prepared_xa(context.config.source, connection, low, schema.table)
    mode = context.config.sink.mode_for(name)
    # A soft-delete or history table stamps the snapshot with the server's clock, the binlog's clock.
    snapshot_time = server_time(connection) if mode != "mirror" else None
    predicates, _ = partition_predicates(
        connection, schema, context.config.snapshot, default_parallelism=spark.sparkContext.defaultParallelism
    )
    handle.state.batch_seq += 1
    seq = handle.state.batch_seq
    # The sequence is on record before a Delta commit carries it, so no later batch reuses it.
    handle.save()
    # The row filter only (this path takes no column rules): its WHERE, checked against the schema read here.
    row_filter = context.config.sink.row_filter_for(name)
    frame = read_table(spark, context.config.source, schema, predicates,
                       shape=None if row_filter is None else column_shape(schema, None, row_filter=row_filter))
    handle.check_lease()  # a runner that lost the lease writes no snapshot commit
    metadata = {
        "pipeline": context.config.pipeline,
        "table": name,
        "batch_seq": seq,
        "snapshot_low": low.to_json(),
        "end": low.to_json(),
        "schema": schema.to_json(),
    }
    try:
        if snapshot_time is None:
            version = spark_writer.write_snapshot(
                spark, frame, path, application=context.application(name), txn_version=seq,
                metadata=metadata, storage=context.sink,
                deletion_vectors=context.config.sink.deletion_vectors_for(name),
                change_data_feed=context.config.sink.change_data_feed_for(name),
                layout=context.config.sink.layout_for(name),
            )
        else:
            version = spark_modes.write_mode_snapshot(
                spark, frame, path, schema, mode=mode, snapshot_time=snapshot_time,
                application=context.application(name), txn_version=seq, metadata=metadata, storage=context.sink,
                deletion_vectors=context.config.sink.deletion_vectors_for(name),
            )
    except Exception as exc:
        refusal = read_refusal_in(exc, name)
        if refusal is None:
            raise
        raise refusal from None
    high = binlog_status.current_position(connection)
    failpoint("after_snapshot_commit")
    rows = (
        delta_log.written_rows(path, version, storage=context.sink) if snapshot_time is None
        else live_rows(spark.read.format("delta").load(path)).count()
    )
    previous = handle.state.tables.get(name)
    handle.state.tables[name] = TableState(
        position=low,
        snapshot_low=low,
        snapshot_high=high,
        snapshot_at=utc_now().isoformat(),
        schema=schema.to_json(),
        applied_seq=seq,
        delta_version=version,
        consistent=high <= low,
        rows_snapshotted=rows,
        ddl_log=previous.ddl_log if previous else [],
        landing=context.config.sink.landing_rules_for(name),
    )
    handle.save()
    seconds = time.monotonic() - started
    if progress is not None:
        progress(SnapshotProgress(table=name, chunks_done=1, chunks_total=1, rows_done=rows, rows_estimated=0,
                                  elapsed_seconds=seconds))
    log.info("snapshot %s: %d rows in %.1fs (%d partitions)", name, rows, seconds, len(predicates),
             extra=about_table(name))
    # After the commit and the offsets are saved: a catalog that fails now costs a `binlake register`, no data.
    registration, catalog_error = register_after_snapshot(context, name)
    return SnapshotResult(
        table=name, rows=rows, seconds=seconds, partitions=len(predicates), delta_version=version,
        low_watermark=str(low), high_watermark=str(high),
        registered_as=registration.name if registration else None, catalog_error=catalog_error,
    )


__all__ = ["choose_tables", "snapshot_table", "snapshot_tables", "try_install"]
