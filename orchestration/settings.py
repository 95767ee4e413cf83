"""What the code location reads from the environment, once, when its definitions load.

    BINLAKE_CONFIG                 pipeline YAML(s) (required): one file, a folder of *.yaml, or several of
                                   either joined by ':' — one pipeline each (`cdc_lib.config.load.load_configs`)
    BINLAKE_SYNC_CRON              micro-batch schedule, default every minute ("* * * * *")
    BINLAKE_RECONCILE_CRON         reconciliation schedule, default daily at 03:00 ("0 3 * * *")
    BINLAKE_MAINTENANCE_CRON       each table's maintenance (compaction, VACUUM), default hourly ("17 * * * *")
    BINLAKE_SCHEDULE_TIMEZONE      time zone of the crons, default UTC
    BINLAKE_AUTO_RESNAPSHOT        1/true: re-snapshot a table that stopped with an error, default off
    BINLAKE_LAG_WARN_SECONDS       lag check threshold, default 300
    BINLAKE_RUNWAY_WARN_HOURS      binlog runway check threshold, default 72
    BINLAKE_FRESHNESS_MINUTES      freshness check window, default 15

Each variable can be set for one pipeline of a deployment by appending its name in
upper case, '-' as '_': `BINLAKE_SYNC_CRON_EAST=*/5 * * * *` applies to pipeline `east`
only and wins over `BINLAKE_SYNC_CRON`.

Every value except the crons can also be changed per run in the launchpad, as
config of the pipeline's `binlake_<pipeline>` resource.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from assets.resources import DEFAULT_LAG_WARN_SECONDS
from cdc_lib.errors import ConfigError
from cdc_lib.status.runway import DEFAULT_RUNWAY_WARN_HOURS

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class OrchestrationSettings:
    sync_cron: str = "* * * * *"
    reconcile_cron: str = "0 3 * * *"
    maintenance_cron: str = "17 * * * *"
    timezone: str = "UTC"
    auto_resnapshot: bool = False
    lag_warn_seconds: float = DEFAULT_LAG_WARN_SECONDS
    runway_warn_hours: float = DEFAULT_RUNWAY_WARN_HOURS
    freshness_minutes: float = 15.0
    sensor_interval_seconds: int = 60

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, pipeline: str | None = None) -> OrchestrationSettings:
        """Settings from `BINLAKE_*` variables; a bad value raises ConfigError naming the variable.

        With `pipeline`, `<VARIABLE>_<PIPELINE>` overrides `<VARIABLE>` for that pipeline.
        """
        suffix = "_" + re.sub(r"[^A-Za-z0-9_]", "_", pipeline).upper() if pipeline is not None else None

        def var(name: str) -> str:
            """The pipeline's own variable when it is set, so a bad value is reported under the name the user set."""
            return f"{name}{suffix}" if suffix and f"{name}{suffix}" in environ else name

        defaults = cls()
        return cls(
            sync_cron=environ.get(var("BINLAKE_SYNC_CRON"), defaults.sync_cron).strip(),
            reconcile_cron=environ.get(var("BINLAKE_RECONCILE_CRON"), defaults.reconcile_cron).strip(),
            maintenance_cron=environ.get(var("BINLAKE_MAINTENANCE_CRON"), defaults.maintenance_cron).strip(),
            timezone=environ.get(var("BINLAKE_SCHEDULE_TIMEZONE"), defaults.timezone).strip(),
            auto_resnapshot=_flag(environ, var("BINLAKE_AUTO_RESNAPSHOT"), defaults.auto_resnapshot),
            lag_warn_seconds=_positive(environ, var("BINLAKE_LAG_WARN_SECONDS"), defaults.lag_warn_seconds),
            runway_warn_hours=_positive(environ, var("BINLAKE_RUNWAY_WARN_HOURS"), defaults.runway_warn_hours),
            freshness_minutes=_positive(environ, var("BINLAKE_FRESHNESS_MINUTES"), defaults.freshness_minutes),
        )


def _flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    if name not in environ:
        return default
    value = environ[name].strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(name, f"'{environ[name]}' is not a boolean", remedy=f"set {name}=1 or {name}=0")


def _positive(environ: Mapping[str, str], name: str, default: float) -> float:
    if name not in environ:
        return default
    remedy = f"set {name} to a positive number"
    try:
        value = float(environ[name])
    except ValueError:
        raise ConfigError(name, f"'{environ[name]}' is not a number", remedy=remedy) from None
    if value <= 0:
        raise ConfigError(name, f"must be positive, got {value:g}", remedy=remedy)
    return value
