"""`sink.tables.<t>.schema_policy`: evolve by default, one of three, a typo refused."""

from __future__ import annotations

import copy

import pytest

from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError
from tests.unit.config.documents import VALID


def test_evolve_by_default_and_per_table() -> None:
    document = copy.deepcopy(VALID)
    document["sink"]["tables"] = {"shop.orders": {"schema_policy": "approve"}, "inventory.items": {"mode": "history"}}
    sink = parse_config(document).sink
    assert sink.schema_policy_for("shop.orders") == "approve"
    assert sink.schema_policy_for("inventory.items") == "evolve"
    assert sink.schema_policy_for("inventory.stock") == "evolve"


@pytest.mark.parametrize("value", ["ignore", "Evolve", True, 1])
def test_a_value_not_among_the_policies_is_refused(value: object) -> None:
    document = copy.deepcopy(VALID)
    document["sink"]["tables"] = {"shop.orders": {"schema_policy": value}}
    with pytest.raises(ConfigError, match=r"sink\.tables\.shop\.orders\.schema_policy.*evolve, stop, approve"):
        parse_config(document)
