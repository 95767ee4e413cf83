"""A batch's mirror write, above both engines: the replay and fence check, the commit's `applied_through`, the
absence proof of inserted keys, then the engine that `cdc_lib.sink.choice.writer_for` chose.

Callers (the sync, the bench, the tests) write a batch's share of a mirror table here, whichever engine commits
it, so neither engine knows of the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdc_lib.changes import metadata_columns
from cdc_lib.changes.events import TableChanges
from cdc_lib.changes.spill import SpilledChanges
from cdc_lib.errors import DeltaStateError, FencedCommitError
from cdc_lib.model.positions import BinlogPosition, state_contains
from cdc_lib.model.tables import TableSchema
from cdc_lib.sink import commits, delta_log, key_absence
from cdc_lib.sink.choice import Engine
from cdc_lib.sink.delta_log import BinlakeCommit
from cdc_lib.sink.delta_rs import writer as delta_rs_writer
from cdc_lib.sink.loaded_tables import KnownLog
from cdc_lib.sink.spark import writer as spark_writer
from cdc_lib.sink.storage import SinkStorage, storage_for

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def merge_changes(
    spark: SparkSession | None,
    path: str,
    schema: TableSchema,
    changes: TableChanges,
    *,
    application: str,
    txn_version: int,
    metadata: dict[str, Any],
    storage: SinkStorage | None = None,
    applied_through: BinlogPosition | None = None,
    append_from: BinlogPosition | None = None,
    writer: Engine = "spark",
    scope: str | None = None,
) -> int:
    """MERGE a batch's net changes into the Delta table in one idempotent commit; return its version.

    Args:
        applied_through: the end of the binlog read the changes come from; recorded (`APPLIED_THROUGH`).
        append_from: the table's offset before this batch, given when the table is consistent there (past
            its snapshot's high watermark). Then, if the Delta log proves the table holds nothing past that
            offset, keys the batch inserts that no live file's key statistics cover cannot be in it
            (`key_absence`: the source may have changed off the binlog): a batch of only such keys is appended
            without a join, and in a mixed batch they do not widen the MERGE's file pruning.
        writer: the engine that commits: `spark` (needs `spark`) or `delta-rs` (cdc_lib.sink.delta_rs.writer, no JVM;
            `cdc_lib.sink.choice.writer_for` says which tables it takes).
        scope: the predicate (over the target's alias `t`) of the rows these changes may touch: one source's rows
            in a routed table (cdc_lib.changes.routing). A TRUNCATE then deletes only them. Spark only.
    """
    storage = storage or storage_for(path)
    if schema.column_names[-len(metadata_columns.NAMES):] == metadata_columns.NAMES:
        _check_metadata_columns(path, schema, storage)
    tail = commits.existing_tail(path, schema, application=application, storage=storage)
    last = tail.last_binlake_commit
    if last is not None and last.txn_version >= txn_version:
        if isinstance(changes, SpilledChanges):
            changes.remove()  # already committed (a replay after a crash): the spill is not read
        return last.delta_version
    if tail.fenced(txn_version):
        # A re-snapshot claimed the table after this batch took its sequence (cdc_lib/sink/fencing.py). Checked here
        # to spare the write; what enforces it is the commit itself (Spark skips the version, delta-rs checks it on
        # the snapshot it commits on, and a fence landing meanwhile fails the commit in Delta's conflict check).
        raise FencedCommitError(
            f"batch {txn_version} of {schema.table.name} was not written: a re-snapshot fenced the table at "
            f"{tail.fence}", remedy="nothing to do: the snapshot's install replaces the table's state",
            table=schema.table.name,
        )
    # Past a fence the last commit's position predates the snapshot that replaced the table: it proves nothing.
    through_before = _applied_through(last) if tail.fence is None else None
    if applied_through is not None:
        metadata = {**metadata, commits.APPLIED_THROUGH: _later(through_before, applied_through).to_json()}
    exact = (
        append_from is not None and not changes.truncated and through_before is not None
        and _reached(append_from, through_before)
    )
    metadata = {**metadata, "writer": writer}
    # Keys the batch inserts are appended only where the table's file statistics prove them absent.
    live = key_absence.LiveKeys(path, schema, uri=delta_rs_writer.table_uri(path),
                                options=delta_rs_writer.storage_options(path, storage), known=KnownLog(
                                    latest_version=tail.latest_version, checkpoint_version=tail.checkpoint_version),
                                ) if exact else None
    commit = commits.BatchCommit(path=path, application=application, txn_version=txn_version, metadata=metadata,
                                 storage=storage, scope=scope)
    if writer == "delta-rs":
        assert scope is None, "a routed table is written by Spark (the config refuses delta-rs for it)"
        return delta_rs_writer.write_changes(schema, changes, live, commit, tail)
    assert spark is not None, "the Spark writer needs a SparkSession"
    return spark_writer.write_changes(spark, schema, changes, live, commit)


def _check_metadata_columns(path: str, schema: TableSchema, storage: SinkStorage) -> None:
    """A table written without the metadata columns is not given them by a batch: its older rows would have none
    (NULL), which an incremental consumer filtering on them would skip. The table stops until it is re-snapshotted
    with them (every row then has both) or the setting is turned off for it again."""
    detail = delta_log.table_detail(path, storage=storage)
    if detail is None:
        return  # no readable log here: the commit itself reports a missing table
    present = {name for name, _ in detail.column_types}
    missing = [name for name in metadata_columns.NAMES if name not in present]
    if missing:
        name = schema.table.name
        raise DeltaStateError(
            f"sink.metadata_columns is on for {name}, but its Delta table was written without {', '.join(missing)}",
            remedy=f"re-snapshot the table to add them to every row (binlake snapshot --table {name}), or set "
            f"sink.tables.{name}.metadata_columns: false",
            table=name,
        )


def _applied_through(commit: BinlakeCommit | None) -> BinlogPosition | None:
    """Where the table's content is known to end: the last commit's mark, or a snapshot's own end.

    None (unknown) for a commit written before binlake recorded the mark, or in another table mode.
    """
    if commit is None:
        return None
    if commits.APPLIED_THROUGH in commit.metadata:
        return BinlogPosition.from_json(commit.metadata[commits.APPLIED_THROUGH])
    if commit.kind == "snapshot" and "end" in commit.metadata:
        # The snapshot's rows may come from up to its high watermark: the caller's consistency covers that.
        return BinlogPosition.from_json(commit.metadata["end"])
    return None


def _reached(position: BinlogPosition, mark: BinlogPosition) -> bool:
    """Whether `position` is provably at or past `mark`: by offset on one server, else by GTID state only
    when the mark has one (a mark without GTID on another server proves nothing, so the answer is no)."""
    if position.written_on(mark.server) and mark.written_on(position.server):
        return mark <= position
    return mark.gtid is not None and state_contains(position.gtid, mark.gtid)


def _later(known: BinlogPosition | None, candidate: BinlogPosition) -> BinlogPosition:
    return candidate if known is None or _reached(candidate, known) else known


__all__ = ["merge_changes"]
