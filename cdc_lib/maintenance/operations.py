"""The maintenance operations on one Delta table, by the engine that writes it (`sink/choice.py`).

delta-rs tables (no JVM):
- compaction that keeps binlake's key order (`key_rewrite.compact_runs`: runs of small files next to each other
  in key order, merged sorted), or delta-rs's `optimize.compact()` where batches do not keep a key order anyway
  (a composite or non-integer key: delta-rs's MERGE hash-spreads those rows);
- VACUUM of removed files past the retention, then of files no version refers to (a batch or a maintenance run
  killed before its commit) past at least `UNTRACKED_FLOOR_HOURS`: a running batch writes its files before it
  commits them, so a file no version names yet may be one it is about to commit;
- a checkpoint once `checkpoint_every_commits` follow the last; log files before the newest checkpoint that
  every reader (retention, consumers, binlake's own replay check) is past.

Spark tables: `OPTIMIZE` (optionally `ZORDER BY`) and `VACUUM`; Spark writes its own checkpoints and cleans its
log at them. Every compaction commit says `dataChange: false` and changes no row; one that meets a batch's
commit fails and is planned again on a fresh snapshot (never the batch: `run.py` retries).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from cdc_lib.common.faults import failpoint
from cdc_lib.config.model import MaintenanceConfig
from cdc_lib.model.tables import TableSchema
from cdc_lib.sink import delta_log
from cdc_lib.sink.delta_rs import file_layout, key_rewrite
from cdc_lib.sink.key_bounds import FileKeys, file_keys
from cdc_lib.sink.spark.uniform import check_uniform_writable
from cdc_lib.sink.storage import SinkStorage, storage_for

from .retention import Retention, commit_timestamp

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

#: A file below this share of the target size is small: compaction merges such files.
SMALL_SHARE = 0.5
#: Files no version names are removed only past this age, whatever the retention: a batch writes its files
#: before it commits them (seconds to minutes), and a VACUUM must never remove one it is about to commit.
UNTRACKED_FLOOR_HOURS = 1.0
#: The most Parquet bytes one compaction commit reads and rewrites in memory; the rest waits for the next run.
MAX_COMPACTION_BYTES = 256 * 1024 * 1024
#: Spark's OPTIMIZE writes files up to this by default (`spark.databricks.delta.optimize.maxFileSize`).
SPARK_TARGET_FILE_BYTES = 1024 * 1024 * 1024
#: `kind` of a maintenance commit's `userMetadata` (no app id: the commit is none of the batches').
MAINTENANCE_KIND = "maintenance"
_LOG_FILE = re.compile(r"^(\d{20})\.(json|crc|checkpoint(\.\d+\.\d+)?\.parquet|checkpoint\.[0-9a-f-]{36}\.\w+)$")


@dataclass
class Outcome:
    """What one table's maintenance did (or, in a dry run, would do)."""

    table: str
    engine: str
    dry_run: bool
    files_before: int = 0
    bytes_before: int = 0
    compacted_files: int = 0
    compacted_bytes: int = 0
    files_written: int = 0
    vacuumed_files: int = 0
    vacuumed_bytes: int = 0
    retention_hours: float = 0.0
    retention_reason: str = ""
    checkpoint_version: int | None = None
    log_files_removed: int = 0
    tombstones_dropped: int = 0
    leftovers_removed: list[str] = field(default_factory=list)
    attempts: int = 1
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _NO_HOOKS() -> Any:  # noqa: N802 - reads as the constant it stands for
    """No checkpoint and, above all, no log cleanup after a maintenance commit: delta-rs would remove log files by
    `delta.logRetentionDuration` alone, also those a change-feed consumer still reads (`log_cleanup` decides)."""
    from deltalake import PostCommitHookProperties

    return PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def small_runs(files: list[FileKeys], target_bytes: int, budget: int = MAX_COMPACTION_BYTES) -> list[list[FileKeys]]:
    """Runs of small files next to each other in key order, each up to `target_bytes`, for one commit.

    Ordered by (min, max) key; a file that is not small ends a run (merging across it would make a file whose
    key range overlaps it, which the next batch's key search would then read too). A run of one file is left.
    A file without key statistics: no runs at all (its place in the order is unknown).
    """
    if any(file.low is None or file.high is None for file in files):
        return []
    ordered = sorted(files, key=lambda file: (file.low, file.high))
    runs: list[list[FileKeys]] = []
    run: list[FileKeys] = []
    total = spent = 0
    for file in ordered:
        if file.size >= target_bytes * SMALL_SHARE or total + file.size > target_bytes:
            if len(run) > 1:
                runs.append(run)
                spent += total
            run, total = ([], 0) if file.size >= target_bytes * SMALL_SHARE else ([file], file.size)
        else:
            run.append(file)
            total += file.size
        if spent > budget:
            break
    if len(run) > 1 and spent <= budget:
        runs.append(run)
    return runs


