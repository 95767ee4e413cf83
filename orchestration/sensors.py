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
freshness          Evaluates the freshness checks (`assets.checks.build_freshness_checks`): not before the
                   first micro-batch has recorded a table, again when a passed check may be overdue, and
                   again when a failed check's table got newer data (an observation counts).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import dagster as dg

from assets.naming import PipelineNames
from cdc_lib.errors import BinlakeError
from cdc_lib.source.discovery import expand_patterns
from orchestration.schedules import snapshots_in_flight

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
    from dagster._core.storage.event_log.base import AssetCheckSummaryRecord

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
        loading = snapshots_in_flight(context.instance, names, tables)
        for table in tables:
            if table in state.tables:
                cursor.pending.pop(table, None)
                continue
            if table in loading and table not in cursor.pending:
                notes.append(f"{table}: being snapshotted by run {loading[table][:8]}")
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
                    run_key=run_key, partition_key=table,
                    tags={**names.snapshot_table_tags(table), REASON_TAG: "missing-snapshot"},
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
        # A passing fault is shown, never re-snapshotted: a later micro-batch retries the table by itself.
        retrying = {name: table_state.retrying.describe() for name, table_state in sorted(state.tables.items())
                    if table_state.retrying is not None and not table_state.error}
        for name, text in retrying.items():
            context.log.warning(f"{name} {text}")
        waiting = "".join(f" {name} {text}." for name, text in retrying.items())
        if not stopped:
            return dg.SensorResult(skip_reason="no table has an error" + ("." + waiting if waiting else ""))
        for name, table_state in stopped.items():
            context.log.error(f"{name} stopped: {table_state.error}")
        listing = "; ".join(f"{name}: {table_state.error}" for name, table_state in stopped.items()) + \
            ("." + waiting if waiting else "")
        if not binlake.auto_resnapshot:
            return dg.SensorResult(
                skip_reason=f"{len(stopped)} table(s) stopped — {listing}. auto_resnapshot is off: launch a "
                f"backfill of job {names.snapshot_job} over {', '.join(stopped)} (or set BINLAKE_AUTO_RESNAPSHOT=1)."
            )
        loading = snapshots_in_flight(context.instance, names, tables)
        requests = [
            dg.RunRequest(
                run_key=f"resnapshot:{name}:{table_state.snapshot_at}",
                partition_key=name,
                tags={**names.snapshot_table_tags(name), REASON_TAG: "table-error"},
            )
            for name, table_state in stopped.items()
            if name in tables and name not in loading  # one snapshot of a table at a time
            # A table waiting for a person's approval of its schema change waits for the person, not a snapshot.
            and table_state.schema_change is None
        ]
        orphans = [name for name in stopped if name not in tables]
        if not requests:
            busy = [name for name in stopped if name in loading]
            return dg.SensorResult(
                skip_reason=f"{listing}."
                + (f" Not configured any more, so not re-snapshotted: {', '.join(orphans)}." if orphans else "")
                + (f" Being snapshotted already: {', '.join(busy)}." if busy else "")
            )
        return dg.SensorResult(run_requests=requests)

    return table_errors


# Metadata keys of Dagster's last-update freshness checks and of the events they read.
LAST_UPDATED_KEY = "dagster/last_updated_timestamp"
FRESH_UNTIL_KEY = "dagster/fresh_until_timestamp"


@dataclass(frozen=True)
class LastUpdate:
    """What Dagster has recorded of an asset, as a last-update freshness check reads it."""

    #: Whether the asset has any materialization or observation at all.
    recorded: bool
    #: When its data was last brought up to date: the newest `dagster/last_updated_timestamp` of a
    #: materialization or observation (a materialization's own time without it).
    at: float | None


def last_update(instance: dg.DagsterInstance, key: dg.AssetKey) -> LastUpdate:
    times: list[float] = []
    recorded = False
    for records in (instance.fetch_materializations(key, limit=1), instance.fetch_observations(key, limit=1)):
        for record in records.records:
            recorded = True
            entry = record.event_log_entry
            event = entry.asset_materialization or entry.asset_observation
            stamped = event.metadata.get(LAST_UPDATED_KEY) if event is not None else None
            if stamped is not None:
                times.append(float(stamped.value))  # type: ignore[arg-type]  # a TimestampMetadataValue's float
            elif entry.asset_materialization is not None:
                times.append(entry.timestamp)
    return LastUpdate(recorded=recorded, at=max(times) if times else None)


