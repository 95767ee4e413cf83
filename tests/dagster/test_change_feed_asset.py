"""A Dagster asset downstream of a binlake table, fed by its change data feed: revenue per day of the orders.

Its table must equal what the server computes (`SELECT DATE(placed_at), COUNT(*), SUM(amount) … GROUP BY 1`)
after every run: the first (from the full table), incremental ones, a retry after a crash between its
Delta commit and Dagster's record of it, and a run with nothing new.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from assets.change_feed import build_change_feed_asset, derived_key, derived_table_path
from cdc_lib.config.load import load_config
from cdc_lib.dev.demo import demo_config_text
from cdc_lib.sink.change_feed import commit_versions
from orchestration import demo
from orchestration.definitions import build_definitions
from tests.conftest import scan_rows
from tests.dagster.conftest import Shop


@dataclass
class CrashesAfterCommit:
    """The demo's consumer, made to die right after its Delta commit as often as asked (a lost worker)."""

    inner: demo.RevenuePerDay
    crashes: int = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def compute(self, rows: Any) -> Any:
        return self.inner.compute(rows)

    def merge(self, spark: Any, output_path: str, changes: Any) -> None:
        self.inner.merge(spark, output_path, changes)
        if self.crashes:
            self.crashes -= 1
            raise ConnectionError("the run's process died after the commit, before Dagster recorded it")


def with_change_feed(shop: Shop, table: str) -> Shop:
    """The shop with the change data feed on for `table`, written into its config file as a user would."""
    document = yaml.safe_load(shop.config_path.read_text())
    document["sink"]["tables"] = {table: {"change_data_feed": True}}
    shop.config_path.write_text(yaml.safe_dump(document))
    return Shop(server=shop.server, database=shop.database, config=load_config(shop.config_path),
                config_path=shop.config_path)


def revenue_per_day_at_source(shop: Shop) -> list[tuple[Any, ...]]:
    return sorted(shop.sql("SELECT DATE(placed_at), COUNT(*), SUM(amount) FROM orders GROUP BY 1"))


def materialized(result: dg.ExecuteInProcessResult) -> dict[str, Any]:
    [event] = result.get_asset_materialization_events()
    return {key: value.value for key, value in event.materialization.metadata.items()}


def test_revenue_per_day_follows_the_change_feed_exactly_once(shop: Shop, instance: dg.DagsterInstance) -> None:
    orders = f"{shop.database}.orders"
    shop = with_change_feed(shop, orders)
    consumer = CrashesAfterCommit(demo.RevenuePerDay())
    revenue = build_change_feed_asset(names=shop.names, table=orders, consumer=consumer, description="revenue")
    defs = dg.Definitions.merge(build_definitions(shop.config), dg.Definitions(assets=[revenue]))
    output = derived_table_path(shop.config, consumer.name)

    def run_downstream() -> dg.ExecuteInProcessResult:
        result = dg.materialize([revenue], resources={shop.names.resource_key: shop.resource()}, instance=instance)
        assert result.success
        assert sorted(scan_rows(output)) == revenue_per_day_at_source(shop)
        return result

    def sync() -> None:
        assert defs.resolve_job_def(shop.names.sync_job).execute_in_process(instance=instance).success

    snapshot = defs.resolve_job_def(shop.names.snapshot_job).execute_in_process(
        instance=instance,
        tags={"dagster/asset_partition_range_start": orders, "dagster/asset_partition_range_end": orders},
    )
    assert snapshot.success
    first = materialized(run_downstream())
    assert first["mode"] == "initial" and first["change_rows"] == 0

    shop.sql(
        "INSERT INTO orders (id, customer_id, amount, status, placed_at) VALUES "
        "(101, 3, 12.25, 'new', '2026-03-04 23:59:59.999999'), (102, 4, 0.75, 'paid', '2026-03-05 00:00:00')",
        "UPDATE orders SET amount = 77.75 WHERE id = 7",
        "UPDATE orders SET placed_at = '2026-02-02 08:00:00' WHERE id = 8",  # moves to another day
        "DELETE FROM orders WHERE id = 9",
        "UPDATE orders SET id = 511 WHERE id = 11",
    )
    sync()
    second = materialized(run_downstream())
    assert second["mode"] == "incremental" and second["previous_source_version"] == first["source_version"]
    assert second["change_rows"] == 9  # 2 inserts, 2 × 2 update images, a delete, a key change's delete + insert

    # The run dies after its commit; Dagster's retry finds the output already past the new versions.
    shop.sql("UPDATE orders SET amount = amount + 100.5 WHERE id <= 5", "DELETE FROM orders WHERE id IN (60, 102)")
    sync()
    consumer.crashes = 1
    retried = run_downstream()
    assert consumer.crashes == 0
    assert any(event.event_type_value == "STEP_UP_FOR_RETRY" for event in retried.all_events)
    third = materialized(retried)
    assert third["mode"] == "up_to_date" and third["source_version"] > second["source_version"]
    assert not [row for row in scan_rows(output) if str(row[0]) == "2026-03-05"]  # its only order went away

    # Nothing new at the source: no Spark work, no new commit in the output.
    versions = commit_versions(output)
    fourth = materialized(run_downstream())
    assert fourth["mode"] == "up_to_date" and commit_versions(output) == versions

    # A full refresh recomputes from the table and lands on the same numbers.
    result = dg.materialize(
        [revenue], resources={shop.names.resource_key: shop.resource()}, instance=instance,
        run_config={"ops": {revenue.node_def.name: {"config": {"full_refresh": True}}}},
    )
    assert result.success and materialized(result)["mode"] == "recomputed"
    assert sorted(scan_rows(output)) == revenue_per_day_at_source(shop)


def test_the_demo_location_shows_revenue_per_day_below_the_orders_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_path = tmp_path / "binlake.yaml"
    config_path.write_text(demo_config_text(3306, tmp_path / "lake"))
    monkeypatch.setenv("BINLAKE_CONFIG", str(config_path))
    defs = demo.defs()
    assert isinstance(defs, dg.Definitions)
    graph = defs.get_repository_def().asset_graph
    names = build_definitions(load_config(config_path)).get_repository_def().asset_graph.get_all_asset_keys()
    node = graph.get(derived_key(demo.PipelineNames("shop"), "revenue_per_day"))
    assert node.parent_keys == {demo.PipelineNames("shop").table_key("shop.orders")}
    assert node.group_name == "shop" and node.automation_condition is not None
    # Everything the normal location serves is there too.
    assert names < graph.get_all_asset_keys()
    assert load_config(config_path).sink.change_data_feed_for("shop.orders")
    assert not load_config(config_path).sink.change_data_feed_for("shop.customers")

    text = demo_config_text(3306, tmp_path / "lake")
    config_path.write_text(text.replace("change_data_feed: true", "change_data_feed: false"))
    with pytest.raises(Exception, match="change_data_feed"):
        demo.defs()
