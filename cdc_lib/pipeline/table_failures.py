"""What a failed Delta write does: fail the run, stop one table, or leave the table retrying (invariants 12, 14).

- The run fails when the failure is the run's: another runner or a lost lease, the Spark driver gone, memory.
- A commit conflict with another writer of the table (OPTIMIZE, a compliance delete, a `deltalake` script) is
  retried at once a few times with back-off (`write_with_retries`); each attempt reads a fresh snapshot of the
  table (delta-rs loads the table again after a failed write, Spark's MERGE reads the latest version). A fence
  that landed meanwhile (cdc_lib/sink/fencing.py) is what the retry then finds: FencedCommitError, final.
- A passing fault (`failures.passing_fault`: a conflict that outlasted those attempts, a full disk, an I/O
  error, an object store's 5xx/SlowDown, a timeout, a network error) leaves the table *retrying*: nothing of
  its batch was applied, its offset stays, and a later batch retries after a back-off.
- Anything else is about the table's data or Delta table (a constraint, a schema the Delta table refuses, a
  missing table) and stops only that table, with its remedy. Its offset stayed where the last applied batch
  left it, so once the cause is fixed `binlake resume --table` replays it from the binlog.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from cdc_lib.common.failures import Retrying, describe, is_conflict, passing_fault
from cdc_lib.common.logs import about_table
from cdc_lib.errors import BinlakeError, ConcurrentRunError, DeltaWriteError
from cdc_lib.state.heartbeat import LeaseLostError

log = logging.getLogger("binlake")

T = TypeVar("T")

#: Exception types that mean the Spark driver or its gateway went away, not that one table is bad.
_RUN_FAILURES = frozenset({"Py4JNetworkError", "SparkConnectGrpcException", "PySparkRuntimeError"})

#: Attempts at one commit that conflicts with another writer, and the first wait (doubled each time, jittered).
CONFLICT_ATTEMPTS = 4
CONFLICT_FIRST_WAIT_SECONDS = 0.5


def write_with_retries(
    write: Callable[[], T],
    table: str,
    *,
    check_lease: Callable[[], None] = lambda: None,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """`write()`, tried again (up to `CONFLICT_ATTEMPTS` in all) while it fails with a commit conflict.

    Each attempt is the whole write: a fresh read of the table's log and snapshot, the same SetTransaction (an
    attempt whose commit landed after all makes the next one a no-op). The lease is checked again before each
    retry: the wait must not let a runner that lost it commit.
    """
    wait = CONFLICT_FIRST_WAIT_SECONDS
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return write()
        except Exception as exc:
            # binlake's own errors said what they are (a fenced commit is final, not a race to run again).
            if attempt == CONFLICT_ATTEMPTS or isinstance(exc, BinlakeError) or not is_conflict(exc) or \
                    _belongs_to_run(exc):
                raise
            log.warning("%s: the commit conflicted with another writer of the table (%s); attempt %d of %d in "
                        "%.1fs on a fresh snapshot", table, type(exc).__name__, attempt + 1, CONFLICT_ATTEMPTS,
                        wait, extra=about_table(table))
            sleep(wait * random.uniform(0.75, 1.25))  # noqa: S311 - jitter keeps two writers from meeting again
            wait *= 2
            check_lease()
    raise AssertionError("unreachable")


def write_failure(
    exc: Exception,
    table: str,
    *,
    previous: Retrying | None,
    doing: str = "writing the batch into Delta",
    now: dt.datetime | None = None,
) -> DeltaWriteError | Retrying:
    """What a failed write makes of `table`: retrying (a passing fault) or stopped (its remedy); `exc` re-raised
    when it belongs to the run. `previous`: the table's retrying state before this attempt, if any."""
    if _belongs_to_run(exc):
        raise exc
    cause = passing_fault(exc)
    if cause is not None:
        retrying = Retrying.first_or_next(cause, previous, now=now or dt.datetime.now(dt.UTC))
        log.warning("%s: %s failed with a passing fault; nothing of it was applied and the offset stays; attempt "
                    "%d, next no earlier than %s: %s", table, doing, retrying.attempts, retrying.next_attempt_at,
                    cause, extra=about_table(table))
        # The whole account (a Java stack, delta-rs's chain) goes to the log at DEBUG, not to the terminal.
        log.debug("%s: the failure in full", table, exc_info=exc, extra=about_table(table))
        return retrying
    return _stop(exc, table, doing=doing)


def table_write_failure(exc: Exception, table: str, *, doing: str = "writing the batch into Delta") -> DeltaWriteError:
    """The error that stops `table` after a write failed, or `exc` re-raised when a retry of the run can cure it
    (the run's failures and passing faults alike: the next run tries again, nothing asks for a re-snapshot).

    For the writes that have no retrying state of their own (an ALTER's schema evolution).
    """
    if _belongs_to_run(exc) or passing_fault(exc) is not None:
        raise exc
    return _stop(exc, table, doing=doing)


def _belongs_to_run(exc: BaseException) -> bool:
    if isinstance(exc, (ConcurrentRunError, LeaseLostError, MemoryError, KeyboardInterrupt)):
        return True
    return type(exc).__name__ in _RUN_FAILURES


def _stop(exc: Exception, table: str, *, doing: str) -> DeltaWriteError:
    if isinstance(exc, BinlakeError) and exc.table == table and isinstance(exc, DeltaWriteError):
        return exc
    kind = type(exc).__name__
    text = describe(exc)
    first_line = (text.strip().splitlines() or [kind])[0]
    log.error("%s: %s failed, the table stops: %s", table, doing, first_line[:500], extra=about_table(table))
    log.debug("%s: the failure in full", table, exc_info=exc, extra=about_table(table))
    return DeltaWriteError(
        f"{doing} failed ({kind}: {first_line[:300]}); nothing of the batch was applied and the offset stayed",
        remedy=f"fix the cause in the Delta table or the source rows, then resume the table from its offset: "
        f"binlake resume --table {table} (re-snapshot only if the Delta table itself is lost: binlake snapshot "
        f"--table {table})",
        table=table,
    )


__all__ = ["CONFLICT_ATTEMPTS", "table_write_failure", "write_failure", "write_with_retries"]
