"""`sink.tables.<t>.iceberg`: Delta UniForm is refused loudly, naming the jar Maven Central does not serve."""

from __future__ import annotations

import copy

import pytest

from cdc_lib.config.model import TableSettings
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError
from cdc_lib.sink.spark.jars import DELTA_ICEBERG
from tests.unit.config.documents import VALID


@pytest.mark.parametrize("value", [True, "true"])
def test_iceberg_true_is_refused_naming_the_unavailable_coordinate(value: object) -> None:
    document = copy.deepcopy(VALID)
    document["sink"]["tables"] = {"shop.orders": {"iceberg": value}}
    with pytest.raises(ConfigError) as raised:
        parse_config(document)
    message = str(raised.value)
    assert "sink.tables.shop.orders.iceberg" in message
    # The coordinate in the message is the one the engine would load (config/ may not import the jar list).
    assert DELTA_ICEBERG.coordinate == "io.delta:delta-iceberg_2.13:4.0.1"
    assert DELTA_ICEBERG.coordinate in message and "404" in message
    assert "docs/iceberg.md" in (raised.value.remedy or "")


def test_iceberg_false_is_accepted_and_changes_nothing() -> None:
    document = copy.deepcopy(VALID)
    document["sink"]["tables"] = {"shop.orders": {"iceberg": False}}
    assert parse_config(document).sink.tables["shop.orders"] == TableSettings()


def test_a_non_boolean_is_refused() -> None:
    document = copy.deepcopy(VALID)
    document["sink"]["tables"] = {"shop.orders": {"iceberg": "yes"}}
    with pytest.raises(ConfigError, match=r"sink\.tables\.shop\.orders\.iceberg.*true or false"):
        parse_config(document)
