"""A table's schema policy (`sink.tables.<t>.schema_policy`): whether an ALTER that changes its shape evolves it,
stops it, or waits for a person (docs/ddl.md#schema-policies).

`evolve` is binlake's behaviour without a policy; `ignore_new_columns` is `evolve` once schema_changes.py has left
the added columns out (they never reach the diff this module sees). `stop` stops the table at any change of shape.
`approve` holds the table at the position before the ALTER and records the change in the table's state (durable
across restarts); `binlake schema approve` marks exactly that change approved and clears the hold, so the next sync
reads the ALTER again from the same position and evolves the table as `evolve` would; `binlake schema reject` stops
the table with a re-snapshot as the remedy. Holding is a stop under another name: the other tables flow, nothing of
this table past the ALTER reaches Delta, and a replay from the recorded position is exact (invariant 12).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Protocol

from cdc_lib.common.logs import about_table
from cdc_lib.config.model import PipelineConfig
from cdc_lib.errors import SchemaChangeAwaitingApproval, SchemaChangeError, TableError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.pipeline.schema_diff import SchemaDiff
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.offsets import TableState, utc_now
from cdc_lib.status.table_status import require_snapshot

log = logging.getLogger("binlake")


class _HasConfig(Protocol):
    """What `policy_hold` reads of the pipeline's context: its config (a plain object in unit tests)."""

    @property
    def config(self) -> PipelineConfig: ...

#: The status word of a table that waits for a person (`binlake status`, the Dagster check).
AWAITING_APPROVAL = "awaiting approval"


def changes_shape(diff: SchemaDiff) -> bool:
    """Whether the ALTER changed a column binlake copies: added, retyped or widened, made NOT NULL, or dropped."""
    return bool(diff.added or diff.widened or diff.tightened or diff.problems)


def policy_hold(
    context: _HasConfig, name: str, table_state: TableState, *, statement: str, before: BinlogPosition,
    diff: SchemaDiff,
) -> tuple[TableState, SchemaChangeError | None]:
    """What the table's policy says of a compatible change of shape: go on (no error), or stop or wait here.

    Returns the table's state (with the pending change recorded under `approve`) and the error to stop with, if
    any. An approved change is consumed: the state that goes on no longer carries it.
    """
    policy = context.config.sink.schema_policy_for(name)
    if policy in ("evolve", "ignore_new_columns") or not changes_shape(diff):
        # A record left from an earlier policy (approve changed to evolve, then resume) is done with as well.
        return replace(table_state, schema_change=None), None
    if policy == "stop":
        return table_state, SchemaChangeError(
            f"schema change under schema_policy stop: {statement[:300]}",
            remedy=f"re-snapshot the table (binlake snapshot --table {name}), or set its schema_policy to evolve "
            f"and replay it from before the change: binlake resume --table {name}",
            table=name,
        )
    recorded = table_state.schema_change
    if recorded is not None and recorded.get("approved") and _same_change(recorded, statement, before):
        log.info("%s: applying the approved schema change at %s", name, before, extra=about_table(name))
        return replace(table_state, schema_change=None), None
    pending: dict[str, Any] = {
        "statement": statement, "position": before.to_json(), "at": utc_now().isoformat(), "approved": False,
    }
    if recorded is not None and _same_change(recorded, statement, before):
        pending["at"] = recorded.get("at", pending["at"])  # met again (a replay): still the first sighting's time
    return replace(table_state, schema_change=pending), awaiting(name, statement)


def awaiting(name: str, statement: str) -> SchemaChangeAwaitingApproval:
    """The error a held table shows (its `error` in the state, `binlake status`, the Dagster check)."""
    return SchemaChangeAwaitingApproval(
        f"{AWAITING_APPROVAL}: {statement[:300]}",
        remedy=f"binlake schema approve --table {name} (evolve the Delta table from this change) or "
        f"binlake schema reject --table {name} (stop; then re-snapshot)",
        table=name,
    )


@dataclass(frozen=True, kw_only=True)
class Decision:
    table: str
    statement: str
    position: str
    approved: bool


def approve_schema_change(context: PipelineContext, name: str) -> Decision:
    """Approve the change `name` waits at, under the pipeline lease: the next sync evolves it from its position.

    Raises:
        TableError: the table waits for no schema change.
        ConcurrentRunError: a sync holds the pipeline; retry when it is done.
    """
    return _decide(context, name, approve=True)


def reject_schema_change(context: PipelineContext, name: str) -> Decision:
    """Reject the change `name` waits at: the table stops until it is re-snapshotted."""
    return _decide(context, name, approve=False)


def _decide(context: PipelineContext, name: str, *, approve: bool) -> Decision:
    handle = context.handle()
    state = handle.acquire()
    try:
        table_state = require_snapshot(state, name)
        recorded = table_state.schema_change
        if recorded is None or recorded.get("approved"):
            raise TableError(
                f"{name} waits for no schema change"
                + (" (its change is approved; the next sync applies it)" if recorded is not None else ""),
                remedy=f"see binlake status; the table's policy is {context.config.sink.schema_policy_for(name)}",
                table=name,
            )
        statement = str(recorded["statement"])
        if approve:
            # The hold is lifted and the change marked: the sync replays from the recorded position, meets the
            # same statement there and evolves (the table's offset is that position: it never moved past it).
            state.tables[name] = replace(
                table_state, error=None, retrying=None, schema_change={**recorded, "approved": True}
            )
        else:
            error = SchemaChangeError(
                f"schema change rejected: {statement[:300]}",
                remedy=f"re-snapshot the table: binlake snapshot --table {name} (Dagster: backfill its asset)",
                table=name,
            )
            state.tables[name] = replace(table_state, error=str(error), schema_change=None)
        handle.save()
    finally:
        handle.release()
    position = BinlogPosition.from_json(recorded["position"])
    log.warning("%s: schema change %s: %s", name, "approved" if approve else "rejected", statement[:120],
                extra=about_table(name))
    return Decision(table=name, statement=statement, position=str(position), approved=approve)


def _same_change(recorded: dict[str, Any], statement: str, before: BinlogPosition) -> bool:
    return bool(recorded.get("statement") == statement and recorded.get("position") == before.to_json())


__all__ = [
    "AWAITING_APPROVAL", "Decision", "approve_schema_change", "awaiting", "changes_shape", "policy_hold",
    "reject_schema_change",
]
