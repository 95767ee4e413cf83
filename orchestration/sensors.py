"""Sensors that keep every configured table loaded and surface the ones that stopped.

missing snapshots  A configured table without a snapshot gets a snapshot run (its partition of the
                   snapshot asset). The run key is `snapshot:<table>:<epoch>`, and the cursor remembers
                   which key is pending, so a tick never asks twice; the epoch only grows when a table
                   that had a snapshot loses it (e.g. its offsets were reset). With `db.*` patterns it
                   also lists new matching tables that need a reload of the code location.
table errors       A table whose offsets record an error (purged binlog, schema change) is reported in
                   the tick's skip reason and the log. With `auto_resnapshot` on, its partition is
                   re-snapshotted under run key `resnapshot:<table>:<snapshot time>`: one try per failed
                   snapshot generation.
freshness          Evaluates the freshness checks (`assets.checks.build_freshness_checks`) on Dagster's own
                   sensor for them.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import dagster as dg

from assets.naming import PipelineNames
from cdc_lib.catalog import expand_patterns
from cdc_lib.errors import BinlakeError

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

RUN_KEY_TAG = "dagster/run_key"
REASON_TAG = "binlake/reason"


@dataclass
class SnapshotCursor:
    """What the missing-snapshot sensor has asked for: the pending run key and the epoch per table."""

    pending: dict[str, str] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str | None) -> SnapshotCursor:
        if not text:
            return cls()
        try:
            document = json.loads(text)
        except ValueError:
            return cls()
        return cls(pending=dict(document.get("pending", {})), epochs=dict(document.get("epochs", {})))

    def dump(self) -> str:
        return json.dumps({"pending": self.pending, "epochs": self.epochs}, sort_keys=True)


def _run_state(instance: dg.DagsterInstance, run_key: str) -> str | None:
    records = instance.get_run_records(filters=dg.RunsFilter(tags={RUN_KEY_TAG: run_key}), limit=1)
    if not records:
        return None
    run = records[0].dagster_run
    return f"run {run.run_id[:8]} is {run.status.value}"


def build_missing_snapshot_sensor(
    *,
    names: PipelineNames,
    tables: list[str],
    job: UnresolvedAssetJobDefinition,
    has_patterns: bool,
    interval_seconds: int = 60,
) -> dg.SensorDefinition:
    @dg.sensor(
        name=names.missing_snapshot_sensor,
        job=job,
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Requests a snapshot for each table of pipeline `{names.pipeline}` that has none yet.",
        required_resource_keys={names.resource_key},
    )
    def missing_snapshots(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        binlake = names.resource(context)
        cursor = SnapshotCursor.parse(context.cursor)
        try:
            state = binlake.pipeline().read_state()
        except (BinlakeError, dg.Failure) as error:
            return dg.SensorResult(skip_reason=f"cannot read the pipeline's offsets: {error}", cursor=context.cursor)
        requests: list[dg.RunRequest] = []
        notes: list[str] = []
        for table in tables:
            if table in state.tables:
                cursor.pending.pop(table, None)
                continue
            if table in cursor.pending:
                run_key = cursor.pending[table]
                notes.append(
                    f"{table}: snapshot already requested ({run_key}; "
                    f"{_run_state(context.instance, run_key) or 'run not found yet'})"
                )
                continue
            epoch = cursor.epochs.get(table, 0) + 1
            run_key = f"snapshot:{table}:{epoch}"
            cursor.epochs[table] = epoch
            cursor.pending[table] = run_key
            context.log.info(f"{table} has no snapshot: requesting {run_key}")
            requests.append(
                dg.RunRequest(
                    run_key=run_key, partition_key=table, tags={**names.lease_tags, REASON_TAG: "missing-snapshot"}
                )
            )
        if has_patterns:
            try:
                unloaded = [name for name in expand_patterns(binlake.load_config()) if name not in tables]
            except (BinlakeError, dg.Failure) as error:
                unloaded = []
                notes.append(f"cannot expand the table patterns: {error}")
            if unloaded:
                notes.append(
                    f"new tables match the configured patterns: {', '.join(unloaded)} — reload the code location "
                    "to add their assets"
                )
        if requests:
            return dg.SensorResult(run_requests=requests, cursor=cursor.dump())
        return dg.SensorResult(
            skip_reason="; ".join(notes) or f"all {len(tables)} tables have a snapshot", cursor=cursor.dump()
        )

    return missing_snapshots


def build_table_error_sensor(
    *,
    names: PipelineNames,
    tables: list[str],
    job: UnresolvedAssetJobDefinition,
    interval_seconds: int = 60,
) -> dg.SensorDefinition:
    @dg.sensor(
        name=names.table_error_sensor,
        job=job,
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Reports tables of pipeline `{names.pipeline}` that stopped with an error, and re-snapshots "
        "them when the binlake resource's auto_resnapshot is on.",
        required_resource_keys={names.resource_key},
    )
    def table_errors(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        binlake = names.resource(context)
        try:
            state = binlake.pipeline().read_state()
        except (BinlakeError, dg.Failure) as error:
            return dg.SensorResult(skip_reason=f"cannot read the pipeline's offsets: {error}")
        stopped = {name: table_state for name, table_state in sorted(state.tables.items()) if table_state.error}
        if not stopped:
            return dg.SensorResult(skip_reason="no table has an error")
        for name, table_state in stopped.items():
            context.log.error(f"{name} stopped: {table_state.error}")
        listing = "; ".join(f"{name}: {table_state.error}" for name, table_state in stopped.items())
        if not binlake.auto_resnapshot:
            return dg.SensorResult(
                skip_reason=f"{len(stopped)} table(s) stopped — {listing}. auto_resnapshot is off: launch a "
                f"backfill of job {names.snapshot_job} over {', '.join(stopped)} (or set BINLAKE_AUTO_RESNAPSHOT=1)."
            )
        requests = [
            dg.RunRequest(
                run_key=f"resnapshot:{name}:{table_state.snapshot_at}",
                partition_key=name,
                tags={**names.lease_tags, REASON_TAG: "table-error"},
            )
            for name, table_state in stopped.items()
            if name in tables
        ]
        orphans = [name for name in stopped if name not in tables]
        if not requests:
            return dg.SensorResult(
                skip_reason=f"{listing}. Not configured any more, so not re-snapshotted: {', '.join(orphans)}"
            )
        return dg.SensorResult(run_requests=requests)

    return table_errors


def build_freshness_sensor(*, names: PipelineNames, checks: list[dg.AssetChecksDefinition]) -> dg.SensorDefinition:
    """Evaluates the freshness checks (see `assets.checks.build_freshness_checks` for why not FreshnessPolicy)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.SupersessionWarning)
        return dg.build_sensor_for_freshness_checks(
            freshness_checks=checks,
            name=names.freshness_sensor,
            default_status=dg.DefaultSensorStatus.RUNNING,
            tags=names.run_tags,
        )
