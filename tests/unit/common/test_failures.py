"""`cdc_lib.common.failures` and `cdc_lib.pipeline.table_failures`: which errors a retry can cure (a run's, a table's
write), and
what a table's write failure makes of the table (retrying, stopped, or the run fails)."""

from __future__ import annotations

import datetime as dt
import errno

import pytest

from cdc_lib.common.failures import MAX_BACKOFF_SECONDS, Retrying, backoff_seconds, classify, is_conflict, passing_fault
from cdc_lib.errors import (
    BinlogPurgedError,
    ConcurrentRunError,
    ConfigError,
    DeltaWriteError,
    OffsetStoreError,
    SchemaChangeError,
    ServerSettingsError,
    SinkError,
    SourceConnectionError,
)
from cdc_lib.pipeline.table_failures import CONFLICT_ATTEMPTS, table_write_failure, write_failure, write_with_retries
from cdc_lib.state.heartbeat import LeaseLostError


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (SourceConnectionError("cannot reach the MySQL server at h:3306", remedy="r"), "transient"),
        (SourceConnectionError("reading the binlog failed (MySQL error 2013: lost)", remedy="r"), "transient"),
        (SourceConnectionError("the server refused the credentials", remedy="r", retryable=False), "permanent"),
        (SourceConnectionError("the user may not read the binlog", remedy="r", retryable=False), "permanent"),
        (ConcurrentRunError("pipeline 'p' is held by runner pid 1", remedy="r"), "transient"),
        (OffsetStoreError("cannot write s3://b/p (ClientError: 503)", remedy="r", retryable=True), "transient"),
        (OffsetStoreError("cannot write s3://b/p (ClientError: AccessDenied)", remedy="r"), "permanent"),
        (OffsetStoreError("offset folder /x is not writable (Permission denied)", remedy="r"), "permanent"),
        (BinlogPurgedError("binlog gone", remedy="re-snapshot"), "permanent"),
        (SchemaChangeError("columns changed", remedy="re-snapshot"), "permanent"),
        (ServerSettingsError("binlog_format", "STATEMENT", "ROW"), "permanent"),
        (ConfigError("source.port", "bad"), "permanent"),
        (OSError("connection reset"), "transient"),
    ],
)
def test_failures_are_classified(error: BaseException, kind: str) -> None:
    assert classify(error) == kind


# -- one table's write: a passing fault (retry later) or the table's own (stop) -------------------------------


class CommitFailedError(Exception):
    """Named as delta-rs names its conflict (deltalake.exceptions.CommitFailedError)."""


class DeltaError(Exception):
    """Named as delta-rs names its other errors, which carry the OS or HTTP error only in their text."""


class ConcurrentAppendException(Exception):
    """Named as Delta (Spark) names a conflict."""


class DeltaInvariantViolationException(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (DeltaError("Failed to parse parquet: External: Generic LocalFileSystem error: Unable to copy data to "
                    "file: No space left on device (os error 28)"), "disk full"),
        (OSError(errno.ENOSPC, "No space left on device"), "disk full"),
        (OSError(errno.EIO, "Input/output error"), "I/O error"),
        (DeltaError("Generic S3 error: Error performing PUT http://x/b/t/part.parquet in 5.1s, after 10 retries - "
                    "Server returned non-2XX status code: 503 Service Unavailable: <Code>SlowDown</Code>"),
         "object store throttled"),
        (DeltaError("Generic S3 error: Server returned non-2XX status code: 500 Internal Server Error"),
         "object store unavailable"),
        (CommitFailedError("Commit failed: a concurrent transaction deleted data this operation read"),
         "commit conflict"),
        (ConcurrentAppendException("Files were added to the root of the table by a concurrent update"),
         "commit conflict"),
        (TimeoutError("read timed out"), "timed out"),
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), "connection reset"),
        (SinkError("delta-rs could not read or write s3://b/t (OSError: Connection refused)", remedy="r",
                   retryable=True), "network error"),
    ],
)
def test_passing_faults_are_named(error: BaseException, cause: str) -> None:
    named = passing_fault(error)
    assert named is not None and named.startswith(f"{cause}: "), named


@pytest.mark.parametrize(
    "error",
    [
        DeltaInvariantViolationException("CHECK constraint positive (qty > 0) violated by row with values: qty : -7"),
        DeltaError("Schema error: Cannot cast column 'v' from Int64 to Int32 without losing data"),
        SinkError("the Delta table at /lake/t is missing", remedy="re-snapshot"),
        ValueError("a value Delta cannot hold"),
    ],
)
def test_what_belongs_to_the_table_is_no_passing_fault(error: BaseException) -> None:
    assert passing_fault(error) is None


