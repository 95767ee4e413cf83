"""A table's first snapshot in chunks of its primary key, written wave by wave, resumable (docs/snapshots.md).

Data flow: first low watermark + schema → plan (chunk predicates, `cdc_lib.snapshot.jdbc_read.plan_snapshot_chunks`)
→ the snapshot document (`cdc_lib.state.snapshot_documents`) taken with the table lease → per wave: low watermark,
one Spark JDBC job over up to `snapshot.chunks_per_wave` chunks (one task each), one idempotent Delta commit
(the first overwrites, the others append; SetTransaction = the snapshot's app id + wave number; written by
Spark or, `snapshot.writer`, by delta-rs from the wave as Arrow: `cdc_lib.sink.delta_rs.snapshot_wave`), high
watermark, the document saved → complete → installed into the pipeline state by whoever holds the pipeline
lease (this run when it can take it at once, else the next sync batch).

Soft-delete and history tables (docs/table-modes.md): the waves carry the mode's columns, and between the last
wave and `complete` the binlog between the watermarks is checked, and a history table corrected to its rows as
of the first low watermark (`cdc_lib.snapshot.correction`).

The pipeline lease is not held while chunks are read: the sync goes on with every other table meanwhile.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pymysql

from cdc_lib.binlog.probes import before_prepared_xa
from cdc_lib.changes.columns import column_shape
from cdc_lib.common.faults import failpoint
from cdc_lib.common.logs import about_table
from cdc_lib.errors import ConcurrentRunError, DeltaStateError, FencedCommitError, SchemaChangeError
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.sink import delta_log, fencing
from cdc_lib.sink.delta_rs import snapshot_wave
from cdc_lib.sink.spark import modes as spark_modes
from cdc_lib.sink.spark import writer as spark_writer
from cdc_lib.sink.spark.session import is_local_master
from cdc_lib.snapshot import routed
from cdc_lib.snapshot.correction import finish_mode_snapshot
from cdc_lib.snapshot.jdbc_read import plan_snapshot_chunks, read_refusal_in, read_table, wave_bytes_estimate
from cdc_lib.snapshot.progress import ProgressListener, SnapshotProgress
from cdc_lib.snapshot.watermarks import consistent_low_watermark
from cdc_lib.source import binlog_status
from cdc_lib.source import server as mysql
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.heartbeat import Heartbeat, LeaseLostError
from cdc_lib.state.offsets import utc_now
from cdc_lib.state.snapshot_documents import (
    DocumentHandle,
    SnapshotDocument,
    SnapshotInProgressError,
    Wave,
    adopt_committed_waves,
    read_document,
    snapshot_application,
)

log = logging.getLogger("binlake")


@dataclass(frozen=True, kw_only=True)
class ChunkedOutcome:
    document: SnapshotDocument
    seconds: float
    chunks_resumed: int


def run_chunked_snapshot(
    context: PipelineContext,
    connection: pymysql.connections.Connection,
    ref: TableRef,
    *,
    progress: ProgressListener | None = None,
    restart: bool = False,
) -> ChunkedOutcome:
    """Snapshot (or resume, or finish) one table under its table lease; return its complete document.

    A mirror table, or the first snapshot of a soft-delete or history table (`cdc_lib.snapshot.tables` decides).

    Raises:
        SnapshotInProgressError: another live runner holds the table's lease.
        LeaseLostError: the lease was lost while the snapshot ran; nothing more was written.
        SnapshotWindowError: a TRUNCATE or DDL of a soft-delete or history table between the watermarks.
    """
    name = ref.name
    target = context.config.sink.route_for(name)
    if target is not None:
        routed.check_mode(ref, context.config.sink.mode_for(name), target)
    started = time.monotonic()
    store, pipeline = context.store, context.config.pipeline
    handle = DocumentHandle(store, pipeline, lease_seconds=context.config.offsets.lease_seconds)
    existing, token = read_document(store, pipeline, name)
    now = utc_now()
    if existing is not None and existing.status != "abandoned" and existing.lease is not None \
            and not existing.lease.free_for(handle.owner, now):
        lease = existing.lease
        raise SnapshotInProgressError(
            f"table {name} is being snapshotted by {lease.describe()} until {lease.expires_at}",
            remedy="wait for that snapshot to finish; if its runner died on another host, retry after the lease "
            "expires (the snapshot resumes where it stopped)",
            table=name,
        )
    document = _resumable(context, connection, ref, existing, restart=restart,
                          mode=context.config.sink.mode_for(name))
    superseded: list[str] = []
    if document is not None:
        handle.take(document, token)
        if adopt_committed_waves(context, connection, document):
            handle.save()
        resumed = document.chunks_done
        log.info("snapshot of %s resumed at chunk %d/%d (snapshot %s)", name, resumed, len(document.plan),
                 document.snapshot_id, extra=about_table(name))
    else:
        document = _new_document(context, connection, ref)
        handle.take(document, token)
        resumed = 0
        if existing is not None:
            superseded.append(snapshot_application(context, name, existing.snapshot_id))
    claim = _TableClaim(context, name, superseded)
    try:
        with Heartbeat(handle.renew, lease_seconds=context.config.offsets.lease_seconds,
                       what=f"the snapshot of {name}") as heartbeat:
            _report(progress, document, started, resumed)
            while document.status == "running" and document.chunks_done < len(document.plan):
                _run_wave(context, connection, handle, heartbeat, document, claim)
                claim.after_first_wave(document)
                _report(progress, document, started, resumed)
            if document.status == "running":
                # Every chunk is in Delta: a soft-delete or history table's step before `complete`.
                finish_mode_snapshot(context, handle, document, before_commit=lambda: _before_commit(heartbeat))
    except FencedCommitError as exc:
        raise LeaseLostError(
            f"the snapshot of {name} was taken over: {exc.cause}; nothing more is written",
            remedy="let the other runner finish it; if none runs, start it again: binlake snapshot --table "
            f"{name}", table=name,
        ) from None
    except ConcurrentRunError as exc:
        raise LeaseLostError(
            f"the lease of the snapshot of {name} was taken over ({exc.cause}); nothing more is written",
            remedy="let the other runner finish it; its work so far is kept", table=name,
        ) from None
    finally:
        # Complete or not, the table lease is given up: a complete snapshot waits for its install, which any
        # holder of the pipeline lease does; an unfinished one for a resume.
        handle.release()
    return ChunkedOutcome(document=document, seconds=time.monotonic() - started, chunks_resumed=resumed)


def _before_commit(heartbeat: Heartbeat) -> None:
    heartbeat.beat()  # renew now, so a takeover since the last beat is seen before the commit
    heartbeat.check()


class _TableClaim:
    """The fences of this run (`_claim_table`), committed once, right before its first wave's commit: after the
    snapshot's document was written (a batch that has not yet committed the table reads it before it does), and
    after everything that may refuse the wave (nothing is written for a snapshot refused before its commit)."""

    def __init__(self, context: PipelineContext, name: str, superseded: list[str]) -> None:
        self.context, self.name, self.superseded = context, name, superseded
        self.claimed = False
        self.after_creation = False

    def before_commit(self) -> None:
        if self.claimed:
            return
        self.claimed = True
        # The table does not exist yet: the first wave creates it, and only a snapshot it replaces can have a
        # commit in flight on it (no sync writes a table never installed).
        self.after_creation = not _claim_table(self.context, self.name, self.superseded) and bool(self.superseded)

    def after_first_wave(self, document: SnapshotDocument) -> None:
        if self.after_creation and document.waves:
            self.after_creation = False
            _fence_after_first_wave(self.context, document, self.superseded)


def _claim_table(context: PipelineContext, name: str, superseded: list[str]) -> bool:
    """Fence the table's Delta log against every commit prepared under an older claim (cdc_lib/sink/fencing.py): the
    sync's, at the pipeline's batch sequence read now, and the `superseded` snapshots' wave commits. False when
    the table does not exist yet (nothing to fence before the first wave creates it)."""
    state, _ = context.store.read(context.config.pipeline)
    fences = {context.application(name): state.batch_seq if state is not None else 0}
    fences.update({application: fencing.SUPERSEDED for application in superseded})
    version = fencing.fence_table(
        context.table_path(name), fences=fences, storage=context.sink, spark=context.spark,
        spark_conf=context.config.spark.conf,
        metadata={"pipeline": context.config.pipeline, "table": name, "by": "snapshot"},
    )
    if version is not None:
        log.info("snapshot of %s: the table is fenced at Delta version %d", name, version, extra=about_table(name))
    return version is not None


def _fence_after_first_wave(context: PipelineContext, document: SnapshotDocument, superseded: list[str]) -> None:
    """The fence of a snapshot whose first wave created the table; then the proof that no superseded snapshot's
    wave landed between that wave and the fence (none can after it): such a wave would be mixed into this one."""
    name = document.table
    _claim_table(context, name, superseded)
    first = document.waves[0].delta_version if document.waves else None
    for application in superseded:
        tail = delta_log.read_log_tail(context.table_path(name), application=application, storage=context.sink)
        stray = tail.last_binlake_commit if tail is not None else None
        if stray is not None and first is not None and stray.delta_version > first:
            raise DeltaStateError(
                f"a wave of the replaced snapshot ({application}) was committed at Delta version "
                f"{stray.delta_version}, after this snapshot's first wave: the table mixes two snapshots",
                remedy=f"start the snapshot over: binlake snapshot --restart --table {name}", table=name,
            )


def _resumable(
    context: PipelineContext, connection: pymysql.connections.Connection, ref: TableRef,
    existing: SnapshotDocument | None, *, restart: bool, mode: str,
) -> SnapshotDocument | None:
    """The unfinished (or complete, not installed) snapshot to go on with; None to start a new one."""
    if existing is None or existing.status == "abandoned":
        return None
    tail = delta_log.read_log_tail(context.table_path(ref.name), storage=context.sink,
                                   application=snapshot_application(context, ref.name, existing.snapshot_id))
    if tail is not None and tail.fence is not None:
        log.warning("snapshot of %s: snapshot %s was fenced by another runner (taken over): STARTING OVER",
                    ref.name, existing.snapshot_id)
        return None
    if restart:
        log.warning("snapshot of %s: starting over (--restart); snapshot %s at %d/%d chunks is dropped",
                    ref.name, existing.snapshot_id, existing.chunks_done, len(existing.plan))
        return None
    if existing.status == "complete":
        return existing
    if existing.metadata_columns != context.config.sink.metadata_columns_for(ref.name):
        log.warning("snapshot of %s: sink.metadata_columns changed since snapshot %s began: STARTING OVER",
                    ref.name, existing.snapshot_id)
        return None
    if existing.mode != mode:
        log.warning("snapshot of %s: the table's mode is now %s, snapshot %s was taken in %s: STARTING OVER",
                    ref.name, mode, existing.snapshot_id, existing.mode)
        return None
    current = mysql.describe_table(connection, ref)
    if not same_schema(current, existing.schema):
        log.warning("snapshot of %s: the table's schema changed since snapshot %s began (%d/%d chunks done): "
                    "STARTING OVER", ref.name, existing.snapshot_id, existing.chunks_done, len(existing.plan))
        return None
    return existing


def _new_document(
    context: PipelineContext, connection: pymysql.connections.Connection, ref: TableRef
) -> SnapshotDocument:
    # The first low watermark and the schema the table is read with, pinned to each other.
    low, schema = consistent_low_watermark(connection, ref)
    low = before_prepared_xa(context.config.source, connection, low, schema.table)
    # The column rules are checked against the schema the table is read with: an unknown or excluded key column,
    # or an unset hash key, refuses the snapshot before it reads a row.
    column_shape(schema, context.config.sink.column_rules_for(ref.name),
                 row_filter=context.config.sink.row_filter_for(ref.name))
    mode = context.config.sink.mode_for(ref.name)
    # A soft-delete or history table, or a mirror with metadata columns, stamps its snapshot with the server's
    # clock (the binlog's) at the low mark.
    metadata_columns = context.config.sink.metadata_columns_for(ref.name)
    snapshot_time = server_time(connection).isoformat() if mode != "mirror" or metadata_columns else None
    plan = plan_snapshot_chunks(connection, schema, rows_per_chunk=context.config.snapshot.chunk_rows())
    document = SnapshotDocument(
        table=ref.name, snapshot_id=uuid.uuid4().hex[:12], status="running", low=low, schema=schema.to_json(),
        plan=plan.predicates, plan_method=plan.method, rows_estimated=plan.rows_estimated, mode=mode,
        started_at=utc_now().isoformat(), snapshot_time=snapshot_time, metadata_columns=metadata_columns,
        landing=context.config.sink.landing_rules_for(ref.name),
    )
    log.info("snapshot %s of %s: %d chunks (%s), about %d rows, from %s", document.snapshot_id, ref.name,
             len(plan.predicates), plan.method, plan.rows_estimated, low, extra=about_table(ref.name))
    return document


def _run_wave(
    context: PipelineContext,
    connection: pymysql.connections.Connection,
    handle: DocumentHandle,
    heartbeat: Heartbeat,
    document: SnapshotDocument,
    claim: _TableClaim,
) -> None:
    """Read the next wave's chunks in one Spark job and write them in one idempotent Delta commit."""
    name = document.table
    spark = context.spark()
    per_wave = context.config.snapshot.wave_chunks(spark.sparkContext.defaultParallelism)
    first = document.chunks_done
    end = min(first + per_wave, len(document.plan))
    number = len(document.waves) + 1
    # Counted before the read: a run killed during it has still read these chunks (the re-read bound).
    document.chunks_read += end - first
    handle.save()
    heartbeat.mark_renewed()
    low = binlog_status.current_position(connection)
    schema = TableSchema.from_json(TableRef.parse(name), document.schema)
    shape = column_shape(schema, context.config.sink.column_rules_for(name),
                         row_filter=context.config.sink.row_filter_for(name))
    frame = read_table(spark, context.config.source, schema, document.plan[first:end], shape=shape)
    moded = document.mode != "mirror"
    if moded:
        assert document.snapshot_time is not None
        frame = spark_modes.with_mode_columns(frame, document.mode, dt.datetime.fromisoformat(document.snapshot_time),
                                              0)
    if document.metadata_columns:
        # The same values in every wave and every resume: both times are in the document (docs/readers.md).
        assert document.snapshot_time is not None
        frame = spark_modes.with_metadata_columns(
            frame, source_ts=dt.datetime.fromisoformat(document.snapshot_time),
            applied_ts=dt.datetime.fromisoformat(document.started_at),
        )
    target = context.config.sink.route_for(name)
    if target is not None:
        # One of several sources of the target (docs/routing.md): its rows carry its names.
        frame = routed.routed_frame(frame, schema.table)
        routed.check_target_schema(spark, context.table_path(name), frame, table=schema.table, target=target,
                                   storage=context.sink)
    application = snapshot_application(context, name, document.snapshot_id)
    metadata = {
        "pipeline": context.config.pipeline, "table": name, "snapshot_id": document.snapshot_id, "wave": number,
        "first_chunk": first, "end_chunk": end, "chunks": len(document.plan), "wave_low": low.to_json(),
        "snapshot_low": document.low.to_json(), "end": document.low.to_json(), "schema": document.schema,
        # Readers of the Delta log: the table is not yet the source at any position (docs/snapshots.md).
        "consistent": False,
        **({"mode": document.mode} if moded else {}),
    }
    path = context.table_path(name)
    failpoint("before_snapshot_wave_commit")
    _before_commit(heartbeat)
    # Past the last lease check: a runner stopped here (SIGSTOP, a VM) is held off by the Delta log's fences alone.
    failpoint("snapshot_wave_checked")
    deletion_vectors = context.config.sink.deletion_vectors_for(name)
    # A soft-delete or history table's feed is not set by its snapshot (as the one-shot MERGE path).
    change_data_feed = context.config.sink.change_data_feed_for(name) and not moded
    settings = context.config.snapshot
    writer = "spark" if target is not None else snapshot_wave.choose_writer(
        settings.writer, path, table=name, mode=document.mode, deletion_vectors=deletion_vectors,
        change_data_feed=change_data_feed, local_master=is_local_master(context.config.spark.master),
        wave_bytes=wave_bytes_estimate(
            connection, schema.table, min(document.rows_estimated, (end - first) * settings.chunk_rows()),
        ) if settings.writer != "spark" else 0,
        storage=context.sink, column_types=snapshot_wave.frame_column_types(frame),
        spark_conf=context.config.spark.conf, layout=context.config.sink.layout_for(name),
    )
    try:
        if writer == "delta-rs":
            version = snapshot_wave.write_wave(
                frame, path, application=application, txn_version=number, metadata=metadata,
                overwrite=number == 1, storage=context.sink, sort_key=schema.primary_key,
                before_commit=claim.before_commit,
            )
        elif number == 1:
            claim.before_commit()  # Spark reads the wave inside its write
            version = spark_writer.write_snapshot(
                spark, frame, path, application=application, txn_version=number, metadata=metadata,
                storage=context.sink, deletion_vectors=deletion_vectors, change_data_feed=change_data_feed,
                replace_where=routed.replace_where(schema.table) if target is not None else None,
                layout=context.config.sink.layout_for(name),
            )
        else:
            claim.before_commit()
            version = spark_writer.append_snapshot_wave(
                spark, frame, path, application=application, txn_version=number, metadata=metadata,
                storage=context.sink,
            )
    except Exception as exc:
        refusal = read_refusal_in(exc, name)
        if refusal is None:
            raise
        raise refusal from None
    failpoint("after_snapshot_wave_commit")
    if end >= len(document.plan):
        failpoint("after_snapshot_commit")  # the snapshot's last commit, before anything records it
    high = binlog_status.current_position(connection)
    rows = delta_log.written_rows(path, version, storage=context.sink)
    document.waves.append(Wave(number=number, first_chunk=first, end_chunk=end, rows=rows, low=low, high=high,
                               delta_version=version))
    _check_schema_unchanged(connection, handle, document)
    if end >= len(document.plan) and not document.needs_correction:
        document.status = "complete"
        document.finished_at = utc_now().isoformat()
    handle.save()
    heartbeat.mark_renewed()
    failpoint("after_snapshot_wave_recorded")
    log.info("snapshot of %s: wave %d, chunks %d-%d of %d, %d rows, Delta version %d (written by %s)", name,
             number, first, end - 1, len(document.plan), rows, version, writer, extra=about_table(name))


