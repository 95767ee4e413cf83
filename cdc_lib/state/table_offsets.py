"""Where a table's offset stands: taken from its Delta log when the store lags, and moved only forward.

Every writer (snapshot, sync) starts by reconciling the offset store with each table's
Delta log: a crash between a Delta commit and the offset write leaves the commit, with its
end position in the commit metadata, and the Delta log wins (invariant 3).
"""

from __future__ import annotations

import logging

import pymysql

from cdc_lib.errors import DeltaStateError
from cdc_lib.model.positions import BinlogPosition, state_contains
from cdc_lib.sink import delta_log
from cdc_lib.source import binlog_status
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.offsets import PipelineState, TableState, utc_now

log = logging.getLogger("binlake")


def reconcile_with_delta(
    context: PipelineContext, state: PipelineState, connection: pymysql.connections.Connection
) -> list[str]:
    """Adopt any binlake commit the Delta log has and the store lacks; the Delta log wins.

    Updates `state` in place (the caller saves it) and returns the tables whose offsets were adopted.
    """
    adopted = []
    for name in sorted(set(state.tables) | set(_delta_tables_on_disk(context, state))):
        table_state = state.tables.get(name)
        tail = delta_log.read_log_tail(
            context.table_path(name), application=context.application(name), storage=context.sink
        )
        if tail is None:
            if table_state is not None and not table_state.error:
                # Only this table stops (its re-snapshot, the remedy, replaces its state); the others go on.
                missing = DeltaStateError(
                    f"the offset store knows this table but its Delta table at {context.table_path(name)} is missing",
                    remedy=f"re-snapshot it: binlake snapshot --table {name}",
                    table=name,
                )
                log.error("%s", missing)
                table_state.error = str(missing)
            continue
        commit = tail.last_binlake_commit
        if commit is None:
            continue
        state.batch_seq = max(state.batch_seq, commit.txn_version)
        if table_state is not None and commit.txn_version <= table_state.applied_seq:
            continue
        end = BinlogPosition.from_json(commit.metadata["end"])
        if commit.kind == "snapshot":
            state.tables[name] = TableState(
                position=end,
                snapshot_low=end,
                snapshot_high=binlog_status.current_position(connection),
                snapshot_at=utc_now().isoformat(),
                schema=commit.metadata["schema"],
                applied_seq=commit.txn_version,
                delta_version=commit.delta_version,
                rows_snapshotted=delta_log.written_rows(
                    context.table_path(name), commit.delta_version, storage=context.sink
                ),
            )
        elif table_state is not None:
            table_state.position = end
            table_state.applied_seq = commit.txn_version
            table_state.delta_version = commit.delta_version
            table_state.consistent = table_state.consistent or reached(end, table_state.snapshot_high)
        adopted.append(name)
        log.warning("offsets of %s taken from its Delta log (batch %d)", name, commit.txn_version)
    return adopted


def _delta_tables_on_disk(context: PipelineContext, state: PipelineState) -> list[str]:
    # Tables the store does not know yet but a crashed snapshot may have written.
    names = []
    for pattern in context.config.source.tables:
        if "*" in pattern:
            continue
        if pattern not in state.tables and delta_log.table_exists(context.table_path(pattern), storage=context.sink):
            names.append(pattern)
    return names


def moves_forward(current: BinlogPosition, candidate: BinlogPosition, server: BinlogPosition) -> bool:
    """Whether `candidate` lies past `current`: by offset on one server; across servers, by GTID state and
    only onto the server we are connected to (whose end is `server`), so offsets never move back to the old one."""
    if candidate.written_on(current.server) and current.written_on(candidate.server):
        return candidate > current
    return candidate.server == server.server and state_contains(candidate.gtid, current.gtid)


def reached(position: BinlogPosition, mark: BinlogPosition) -> bool:
    """Whether `position` is at or past `mark` (e.g. a snapshot high watermark written on another server)."""
    if position.written_on(mark.server) and mark.written_on(position.server):
        return mark <= position
    return state_contains(position.gtid, mark.gtid)


__all__ = ["moves_forward", "reached", "reconcile_with_delta"]
