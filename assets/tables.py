"""One Delta asset per source table, the snapshot asset that loads them, and the micro-batch that keeps them in step.

Data flow (one pipeline):

    mysql/<p>/<db>/<table>  (external: the source table)
            │                       │
            ▼                       │
    binlake/<p>/snapshot            │   partitioned by table name: a backfill over
            │                       │   the chosen partitions runs pipeline.snapshot(...)
            ▼                       ▼
    binlake/<p>/<db>/<table>  ← one multi_asset: a single binlog read (pipeline.sync())
                                 serves every table; only tables that changed are
                                 materialized, the others are observed (lag, offset)

A table loaded outside Dagster (the CLI) is recorded as materialized on the first
run that finds its healthy Delta copy unknown to the instance (`assets.discovery`).

The cheap health checks (consistency, lag, binlog runway) run inside the
micro-batch step, so every scheduled run refreshes them for every table.
"""

import datetime as dt
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import dagster as dg

from assets.checks import health_check_specs, health_results
from assets.discovery import (
    DISCOVERED_KIND,
    DiscoveredTable,
    discovered_snapshot_metadata,
    discovery_description,
    tables_to_discover,
)
from assets.metrics import metric_observations
from assets.naming import PipelineNames
from assets.resources import TRANSIENT_RETRY, engine_errors, jvm_output_to_log_file
from assets.schema_approval import approval_check_specs, approval_tables
from cdc_lib.changes import metadata_columns
from cdc_lib.changes.columns import sink_schema, with_ignored
from cdc_lib.config.model import ColumnMask, ColumnRules, Freshness, PipelineConfig
from cdc_lib.display.progress import ProgressLines
from cdc_lib.model.tables import TableRef
from cdc_lib.model.tables import TableSchema as SourceSchema
from cdc_lib.model.types import spark_type_ddl
from cdc_lib.pipeline.pipeline import Pipeline, SyncResult, TableBatchResult, TableStatus
from cdc_lib.snapshot.jdbc_read import SnapshotResult
from cdc_lib.snapshot.progress import SnapshotProgress
from cdc_lib.state.offsets import PipelineState

KINDS = {"mysql", "spark", "delta"}
#: The snapshot's progress in the run log: a line per table at most this often (and at its start and end).
PROGRESS_LOG_SECONDS = 30.0


@dataclass(frozen=True)
class TableAssets:
    """Everything `build_table_assets` makes for one pipeline."""

    names: PipelineNames
    tables: tuple[str, ...]
    partitions: dg.StaticPartitionsDefinition
    source_specs: tuple[dg.AssetSpec, ...]
    snapshot: dg.AssetsDefinition
    sync: dg.AssetsDefinition
    #: The tables under `schema_policy: approve`: they carry the blocking schema approval check.
    approval_tables: tuple[str, ...] = ()

    @property
    def table_keys(self) -> list[dg.AssetKey]:
        return [self.names.table_key(table) for table in self.tables]

    def table_for(self, key: dg.AssetKey) -> str:
        for table in self.tables:
            if self.names.table_key(table) == key:
                return table
        raise KeyError(key)


# -- metadata -------------------------------------------------------------------------------------


