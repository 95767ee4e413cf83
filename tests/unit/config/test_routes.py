"""`sink.routes`: which source tables land in which shared Delta table, and the combinations refused at load."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError
from tests.unit.config.documents import VALID

ROUTES = [{"source": r"shop_[0-9]+\.orders_[0-9]+", "target": "shop.orders"},
          {"source": r"inventory\..*", "target": "lake.inventory"}]


def routed(**changes: Any) -> dict[str, Any]:
    document = copy.deepcopy(VALID)
    document["source"]["tables"] = ["shop_1.orders_1", "shop_2.orders_17", "inventory.*", "shop.customers"]
    document["sink"]["routes"] = ROUTES
    for key, value in changes.items():
        section, _, field = key.partition("__")
        document[section][field] = value
    return document


@pytest.mark.parametrize(("table", "target"), [
    ("shop_1.orders_1", "shop.orders"),
    ("shop_63.orders_0", "shop.orders"),
    ("shop_1.orders_x", None),  # the whole name must match
    ("xshop_1.orders_1", None),
    ("shop_1.orders_1_old", None),
    ("inventory.stock", "lake.inventory"),
    ("shop.customers", None),
])
def test_a_table_lands_in_its_first_matching_route_or_its_own_table(table: str, target: str | None) -> None:
    sink = parse_config(routed()).sink
    assert sink.route_for(table) == target
    database, _, name = table.partition(".")
    expected = target or table
    assert sink.table_path(database, name) == "/lake/" + expected.replace(".", "/")


def test_the_first_route_wins() -> None:
    sink = parse_config(routed(sink__routes=[{"source": r"shop_1\..*", "target": "a.first"}, *ROUTES])).sink
    assert sink.route_for("shop_1.orders_1") == "a.first"
    assert sink.route_for("shop_2.orders_17") == "shop.orders"


def test_a_routed_table_stops_at_a_schema_change_and_the_others_keep_their_policy() -> None:
    sink = parse_config(routed()).sink
    assert sink.schema_policy_for("shop_1.orders_1") == "stop"
    assert sink.schema_policy_for("shop.customers") == "evolve"


@pytest.mark.parametrize(("changes", "key"), [
    ({"sink__routes": []}, "sink.routes"),
    ({"sink__routes": [{"source": "(", "target": "a.b"}]}, r"sink.routes\[0\].source"),
    ({"sink__routes": [{"source": "a", "target": "nodot"}]}, r"sink.routes\[0\].target"),
    ({"sink__routes": [{"source": "a", "target": "a.b", "extra": 1}]}, r"sink.routes\[0\].extra"),
    ({"sink__mode": "history"}, "sink.mode"),
    ({"sink__metadata_columns": True}, "sink.metadata_columns"),
    ({"batch": {"writer": "delta-rs"}}, "batch.writer"),
    ({"snapshot": {"writer": "delta-rs"}}, "snapshot.writer"),
    ({"sink__tables": {"shop_1.orders_1": {"deletion_vectors": True}}}, "sink.tables.shop_1.orders_1.deletion_vectors"),
    ({"sink__tables": {"shop_1.orders_1": {"schema_policy": "evolve"}}}, "sink.tables.shop_1.orders_1.schema_policy"),
    ({"sink__routes": [{"source": r"shop_1\..*", "target": "shop.customers"}]}, "sink.routes"),
])
def test_what_routing_does_not_support_yet_is_refused_at_load(changes: dict[str, Any], key: str) -> None:
    document = routed()
    for name, value in changes.items():
        section, _, field = name.partition("__")
        if field:
            document[section][field] = value
        else:
            document[section] = value
    with pytest.raises(ConfigError, match=key):
        parse_config(document)


def test_settings_of_unrouted_tables_stay_their_own() -> None:
    document = routed(sink__tables={"shop.customers": {"mode": "history", "deletion_vectors": True}})
    sink = parse_config(document).sink
    assert sink.mode_for("shop.customers") == "history"
