"""The code location: one `Definitions` for the pipeline named by `$BINLAKE_CONFIG`.

Importing this module reads nothing. `defs` is built when Dagster loads the
code location (`dagster dev`, `dagster definitions validate -w workspace.yaml`):
it loads and validates the config file once (a bad key fails the load with
the key named), takes the table list from it, and assembles assets, checks,
jobs, schedules, sensors and the `binlake` resource.
"""

from __future__ import annotations

import os
import warnings

import dagster as dg

from assets.checks import build_freshness_checks, build_reconciliation_checks
from assets.naming import PipelineNames
from assets.tables import build_table_assets
from cdc_lib.catalog import table_names, table_patterns
from cdc_lib.config import PipelineConfig, load_config
from cdc_lib.errors import ConfigError
from orchestration.jobs import build_jobs
from orchestration.resources import BinlakeResource
from orchestration.schedules import build_reconcile_schedule, build_sync_schedule
from orchestration.sensors import build_missing_snapshot_sensor, build_table_error_sensor
from orchestration.settings import OrchestrationSettings


def build_definitions(
    config: PipelineConfig,
    *,
    settings: OrchestrationSettings | None = None,
    tables: list[str] | None = None,
) -> dg.Definitions:
    """Everything Dagster shows for one pipeline.

    Args:
        config: a config loaded from a file (its path is handed to the resource).
        settings: schedules and thresholds; defaults when None.
        tables: the tables to build assets for; default `cdc_lib.catalog.table_names(config)`.
    """
    if config.config_path is None:
        raise ConfigError("<file>", "the definitions need a config loaded from a file", remedy="use load_config(path)")
    settings = settings or OrchestrationSettings()
    tables = list(tables) if tables is not None else table_names(config)
    table_assets = build_table_assets(config=config, tables=tables)
    names = table_assets.names
    reconciliation = build_reconciliation_checks(names=names, tables=tables)
    freshness = build_freshness_checks(names=names, tables=tables, minutes=settings.freshness_minutes)
    jobs = build_jobs(assets=table_assets, reconciliation=reconciliation)
    return dg.Definitions(
        assets=[*table_assets.source_specs, table_assets.snapshot, table_assets.sync],
        asset_checks=[reconciliation, *freshness],
        jobs=jobs.all(),
        schedules=[
            build_sync_schedule(names=names, job=jobs.sync, cron=settings.sync_cron, timezone=settings.timezone),
            build_reconcile_schedule(
                names=names, job=jobs.reconcile, cron=settings.reconcile_cron, timezone=settings.timezone
            ),
        ],
        sensors=[
            build_missing_snapshot_sensor(
                names=names, tables=tables, job=jobs.snapshot, has_patterns=bool(table_patterns(config)),
                interval_seconds=settings.sensor_interval_seconds,
            ),
            build_table_error_sensor(
                names=names, tables=tables, job=jobs.snapshot, interval_seconds=settings.sensor_interval_seconds
            ),
            freshness_sensor(names=names, checks=freshness),
        ],
        resources={
            "binlake": BinlakeResource(
                config_path=str(config.config_path),
                auto_resnapshot=settings.auto_resnapshot,
                lag_warn_seconds=settings.lag_warn_seconds,
                runway_warn_hours=settings.runway_warn_hours,
            )
        },
    )


def freshness_sensor(*, names: PipelineNames, checks: list[dg.AssetChecksDefinition]) -> dg.SensorDefinition:
    """Evaluates the freshness checks (see `assets.checks.build_freshness_checks` for why not FreshnessPolicy)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.SupersessionWarning)
        return dg.build_sensor_for_freshness_checks(
            freshness_checks=checks,
            name=names.freshness_sensor,
            default_status=dg.DefaultSensorStatus.RUNNING,
            tags=names.run_tags,
        )


@dg.definitions
def defs() -> dg.Definitions:
    """Built by Dagster when it loads the code location; reads $BINLAKE_CONFIG and BINLAKE_* settings."""
    return build_definitions(load_config(), settings=OrchestrationSettings.from_environ(os.environ))
