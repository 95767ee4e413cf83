"""Whether a failed Delta write stops one table or fails the whole run (a failure belongs to its table)."""

from __future__ import annotations

import logging

from cdc_lib.errors import BinlakeError, DeltaWriteError
from cdc_lib.logs import about_table

log = logging.getLogger("binlake")

#: Exception types that mean the Spark driver or its gateway went away, not that one table is bad.
_RUN_FAILURES = frozenset({"Py4JNetworkError", "SparkConnectGrpcException", "PySparkRuntimeError"})


def table_write_failure(exc: Exception, table: str, *, doing: str = "writing the batch into Delta") -> DeltaWriteError:
    """The error that stops `table` after its MERGE failed, or `exc` re-raised when it belongs to the run.

    What a retry can cure (the sink or the store unreachable, another runner, the JVM gone) fails the
    whole batch before any offset moves; what is about this table's data or Delta table (a constraint,
    a schema the Delta table refuses, a corrupt file) stops only this table, with its remedy.
    """
    if isinstance(exc, BinlakeError) and exc.retryable:
        raise exc
    kind = type(exc).__name__
    if kind in _RUN_FAILURES or "Concurrent" in kind or isinstance(exc, (ConnectionError, MemoryError)):
        raise exc
    java = getattr(exc, "java_exception", None)  # py4j's own message is only "An error occurred while calling"
    text = str(java.toString()) if java is not None else str(exc)
    first_line = (text.strip().splitlines() or [kind])[0]
    log.error("%s: %s failed, the table stops: %s", table, doing, first_line[:500], extra=about_table(table))
    return DeltaWriteError(
        f"{doing} failed ({kind}: {first_line[:300]})",
        remedy=f"fix the cause in the Delta table or the source rows, then re-snapshot: binlake snapshot --table "
        f"{table}",
        table=table,
    )


__all__ = ["table_write_failure"]
