"""Writing to Delta: snapshot overwrites and change MERGEs, each an idempotent Delta transaction.

Every binlake commit carries a SetTransaction (`txnAppId` = pipeline + table,
`txnVersion` = batch sequence) and a JSON `userMetadata` with the binlog
position it brings the table to. `read_log_tail` (cdc_lib.sink.delta_log) reads that back
from the `_delta_log` folder without Spark, from its last checkpoint on, so reconciling
offsets with Delta is cheap however long the table's history.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_lib.changes.events import TableChanges
from cdc_lib.changes.spill import ParquetParts, SpilledChanges, SpillError, arrow_type, folds_of
from cdc_lib.common.faults import failpoint
from cdc_lib.common.formats import COMMIT_FORMAT
from cdc_lib.errors import DeltaStateError, FencedCommitError
from cdc_lib.model.positions import BinlogPosition, state_contains
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import copied_from, matched_on, quote_identifier, spark_type_ddl
from cdc_lib.sink import delta_log, key_absence
from cdc_lib.sink.delta_rs import writer as delta_rs_writer
from cdc_lib.sink.delta_rs.writer import Engine
from cdc_lib.sink.spark.session import STAGING_PATH_CONF, is_local_master
from cdc_lib.sink.storage import SinkStorage, storage_for

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

OPERATION_COLUMN = "_binlake_op"

# The log is read by cdc_lib.sink.delta_log (from its last checkpoint on); these names stay importable from here.
BinlakeCommit = delta_log.BinlakeCommit
LogTail = delta_log.LogTail
read_log_tail = delta_log.read_log_tail
table_exists = delta_log.table_exists
written_rows = delta_log.written_rows


def app_id(pipeline: str, table: str) -> str:
    return f"binlake:{pipeline}:{table}"


def spark_schema(
    schema: TableSchema, *, with_operation: bool = False, extra_columns: tuple[tuple[str, str], ...] = ()
) -> Any:
    """The Spark schema of the table's rows; `extra_columns` ((name, Spark type) …) and the operation column
    follow the source's columns."""
    from pyspark.sql.types import StringType, StructField, StructType, _parse_datatype_string

    fields = [
        StructField(column.name, _parse_datatype_string(spark_type_ddl(column)), True) for column in schema.columns
    ]
    fields += [StructField(name, _parse_datatype_string(ddl), True) for name, ddl in extra_columns]
    if with_operation:
        fields.append(StructField(OPERATION_COLUMN, StringType(), False))
    return StructType(fields)


class _IdempotentCommit:
    """Session confs that make the next Delta DML an idempotent, annotated transaction."""

    def __init__(self, spark: SparkSession, application: str, version: int, metadata: dict[str, Any]) -> None:
        self.spark = spark
        self.settings = {
            "spark.databricks.delta.write.txnAppId": application,
            "spark.databricks.delta.write.txnVersion": str(version),
            "spark.databricks.delta.commitInfo.userMetadata": json.dumps(
                {**metadata, "app_id": application, "format": COMMIT_FORMAT}, sort_keys=True
            ),
        }

    def __enter__(self) -> None:
        for key, value in self.settings.items():
            self.spark.conf.set(key, value)

    def __exit__(self, *exc: object) -> None:
        for key in self.settings:
            self.spark.conf.unset(key)


