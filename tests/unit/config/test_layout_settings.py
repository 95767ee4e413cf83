"""`sink.tables.<t>.partition_by` / `.cluster_by` (docs/layout.md): parsed per table, and refused at config time
where the layout cannot hold."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError
from tests.unit.config.documents import VALID


def _document(**table: Any) -> dict[str, Any]:
    document = copy.deepcopy(VALID)
    document["sink"]["tables"] = {"shop.orders": table}
    return document


def test_a_layout_is_parsed_per_table() -> None:
    sink = parse_config(_document(partition_by="region")).sink
    assert sink.layout_for("shop.orders").partition_by == ("region",)
    assert sink.layout_for("inventory.items").partition_by == ()
    clustered = parse_config(_document(cluster_by=["tenant", "day"])).sink.layout_for("shop.orders")
    assert clustered.cluster_by == ("tenant", "day") and clustered.partition_by == ()


@pytest.mark.parametrize(("table", "problem"), [
    ({"partition_by": ["a"], "cluster_by": ["b"]}, "not both"),
    ({"cluster_by": ["a"], "maintenance": {"zorder_by": ["a"]}}, "clustered table"),
    ({"partition_by": ["note"], "columns": {"exclude": ["note"]}}, "leave out"),
    ({"partition_by": ["a"], "columns": {"include": ["id", "b"]}}, "leave out"),
    ({"cluster_by": ["email"], "mask": {"email": {"redact": None}}}, "masked"),
    ({"partition_by": ["a"], "mode": "history"}, "mirror tables only"),
    ({"partition_by": []}, "non-empty list"),
    ({"partition_by": ["a", "a"]}, "twice"),
    ({"cluster_by": ["a", "b", "c", "d", "e"]}, "at most 4"),
])
def test_a_layout_that_cannot_hold_is_refused(table: dict[str, Any], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_config(_document(**table))


def test_a_pipeline_wide_soft_delete_mode_refuses_a_layout() -> None:
    document = _document(partition_by=["region"])
    document["sink"]["mode"] = "soft_delete"
    with pytest.raises(ConfigError, match="mirror tables only"):
        parse_config(document)
