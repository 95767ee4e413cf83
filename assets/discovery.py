"""Tables loaded outside Dagster (by `binlake snapshot`, `binlake demo`) recorded as materialized on first sight.

A Dagster instance knows an asset as materialized only from its own event log. Tables the CLI snapshotted and
synced have current Delta copies that a fresh instance has never seen: without this, the UI would call them
"Never materialized", the snapshot asset would list their partitions as missing, and a freshness check would
fail on a healthy table. So a micro-batch run records, for each selected table that the instance has no
materialization of and whose copy is healthy:

    binlake/<p>/snapshot [partition <table>]   when that partition has no materialization either
    binlake/<p>/<db>/<table>                   with the Delta version read from the table's log

Healthy means: binlake's state has a snapshot for the table, no recorded error, and the Delta table exists.
A table that stopped with an error is left alone: its checks fail and the table-error sensor reports it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import dagster as dg

from assets.naming import PipelineNames
from cdc_lib.pipeline.pipeline import Pipeline, TableStatus
from cdc_lib.sink.delta_log import read_log_tail
from cdc_lib.state.offsets import PipelineState

DISCOVERED_KIND = "discovered"


@dataclass(frozen=True)
class DiscoveredTable:
    """A table whose healthy Delta copy exists but the Dagster instance has no materialization of."""

    table: str
    delta_version: int
    #: Whether the snapshot asset's partition for the table needs recording too.
    snapshot_partition_missing: bool


def tables_to_discover(
    *,
    instance: dg.DagsterInstance,
    names: PipelineNames,
    pipeline: Pipeline,
    tables: Iterable[str],
    statuses: dict[str, TableStatus],
) -> list[DiscoveredTable]:
    """The tables among `tables` to record as materialized: never materialized here, healthy, Delta present.

    One lookup of the latest materializations and one of the snapshot's partitions per call; the Delta log is
    read (without Spark) only for tables that the instance has not seen, so only a first run pays for it.
    """
    candidates = list(tables)
    latest = instance.get_latest_materialization_events([names.table_key(table) for table in candidates])
    unseen = [table for table in candidates if latest.get(names.table_key(table)) is None]
    if not unseen:
        return []
    snapshotted_partitions = instance.get_materialized_partitions(names.snapshot_key)
    found = []
    for table in unseen:
        status = statuses.get(table)
        if status is None or not status.snapshotted or status.error:
            continue
        tail = read_log_tail(pipeline.table_path(table), application=pipeline.application(table),
                             storage=pipeline.sink)
        if tail is None:
            continue  # offsets without a Delta table: the next micro-batch's reconciliation with the log decides
        found.append(
            DiscoveredTable(
                table=table,
                delta_version=tail.latest_version,
                snapshot_partition_missing=table not in snapshotted_partitions,
            )
        )
    return found


def discovered_snapshot_metadata(table: str, state: PipelineState) -> dict[str, Any]:
    """What binlake's state records of the snapshot that loaded the table outside Dagster."""
    metadata: dict[str, Any] = {"kind": dg.MetadataValue.text(DISCOVERED_KIND)}
    table_state = state.tables.get(table)
    if table_state is not None:
        metadata.update(
            {
                "rows": dg.MetadataValue.int(table_state.rows_snapshotted),
                "snapshot_at": dg.MetadataValue.text(table_state.snapshot_at),
                "low_watermark": dg.MetadataValue.text(str(table_state.snapshot_low)),
                "high_watermark": dg.MetadataValue.text(str(table_state.snapshot_high)),
            }
        )
    return metadata


def discovery_description(table: str) -> str:
    return (
        f"{table} was loaded outside Dagster (binlake snapshot / binlake demo); recorded from its existing Delta "
        "table on this instance's first micro-batch."
    )
