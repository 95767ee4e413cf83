"""One maintenance run over a pipeline's tables (`binlake maintain`, the Dagster maintenance jobs).

Per table, beside the sync and without its lease (a maintenance run takes none: every step is safe beside a
batch, a re-snapshot or another maintenance run, as below):

    settings (sink.tables.<t>.maintenance) ── enabled? ── engine (sink/choice.py, as the batches') ──┐
    retention (retention.py: Delta's, time travel, change-feed consumers) ◄─────────────────────────┘
    compaction ─► VACUUM ─► checkpoint ─► log cleanup ─► scratch logs ─► record (offset store)

Why it is safe beside the sync (invariant 13: the Delta log itself enforces it, not a check made earlier):
- a compaction commit removes and adds files with `dataChange: false` and no SetTransaction, and is never
  rebased over a newer commit: a batch that committed meanwhile makes it fail, and it is planned again on a
  fresh snapshot (`ATTEMPTS`). A batch that commits after it retries at once on a fresh snapshot
  (`pipeline/table_failures.write_with_retries`), as against any other writer; its SetTransaction and its
  metadata are untouched, so a replayed batch is still found applied (`delta_log.read_log_tail` skips commits
  without binlake's app id, delta-rs's `transaction_version` is the table's state);
- a re-snapshot that overwrites the table meanwhile removes every file: the compaction's removes then meet
  removed files, and delta-rs's conflict check (or Spark's) fails the later commit;
- VACUUM and log cleanup remove only what no reader needs (retention.py), and never a file no version names
  yet younger than `UNTRACKED_FLOOR_HOURS` (a running batch's).
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cdc_lib.common.failures import is_conflict
from cdc_lib.errors import BinlakeError, IcebergMetadataError
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.sink import choice, delta_log
from cdc_lib.sink.delta_rs import writer as delta_rs_writer
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.offsets import utc_now

from . import leftovers, operations
from .operations import Outcome
from .retention import consumers_of, retention_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("binlake")

#: Attempts at a table's compaction that meets batch commits (each on a fresh snapshot), then it waits for the
#: next run: maintenance gives way, batches come first.
ATTEMPTS = 5
FIRST_WAIT_SECONDS = 0.5
#: Where each table's last maintenance is recorded in the offset store (status shows it).
RECORDS_FOLDER = "maintenance"


class MaintenanceTableError(BinlakeError):
    """`binlake maintain --table` names a table the pipeline does not keep."""


def maintain(
    context: PipelineContext,
    tables: list[str] | None = None,
    *,
    dry_run: bool = False,
    spark: Callable[[], SparkSession] | None = None,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> list[Outcome]:
    """Maintain `tables` (default: every table in the pipeline's state); what each run did, or would do.

    Args:
        spark: the SparkSession factory for tables Spark writes (default the context's); never started when
            every table is delta-rs's.
    """
    state = context.read_state()
    known = sorted(state.tables)
    chosen = known if not tables else tables
    unknown = [table for table in chosen if table not in state.tables]
    if unknown:
        raise MaintenanceTableError(
            f"binlake maintain: {', '.join(unknown)} not among the pipeline's tables ({', '.join(known) or 'none'})",
            remedy="name a table the pipeline has snapshotted (binlake status lists them)",
        )
    run_id = uuid.uuid4().hex[:12]
    log.info("maintenance run %s%s: %s", run_id, " (dry run)" if dry_run else "", ", ".join(chosen))
    outcomes = []
    maintained: dict[str, Outcome] = {}  # by path: routed sources (sink.routes) share one Delta table
    for table in chosen:
        settings = context.config.sink.maintenance_for(table)
        if not settings.enabled:
            outcomes.append(Outcome(table=table, engine="-", dry_run=dry_run, skipped="maintenance.enabled: false"))
            continue
        path = context.table_path(table)
        if path in maintained:
            shared = maintained[path]
            outcomes.append(Outcome(table=table, engine=shared.engine, dry_run=dry_run, skipped=(
                f"its Delta table is {shared.table}'s too (sink.routes), maintained once in this run")))
            continue
        schema = TableSchema.from_json(TableRef.parse(table), state.tables[table].schema)
        outcome = _maintain_table(context, table, schema, dry_run=dry_run, run_id=run_id,
                                  spark=spark or context.spark, now=now)
        outcomes.append(outcome)
        maintained[path] = outcome
        if not dry_run and outcome.skipped is None:
            _record(context, outcome)
        if not dry_run and context.config.sink.iceberg_for(table):
            # OPTIMIZE and VACUUM change the files: the Iceberg snapshot lists the new ones (docs/iceberg.md).
            from cdc_lib.sink.iceberg import convert

            try:
                convert.refresh(context.table_path(table), table=table, storage=context.sink)
            except (IcebergMetadataError, OSError) as exc:
                log.error("%s: Iceberg metadata not written: %s; the next sync writes it", table, exc)
    abandoned = leftovers.abandoned_snapshot_documents(context.store, context.config.pipeline)
    abandoned = {table: snapshot for table, snapshot in abandoned.items() if table in chosen}
    if abandoned:
        removed = list(abandoned) if dry_run else leftovers.remove_abandoned(
            context.store, context.config.pipeline, abandoned)
        for outcome in outcomes:
            if outcome.table in removed:
                outcome.leftovers_removed.append(f"abandoned snapshot document ({abandoned[outcome.table]})")
    return outcomes


def engine_of(context: PipelineContext, table: str, path: str) -> tuple[choice.Engine, str]:
    """The engine that maintains `table`: the batches' own (`choice.writer_for`'s rules), and why when Spark."""
    if context.config.batch.writer == "spark":
        return "spark", "batch.writer: spark"
    reasons = []
    if context.config.sink.mode_for(table) != "mirror":
        reasons.append(f"the {context.config.sink.mode_for(table)} table mode")
    if (log_store := choice.spark_log_store(context.config.spark.conf)) is not None:
        reasons.append(log_store)
    detail = delta_log.table_detail(path, storage=context.sink)
    if detail is not None:
        reasons += choice.spark_only_reasons(detail)
    return ("spark", "; ".join(reasons)) if reasons else ("delta-rs", "")


def _maintain_table(
    context: PipelineContext, table: str, schema: TableSchema, *, dry_run: bool, run_id: str,
    spark: Callable[[], SparkSession], now: Callable[[], dt.datetime],
) -> Outcome:
    from deltalake import DeltaTable
    from deltalake.fs import DeltaStorageHandler

    path = context.table_path(table)
    settings = context.config.sink.maintenance_for(table)
    engine, why = engine_of(context, table, path)
    outcome = Outcome(table=table, engine=engine, dry_run=dry_run)
    if why:
        outcome.notes.append(f"Spark maintains it: {why}")
    if not delta_log.table_exists(path, storage=context.sink):
        outcome.skipped = "no Delta table yet"
        return outcome
    uri = delta_rs_writer.table_uri(path)
    options = delta_rs_writer.storage_options(path, context.sink)
    handler = DeltaStorageHandler(uri, options)

    def sizes(paths: list[str]) -> int:
        infos = handler.get_file_info(list(paths)) if paths else []
        return sum(info.size or 0 for info in infos)

    table_now = now()
    delta_table = DeltaTable(uri, storage_options=options)
    actions = delta_table.get_add_actions(flatten=True)
    import pyarrow as pa

    listed = pa.table(actions).column("size_bytes").to_pylist()
    outcome.files_before, outcome.bytes_before = len(listed), sum(listed)
    consumers = consumers_of(context.config.sink.path, path, storage=context.sink, handler=_root_handler(context))
    retention = retention_for(path, settings, dict(delta_table.metadata().configuration), consumers,
                              storage=context.sink, now=table_now, latest_version=delta_table.version())
    outcome.retention_hours, outcome.retention_reason = retention.file_hours, retention.file_reason
    if engine == "spark":
        operations.spark_maintenance(spark(), delta_table, path, settings, retention, outcome, sizes=sizes)
    else:
        _with_retries(lambda: operations.compact_delta_rs(
            DeltaTable(uri, storage_options=options), schema, settings, outcome, storage_options=options,
            run_id=run_id), outcome, table=table, what="compaction")
        delta_table = DeltaTable(uri, storage_options=options)
        vacuumed = operations.vacuum_delta_rs(delta_table, retention, outcome, handler=handler, sizes=sizes)
        application = context.application(table)
        operations.checkpoint_delta_rs(delta_table, path, settings, outcome, application=application,
                                       storage=context.sink, vacuumed=vacuumed)
        operations.log_cleanup(path, handler, retention, outcome, application=application, storage=context.sink,
                               now=table_now)
    stale = leftovers.stale_scratch_logs(handler, now=table_now)
    if stale and not dry_run:
        leftovers.remove_scratch_logs(handler, stale)
    outcome.leftovers_removed += [f"scratch log {folder}" for folder in stale]
    return outcome


def _root_handler(context: PipelineContext) -> Any:
    from deltalake.fs import DeltaStorageHandler

    root = context.config.sink.path
    return DeltaStorageHandler(delta_rs_writer.table_uri(root), delta_rs_writer.storage_options(root, context.sink))


def _with_retries(step: Callable[[], None], outcome: Outcome, *, table: str, what: str) -> None:
    """`step` again on a fresh snapshot while it meets batch commits, `ATTEMPTS` times at most; then it gives way
    (noted in `outcome`) and the next run tries again."""
    wait = FIRST_WAIT_SECONDS
    for attempt in range(1, ATTEMPTS + 1):
        outcome.attempts = max(outcome.attempts, attempt)
        try:
            step()
            return
        except Exception as exc:
            if isinstance(exc, BinlakeError) or not is_conflict(exc):
                raise
            if attempt == ATTEMPTS:
                if what == "compaction":
                    outcome.compacted_files = outcome.compacted_bytes = outcome.files_written = 0
                outcome.notes.append(f"{what} gave way to batch commits {ATTEMPTS} times; the next run retries")
                return
            log.info("%s: maintenance's %s met a batch commit (%s); tried again in %.1fs", table, what,
                     type(exc).__name__, wait)
            time.sleep(wait * random.uniform(0.75, 1.25))  # noqa: S311 - jitter, not security
            wait *= 2


def _record(context: PipelineContext, outcome: Outcome) -> None:
    """Keep the run's outcome as the table's last maintenance (status shows it); a lost race keeps the other's."""
    name = f"{RECORDS_FOLDER}/{outcome.table}.json"
    store, pipeline = context.store, context.config.pipeline
    _, token = store.read_document(pipeline, name)
    try:
        store.write_document(pipeline, name, {**outcome.to_json(), "at": utc_now().isoformat()}, token)
    except BinlakeError:
        pass


def last_maintenance(context: PipelineContext, table: str) -> dict[str, Any] | None:
    """The table's last maintenance record (None: never maintained)."""
    document, _ = context.store.read_document(context.config.pipeline, f"{RECORDS_FOLDER}/{table}.json")
    return document


__all__ = ["ATTEMPTS", "RECORDS_FOLDER", "MaintenanceTableError", "engine_of", "last_maintenance", "maintain"]