def column_schema(table: str, schema_json: dict[str, Any], *, with_metadata_columns: bool = False,
                  rules: ColumnRules | None = None) -> dg.TableSchema:
    """The Delta table's columns (Spark types), each described by its MySQL type; key columns marked; then
    binlake's metadata columns when the table has them (`sink.metadata_columns`).

    `rules` (`sink.tables.<t>.columns`/`.mask`): only the landed columns are listed, a masked one with its mask
    and its Delta type (a hash is a string whatever the source type); `excluded_columns` names the others.
    """
    source = SourceSchema.from_json(TableRef.parse(table), schema_json)
    # Not strict: the state's schema may have lost a column a rule names (a DDL dropped it), which is not an error.
    schema = sink_schema(source, rules, strict=False)
    masks = rules.mask if rules is not None else {}
    sources = {column.name: column for column in source.columns}
    extra = [
        dg.TableColumn(name=name, type="timestamp", description=description)
        for name, description in (
            (metadata_columns.SOURCE_TS, "binlake: source commit time of the row's last change (UTC, seconds)"),
            (metadata_columns.APPLIED_TS, "binlake: when the batch that wrote the row was applied (UTC)"),
        )
    ] if with_metadata_columns else []
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name=column.name,
                type=spark_type_ddl(column),
                description=f"MySQL {sources[column.name].column_type}"
                + (" — primary key" if column.name in schema.primary_key else "")
                + (f" — masked: {describe_mask(masks[column.name])}" if column.name in masks else ""),
                constraints=dg.TableColumnConstraints(
                    nullable=column.nullable,
                    unique=schema.primary_key == (column.name,),
                    other=["primary key"] if column.name in schema.primary_key else [],
                ),
            )
            for column in schema.columns
        ] + extra
    )


def describe_mask(mask: ColumnMask) -> str:
    """A mask as the column's metadata shows it: the rule, never a key (a hash names only its variable)."""
    if mask.kind == "hash":
        return f"hash (HMAC-SHA256, key in ${mask.key_env})"
    if mask.kind == "redact":
        return "redact (NULL)" if mask.value is None else f"redact ('{mask.value}')"
    if mask.kind == "truncate":
        return f"truncate (first {mask.length} characters)"
    return f"partial (first {mask.keep_first} and last {mask.keep_last} characters kept, the rest '{mask.fill}')"


def excluded_columns(table: str, schema_json: dict[str, Any], rules: ColumnRules | None) -> list[str]:
    """The source columns the table's rules leave out of Delta, in source order."""
    if rules is None:
        return []
    names = SourceSchema.from_json(TableRef.parse(table), schema_json).column_names
    if rules.include is not None:
        return [name for name in names if name not in rules.include]
    return [name for name in names if name in rules.exclude]


def columns_metadata(table: str, schema_json: dict[str, Any], pipeline: Pipeline,
                     ignored: tuple[str, ...] = ()) -> dict[str, Any]:
    """`dagster/column_schema` (the landed columns) and, where rules leave columns out, `excluded_columns`; the
    columns `schema_policy: ignore_new_columns` keeps out (`TableState.ignored_columns`) are named apart, in
    `ignored_columns`, since a re-snapshot lands them and a rule never would."""
    configured = pipeline.config.sink.column_rules_for(table)
    rules = with_ignored(configured, ignored)
    metadata: dict[str, Any] = {"dagster/column_schema": column_schema(
        table, schema_json, with_metadata_columns=pipeline.config.sink.metadata_columns_for(table), rules=rules,
    )}
    excluded = excluded_columns(table, schema_json, configured)
    if excluded:
        metadata["excluded_columns"] = dg.MetadataValue.text(", ".join(excluded))
    present = set(SourceSchema.from_json(TableRef.parse(table), schema_json).column_names)
    kept_out = [name for name in ignored if name in present and name not in excluded]
    if kept_out:
        metadata["ignored_columns"] = dg.MetadataValue.text(", ".join(kept_out))
    return metadata


def _position_metadata(position: str | None) -> dict[str, Any]:
    if not position:
        return {}
    point = position.split(" ", 1)[0]
    file_name, _, offset = point.rpartition(":")
    metadata: dict[str, Any] = {"binlog_position": dg.MetadataValue.text(position)}
    if file_name and offset.isdigit():
        metadata["binlog_file"] = dg.MetadataValue.text(file_name)
        metadata["binlog_offset"] = dg.MetadataValue.int(int(offset))
    return metadata


