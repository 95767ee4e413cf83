"""What the Dagster daemon does, done by hand in a test: evaluate a sensor's tick, launch the runs it requests."""

from __future__ import annotations

from typing import Any

import dagster as dg

from tests.dagster.conftest import Shop


def tick(
    defs: dg.Definitions, name: str, instance: dg.DagsterInstance, shop: Shop, cursor: str | None = None, **resource
) -> dg.SensorExecutionData:
    sensor = defs.get_repository_def().get_sensor_def(name)
    context = dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={shop.names.resource_key: shop.resource(**resource)},
        definitions=defs,
    )
    return sensor.evaluate_tick(context)


def first_ticks(shop: Shop, defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, Any]:
    """The first evaluation of every sensor, as the daemon does when `dagster dev` starts."""
    names = shop.names
    return {
        name: tick(defs, name, instance, shop)
        for name in (names.missing_snapshot_sensor, names.table_error_sensor, names.freshness_sensor)
    }


def launch_freshness(defs: dg.Definitions, instance: dg.DagsterInstance, request: dg.RunRequest) -> Any:
    """What the daemon does with the freshness sensor's run request: run exactly the checks it names."""
    job = defs.resolve_implicit_global_asset_job_def().get_subset(
        asset_selection=set(), asset_check_selection=set(request.asset_check_keys or [])
    )
    return job.execute_in_process(instance=instance, tags=request.tags)
