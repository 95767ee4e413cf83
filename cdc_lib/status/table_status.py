"""Per-table status read from the offset store and the source, without the lease: offset, lag, whether the offset is
past the snapshot, the last reconcile verdict, runway, and the time to catch up (cdc_lib.status.catch_up)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any

from cdc_lib.common.failures import Retrying
from cdc_lib.errors import NotSnapshottedError
from cdc_lib.model.positions import BinlogPosition, state_contains
from cdc_lib.source import binlog_status
from cdc_lib.source import server as mysql
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.offsets import PipelineState, TableState, utc_now
from cdc_lib.state.reconcile_verdicts import read_verdicts
from cdc_lib.state.snapshot_documents import documents_in_flight
from cdc_lib.status.catch_up import apply_rate, catch_up, source_rate
from cdc_lib.status.runway import DEFAULT_RUNWAY_WARN_HOURS, TableRunway, table_runways


@dataclass(frozen=True, kw_only=True)
class TableStatus:
    table: str
    snapshotted: bool
    #: The offset passed the snapshot's high watermark: the binlog replay that completes the snapshot is done
    #: (shown as "past snapshot"). It compares no data: `last_reconcile` is the verdict of a comparison.
    consistent: bool
    position: str | None
    high_watermark: str | None
    delta_version: int | None
    lag_bytes: int | None
    lag_events: int | None
    lag_seconds: float | None
    error: str | None
    #: `TableRunway.to_json()` of the table's offset; None when not snapshotted or written on another server.
    runway: dict[str, Any] | None = None
    #: The server purges (or purged) the binlog of the offset within the warning threshold.
    runway_warning: bool = False
    #: How the table keeps changes (config.TableMode); soft-delete and history tables are compared with the
    #: source on their live rows (docs/table-modes.md).
    mode: str = "mirror"
    #: `CatchUp.to_json()`: today's lag over (apply rate − source rate); None when the lag in bytes is unknown.
    catch_up: dict[str, Any] | None = None
    #: binlake applies the binlog no faster than the source writes it: the lag will not shrink.
    catch_up_warning: bool = False
    #: A snapshot of the table in flight ("running 3/10 chunks, 1,500 rows"); the sync waits for it.
    snapshot_in_flight: str | None = None
    #: `Verdict.to_json()` of the table's last reconcile (match, drift or unconfirmed, when); None: never reconciled.
    last_reconcile: dict[str, Any] | None = None
    #: `Retrying.to_json()` (cause, since, attempts, next_attempt_at): the latest write met a passing fault
    #: (disk full, S3 503, a commit conflict); nothing of it was applied and a later batch retries it by itself.
    retrying: dict[str, Any] | None = None
    #: `TableState.rows_applied`: rows the batches applied since the snapshot (`snapshot_at`), per operation.
    rows_applied: dict[str, int] | None = None
    snapshot_at: str | None = None
    #: The snapshot in flight in numbers: {"chunks_done", "chunks_total", "rows_done"}; None when none is.
    snapshot_progress: dict[str, int] | None = None

    @property
    def retrying_text(self) -> str | None:
        """"retrying: <cause>, since <time>, <n> attempts" — what checks and sensors show; None when not retrying."""
        retrying = Retrying.from_json(self.retrying)
        return retrying.describe() if retrying is not None else None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def not_snapshotted(cls, table: str) -> TableStatus:
        return cls(
            table=table, snapshotted=False, consistent=False, position=None, high_watermark=None, delta_version=None,
            lag_bytes=None, lag_events=None, lag_seconds=None, error=None,
        )


def table_statuses(
    context: PipelineContext, *, runway_warn_hours: float = DEFAULT_RUNWAY_WARN_HOURS
) -> list[TableStatus]:
    """Per configured or known table: offset, lag, consistency, and the binlog runway, flagged below
    `runway_warn_hours`."""
    state = context.read_state()
    with mysql.source_connection(context.config.source) as connection:
        logs = binlog_status.binary_logs(connection)
        server_end = binlog_status.current_position(connection)
        configured = [ref.name for ref in context.configured_tables(connection)]
        # An offset written on another server (before its first batch here, after a switch of the source)
        # means nothing in this server's binlog files: its lag in bytes and events is unknown.
        here = {
            name: table_state.position.written_on(server_end.server) for name, table_state in state.tables.items()
        }
        lag_events = {
            name: binlog_status.events_behind(connection, table_state.position, logs) if here[name] else None
            for name, table_state in state.tables.items()
        }
        runways = table_runways(
            context.config.source,
            connection,
            {name: table_state.position for name, table_state in state.tables.items()},
            logs=logs,
            server=server_end.server,
        )
    now = utc_now()
    # One binlog read serves every table: the rates are the pipeline's, the lag each table's own.
    applied, lower_bound = apply_rate(state.recent_batches)
    rates = _Rates(apply=applied, apply_is_lower_bound=lower_bound,
                   source=source_rate(state.recent_batches, logs, now=now))
    documents = {
        name: document for name, document in documents_in_flight(context.store, context.config.pipeline).items()
        if document.status != "abandoned"
    }
    snapshots = {
        name: f"refused: {document.refused}" if document.refused else
        f"{document.status} {document.chunks_done}/{len(document.plan)} chunks, {document.rows_done:,} rows"
        for name, document in documents.items()
    }
    progress = {
        name: {"chunks_done": document.chunks_done, "chunks_total": len(document.plan),
               "rows_done": document.rows_done}
        for name, document in documents.items()
    }
    verdicts = read_verdicts(context.store, context.config.pipeline)  # one read, every table's last verdict
    statuses = []
    for name in sorted(set(configured) | set(state.tables)):
        table_state = state.tables.get(name)
        if table_state is None:
            statuses.append(replace(TableStatus.not_snapshotted(name), mode=context.config.sink.mode_for(name),
                                    snapshot_in_flight=snapshots.get(name), snapshot_progress=progress.get(name)))
            continue
        status = _table_status(
            name, table_state, here=here[name], lag_events=lag_events[name], logs=logs, server_end=server_end,
            runway=runways.get(name), runway_warn_hours=runway_warn_hours, now=now,
            mode=context.config.sink.mode_for(name), rates=rates,
        )
        statuses.append(replace(status, snapshot_in_flight=snapshots.get(name), snapshot_progress=progress.get(name)))
    return [
        replace(status, last_reconcile=verdicts[status.table].to_json()) if status.table in verdicts else status
        for status in statuses
    ]


@dataclass(frozen=True)
class _Rates:
    apply: float | None
    apply_is_lower_bound: bool
    source: float | None


def _table_status(
    name: str,
    table_state: TableState,
    *,
    here: bool,
    lag_events: int | None,
    logs: list[tuple[str, int]],
    server_end: BinlogPosition,
    runway: TableRunway | None,
    runway_warn_hours: float,
    now: dt.datetime,
    mode: str = "mirror",
    rates: _Rates | None = None,
) -> TableStatus:
    if here:
        lag_bytes: int | None = binlog_status.bytes_behind(table_state.position, logs)
        caught_up = table_state.position.same_point(server_end) or lag_bytes == 0
    else:
        lag_bytes = None
        caught_up = state_contains(table_state.position.gtid, server_end.gtid)
    changed = table_state.last_change_at or table_state.snapshot_at
    lag_seconds = 0.0 if caught_up else (now - dt.datetime.fromisoformat(changed)).total_seconds()
    estimate = None
    if lag_bytes is not None and rates is not None and not table_state.error:
        estimate = catch_up(0 if caught_up else lag_bytes, apply_rate=rates.apply, source_rate=rates.source,
                            apply_rate_is_lower_bound=rates.apply_is_lower_bound)
    return TableStatus(
        table=name,
        snapshotted=True,
        consistent=table_state.consistent,
        position=str(table_state.position),
        high_watermark=str(table_state.snapshot_high),
        delta_version=table_state.delta_version,
        lag_bytes=lag_bytes,
        lag_events=lag_events,
        lag_seconds=round(lag_seconds, 1),
        error=table_state.error,
        runway=runway.to_json() if runway is not None else None,
        runway_warning=runway is not None and runway.warning(runway_warn_hours),
        mode=mode,
        catch_up=None if estimate is None else estimate.to_json(),
        catch_up_warning=estimate is not None and estimate.warning,
        retrying=table_state.retrying.to_json() if table_state.retrying is not None else None,
        rows_applied={operation: table_state.rows_applied.get(operation, 0)
                      for operation in ("insert", "update", "delete")},
        snapshot_at=table_state.snapshot_at,
    )


def require_snapshot(state: PipelineState, name: str) -> TableState:
    """The table's state, or NotSnapshottedError (with the remedy) when it has none yet."""
    table_state = state.tables.get(name)
    if table_state is None:
        raise NotSnapshottedError(
            "the table has no snapshot yet", remedy=f"binlake snapshot --table {name}", table=name
        )
    return table_state


__all__ = ["TableStatus", "require_snapshot", "table_statuses"]
