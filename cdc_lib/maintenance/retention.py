"""What a table's readers may still need: the oldest version to keep files for, and the log to keep.

Three kinds of reader set the bound, and the safe side of each is taken:

- Delta's own `delta.deletedFileRetentionDuration` (the table's, else `vacuum_retention_hours`, else 7 days) and
  `delta.logRetentionDuration` (30 days), which other Delta readers and writers assume;
- the time travel the user asked for (`keep_time_travel_hours`);
- every change-data-feed consumer binlake knows (`sink/change_feed.py`: a derived table under `_derived/` whose
  log records the source version it reflects). A consumer at version v reads versions > v next: the files a
  commit after v removed, and the commit files after v. VACUUM in Delta is time-based, so the version is turned
  into its commit's timestamp, and the retention covers the commit at v itself (earlier, never later).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from cdc_lib.config.model import MaintenanceConfig
from cdc_lib.sink import delta_log
from cdc_lib.sink.change_feed import read_cursor
from cdc_lib.sink.storage import SinkStorage

#: Delta's defaults when a table sets none (`delta.deletedFileRetentionDuration`, `delta.logRetentionDuration`).
DELTA_FILE_RETENTION_HOURS = 7 * 24.0
DELTA_LOG_RETENTION_HOURS = 30 * 24.0
#: Where binlake's change-feed consumers keep their output tables (`assets/change_feed.derived_table_path`).
DERIVED_FOLDER = "_derived"
_INTERVAL = re.compile(r"^\s*interval\s+(\d+)\s+(\w+?)s?\s*$", re.IGNORECASE)
_UNIT_HOURS = {"second": 1 / 3600, "minute": 1 / 60, "hour": 1.0, "day": 24.0, "week": 168.0}


def interval_hours(text: str | None) -> float | None:
    """Delta's `interval 7 days` as hours; None when unset or not in that form (then Delta's default applies)."""
    if not text:
        return None
    match = _INTERVAL.match(text)
    if match is None or match.group(2).lower() not in _UNIT_HOURS:
        return None
    return int(match.group(1)) * _UNIT_HOURS[match.group(2).lower()]


@dataclass(frozen=True)
class Consumer:
    """A change-feed consumer of a table, and the source version its output reflects."""

    name: str
    source_version: int


def consumers_of(sink_root: str, table_path: str, *, storage: SinkStorage, handler: Any) -> list[Consumer]:
    """Every consumer under `<sink>/_derived/` whose cursor names `table_path` as its source (`handler`: a
    delta-rs storage handler on the sink's root, which lists folders on S3 too)."""
    from pyarrow.fs import FileSelector, FileType

    root = f"{sink_root.rstrip('/')}/{DERIVED_FOLDER}"
    infos = handler.get_file_info_selector(FileSelector(DERIVED_FOLDER, recursive=False, allow_not_found=True))
    found = []
    for name in sorted(info.path.rsplit("/", 1)[-1] for info in infos if info.type == FileType.Directory):
        cursor = read_cursor(f"{root}/{name}", name, storage=storage)
        if cursor is not None and cursor.source_path.rstrip("/") == table_path.rstrip("/"):
            found.append(Consumer(name, cursor.source_version))
    return found


def commit_timestamp(path: str, version: int, *, storage: SinkStorage) -> dt.datetime | None:
    """The commit time `commitInfo.timestamp` of `version`; None when its commit file is gone."""
    content = storage.read_bytes(delta_log.commit_file(path, version))
    if content is None:
        return None
    for line in content.decode().split("\n"):
        if '"commitInfo"' in line:
            stamp = json.loads(line)["commitInfo"].get("timestamp")
            if stamp is not None:
                return dt.datetime.fromtimestamp(int(stamp) / 1000, dt.UTC)
    return None


@dataclass(frozen=True)
class Retention:
    """How long files a commit removed are kept, and from which version on the log is kept."""

    #: VACUUM's retention: the files removed within it stay.
    file_hours: float
    #: Why (the bound that set it), for the report.
    file_reason: str
    #: The log is kept for this long at least.
    log_hours: float
    #: The oldest version a known consumer still has to read (None: none known); its commit and every later one
    #: stay in the log.
    oldest_needed_version: int | None


def retention_for(
    path: str,
    settings: MaintenanceConfig,
    properties: dict[str, str],
    consumers: list[Consumer],
    *,
    storage: SinkStorage,
    now: dt.datetime,
    latest_version: int | None = None,
) -> Retention:
    """The retention that keeps every file and commit the table's readers may need (module docstring)."""
    delta_files = interval_hours(properties.get("delta.deletedFileRetentionDuration"))
    configured = settings.vacuum_retention_hours
    base = configured if configured is not None else DELTA_FILE_RETENTION_HOURS
    candidates = [(base, "vacuum_retention_hours" if configured is not None else "Delta's default (7 days)")]
    if delta_files is not None:
        candidates.append((delta_files, "delta.deletedFileRetentionDuration"))
    if settings.keep_time_travel_hours:
        candidates.append((settings.keep_time_travel_hours, "keep_time_travel_hours"))
    oldest: int | None = None
    # A consumer at the latest version needs no file removed so far: only one behind it bounds the retention.
    behind = [consumer for consumer in consumers if latest_version is None or consumer.source_version < latest_version]
    if behind:
        slowest = min(behind, key=lambda consumer: consumer.source_version)
        oldest = slowest.source_version + 1
        stamp = commit_timestamp(path, slowest.source_version, storage=storage)
        if stamp is None:
            # Its commit file is gone already: nothing binlake removes can help it any more (it recomputes,
            # `ChangesExpiredError`); the log before it is kept all the same.
            pass
        else:
            hours = max(0.0, (now - stamp).total_seconds() / 3600)
            # Whole minutes on the safe side: the clock of the writer and of this run may differ a little.
            candidates.append((math.ceil(hours * 60 + 5) / 60, f"change-feed consumer {slowest.name} at version "
                               f"{slowest.source_version}"))
    file_hours, reason = max(candidates, key=lambda candidate: candidate[0])
    delta_log_hours = interval_hours(properties.get("delta.logRetentionDuration"))
    log_hours = max(DELTA_LOG_RETENTION_HOURS if delta_log_hours is None else delta_log_hours,
                    settings.keep_time_travel_hours)
    return Retention(file_hours=file_hours, file_reason=reason, log_hours=log_hours, oldest_needed_version=oldest)


__all__ = [
    "DELTA_FILE_RETENTION_HOURS", "DELTA_LOG_RETENTION_HOURS", "DERIVED_FOLDER", "Consumer", "Retention",
    "commit_timestamp", "consumers_of", "interval_hours", "retention_for",
]
