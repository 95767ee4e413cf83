"""The demo's code location: the normal deployment plus a downstream asset fed by a change data feed.

    binlake/shop/shop/orders  ──(change feed)──►  binlake/shop/derived/revenue_per_day
                                                  (day, orders, revenue) in <sink>/_derived/revenue_per_day

`./run dagster` without `$BINLAKE_CONFIG` serves this module (`dagster dev -m orchestration.demo`). Like
`orchestration.definitions`, importing it reads nothing: `defs` loads the configs when Dagster loads the
location. The demo's config turns the change data feed on for `shop.orders` (`cdc_lib.dev.demo`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import dagster as dg

from assets.change_feed import build_change_feed_asset
from assets.naming import PipelineNames
from cdc_lib.config.load import load_configs
from cdc_lib.config.model import PipelineConfig
from cdc_lib.errors import ConfigError
from cdc_lib.sink.change_feed import CHANGE_TYPE, signed_changes
from cdc_lib.source.discovery import explicit_tables
from orchestration.definitions import build_deployment
from orchestration.settings import OrchestrationSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEMO_PIPELINE = "shop"
DEMO_TABLE = "shop.orders"
#: Exact for any order amount: DECIMAL(12,2) summed over up to 10^10 orders a day.
REVENUE_TYPE = "decimal(22,2)"


@dataclass(frozen=True)
class RevenuePerDay:
    """Orders and revenue per calendar day of `placed_at`, from an orders table (`amount`, `placed_at`).

    From the feed: inserts and post-images count +1 order and +amount on their day, deletes and pre-images
    -1 and -amount, so an update that moves an order to another day or changes its amount nets out.
    """

    name: str = "revenue_per_day"

    def compute(self, rows: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        return rows.groupBy(F.to_date("placed_at").alias("day")).agg(
            F.count(F.lit(1)).cast("bigint").alias("orders"), F.sum("amount").cast(REVENUE_TYPE).alias("revenue")
        )

    def merge(self, spark: SparkSession, output_path: str, changes: DataFrame) -> None:
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        per_day = (
            signed_changes(changes.select("placed_at", "amount", CHANGE_TYPE))
            .groupBy(F.to_date("placed_at").alias("day"))
            .agg(
                F.sum("_sign").cast("bigint").alias("orders"),
                F.sum(F.col("_sign") * F.col("amount")).cast(REVENUE_TYPE).alias("revenue"),
            )
        )
        (
            DeltaTable.forPath(spark, output_path).alias("t")
            .merge(per_day.alias("s"), "t.day = s.day")
            # A day whose last order went away leaves the table, as a recompute would leave it out.
            .whenMatchedDelete(condition="t.orders + s.orders = 0")
            .whenMatchedUpdate(set={"orders": "t.orders + s.orders", "revenue": "t.revenue + s.revenue"})
            .whenNotMatchedInsert(condition="s.orders <> 0", values={"day": "s.day", "orders": "s.orders",
                                                                     "revenue": "s.revenue"})
            .execute()
        )


def revenue_per_day_asset(names: PipelineNames, table: str = DEMO_TABLE) -> dg.AssetsDefinition:
    return build_change_feed_asset(
        names=names,
        table=table,
        consumer=RevenuePerDay(),
        description=f"Orders and revenue per day of {table}, kept up to date from its Delta change data feed: "
        "each run reads only the versions committed since the last one.",
        # Runs after each micro-batch that changed the orders (Dagster's automation sensor).
        automation_condition=dg.AutomationCondition.eager(),
    )


def demo_definitions(configs: list[PipelineConfig]) -> dg.Definitions:
    """The downstream asset of the demo's pipeline, which must follow `shop.orders` with its change feed on."""
    config = next((config for config in configs if config.pipeline == DEMO_PIPELINE), None)
    if config is None or DEMO_TABLE not in explicit_tables(config):
        raise ConfigError(
            "pipeline", f"the demo location needs pipeline '{DEMO_PIPELINE}' following {DEMO_TABLE}",
            remedy="run `./run dagster` without BINLAKE_CONFIG (it starts the demo), "
            "or serve orchestration.definitions",
        )
    if not config.sink.change_data_feed_for(DEMO_TABLE):
        raise ConfigError(
            f"sink.tables.{DEMO_TABLE}.change_data_feed", "must be true for the demo's revenue_per_day asset",
            remedy="re-create the demo config with `binlake demo`",
        )
    return dg.Definitions(assets=[revenue_per_day_asset(PipelineNames(config.pipeline))])


@dg.definitions
def defs() -> dg.Definitions:
    """The deployment of $BINLAKE_CONFIG (as orchestration.definitions serves it) with the demo's downstream asset."""
    configs = load_configs()
    deployment = build_deployment(
        configs, settings=lambda config: OrchestrationSettings.from_environ(os.environ, pipeline=config.pipeline)
    )
    return dg.Definitions.merge(deployment, demo_definitions(configs))
