"""The jobs of a pipeline: micro-batch, snapshot (partitioned by table), reconciliation, follow mode, and each
table's maintenance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

from assets.follow import build_follow_job
from assets.maintenance import build_maintenance_jobs
from assets.naming import CONSISTENCY_CHECK, LAG_CHECK, RUNWAY_CHECK, SCHEMA_APPROVAL_CHECK
from assets.schema_approval import build_schema_decision_job
from assets.tables import TableAssets

if TYPE_CHECKING:
    from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition


@dataclass(frozen=True)
class PipelineJobs:
    sync: UnresolvedAssetJobDefinition
    snapshot: UnresolvedAssetJobDefinition
    reconcile: UnresolvedAssetJobDefinition
    #: The long-running alternative to `sync`: one run applies the binlog until its time budget.
    follow: dg.JobDefinition
    #: Approves or rejects a schema change a table under `schema_policy: approve` waits at.
    schema_decision: dg.JobDefinition
    #: Each table's maintenance, by table ('database.table').
    maintenance: dict[str, dg.JobDefinition]

    def all(self) -> list[UnresolvedAssetJobDefinition | dg.JobDefinition]:
        return [self.sync, self.snapshot, self.reconcile, self.follow, self.schema_decision,
                *self.maintenance.values()]


def build_jobs(*, assets: TableAssets, reconciliation: dg.AssetChecksDefinition) -> PipelineJobs:
    names = assets.names
    health_checks = [
        dg.AssetCheckKey(key, check)
        for key in assets.table_keys
        for check in (CONSISTENCY_CHECK, LAG_CHECK, RUNWAY_CHECK)
    ] + [dg.AssetCheckKey(assets.names.table_key(table), SCHEMA_APPROVAL_CHECK) for table in assets.approval_tables]
    # The Delta tables with their cheap checks only: reconciliation and freshness run elsewhere.
    tables_only = dg.AssetSelection.assets(*assets.table_keys).without_checks()
    sync = dg.define_asset_job(
        names.sync_job,
        selection=tables_only | dg.AssetSelection.checks(*health_checks),
        tags=names.lease_tags,
        description=f"One binlog micro-batch for every table of pipeline `{names.pipeline}`, then the health checks.",
    )
    snapshot = dg.define_asset_job(
        names.snapshot_job,
        selection=dg.AssetSelection.assets(assets.snapshot),
        tags=names.snapshot_tags,
        description=f"Snapshot the chosen tables of pipeline `{names.pipeline}` (one partition per table); "
        "launch a backfill over the partitions to (re-)load several.",
    )
    reconcile = dg.define_asset_job(
        names.reconcile_job,
        selection=dg.AssetSelection.checks(reconciliation),
        tags=names.run_tags,
        description=f"Compare every table of pipeline `{names.pipeline}` with its source, chunk by chunk.",
    )
    follow = build_follow_job(names=names, tables=list(assets.tables))
    maintenance = dict(zip(assets.tables, build_maintenance_jobs(names=names, tables=list(assets.tables)),
                           strict=True))
    return PipelineJobs(sync=sync, snapshot=snapshot, reconcile=reconcile, follow=follow,
                        schema_decision=build_schema_decision_job(names=names), maintenance=maintenance)
