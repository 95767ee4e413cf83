"""Reading a binlake table's Delta Change Data Feed, and keeping a derived table in step with it exactly once.

Data flow of one consumer run (`consume`):

    output table's log ──► cursor: the source version it reflects (commit metadata of its last run)
    source table's log ──► latest version; nothing new → done, without Spark
    source versions (cursor, latest] ──► overwrite in between (a re-snapshot)? → recompute from the table
                                     └─► change feed rows ──► consumer.merge ──► one idempotent commit
                                                                                 (txnAppId = consumer,
                                                                                  source version in metadata)

The output's own Delta log holds the cursor, in the same commit as the data it describes: a run that
crashes after its commit and before the orchestrator records it is found complete by the retry, which
then has nothing left to do. Two runs at once both commit the same SetTransaction version; Delta lets the
first through and fails the other with a concurrent-transaction conflict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from cdc_lib.errors import BinlakeError, DeltaStateError
from cdc_lib.sink.delta_log import log_dir, newest_version, read_log_tail
from cdc_lib.sink.spark.commit import IdempotentCommit
from cdc_lib.sink.storage import SinkStorage, storage_for

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The columns Delta adds to every change row.
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
#: `_change_type` values that add a row to a consumer's view and those that take one away.
ADDING = ("insert", "update_postimage")
REMOVING = ("delete", "update_preimage")

_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
# Operations that replace every row: Delta reports their removed files as deletes and added files as inserts.
_REPLACING = {"CREATE OR REPLACE TABLE", "REPLACE TABLE", "CREATE OR REPLACE TABLE AS SELECT",
              "REPLACE TABLE AS SELECT"}


class ChangeFeedError(BinlakeError):
    """The change feed cannot give the changes a consumer asked for; a recompute from the full table can."""

    def __init__(self, cause: str, *, remedy: str, path: str, after_version: int, table: str | None = None) -> None:
        self.path = path
        self.after_version = after_version
        super().__init__(cause, remedy=remedy, table=table)


class ChangeFeedDisabledError(ChangeFeedError):
    """A version in the range was written while the table's `delta.enableChangeDataFeed` was off."""


class ChangesExpiredError(ChangeFeedError):
    """The range reaches versions whose log entries or change files are gone (log cleanup, VACUUM)."""


class ChangeFeedSchemaError(ChangeFeedError):
    """The range crosses a schema change the feed cannot read across (a type change, a dropped column)."""


class TableRewrittenError(ChangeFeedError):
    """The range crosses an overwrite of the whole table: a re-snapshot, or a column rewrite."""

    def __init__(self, cause: str, *, remedy: str, path: str, after_version: int, rewrite_version: int,
                 table: str | None = None) -> None:
        self.rewrite_version = rewrite_version
        super().__init__(cause, remedy=remedy, path=path, after_version=after_version, table=table)


_RECOMPUTE = "recompute the consumer from the full table (a Dagster change-feed asset: materialize it with " \
             "full_refresh: true), then consume changes from there"


# -- the source table's log, read without Spark ---------------------------------------------------


def commit_versions(path: str, *, after: int | None = None, storage: SinkStorage | None = None) -> list[int]:
    """The versions whose commit files are still in the table's `_delta_log`, oldest first ([] if no table).

    With `after`, only the versions after it: the listing starts there (a log of months of minute batches
    holds tens of thousands of files, listed in pages of 1,000 on S3), and a missing `after + 1` still shows.
    """
    start_after = None if after is None or after < 0 else f"{after:020d}.json"
    names = (storage or storage_for(path)).list_names(log_dir(path), start_after=start_after) or []
    return sorted(int(match.group(1)) for name in names if (match := _COMMIT_FILE.match(name)))


def latest_version(path: str, *, storage: SinkStorage | None = None) -> int | None:
    """The table's newest Delta version, or None when there is no table at `path` (listed from its checkpoint)."""
    return newest_version(path, storage=storage)