def compact_delta_rs(
    table: DeltaTable, schema: TableSchema | None, settings: MaintenanceConfig, outcome: Outcome, *,
    storage_options: dict[str, str] | None, run_id: str,
) -> None:
    """Compact a delta-rs table (module docstring); fills `outcome`. Raises delta-rs's CommitFailedError when a
    batch committed meanwhile (the caller plans again)."""
    from deltalake import CommitProperties

    target = settings.compact_target_file_bytes or file_layout.target_file_bytes(table.metadata().configuration)
    metadata = {"userMetadata": json.dumps({"kind": MAINTENANCE_KIND, "run": run_id, "operation": "compact"})}
    if settings.zorder_by:
        outcome.notes.append("zorder_by ignored: delta-rs writes this table's batches in key order, which a "
                             "Z-order would undo (write it with Spark, batch.writer: spark, to Z-order it)")
    key = schema.primary_key[0] if schema is not None and key_rewrite.applies(schema, False) else None
    if key is not None:
        runs = small_runs(file_keys(table, key), target)
        count = sum(len(run) for run in runs)
        if count < settings.min_files_to_compact:
            outcome.notes.append(f"{count} small files next to each other in key order: below "
                                 f"min_files_to_compact ({settings.min_files_to_compact})")
            return
        outcome.compacted_files = count
        outcome.compacted_bytes = sum(file.size for run in runs for file in run)
        if outcome.dry_run:
            return
        done = key_rewrite.compact_runs(table, key, runs, storage_options=storage_options,
                                        scratch=f"{key_rewrite.SCRATCH_FOLDER}/maintain-{run_id}",
                                        target_bytes=target, custom_metadata=metadata,
                                        before_commit=lambda: failpoint("maintenance.before_commit"))
        outcome.files_written = done.files_added
        return
    import pyarrow as pa

    actions = pa.table(table.get_add_actions(flatten=True))
    sizes = actions.column("size_bytes").to_pylist()
    small = [size for size in sizes if size < target * SMALL_SHARE]
    if len(small) < settings.min_files_to_compact:
        outcome.notes.append(f"{len(small)} small files: below min_files_to_compact ({settings.min_files_to_compact})")
        return
    outcome.compacted_files, outcome.compacted_bytes = len(small), sum(small)
    if outcome.dry_run:
        return
    failpoint("maintenance.before_commit")
    metrics = table.optimize.compact(target_size=target, commit_properties=CommitProperties(
        custom_metadata=metadata, max_commit_retries=0), post_commithook_properties=_NO_HOOKS())
    outcome.compacted_files = int(metrics.get("numFilesRemoved", outcome.compacted_files))
    outcome.files_written = int(metrics.get("numFilesAdded", 0))


