"""Asset keys and Dagster names for one pipeline, in one place so assets, jobs and sensors agree.

Keys and names carry the pipeline name, so several pipelines in one deployment never collide:

    ["mysql", pipeline, db, table]      the source table (an external asset)
    ["binlake", pipeline, db, table]    its Delta copy
    ["binlake", pipeline, "snapshot"]   the snapshot asset, one partition per table
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

from cdc_lib.config.deployment import name_slug
from cdc_lib.model.tables import TableRef

if TYPE_CHECKING:
    from assets.resources import BinlakeResource

CONSISTENCY_CHECK = "consistency"
LAG_CHECK = "lag"
RUNWAY_CHECK = "binlog_runway"
RECONCILIATION_CHECK = "reconciliation"
# Only on tables under `schema_policy: approve`: blocking, failed while a schema change waits for a person.
SCHEMA_APPROVAL_CHECK = "schema_approval"
PIPELINE_TAG = "binlake/pipeline"
# Carried by the runs that take the pipeline's lease (micro-batch, follow): at most one may be in flight.
LEASE_TAG = "binlake/lease"
# Carried by snapshot runs (value: the pipeline). They take a table's lease, not the pipeline's: they run beside
# the micro-batches, in a pool of their own.
SNAPSHOT_TAG = "binlake/snapshot"
# The table a sensor-launched snapshot run loads ("<pipeline>:<db.table>"); a backfill's runs say it with
# Dagster's partition tags instead (`orchestration.schedules.snapshots_in_flight` reads both).
SNAPSHOT_TABLE_TAG = "binlake/snapshot_table"


def dagster_name(text: str) -> str:
    """`text` with every character Dagster refuses in names (jobs, groups, ops) replaced by '_'."""
    return name_slug(text)


@dataclass(frozen=True)
class PipelineNames:
    pipeline: str

    @property
    def slug(self) -> str:
        return dagster_name(self.pipeline)

    def table_key(self, table: str) -> dg.AssetKey:
        ref = TableRef.parse(table)
        return dg.AssetKey(["binlake", self.pipeline, ref.database, ref.table])

    def source_key(self, table: str) -> dg.AssetKey:
        ref = TableRef.parse(table)
        return dg.AssetKey(["mysql", self.pipeline, ref.database, ref.table])

    @property
    def snapshot_key(self) -> dg.AssetKey:
        return dg.AssetKey(["binlake", self.pipeline, "snapshot"])

    def group(self, table: str) -> str:
        """One asset group per source database."""
        return dagster_name(TableRef.parse(table).database)

    @property
    def control_group(self) -> str:
        return f"binlake_{self.slug}"

    @property
    def resource_key(self) -> str:
        """Key of the pipeline's `BinlakeResource`: one per pipeline, so a deployment can serve several."""
        return f"binlake_{self.slug}"

    def resource(self, context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext | dg.SensorEvaluationContext
                 ) -> BinlakeResource:
        """The pipeline's resource from a run's or a tick's context."""
        resource: BinlakeResource = getattr(context.resources, self.resource_key)
        return resource

    @property
    def pool(self) -> str:
        """Concurrency pool of what takes the pipeline's lease (micro-batch, follow): limit 1, one binlog reader."""
        return f"binlake_{self.slug}"

    @property
    def snapshot_pool(self) -> str:
        """Concurrency pool of the snapshot step: its limit is how many tables of the pipeline load at once.

        Apart from `pool`, so a backfill of a big table never holds back the scheduled micro-batch.
        """
        return f"binlake_{self.slug}_snapshot"

    @property
    def maintenance_pool(self) -> str:
        """Concurrency pool of table maintenance: apart from `pool`, so maintenance never takes the sync's slot
        (it runs beside the micro-batches, cdc_lib/maintenance/run.py says why that is safe)."""
        return f"binlake_{self.slug}_maintenance"

    def maintenance_job(self, table: str) -> str:
        return f"binlake_{self.slug}_maintain_{dagster_name(table)}"

    def maintenance_schedule(self, table: str) -> str:
        return f"binlake_{self.slug}_maintain_{dagster_name(table)}_schedule"

    @property
    def sync_op(self) -> str:
        return f"binlake_{self.slug}_microbatch"

    @property
    def reconciliation_op(self) -> str:
        return f"binlake_{self.slug}_reconciliation"

    @property
    def sync_job(self) -> str:
        return f"binlake_{self.slug}_sync"

    @property
    def snapshot_job(self) -> str:
        return f"binlake_{self.slug}_snapshot"

    @property
    def reconcile_job(self) -> str:
        return f"binlake_{self.slug}_reconcile"

    @property
    def schema_decision_job(self) -> str:
        return f"binlake_{self.slug}_schema_decision"

    @property
    def follow_op(self) -> str:
        return f"binlake_{self.slug}_follow_loop"

    @property
    def follow_job(self) -> str:
        return f"binlake_{self.slug}_follow"

    @property
    def follow_schedule(self) -> str:
        return f"binlake_{self.slug}_follow_schedule"

    @property
    def sync_schedule(self) -> str:
        return f"binlake_{self.slug}_sync_schedule"

    @property
    def reconcile_schedule(self) -> str:
        return f"binlake_{self.slug}_reconcile_schedule"

    @property
    def missing_snapshot_sensor(self) -> str:
        return f"binlake_{self.slug}_missing_snapshots"

    @property
    def table_error_sensor(self) -> str:
        return f"binlake_{self.slug}_table_errors"

    @property
    def freshness_sensor(self) -> str:
        return f"binlake_{self.slug}_freshness"

    @property
    def run_tags(self) -> dict[str, str]:
        """Tags of every run of the pipeline (filter on them in the Runs page)."""
        return {PIPELINE_TAG: self.pipeline}

    @property
    def lease_tags(self) -> dict[str, str]:
        """Tags of the runs that take the pipeline's lease: the micro-batch and follow mode."""
        return {PIPELINE_TAG: self.pipeline, LEASE_TAG: self.pipeline}

    @property
    def snapshot_tags(self) -> dict[str, str]:
        """Tags of every snapshot run of the pipeline."""
        return {PIPELINE_TAG: self.pipeline, SNAPSHOT_TAG: self.pipeline}

    def snapshot_table_tags(self, table: str) -> dict[str, str]:
        """Tags of a snapshot run of one table."""
        return {**self.snapshot_tags, SNAPSHOT_TABLE_TAG: f"{self.pipeline}:{table}"}
