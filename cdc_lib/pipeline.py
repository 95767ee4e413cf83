"""The engine's entry points: validate, snapshot, sync, status and reconcile one pipeline.

Data flow of a sync: take the pipeline lease in the offset store → reconcile
offsets with each Delta log (the Delta log wins) → read the binlog once from
the smallest table offset → fold changes per table → MERGE each changed
table in its own idempotent Delta commit → move every table's offset
(compare-and-swap). Spark starts only if some table has a change.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cdc_lib import delta_sink
from cdc_lib import source as mysql
from cdc_lib.binlog import (
    SUPERSEDED,
    BatchRead,
    SchemaChange,
    TableCursor,
    TableFailure,
    before_prepared_xa,
    columns_after_ddl,
    read_batch,
)
from cdc_lib.config import PipelineConfig, SinkConfig
from cdc_lib.errors import (
    BinlakeError,
    BinlogPurgedError,
    DeltaStateError,
    DeltaWriteError,
    NotSnapshottedError,
    SchemaChangeError,
    TableError,
)
from cdc_lib.faults import failpoint
from cdc_lib.history import plan_resume
from cdc_lib.offsets import OffsetStore, PipelineState, StateHandle, TableState, open_offset_store, utc_now
from cdc_lib.positions import BinlogPosition, state_contains
from cdc_lib.runway import DEFAULT_RUNWAY_WARN_HOURS, table_runways
from cdc_lib.schema import compare_schemas, evolve_delta_table, needs_backfill, schema_with_columns
from cdc_lib.sink_storage import SinkStorage, sink_storage
from cdc_lib.snapshot import SnapshotResult, partition_predicates, read_table, zero_date_in
from cdc_lib.source import TableRef, TableSchema
from cdc_lib.spark import spark_session
from cdc_lib.types import ColumnInfo

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("binlake")


@dataclass(frozen=True)
class TableBatchResult:
    table: str
    inserted: int
    updated: int
    deleted: int
    rows_written: int
    delta_version: int | None
    position: str
    error: str | None = None


@dataclass
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
    end_position: BinlogPosition | None = None
    schema_changes: list[str] = field(default_factory=list)

    @property
    def rows_per_second(self) -> float:
        return self.row_changes / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class TableStatus:
    table: str
    snapshotted: bool
    consistent: bool
    position: str | None
    high_watermark: str | None
    delta_version: int | None
    lag_bytes: int | None
    lag_events: int | None
    lag_seconds: float | None
    error: str | None
    #: `TableRunway.to_json()` of the table's offset; None when not snapshotted or written on another server.
    runway: dict[str, Any] | None = None
    #: The server purges (or purged) the binlog of the offset within the warning threshold.
    runway_warning: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Pipeline:
    """One configured pipeline. Thin callers (CLI, Dagster) use only these methods."""

    def __init__(self, config: PipelineConfig, *, store: OffsetStore | None = None) -> None:
        self.config = config
        self.store = store or open_offset_store(config.offsets)
        self.sink: SinkStorage = sink_storage(config.sink)

    # -- helpers ---------------------------------------------------------------------------

    def table_path(self, name: str) -> str:
        ref = TableRef.parse(name)
        return self.config.sink.table_path(ref.database, ref.table)

    def application(self, name: str) -> str:
        return delta_sink.app_id(self.config.pipeline, name)

    def spark(self) -> SparkSession:
        """The process's SparkSession, carrying this pipeline's sink settings (s3a endpoint, credentials)."""
        return spark_session(self.config.spark, sink=self.config.sink)

    def _handle(self) -> StateHandle:
        return StateHandle(self.store, self.config.pipeline, lease_seconds=self.config.offsets.lease_seconds)

    def configured_tables(self, connection: Any) -> list[TableRef]:
        return mysql.resolve_tables(connection, self.config.source.tables)

    def read_state(self) -> PipelineState:
        state, _ = self.store.read(self.config.pipeline)
        return state or PipelineState(pipeline=self.config.pipeline)

    # -- validate --------------------------------------------------------------------------

    def validate(self) -> list[str]:
        """Check server settings, grants, tables and stores; return what was checked.

        Raises:
            BinlakeError: the first problem found, with its remedy.
        """
        checked = []
        with mysql.source_connection(self.config.source) as connection:
            checked.append(f"connected to {self.config.source.host}:{self.config.source.port}")
            mysql.check_server_settings(connection)
            checked.append("binlog: log_bin=ON, ROW format, FULL row image, FULL row metadata")
            mysql.check_grants(connection)
            checked.append("grants: replication and binlog status readable")
            tables = self.configured_tables(connection)
            for ref in tables:
                mysql.describe_table(connection, ref)
            checked.append(f"tables: {len(tables)} found, each with a primary key and mappable types")
            state = self.read_state()
            logs = mysql.binary_logs(connection)
            server_end = mysql.current_position(connection)
            for name, table_state in state.tables.items():
                if plan_resume(name, table_state.position, server_end, logs).mode == "position":
                    mysql.check_position_available(connection, table_state.position, table=name, logs=logs)
            checked.append("offsets: every stored position is still on the server (or its GTID history is)")
        self.store.check_writable(self.config.pipeline)
        checked.append(f"offset store writable: {self.store.describe()}")
        self.sink.check_writable(self.config.sink.path)
        checked.append(f"sink writable: {self.config.sink.path}")
        return checked

    # -- snapshot --------------------------------------------------------------------------

    def snapshot(self, tables: list[str] | None = None) -> list[SnapshotResult]:
        """Snapshot the chosen tables (all configured ones by default) into Delta."""
        handle = self._handle()
        results = []
        with mysql.source_connection(self.config.source) as connection:
            mysql.check_server_settings(connection)
            configured = self.configured_tables(connection)
            chosen = self._choose(configured, tables)
            schemas = [mysql.describe_table(connection, ref) for ref in chosen]
            self.sink.check_writable(self.config.sink.path)
            state = handle.acquire()
            try:
                self._reconcile_with_delta(state, connection)
                handle.save()
                for schema in schemas:
                    results.append(self._snapshot_one(handle, connection, schema))
            finally:
                handle.release()
        return results

    def _choose(self, configured: list[TableRef], tables: list[str] | None) -> list[TableRef]:
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

    def _snapshot_one(self, handle: StateHandle, connection: Any, schema: TableSchema) -> SnapshotResult:
        name = schema.table.name
        started = time.monotonic()
        spark = self.spark()
        low = mysql.current_position(connection)
        low = before_prepared_xa(self.config.source, connection, low, schema.table)
        predicates, _ = partition_predicates(
            connection, schema, self.config.snapshot, default_parallelism=spark.sparkContext.defaultParallelism
        )
        handle.state.batch_seq += 1
        seq = handle.state.batch_seq
        handle.save()
        frame = read_table(spark, self.config.source, schema, predicates)
        metadata = {
            "pipeline": self.config.pipeline,
            "table": name,
            "batch_seq": seq,
            "snapshot_low": low.to_json(),
            "end": low.to_json(),
            "schema": schema.to_json(),
        }
        try:
            version = delta_sink.write_snapshot(
                spark, frame, self.table_path(name), application=self.application(name), txn_version=seq,
                metadata=metadata, storage=self.sink,
            )
        except Exception as exc:
            zero_date = zero_date_in(exc, name)
            if zero_date is None:
                raise
            raise zero_date from None
        high = mysql.current_position(connection)
        failpoint("after_snapshot_commit")
        rows = delta_sink.written_rows(self.table_path(name), version, storage=self.sink)
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
        )
        handle.save()
        seconds = time.monotonic() - started
        log.info("snapshot %s: %d rows in %.1fs (%d partitions)", name, rows, seconds, len(predicates))
        return SnapshotResult(
            table=name, rows=rows, seconds=seconds, partitions=len(predicates), delta_version=version,
            low_watermark=str(low), high_watermark=str(high),
        )

    # -- reconcile offsets with Delta ------------------------------------------------------

    def _reconcile_with_delta(self, state: PipelineState, connection: Any) -> list[str]:
        """Adopt any binlake commit the Delta log has and the store lacks; the Delta log wins."""
        adopted = []
        for name in sorted(set(state.tables) | set(self._delta_tables_on_disk(state))):
            table_state = state.tables.get(name)
            tail = delta_sink.read_log_tail(
                self.table_path(name), application=self.application(name), storage=self.sink
            )
            if tail is None:
                if table_state is not None and not table_state.error:
                    # Only this table stops (its re-snapshot, the remedy, replaces its state); the others go on.
                    missing = DeltaStateError(
                        f"the offset store knows this table but its Delta table at {self.table_path(name)} is missing",
                        remedy=f"re-snapshot it: binlake snapshot --table {name}",
                        table=name,
                    )
                    log.error("%s", missing)
                    table_state.error = str(missing)
                continue
            commit = tail.last_binlake_commit
            if commit is None:
                continue
            state.batch_seq = max(state.batch_seq, commit.txn_version)
            if table_state is not None and commit.txn_version <= table_state.applied_seq:
                continue
            end = BinlogPosition.from_json(commit.metadata["end"])
            if commit.kind == "snapshot":
                state.tables[name] = TableState(
                    position=end,
                    snapshot_low=end,
                    snapshot_high=mysql.current_position(connection),
                    snapshot_at=utc_now().isoformat(),
                    schema=commit.metadata["schema"],
                    applied_seq=commit.txn_version,
                    delta_version=commit.delta_version,
                    rows_snapshotted=delta_sink.written_rows(
                        self.table_path(name), commit.delta_version, storage=self.sink
                    ),
                )
            elif table_state is not None:
                table_state.position = end
                table_state.applied_seq = commit.txn_version
                table_state.delta_version = commit.delta_version
                table_state.consistent = table_state.consistent or reached(end, table_state.snapshot_high)
            adopted.append(name)
            log.warning("offsets of %s taken from its Delta log (batch %d)", name, commit.txn_version)
        return adopted

    def _delta_tables_on_disk(self, state: PipelineState) -> list[str]:
        # Tables the store does not know yet but a crashed snapshot may have written.
        names = []
        for pattern in self.config.source.tables:
            if "*" in pattern:
                continue
            if pattern not in state.tables and delta_sink.table_exists(self.table_path(pattern), storage=self.sink):
                names.append(pattern)
        return names

    # -- sync ------------------------------------------------------------------------------

    def sync(self, *, until_caught_up: bool = False) -> list[SyncResult]:
        """Run one micro-batch (or batches until the binlog end seen at start is reached)."""
        handle = self._handle()
        results: list[SyncResult] = []
        with mysql.source_connection(self.config.source) as connection:
            mysql.check_server_settings(connection)
            state = handle.acquire()
            read_ahead: ReadAhead | None = None
            try:
                self._reconcile_with_delta(state, connection)
                target = mysql.current_position(connection)
                read_ahead = ReadAhead(self.config, target) if until_caught_up else None
                while True:
                    result = self._one_batch(handle, connection, read_ahead)
                    results.append(result)
                    if not until_caught_up:
                        break
                    if result.schema_changes:
                        continue  # a table paused at an ALTER resumes in the next batch
                    if result.reached_end or result.transactions == 0:
                        break
                    if result.end_position is not None and result.end_position >= target:
                        break
            finally:
                if read_ahead is not None:
                    read_ahead.close()
                handle.release()
        return results

    def _one_batch(
        self,
        handle: StateHandle,
        connection: Any,
        read_ahead: ReadAhead | None = None,
    ) -> SyncResult:
        state = handle.state
        skipped: dict[str, str] = {}
        cursors = []
        logs = mysql.binary_logs(connection)
        # Asked per batch: an earlier batch of this sync may have read past the end seen when it started.
        server_end = mysql.current_position(connection)
        # Every table is judged before any offset moves: a server without our history stops the whole sync.
        active = {name: table_state for name, table_state in sorted(state.tables.items()) if not table_state.error}
        plans = {name: plan_resume(name, state_.position, server_end, logs) for name, state_ in active.items()}
        for name, table_state in sorted(state.tables.items()):
            if table_state.error:
                skipped[name] = table_state.error
                continue
            plan = plans[name]
            if plan.translated is not None:
                log.warning("%s: offset %s carried over to %s (same GTID state)", name, table_state.position,
                            plan.translated)
                table_state.position = plan.translated
            try:
                if plan.mode == "position" or plan.translated is not None:
                    mysql.check_position_available(connection, table_state.position, table=name, logs=logs)
            except BinlogPurgedError as exc:
                table_state.error = str(exc)
                skipped[name] = str(exc)
                continue
            cursors.append(
                TableCursor(
                    name=name,
                    position=table_state.position,
                    schema=TableSchema.from_json(TableRef.parse(name), table_state.schema),
                )
            )
        if not cursors:
            handle.save()
            return SyncResult(None, "-", "-", 0, 0, 0, 0.0, True, False, [], skipped)
        read = read_ahead.take(cursors) if read_ahead is not None else None
        if read is None:
            read = read_batch(self.config.source, cursors, self.config.batch, server=server_end.server)
        more_known = (
            read_ahead is not None and not read.by_gtid and read.end < read_ahead.target and not read.reached_end
        )
        if read_ahead is not None and more_known and not (read.table_errors or read.schema_changes or read.held):
            # Decode the next batch while this one is MERGEd: Spark works in the JVM, the reader in Python.
            read_ahead.start(
                [TableCursor(c.name, max(c.position, read.end, key=_sort_key), c.schema) for c in cursors]
            )
        relevant = read.relevant_changes()
        seq: int | None = None
        spark_used = bool(relevant)
        table_results = []
        if relevant:
            state.batch_seq += 1
            seq = state.batch_seq
            handle.save()
        now = utc_now().isoformat()
        for cursor in cursors:
            name = cursor.name
            table_state = state.tables[name]
            failure = read.table_errors.get(name)
            schema_change = read.schema_changes.get(name)
            end = read.end_for(name)
            changes = relevant.get(name)
            version = table_state.delta_version
            if changes is not None and seq is not None:
                try:
                    version = delta_sink.merge_changes(
                        self.spark(),
                        self.table_path(name),
                        cursor.schema,
                        changes,
                        application=self.application(name),
                        txn_version=seq,
                        metadata={"pipeline": self.config.pipeline, "table": name, "batch_seq": seq,
                                  "start": read.start.to_json(), "end": end.to_json()},
                        storage=self.sink,
                    )
                except Exception as exc:  # noqa: BLE001 - sorted by `table_write_failure`; the rest re-raised
                    # Nothing of this batch reached the table: it stops where it stood, the others go on.
                    failure = TableFailure(table_write_failure(exc, name), table_state.position)
                    end = table_state.position
                    changes = None
                else:
                    failpoint("after_delta_commit")
                    table_state.applied_seq = seq
                    table_state.delta_version = version
                    table_state.last_change_at = now
            if moves_forward(table_state.position, end, server_end):
                table_state.position = end
            if schema_change is not None and failure is None:
                failure, evolved = self._apply_schema_change(connection, cursor, table_state, schema_change)
                spark_used = spark_used or evolved
            table_state.consistent = table_state.consistent or reached(table_state.position, table_state.snapshot_high)
            if failure:
                table_state.error = str(failure.error)
            table_results.append(
                TableBatchResult(
                    table=name,
                    inserted=changes.inserted if changes else 0,
                    updated=changes.updated if changes else 0,
                    deleted=changes.deleted if changes else 0,
                    rows_written=len(changes.rows) if changes else 0,
                    delta_version=version,
                    position=str(table_state.position),
                    error=str(failure.error) if failure else None,
                )
            )
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
            end_position=read.end,
            schema_changes=sorted(read.schema_changes),
        )

    def _apply_schema_change(
        self, connection: Any, cursor: TableCursor, table_state: TableState, change: SchemaChange
    ) -> tuple[TableFailure | None, bool]:
        """Evolve the table past an ALTER, or stop it with the remedy; record the DDL either way.

        Returns the failure (if the table must stop) and whether Spark was needed.
        """
        name = cursor.name
        entry = {"statement": change.statement, "position": change.before.to_json(), "at": utc_now().isoformat()}
        try:
            names_after = columns_after_ddl(self.config.source, cursor.schema, change.after)
            if names_after == SUPERSEDED:
                # Another DDL on the table follows before any row: that one decides the shape.
                table_state.position = change.after
                table_state.ddl_log = [*table_state.ddl_log, {**entry, "action": "superseded by a later DDL"}][-100:]
                return None, False
            current = mysql.describe_table(connection, cursor.schema.table)
            if isinstance(names_after, list):
                current = schema_with_columns(current, names_after, table=name)
            diff = compare_schemas(cursor.schema, current)
            if diff.compatible and diff.tightened:
                self._check_no_nulls(table_state, name, diff.tightened)
            if not diff.compatible:
                raise SchemaChangeError(
                    f"incompatible schema change ({'; '.join(diff.problems)})",
                    remedy=f"re-snapshot the table: binlake snapshot --table {name}",
                    table=name,
                )
            generated = _generated_columns(connection, cursor.schema.table, [column.name for column in diff.added])
            backfill = needs_backfill(diff, generated)
            if diff.added or diff.retyped:
                evolve_delta_table(self.spark(), self.table_path(name), diff, table=name, generated=generated)
            if backfill:
                high = self._backfill(connection, current, backfill)
                # The back-filled values are the source's as of the read; rows changed since arrive as full row
                # images from the binlog. Until the offset passes the read's high watermark, the table may show
                # a mix of both — the same argument, and the same flag, as a snapshot's watermarks.
                table_state.snapshot_high = high
                table_state.consistent = False
        except Exception as exc:  # noqa: BLE001 - sorted by `table_write_failure`; the rest re-raised
            error = exc if isinstance(exc, BinlakeError) else table_write_failure(
                exc, name, doing="evolving the Delta table past the schema change"
            )
            table_state.ddl_log = [*table_state.ddl_log, {**entry, "action": f"stopped: {error.cause}"}][-100:]
            return TableFailure(error, change.before), False
        added = [column.name for column in diff.added]
        actions = []
        if added:
            actions.append(f"added columns {added}")
        if backfill:
            actions.append(f"back-filled {[column.name for column in backfill]} from the source up to {high}")
        if diff.widened:
            actions.append(
                "widened " + ", ".join(f"{after.name} {before.column_type} -> {after.column_type}"
                                       for before, after in diff.widened)
            )
        table_state.schema = current.to_json()
        table_state.position = change.after
        table_state.ddl_log = [*table_state.ddl_log, {**entry, "action": "; ".join(actions) or "no column change"}][
            -100:
        ]
        log.info("%s: schema change applied (%s)", name, change.statement[:120])
        return None, bool(diff.added or diff.retyped or diff.tightened)

    def _check_no_nulls(self, table_state: TableState, name: str, columns: list[str]) -> None:
        """A column became NOT NULL: the server turned its NULLs into zero values without row events.

        The paused Delta table is the source just before the DDL (when it is consistent): without NULLs there,
        no value changed.
        """
        if table_state.consistent:
            frame = self.spark().read.format("delta").load(self.table_path(name))
            condition = " OR ".join(f"`{column}` IS NULL" for column in columns)
            if not frame.where(condition).limit(1).collect():
                return
        raise SchemaChangeError(
            f"columns {columns} became NOT NULL, and the server may have replaced NULLs in them without row events",
            remedy=f"re-snapshot the table: binlake snapshot --table {name}",
            table=name,
        )

    def _backfill(self, connection: Any, current: TableSchema, columns: list[ColumnInfo]) -> BinlogPosition:
        """Read (key, columns) from the source and set them on the rows Delta has; return the read's high watermark."""
        name = current.table.name
        by_name = {column.name: column for column in current.columns}
        schema = TableSchema(
            table=current.table,
            columns=tuple(by_name[key] for key in current.primary_key) + tuple(columns),
            primary_key=current.primary_key,
        )
        predicates, _ = partition_predicates(
            connection, schema, self.config.snapshot, default_parallelism=self.spark().sparkContext.defaultParallelism
        )
        frame = read_table(self.spark(), self.config.source, schema, predicates)
        try:
            delta_sink.backfill_columns(
                self.spark(), self.table_path(name), frame, key=current.primary_key,
                columns=[column.name for column in columns],
            )
        except Exception as exc:
            zero_date = zero_date_in(exc, name)
            if zero_date is None:
                raise
            raise zero_date from None
        return mysql.current_position(connection)

    # -- status ----------------------------------------------------------------------------

    def status(self, *, runway_warn_hours: float = DEFAULT_RUNWAY_WARN_HOURS) -> list[TableStatus]:
        """Per table: offset, lag, consistency, and the binlog runway, flagged below `runway_warn_hours`."""
        state = self.read_state()
        statuses = []
        with mysql.source_connection(self.config.source) as connection:
            logs = mysql.binary_logs(connection)
            server_end = mysql.current_position(connection)
            configured = [ref.name for ref in self.configured_tables(connection)]
            # An offset written on another server (before its first batch here, after a switch of the source)
            # means nothing in this server's binlog files: its lag in bytes and events is unknown.
            here = {
                name: table_state.position.written_on(server_end.server) for name, table_state in state.tables.items()
            }
            lag_events = {
                name: mysql.events_behind(connection, table_state.position, logs) if here[name] else None
                for name, table_state in state.tables.items()
            }
            runways = table_runways(
                self.config.source,
                connection,
                {name: table_state.position for name, table_state in state.tables.items()},
                logs=logs,
                server=server_end.server,
            )
        now = utc_now()
        for name in sorted(set(configured) | set(state.tables)):
            table_state = state.tables.get(name)
            if table_state is None:
                statuses.append(TableStatus(name, False, False, None, None, None, None, None, None, None))
                continue
            if here[name]:
                lag_bytes = mysql.bytes_behind(table_state.position, logs)
                caught_up = table_state.position.same_point(server_end) or lag_bytes == 0
            else:
                lag_bytes = None
                caught_up = state_contains(table_state.position.gtid, server_end.gtid)
            changed = table_state.last_change_at or table_state.snapshot_at
            lag_seconds = 0.0 if caught_up else (now - dt.datetime.fromisoformat(changed)).total_seconds()
            statuses.append(
                TableStatus(
                    table=name,
                    snapshotted=True,
                    consistent=table_state.consistent,
                    position=str(table_state.position),
                    high_watermark=str(table_state.snapshot_high),
                    delta_version=table_state.delta_version,
                    lag_bytes=lag_bytes,
                    lag_events=lag_events[name],
                    lag_seconds=round(lag_seconds, 1),
                    error=table_state.error,
                    runway=runways[name].to_json() if name in runways else None,
                    runway_warning=name in runways and runways[name].warning(runway_warn_hours),
                )
            )
        return statuses

    def require_snapshot(self, name: str) -> TableState:
        table_state = self.read_state().tables.get(name)
        if table_state is None:
            raise NotSnapshottedError(
                "the table has no snapshot yet", remedy=f"binlake snapshot --table {name}", table=name
            )
        return table_state