def write_snapshot(
    spark: SparkSession,
    frame: DataFrame,
    path: str,
    *,
    application: str,
    txn_version: int,
    metadata: dict[str, Any],
    storage: SinkStorage | None = None,
    deletion_vectors: bool = False,
    change_data_feed: bool = False,
) -> int:
    """Replace the Delta table at `path` with `frame` in one idempotent commit; return its version.

    Args:
        deletion_vectors: the table's `delta.enableDeletionVectors`. Set per table, not as a session default,
            because one session writes tables with different settings. Turning it off on a table that had it
            also drops the `deletionVectors` feature from the protocol (see `_drop_deletion_vectors`).
        change_data_feed: the table's `delta.enableChangeDataFeed`, set the same way. A snapshot is where the
            setting takes effect (docs/change-feed.md): the feed then starts at a full overwrite, which its
            consumers recompute from anyway (`cdc_lib.sink.change_feed`).
    """
    storage = storage or storage_for(path)
    wanted = {_DELETION_VECTORS: str(deletion_vectors).lower(), _CHANGE_DATA_FEED: str(change_data_feed).lower()}
    existing = table_exists(path, storage=storage)
    if existing:
        current = _properties(spark, path, storage)
        differing = {key: value for key, value in wanted.items() if current.get(key, "false") != value}
        if differing:
            # An overwrite keeps the table's properties and ignores the writer options: set them first (metadata only).
            assignments = ", ".join(f"'{key}' = '{value}'" for key, value in differing.items())
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({assignments})")
    with _IdempotentCommit(spark, application, txn_version, {**metadata, "kind": "snapshot"}):
        (
            frame.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
            .options(**_writer_options(wanted)).save(path)
        )
    version = _version_of(path, application, txn_version, storage)
    if existing and not deletion_vectors:
        _drop_deletion_vectors(spark, path, storage)
    return version


def append_snapshot_wave(
    spark: SparkSession,
    frame: DataFrame,
    path: str,
    *,
    application: str,
    txn_version: int,
    metadata: dict[str, Any],
    storage: SinkStorage | None = None,
) -> int:
    """Append a later wave of a chunked snapshot in one idempotent commit (a replay of the same `txn_version`
    writes nothing); return its version. The first wave is a `write_snapshot`."""
    storage = storage or storage_for(path)
    with _IdempotentCommit(spark, application, txn_version, {**metadata, "kind": "snapshot"}):
        frame.write.format("delta").mode("append").save(path)
    return _version_of(path, application, txn_version, storage)


_DELETION_VECTORS = "delta.enableDeletionVectors"
_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"


def _writer_options(wanted: dict[str, str]) -> dict[str, str]:
    """The properties a new table is created with; a change data feed that is off is left unset, as before."""
    return {key: value for key, value in wanted.items() if key != _CHANGE_DATA_FEED or value == "true"}


def _properties(spark: SparkSession, path: str, storage: SinkStorage) -> dict[str, str]:
    # From the log, not DESCRIBE DETAIL: that Spark job rebuilt the table's state and cost a re-snapshot of a
    # 200k-row table seconds of its fixed cost (docs/performance.md "Snapshot speed").
    settings = delta_log.table_settings(path, storage=storage)
    if settings is not None:
        return settings.properties
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").select("properties").first()
    return dict(detail[0]) if detail is not None and detail[0] is not None else {}


