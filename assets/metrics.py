"""Each table's metrics (cdc_lib/status/metrics.py, the figures `binlake status --format openmetrics` prints) as
Dagster asset observations, recorded after every micro-batch run and every follow-mode look at the status.

The metadata keys are the metric names (docs/production.md "Metrics"), so a Dagster user and a Prometheus user
read the same figures under the same names; the per-process histograms of follow mode stay on its endpoint.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import dagster as dg

from assets.naming import PipelineNames
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.status.metrics import OPERATIONS, TableFigures, collect
from cdc_lib.status.table_status import TableStatus


def metric_metadata(figures: TableFigures) -> dict[str, Any]:
    """The table's figures as asset metadata, under the metric names; an unknown figure is left out."""
    metadata: dict[str, Any] = {"binlake_table_state": dg.MetadataValue.text(figures.state)}
    floats = {"binlake_lag_seconds": figures.lag_seconds, "binlake_binlog_runway_seconds": figures.runway_seconds}
    for name, value in floats.items():
        # +Inf (a runway without end) is no JSON number: Dagster gets it as text.
        if value is not None:
            metadata[name] = (dg.MetadataValue.float(float(value)) if math.isfinite(value)
                              else dg.MetadataValue.text("+Inf"))
    integers = {
        "binlake_lag_bytes": figures.lag_bytes, "binlake_lag_events": figures.lag_events,
        "binlake_snapshot_chunks_done": figures.snapshot_chunks_done,
        "binlake_snapshot_chunks_planned": figures.snapshot_chunks_planned,
        "binlake_snapshot_rows_read": figures.snapshot_rows_read,
        "binlake_delta_version": figures.delta_version, "binlake_table_files": figures.files,
        "binlake_table_bytes": figures.bytes,
    }
    if figures.rows_applied_since is not None:
        integers.update({f"binlake_rows_applied_{operation}_total": figures.rows_applied.get(operation, 0)
                         for operation in OPERATIONS})
    metadata.update({name: dg.MetadataValue.int(int(value)) for name, value in integers.items() if value is not None})
    return metadata


def metric_observations(
    *, names: PipelineNames, pipeline: Pipeline, statuses: Sequence[TableStatus], tables: Sequence[str]
) -> list[dg.AssetObservation]:
    """One observation per table of `tables` with a status: its metrics (a Delta log load per snapshotted table)."""
    wanted = set(tables)
    chosen = [status for status in statuses if status.table in wanted]
    return [
        dg.AssetObservation(asset_key=names.table_key(figures.table), description="binlake metrics",
                            metadata=metric_metadata(figures))
        for figures in collect(pipeline.context, chosen)
    ]


__all__ = ["metric_metadata", "metric_observations"]