def vacuum_delta_rs(table: DeltaTable, retention: Retention, outcome: Outcome, *, handler: Any,
                    sizes: Callable[[list[str]], int]) -> set[str]:
    """VACUUM (module docstring): removed files past the retention, then files no version names past the floor;
    the removed files whose tombstones a checkpoint may now drop (none in a dry run).

    delta-rs's own VACUUM lists the files (its dry run) and binlake removes them: its commit would add two log
    entries a running batch's commit then meets, and would clean the log by `delta.logRetentionDuration` alone
    (measured on 1.6.6, whatever its post-commit settings say), also of entries a change-feed consumer still reads.
    """
    hours = math.ceil(retention.file_hours)  # delta-rs takes whole hours: rounded up, the safe side
    removed = table.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False)
    untracked = table.vacuum(retention_hours=max(hours, math.ceil(UNTRACKED_FLOOR_HOURS)), dry_run=True,
                             enforce_retention_duration=False, full=True)
    candidates = sorted(set(removed) | set(untracked))
    outcome.vacuumed_files, outcome.vacuumed_bytes = len(candidates), sizes(candidates)
    if outcome.dry_run:
        return set()
    for name in candidates:
        try:
            handler.delete_file(name)
        except FileNotFoundError:
            pass  # another maintenance run removed it first
    return set(removed)


def checkpoint_delta_rs(table: DeltaTable, path: str, settings: MaintenanceConfig, outcome: Outcome, *,
                        application: str, storage: SinkStorage, vacuumed: set[str]) -> None:
    """A checkpoint once `checkpoint_every_commits` commits follow the newest one, or once VACUUM removed files;
    after a VACUUM, one without the tombstones of the files it removed (`checkpoint_without_tombstones`).

    Why after every VACUUM that removed files: delta-rs keeps a tombstone in each checkpoint for the table's
    `delta.deletedFileRetentionDuration` (Delta's 7 days), whatever retention VACUUM honoured. With a shorter
    retention (`vacuum_retention_hours`, scaled down in the soak) a checkpoint carries days of records of files
    that are gone, and every reader that opens the table reads them: on a small table that is most of a scan.
    """
    tail = delta_log.read_log_tail(path, application=application, storage=storage)
    if tail is None:
        return
    since = tail.latest_version - (tail.checkpoint_version if tail.checkpoint_version is not None else -1)
    # A checkpoint at the latest version is never written again (a reader may have listed it: below).
    if since == 0 or (since < settings.checkpoint_every_commits and not vacuumed):
        return
    outcome.checkpoint_version = tail.latest_version
    if outcome.dry_run:
        return
    if vacuumed:
        written = checkpoint_without_tombstones(storage, path, tail.latest_version, tail.checkpoint_version,
                                                vacuumed)
        if written is not None:
            outcome.tombstones_dropped = written
            return
    table.update_incremental()
    outcome.checkpoint_version = table.version()
    table.create_checkpoint()


