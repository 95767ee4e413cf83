"""The approval gate of `schema_policy: approve` in Dagster: a blocking check that fails while a table waits at a
schema change (its DDL in the description), and a job that approves or rejects it — the same engine call as
`binlake schema approve|reject` (`cdc_lib.pipeline.schema_policy`)."""

from typing import Any

import dagster as dg

from assets.naming import SCHEMA_APPROVAL_CHECK, PipelineNames
from assets.resources import BinlakeResource, engine_errors
from cdc_lib.config.model import PipelineConfig
from cdc_lib.pipeline.pipeline import TableStatus


def approval_tables(config: PipelineConfig, tables: list[str]) -> list[str]:
    """The tables a person approves schema changes of."""
    return [table for table in tables if config.sink.schema_policy_for(table) == "approve"]


def approval_check_specs(*, names: PipelineNames, tables: list[str]) -> list[dg.AssetCheckSpec]:
    return [
        dg.AssetCheckSpec(
            SCHEMA_APPROVAL_CHECK, asset=names.table_key(table), blocking=True,
            description="No schema change waits for approval (schema_policy: approve). Fails with the DDL while one "
            "does; approve or reject it with the schema decision job or `binlake schema approve|reject`.",
        )
        for table in tables
    ]


def schema_approval_result(key: dg.AssetKey, table: str, status: TableStatus | None) -> dg.AssetCheckResult:
    change = status.schema_change if status is not None else None
    if change is None or change.get("approved"):
        return dg.AssetCheckResult(
            asset_key=key, check_name=SCHEMA_APPROVAL_CHECK, passed=True, severity=dg.AssetCheckSeverity.ERROR,
            description=None if change is None else "approved: the next micro-batch applies it",
        )
    statement = str(change.get("statement"))
    return dg.AssetCheckResult(
        asset_key=key, check_name=SCHEMA_APPROVAL_CHECK, passed=False, severity=dg.AssetCheckSeverity.ERROR,
        description=f"{table} awaits approval of: {statement}",
        metadata={
            "statement": dg.MetadataValue.text(statement),
            "position": dg.MetadataValue.json(change.get("position") or {}),
            "since": dg.MetadataValue.text(str(change.get("at"))),
        },
    )


class SchemaDecision(dg.Config):
    """`table`: 'database.table'; `approve`: false rejects (the table stops until it is re-snapshotted)."""

    table: str
    approve: bool = True


def build_schema_decision_job(*, names: PipelineNames) -> dg.JobDefinition:
    """A job a person launches from the UI (launchpad config: table, approve) to decide a waiting schema change."""

    @dg.op(name=f"{names.schema_decision_job}_op", required_resource_keys={names.resource_key},
           tags={"binlake/pipeline": names.pipeline})
    def decide(context: dg.OpExecutionContext, config: SchemaDecision) -> dict[str, Any]:
        binlake: BinlakeResource = getattr(context.resources, names.resource_key)
        pipeline = binlake.pipeline()
        with engine_errors("deciding a schema change", context.log):
            decided = (pipeline.approve_schema_change(config.table) if config.approve
                       else pipeline.reject_schema_change(config.table))
        context.log.info(f"{decided.table}: {'approved' if decided.approved else 'rejected'} at {decided.position}: "
                         f"{decided.statement}")
        return {"table": decided.table, "approved": decided.approved, "statement": decided.statement}

    @dg.job(
        name=names.schema_decision_job,
        tags=names.lease_tags,
        description=f"Approve (or reject) the schema change a table of pipeline `{names.pipeline}` waits at "
        "(schema_policy: approve); the next micro-batch evolves an approved table from the change's position.",
    )
    def schema_decision_job() -> None:
        decide()

    return schema_decision_job