def table_features(spark: SparkSession, path: str) -> set[str]:
    """The table features in the Delta protocol of the table at `path` (reader and writer alike)."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").select("tableFeatures").first()
    return set(detail[0]) if detail is not None and detail[0] is not None else set()


def _drop_deletion_vectors(spark: SparkSession, path: str, storage: SinkStorage) -> None:
    """Remove the `deletionVectors` feature from the protocol, so delta-rs's pyarrow path opens the table again.

    A table keeps a feature once its protocol names it, whatever its property says; `DROP FEATURE` is Delta's
    documented way out. Right after a snapshot overwrite no file carries a deletion vector, so the purge it
    runs first rewrites nothing. Delta 4.0's drop leaves history in place and adds the writer-only
    `checkpointProtection` feature instead, which readers ignore. Needs delta-spark ≥ 4.0.1 on Spark 4.0.1
    (4.0.0's purge calls a Spark 4.0.0 constructor and fails with NoSuchMethodError).
    """
    settings = delta_log.table_settings(path, storage=storage)
    features = settings.features if settings is not None else table_features(spark, path)
    if "deletionVectors" in features:
        spark.sql(f"ALTER TABLE delta.`{path}` DROP FEATURE deletionVectors")


#: Commit metadata: the binlog position up to which the table holds the source's changes, which can lie past
#: the commit's `end` (a table held by a prepared XA branch stays at its PREPARE while later changes are
#: applied). Carried from commit to commit; a table is exactly the source at its offset only once the offset
#: has reached it.
APPLIED_THROUGH = "applied_through"


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
            `delta_rs_writer.writer_for` says which tables it takes).
    """
    storage = storage or storage_for(path)
    tail = existing_tail(path, schema, application=application, storage=storage)
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
        metadata = {**metadata, APPLIED_THROUGH: _later(through_before, applied_through).to_json()}
    exact = (
        append_from is not None and not changes.truncated and through_before is not None
        and _reached(append_from, through_before)
    )
    metadata = {**metadata, "writer": writer}
    # Keys the batch inserts are appended only where the table's file statistics prove them absent.
    live = key_absence.LiveKeys(path, schema, uri=delta_rs_writer.table_uri(path),
                                options=delta_rs_writer.storage_options(path, storage), known=delta_rs_writer.KnownLog(
                                    latest_version=tail.latest_version, checkpoint_version=tail.checkpoint_version),
                                ) if exact else None
    if writer == "delta-rs":
        return _write_with_delta_rs(path, schema, changes, live, application=application, txn_version=txn_version,
                                    metadata=metadata, storage=storage, tail=tail)
    assert spark is not None, "the Spark writer needs a SparkSession"
    # The fold in parts with disjoint keys (one part unless the batch spilled, cdc_lib.changes.spill), each staged as
    # it comes, so a spilled batch never sits in Python whole.
    bounds = KeyBounds(schema)  # of the keys that may be in the table: only they bound the MERGE's file pruning
    rest_rows = 0
    truncated = changes.truncated
    try:
        with StagedChanges(spark, schema, spilled=isinstance(changes, SpilledChanges)) as staged:
            for part in folds_of(changes):
                truncated = truncated or part.truncated
                if live is not None:
                    # Keys proven new join nothing: they are inserted; only the other keys can be in the table.
                    _, rest = live.split(part)
                    rest_rows += len(rest.rows)
                    bounds.add(rest.rows)
                else:
                    bounds.add(part.rows)
                staged.add(_mirror_records(schema, part))
            source = staged.frame()
            if live is not None and rest_rows == 0:
                return _append(spark, path, schema, source, application, txn_version, metadata, storage)
            key_filter = None if truncated else bounds.filter()
            return _merge(spark, path, schema, source, staged.rows, key_filter, truncated, application,
                          txn_version, metadata, storage)
    finally:
        if isinstance(changes, SpilledChanges):
            changes.remove()


def _write_with_delta_rs(
    path: str,
    schema: TableSchema,
    changes: TableChanges,
    live: key_absence.LiveKeys | None,
    *,
    application: str,
    txn_version: int,
    metadata: dict[str, Any],
    storage: SinkStorage,
    tail: LogTail,
) -> int:
    """The Spark path's plan (append when only keys proven new, else MERGE pruned to the keys' range) on delta-rs.

    A spilled batch never comes here (`delta_rs_writer.writer_for`): it is staged in one Arrow table. `tail`, the
    log read that just checked for a replay, lets the writer use a `DeltaTable` kept from an earlier batch when
    the log agrees with it (`delta_rs_tables.LoadedTables`).
    """
    rows = changes.rows
    if live is not None:
        _, rest = live.split(changes)
        rows = rest.rows
    bounds = KeyBounds(schema)
    bounds.add(rows)
    batch = delta_rs_writer.BatchWrite(
        records=delta_rs_writer.arrow_fold(schema, changes.upserts(), changes.deleted_keys()),
        append=live is not None and not rows, key_range=None if changes.truncated else bounds.range(),
        truncated=changes.truncated,
    )
    kind = {"kind": "merge", "path": "append"} if batch.append else {"kind": "merge"}
    known = delta_rs_writer.KnownLog(latest_version=tail.latest_version, checkpoint_version=tail.checkpoint_version)
    return delta_rs_writer.write_batch(path, schema, batch, application=application, txn_version=txn_version,
                                       metadata={**metadata, **kind}, storage=storage, known_log=known)


def _mirror_records(schema: TableSchema, changes: TableChanges) -> list[tuple[Any, ...]]:
    """A mirror fold as staged rows: upserts with their row, deletes as the key in an otherwise empty row."""
    width = len(schema.columns)
    key_positions = [schema.column_names.index(key) for key in schema.primary_key]
    records: list[tuple[Any, ...]] = [(*row, "u") for row in changes.upserts()]
    for key in changes.deleted_keys():
        placeholder: list[Any] = [None] * width
        for position, value in zip(key_positions, key, strict=True):
            placeholder[position] = value
        records.append((*placeholder, "d"))
    return records


def _applied_through(commit: BinlakeCommit | None) -> BinlogPosition | None:
    """Where the table's content is known to end: the last commit's mark, or a snapshot's own end.

    None (unknown) for a commit written before binlake recorded the mark, or in another table mode.
    """
    if commit is None:
        return None
    if APPLIED_THROUGH in commit.metadata:
        return BinlogPosition.from_json(commit.metadata[APPLIED_THROUGH])
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


def _append(
    spark: SparkSession,
    path: str,
    schema: TableSchema,
    source: DataFrame,
    application: str,
    txn_version: int,
    metadata: dict[str, Any],
    storage: SinkStorage,
) -> int:
    """Append the staged upserts, whose keys the table cannot hold, in one idempotent commit (no join, no file
    rewritten). A staged delete is of a key born and gone within the batch: absent before and after."""
    from pyspark.sql import functions as F

    names = (quote_identifier(name) for name in schema.column_names)
    frame = source.where(F.col(OPERATION_COLUMN) == "u").select(*names)
    with _IdempotentCommit(spark, application, txn_version, {**metadata, "kind": "merge", "path": "append"}):
        frame.write.format("delta").mode("append").save(path)
    return _version_of(path, application, txn_version, storage)


def existing_tail(path: str, schema: TableSchema, *, application: str, storage: SinkStorage) -> LogTail:
    """The table's log tail; DeltaStateError (re-snapshot) when the table is missing."""
    tail = read_log_tail(path, application=application, storage=storage)
    if tail is None:
        raise DeltaStateError(
            f"the Delta table at {path} is missing",
            remedy=f"re-snapshot the table: binlake snapshot --table {schema.table.name}",
            table=schema.table.name,
        )
    return tail


def _merge(
    spark: SparkSession,
    path: str,
    schema: TableSchema,
    source: DataFrame,
    source_rows: int,
    key_filter: str | None,
    truncated: bool,
    application: str,
    txn_version: int,
    metadata: dict[str, Any],
    storage: SinkStorage,
) -> int:
    from delta.tables import DeltaTable

    condition = matched_on(schema.primary_key)
    if key_filter and not truncated:
        condition = f"{condition} AND {key_filter}"
    columns: dict[str, str | Column] = {**copied_from("s", schema.column_names)}
    builder = (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), condition)
        .whenMatchedDelete(condition=f"s.{OPERATION_COLUMN} = 'd'")
        .whenMatchedUpdate(set=columns)
        .whenNotMatchedInsert(condition=f"s.{OPERATION_COLUMN} = 'u'", values=columns)
    )
    if truncated:
        builder = builder.whenNotMatchedBySourceDelete()
    with _IdempotentCommit(spark, application, txn_version, {**metadata, "kind": "merge"}), \
            _SessionSettings(spark, merge_settings(source_rows)):
        builder.execute()
    return _version_of(path, application, txn_version, storage)


