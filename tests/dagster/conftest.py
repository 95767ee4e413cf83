"""Fixtures for the Dagster layer: the shop with its Dagster names, resource and definitions; a test instance.

The MariaDB server, the per-test database, the config factories and the shop itself come from tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg
import pytest

from assets.naming import PipelineNames
from assets.resources import BinlakeResource
from orchestration.definitions import build_definitions
from tests import conftest as shared


@dataclass(frozen=True)
class Shop(shared.Shop):
    """The shared shop (tests/conftest.py) with its Dagster names, resource and definitions."""

    @property
    def names(self) -> PipelineNames:
        return PipelineNames(self.config.pipeline)

    def resource(self, **overrides: Any) -> BinlakeResource:
        return BinlakeResource(config_path=str(self.config_path), reconcile_recheck_seconds=0, **overrides)

    def definitions(self) -> dg.Definitions:
        return build_definitions(self.config)


def freshness_checks_job(defs: dg.Definitions) -> dg.JobDefinition:
    """The freshness checks alone (in production their sensor launches them)."""
    global_job = defs.resolve_implicit_global_asset_job_def()
    checks = {key for key in global_job.asset_layer.asset_graph.asset_check_keys if key.name == "freshness_check"}
    return global_job.get_subset(asset_selection=set(), asset_check_selection=checks)


@pytest.fixture
def shop(shop: shared.Shop) -> Shop:
    """Overrides the shared `shop` fixture (which it receives) with the Dagster views."""
    return Shop(server=shop.server, database=shop.database, config=shop.config, config_path=shop.config_path)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as test_instance:
        yield test_instance