def _commit_info(path: str, version: int, storage: SinkStorage) -> dict[str, Any]:
    text = storage.read_text(f"{path.rstrip('/')}/_delta_log/{version:020d}.json")
    for line in text.split("\n"):  # not splitlines(): U+0085 and U+2028 occur raw in column statistics
        if '"commitInfo"' in line:
            info: dict[str, Any] = json.loads(line)["commitInfo"]
            return info
    return {}


def _rewrite_kind(info: dict[str, Any]) -> str | None:
    """'a re-snapshot', 'a rewrite', or None when the commit does not replace the whole table."""
    operation = info.get("operation")
    mode = (info.get("operationParameters") or {}).get("mode")
    if operation not in _REPLACING and not (operation == "WRITE" and mode == "Overwrite"):
        return None
    try:
        metadata = json.loads(info.get("userMetadata") or "{}")
    except ValueError:
        metadata = {}
    return "a re-snapshot" if isinstance(metadata, dict) and metadata.get("kind") == "snapshot" else "a rewrite"


# -- reading the feed ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChangeBatch:
    """The changes of source versions `after_version` + 1 … `end_version`."""

    path: str
    after_version: int
    end_version: int
    #: The source's columns (the schema of `end_version`) plus `_change_type`, `_commit_version`,
    #: `_commit_timestamp`. Lazy: run actions on it inside `feed_errors` so failures keep their remedy.
    changes: DataFrame
    rows: int


def read_changes(
    spark: SparkSession,
    path: str,
    *,
    after_version: int,
    up_to_version: int | None = None,
    storage: SinkStorage | None = None,
    table: str | None = None,
) -> ChangeBatch:
    """The table's change rows after `after_version` (the version a consumer has already seen) up to the latest.

    Args:
        up_to_version: the last version to include (default: the latest when called).
        table: the source table's name, for messages.

    Raises:
        TableRewrittenError: a version in the range overwrote the whole table (a re-snapshot). Delta would
            report it as every old row deleted and every new row inserted — exact, but the size of the table
            twice, and possibly across a schema change; binlake asks for a recompute instead.
        ChangesExpiredError: versions in the range are no longer in the log, or their files were vacuumed.
        ChangeFeedDisabledError: the feed was off for a version in the range.
        ChangeFeedSchemaError: the range crosses a non-additive schema change (added columns read fine).
    """
    storage = storage or storage_for(path)
    newest = newest_version(path, storage=storage)
    if newest is None:
        raise DeltaStateError(f"there is no Delta table at {path}", remedy="snapshot the table first", table=table)
    versions = commit_versions(path, after=after_version, storage=storage) or [newest]
    end = versions[-1] if up_to_version is None else up_to_version
    if not after_version < end <= versions[-1] or after_version < -1:
        raise ValueError(f"no versions between {after_version} and {end} (latest {versions[-1]})")
    needed = range(after_version + 1, end + 1)
    missing = sorted(set(needed) - set(versions))
    if missing:
        raise ChangesExpiredError(
            f"the change feed of {path} after version {after_version} is gone: the log keeps versions "
            f"{versions[0]}…{versions[-1]} only (delta.logRetentionDuration)",
            remedy=f"{_RECOMPUTE}; consume more often than the table's log retention, or raise it",
            path=path, after_version=after_version, table=table,
        )
    for version in needed:
        kind = _rewrite_kind(_commit_info(path, version, storage))
        if kind is not None:
            raise TableRewrittenError(
                f"version {version} of {path} is {kind} (a full overwrite) after the consumed version "
                f"{after_version}: the feed would repeat the whole table as deletes and inserts",
                remedy=_RECOMPUTE, path=path, after_version=after_version, rewrite_version=version, table=table,
            )
    with feed_errors(path, after_version=after_version, table=table):
        changes = (
            spark.read.format("delta").option("readChangeFeed", "true")
            .option("startingVersion", after_version + 1).option("endingVersion", end).load(path)
        )
        # Counting reads every change file now, so a vacuumed one fails here, with its remedy.
        rows = changes.count()
    return ChangeBatch(path=path, after_version=after_version, end_version=end, changes=changes, rows=rows)


