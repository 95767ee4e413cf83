"""The code location: one `Definitions` for every pipeline named by `$BINLAKE_CONFIG`.

`build_definitions` is the one builder of a pipeline's Dagster objects: the binlake component
(`orchestration.component`, one per `defs.yaml`) and this module's `defs` both call it.

Importing this module reads nothing. `defs` is built when Dagster loads the
code location (`dagster dev`, `dagster definitions validate -w workspace.yaml`):
it loads and validates each config file once (a bad key fails the load with
the key named), takes each table list from its file, and assembles, per
pipeline, assets, checks, jobs, schedules, sensors and a `binlake_<pipeline>`
resource. `$BINLAKE_CONFIG` is one file, a folder of `*.yaml`, or several of
either joined by ':'; every name carries the pipeline, so they never collide.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

from assets.checks import build_freshness_checks, build_reconciliation_checks
from assets.resources import BinlakeResource
from assets.tables import build_table_assets
from cdc_lib.config.deployment import check_disjoint
from cdc_lib.config.load import load_configs
from cdc_lib.config.model import PipelineConfig
from cdc_lib.errors import ConfigError
from cdc_lib.source.discovery import table_names, table_patterns
from orchestration.jobs import build_jobs
from orchestration.schedules import (
    build_follow_schedule,
    build_maintenance_schedules,
    build_reconcile_schedule,
    build_sync_schedule,
)
from orchestration.sensors import build_freshness_sensor, build_missing_snapshot_sensor, build_table_error_sensor
from orchestration.settings import OrchestrationSettings


@dataclass(frozen=True)
class InlineConfig:
    """A pipeline given as keys in a component's `defs.yaml` rather than as a file of its own."""

    #: The keys as written, `${VAR}` unexpanded: the resource keeps them and each run validates them again.
    document: Mapping[str, Any]
    #: The folder relative paths (sink.path, offsets.uri) resolve against: the component's own.
    base_dir: Path


def build_definitions(
    config: PipelineConfig,
    *,
    settings: OrchestrationSettings | None = None,
    tables: list[str] | None = None,
    inline: InlineConfig | None = None,
) -> dg.Definitions:
    """Everything Dagster shows for one pipeline.

    Args:
        config: the validated config: loaded from a file (its path is handed to the resource), or from `inline`.
        settings: schedules and thresholds; defaults when None.
        tables: the tables to build assets for; default `cdc_lib.source.discovery.table_names(config)`.
        inline: the keys `config` was parsed from when it has no file; the resource carries them to each run.
    """
    if config.config_path is None and inline is None:
        raise ConfigError(
            "<file>", "the definitions need a config loaded from a file or its inline keys",
            remedy="use load_config(path), or pass inline=InlineConfig(...)",
        )
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
            build_follow_schedule(names=names, job=jobs.follow, timezone=settings.timezone),
            *build_maintenance_schedules(
                names=names, cron=settings.maintenance_cron, timezone=settings.timezone,
                jobs={table: job for table, job in jobs.maintenance.items()
                      if config.sink.maintenance_for(table).enabled},
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
            build_freshness_sensor(names=names, checks=freshness),
        ],
        resources={names.resource_key: _resource(config, settings, inline)},
    )


def _resource(config: PipelineConfig, settings: OrchestrationSettings, inline: InlineConfig | None) -> BinlakeResource:
    """The pipeline's resource: it re-reads the config in each run (from the file, or from the inline keys)."""
    return BinlakeResource(
        config_path=str(config.config_path) if inline is None else None,
        config_yaml=yaml.safe_dump(dict(inline.document), sort_keys=False) if inline is not None else None,
        config_base_dir=str(inline.base_dir) if inline is not None else None,
        auto_resnapshot=settings.auto_resnapshot,
        lag_warn_seconds=settings.lag_warn_seconds,
        runway_warn_hours=settings.runway_warn_hours,
    )


def build_deployment(
    configs: list[PipelineConfig],
    *,
    settings: Callable[[PipelineConfig], OrchestrationSettings] | None = None,
) -> dg.Definitions:
    """One `Definitions` serving several pipelines (several MySQL servers), each with its own config file,
    offsets, schedules, sensors, pool and resource; `cdc_lib.config.deployment.check_disjoint` vets them first.

    Args:
        configs: configs loaded from files, e.g. by `cdc_lib.config.load.load_configs`.
        settings: each pipeline's schedules and thresholds; defaults when None.

    Raises:
        ConfigError: when two pipelines would share a Dagster name, a Delta table or a replica server_id.
    """
    if not configs:
        raise ConfigError("<deployment>", "no pipeline config given", remedy="set BINLAKE_CONFIG")
    tables = {config.pipeline: table_names(config) for config in configs}
    check_disjoint(configs, tables)
    return dg.Definitions.merge(
        *(
            build_definitions(
                config,
                settings=settings(config) if settings is not None else None,
                tables=tables[config.pipeline],
            )
            for config in configs
        )
    )


@dg.definitions
def defs() -> dg.Definitions:
    """Built by Dagster when it loads the code location; reads $BINLAKE_CONFIG and BINLAKE_* settings."""
    return build_deployment(
        load_configs(),
        settings=lambda config: OrchestrationSettings.from_environ(os.environ, pipeline=config.pipeline),
    )
