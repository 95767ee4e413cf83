"""What an in-process Dagster run recorded: its materializations, observations and check results, by asset."""

from __future__ import annotations

from typing import Any

import dagster as dg


def materializations(result: dg.ExecuteInProcessResult) -> dict[dg.AssetKey, dict[str, Any]]:
    found = {}
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        found[materialization.asset_key] = {key: value.value for key, value in materialization.metadata.items()}
    return found


#: The description of the observation that carries a table's metrics (assets/metrics.py), apart from the others.
METRICS_OBSERVATION = "binlake metrics"


def observations(
    result: dg.ExecuteInProcessResult, *, metrics: bool = False
) -> dict[dg.AssetKey, dict[str, Any]]:
    """The lag-and-offset observations by asset; with `metrics`, the "binlake metrics" ones instead."""
    found = {}
    for event in result.get_asset_observation_events():
        observation = event.asset_observation_data.asset_observation
        if (observation.description == METRICS_OBSERVATION) != metrics:
            continue
        found[observation.asset_key] = {key: value.value for key, value in observation.metadata.items()}
    return found


def check_results(result: dg.ExecuteInProcessResult) -> dict[tuple[str, str], dg.AssetCheckEvaluation]:
    return {
        (evaluation.asset_key.path[-1], evaluation.check_name): evaluation
        for evaluation in result.get_asset_check_evaluations()
    }
