"""Writing soft-delete and history tables: each batch and each re-snapshot is one idempotent Delta commit.

Soft delete: the batch's net rows are MERGEd like the mirror's, except that a delete sets
`_binlake_deleted_at` (and the row's last values) instead of removing the row.

History (SCD type 2): per key, the batch's versions are resolved against the key's current version in
Delta (read first: whether it exists, when it began, and whether it equals the batch's first version), then
one MERGE closes current versions (source rows tagged `c`, matched on key and `_binlake_is_current`) and
inserts the new ones (rows tagged `i`, which the merge condition never matches): the "staged union".

Both carry the SetTransaction of `commit.IdempotentCommit`, so a replay after a crash writes nothing
twice. The first snapshot of a table is written with the mode's columns (`with_mode_columns`): chunked, by
`cdc_lib.snapshot.chunked`; a re-snapshot of a table already in that mode is a one-shot MERGE that keeps what the
mode keeps (`write_mode_snapshot`, docs/table-modes.md).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from functools import reduce
from typing import TYPE_CHECKING, Any

from cdc_lib.changes import metadata_columns
from cdc_lib.changes.events import HistoryChanges, SoftDeleteChanges, TableChanges
from cdc_lib.changes.modes import (
    DELETED_AT,
    IS_CURRENT,
    METADATA_COLUMNS,
    SEQUENCE,
    VALID_FROM,
    VALID_TO,
    CurrentVersion,
    TableModeError,
    mode_of_commit,
    resolve_versions,
    sequence_of,
    timestamp_micros,
)
from cdc_lib.changes.spill import SpilledChanges, folds_of
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import copied_from, matched_on, quote_identifier, spark_type_ddl
from cdc_lib.sink import delta_log
from cdc_lib.sink.commits import OPERATION_COLUMN, existing_tail
from cdc_lib.sink.key_bounds import KeyBounds, key_range_filter
from cdc_lib.sink.spark import writer as spark_writer
from cdc_lib.sink.spark.commit import IdempotentCommit
from cdc_lib.sink.spark.staging import StagedChanges, staged_source
from cdc_lib.sink.spark.uniform import check_uniform_writable
from cdc_lib.sink.storage import SinkStorage, storage_for

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_OP = OPERATION_COLUMN
_PROBE = "_binlake_probe"


def merge_mode_changes(
    spark: SparkSession,
    path: str,
    schema: TableSchema,
    changes: TableChanges,
    *,
    mode: str,
    application: str,
    txn_version: int,
    metadata: dict[str, Any],
    storage: SinkStorage | None = None,
) -> int:
    """Apply a soft-delete or history table's batch in one idempotent commit; return its Delta version.

    Raises:
        TableModeError: the Delta table was written in another mode (re-snapshot to change a table's mode).
    """
    storage = storage or storage_for(path)
    tail = existing_tail(path, schema, application=application, storage=storage)
    last = tail.last_binlake_commit
    if last is not None and last.txn_version >= txn_version:
        if isinstance(changes, SpilledChanges):
            changes.remove()  # already committed (a replay after a crash): the spill is not read
        return last.delta_version
    table = schema.table.name
    check_uniform_writable(spark, path, storage=storage, table=table)
    # A chunked snapshot's waves carry their own app id: with no commit of the table's own yet, the columns tell.
    written_in = (
        mode_of_commit(last.metadata) if last is not None
        else _mode_by_columns(spark.read.format("delta").load(path).columns)
    )
    if written_in != mode:
        raise TableModeError(
            f"the Delta table was written in {written_in} mode and the config says {mode}",
            remedy=f"re-snapshot the table to start it in {mode} mode (binlake snapshot --table {table}), "
            "or set its sink mode back",
            table=table,
        )
    commit = IdempotentCommit(
        spark, application, txn_version, {**metadata, "mode": mode, "kind": "merge"}
    )
    spilled = isinstance(changes, SpilledChanges)
    try:
        with StagedChanges(spark, schema, METADATA_COLUMNS[mode], spilled=spilled) as staged:
            if mode == "soft_delete":
                _merge_soft_delete(spark, path, schema, folds_of(changes), staged, commit)
            elif mode == "history":
                _merge_history(spark, path, schema, folds_of(changes), staged, commit, txn_version)
            else:
                raise TypeError(f"{mode} is no soft-delete or history mode")
    finally:
        if isinstance(changes, SpilledChanges):
            changes.remove()
    return delta_log.version_of(path, application, txn_version, storage)


def _key_condition(schema: TableSchema) -> str:
    return matched_on(schema.primary_key)


def _same_values(schema: TableSchema, columns: list[str] | None = None) -> str:
    """SQL: the target's (`t`) and source's (`s`) columns are equal, NULL equal to NULL."""
    names = columns if columns is not None else schema.column_names
    return " AND ".join(f"t.{quote_identifier(name)} <=> s.{quote_identifier(name)}" for name in names)


def _key_placeholder(schema: TableSchema, key: tuple[Any, ...]) -> list[Any]:
    row: list[Any] = [None] * len(schema.columns)
    for name, value in zip(schema.primary_key, key, strict=True):
        row[schema.column_names.index(name)] = value
    return row


def _timestamp_sql(moment: dt.datetime) -> str:
    return f"timestamp_micros({timestamp_micros(moment)})"


def _merge_soft_delete(
    spark: SparkSession, path: str, schema: TableSchema, parts: Iterable[TableChanges],
    staged: StagedChanges, commit: IdempotentCommit,
) -> None:
    """`parts`: the batch's fold in parts with disjoint keys (cdc_lib.changes.spill.folds_of), staged one by one."""
    from delta.tables import DeltaTable

    bounds = KeyBounds(schema)
    truncated_at: dt.datetime | None = None
    for changes in parts:
        if not isinstance(changes, SoftDeleteChanges):
            raise TypeError(f"{type(changes).__name__} is no soft-delete fold")
        records: list[tuple[Any, ...]] = [(*row, None, "u") for row in changes.upserts()]
        records += [(*row, deleted_at, "d") for row, deleted_at in changes.deletes()]
        staged.add(records)
        bounds.add(changes.rows)
        truncated_at = truncated_at or changes.truncated_at
    condition = _key_condition(schema)
    key_filter = bounds.filter()
    if key_filter and truncated_at is None:
        condition = f"{condition} AND {key_filter}"
    columns: dict[str, str | Column] = {**copied_from("s", schema.column_names)}
    columns[f"`{DELETED_AT}`"] = f"s.`{DELETED_AT}`"
    builder = (
        DeltaTable.forPath(spark, path).alias("t").merge(staged.frame().alias("s"), condition)
        .whenMatchedUpdate(set=columns)
        .whenNotMatchedInsert(values=columns)
    )
    if truncated_at is not None:
        # Rows the batch does not name were live until the first TRUNCATE.
        builder = builder.whenNotMatchedBySourceUpdate(
            condition=f"t.`{DELETED_AT}` IS NULL", set={quote_identifier(DELETED_AT): _timestamp_sql(truncated_at)}
        )
    with commit:
        builder.execute()


def _current_versions(
    spark: SparkSession, path: str, schema: TableSchema, changes: HistoryChanges, keys: list[tuple[Any, ...]]
) -> dict[tuple[Any, ...], CurrentVersion]:
    """Each batch key's current version in Delta: when it began, and whether it equals the key's first version.

    The comparison runs in Spark, on the staged row against the stored one, so values need not round-trip
    through Python to be compared.
    """
    from pyspark.sql import functions as F

    records: list[tuple[Any, ...]] = []
    for index, key in enumerate(keys):
        first = changes.versions[key][0]
        row = first.row if first.operation == "upsert" and first.row is not None else _key_placeholder(schema, key)
        records.append((*row, index, "p"))
    if not records:
        return {}
    target = spark.read.format("delta").load(path).alias("t").where(F.col(f"t.`{IS_CURRENT}`"))
    key_filter = key_range_filter(schema, keys)
    if key_filter:
        target = target.where(F.expr(key_filter))
    found: dict[tuple[Any, ...], CurrentVersion] = {}
    with staged_source(spark, schema, records, ((_PROBE, "bigint"),)) as probe:
        rows = (
            probe.alias("s").join(target, on=F.expr(_key_condition(schema)), how="inner")
            .select(
                F.col(f"s.`{_PROBE}`"), F.expr(f"unix_micros(t.`{VALID_FROM}`)"),
                F.expr(_same_values(schema)),
            )
            .collect()
        )
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    for index, micros, equal in rows:
        key = keys[index]
        if key in found:
            raise TableModeError(
                f"the history table has more than one current version of key {key}",
                remedy=f"re-snapshot the table into a new folder (binlake snapshot --table {schema.table.name} "
                "after moving the old one away); binlake must be the table's only writer",
                table=schema.table.name,
            )
        found[key] = CurrentVersion(
            valid_from=epoch + dt.timedelta(microseconds=int(micros)),
            equals_first=bool(equal) and changes.versions[key][0].operation == "upsert",
        )
    return found


def _merge_history(
    spark: SparkSession, path: str, schema: TableSchema, parts: Iterable[TableChanges],
    staged: StagedChanges, commit: IdempotentCommit, txn_version: int,
) -> None:
    """`parts`: the batch's fold in parts with disjoint keys (cdc_lib.changes.spill.folds_of), each resolved against
    Delta's current versions of its keys and staged before the next is read."""
    from delta.tables import DeltaTable

    bounds = KeyBounds(schema)
    first_truncation: dt.datetime | None = None
    for changes in parts:
        if not isinstance(changes, HistoryChanges):
            raise TypeError(f"{type(changes).__name__} is no history fold")
        keys = list(changes.versions)
        current = _current_versions(spark, path, schema, changes, keys)
        records: list[tuple[Any, ...]] = []
        for key in keys:
            plan = resolve_versions(changes.versions[key], current.get(key), batch_seq=txn_version)
            if plan.close_at is not None:
                records.append((*_key_placeholder(schema, key), None, plan.close_at, None, None, "c"))
            for version in plan.versions:
                records.append(
                    (*version.row, version.valid_from, version.valid_to, version.is_current, version.sequence, "i")
                )
        staged.add(records)
        bounds.add(keys)
        if changes.truncations and first_truncation is None:
            first_truncation = changes.truncations[0].time
    condition = f"t.`{IS_CURRENT}` AND s.`{_OP}` = 'c' AND {_key_condition(schema)}"
    key_filter = bounds.filter()
    if key_filter and first_truncation is None:
        condition = f"{condition} AND {key_filter}"
    values: dict[str, str | Column] = {
        **copied_from("s", [*schema.column_names, VALID_FROM, VALID_TO, IS_CURRENT, SEQUENCE])
    }
    builder = (
        DeltaTable.forPath(spark, path).alias("t").merge(staged.frame().alias("s"), condition)
        .whenMatchedUpdate(set={quote_identifier(VALID_TO): f"s.`{VALID_TO}`", f"`{IS_CURRENT}`": "false"})
        .whenNotMatchedInsert(condition=f"s.`{_OP}` = 'i'", values=values)
    )
    if first_truncation is not None:
        # Current versions of keys the batch does not name end at the first TRUNCATE.
        builder = builder.whenNotMatchedBySourceUpdate(
            condition=f"t.`{IS_CURRENT}`",
            set={
                f"`{VALID_TO}`": f"greatest(t.`{VALID_FROM}`, {_timestamp_sql(first_truncation)})",
                f"`{IS_CURRENT}`": "false",
            },
        )
    with commit:
        builder.execute()


# -- snapshots -----------------------------------------------------------------------------------------


def write_mode_snapshot(
    spark: SparkSession,
    frame: DataFrame,
    path: str,
    schema: TableSchema,
    *,
    mode: str,
    snapshot_time: dt.datetime,
    application: str,
    txn_version: int,
    metadata: dict[str, Any],
    storage: SinkStorage | None = None,
    deletion_vectors: bool = False,
) -> int:
    """Snapshot a soft-delete or history table in one idempotent commit; return its Delta version.

    A table not yet in Delta, or written in another mode, starts afresh (an overwrite with the mode's
    columns). A table already in this mode keeps what its mode keeps: rows the snapshot lacks become deleted
    (soft delete) or have their current version closed (history); changed rows are updated (soft delete) or
    get a new version (history); unchanged rows are left alone.
    """
    storage = storage or storage_for(path)
    metadata = {**metadata, "mode": mode}
    if existing_mode(spark, path, application=application, storage=storage) != mode:
        return spark_writer.write_snapshot(
            spark, with_mode_columns(frame, mode, snapshot_time, txn_version), path, application=application,
            txn_version=txn_version, metadata=metadata, storage=storage, deletion_vectors=deletion_vectors,
        )
    check_uniform_writable(spark, path, storage=storage, table=schema.table.name)
    _add_new_columns(spark, path, schema)
    # The source is read more than once below (a JDBC read): pin one reading of it.
    pinned = frame.localCheckpoint(eager=True)
    commit = IdempotentCommit(spark, application, txn_version, {**metadata, "kind": "snapshot"})
    if mode == "soft_delete":
        _resnapshot_soft_delete(spark, pinned, path, schema, snapshot_time, commit)
    else:
        _resnapshot_history(spark, pinned, path, schema, snapshot_time, txn_version, commit)
    return delta_log.version_of(path, application, txn_version, storage)


def existing_mode(spark: SparkSession, path: str, *, application: str, storage: SinkStorage) -> str | None:
    """The mode the Delta table at `path` was written in; None when there is no table.

    A snapshot of a table already in the configured mode is a repair MERGE that keeps its tombstones or history
    (`write_mode_snapshot`); any other is a fresh start (`cdc_lib.snapshot.tables` chunks those).
    """
    if not delta_log.table_exists(path, storage=storage):
        return None
    tail = delta_log.read_log_tail(path, application=application, storage=storage)
    last = tail.last_binlake_commit if tail is not None else None
    if last is not None:
        return mode_of_commit(last.metadata)
    # No commit of the table's own app id among the latest ones (a chunked snapshot's waves carry their own;
    # other writers, maintenance): the columns tell, so that a table's history is never overwritten by mistake.
    return _mode_by_columns(spark.read.format("delta").load(path).columns)


def _mode_by_columns(columns: list[str]) -> str:
    if IS_CURRENT in columns:
        return "history"
    return "soft_delete" if DELETED_AT in columns else "mirror"


def with_mode_columns(frame: DataFrame, mode: str, snapshot_time: dt.datetime, txn_version: int) -> DataFrame:
    """A snapshot's rows with the mode's columns: live (soft delete), or each key's first, current version
    valid from `snapshot_time` with sequence `txn_version << 32` (history). A chunked snapshot's waves take
    sequence 0: every later batch's sequence is above it."""
    from pyspark.sql import functions as F

    null_time = F.lit(None).cast("timestamp")
    if mode == "soft_delete":
        return frame.withColumn(DELETED_AT, null_time)
    return (
        frame.withColumn(VALID_FROM, F.expr(_timestamp_sql(snapshot_time)))
        .withColumn(VALID_TO, null_time)
        .withColumn(IS_CURRENT, F.lit(True))
        .withColumn(SEQUENCE, F.lit(sequence_of(txn_version, 0)).cast("bigint"))
    )


def with_metadata_columns(frame: DataFrame, *, source_ts: dt.datetime, applied_ts: dt.datetime) -> DataFrame:
    """A mirror snapshot's rows with binlake's metadata columns (cdc_lib.changes.metadata_columns), both constant:
    exact instants (microseconds since the epoch), whatever the session's time zone."""
    from pyspark.sql import functions as F

    return frame.withColumn(metadata_columns.SOURCE_TS, F.expr(_timestamp_sql(source_ts))).withColumn(
        metadata_columns.APPLIED_TS, F.expr(_timestamp_sql(applied_ts))
    )


def _add_new_columns(spark: SparkSession, path: str, schema: TableSchema) -> None:
    """Add the source's new columns to the Delta table; a column whose type changed cannot be kept in place."""
    existing = dict(spark.read.format("delta").load(path).dtypes)
    missing = []
    for column in schema.columns:
        wanted = spark_type_ddl(column).replace(" ", "")
        if column.name not in existing:
            missing.append(f"{quote_identifier(column.name)} {wanted}")
        elif existing[column.name] != wanted:
            raise TableModeError(
                f"column {column.name} is {wanted} at the source and {existing[column.name]} in Delta, and a "
                "re-snapshot of a soft-delete or history table keeps the table's earlier rows",
                remedy="move the table's Delta folder away and snapshot it again (a new table, a new history): "
                f"binlake snapshot --table {schema.table.name}",
                table=schema.table.name,
            )
    if missing:
        if any(definition.endswith(" timestamp_ntz") for definition in missing):
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.feature.timestampNtz' = 'supported')")
        spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS ({', '.join(missing)})")


def _data_columns(schema: TableSchema, extra: dict[str, str]) -> dict[str, str | Column]:
    columns: dict[str, str | Column] = {**copied_from("s", schema.column_names)}
    columns.update({quote_identifier(name): value for name, value in extra.items()})
    return columns


def _resnapshot_soft_delete(
    spark: SparkSession, frame: DataFrame, path: str, schema: TableSchema, snapshot_time: dt.datetime,
    commit: IdempotentCommit,
) -> None:
    from delta.tables import DeltaTable

    live = _data_columns(schema, {DELETED_AT: "CAST(NULL AS TIMESTAMP)"})
    builder = (
        DeltaTable.forPath(spark, path).alias("t").merge(frame.alias("s"), _key_condition(schema))
        .whenMatchedUpdate(condition=f"t.`{DELETED_AT}` IS NOT NULL OR NOT ({_same_values(schema)})", set=live)
        .whenNotMatchedInsert(values=live)
        .whenNotMatchedBySourceUpdate(
            condition=f"t.`{DELETED_AT}` IS NULL", set={quote_identifier(DELETED_AT): _timestamp_sql(snapshot_time)}
        )
    )
    with commit:
        builder.execute()


def _resnapshot_history(
    spark: SparkSession, frame: DataFrame, path: str, schema: TableSchema, snapshot_time: dt.datetime,
    txn_version: int, commit: IdempotentCommit,
) -> None:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    current = spark.read.format("delta").load(path).where(F.col(f"`{IS_CURRENT}`"))
    same = reduce(
        lambda left, right: left & right,
        [
            F.col(f"s.{quote_identifier(name)}").eqNullSafe(F.col(f"t.{quote_identifier(name)}"))
            for name in schema.column_names
        ],
    )
    new_or_changed = frame.alias("s").join(current.alias("t"), on=same, how="left_anti")
    # Every snapshot row is a `c` row: an unchanged one matches its current version and leaves it, so only
    # the versions of keys gone from the source are "not matched by source" and closed.
    source = frame.withColumn(_OP, F.lit("c")).unionByName(new_or_changed.withColumn(_OP, F.lit("i")))
    moment = _timestamp_sql(snapshot_time)
    closed_at = f"greatest(t.`{VALID_FROM}`, {moment})"
    closing: dict[str, str | Column] = {quote_identifier(VALID_TO): closed_at, f"`{IS_CURRENT}`": "false"}
    opened = _data_columns(schema, {
        VALID_FROM: moment, VALID_TO: "CAST(NULL AS TIMESTAMP)", IS_CURRENT: "true",
        SEQUENCE: f"CAST({sequence_of(txn_version, 0)} AS BIGINT)",
    })
    builder = (
        DeltaTable.forPath(spark, path).alias("t")
        .merge(source.alias("s"), f"t.`{IS_CURRENT}` AND s.`{_OP}` = 'c' AND {_key_condition(schema)}")
        .whenMatchedUpdate(condition=f"NOT ({_same_values(schema)})", set=closing)
        .whenNotMatchedInsert(condition=f"s.`{_OP}` = 'i'", values=opened)
        .whenNotMatchedBySourceUpdate(condition=f"t.`{IS_CURRENT}`", set=closing)
    )
    with commit:
        builder.execute()


__all__ = [
    "existing_mode", "merge_mode_changes", "with_metadata_columns", "with_mode_columns", "write_mode_snapshot",
]