def status_metadata(status: TableStatus | None) -> dict[str, Any]:
    """Lag, offset and Delta version as numbers the UI can plot."""
    if status is None:
        return {}
    metadata: dict[str, Any] = {"consistent": dg.MetadataValue.bool(status.consistent)}
    if status.lag_seconds is not None:
        metadata["lag_seconds"] = dg.MetadataValue.float(float(status.lag_seconds))
    if status.lag_bytes is not None:
        metadata["lag_bytes"] = dg.MetadataValue.int(int(status.lag_bytes))
    if status.lag_events is not None:
        metadata["lag_events"] = dg.MetadataValue.int(int(status.lag_events))
    if status.delta_version is not None:
        metadata["delta_version"] = dg.MetadataValue.int(int(status.delta_version))
    metadata.update(_position_metadata(status.position))
    if status.error:
        metadata["error"] = dg.MetadataValue.text(status.error)
    return metadata


@dataclass
class BatchSummary:
    """The micro-batches of one run, added up."""

    events_read: int = 0
    row_changes: int = 0
    transactions: int = 0
    seconds: float = 0.0
    batch_seq: int | None = None
    spark_started: bool = False
    #: Per table, its results added up: counts summed, the last batch's Delta version and position, any error.
    tables: dict[str, TableBatchResult] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, results: list[SyncResult]) -> "BatchSummary":
        summary = cls()
        for result in results:
            summary.events_read += result.events_read
            summary.row_changes += result.row_changes
            summary.transactions += result.transactions
            summary.seconds += result.seconds
            summary.batch_seq = result.batch_seq if result.batch_seq is not None else summary.batch_seq
            summary.spark_started = summary.spark_started or result.spark_started
            summary.skipped.update(result.skipped_tables)
            for table_result in result.tables:
                earlier = summary.tables.get(table_result.table)
                summary.tables[table_result.table] = table_result if earlier is None else replace(
                    table_result,
                    inserted=earlier.inserted + table_result.inserted,
                    updated=earlier.updated + table_result.updated,
                    deleted=earlier.deleted + table_result.deleted,
                    rows_written=earlier.rows_written + table_result.rows_written,
                    error=table_result.error or earlier.error,
                )
        return summary

    def changed(self, table: str) -> bool:
        """Whether the run's batches wrote to the table (or decoded changes for it)."""
        result = self.tables.get(table)
        if result is None:
            return False
        return result.rows_written > 0 or result.inserted + result.updated + result.deleted > 0

    def metadata(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "events_read": dg.MetadataValue.int(self.events_read),
            "transactions": dg.MetadataValue.int(self.transactions),
            "batch_seconds": dg.MetadataValue.float(round(self.seconds, 3)),
            "spark_started": dg.MetadataValue.bool(self.spark_started),
        }
        if self.batch_seq is not None:
            metadata["batch_seq"] = dg.MetadataValue.int(self.batch_seq)
        return metadata


def change_metadata(
    table: str, batch: BatchSummary, status: TableStatus | None, state: PipelineState, pipeline: Pipeline
) -> dict[str, Any]:
    """Metadata of a table a micro-batch changed: row counts, batch numbers, lag, offset, Delta version."""
    changes = batch.tables[table]
    metadata: dict[str, Any] = {
        "rows_inserted": dg.MetadataValue.int(changes.inserted),
        "rows_updated": dg.MetadataValue.int(changes.updated),
        "rows_deleted": dg.MetadataValue.int(changes.deleted),
        "rows_written": dg.MetadataValue.int(changes.rows_written),
        **batch.metadata(),
        **status_metadata(status),
        "dagster/uri": dg.MetadataValue.path(pipeline.table_path(table)),
    }
    if changes.delta_version is not None:
        metadata["delta_version"] = dg.MetadataValue.int(changes.delta_version)
    table_state = state.tables.get(table)
    if table_state is not None:
        metadata.update(columns_metadata(table, table_state.schema, pipeline, table_state.ignored_columns))
    return metadata


