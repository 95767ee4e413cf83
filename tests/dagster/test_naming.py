"""`assets.naming`: Dagster names and asset keys derived from a pipeline and its tables."""

from __future__ import annotations

from assets.naming import PipelineNames, dagster_name


def test_names_are_valid_dagster_names_and_keys_carry_the_pipeline() -> None:
    names = PipelineNames("shop-eu.2")
    assert dagster_name("shop-eu.2") == "shop_eu_2" == names.slug
    assert names.table_key("my-db.orders$1").path == ["binlake", "shop-eu.2", "my-db", "orders$1"]
    assert names.source_key("my-db.orders$1").path == ["mysql", "shop-eu.2", "my-db", "orders$1"]
    assert names.group("my-db.orders") == "my_db"
    assert names.sync_job == "binlake_shop_eu_2_sync" and names.pool == "binlake_shop_eu_2"
    assert names.snapshot_pool == "binlake_shop_eu_2_snapshot"
    assert names.snapshot_table_tags("db.t") == {
        "binlake/pipeline": "shop-eu.2", "binlake/snapshot": "shop-eu.2", "binlake/snapshot_table": "shop-eu.2:db.t",
    }