def table_write_failure(exc: Exception, table: str, *, doing: str = "writing the batch into Delta") -> DeltaWriteError:
    """The error that stops `table` after its MERGE failed, or `exc` re-raised when it belongs to the run.

    What a retry can cure (the sink or the store unreachable, another runner, the JVM gone) fails the
    whole batch before any offset moves; what is about this table's data or Delta table (a constraint,
    a schema the Delta table refuses, a corrupt file) stops only this table, with its remedy.
    """
    if isinstance(exc, BinlakeError) and exc.retryable:
        raise exc
    kind = type(exc).__name__
    if kind in _RUN_FAILURES or "Concurrent" in kind or isinstance(exc, (ConnectionError, MemoryError)):
        raise exc
    java = getattr(exc, "java_exception", None)  # py4j's own message is only "An error occurred while calling"
    text = str(java.toString()) if java is not None else str(exc)
    first_line = (text.strip().splitlines() or [kind])[0]
    log.error("%s: %s failed, the table stops: %s", table, doing, first_line[:500])
    return DeltaWriteError(
        f"{doing} failed ({kind}: {first_line[:300]})",
        remedy=f"fix the cause in the Delta table or the source rows, then re-snapshot: binlake snapshot --table "
        f"{table}",
        table=table,
    )


#: Exception types that mean the Spark driver or its gateway went away, not that one table is bad.
_RUN_FAILURES = frozenset({"Py4JNetworkError", "SparkConnectGrpcException", "PySparkRuntimeError"})


