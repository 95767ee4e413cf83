"""Table maintenance in Dagster: one job per table, in a pool of its own, beside the micro-batches.

The work is `cdc_lib.maintenance.run.maintain` (compaction, VACUUM, checkpoints, leftovers); it takes no lease, so
its pool (`PipelineNames.maintenance_pool`) is not the sync's: a maintenance run never holds back a batch, and a
batch commit it meets makes maintenance, not the batch, try again. Each run is observed on the table's asset.
"""

import dagster as dg

from assets.naming import PipelineNames
from assets.resources import TRANSIENT_RETRY, BinlakeResource, engine_errors, jvm_output_to_log_file
from cdc_lib.maintenance.run import maintain


def build_maintenance_jobs(*, names: PipelineNames, tables: list[str]) -> list[dg.JobDefinition]:
    """A maintenance job per table (`binlake maintain --table <table>`)."""
    return [_maintenance_job(names, table) for table in tables]


def _maintenance_job(names: PipelineNames, table: str) -> dg.JobDefinition:
    @dg.op(
        name=f"{names.maintenance_job(table)}_op",
        pool=names.maintenance_pool,
        retry_policy=TRANSIENT_RETRY,
        required_resource_keys={names.resource_key},
        tags={"binlake/pipeline": names.pipeline},
        description=f"Compacts, VACUUMs and checkpoints the Delta table of `{table}` beside the sync.",
    )
    def maintenance_op(context: dg.OpExecutionContext) -> None:
        binlake: BinlakeResource = getattr(context.resources, names.resource_key)
        pipeline = binlake.pipeline()
        with jvm_output_to_log_file(context.log), engine_errors(f"maintaining {table}", context.log):
            (outcome,) = maintain(pipeline.context, [table])
        for note in outcome.notes:
            context.log.info(f"{table}: {note}")
        context.log_event(dg.AssetObservation(asset_key=names.table_key(table), metadata={
            "maintenance_engine": outcome.engine,
            "compacted_files": outcome.compacted_files,
            "files_written": outcome.files_written,
            "vacuumed_files": outcome.vacuumed_files,
            "vacuumed_bytes": outcome.vacuumed_bytes,
            "retention_hours": outcome.retention_hours,
            "retention_reason": outcome.retention_reason,
            "log_files_removed": outcome.log_files_removed,
            "checkpoint_version": outcome.checkpoint_version if outcome.checkpoint_version is not None else -1,
        }))

    @dg.job(name=names.maintenance_job(table), tags=names.run_tags,
            description=f"Maintenance of `{table}` (pipeline `{names.pipeline}`): its own pool, beside the sync.")
    def maintenance_job() -> None:
        maintenance_op()

    return maintenance_job


__all__ = ["build_maintenance_jobs"]
