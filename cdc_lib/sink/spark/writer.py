"""Spark's Delta writes: snapshot overwrites and waves, change MERGEs and appends, column rewrites.

Each is one idempotent, annotated binlake commit (`commit.IdempotentCommit`, `cdc_lib.sink.commits`); a batch's
records are staged for its MERGE by `staging`. Which engine writes a batch, and whether it is a replay, is decided
above both engines (`cdc_lib.sink.merge`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdc_lib.changes.events import TableChanges
from cdc_lib.changes.spill import SpilledChanges, folds_of
from cdc_lib.common.faults import failpoint
from cdc_lib.config.model import TableLayout
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import copied_from, matched_on, quote_identifier
from cdc_lib.sink import delta_log, key_absence
from cdc_lib.sink.commits import CHANGE_DATA_FEED, DELETION_VECTORS, OPERATION_COLUMN, BatchCommit
from cdc_lib.sink.key_bounds import KeyBounds
from cdc_lib.sink.spark.commit import IdempotentCommit
from cdc_lib.sink.spark.layout import check_layout, clustering_columns, partition_columns, set_clustering
from cdc_lib.sink.spark.staging import StagedChanges, mirror_records
from cdc_lib.sink.spark.uniform import check_uniform_writable
from cdc_lib.sink.storage import SinkStorage, storage_for

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


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
    replace_where: str | None = None,
    layout: TableLayout | None = None,
) -> int:
    """Replace the Delta table at `path` with `frame` in one idempotent commit; return its version.

    Args:
        deletion_vectors: the table's `delta.enableDeletionVectors`. Set per table, not as a session default,
            because one session writes tables with different settings. Turning it off on a table that had it
            also drops the `deletionVectors` feature from the protocol (see `_drop_deletion_vectors`).
        change_data_feed: the table's `delta.enableChangeDataFeed`, set the same way. A snapshot is where the
            setting takes effect (docs/change-feed.md): the feed then starts at a full overwrite, which its
            consumers recompute from anyway (`cdc_lib.sink.change_feed`).
        replace_where: replace only the rows this predicate holds for (one source of a routed table,
            docs/routing.md), in the same one commit; the table's schema is then kept as it is.
        layout: the table's partition or clustering columns (docs/layout.md), set by every snapshot: the
            overwrite partitions by them (a table partitioned otherwise is re-partitioned), and clustering is
            set right after the overwrite, which resets it (`cdc_lib.sink.spark.layout`).

    Raises:
        LayoutError: `layout` names a column `frame` lacks.
    """
    layout = layout or TableLayout()
    check_layout(layout, frame.columns, table=str(metadata.get("table", path)))
    storage = storage or storage_for(path)
    check_uniform_writable(spark, path, storage=storage, table=metadata.get("table"))
    wanted = {DELETION_VECTORS: str(deletion_vectors).lower(), CHANGE_DATA_FEED: str(change_data_feed).lower()}
    existing = delta_log.table_exists(path, storage=storage)
    if existing:
        current = _properties(spark, path, storage)
        differing = {key: value for key, value in wanted.items() if current.get(key, "false") != value}
        if differing:
            # An overwrite keeps the table's properties and ignores the writer options: set them first (metadata only).
            assignments = ", ".join(f"'{key}' = '{value}'" for key, value in differing.items())
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({assignments})")
    # Delta refuses to overwrite the schema of a partial overwrite: the routed sources share theirs (checked before).
    replacing = {"replaceWhere": replace_where} if replace_where is not None else {"overwriteSchema": "true"}
    with IdempotentCommit(spark, application, txn_version, {**metadata, "kind": "snapshot"}):
        (
            frame.write.format("delta").mode("overwrite").options(**replacing)
            .options(**_writer_options(wanted)).partitionBy(*layout.partition_by).save(path)
        )
    version = delta_log.version_of(path, application, txn_version, storage)
    # Also on a replay whose overwrite was committed before a crash: the table is clustered once this returns.
    set_clustering(spark, path, layout.cluster_by, storage=storage)
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
    check_uniform_writable(spark, path, storage=storage, table=metadata.get("table"))
    with IdempotentCommit(spark, application, txn_version, {**metadata, "kind": "snapshot"}):
        frame.write.format("delta").mode("append").save(path)
    return delta_log.version_of(path, application, txn_version, storage)


def _writer_options(wanted: dict[str, str]) -> dict[str, str]:
    """The properties a new table is created with; a change data feed that is off is left unset, as before."""
    return {key: value for key, value in wanted.items() if key != CHANGE_DATA_FEED or value == "true"}


def _properties(spark: SparkSession, path: str, storage: SinkStorage) -> dict[str, str]:
    # From the log, not DESCRIBE DETAIL: that Spark job rebuilt the table's state and cost a re-snapshot of a
    # 200k-row table seconds of its fixed cost (docs/performance.md "Snapshot speed").
    settings = delta_log.table_detail(path, storage=storage)
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
    settings = delta_log.table_detail(path, storage=storage)
    features = settings.features if settings is not None else table_features(spark, path)
    if "deletionVectors" in features:
        spark.sql(f"ALTER TABLE delta.`{path}` DROP FEATURE deletionVectors")


def write_changes(
    spark: SparkSession, schema: TableSchema, changes: TableChanges, live: key_absence.LiveKeys | None,
    commit: BatchCommit,
) -> int:
    """MERGE a batch's net changes into the Delta table in one idempotent commit (or append them when `live` proves
    every inserted key new); return its version. `cdc_lib.sink.merge.merge_changes` checks for a replay first."""
    path, application, txn_version = commit.path, commit.application, commit.txn_version
    metadata, storage = commit.metadata, commit.storage
    check_uniform_writable(spark, path, storage=storage, table=schema.table.name)
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
                staged.add(mirror_records(schema, part))
            source = staged.frame()
            if live is not None and rest_rows == 0:
                return _append(spark, path, schema, source, application, txn_version, metadata, storage)
            key_filter = None if truncated else bounds.filter()
            return _merge(spark, path, schema, source, staged.rows, key_filter, truncated, application,
                          txn_version, metadata, storage, commit.scope)
    finally:
        if isinstance(changes, SpilledChanges):
            changes.remove()


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
    with IdempotentCommit(spark, application, txn_version, {**metadata, "kind": "merge", "path": "append"}):
        frame.write.format("delta").mode("append").save(path)
    return delta_log.version_of(path, application, txn_version, storage)


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
    scope: str | None = None,
) -> int:
    from delta.tables import DeltaTable

    condition = matched_on(schema.primary_key)
    if key_filter and not truncated:
        condition = f"{condition} AND {key_filter}"
    if scope is not None:
        condition = f"{condition} AND {scope}"  # implied by the key; spelt out so file statistics prune by source
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
        # A routed table's TRUNCATE empties one source's rows, never its siblings' (`scope`).
        builder = builder.whenNotMatchedBySourceDelete(condition=scope)
    with IdempotentCommit(spark, application, txn_version, {**metadata, "kind": "merge"}), \
            _SessionSettings(spark, merge_settings(source_rows)):
        builder.execute()
    return delta_log.version_of(path, application, txn_version, storage)


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


def rewrite_column_types(spark: SparkSession, path: str, types: dict[str, str], *,
                         clustering: tuple[str, ...] = ()) -> None:
    """Rewrite the table with `types` (column → Spark type) cast exactly, keeping column order and properties.

    Delta 4.0's type widening (`delta.enableTypeWidening`, ALTER … CHANGE COLUMN … TYPE) would avoid the
    rewrite, but it adds the `typeWidening` reader feature, and the `deltalake` 1.6.6 reader (delta-rs)
    refuses such tables ("reader features {'typeWidening'} … not yet supported"): every widening binlake
    accepts is exact as a cast (integer ranges, float → double, decimal precision/scale up), so the column is
    rewritten instead. Re-running it after a crash is a no-op cast.

    `clustering`: the configured clustering columns (else the table's own, read before the overwrite resets
    them). A replay after a crash between the overwrite and its `CLUSTER BY` finds the types done and the
    clustering reset: it sets the configured clustering again, which a clustering read from the table could not.
    """
    from pyspark.sql import functions as F

    storage = storage_for(path)
    frame = spark.read.format("delta").load(path)
    current = dict(frame.dtypes)
    # The overwrite would drop partitioning and reset clustering (`cdc_lib.sink.spark.layout`): both are kept.
    partitions = partition_columns(path, storage=storage)
    clustering = clustering or clustering_columns(spark, path, storage=storage)
    if all(current.get(name) == target.replace(" ", "") for name, target in types.items()):
        if clustering:
            set_clustering(spark, path, clustering, storage=storage)  # a no-op unless a crash left it reset
        return
    columns = [
        F.col(quote_identifier(name)).cast(types[name]).alias(name) if name in types else F.col(quote_identifier(name))
        for name in frame.columns
    ]
    (
        frame.select(*columns).write.format("delta").mode("overwrite").option("overwriteSchema", "true")
        .partitionBy(*partitions).save(path)
    )
    failpoint("after_retype_overwrite")
    if clustering:
        set_clustering(spark, path, clustering, storage=storage)


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