@dataclass(frozen=True)
class TableRecord:
    """What a run records about one table after its batches: a materialization when they wrote to it, else an
    observation (lag, offset)."""

    key: dg.AssetKey
    table: str
    changed: bool
    metadata: dict[str, Any]
    #: The error the table stopped with in these batches, if it did.
    error: str | None

    def event(self) -> dg.AssetMaterialization | dg.AssetObservation:
        """The record as a run-log event, for a table the step does not materialize through its outputs."""
        if self.changed:
            return dg.AssetMaterialization(asset_key=self.key, metadata=self.metadata)
        return dg.AssetObservation(asset_key=self.key, metadata=self.metadata)


def batch_records(
    *,
    names: PipelineNames,
    pipeline: Pipeline,
    batch: BatchSummary,
    tables: list[str],
    statuses: dict[str, TableStatus],
    state: PipelineState,
    now: float,
) -> list[TableRecord]:
    """One record per table after a run's batches: the one account of them the micro-batch and follow mode share."""
    records = []
    for table in tables:
        status = statuses.get(table)
        changes = batch.tables.get(table)
        changed = batch.changed(table)
        metadata = (
            change_metadata(table, batch, status, state, pipeline) if changed
            else observation_metadata(status, now=now)
        )
        records.append(TableRecord(key=names.table_key(table), table=table, changed=changed, metadata=metadata,
                                   error=changes.error if changes is not None else None))
    return records


def observation_metadata(status: TableStatus | None, *, now: float) -> dict[str, Any]:
    """Metadata of a table with no change: its lag, and (when healthy) how current the copy is."""
    metadata = status_metadata(status)
    if status is not None and status.snapshotted and not status.error and status.lag_seconds is not None:
        # The copy holds every source change up to (now - lag): that is when its data was last brought up to date.
        metadata["dagster/last_updated_timestamp"] = dg.MetadataValue.timestamp(now - float(status.lag_seconds))
    return metadata


def discovered_metadata(
    found: DiscoveredTable, status: TableStatus | None, state: PipelineState, pipeline: Pipeline, *, now: float
) -> dict[str, Any]:
    """Metadata of a table recorded from its existing Delta copy: its Delta version, lag, offset and schema.

    No row count: counting would start Spark (or replay the Delta log's statistics) on a run with nothing to
    write; the rows the snapshot loaded are given instead.
    """
    metadata: dict[str, Any] = {
        "kind": dg.MetadataValue.text(DISCOVERED_KIND),
        **observation_metadata(status, now=now),
        "delta_version": dg.MetadataValue.int(found.delta_version),
        "dagster/uri": dg.MetadataValue.path(pipeline.table_path(found.table)),
    }
    table_state = state.tables.get(found.table)
    if table_state is not None:
        metadata["rows_at_snapshot"] = dg.MetadataValue.int(table_state.rows_snapshotted)
        metadata.update(columns_metadata(found.table, table_state.schema, pipeline,
                                         table_state.ignored_columns))
    return metadata


def snapshot_metadata(result: SnapshotResult, state: PipelineState, pipeline: Pipeline) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "kind": dg.MetadataValue.text("snapshot"),
        "dagster/row_count": dg.MetadataValue.int(result.rows),
        "rows": dg.MetadataValue.int(result.rows),
        "snapshot_seconds": dg.MetadataValue.float(round(result.seconds, 3)),
        "partitions_read": dg.MetadataValue.int(result.partitions),
        "delta_version": dg.MetadataValue.int(result.delta_version),
        "low_watermark": dg.MetadataValue.text(result.low_watermark),
        "high_watermark": dg.MetadataValue.text(result.high_watermark),
        "dagster/uri": dg.MetadataValue.path(pipeline.table_path(result.table)),
    }
    if result.registered_as:
        metadata["registered_as"] = dg.MetadataValue.text(result.registered_as)
    if result.catalog_error:
        metadata["catalog_error"] = dg.MetadataValue.text(result.catalog_error)
    table_state = state.tables.get(result.table)
    if table_state is not None:
        metadata.update(columns_metadata(result.table, table_state.schema, pipeline,
                                         table_state.ignored_columns))
    return metadata


