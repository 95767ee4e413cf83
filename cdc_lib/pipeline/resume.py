"""`binlake resume --table`: take a stopped or retrying table back into the sync without a re-snapshot.

A table stops (or retries) where its last applied batch left it: nothing past its offset reached Delta. Once
the user has fixed the cause (freed the disk, dropped the Delta constraint, chosen a schema policy), replaying
the binlog from that offset makes the table exact again — as long as the server still holds the binlog from
there. So the stop is cleared only after that is checked; when the binlog is gone the answer is a re-snapshot.
The next sync reconciles the offset with the Delta log, as after any stop (`table_offsets`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from cdc_lib.common.logs import about_table
from cdc_lib.errors import BinlogPurgedError, ServerHistoryError
from cdc_lib.source import binlog_status
from cdc_lib.source import server as mysql
from cdc_lib.source.history import mysql_gtid_purged, plan_resume
from cdc_lib.state.context import PipelineContext
from cdc_lib.status.table_status import require_snapshot

log = logging.getLogger("binlake")


@dataclass(frozen=True, kw_only=True)
class ResumeResult:
    table: str
    #: What was cleared: the stop's error, or the retrying state's description; None when the table was flowing.
    cleared: str | None
    #: The offset the next sync replays the table from.
    position: str


def resume_table(context: PipelineContext, name: str) -> ResumeResult:
    """Clear `name`'s stop (or a retrying table's back-off) under the pipeline lease, after checking that the
    binlog still holds the table's offset.

    Raises:
        NotSnapshottedError: the table has no snapshot.
        BinlogPurgedError, ServerHistoryError: the server no longer holds the binlog from the table's offset (or
            its GTID history): only a re-snapshot makes the table exact (the remedy says so).
        ConcurrentRunError: a sync holds the pipeline; retry when it is done.
    """
    handle = context.handle()
    with mysql.source_connection(context.config.source) as connection:
        state = handle.acquire()
        try:
            table_state = require_snapshot(state, name)
            logs = binlog_status.binary_logs(connection)
            server_end = binlog_status.current_position(connection)
            remedy = f"re-snapshot the table: binlake snapshot --table {name} (Dagster: backfill its asset)"
            try:
                purged = mysql_gtid_purged(connection, [table_state.position], server_end)
                plan = plan_resume(name, table_state.position, server_end, logs, purged=purged)
                if plan.mode == "position" and plan.translated is None:
                    binlog_status.check_position_available(connection, table_state.position, table=name, logs=logs)
            except (BinlogPurgedError, ServerHistoryError) as exc:
                raise type(exc)(
                    f"cannot resume: {exc.cause}; the changes since the table's offset are no longer in the binlog",
                    remedy=remedy, table=name,
                ) from exc
            cleared = table_state.error or (
                table_state.retrying.describe() if table_state.retrying is not None else None
            )
            if cleared is not None:
                state.tables[name] = replace(table_state, error=None, retrying=None)
                handle.save()
                log.warning("%s: resumed from %s (was: %s)", name, table_state.position, cleared,
                            extra=about_table(name))
        finally:
            handle.release()
    return ResumeResult(table=name, cleared=cleared, position=str(table_state.position))


__all__ = ["ResumeResult", "resume_table"]
