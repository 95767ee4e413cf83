"""Pure parts of catalog registration: names and locations (the catalog itself: tests/integration/test_catalog.py)."""

import pytest

from cdc_lib.config.model import CatalogConfig
from cdc_lib.sink.catalog import CatalogRegistrationError, catalog_name, same_location


def test_catalog_name_fills_the_database_template() -> None:
    settings = CatalogConfig(enabled=True, name="unity", database="bronze_{database}")
    name = catalog_name(settings, pipeline="p1", table="shop.orders")
    assert (name.catalog, name.database, name.table) == ("unity", "bronze_shop", "orders")
    assert name.qualified == "unity.bronze_shop.orders"
    assert name.quoted == "`unity`.`bronze_shop`.`orders`"


@pytest.mark.parametrize(("table", "database", "kind"), [
    ("shop-eu.orders", "{database}", "database"),
    ("shop.orders", "{pipeline}_{database}", "database"),
    ("shop.order$lines", "{database}", "table"),
])
def test_names_a_metastore_refuses_are_refused_with_a_remedy(table: str, database: str, kind: str) -> None:
    settings = CatalogConfig(enabled=True, database=database)
    with pytest.raises(CatalogRegistrationError) as raised:
        catalog_name(settings, pipeline="p-1", table=table)
    assert f"catalog {kind} name" in str(raised.value) and "— remedy: " in str(raised.value)
    assert raised.value.table == table


@pytest.mark.parametrize(("registered", "location", "same"), [
    ("file:/lake/shop/orders", "/lake/shop/orders", True),
    ("file:///lake/shop/orders/", "/lake/shop/orders", True),
    ("s3a://bucket/lake/shop/orders", "s3a://bucket/lake/shop/orders/", True),
    ("file:/lake/shop/orders", "/lake/shop/orders_v2", False),
    ("s3a://bucket/lake/shop/orders", "s3a://other/lake/shop/orders", False),
    ("", "/lake/shop/orders", False),
])
def test_same_location_reads_spark_s_file_uris(registered: str, location: str, same: bool) -> None:
    assert same_location(registered, location) is same