def _check_schema_unchanged(
    connection: pymysql.connections.Connection, handle: DocumentHandle, document: SnapshotDocument
) -> None:
    """Stop the snapshot when the table changed shape while a wave was read: its rows were converted to the
    columns of the first low watermark (a widened DECIMAL or VARCHAR would be cut to them), which no replay of
    the binlog repairs for rows that do not change again. The wave stays recorded but the snapshot is not
    complete, so it is never installed; the next `binlake snapshot` sees the new schema and starts over."""
    current = mysql.describe_table(connection, TableRef.parse(document.table))
    if same_schema(current, document.schema):
        return
    handle.save()
    raise SchemaChangeError(
        f"the table changed shape (a DDL) during wave {len(document.waves)} of snapshot {document.snapshot_id}: "
        "its rows may have been converted to the old columns; the snapshot is not installed",
        remedy=f"run the snapshot again (binlake snapshot --table {document.table}): it starts over with the new "
        "schema",
        table=document.table,
    )


def server_time(connection: pymysql.connections.Connection) -> dt.datetime:
    """The source server's clock (UTC), the clock of the binlog's commit timestamps."""
    ((now,),) = mysql.query(connection, "SELECT UTC_TIMESTAMP(6)")
    return now.replace(tzinfo=dt.UTC)  # type: ignore[no-any-return]


def _report(
    progress: ProgressListener | None, document: SnapshotDocument, started: float, resumed: int
) -> None:
    if progress is None:
        return
    resumed_rows = sum(wave.rows for wave in document.waves if wave.end_chunk <= resumed)
    progress(SnapshotProgress(
        table=document.table, chunks_done=document.chunks_done, chunks_total=len(document.plan),
        rows_done=document.rows_done, rows_estimated=document.rows_estimated,
        elapsed_seconds=time.monotonic() - started, chunks_resumed=resumed, rows_resumed=resumed_rows,
    ))

__all__ = ["ChunkedOutcome", "run_chunked_snapshot", "server_time"]


def same_schema(current: TableSchema, recorded: dict[str, Any] | None) -> bool:
    """`current` is the schema a snapshot recorded. A record written before binlake read collations has none: it is
    compared without them, so a snapshot in flight across that upgrade resumes rather than starting over."""
    now = current.to_json()
    columns = (recorded or {}).get("columns") or []
    if not any("collation" in column for column in columns):
        now = {**now, "columns": [{key: value for key, value in column.items() if key != "collation"}
                                  for column in now["columns"]]}
    return now == recorded