def test_a_wrapped_os_error_is_found_in_the_chain() -> None:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("writing the batch") from inner
    except RuntimeError as outer:
        assert (passing_fault(outer) or "").startswith("disk full")


def test_a_passing_fault_leaves_the_table_retrying_with_a_growing_backoff() -> None:
    now = dt.datetime(2026, 11, 27, 8, 0, tzinfo=dt.UTC)
    error = DeltaError("Unable to copy data to file: No space left on device (os error 28)")
    first = write_failure(error, "db.t", previous=None, now=now)
    assert isinstance(first, Retrying) and first.attempts == 1 and first.since == now.isoformat()
    assert not first.due(now) and first.due(now + dt.timedelta(seconds=backoff_seconds(1)))
    later = now + dt.timedelta(seconds=5)
    second = write_failure(error, "db.t", previous=first, now=later)
    assert isinstance(second, Retrying) and second.attempts == 2 and second.since == first.since
    assert dt.datetime.fromisoformat(second.next_attempt_at) == later + dt.timedelta(seconds=backoff_seconds(2))
    assert backoff_seconds(2) == 2 * backoff_seconds(1) and backoff_seconds(100) == MAX_BACKOFF_SECONDS
    assert second.describe().startswith("retrying: disk full: ") and second.describe().endswith(", 2 attempts")
    assert Retrying.from_json(second.to_json()) == second


def test_a_table_failure_stops_with_resume_not_resnapshot() -> None:
    stop = write_failure(DeltaInvariantViolationException("CHECK constraint violated"), "db.t", previous=None)
    assert isinstance(stop, DeltaWriteError) and stop.table == "db.t"
    assert "binlake resume --table db.t" in stop.remedy


@pytest.mark.parametrize(
    "error",
    [ConcurrentRunError("held", remedy="wait"), LeaseLostError("lost", remedy="retry"), MemoryError()],
)
def test_the_runs_own_failures_are_raised(error: Exception) -> None:
    with pytest.raises(type(error)):
        write_failure(error, "db.t", previous=None)
    with pytest.raises(type(error)):
        table_write_failure(error, "db.t")


def test_conflicts_are_retried_on_a_fresh_attempt_and_others_are_not() -> None:
    calls: list[int] = []
    waits: list[float] = []
    checks: list[int] = []

    def conflicting_twice() -> int:
        calls.append(1)
        if len(calls) <= 2:
            raise CommitFailedError("Commit failed: version 7 already exists")
        return 8

    assert write_with_retries(conflicting_twice, "db.t", check_lease=lambda: checks.append(1),
                              sleep=waits.append) == 8
    assert len(calls) == 3 and len(waits) == 2 and len(checks) == 2 and waits[1] > waits[0]

    def always_conflicting() -> int:
        raise CommitFailedError("Commit failed")

    with pytest.raises(CommitFailedError):
        write_with_retries(always_conflicting, "db.t", sleep=waits.append)
    assert len(waits) == 2 + CONFLICT_ATTEMPTS - 1

    def disk_full() -> int:
        calls.append(1)
        raise OSError(errno.ENOSPC, "No space left on device")

    calls.clear()
    with pytest.raises(OSError):
        write_with_retries(disk_full, "db.t", sleep=waits.append)
    assert len(calls) == 1  # not a conflict: the table retries in a later batch, after a back-off


class _JavaException:
    """A py4j Java exception as far as binlake reads it: its class, its text, its cause."""

    def __init__(self, name: str, text: str, cause: _JavaException | None = None) -> None:
        self.name, self.text, self.cause = name, text, cause

    def getClass(self) -> _JavaException:  # noqa: N802 - Java's names
        return self

    def getName(self) -> str:  # noqa: N802
        return self.name

    def toString(self) -> str:  # noqa: N802
        return f"{self.name}: {self.text}"

    def getCause(self) -> _JavaException | None:  # noqa: N802
        return self.cause


class Py4JJavaError(Exception):
    def __init__(self, java: _JavaException) -> None:
        super().__init__("An error occurred while calling o123.execute.")
        self.java_exception = java


def test_a_spark_failure_is_read_through_its_java_causes() -> None:
    disk = Py4JJavaError(_JavaException("org.apache.spark.SparkException", "Job aborted due to stage failure",
                                        _JavaException("java.io.IOException", "No space left on device")))
    conflict = Py4JJavaError(_JavaException("io.delta.exceptions.ConcurrentAppendException",
                                            "Files were added to the root of the table by a concurrent update."))
    assert (passing_fault(disk) or "").startswith("disk full: org.apache.spark.SparkException")
    assert is_conflict(conflict) and not is_conflict(disk)