@contextmanager
def feed_errors(path: str, *, after_version: int, table: str | None = None) -> Iterator[None]:
    """Turn Spark's change-feed failures into `ChangeFeedError`s that name the remedy."""
    try:
        yield
    except Exception as exc:
        text = _error_text(exc)
        if "DELTA_MISSING_CHANGE_DATA" in text:
            raise ChangeFeedDisabledError(
                f"the change data feed of {path} was off for a version after {after_version}",
                remedy=f"set sink.change_data_feed (or sink.tables.<table>.change_data_feed) to true, re-snapshot "
                f"the table, then {_RECOMPUTE}", path=path, after_version=after_version, table=table,
            ) from None
        if "CHANGE_DATA_FEED_INCOMPATIBLE" in text:
            raise ChangeFeedSchemaError(
                f"the change feed of {path} after version {after_version} crosses a schema change it cannot "
                "read across (a column type changed or a column was dropped)",
                remedy=_RECOMPUTE, path=path, after_version=after_version, table=table,
            ) from None
        if "FILE_NOT_EXIST" in text or "FileNotFoundException" in text or "DELTA_CHANGE_DATA_FILE_NOT_FOUND" in text:
            raise ChangesExpiredError(
                f"files of the change feed of {path} after version {after_version} were removed (VACUUM)",
                remedy=f"{_RECOMPUTE}; consume more often than the VACUUM retention", path=path,
                after_version=after_version, table=table,
            ) from None
        raise


def _error_text(exc: BaseException) -> str:
    java = getattr(exc, "java_exception", None)  # py4j's own message is only "An error occurred while calling"
    return f"{exc} {java.toString() if java is not None else ''}"


# -- an exactly-once consumer ----------------------------------------------------------------------


class ChangeConsumer(Protocol):
    """What a derived table computes: all of it from the source's rows, or a fold of the source's changes."""

    @property
    def name(self) -> str:
        """Names the consumer's Delta SetTransaction application; stable across runs."""

    def compute(self, rows: DataFrame) -> DataFrame:
        """The whole output from the source table's rows."""

    def merge(self, spark: SparkSession, output_path: str, changes: DataFrame) -> None:
        """Fold `changes` (rows with `_change_type`) into the output table in one Delta commit (a MERGE)."""


ConsumeMode = Literal["initial", "incremental", "recomputed", "up_to_date"]


@dataclass(frozen=True)
class ConsumeResult:
    mode: ConsumeMode
    #: The source version the output reflects after this run.
    source_version: int
    #: The source version it reflected before (None on a first run).
    previous_version: int | None
    #: The output's Delta version written by this run (None when it was up to date).
    output_version: int | None = None
    change_rows: int = 0
    #: Why the output was computed from the full table instead of the feed.
    reason: str | None = None


def feed_app_id(consumer: str) -> str:
    return f"binlake-feed:{consumer}"


@dataclass(frozen=True)
class FeedCursor:
    """Where an output table stands: its consumer run sequence and the source version it reflects."""

    sequence: int
    source_path: str
    source_version: int


def read_cursor(output_path: str, consumer: str, *, storage: SinkStorage | None = None) -> FeedCursor | None:
    """The cursor recorded by the consumer's last commit into `output_path`, or None before its first run."""
    tail = read_log_tail(output_path, application=feed_app_id(consumer), storage=storage)
    if tail is None or tail.last_binlake_commit is None:
        return None
    commit = tail.last_binlake_commit
    return FeedCursor(sequence=commit.txn_version, source_path=str(commit.metadata["source_path"]),
                      source_version=int(commit.metadata["source_version"]))


