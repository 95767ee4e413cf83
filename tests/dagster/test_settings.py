"""`orchestration.settings`: schedules, thresholds and switches read from the environment, per pipeline."""

from __future__ import annotations

import pytest

from cdc_lib.errors import ConfigError
from orchestration.settings import OrchestrationSettings


def test_settings_defaults_and_errors() -> None:
    assert OrchestrationSettings.from_environ({}) == OrchestrationSettings()
    settings = OrchestrationSettings.from_environ({"BINLAKE_AUTO_RESNAPSHOT": "on", "BINLAKE_RUNWAY_WARN_HOURS": "6"})
    assert settings.auto_resnapshot and settings.runway_warn_hours == 6
    with pytest.raises(ConfigError, match="BINLAKE_AUTO_RESNAPSHOT"):
        OrchestrationSettings.from_environ({"BINLAKE_AUTO_RESNAPSHOT": "maybe"})
    with pytest.raises(ConfigError, match="BINLAKE_FRESHNESS_MINUTES"):
        OrchestrationSettings.from_environ({"BINLAKE_FRESHNESS_MINUTES": "soon"})


def test_a_pipeline_suffix_overrides_a_setting_for_that_pipeline_only() -> None:
    environ = {"BINLAKE_SYNC_CRON": "*/2 * * * *", "BINLAKE_SYNC_CRON_WEST_2": "*/5 * * * *",
               "BINLAKE_LAG_WARN_SECONDS_EAST": "60"}
    assert OrchestrationSettings.from_environ(environ, pipeline="west-2").sync_cron == "*/5 * * * *"
    east = OrchestrationSettings.from_environ(environ, pipeline="east")
    assert east.sync_cron == "*/2 * * * *" and east.lag_warn_seconds == 60
    assert OrchestrationSettings.from_environ(environ).lag_warn_seconds == 300
    with pytest.raises(ConfigError, match="BINLAKE_LAG_WARN_SECONDS_EAST"):
        OrchestrationSettings.from_environ({"BINLAKE_LAG_WARN_SECONDS_EAST": "-1"}, pipeline="east")