#: A MERGE whose staged source holds at most this many rows runs without adaptive query execution
#: (docs/performance.md "Many tables in one batch").
SMALL_MERGE_ROWS = 50_000


def merge_settings(source_rows: int) -> dict[str, str]:
    """Spark SQL confs for one change MERGE of `source_rows` staged rows (the fixed cost per changed table).

    - `merge.materializeSource=none`: Delta copies a MERGE's source into executor storage first (one more Spark
      job, and memory) unless it reads only Delta tables, to guard against a source that changes between the
      MERGE's two passes. The staged source cannot change: Parquet files written once and removed only after
      the commit, or rows inside the plan.
    - `spark.sql.adaptive.enabled=false` for a small source: adaptive execution runs every query stage as a
      Spark job of its own (5 → 3 jobs to find the touched files, 3 → 1 to write them), and its re-planning
      buys nothing when the source is a few thousand rows. Larger sources keep it (partition coalescing, skew).
    """
    settings = {"spark.databricks.delta.merge.materializeSource": "none"}
    if source_rows <= SMALL_MERGE_ROWS:
        settings["spark.sql.adaptive.enabled"] = "false"
    return settings


class _SessionSettings:
    """Session confs set for one statement, then put back as they were (the session may be the pipeline's own)."""

    def __init__(self, spark: SparkSession, settings: dict[str, str]) -> None:
        self.spark = spark
        self.settings = settings
        self.previous: dict[str, str | None] = {}

    def __enter__(self) -> None:
        for key, value in self.settings.items():
            self.previous[key] = self.spark.conf.get(key, None)
            self.spark.conf.set(key, value)

    def __exit__(self, *exc: object) -> None:
        for key, value in self.previous.items():
            if value is None:
                self.spark.conf.unset(key)
            else:
                self.spark.conf.set(key, value)