def checkpoint_without_tombstones(storage: SinkStorage, path: str, version: int, previous: int | None,
                                  vacuumed: set[str]) -> int | None:
    """Write the checkpoint of `version` without the `remove` records of `vacuumed` (the files VACUUM listed past
    the retention and removed); how many it left out, None when it cannot (then delta-rs writes its own).

    delta-rs writes it from a private copy of the log (the checkpoint of `previous` and the commits since, in a
    local temporary folder; a checkpoint reads no data file), and binlake publishes it under the table's log
    only if no checkpoint of `version` exists: a checkpoint is never rewritten in place, since a reader that
    listed it (Spark keeps the listing in its snapshot) would then read a file of another size and fail.

    Safe for every reader: a checkpoint is the table's state at its version, and a tombstone in it only tells a
    later VACUUM that the file may go (the Delta protocol lets a checkpoint drop expired ones); these files are
    gone. Change-feed consumers, conflict checks and time travel read the commit files, which stay
    (`log_cleanup` decides those).
    """
    import io
    import tempfile
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    directory = delta_log.log_dir(path)
    target = f"{directory}/{version:020d}.checkpoint.parquet"
    with tempfile.TemporaryDirectory(prefix="binlake-checkpoint-") as scratch:
        log = Path(scratch) / "_delta_log"
        log.mkdir()
        names = [f"{number:020d}.json" for number in range((previous if previous is not None else -1) + 1,
                                                           version + 1)]
        if previous is not None:
            names += [f"{previous:020d}.checkpoint.parquet", "_last_checkpoint"]
        for name in names:
            content = storage.read_bytes(f"{directory}/{name}")
            if content is None:  # a multi-part checkpoint, or a log cleaned meanwhile: delta-rs's own checkpoint
                return None
            (log / name).write_bytes(content)
        private = DeltaTable(scratch)
        if private.version() != version:
            return None
        private.create_checkpoint()
        checkpoint = pq.read_table(log / f"{version:020d}.checkpoint.parquet")
        hint = json.loads((log / "_last_checkpoint").read_text())
    # A log names a file by its relative path, URL-encoded; VACUUM's list has it decoded.
    listed = pa.array(sorted(vacuumed | {quote(name, safe="/") for name in vacuumed}), pa.string())
    gone = pc.fill_null(pc.is_in(pc.struct_field(checkpoint.column("remove"), "path"), value_set=listed), False)
    kept = checkpoint.filter(pc.invert(gone))
    buffer = io.BytesIO()
    pq.write_table(kept, buffer, compression="snappy")
    if storage.read_bytes(target) is not None:
        return 0  # another writer's checkpoint of this version: left as it is
    storage.replace_bytes(target, buffer.getvalue())
    hint.update(version=version, size=kept.num_rows)
    hint.pop("sizeInBytes", None)  # optional in the protocol; the private copy's figure would be wrong
    hint.pop("checksum", None)
    storage.replace_bytes(f"{directory}/_last_checkpoint", json.dumps(hint).encode())
    return int(pc.sum(gone).as_py() or 0)


def log_cleanup(
    path: str, handler: Any, retention: Retention, outcome: Outcome, *, application: str, storage: SinkStorage,
    now: dt.datetime,
) -> None:
    """Remove the log files before the newest checkpoint that every reader is past (module docstring).

    Kept: every version within the log retention (or time travel), every version a known consumer still reads,
    and the table's last batch commit (binlake's replay check and offset reconciliation read its metadata).
    """
    from pyarrow.fs import FileSelector

    infos = handler.get_file_info_selector(FileSelector("_delta_log", recursive=False))
    names = [info.path.rsplit("/", 1)[-1] for info in infos]
    versions = sorted({int(match.group(1)) for name in names if (match := _LOG_FILE.match(name))
                       and match.group(2) == "json"})
    checkpoints = sorted({int(name[:20]) for name in names if ".checkpoint." in name and name[:20].isdigit()})
    if not versions or not checkpoints:
        return
    keep_from = _first_within(path, versions, now - dt.timedelta(hours=retention.log_hours), storage)
    if retention.oldest_needed_version is not None:
        keep_from = min(keep_from, retention.oldest_needed_version - 1)
    tail = delta_log.read_log_tail(path, application=application, storage=storage)
    if tail is not None and tail.last_binlake_commit is not None:
        keep_from = min(keep_from, tail.last_binlake_commit.delta_version)
    usable = [version for version in checkpoints if version <= keep_from]
    if not usable:
        return
    floor = usable[-1]
    doomed = [name for name in names if (match := _LOG_FILE.match(name)) and int(match.group(1)) < floor]
    outcome.log_files_removed = len(doomed)
    if outcome.dry_run:
        return
    for name in doomed:
        handler.delete_file(f"_delta_log/{name}")


