"""The engine's front door: validate, snapshot, sync and status of one pipeline.

`Pipeline` holds the pipeline's context (config, offset store, sink) and hands each call to the
module that does it:

    snapshot → `cdc_lib.snapshot.tables`   low watermark, JDBC read, Delta commit, high watermark
    sync     → `cdc_lib.pipeline.sync`              micro-batches: one binlog read, a MERGE per table, offsets
    status   → `cdc_lib.status.table_status`            per-table offset, lag, consistency and binlog runway
    resume   → `cdc_lib.pipeline.resume`            a stopped table taken back at its offset (the binlog still holds it)
    schema   → `cdc_lib.pipeline.schema_policy`     a schema change a table waits at, approved or rejected

Every writer first reconciles the offset store with the Delta logs (`cdc_lib.state.table_offsets`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pymysql

from cdc_lib.changes.columns import column_shape
from cdc_lib.config.model import PipelineConfig, SinkConfig
from cdc_lib.errors import BinlakeError
from cdc_lib.model.tables import TableRef
from cdc_lib.pipeline.resume import ResumeResult, resume_table
from cdc_lib.pipeline.schema_policy import Decision, approve_schema_change, reject_schema_change
from cdc_lib.pipeline.sync import SyncResult, TableBatchResult, sync
from cdc_lib.pipeline.table_failures import table_write_failure
from cdc_lib.sink.storage import SinkStorage, sink_storage
from cdc_lib.snapshot.jdbc_read import SnapshotResult
from cdc_lib.snapshot.progress import ProgressListener
from cdc_lib.snapshot.tables import snapshot_tables
from cdc_lib.snapshot.watermarks import mysql_log_status
from cdc_lib.source import binlog_status, checks
from cdc_lib.source import server as mysql
from cdc_lib.source.history import mysql_gtid_purged, plan_resume
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.offset_store import OffsetStore, open_offset_store
from cdc_lib.state.offsets import PipelineState, TableState
from cdc_lib.state.table_offsets import moves_forward, reached
from cdc_lib.status.runway import DEFAULT_RUNWAY_WARN_HOURS
from cdc_lib.status.table_status import TableStatus, require_snapshot, table_statuses

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Pipeline:
    """One configured pipeline. Thin callers (CLI, Dagster) use only these methods."""

    def __init__(self, config: PipelineConfig, *, store: OffsetStore | None = None) -> None:
        self.context = PipelineContext(
            config=config, store=store or open_offset_store(config.offsets), sink=sink_storage(config.sink)
        )

    @property
    def config(self) -> PipelineConfig:
        return self.context.config

    @property
    def store(self) -> OffsetStore:
        return self.context.store

    @property
    def sink(self) -> SinkStorage:
        return self.context.sink

    def table_path(self, name: str) -> str:
        return self.context.table_path(name)

    def application(self, name: str) -> str:
        return self.context.application(name)

    def spark(self) -> SparkSession:
        """The process's SparkSession, carrying this pipeline's sink settings (s3a endpoint, credentials)."""
        return self.context.spark()

    def configured_tables(self, connection: pymysql.connections.Connection) -> list[TableRef]:
        return self.context.configured_tables(connection)

    def read_state(self) -> PipelineState:
        return self.context.read_state()

    def validate(self) -> list[str]:
        """Check server settings, grants, tables and stores; return what was checked.

        Raises:
            BinlakeError: the first problem found, with its remedy.
        """
        checked = []
        with mysql.source_connection(self.config.source) as connection:
            checked.append(f"connected to {self.config.source.host}:{self.config.source.port}")
            checks.check_server_settings(connection, append_inserts=self.config.batch.append_inserts)
            checked.append("binlog: log_bin=ON, ROW format, FULL row image, FULL row metadata")
            checks.check_grants(connection)
            checked.append("grants: replication and binlog status readable")
            if not mysql.server_flavour(connection).mariadb:
                # Every MySQL snapshot reads its low watermark there (BACKUP_ADMIN): refused now, not at the first
                # snapshot after a sync ran for days without it.
                mysql_log_status(connection, mysql.server_identity(connection))
                checked.append("snapshot position: performance_schema.log_status readable")
            tables = self.configured_tables(connection)
            shaped = 0
            for ref in tables:
                schema = mysql.describe_table(connection, ref)
                # Column rules against the table as it is now: names, key columns, mask types, hash keys set.
                shaped += column_shape(schema, self.config.sink.column_rules_for(ref.name),
                                       row_filter=self.config.sink.row_filter_for(ref.name)) is not None
            checked.append(f"tables: {len(tables)} found, each with a primary key and mappable types")
            if shaped:
                checked.append(f"column rules: {shaped} tables' columns, masks and row filters fit their schemas")
            state = self.read_state()
            logs = binlog_status.binary_logs(connection)
            server_end = binlog_status.current_position(connection)
            purged = mysql_gtid_purged(connection, [table.position for table in state.tables.values()], server_end)
            for name, table_state in state.tables.items():
                if plan_resume(name, table_state.position, server_end, logs, purged=purged).mode == "position":
                    binlog_status.check_position_available(connection, table_state.position, table=name, logs=logs)
            checked.append("offsets: every stored position is still on the server (or its GTID history is)")
        self.store.check_writable(self.config.pipeline)
        checked.append(f"offset store writable: {self.store.describe()}")
        self.sink.check_writable(self.config.sink.path)
        checked.append(f"sink writable: {self.config.sink.path}")
        return checked

    def snapshot(
        self, tables: list[str] | None = None, *, progress: ProgressListener | None = None, restart: bool = False
    ) -> list[SnapshotResult]:
        """Snapshot the chosen tables (all configured ones by default) into Delta; an unfinished snapshot of a
        table resumes where it stopped, unless `restart`."""
        return snapshot_tables(self.context, tables, progress=progress, restart=restart)

    def sync(self, *, until_caught_up: bool = False) -> list[SyncResult]:
        """Run one micro-batch (or batches until the binlog end seen at start is reached)."""
        return sync(self.context, until_caught_up=until_caught_up)

    def status(self, *, runway_warn_hours: float = DEFAULT_RUNWAY_WARN_HOURS) -> list[TableStatus]:
        """Per table: offset, lag, consistency, and the binlog runway, flagged below `runway_warn_hours`."""
        return table_statuses(self.context, runway_warn_hours=runway_warn_hours)

    def resume(self, table: str) -> ResumeResult:
        """Take a stopped (or retrying) table back into the sync at its offset, once the user fixed the cause;
        refused with the re-snapshot remedy when the binlog no longer holds the table's offset."""
        return resume_table(self.context, table)

    def approve_schema_change(self, table: str) -> Decision:
        """Approve the schema change `table` waits at (`schema_policy: approve`): the next sync evolves it."""
        return approve_schema_change(self.context, table)

    def reject_schema_change(self, table: str) -> Decision:
        """Reject the schema change `table` waits at: the table stops until it is re-snapshotted."""
        return reject_schema_change(self.context, table)

    def require_snapshot(self, name: str) -> TableState:
        return require_snapshot(self.read_state(), name)


def check_sink_writable(sink: SinkConfig) -> None:
    """Raise SinkError unless the sink (a local folder, or an s3a:// prefix) can be written."""
    sink_storage(sink).check_writable(sink.path)


__all__ = [
    "BinlakeError",
    "Pipeline",
    "ResumeResult",
    "SnapshotResult",
    "SyncResult",
    "TableBatchResult",
    "TableStatus",
    "check_sink_writable",
    "moves_forward",
    "reached",
    "table_write_failure",
]