class StagedChanges:
    """A batch's change records as a DataFrame, added in parts.

    The records go through Parquet files written by Arrow (one per part), several times faster than pickling
    rows through py4j, when executors can read the driver's files: on local Spark, or on a cluster with a
    shared `spark.staging_path`. Otherwise the rows travel inside the query plan, which needs them all in
    Python at once: refused for a spilled batch (`SpillError`), whose point is not to.

    Each record is the row's columns, then `extra_columns` ((name, Spark type) …), then the operation.
    """

    def __init__(self, spark: SparkSession, schema: TableSchema, extra_columns: tuple[tuple[str, str], ...] = (),
                 *, spilled: bool = False) -> None:
        import pyarrow as pa

        self.spark = spark
        self.struct = spark_schema(schema, with_operation=True, extra_columns=extra_columns)
        self.names = [*schema.column_names, *(name for name, _ in extra_columns), OPERATION_COLUMN]
        self.types = [arrow_type(spark_type_ddl(column)) for column in schema.columns]
        self.types += [arrow_type(ddl) for _, ddl in extra_columns] + [pa.string()]
        self.arrow_schema = pa.schema(list(zip(self.names, self.types, strict=True)))
        staging_root = spark.conf.get(STAGING_PATH_CONF, None)
        self.folder: Path | None = None
        self.in_plan: list[tuple[Any, ...]] | None = None
        self.parts = 0
        self.rows = 0  # records added so far
        self.spilled = spilled
        if staging_root is None and not is_local_master(spark.sparkContext.master or ""):
            if spilled:
                raise SpillError(
                    "a batch spilled to local Parquet (batch.max_buffered_changes), and the Spark cluster's "
                    "executors cannot read the driver's files",
                    remedy="set spark.staging_path to a folder shared by the driver and every worker, or raise "
                    "batch.max_buffered_changes (and the driver's memory)",
                    table=schema.table.name,
                )
            self.in_plan = []
            return
        if staging_root is not None:
            Path(staging_root).mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="binlake-batch-", dir=staging_root))
        self.files = ParquetParts(self.folder, "changes", self.arrow_schema)

    def __enter__(self) -> StagedChanges:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.folder is not None:
            self.files.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    def add(self, records: list[tuple[Any, ...]]) -> None:
        self.rows += len(records)
        if self.in_plan is not None:
            self.in_plan.extend(records)
            return
        import pyarrow as pa

        columns = list(zip(*records, strict=True)) if records else [() for _ in self.names]
        table = pa.Table.from_arrays(
            [pa.array(values, type=kind) for values, kind in zip(columns, self.types, strict=True)],
            schema=self.arrow_schema,
        )
        self.files.write(table)  # one row group per part, in a few files
        self.parts += 1

    def frame(self) -> DataFrame:
        if self.spilled:
            failpoint("spilled_apply")  # every part staged from the spill, the Delta commit not yet made
        if self.in_plan is not None:
            return self.spark.createDataFrame(self.in_plan, schema=self.struct)
        if self.parts == 0:
            self.add([])
        self.files.close()
        return self.spark.read.schema(self.struct).parquet(str(self.folder))