def _first_within(path: str, versions: list[int], cutoff: dt.datetime, storage: SinkStorage) -> int:
    """The oldest version committed at or after `cutoff` (binary search on commit times); the newest version
    when none is (a log older than its retention keeps only its newest checkpoint's span)."""
    low, high = 0, len(versions) - 1
    if (stamp := commit_timestamp(path, versions[high], storage=storage)) is None or stamp < cutoff:
        return versions[high]
    while low < high:
        middle = (low + high) // 2
        stamp = commit_timestamp(path, versions[middle], storage=storage)
        if stamp is not None and stamp >= cutoff:
            high = middle
        else:
            low = middle + 1
    return versions[low]


def spark_maintenance(
    spark: SparkSession, table: DeltaTable, path: str, settings: MaintenanceConfig, retention: Retention,
    outcome: Outcome, *, sizes: Callable[[list[str]], int],
) -> None:
    """OPTIMIZE (ZORDER BY when configured) and VACUUM with Spark, for a table Spark writes.

    `table` (delta-rs, which reads the log of every table binlake writes) counts what Spark's OPTIMIZE, which has
    no dry run, would merge, and lists what VACUUM would remove.
    """
    import pyarrow as pa

    quoted = f"delta.`{path}`"
    target = settings.compact_target_file_bytes or SPARK_TARGET_FILE_BYTES
    listed = pa.table(table.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
    small = [size for size in listed if size < target * SMALL_SHARE]
    wanted = bool(settings.zorder_by) or len(small) >= settings.min_files_to_compact
    outcome.compacted_files, outcome.compacted_bytes = (len(small), sum(small)) if wanted else (0, 0)
    if not wanted:
        outcome.notes.append(f"{len(small)} small files: below min_files_to_compact ({settings.min_files_to_compact})")
    hours = math.ceil(retention.file_hours)
    floor = max(hours, math.ceil(UNTRACKED_FLOOR_HOURS))
    doomed = sorted(set(table.vacuum(retention_hours=hours, dry_run=True, enforce_retention_duration=False))
                    | set(table.vacuum(retention_hours=floor, dry_run=True, enforce_retention_duration=False,
                                       full=True)))
    outcome.vacuumed_files, outcome.vacuumed_bytes = len(doomed), sizes(doomed)
    if outcome.dry_run:
        return
    # OPTIMIZE is a commit like any other: without the converter it would leave the Iceberg metadata behind.
    check_uniform_writable(spark, path, storage=storage_for(path), table=outcome.table)
    if wanted:
        spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(target))
        zorder = f" ZORDER BY ({', '.join(f'`{column}`' for column in settings.zorder_by)})" \
            if settings.zorder_by else ""
        failpoint("maintenance.before_commit")
        row = spark.sql(f"OPTIMIZE {quoted}{zorder}").collect()[0].asDict(recursive=True)
        metrics = row.get("metrics") or {}
        outcome.compacted_files = int(metrics.get("numFilesRemoved", outcome.compacted_files))
        outcome.files_written = int(metrics.get("numFilesAdded", 0))
    if doomed:
        # The check refuses a retention under 7 days; the retention here is binlake's own, computed above.
        spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
        # LITE removes only files the log's removes name (past the retention); the full VACUUM, which also removes
        # files no version names, waits at least the floor (a batch's files before its commit).
        # Spark takes a fraction of an hour (delta-rs does not): whole minutes, rounded up.
        spark.sql(f"VACUUM {quoted} LITE RETAIN {math.ceil(retention.file_hours * 60) / 60:.4f} HOURS").collect()
        spark.sql(f"VACUUM {quoted} RETAIN {floor} HOURS").collect()


__all__ = [
    "MAINTENANCE_KIND", "MAX_COMPACTION_BYTES", "SMALL_SHARE", "UNTRACKED_FLOOR_HOURS", "Outcome",
    "checkpoint_delta_rs", "compact_delta_rs", "checkpoint_without_tombstones", "log_cleanup", "small_runs",
    "spark_maintenance", "vacuum_delta_rs",
]
