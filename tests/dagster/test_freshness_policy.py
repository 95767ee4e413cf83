"""Each Delta table asset carries Dagster's own freshness policy from the pipeline's `freshness` settings, and
its column schema lists binlake's metadata columns when the table has them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from dagster._core.definitions.freshness import TimeWindowFreshnessPolicy

from assets.naming import PipelineNames
from cdc_lib.config.load import load_config
from orchestration.definitions import build_definitions


def test_freshness_settings_become_each_tables_freshness_policy(tmp_path: Path) -> None:
    path = tmp_path / "binlake.yaml"
    path.write_text(
        "pipeline: shop\n"
        "source: {host: 127.0.0.1, port: 3306, user: binlake, password: unused, server_id: 5702,\n"
        "         tables: [shop.orders, shop.customers, shop.notes]}\n"
        f"sink:\n  path: {tmp_path / 'lake'}\n"
        "  freshness: {fail_after_minutes: 30, warn_after_minutes: 10}\n"
        "  tables:\n"
        "    shop.orders: {freshness: {fail_after_minutes: 5}}\n"
    )
    defs = build_definitions(load_config(path))
    graph = defs.get_repository_def().asset_graph
    names = PipelineNames("shop")

    orders = graph.get(names.table_key("shop.orders")).freshness_policy
    customers = graph.get(names.table_key("shop.customers")).freshness_policy
    # `FreshnessPolicy.time_window` builds this class (the public name is its factory).
    assert isinstance(orders, TimeWindowFreshnessPolicy) and isinstance(customers, TimeWindowFreshnessPolicy)
    assert orders.fail_window.to_timedelta() == dt.timedelta(minutes=5) and orders.warn_window is None
    assert customers.fail_window.to_timedelta() == dt.timedelta(minutes=30)
    assert customers.warn_window is not None and customers.warn_window.to_timedelta() == dt.timedelta(minutes=10)
    # The source tables (external assets) carry none: the policy is about the Delta copy.
    assert graph.get(names.source_key("shop.orders")).freshness_policy is None


def test_no_freshness_setting_no_policy(tmp_path: Path) -> None:
    path = tmp_path / "binlake.yaml"
    path.write_text(
        "pipeline: shop\n"
        "source: {host: 127.0.0.1, port: 3306, user: binlake, password: unused, server_id: 5703,\n"
        "         tables: [shop.orders]}\n"
        f"sink: {{path: {tmp_path / 'lake'}}}\n"
    )
    defs = build_definitions(load_config(path))
    graph = defs.get_repository_def().asset_graph
    assert graph.get(PipelineNames("shop").table_key("shop.orders")).freshness_policy is None


def test_column_schema_lists_the_metadata_columns_last() -> None:
    from assets.tables import column_schema

    schema_json = {
        "columns": [{"name": "id", "data_type": "int", "column_type": "int(11)", "nullable": False}],
        "primary_key": ["id"],
    }
    with_columns = column_schema("db.t", schema_json, with_metadata_columns=True)
    assert [(column.name, column.type) for column in with_columns.columns] == [
        ("id", "int"), ("_binlake_source_ts", "timestamp"), ("_binlake_applied_ts", "timestamp"),
    ]
    assert [column.name for column in column_schema("db.t", schema_json).columns] == ["id"]
