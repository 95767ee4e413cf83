"""`sink.tables.<t>.iceberg`: binlake writes the table's Iceberg metadata itself (docs/iceberg.md); refused loudly
where the metadata could not list the table's rows exactly, or where pyiceberg is missing."""

from __future__ import annotations

import copy
import importlib.util
import subprocess
import sys
from typing import Any

import pytest

from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConfigError
from tests.unit.config.documents import VALID


def _with(settings: dict[str, Any], **sink: Any) -> dict[str, Any]:
    document = copy.deepcopy(VALID)
    document["sink"].update(sink)
    document["sink"]["tables"] = {"shop.orders": settings}
    return document


@pytest.mark.parametrize("value", [True, "true"])
def test_iceberg_true_is_accepted_on_a_local_sink(value: object) -> None:
    sink = parse_config(_with({"iceberg": value})).sink
    assert sink.iceberg_for("shop.orders") and not sink.iceberg_for("inventory.stock")


def test_iceberg_false_is_accepted_and_changes_nothing() -> None:
    assert not parse_config(_with({"iceberg": False})).sink.iceberg_for("shop.orders")


def test_a_non_boolean_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"sink\.tables\.shop\.orders\.iceberg.*true or false"):
        parse_config(_with({"iceberg": "yes"}))


def test_without_pyiceberg_the_remedy_is_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "pyiceberg" else real(name, *args))
    with pytest.raises(ConfigError, match=r"sink\.tables\.shop\.orders\.iceberg.*pyiceberg") as raised:
        parse_config(_with({"iceberg": True}))
    assert raised.value.remedy == "pip install binlake[iceberg]"


@pytest.mark.parametrize(("settings", "sink", "refusal"), [
    ({"iceberg": True, "deletion_vectors": True}, {}, "deletion vectors"),
    ({"iceberg": True}, {"deletion_vectors": True}, "deletion vectors"),
])
def test_what_iceberg_metadata_could_not_describe_exactly_is_refused(
    settings: dict[str, Any], sink: dict[str, Any], refusal: str,
) -> None:
    with pytest.raises(ConfigError, match=refusal) as raised:
        parse_config(_with(settings, **sink))
    assert "sink.tables.shop.orders.iceberg" in str(raised.value) and raised.value.remedy


def test_an_s3_sink_takes_iceberg() -> None:
    # Written through pyiceberg's FileIO with the sink's endpoint and credentials (docs/iceberg.md).
    assert parse_config(_with({"iceberg": True}, path="s3a://lake-bucket/lake")).sink.iceberg_for("shop.orders")


def test_a_partitioned_table_takes_iceberg() -> None:
    # Identity partitions with each file's values in the manifests (docs/iceberg.md); types are checked at conversion.
    assert parse_config(_with({"iceberg": True, "partition_by": ["status"]})).sink.iceberg_for("shop.orders")


def test_pipeline_deletion_vectors_are_fine_when_the_table_turns_them_off() -> None:
    document = _with({"iceberg": True, "deletion_vectors": False}, deletion_vectors=True)
    assert parse_config(document).sink.iceberg_for("shop.orders")


def test_a_routed_table_refuses_iceberg() -> None:
    document = copy.deepcopy(VALID)
    document["source"]["tables"] = ["shop_1.orders_1"]
    document["sink"]["routes"] = [{"source": r"shop_1\..*", "target": "shop.orders"}]
    document["sink"]["tables"] = {"shop_1.orders_1": {"iceberg": True}}
    with pytest.raises(ConfigError, match=r"sink\.tables\.shop_1\.orders_1\.iceberg.*routed"):
        parse_config(document)


def test_the_cli_does_not_import_pyiceberg() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, cdc_lib.cli; print('pyiceberg' in sys.modules)"],
        capture_output=True, text=True, check=True,
    )
    assert loaded.stdout.strip() == "False"
