"""The follow job: one long run that keeps a pipeline's Delta tables in step (`cdc_lib.pipeline.follow`) until a time
budget.

Data flow of a run:

    worker thread:  cdc_lib.pipeline.follow.follow(pipeline)  ── one FollowBatch per micro-batch ──▶ queue
    step thread:    queue ──▶ AssetMaterialization per table a batch wrote (as it goes)
                    every OBSERVE_EVERY_SECONDS and at the end ──▶ AssetObservation per table (lag, offset)
                        and the consistency, lag and binlog-runway checks' evaluations (assets/checks.py)

The loop runs on a worker thread so the step thread can turn each batch into Dagster events (which only
the step thread may log) and, when the run is terminated, set the loop's stop signal and wait for the
current batch to finish instead of cutting it short. The op takes the pipeline's pool and the run carries
the lease tag, so a follow run never runs beside the per-minute micro-batch or a snapshot.
"""


import queue
import threading
import time
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pydantic import Field

from assets.checks import health_evaluations, health_results
from assets.metrics import metric_observations
from assets.naming import CONSISTENCY_CHECK, LAG_CHECK, RUNWAY_CHECK, PipelineNames
from assets.resources import TRANSIENT_RETRY, BinlakeResource, engine_errors, jvm_output_to_log_file
from assets.tables import BatchSummary, batch_records
from cdc_lib.pipeline.follow import DEFAULT_POLL_SECONDS, FollowBatch, FollowSummary, follow
from cdc_lib.pipeline.pipeline import Pipeline

#: A follow run's default length: just under an hour, so an hourly relaunch (or the per-minute follow
#: schedule) starts the next one with a fresh process.
DEFAULT_FOLLOW_BUDGET_SECONDS = 55 * 60.0
#: How often a follow run records every table's lag and offset (well inside the 15-minute freshness window).
OBSERVE_EVERY_SECONDS = 300.0


class FollowConfig(dg.Config):
    budget_seconds: float = Field(
        default=DEFAULT_FOLLOW_BUDGET_SECONDS, gt=0, description="Stop at the first batch boundary after this long."
    )
    poll_seconds: float = Field(
        default=DEFAULT_POLL_SECONDS, gt=0, description="Pause between looks at the binlog end while caught up."
    )


@dataclass
class _Outcome:
    """What the worker thread ended with."""

    summary: FollowSummary | None = None
    error: BaseException | None = None


_DONE = object()


def build_follow_job(*, names: PipelineNames, tables: list[str]) -> dg.JobDefinition:
    """The pipeline's follow job: one op that runs the follow loop until its budget, recording each batch."""

    @dg.op(
        name=names.follow_op,
        pool=names.pool,
        # After the loop gave up on transient failures (`cdc_lib.pipeline.follow.DEFAULT_GIVE_UP_AFTER`): a fresh start.
        retry_policy=TRANSIENT_RETRY,
        required_resource_keys={names.resource_key},
        tags={"binlake/pipeline": names.pipeline},
        description=(
            f"Applies the binlog of pipeline `{names.pipeline}` continuously with one warm Spark session until "
            "its time budget, recording each table a batch writes."
        ),
    )
    def follow_op(context: dg.OpExecutionContext, config: FollowConfig) -> None:
        binlake: BinlakeResource = getattr(context.resources, names.resource_key)
        pipeline = binlake.pipeline()
        batches: queue.Queue[FollowBatch | object] = queue.Queue()
        stop = threading.Event()
        outcome = _Outcome()

        def run() -> None:
            try:
                outcome.summary = follow(
                    pipeline, budget_seconds=config.budget_seconds, poll_seconds=config.poll_seconds, stop=stop,
                    on_batch=batches.put,
                    on_retry=lambda error, wait: batches.put(f"transient failure, retrying in {wait:g}s: {error}"),
                )
            except BaseException as error:  # noqa: BLE001 - handed to the step thread, which raises it
                outcome.error = error
            finally:
                batches.put(_DONE)

        context.log.info(f"following pipeline {names.pipeline} for up to {config.budget_seconds:g}s")
        with jvm_output_to_log_file(context.log):
            worker = threading.Thread(target=run, name=f"binlake-follow-{names.slug}", daemon=True)
            worker.start()
            try:
                _report_until_done(
                    context, names=names, binlake=binlake, pipeline=pipeline, tables=tables, batches=batches
                )
            except BaseException:
                # The run is being terminated: let the current batch finish, so it saves its offsets.
                context.log.warning("stopping the follow loop after its current batch")
                stop.set()
                worker.join()
                raise
            worker.join()
        with engine_errors("follow mode", context.log):
            if outcome.error is not None:
                raise outcome.error
        _observe(context, names=names, binlake=binlake, pipeline=pipeline, tables=tables)
        summary = outcome.summary
        if summary is not None:
            context.log.info(
                f"follow stopped ({summary.stopped}) after {summary.seconds:.0f}s: {summary.batches_written} of "
                f"{summary.batches} batches wrote {summary.rows_written} rows, {summary.retries} transient "
                "failures retried"
            )

    @dg.job(
        name=names.follow_job,
        tags=names.lease_tags,
        description=(
            f"Follow mode of pipeline `{names.pipeline}`: one run applies the binlog continuously (one warm Spark "
            "session, a batch as soon as a change commits) until its budget, 55 minutes by default. Run it instead "
            "of the per-minute micro-batch schedule, not beside it."
        ),
    )
    def follow_job() -> None:
        follow_op()

    return follow_job