def progress_metadata(progress: SnapshotProgress | None) -> dict[str, Any]:
    """How the snapshot went, as the progress display last saw it: chunks, rows, pace, time, what a resume kept."""
    if progress is None:
        return {}
    return {
        "chunks": dg.MetadataValue.int(progress.chunks_done),
        "chunks_total": dg.MetadataValue.int(progress.chunks_total),
        "chunks_resumed": dg.MetadataValue.int(progress.chunks_resumed),
        "rows_read": dg.MetadataValue.int(progress.rows_done),
        "rows_per_second": dg.MetadataValue.float(round(progress.rows_per_second, 1)),
        "seconds": dg.MetadataValue.float(round(progress.elapsed_seconds, 3)),
    }


# -- builders -------------------------------------------------------------------------------------


def source_spec(*, config: PipelineConfig, names: PipelineNames, table: str) -> dg.AssetSpec:
    """The MySQL table, as an external asset upstream of its Delta copy."""
    where = f"{config.source.host}:{config.source.port}"
    return dg.AssetSpec(
        key=names.source_key(table),
        description=f"MySQL/MariaDB table `{table}` on {where}, read by binlake pipeline `{config.pipeline}`.",
        group_name=names.group(table),
        kinds={"mysql"},
        metadata={"server": where, "table": table},
        tags={"binlake/pipeline": config.pipeline},
    )


def table_spec(*, config: PipelineConfig, names: PipelineNames, table: str) -> dg.AssetSpec:
    """The Delta copy of one table."""
    ref = TableRef.parse(table)
    path = config.sink.table_path(ref.database, ref.table)
    return dg.AssetSpec(
        key=names.table_key(table),
        deps=[names.source_key(table), names.snapshot_key],
        description=(
            f"Delta Lake copy of MySQL table `{table}` at `{path}`, kept in step with the source's binlog by "
            f"binlake pipeline `{config.pipeline}`. A snapshot (re)loads it; each scheduled micro-batch MERGEs "
            "the committed row changes since the table's own binlog offset."
        ),
        group_name=names.group(table),
        kinds=KINDS,
        metadata={"dagster/uri": dg.MetadataValue.path(path), "source_table": table, "pipeline": config.pipeline},
        tags={"binlake/pipeline": config.pipeline},
        skippable=True,
        freshness_policy=freshness_policy(config.sink.freshness_for(table)),
    )


def freshness_policy(freshness: Freshness | None) -> dg.FreshnessPolicy | None:
    """Dagster's own freshness policy for a table's `freshness` setting (docs/dagster.md#freshness).

    Dagster 1.13 judges it by the asset's last materialization only, and a micro-batch materializes a table only
    when it wrote a change to it: the policy says "a source change reached the Delta table within the window"
    (what dbt's source freshness says over `_binlake_applied_ts`), for tables whose source changes that often.
    Whether binlake keeps up with an idle table is the last-update freshness check's (`assets.checks`), which
    also counts the observations of unchanged tables.
    """
    if freshness is None:
        return None
    warn = freshness.warn_after_minutes
    return dg.FreshnessPolicy.time_window(
        fail_window=dt.timedelta(minutes=freshness.fail_after_minutes),
        warn_window=dt.timedelta(minutes=warn) if warn is not None else None,
    )


def build_table_assets(*, config: PipelineConfig, tables: list[str]) -> TableAssets:
    """Source specs, the snapshot asset and the micro-batch multi_asset for the given tables."""
    names = PipelineNames(config.pipeline)
    partitions = dg.StaticPartitionsDefinition(list(tables))
    source_specs = tuple(source_spec(config=config, names=names, table=table) for table in tables)
    snapshot = _build_snapshot_asset(config=config, names=names, tables=tables, partitions=partitions)
    sync = _build_sync_asset(config=config, names=names, tables=tables)
    return TableAssets(
        names=names,
        tables=tuple(tables),
        partitions=partitions,
        source_specs=source_specs,
        snapshot=snapshot,
        sync=sync,
        approval_tables=tuple(approval_tables(config, tables)),
    )


