"""binlake as a Dagster component: one `defs.yaml` per pipeline in any `dg` project.

`dg scaffold defs orchestration.component.BinlakeComponent <name>` writes a `defs.yaml` whose attributes are
the keys of a binlake pipeline file (pipeline, source, sink, offsets, spark, batch, snapshot, catalog,
metrics), or a
`config_path` naming such a file, plus the orchestration settings the code location reads from `BINLAKE_*`
variables. When Dagster loads the project, each instance validates its keys with the pipeline file's own
parser (same keys, same errors), checks that it does not overwrite another binlake instance of the project,
and returns `orchestration.definitions.build_definitions(...)`: the same assets, checks, jobs, schedules,
sensors and resource the `workspace.yaml` code location builds.

An inline config reaches each run through the pipeline's resource, as written (`${VAR}` unexpanded): a
secret written out in `defs.yaml` would show in the UI's resource config, so it is refused.
"""

from __future__ import annotations

import fnmatch
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import dagster as dg
from pydantic import Field, PrivateAttr

from cdc_lib.config.deployment import check_disjoint, name_slug
from cdc_lib.config.load import config_from_document, load_config
from cdc_lib.config.model import PipelineConfig
from cdc_lib.errors import ConfigError
from cdc_lib.source.discovery import table_names
from orchestration.definitions import InlineConfig, build_definitions
from orchestration.settings import OrchestrationSettings

#: The top-level keys of a pipeline file, each an attribute of the component.
PIPELINE_KEYS = ("pipeline", "source", "sink", "offsets", "spark", "batch", "snapshot", "catalog", "metrics")
#: Keys whose value is a secret: inline, only a `${VAR}` placeholder may stand there.
SECRET_KEYS = (("source", "password"), ("sink", "secret_access_key"), ("sink", "session_token"))

_DEFAULTS = OrchestrationSettings()


@dataclass(frozen=True)
class ResolvedPipeline:
    """One instance's validated config, the tables it builds assets for, and its inline keys (if any)."""

    config: PipelineConfig
    tables: list[str]
    inline: InlineConfig | None


class BinlakeScaffolder(dg.Scaffolder[dg.Model]):
    """Writes a commented `defs.yaml`: the pipeline keys to fill in, the optional ones and their defaults."""

    def scaffold(self, request: dg.ScaffoldRequest[dg.Model]) -> None:
        if request.scaffold_format != "yaml":
            dg.scaffold_component(request)
            return
        request.target_path.mkdir(parents=True, exist_ok=True)
        (request.target_path / "defs.yaml").write_text(
            defs_yaml_template(request.type_name, request.target_path.name)
        )


