"""The retention maintenance keeps: the largest of Delta's, the user's time travel, and known consumers'."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from cdc_lib.config.model import MaintenanceConfig
from cdc_lib.maintenance.retention import Consumer, interval_hours, retention_for
from cdc_lib.sink.storage import storage_for

NOW = dt.datetime(2026, 11, 27, 12, 0, tzinfo=dt.UTC)


def table_with_commit(tmp_path: Path, version: int, at: dt.datetime) -> str:
    log = tmp_path / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    info = {"commitInfo": {"timestamp": int(at.timestamp() * 1000), "operation": "MERGE"}}
    (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n")
    return str(tmp_path)


def test_intervals_as_delta_writes_them() -> None:
    assert interval_hours("interval 7 days") == 168 and interval_hours("interval 0 hours") == 0
    assert interval_hours("interval 90 minutes") == 1.5 and interval_hours("7 days") is None


def test_the_largest_bound_wins_and_says_why(tmp_path: Path) -> None:
    path = table_with_commit(tmp_path, 4, NOW - dt.timedelta(hours=30))
    storage = storage_for(path)
    default = retention_for(path, MaintenanceConfig(), {}, [], storage=storage, now=NOW)
    assert (default.file_hours, default.log_hours, default.oldest_needed_version) == (168, 720, None)
    zero = MaintenanceConfig(vacuum_retention_hours=0)
    floor = retention_for(path, zero, {"delta.deletedFileRetentionDuration": "interval 2 hours"}, [],
                          storage=storage, now=NOW)
    assert (floor.file_hours, floor.file_reason) == (2, "delta.deletedFileRetentionDuration")
    travel = retention_for(path, MaintenanceConfig(vacuum_retention_hours=0, keep_time_travel_hours=5), {}, [],
                           storage=storage, now=NOW)
    assert travel.file_hours == 5 and travel.log_hours == 720
    # A consumer at version 4 (committed 30 h ago) reads version 5 on: every file removed since stays.
    behind = retention_for(path, zero, {}, [Consumer("daily", 4), Consumer("hourly", 9)], storage=storage, now=NOW,
                           latest_version=9)
    assert behind.file_hours > 30 and "daily" in behind.file_reason and behind.oldest_needed_version == 5
    # One at the latest version needs no removed file.
    caught_up = retention_for(path, zero, {}, [Consumer("hourly", 9)], storage=storage, now=NOW, latest_version=9)
    assert caught_up.file_hours == 0 and caught_up.oldest_needed_version is None