def check_sink_writable(sink: SinkConfig) -> None:
    """Raise SinkError unless the sink (a local folder, or an s3a:// prefix) can be written."""
    sink_storage(sink).check_writable(sink.path)


def moves_forward(current: BinlogPosition, candidate: BinlogPosition, server: BinlogPosition) -> bool:
    """Whether `candidate` lies past `current`: by offset on one server; across servers, by GTID state and
    only onto the server we are connected to (whose end is `server`), so offsets never move back to the old one."""
    if candidate.written_on(current.server) and current.written_on(candidate.server):
        return candidate > current
    return candidate.server == server.server and state_contains(candidate.gtid, current.gtid)


def reached(position: BinlogPosition, mark: BinlogPosition) -> bool:
    """Whether `position` is at or past `mark` (e.g. a snapshot high watermark written on another server)."""
    if position.written_on(mark.server) and mark.written_on(position.server):
        return mark <= position
    return state_contains(position.gtid, mark.gtid)


def _sort_key(position: BinlogPosition) -> tuple[int, str, int]:
    return position.sort_key


class ReadAhead:
    """Reads the next batch on a worker thread while the current one is written.

    Only one binlog connection is open at a time: the next read starts after the current
    read finished. A prefetched batch is used only if the table cursors it assumed are
    exactly the ones the pipeline arrives at; otherwise it is dropped and read again.
    """

    def __init__(self, config: PipelineConfig, target: BinlogPosition) -> None:
        self.config = config
        self.target = target
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="binlake-read-ahead")
        self.pending: tuple[list[TableCursor], Future[BatchRead]] | None = None

    def start(self, cursors: list[TableCursor]) -> None:
        future = self.executor.submit(
            read_batch, self.config.source, cursors, self.config.batch, server=self.target.server
        )
        self.pending = (cursors, future)

    def take(self, cursors: list[TableCursor]) -> BatchRead | None:
        if self.pending is None:
            return None
        assumed, future = self.pending
        self.pending = None
        read = future.result()
        return read if assumed == cursors else None

    def close(self) -> None:
        if self.pending is not None:
            self.pending[1].cancel()
            try:
                self.pending[1].result()
            except BaseException:  # noqa: BLE001 - an abandoned prefetch has nothing left to report
                pass
        self.executor.shutdown(wait=True)


__all__ = ["BinlakeError", "Pipeline", "SyncResult", "TableStatus"]


def _generated_columns(connection: Any, table: TableRef, names: list[str]) -> set[str]:
    """Which of `names` are generated columns (VIRTUAL or STORED): their value comes from the server."""
    if not names:
        return set()
    marks = ", ".join(["%s"] * len(names))
    rows = mysql.query(
        connection,
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
        f"AND COLUMN_NAME IN ({marks}) AND (IS_GENERATED = 'ALWAYS' OR EXTRA LIKE '%%GENERATED%%')",
        (table.database, table.table, *names),
    )
    return {str(row[0]) for row in rows}