@dataclass(frozen=True)
class FreshnessDecision:
    due: bool
    reason: str


def freshness_decision(
    instance: dg.DagsterInstance, check_key: dg.AssetCheckKey, summary: AssetCheckSummaryRecord | None, *, now: float
) -> FreshnessDecision:
    """Whether to evaluate one freshness check now, given its latest execution records (`summary`)."""
    update = last_update(instance, check_key.asset_key)
    if not update.recorded:
        # Before the first micro-batch has recorded the table there is nothing to judge: evaluating now would
        # fail a healthy table (and Dagster's own sensor would then never re-run it on observations alone).
        return FreshnessDecision(False, "waiting for the first micro-batch to record the table")
    latest = summary.last_check_execution_record if summary is not None else None
    completed = summary.last_completed_check_execution_record if summary is not None else None
    if latest is not None and latest.status.value == "PLANNED":
        run = instance.get_run_record_by_id(latest.run_id)
        if run is not None and not run.dagster_run.is_finished:
            return FreshnessDecision(False, f"being evaluated by run {latest.run_id[:8]}")
    evaluation = completed.evaluation if completed is not None else None
    if evaluation is None:
        return FreshnessDecision(True, "never evaluated")
    if evaluation.passed:
        fresh_until = evaluation.metadata.get(FRESH_UNTIL_KEY)
        if fresh_until is None or float(fresh_until.value) <= now:  # type: ignore[arg-type]
            return FreshnessDecision(True, "may be overdue now")
        return FreshnessDecision(False, "fresh")
    # A failed check is evaluated again once the table's data is newer than what the failure saw; an
    # observation counts, since an idle CDC table is kept current by observations, not materializations.
    seen = evaluation.metadata.get(LAST_UPDATED_KEY)
    if update.at is not None and (seen is None or update.at > float(seen.value)):  # type: ignore[arg-type]
        return FreshnessDecision(True, "updated since it failed")
    return FreshnessDecision(False, "overdue, no update since it failed")


def _latest_record_id(summary: AssetCheckSummaryRecord | None) -> int | None:
    latest = summary.last_check_execution_record if summary is not None else None
    return latest.id if latest is not None else None


def build_freshness_sensor(
    *, names: PipelineNames, checks: list[dg.AssetChecksDefinition], interval_seconds: int = 30
) -> dg.SensorDefinition:
    """Evaluates the freshness checks (see `assets.checks.build_freshness_checks` for why not FreshnessPolicy).

    Dagster's `build_sensor_for_freshness_checks` evaluates a check before the asset has any record (a failure
    on a table the first micro-batch has not reached yet) and re-evaluates a failed check only after a
    materialization, never after an observation; an idle CDC table would stay failed although current. This
    one waits for the first record and re-evaluates a failed check once the table's data is newer.
    """
    check_keys = sorted(
        (spec.key for definition in checks for spec in definition.check_specs), key=lambda key: key.to_user_string()
    )

    @dg.sensor(
        name=names.freshness_sensor,
        asset_selection=dg.AssetSelection.checks(*checks),
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Evaluates the freshness checks of pipeline `{names.pipeline}` when one may have changed: "
        "never before the first micro-batch has recorded a table.",
    )
    def freshness(context: dg.SensorEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        now = time.time()
        summaries = context.instance.event_log_storage.get_asset_check_summary_records(check_keys)
        decisions = {key: freshness_decision(context.instance, key, summaries.get(key), now=now) for key in check_keys}
        due = [key for key, decision in decisions.items() if decision.due]
        if not due:
            waiting: dict[str, list[str]] = {}
            for key, decision in decisions.items():
                waiting.setdefault(decision.reason, []).append(key.asset_key.path[-1])
            return dg.SkipReason("; ".join(f"{reason}: {', '.join(tables)}" for reason, tables in waiting.items()))
        for key in due:
            context.log.info(f"{key.to_user_string()}: {decisions[key].reason}")
        # The run key names each due check's latest execution record: a tick never launches the same
        # evaluation twice, and a run that died before evaluating leaves a new record, hence a new key.
        marks = ",".join(f"{key.to_user_string()}@{_latest_record_id(summaries.get(key))}" for key in due)
        run_key = "freshness:" + hashlib.sha256(marks.encode()).hexdigest()[:20]
        return dg.RunRequest(asset_check_keys=due, tags=names.run_tags, run_key=run_key)

    return freshness
