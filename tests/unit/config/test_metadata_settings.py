"""`metadata_columns` and `freshness` under `sink` and `sink.tables`: defaults, overrides, refusals."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cdc_lib.config.model import Freshness
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError
from tests.unit.config.documents import VALID


def with_sink(**keys: Any) -> dict[str, Any]:
    document = copy.deepcopy(VALID)
    document["sink"].update(keys)
    return document


def test_off_by_default_and_no_freshness() -> None:
    sink = parse_config(copy.deepcopy(VALID)).sink
    assert sink.metadata_columns is False and not sink.metadata_columns_for("shop.orders")
    assert sink.freshness is None and sink.freshness_for("shop.orders") is None


def test_pipeline_default_and_per_table_override() -> None:
    sink = parse_config(with_sink(
        metadata_columns=True, freshness={"fail_after_minutes": 30, "warn_after_minutes": 10},
        tables={"shop.orders": {"metadata_columns": False, "freshness": {"fail_after_minutes": 5}},
                "inventory.stock": {"mode": "history"}},
    )).sink
    assert not sink.metadata_columns_for("shop.orders") and sink.metadata_columns_for("inventory.items")
    assert not sink.metadata_columns_for("inventory.stock"), "a history table carries its own times"
    assert sink.freshness_for("shop.orders") == Freshness(fail_after_minutes=5)
    assert sink.freshness_for("inventory.items") == Freshness(fail_after_minutes=30, warn_after_minutes=10)


@pytest.mark.parametrize(("sink", "key", "why"), [
    ({"metadata_columns": "yes"}, "sink.metadata_columns", "must be true or false"),
    ({"metadata_columns": True, "mode": "soft_delete"}, "sink.metadata_columns", "mirror tables only"),
    ({"tables": {"shop.orders": {"metadata_columns": True, "mode": "history"}}},
     "sink.tables.shop.orders.metadata_columns", "mirror tables only"),
    ({"freshness": {"fail_after_minutes": 10, "warn_after_minutes": 10}}, "sink.freshness.warn_after_minutes",
     "must be below"),
    ({"freshness": {"warn_after_minutes": 10}}, "sink.freshness.fail_after_minutes", "is required"),
    ({"freshness": {"fail_after_minutes": 0}}, "sink.freshness.fail_after_minutes", "between 1 and"),
    ({"freshness": {"fail_after_minutes": 5, "fail_after": 1}}, "sink.freshness.fail_after", "unknown"),
])
def test_refused_with_the_key_named(sink: dict[str, Any], key: str, why: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(with_sink(**sink))
    assert key in str(raised.value) and why in str(raised.value)
