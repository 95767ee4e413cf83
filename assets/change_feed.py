"""Assets downstream of a binlake table that keep a derived Delta table from the table's change feed.

    binlake/<p>/<db>/<table>  ──(Delta change data feed: only the versions since the last run)──►  <derived asset>
                                                                                                 <sink>/_derived/<name>

The work is `cdc_lib.sink.change_feed.consume`: the derived table's own Delta log records which source version it
reflects, in the same commit as its data, so a retried run never counts a change twice. The source table
needs `change_data_feed: true` (docs/change-feed.md).
"""

from typing import Any

import dagster as dg
from pydantic import Field

from assets.naming import PipelineNames
from assets.resources import TRANSIENT_RETRY, engine_errors, jvm_output_to_log_file
from cdc_lib.config.model import PipelineConfig
from cdc_lib.sink.change_feed import ChangeConsumer, ConsumeResult, consume


class ChangeFeedRunConfig(dg.Config):
    full_refresh: bool = Field(
        default=False,
        description="Recompute the derived table from the full source table instead of its change feed (after "
        "the feed was vacuumed, turned off, or crossed an incompatible schema change).",
    )


def derived_table_path(config: PipelineConfig, name: str) -> str:
    """Where a pipeline's derived table `name` lives: beside its binlake tables, under `_derived/`."""
    return f"{config.sink.path.rstrip('/')}/_derived/{name}"


def derived_key(names: PipelineNames, consumer: str) -> dg.AssetKey:
    return dg.AssetKey(["binlake", names.pipeline, "derived", consumer])


def result_metadata(result: ConsumeResult, output_path: str) -> dict[str, Any]:
    """What a run did: how it read the source (feed, full table, nothing new) and which versions it covers."""
    metadata: dict[str, Any] = {
        "mode": dg.MetadataValue.text(result.mode),
        "source_version": dg.MetadataValue.int(result.source_version),
        "change_rows": dg.MetadataValue.int(result.change_rows),
        "dagster/uri": dg.MetadataValue.path(output_path),
    }
    if result.previous_version is not None:
        metadata["previous_source_version"] = dg.MetadataValue.int(result.previous_version)
    if result.output_version is not None:
        metadata["delta_version"] = dg.MetadataValue.int(result.output_version)
    if result.reason:
        metadata["recomputed_because"] = dg.MetadataValue.text(result.reason)
    return metadata


def build_change_feed_asset(
    *,
    names: PipelineNames,
    table: str,
    consumer: ChangeConsumer,
    description: str,
    key: dg.AssetKey | None = None,
    group_name: str | None = None,
    automation_condition: dg.AutomationCondition[Any] | None = None,
) -> dg.AssetsDefinition:
    """An asset that keeps `consumer`'s output up to date from the change feed of binlake table `table`.

    Args:
        names: the pipeline's names (its table asset key and resource key).
        table: the source table, 'database.table'; its Delta table must record a change data feed.
        consumer: computes the output from the full table, and folds changes into it.
        key: default `["binlake", <pipeline>, "derived", <consumer name>]`.
        group_name: default the source database's group, so the asset sits beside its source in the graph.
    """
    resource_key = names.resource_key

    @dg.asset(
        key=key or derived_key(names, consumer.name),
        deps=[names.table_key(table)],
        required_resource_keys={resource_key},
        group_name=group_name or names.group(table),
        kinds={"spark", "delta"},
        description=description,
        retry_policy=TRANSIENT_RETRY,
        automation_condition=automation_condition,
        tags=names.run_tags,
    )
    def _change_feed_asset(context: dg.AssetExecutionContext, config: ChangeFeedRunConfig
                          ) -> dg.MaterializeResult[None]:
        pipeline = names.resource(context).pipeline()
        output_path = derived_table_path(pipeline.config, consumer.name)
        with jvm_output_to_log_file(context.log), engine_errors(f"consuming the change feed of {table}", context.log):
            result = consume(
                pipeline.spark, consumer=consumer, source_path=pipeline.table_path(table), output_path=output_path,
                storage=pipeline.sink, full_refresh=config.full_refresh, table=table,
            )
        context.log.info(
            f"{consumer.name}: {result.mode} at source version {result.source_version} "
            f"({result.change_rows} change rows since version {result.previous_version})"
        )
        return dg.MaterializeResult(metadata=result_metadata(result, output_path))

    return _change_feed_asset
