"""Follow mode: keep a pipeline in step continuously, with one SparkSession kept warm between batches.

Data flow of one follow run:

    take the lease, reconcile the offsets with the Delta logs     (as `binlake sync` does)
    loop, until `stop` is set or the time budget is spent:
        ask the server where its binlog ends
        nothing new since the last catch-up → check the lease (its heartbeat renews it), wait `poll_seconds`
                                               (no binlog read, no Spark: idle stays cheap)
        else → micro-batches up to that end (`cdc_lib.pipeline.sync.run_until_caught_up`, the loop of
               `binlake sync --until-caught-up`, open-ended here), each reported to `on_batch`
    release the lease

It stops between batches only, never inside one (so never between a Delta commit and its offsets).
The process's SparkSession is built by the first batch that has a change and stays up for the next
ones: that removes the ~10 s of JVM start and first-write cost a fresh `binlake sync` pays.

Failures: a table that stops with an error stays stopped while the others flow (as in `sync`). A
transient failure (dropped connection, object store 5xx, a held lease: `cdc_lib.common.failures`) releases
the lease, waits with exponential backoff and starts again from the stored offsets, reconciled with
the Delta logs; `give_up_after` failures in a row without a batch in between raise the last one. A
permanent failure is raised at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import pymysql

from cdc_lib.common.failures import is_transient
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.pipeline.sync import SyncResult, run_until_caught_up
from cdc_lib.source import binlog_status, checks
from cdc_lib.source import server as mysql
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.heartbeat import stall_bound
from cdc_lib.state.table_offsets import reconcile_with_delta
from cdc_lib.status.metrics_server import MetricsServer, start_metrics_server

log = logging.getLogger("binlake")

#: Pause between two looks at the binlog end while caught up: bounds the added latency of a change.
DEFAULT_POLL_SECONDS = 1.0
#: Backoff after a transient failure starts here and doubles up to `MAX_BACKOFF_SECONDS`.
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 60.0
#: Transient failures in a row (no batch in between) before follow gives up: ~5 minutes of backoff.
DEFAULT_GIVE_UP_AFTER = 10

StopReason = Literal["stop requested", "budget spent"]


@dataclass(frozen=True, kw_only=True)
class FollowBatch:
    """One micro-batch of a follow run, as handed to `on_batch`."""

    #: 1 for the run's first batch.
    number: int
    result: SyncResult
    #: Binlog bytes written on the server past this batch's end when it finished (0: caught up);
    #: None when the batch read no transaction (not asked, to keep idle batches cheap).
    behind_bytes: int | None
    #: Seconds since the follow run started.
    elapsed: float

    @property
    def rows_written(self) -> int:
        return sum(table.rows_written for table in self.result.tables)

    @property
    def tables_written(self) -> list[str]:
        return [table.table for table in self.result.tables if table.rows_written]


@dataclass(kw_only=True)
class FollowSummary:
    """A follow run, added up."""

    batches: int = 0
    #: Batches that wrote to at least one Delta table.
    batches_written: int = 0
    row_changes: int = 0
    rows_written: int = 0
    transactions: int = 0
    #: Transient failures retried.
    retries: int = 0
    seconds: float = 0.0
    spark_started: bool = False
    stopped: StopReason | None = None
    #: Tables that stopped with an error (or were skipped because of one), with the reason.
    table_errors: dict[str, str] = field(default_factory=dict)

    def add(self, batch: FollowBatch) -> None:
        result = batch.result
        self.batches += 1
        self.batches_written += 1 if batch.rows_written else 0
        self.row_changes += result.row_changes
        self.rows_written += batch.rows_written
        self.transactions += result.transactions
        self.spark_started = self.spark_started or result.spark_started
        self.table_errors.update(result.skipped_tables)
        self.table_errors.update({table.table: table.error for table in result.tables if table.error})


OnBatch = Callable[[FollowBatch], None]
OnRetry = Callable[[BaseException, float], None]


def follow(
    pipeline: Pipeline,
    *,
    budget_seconds: float | None = None,
    poll_seconds: float = DEFAULT_POLL_SECONDS,
    stop: threading.Event | None = None,
    on_batch: OnBatch | None = None,
    on_retry: OnRetry | None = None,
    give_up_after: int | None = DEFAULT_GIVE_UP_AFTER,
) -> FollowSummary:
    """Apply the binlog continuously until `stop` is set or `budget_seconds` have passed.

    Args:
        pipeline: the pipeline to follow; its lease is held for the whole run (renewed as it goes).
        budget_seconds: stop at the first batch boundary after this long; None runs until `stop`.
        poll_seconds: pause between looks at the binlog end while caught up.
        stop: set it (from a signal handler or another thread) to stop after the current batch.
        on_batch: called after every batch, in the calling thread.
        on_retry: called with the error and the backoff before a transient failure is retried.
        give_up_after: raise after this many transient failures in a row; None retries forever.

    Returns:
        What the run did, and why it stopped.

    Raises:
        BinlakeError: a permanent failure (or the last transient one, after `give_up_after`).
    """
    if poll_seconds <= 0:
        raise ValueError("poll_seconds must be positive")
    # The OpenMetrics endpoint (`metrics.address`) lives exactly as long as the run.
    metrics = start_metrics_server(pipeline.context)
    follower = _Follower(
        pipeline.context,
        budget_seconds=budget_seconds,
        poll_seconds=poll_seconds,
        stop=stop or threading.Event(),
        on_batch=on_batch,
        metrics=metrics,
    )
    try:
        return follower.run(on_retry=on_retry, give_up_after=give_up_after)
    finally:
        if metrics is not None:
            metrics.stop()


class _Follower:
    """The state of one follow run: its clock, its stop signal and what it has done so far."""

    def __init__(
        self,
        context: PipelineContext,
        *,
        budget_seconds: float | None,
        poll_seconds: float,
        stop: threading.Event,
        on_batch: OnBatch | None,
        metrics: MetricsServer | None = None,
    ) -> None:
        self.context = context
        self.metrics = metrics
        self.poll_seconds = poll_seconds
        self.stop = stop
        self.on_batch = on_batch
        self.started = time.monotonic()
        self.deadline = None if budget_seconds is None else self.started + budget_seconds
        self.summary = FollowSummary()

    def run(self, *, on_retry: OnRetry | None, give_up_after: int | None) -> FollowSummary:
        name = self.context.config.pipeline
        log.info("following pipeline %s: poll every %gs, %s", name, self.poll_seconds,
                 "no time budget" if self.deadline is None else f"budget {self.deadline - self.started:g}s")
        backoff = FIRST_BACKOFF_SECONDS
        failures_in_a_row = 0
        while not self.should_stop():
            batches_before = self.summary.batches
            try:
                self.session()
            except Exception as error:  # noqa: BLE001 - transient ones are retried, the rest re-raised
                if not is_transient(error):
                    raise
                if self.summary.batches > batches_before:
                    backoff, failures_in_a_row = FIRST_BACKOFF_SECONDS, 0
                failures_in_a_row += 1
                if give_up_after is not None and failures_in_a_row > give_up_after:
                    log.error("follow of %s gives up after %d transient failures in a row", name, give_up_after)
                    raise
                self.summary.retries += 1
                log.error("follow of %s: transient failure (%s: %s); the lease is released, retrying in %gs",
                          name, type(error).__name__, error, backoff)
                if on_retry is not None:
                    on_retry(error, backoff)
                self.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
        self.summary.stopped = "stop requested" if self.stop.is_set() else "budget spent"
        self.summary.seconds = time.monotonic() - self.started
        log.info("follow of %s stopped (%s) after %.1fs: %d batches, %d row changes", name, self.summary.stopped,
                 self.summary.seconds, self.summary.batches, self.summary.row_changes)
        return self.summary

    def should_stop(self) -> bool:
        return self.stop.is_set() or (self.deadline is not None and time.monotonic() >= self.deadline)

    def wait(self, seconds: float) -> None:
        if self.deadline is not None:
            seconds = min(seconds, max(0.0, self.deadline - time.monotonic()))
        self.stop.wait(seconds)

    def session(self) -> None:
        """Hold the lease and follow until told to stop; the lease is released however this ends."""
        handle = self.context.handle()
        with mysql.source_connection(self.context.config.source) as connection:
            checks.check_server_settings(connection, append_inserts=self.context.config.batch.append_inserts)
            state = handle.acquire(
                heartbeat=True, stall_seconds=stall_bound(self.context.config.source.network_timeout_seconds)
            )
            try:
                with handle.working():  # every table's Delta log: S3 calls bounded by boto3's timeouts
                    reconcile_with_delta(self.context, state, connection)
                caught_up_at: BinlogPosition | None = None
                # The first look always runs a batch: it saves what the reconciliation adopted.
                while not self.should_stop():
                    server_end = binlog_status.current_position(connection)
                    handle.progress()  # the server answered: this follower is not stuck
                    if caught_up_at is not None and _covered(server_end, caught_up_at):
                        handle.check_lease()  # a lost lease ends the session (retried: transient)
                        with handle.working():  # waiting for the next poll is no stall
                            self.wait(self.poll_seconds)
                        continue
                    # The cycle floor: a busy source's next read begins `poll_seconds` after the last one that
                    # reached the binlog end at the earliest (`ReadAhead`), so its batches hold a poll's worth of
                    # changes.
                    caught_up_at = run_until_caught_up(
                        self.context, handle, connection, server_end,
                        on_batch=lambda result: self.report(result, connection), open_ended=True,
                        min_interval=self.poll_seconds, should_stop=self.should_stop,
                    )
            finally:
                handle.release()

    def report(self, result: SyncResult, connection: pymysql.connections.Connection) -> None:
        behind: int | None = None
        if result.transactions and result.end_position is not None:
            behind = binlog_status.bytes_behind(result.end_position, binlog_status.binary_logs(connection))
        batch = FollowBatch(
            number=self.summary.batches + 1, result=result, behind_bytes=behind,
            elapsed=time.monotonic() - self.started,
        )
        self.summary.add(batch)
        if self.metrics is not None:
            self.metrics.batch_done(
                seconds=result.wall_seconds or result.seconds, behind_bytes=behind,
                tables=[(table.table, {"insert": table.inserted, "update": table.updated, "delete": table.deleted},
                         table.commit_seconds) for table in result.tables if table.delta_version is not None
                        and table.commit_seconds > 0],
            )
        log.debug("follow batch %d: %d row changes, %d transactions, %s bytes behind", batch.number,
                  result.row_changes, result.transactions, "?" if behind is None else behind)
        if self.on_batch is not None:
            self.on_batch(batch)


def _covered(server_end: BinlogPosition, caught_up_at: BinlogPosition) -> bool:
    """Whether the server's binlog end is no further than where the follower knows it holds nothing to write."""
    return caught_up_at.written_on(server_end.server) and server_end <= caught_up_at


__all__ = [
    "DEFAULT_GIVE_UP_AFTER",
    "DEFAULT_POLL_SECONDS",
    "FollowBatch",
    "FollowSummary",
    "StopReason",
    "follow",
]
