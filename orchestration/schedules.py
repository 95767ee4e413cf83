"""Schedules: the micro-batch (every minute by default, on from the start), the daily reconciliation, and the
follow-mode keeper (off by default: turn it on instead of the micro-batch schedule)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

from assets.naming import LEASE_TAG, PipelineNames
from cdc_lib.errors import ConfigError

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

IN_FLIGHT = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


# Dagster's own run tags for the partitions a run materializes (one partition, or a single-run backfill's range).
PARTITION_TAG = "dagster/partition"
PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"


def run_in_flight(instance: dg.DagsterInstance, pipeline: str) -> str | None:
    """Id of an unfinished run that takes this pipeline's lease (micro-batch or follow), if any.

    Snapshots are not among them: they take their table's lease and run beside the micro-batches.
    """
    records = instance.get_run_records(filters=dg.RunsFilter(tags={LEASE_TAG: pipeline}, statuses=IN_FLIGHT), limit=1)
    return records[0].dagster_run.run_id if records else None


def snapshots_in_flight(instance: dg.DagsterInstance, names: PipelineNames, tables: list[str]) -> dict[str, str]:
    """The tables an unfinished snapshot run of the pipeline loads, each with that run's id.

    Any run that selects the snapshot asset counts, whoever launched it (a sensor, the snapshot job, a backfill
    from the asset's page): its tables come from Dagster's partition tags, in the partitions' order (`tables`).
    """
    loading: dict[str, str] = {}
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=IN_FLIGHT)):
        run = record.dagster_run
        if not run.asset_selection or names.snapshot_key not in run.asset_selection:
            continue
        tags = run.tags
        if PARTITION_TAG in tags:
            chosen = [tags[PARTITION_TAG]]
        elif PARTITION_RANGE_START_TAG in tags and tags.get(PARTITION_RANGE_END_TAG) in tables and \
                tags[PARTITION_RANGE_START_TAG] in tables:
            first, last = tables.index(tags[PARTITION_RANGE_START_TAG]), tables.index(tags[PARTITION_RANGE_END_TAG])
            chosen = tables[first:last + 1]
        else:
            chosen = list(tables)  # no partition named: assume the worst, every table
        for table in chosen:
            loading.setdefault(table, run.run_id)
    return loading


def _checked_cron(cron: str, variable: str) -> str:
    """The cron string, or ConfigError naming the variable if Dagster refuses it."""
    try:
        dg.ScheduleDefinition(name="cron_probe", cron_schedule=cron, job_name="cron_probe")
    except (dg.DagsterInvalidDefinitionError, dg.DagsterInvariantViolationError) as error:
        raise ConfigError(
            variable, f"'{cron}' is not a valid cron expression ({error})", remedy=f"set {variable}, e.g. '* * * * *'"
        ) from None
    return cron


def build_sync_schedule(
    *, names: PipelineNames, job: UnresolvedAssetJobDefinition, cron: str, timezone: str
) -> dg.ScheduleDefinition:
    """One micro-batch per tick; a tick is skipped while a micro-batch or follow run of the pipeline is going
    (a snapshot of a table runs beside it)."""

    @dg.schedule(
        name=names.sync_schedule,
        cron_schedule=_checked_cron(cron, "BINLAKE_SYNC_CRON"),
        job=job,
        execution_timezone=timezone,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"Micro-batch of pipeline `{names.pipeline}` ({cron}); change it with BINLAKE_SYNC_CRON.",
    )
    def sync_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        return _launch_unless_running(context, names)

    return sync_schedule


def build_reconcile_schedule(
    *, names: PipelineNames, job: UnresolvedAssetJobDefinition, cron: str, timezone: str
) -> dg.ScheduleDefinition:
    return dg.ScheduleDefinition(
        name=names.reconcile_schedule,
        cron_schedule=_checked_cron(cron, "BINLAKE_RECONCILE_CRON"),
        job=job,
        execution_timezone=timezone,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        tags=names.run_tags,
        description=f"Source-vs-Delta reconciliation of pipeline `{names.pipeline}` ({cron}); "
        "change it with BINLAKE_RECONCILE_CRON.",
    )


def build_maintenance_schedules(
    *, names: PipelineNames, jobs: dict[str, dg.JobDefinition], cron: str, timezone: str,
) -> list[dg.ScheduleDefinition]:
    """Each table's maintenance on `cron` (its job runs in the maintenance pool, beside the micro-batches)."""
    return [
        dg.ScheduleDefinition(
            name=names.maintenance_schedule(table),
            cron_schedule=_checked_cron(cron, "BINLAKE_MAINTENANCE_CRON"),
            job=job,
            execution_timezone=timezone,
            default_status=dg.DefaultScheduleStatus.RUNNING,
            tags=names.run_tags,
            description=f"Maintenance of `{table}` ({cron}); change it with BINLAKE_MAINTENANCE_CRON, turn it off "
            "per table with sink.tables.<table>.maintenance.enabled: false.",
        )
        for table, job in jobs.items()
    ]


#: The follow schedule's cron: it looks every minute and launches a follow run only when none is going.
FOLLOW_CRON = "* * * * *"


def build_follow_schedule(*, names: PipelineNames, job: dg.JobDefinition, timezone: str) -> dg.ScheduleDefinition:
    """Keeps one follow run going: each tick launches one unless a run of the pipeline is in flight.

    Off by default. Turn it on *instead of* the micro-batch schedule: both take the pipeline's pool and
    lease, so with both on they only take turns (each skips while the other runs).
    """

    @dg.schedule(
        name=names.follow_schedule,
        cron_schedule=FOLLOW_CRON,
        job=job,
        execution_timezone=timezone,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Keeps a follow run of pipeline `{names.pipeline}` going (relaunched within a minute when one "
        "ends). Turn it on instead of the micro-batch schedule, not beside it.",
    )
    def follow_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
        return _launch_unless_running(context, names)

    return follow_schedule


def _launch_unless_running(
    context: dg.ScheduleEvaluationContext, names: PipelineNames
) -> dg.RunRequest | dg.SkipReason:
    """One run per tick, skipped while a micro-batch or follow run of the pipeline is in flight (not a snapshot)."""
    running = run_in_flight(context.instance, names.pipeline)
    if running:
        return dg.SkipReason(f"run {running} of pipeline {names.pipeline} is still in progress")
    tick = context.scheduled_execution_time
    return dg.RunRequest(run_key=tick.isoformat() if tick else None, tags=names.lease_tags)
