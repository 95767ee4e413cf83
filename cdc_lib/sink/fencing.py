"""Fences: what makes a commit prepared under an older claim on a table fail in the Delta log itself.

Timing is not fencing: a sync batch, a snapshot wave or a runner that lost its lease may be paused (GC, SIGSTOP,
a VM) anywhere between its last check and its commit. So every binlake commit carries a SetTransaction, and each
actor that takes a table from another first commits a **fence**: an empty Delta commit carrying a SetTransaction
for every app id it takes over, at a version at or above any commit that app id may still have in flight.

Delta then refuses the stale commit in both of the ways a writer can meet the fence:
- the fence is in the snapshot the stale transaction reads: Spark skips a write whose SetTransaction version the
  log already holds (and `delta_log.version_of` turns the missing commit into FencedCommitError); binlake's
  delta-rs writers look up the app id's version on the very `DeltaTable` they commit on, and refuse;
- the fence lands while the stale transaction runs: both commits carry the app id, so Delta's conflict check
  (Spark's ConcurrentTransactionException, delta-rs's CommitFailedError) fails the later one.

Who fences what (docs/snapshots.md "Beside the sync"):
- a snapshot, right before its run's first wave commit: the table's own app id (the sync's) at the pipeline's
  batch sequence read then, after the snapshot's document was written — every batch that may still commit took
  its sequence before that read, and a batch that takes one after it reads the document before it commits and
  leaves the table alone; and the app id of any earlier snapshot of the table it replaces, at SUPERSEDED;
- the sync, before it abandons a snapshot whose runner is gone: that snapshot's app id, at SUPERSEDED; then it
  reads the log: a wave committed before the fence means the snapshot is not abandoned (it is adopted), and none
  can commit after it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from cdc_lib.errors import SinkError
from cdc_lib.sink import delta_log
from cdc_lib.sink.choice import spark_log_store, spark_only_reasons
from cdc_lib.sink.commits import fence_metadata
from cdc_lib.sink.delta_rs import writer as delta_rs_writer
from cdc_lib.sink.storage import SinkStorage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("binlake")

#: The SetTransaction version a fence sets for a snapshot app id it takes over: above any wave number.
SUPERSEDED = 2**62
#: How often a fence commit that met a concurrent commit is tried again, and the pause before each retry.
ATTEMPTS = 5
RETRY_SECONDS = 0.5


def fence_table(
    path: str,
    *,
    fences: Mapping[str, int],
    metadata: Mapping[str, Any],
    storage: SinkStorage,
    spark: Callable[[], SparkSession] | None = None,
    spark_conf: Mapping[str, str] | None = None,
) -> int | None:
    """Commit a fence on the table at `path`: a SetTransaction for each app id of `fences` at the version given
    (or the one the log holds, when higher: a SetTransaction never goes back); its Delta version, or None when
    the table does not exist (nothing can be committed on top of a table that is not there).

    Written by delta-rs in one commit when it writes the table's protocol exactly; else by Spark (`spark` starts
    the session), one empty append per app id.
    """
    if not delta_log.table_exists(path, storage=storage):
        return None
    settings = delta_log.table_detail(path, storage=storage)
    on_spark = settings is None or bool(spark_only_reasons(settings)) or spark_log_store(spark_conf) is not None
    for attempt in range(1, ATTEMPTS + 1):
        try:
            if on_spark:
                if spark is None:
                    raise SinkError(
                        f"the table at {path} can only be fenced by Spark, and no SparkSession was given",
                        remedy="report this as a bug", retryable=False,
                    )
                return _fence_with_spark(spark(), path, fences, metadata, storage)
            return _fence_with_delta_rs(path, fences, metadata, storage)
        except Exception as exc:  # noqa: BLE001 - only commit conflicts are retried here
            if not _conflict(exc) or attempt == ATTEMPTS:
                raise
            log.info("fence on %s met a concurrent commit (%s); retrying", path, type(exc).__name__)
            time.sleep(RETRY_SECONDS * attempt)
    raise AssertionError("unreachable")


def _conflict(exc: BaseException) -> bool:
    kind = type(exc).__name__
    return "Concurrent" in kind or kind == "CommitFailedError" or "ConcurrentTransaction" in str(exc)[:500]


def _fence_with_delta_rs(
    path: str, fences: Mapping[str, int], metadata: Mapping[str, Any], storage: SinkStorage
) -> int:
    from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, Transaction

    table = DeltaTable(delta_rs_writer.table_uri(path), storage_options=delta_rs_writer.storage_options(path, storage))
    versions = {app: max(version, table.transaction_version(app) or 0) for app, version in fences.items()}
    commit = CommitProperties(
        custom_metadata={"userMetadata": fence_metadata(metadata, versions)},
        app_transactions=[Transaction(app_id=app, version=version) for app, version in sorted(versions.items())],
    )
    table.create_write_transaction(
        [], "append", table.schema(), commit_properties=commit,
        post_commithook_properties=PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False),
    )
    table.update_incremental()
    return table.version()


def _fence_with_spark(
    spark: SparkSession, path: str, fences: Mapping[str, int], metadata: Mapping[str, Any], storage: SinkStorage
) -> int:
    version = -1
    for app, wanted in sorted(fences.items()):
        tail = delta_log.read_log_tail(path, application=app, storage=storage)
        held = max([tail.fence or 0] if tail is not None else [0])
        if tail is not None and tail.last_binlake_commit is not None:
            held = max(held, tail.last_binlake_commit.txn_version)
        # Spark skips the commit when the log holds this version or a newer one: then the fence is there already.
        (spark.read.format("delta").load(path).limit(0).write.format("delta").mode("append")
         .option("txnAppId", app).option("txnVersion", str(max(wanted, held)))
         .option("userMetadata", fence_metadata(metadata, {app: max(wanted, held)}))
         .save(path))
        version = max(version, delta_log.newest_version(path, storage=storage) or -1)
    return version


__all__ = ["ATTEMPTS", "SUPERSEDED", "fence_table"]