def consume(
    spark_factory: Callable[[], SparkSession],
    *,
    consumer: ChangeConsumer,
    source_path: str,
    output_path: str,
    storage: SinkStorage | None = None,
    full_refresh: bool = False,
    table: str | None = None,
) -> ConsumeResult:
    """Bring the output table up to the source's latest version, exactly once.

    Args:
        spark_factory: a callable returning the SparkSession; called only when there is work, so a run that
            finds no new source version does not start Spark.
        storage: how to reach the source and the output (both on the pipeline's sink).
        full_refresh: recompute from the full table even when the feed could serve.

    Raises:
        ChangeFeedError: the feed cannot serve the range and only a recompute (full_refresh) can.
    """
    storage = storage or storage_for(source_path)
    latest = latest_version(source_path, storage=storage)
    if latest is None:
        raise DeltaStateError(f"there is no Delta table at {source_path}", remedy="snapshot the table first",
                              table=table)
    cursor = read_cursor(output_path, consumer.name, storage=storage)
    previous = cursor.source_version if cursor is not None else None
    reason: str | None = None
    if full_refresh:
        reason = "full refresh asked"
    elif cursor is not None and cursor.source_path.rstrip("/") != source_path.rstrip("/"):
        raise DeltaStateError(
            f"the output at {output_path} was computed from {cursor.source_path}, not {source_path}",
            remedy="materialize it with full_refresh: true, or give it its own output path", table=table,
        )
    elif cursor is not None and cursor.source_version > latest:
        raise DeltaStateError(
            f"the output at {output_path} reflects version {cursor.source_version} of {source_path}, which only "
            f"reaches {latest}: the table was recreated",
            remedy="materialize the consumer with full_refresh: true", table=table,
        )
    elif cursor is not None and cursor.source_version == latest:
        return ConsumeResult(mode="up_to_date", source_version=latest, previous_version=previous)
    spark = spark_factory()
    sequence = cursor.sequence + 1 if cursor is not None else 1
    metadata = {"source_path": source_path, "source_version": latest, "previous_version": previous}
    if cursor is not None and reason is None:
        try:
            batch = read_changes(spark, source_path, after_version=cursor.source_version, up_to_version=latest,
                                 storage=storage, table=table)
        except TableRewrittenError as rewritten:
            reason = f"source version {rewritten.rewrite_version} overwrote the table (a re-snapshot)"
        else:
            with (
                feed_errors(source_path, after_version=cursor.source_version, table=table),
                IdempotentCommit(spark, feed_app_id(consumer.name), sequence, {**metadata, "kind": "changes"}),
            ):
                # An empty feed (versions that changed no row) still commits: the cursor moves past them.
                consumer.merge(spark, output_path, batch.changes)
            return ConsumeResult(
                mode="incremental", source_version=latest, previous_version=previous,
                output_version=_committed(output_path, consumer.name, sequence, storage), change_rows=batch.rows,
            )
    rows = spark.read.format("delta").option("versionAsOf", latest).load(source_path)
    with IdempotentCommit(spark, feed_app_id(consumer.name), sequence, {**metadata, "kind": "full"}):
        (
            consumer.compute(rows).write.format("delta").mode("overwrite").option("overwriteSchema", "true")
            .save(output_path)
        )
    return ConsumeResult(
        mode="initial" if cursor is None else "recomputed", source_version=latest, previous_version=previous,
        output_version=_committed(output_path, consumer.name, sequence, storage), reason=reason,
    )


def _committed(output_path: str, consumer: str, sequence: int, storage: SinkStorage) -> int:
    """The output's Delta version holding run `sequence`; a MERGE that committed nothing is an error."""
    tail = read_log_tail(output_path, application=feed_app_id(consumer), storage=storage)
    commit = tail.last_binlake_commit if tail is not None else None
    if commit is None or commit.txn_version != sequence:
        raise DeltaStateError(
            f"the consumer {consumer}'s commit {sequence} was not found in {output_path}/_delta_log",
            remedy="make the consumer's merge write exactly one Delta commit, and make it the output's only writer",
        )
    return commit.delta_version


def signed_changes(changes: DataFrame) -> DataFrame:
    """`changes` with a `_sign` column: +1 for rows the change adds (insert, post-image), -1 for rows it removes."""
    from pyspark.sql import functions as F

    return changes.withColumn("_sign", F.when(F.col(CHANGE_TYPE).isin(*ADDING), 1).otherwise(-1))


__all__ = [
    "ChangeBatch", "ChangeConsumer", "ChangeFeedDisabledError", "ChangeFeedError", "ChangeFeedSchemaError",
    "ChangesExpiredError", "ConsumeResult", "FeedCursor", "TableRewrittenError", "commit_versions", "consume",
    "feed_app_id", "feed_errors", "latest_version", "read_changes", "read_cursor", "signed_changes",
]