def _build_snapshot_asset(
    *, config: PipelineConfig, names: PipelineNames, tables: list[str], partitions: dg.StaticPartitionsDefinition
) -> dg.AssetsDefinition:
    with warnings.catch_warnings():
        # BackfillPolicy is beta in Dagster 1.13; single_run lets one run (one Spark session) load many tables.
        warnings.simplefilter("ignore", dg.BetaWarning)
        return _snapshot_asset(config=config, names=names, tables=tables, partitions=partitions)


def _snapshot_asset(
    *, config: PipelineConfig, names: PipelineNames, tables: list[str], partitions: dg.StaticPartitionsDefinition
) -> dg.AssetsDefinition:
    @dg.asset(
        key=names.snapshot_key,
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        deps=[names.source_key(table) for table in tables],
        group_name=names.control_group,
        kinds=KINDS,
        # Its own pool, not the micro-batch's: a snapshot takes its table's lease, so the sync runs beside it.
        pool=names.snapshot_pool,
        retry_policy=TRANSIENT_RETRY,
        required_resource_keys={names.resource_key},
        tags={"binlake/pipeline": config.pipeline},
        description=(
            f"Lock-free snapshots of the tables of pipeline `{config.pipeline}`, one partition per table. "
            "Materializing partitions (a backfill) re-reads exactly those tables over parallel JDBC and "
            "replaces their Delta copies; the binlog micro-batches then continue from each table's low watermark."
        ),
    )
    def snapshot(context: dg.AssetExecutionContext) -> Iterator[dg.MaterializeResult[None]]:
        binlake = names.resource(context)
        chosen = list(context.partition_keys)
        pipeline = binlake.pipeline()
        context.log.info(f"snapshotting {', '.join(chosen)}")
        progress = ProgressLines(context.log.info, interval_seconds=PROGRESS_LOG_SECONDS)
        with engine_errors(f"snapshot of {', '.join(chosen)}", context.log), jvm_output_to_log_file(context.log):
            results = pipeline.snapshot(chosen, progress=progress)
            state = pipeline.read_state()
        metadata: dict[str, Any] = {
            "tables": dg.MetadataValue.text(", ".join(result.table for result in results)),
            "rows": dg.MetadataValue.int(sum(result.rows for result in results)),
            "snapshot_seconds": dg.MetadataValue.float(round(sum(result.seconds for result in results), 3)),
        }
        if len(results) == 1:
            metadata.update(snapshot_metadata(results[0], state, pipeline))
            metadata.update(progress_metadata(progress.latest.get(results[0].table)))
        yield dg.MaterializeResult(metadata=metadata)
        # Recorded after the snapshot partitions, so each Delta table reads as up to date with its snapshot.
        for result in results:
            context.log.info(
                f"{result.table}: {result.rows} rows in {result.seconds:.1f}s → Delta v{result.delta_version} "
                f"(low {result.low_watermark}, high {result.high_watermark})"
                + (f", registered as {result.registered_as}" if result.registered_as else "")
            )
            if result.catalog_error:
                context.log.warning(f"{result.table}: catalog: NOT REGISTERED (the snapshot stands) — "
                                    f"{result.catalog_error}")
            context.log_event(
                dg.AssetMaterialization(
                    asset_key=names.table_key(result.table),
                    description=f"snapshot: {result.rows} rows",
                    metadata={
                        **snapshot_metadata(result, state, pipeline),
                        **progress_metadata(progress.latest.get(result.table)),
                    },
                )
            )

    return snapshot