def _report_until_done(
    context: dg.OpExecutionContext,
    *,
    names: PipelineNames,
    binlake: BinlakeResource,
    pipeline: Pipeline,
    tables: list[str],
    batches: queue.Queue[FollowBatch | object],
) -> None:
    observed_at = time.monotonic()
    stopped_tables: set[str] = set()
    while True:
        try:
            item = batches.get(timeout=1.0)
        except queue.Empty:
            item = None
        if item is _DONE:
            return
        if isinstance(item, str):
            context.log.error(item)
        elif isinstance(item, FollowBatch):
            _record_batch(context, names=names, pipeline=pipeline, batch=item, stopped_tables=stopped_tables)
        if time.monotonic() - observed_at >= OBSERVE_EVERY_SECONDS:
            _observe(context, names=names, binlake=binlake, pipeline=pipeline, tables=tables)
            observed_at = time.monotonic()


def _record_batch(
    context: dg.OpExecutionContext, *, names: PipelineNames, pipeline: Pipeline, batch: FollowBatch,
    stopped_tables: set[str],
) -> None:
    """A materialization per table the batch wrote; an error line the first time a table stops."""
    result = batch.result
    for name, reason in result.skipped_tables.items():
        if name not in stopped_tables:
            stopped_tables.add(name)
            context.log.warning(f"{name} skipped: {reason}")
    written = [table.table for table in result.tables if table.rows_written or table.error]
    if not written:
        return
    summary = BatchSummary.of([result])
    with engine_errors("reading the pipeline state", context.log):
        state = pipeline.read_state()
    lag: dict[str, Any] = {}
    if batch.behind_bytes is not None:
        lag["lag_bytes"] = dg.MetadataValue.int(batch.behind_bytes)
    # No status read per batch (it counts binlog events): the batch's own numbers and bytes behind instead.
    for record in batch_records(names=names, pipeline=pipeline, batch=summary, tables=written, statuses={},
                                state=state, now=time.time()):
        if record.error and record.table not in stopped_tables:
            stopped_tables.add(record.table)
            context.log.error(f"{record.table} stopped: {record.error}")
        if record.changed:
            context.log_event(dg.AssetMaterialization(asset_key=record.key, metadata={**record.metadata, **lag}))
    context.log.info(
        f"batch {result.batch_seq}: {batch.rows_written} rows in {len(batch.tables_written)} tables, "
        + ("caught up" if batch.behind_bytes == 0 else f"{batch.behind_bytes} bytes behind")
    )


def _observe(
    context: dg.OpExecutionContext, *, names: PipelineNames, binlake: BinlakeResource, pipeline: Pipeline,
    tables: list[str],
) -> None:
    """Every table's lag and offset, so freshness holds for tables that had no change, and the cheap health
    checks the micro-batch step evaluates, so a follow run's tables are watched as closely."""
    with engine_errors("reading the pipeline status", context.log):
        statuses = {status.table: status for status in pipeline.status()}
        state = pipeline.read_state()
    # Before the lag observations: Dagster's freshness check reads a table's latest observation only.
    try:  # metrics binlake cannot read are a warning, not a failed run
        for observation in metric_observations(names=names, pipeline=pipeline, statuses=list(statuses.values()),
                                               tables=tables):
            context.log_event(observation)
    except Exception as error:  # noqa: BLE001 - see above
        context.log.warning(f"binlake metrics not recorded: {type(error).__name__}: {error}")
    for record in batch_records(names=names, pipeline=pipeline, batch=BatchSummary(), tables=tables,
                                statuses=statuses, state=state, now=time.time()):
        context.log_event(record.event())
    by_key = {names.table_key(table): table for table in tables}
    check_keys = {
        dg.AssetCheckKey(key, check) for key in by_key for check in (CONSISTENCY_CHECK, LAG_CHECK, RUNWAY_CHECK)
    }
    results = health_results(
        log=context.log, binlake=binlake, pipeline=pipeline, by_key=by_key, statuses=statuses, check_keys=check_keys
    )
    for evaluation in health_evaluations(results):
        context.log_event(evaluation)  # type: ignore[arg-type]  # accepted at run time; the hint lags