@contextmanager
def _staged_source(
    spark: SparkSession,
    schema: TableSchema,
    records: list[tuple[Any, ...]],
    extra_columns: tuple[tuple[str, str], ...] = (),
) -> Iterator[DataFrame]:
    """The records as a DataFrame, in one part (see `StagedChanges`)."""
    with StagedChanges(spark, schema, extra_columns) as staged:
        staged.add(records)
        yield staged.frame()


class KeyBounds:
    """The smallest and largest leading key value of the keys added, for `key_range_filter` (integer keys)."""

    def __init__(self, schema: TableSchema) -> None:
        self.schema = schema
        self.ends: list[tuple[Any, ...]] = []

    def add(self, keys: Iterable[tuple[Any, ...]]) -> None:
        values = [key[0] for key in keys]
        if values:
            self.ends = [(value,) for value in (*(end[0] for end in self.ends), min(values), max(values))]
            self.ends = [min(self.ends), max(self.ends)]

    def filter(self) -> str | None:
        return key_range_filter(self.schema, self.ends)

    def range(self) -> tuple[Any, Any] | None:
        return key_range(self.schema, self.ends)


def key_range(schema: TableSchema, keys: Iterable[tuple[Any, ...]]) -> tuple[Any, Any] | None:
    """The smallest and largest leading key value of `keys`, for integer keys; else None."""
    lead = schema.primary_key[0]
    column = next(column for column in schema.columns if column.name == lead)
    if spark_type_ddl(column) not in ("tinyint", "smallint", "int", "bigint", "decimal(20,0)"):
        return None
    values = [key[0] for key in keys]
    if not values:
        return None
    return min(values), max(values)


def key_range_filter(schema: TableSchema, keys: Iterable[tuple[Any, ...]]) -> str | None:
    """A predicate on the target's (`t`) leading key column covering `keys`, for integer keys; else None."""
    bounds = key_range(schema, keys)
    if bounds is None:
        return None
    lead = schema.primary_key[0]
    return f"t.{quote_identifier(lead)} BETWEEN {bounds[0]} AND {bounds[1]}"


def _version_of(path: str, application: str, txn_version: int, storage: SinkStorage) -> int:
    return delta_log.version_of(path, application, txn_version, storage)


def rewrite_column_types(spark: SparkSession, path: str, types: dict[str, str]) -> None:
    """Rewrite the table with `types` (column → Spark type) cast exactly, keeping column order and properties.

    Delta 4.0's type widening (`delta.enableTypeWidening`, ALTER … CHANGE COLUMN … TYPE) would avoid the
    rewrite, but it adds the `typeWidening` reader feature, and the `deltalake` 1.6.6 reader (delta-rs)
    refuses such tables ("reader features {'typeWidening'} … not yet supported"): every widening binlake
    accepts is exact as a cast (integer ranges, float → double, decimal precision/scale up), so the column is
    rewritten instead. Re-running it after a crash is a no-op cast.
    """
    from pyspark.sql import functions as F

    frame = spark.read.format("delta").load(path)
    current = dict(frame.dtypes)
    if all(current.get(name) == target.replace(" ", "") for name, target in types.items()):
        return
    columns = [
        F.col(quote_identifier(name)).cast(types[name]).alias(name) if name in types else F.col(quote_identifier(name))
        for name in frame.columns
    ]
    frame.select(*columns).write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(path)


def backfill_columns(spark: SparkSession, path: str, source: DataFrame, *, key: tuple[str, ...],
                     columns: list[str]) -> None:
    """Set `columns` of the rows already in the table from `source` (key + columns), matched on the key.

    Rows the source has and the table lacks are not inserted: they arrive later as row events.
    """
    from delta.tables import DeltaTable

    condition = matched_on(key)
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), condition)
        .whenMatchedUpdate(set={**copied_from("s", columns)})
        .execute()
    )
