"""The code location: one `Definitions` for every pipeline named by `$BINLAKE_CONFIG`.

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
import warnings
from collections.abc import Callable

import dagster as dg

from assets.checks import build_freshness_checks, build_reconciliation_checks
from assets.naming import PipelineNames
from assets.tables import build_table_assets
from cdc_lib.catalog import table_names, table_patterns
from cdc_lib.config import PipelineConfig, load_configs
from cdc_lib.errors import ConfigError
from cdc_lib.s3 import split_s3_uri
from cdc_lib.source import TableRef
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
            names.resource_key: BinlakeResource(
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


def build_deployment(
    configs: list[PipelineConfig],
    *,
    settings: Callable[[PipelineConfig], OrchestrationSettings] | None = None,
) -> dg.Definitions:
    """One `Definitions` serving several pipelines (several MySQL servers), each with its own config file,
    offsets, schedules, sensors, pool and resource.

    Args:
        configs: configs loaded from files, e.g. by `cdc_lib.config.load_configs`.
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


def check_disjoint(configs: list[PipelineConfig], tables: dict[str, list[str]]) -> None:
    """Refuse pipelines that would overwrite each other's Dagster names, Delta tables or replication slot."""
    by_slug: dict[str, str] = {}
    by_table_path: dict[str, tuple[str, str]] = {}
    by_replica: dict[tuple[str, int, int], str] = {}
    by_bucket: dict[str, tuple[str, object]] = {}
    for config in configs:
        where = config.config_path or config.pipeline
        slug = PipelineNames(config.pipeline).slug.lower()
        if slug in by_slug:
            raise ConfigError(
                "pipeline", f"'{config.pipeline}' ({where}) and '{by_slug[slug]}' give the same Dagster names "
                f"(binlake_{slug}_…)", remedy="rename one pipeline; names differing only in case, '-' or '_' collide",
            )
        by_slug[slug] = config.pipeline
        replica = (config.source.host, config.source.port, config.source.server_id)
        if replica in by_replica:
            raise ConfigError(
                "source.server_id", f"pipelines '{by_replica[replica]}' and '{config.pipeline}' both read "
                f"{config.source.host}:{config.source.port} as replica {config.source.server_id}; the server drops "
                "one of two replicas with the same id", remedy=f"give pipeline '{config.pipeline}' its own server_id",
            )
        by_replica[replica] = config.pipeline
        if config.sink.on_s3:
            # Hadoop caches one S3A filesystem per bucket name for the whole process: two stores behind one
            # bucket name would both be reached through whichever pipeline opened it first.
            bucket, _ = split_s3_uri(config.sink.path)
            if bucket in by_bucket and by_bucket[bucket][1] != config.sink.s3:
                raise ConfigError(
                    "sink.path", f"pipelines '{by_bucket[bucket][0]}' and '{config.pipeline}' use bucket '{bucket}' "
                    "with different S3 settings (endpoint, region or credentials); one Spark process reaches a "
                    "bucket name through one S3 client", remedy="use one bucket name per S3 store, or give both "
                    "pipelines the same sink S3 settings, or serve them from separate code locations",
                )
            by_bucket[bucket] = (config.pipeline, config.sink.s3)
        for table in tables[config.pipeline]:
            ref = TableRef.parse(table)
            path = config.sink.table_path(ref.database, ref.table)
            if path in by_table_path:
                other, other_table = by_table_path[path]
                raise ConfigError(
                    "sink.path", f"pipelines '{other}' ({other_table}) and '{config.pipeline}' ({table}) both "
                    f"write the Delta table {path}", remedy=f"give pipeline '{config.pipeline}' its own sink.path",
                )
            by_table_path[path] = (config.pipeline, table)


@dg.definitions
def defs() -> dg.Definitions:
    """Built by Dagster when it loads the code location; reads $BINLAKE_CONFIG and BINLAKE_* settings."""
    return build_deployment(
        load_configs(),
        settings=lambda config: OrchestrationSettings.from_environ(os.environ, pipeline=config.pipeline),
    )