def defs_yaml_template(type_name: str, name: str) -> str:
    """The `defs.yaml` `dg scaffold defs` writes for an instance called `name` (also its pipeline name)."""
    pipeline = name_slug(name)
    prefix = pipeline.upper()
    return textwrap.dedent(f"""\
        type: {type_name}

        # One binlake pipeline: a MySQL/MariaDB server's tables kept in step with Delta tables.
        # The keys are those of a binlake pipeline file (binlake's README, "Configure a pipeline"), checked alike.
        # ${{VAR}} and ${{VAR:-default}} are read from the environment when the definitions load and in each run.
        attributes:
          pipeline: {pipeline}    # names offsets, Delta commits, jobs (binlake_{pipeline}_sync) and asset keys
          source:
            host: "${{{prefix}_MYSQL_HOST:-127.0.0.1}}"
            port: 3306
            user: binlake
            password: "${{{prefix}_MYSQL_PASSWORD}}"    # always a ${{VAR}}: a written-out secret is refused
            server_id: 6401    # unique among the server's replicas (and among this project's pipelines)
            tables: [shop.orders, shop.customers]    # 'database.table' or 'database.*'
          sink:
            path: "${{BINLAKE_LAKE:-/tmp/binlake-lake}}/{pipeline}"    # a folder (relative: to this one) or s3a://bucket/prefix
          # offsets: {{uri: ...}}    # default: <sink.path>/_offsets
          # spark: {{master: "local[*]", conf: {{}}}}
          # batch: {{max_events: 100000, max_seconds: 60}}
          # snapshot: {{rows_per_partition: 500000, max_partitions: 8}}
          # catalog: {{enabled: true}}    # name the tables in a Spark catalog (docs/catalog.md)
          # metrics: {{address: "127.0.0.1:9464"}}    # OpenMetrics endpoint while follow mode runs (docs/production.md)

          # Or, instead of the keys above, a pipeline file of its own (relative to this folder):
          # config_path: binlake.yaml

          # Orchestration (the defaults shown):
          # sync_cron: "{_DEFAULTS.sync_cron}"
          # reconcile_cron: "{_DEFAULTS.reconcile_cron}"
          # timezone: {_DEFAULTS.timezone}
          # auto_resnapshot: {str(_DEFAULTS.auto_resnapshot).lower()}
          # lag_warn_seconds: {_DEFAULTS.lag_warn_seconds:g}
          # runway_warn_hours: {_DEFAULTS.runway_warn_hours:g}
          # freshness_minutes: {_DEFAULTS.freshness_minutes:g}
          # tables: [shop.orders]    # assets for these tables only (default: every table source.tables selects)
        """)