def _build_sync_asset(*, config: PipelineConfig, names: PipelineNames, tables: list[str]) -> dg.AssetsDefinition:
    by_key = {names.table_key(table): table for table in tables}

    @dg.multi_asset(
        name=names.sync_op,
        specs=[table_spec(config=config, names=names, table=table) for table in tables],
        check_specs=health_check_specs(names=names, tables=tables)
        + approval_check_specs(names=names, tables=approval_tables(config, tables)),
        can_subset=True,
        pool=names.pool,
        retry_policy=TRANSIENT_RETRY,
        required_resource_keys={names.resource_key},
        description=(
            f"One binlog micro-batch of pipeline `{config.pipeline}`: reads the binlog once from the smallest table "
            "offset and MERGEs each changed table. Unchanged tables are observed (lag, offset), not re-materialized."
        ),
    )
    def sync(context: dg.AssetExecutionContext) -> Iterator[Any]:
        binlake = names.resource(context)
        pipeline = binlake.pipeline()
        selected = set(context.selected_asset_keys)
        results: list[SyncResult] = []
        if selected:
            with engine_errors("binlog micro-batch", context.log), jvm_output_to_log_file(context.log):
                results = pipeline.sync()
        batch = BatchSummary.of(results)
        with engine_errors("reading the pipeline status", context.log):
            statuses = {status.table: status for status in pipeline.status()}
            state = pipeline.read_state()
        now = time.time()
        with engine_errors("reading the Delta logs of tables new to this instance", context.log):
            discovered = {
                found.table: found
                for found in tables_to_discover(
                    instance=context.instance, names=names, pipeline=pipeline, statuses=statuses,
                    tables=[table for key, table in by_key.items() if key in selected and not batch.changed(table)],
                )
            }
        records = batch_records(
            names=names, pipeline=pipeline, batch=batch, tables=list(by_key.values()), statuses=statuses,
            state=state, now=now,
        )
        # Before the tables' own records: Dagster's freshness check reads a table's latest observation only, and
        # the lag observation (with `dagster/last_updated_timestamp`) must be that one.
        try:  # the batch is committed: metrics binlake cannot read are a warning, not a failed run
            for observation in metric_observations(names=names, pipeline=pipeline, statuses=list(statuses.values()),
                                                   tables=[table for key, table in by_key.items() if key in selected]):
                context.log_event(observation)
        except Exception as error:  # noqa: BLE001 - see above
            context.log.warning(f"binlake metrics not recorded: {type(error).__name__}: {error}")
        for record in records:
            key, table, status = record.key, record.table, statuses.get(record.table)
            if record.error:
                context.log.error(f"{table} stopped: {record.error}")
            if record.changed:
                if key in selected:
                    yield dg.MaterializeResult(asset_key=key, metadata=record.metadata)
                else:
                    # The single binlog read wrote this table although it was not selected: record it truthfully.
                    context.log_event(record.event())
            elif table in discovered:
                found = discovered[table]
                context.log.info(f"{table}: loaded outside Dagster, recorded at Delta version {found.delta_version}")
                if found.snapshot_partition_missing:
                    # Before the table's own record, so the copy reads as up to date with its snapshot.
                    context.log_event(
                        dg.AssetMaterialization(
                            asset_key=names.snapshot_key, partition=table, description=discovery_description(table),
                            metadata=discovered_snapshot_metadata(table, state),
                        )
                    )
                yield dg.MaterializeResult(
                    asset_key=key, metadata=discovered_metadata(found, status, state, pipeline, now=now)
                )
            elif key in selected:
                context.log_event(record.event())
        for name, reason in batch.skipped.items():
            context.log.warning(f"{name} skipped: {reason}")
        if results:
            context.log.info(
                f"micro-batch: {batch.row_changes} row changes in {batch.transactions} transactions, "
                f"{batch.events_read} events in {batch.seconds:.2f}s"
                + ("" if batch.spark_started else " (Spark not started)" if batch.row_changes
                   else " (no change: Spark not started)")
            )
        check_keys = set(context.selected_asset_check_keys)
        if check_keys:
            yield from health_results(
                log=context.log, binlake=binlake, pipeline=pipeline, by_key=by_key, statuses=statuses,
                check_keys=check_keys,
            )

    return sync