@dg.scaffold_with(BinlakeScaffolder)
class BinlakeComponent(dg.Component, dg.Resolvable, dg.Model):
    """A binlake pipeline (MySQL/MariaDB binlog → Delta Lake): its table assets, snapshot, checks, jobs,
    schedules, sensors and resource. Attributes: the keys of a binlake pipeline file, or `config_path`."""

    config_path: str | None = Field(
        default=None, description="A binlake pipeline file (relative to this folder) instead of the keys inline."
    )
    # The pipeline keys are taken as given (`Any`) so that the pipeline file's parser checks them: same keys,
    # same messages, and a number or flag may come as a `${VAR}` string, as in a file.
    pipeline: Any = Field(default=None, description="The pipeline's name (offsets, Delta commits, Dagster names).")
    source: Any = Field(default=None, description="The MySQL/MariaDB server and the tables to follow.")
    sink: Any = Field(default=None, description="Where the Delta tables live.")
    offsets: Any = Field(default=None, description="Where the offsets live (default: in the sink).")
    spark: Any = Field(default=None, description="Spark master and conf.")
    batch: Any = Field(default=None, description="Micro-batch bounds.")
    snapshot: Any = Field(default=None, description="Snapshot partitioning.")
    catalog: Any = Field(default=None, description="Register the Delta tables under names in a Spark catalog.")
    metrics: Any = Field(default=None, description="The OpenMetrics endpoint follow mode serves (address).")
    tables: list[str] | None = Field(
        default=None, description="Build assets for these tables only (default: every table source.tables selects)."
    )
    sync_cron: str = Field(default=_DEFAULTS.sync_cron, description="Micro-batch schedule.")
    reconcile_cron: str = Field(default=_DEFAULTS.reconcile_cron, description="Reconciliation schedule.")
    timezone: str = Field(default=_DEFAULTS.timezone, description="Time zone of both crons.")
    auto_resnapshot: bool = Field(
        default=_DEFAULTS.auto_resnapshot, description="Re-snapshot a table that stopped with an error."
    )
    lag_warn_seconds: float = Field(default=_DEFAULTS.lag_warn_seconds, gt=0, description="Lag check threshold.")
    runway_warn_hours: float = Field(
        default=_DEFAULTS.runway_warn_hours, gt=0, description="Binlog runway check threshold."
    )
    freshness_minutes: float = Field(default=_DEFAULTS.freshness_minutes, gt=0, description="Freshness window.")

    # The folder of this instance's defs.yaml (relative paths resolve against it) and its validated config.
    _folder: Path | None = PrivateAttr(default=None)
    _resolved: ResolvedPipeline | None = PrivateAttr(default=None)

    @classmethod
    def load(cls, attributes: Any, context: dg.ComponentLoadContext) -> Self:
        component = super().load(attributes, context)
        component._folder = context.path
        return component

    def settings(self) -> OrchestrationSettings:
        return OrchestrationSettings(
            sync_cron=self.sync_cron,
            reconcile_cron=self.reconcile_cron,
            timezone=self.timezone,
            auto_resnapshot=self.auto_resnapshot,
            lag_warn_seconds=self.lag_warn_seconds,
            runway_warn_hours=self.runway_warn_hours,
            freshness_minutes=self.freshness_minutes,
        )

    def resolve(self, folder: Path) -> ResolvedPipeline:
        """Validate the config once (table patterns expand on the server here) and keep it.

        Raises:
            ConfigError: naming the bad key, as for a pipeline file.
        """
        if self._resolved is None:
            self._folder = self._folder or folder
            config, inline = self._config(self._folder)
            self._resolved = ResolvedPipeline(config=config, tables=self._tables(config), inline=inline)
        return self._resolved

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        resolved = self.resolve(context.path)
        self._check_other_instances(context, resolved)
        return build_definitions(
            resolved.config, settings=self.settings(), tables=resolved.tables, inline=resolved.inline
        )

    def _config(self, folder: Path) -> tuple[PipelineConfig, InlineConfig | None]:
        document = {key: getattr(self, key) for key in PIPELINE_KEYS if getattr(self, key) is not None}
        if self.config_path is not None:
            if document:
                raise ConfigError(
                    "config_path", f"is given together with inline pipeline keys ({', '.join(document)})",
                    remedy="keep one: config_path, or the pipeline keys in defs.yaml",
                )
            path = Path(self.config_path)
            return load_config(path if path.is_absolute() else folder / path), None
        if not document:
            raise ConfigError(
                "pipeline", "the component names no pipeline",
                remedy="give the pipeline keys (pipeline, source, sink, ...) or config_path in defs.yaml's attributes",
            )
        for section, key in SECRET_KEYS:
            value = document[section].get(key) if isinstance(document.get(section), dict) else None
            if value not in (None, "") and "${" not in str(value):
                raise ConfigError(
                    f"{section}.{key}", "is written out in defs.yaml; the component hands its keys to the pipeline's "
                    "resource, whose config the Dagster UI shows",
                    remedy='write it as "${SOME_VARIABLE}" (not a {{ env.… }} template, which Dagster fills '
                    "in at load) and set that variable where the code location and its runs start",
                )
        inline = InlineConfig(document=document, base_dir=folder)
        return config_from_document(document, base_dir=folder), inline

    def _tables(self, config: PipelineConfig) -> list[str]:
        if self.tables is None:
            return table_names(config)
        for index, table in enumerate(self.tables):
            if "*" in table or not any(fnmatch.fnmatchcase(table, entry) for entry in config.source.tables):
                raise ConfigError(
                    f"tables[{index}]",
                    f"'{table}' is not a table of source.tables ({', '.join(config.source.tables)})",
                    remedy="name one 'database.table' that source.tables selects, or drop the tables attribute",
                )
        return list(self.tables)

    def _check_other_instances(self, context: dg.ComponentLoadContext, resolved: ResolvedPipeline) -> None:
        """The checks of a `$BINLAKE_CONFIG` deployment, across this project's binlake instances: no two share
        Dagster names, a Delta table, a replica server_id, or an S3 bucket name with other settings."""
        pipelines = [resolved]
        for other in context.component_tree.get_all_components(BinlakeComponent):
            if other is self or other._folder is None:
                continue
            try:
                pipelines.append(other.resolve(other._folder))
            except ConfigError:
                continue  # that instance's own build reports its bad key, under its own defs.yaml
        tables = {pipeline.config.pipeline: pipeline.tables for pipeline in pipelines}
        check_disjoint([pipeline.config for pipeline in pipelines], tables)
