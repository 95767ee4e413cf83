"""A snapshot wave written by delta-rs instead of Spark's Delta writer (`snapshot.writer`, docs/performance.md
"Snapshot speed").

Data flow: Spark still reads the wave (JDBC, binlake's casts: the one type mapping,
`cdc_lib.snapshot.jdbc_read.read_table`)
→ the wave's rows come to Python as Arrow (`DataFrame.toArrow()`: at most `rows_per_chunk × chunks_per_wave`
rows, the same bound as a wave's Spark job) → delta-rs (`deltalake`) writes the Parquet files and their
statistics and commits once, with the same SetTransaction (snapshot app id, wave number) and `userMetadata`
as the Spark writer. The first wave overwrites, the others append.

Spark's writer skips a commit whose SetTransaction the log already holds; delta-rs does not check, so this
module does it first: a replayed wave writes nothing and returns the version of the commit it made before.

What delta-rs cannot write exactly stays on Spark (`delta_rs_refusal`): deletion vectors and the change data
feed (`write_snapshot` sets those table properties and may drop the feature), soft-delete and history
tables, an existing table the change writer would not write (`choice.spark_only_reasons`), and columns
whose statistics delta-rs writes inexactly (wide DECIMALs, `choice.inexact_statistics`). So does what it
would write worse or around Spark's coordination (`choose_writer`): a wave too large to hold in the driver
(`ARROW_WAVE_BYTES`), Spark on a cluster, whose executors write in parallel, and a Delta log store set for Spark
(S3's DynamoDB one). An S3 sink is written with the sink's S3 settings (`writer.storage_options`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from cdc_lib.common.faults import failpoint
from cdc_lib.common.logs import about_table
from cdc_lib.config.model import SnapshotWriter, TableLayout
from cdc_lib.errors import TableError
from cdc_lib.sink import delta_log
from cdc_lib.sink.choice import inexact_statistics, spark_log_store, spark_only_reasons
from cdc_lib.sink.commits import DELETION_VECTORS, user_metadata
from cdc_lib.sink.delta_rs import file_layout
from cdc_lib.sink.delta_rs.writer import storage_options, table_uri
from cdc_lib.sink.storage import SinkStorage, storage_for

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger("binlake")

class SnapshotWriterError(TableError):
    """`snapshot.writer: delta-rs` names a table delta-rs cannot write exactly as Spark would."""


#: The most a wave may hold, estimated from InnoDB's average row length (which counts page and row overhead the
#: Arrow columns do not carry), to be collected to the driver as Arrow: half Spark's `spark.driver.maxResultSize`
#: (1 GiB by default; a larger result fails the job), with room in a local driver's heap (4g) for the read
#: itself. A larger wave (wide rows, BLOBs) is written by Spark, which streams it.
ARROW_WAVE_BYTES = 512 * 1024 * 1024


def choose_writer(
    setting: SnapshotWriter, path: str, *, table: str, mode: str, deletion_vectors: bool, change_data_feed: bool,
    local_master: bool, wave_bytes: int, storage: SinkStorage, column_types: Sequence[tuple[str, str]] = (),
    spark_conf: Mapping[str, str] | None = None, layout: TableLayout | None = None,
) -> Literal["spark", "delta-rs"]:
    """The engine that writes this table's snapshot wave under `snapshot.writer: setting`.

    Args:
        local_master: Spark runs in this process (`local[…]`); on a cluster its executors write in parallel and
            the driver is the wrong place to hold a wave.
        wave_bytes: the wave's estimated size (`cdc_lib.snapshot.jdbc_read.wave_bytes_estimate`).
        column_types: the wave's columns and their Delta types (`frame_column_types`).
        spark_conf: the pipeline's `spark.conf`: a Delta log store set there (the DynamoDB one for S3) is how
            Spark's commits coordinate, and delta-rs would commit around it.
        layout: the table's partition or clustering columns: Spark writes a table that has either.

    Raises:
        SnapshotWriterError: `delta-rs` was asked for a table it cannot write exactly (the reason is named).
    """
    if setting == "spark":
        return "spark"
    refusal = delta_rs_refusal(path, mode=mode, deletion_vectors=deletion_vectors,
                               change_data_feed=change_data_feed, storage=storage, column_types=column_types)
    if refusal is None and layout is not None and (layout.partition_by or layout.cluster_by):
        refusal = ("the table is " + (f"partitioned by {', '.join(layout.partition_by)}" if layout.partition_by
                                      else f"clustered by {', '.join(layout.cluster_by)}")
                   + " (sink.tables.<t>; docs/layout.md), which Spark's writer sets")
    if refusal is None:
        refusal = spark_log_store(spark_conf)
    if refusal is None and not local_master:
        refusal = "Spark runs on a cluster (spark.master), whose executors write the wave in parallel"
    if refusal is None and wave_bytes > ARROW_WAVE_BYTES:
        refusal = (f"a wave holds about {wave_bytes // 2**20} MiB, more than the {ARROW_WAVE_BYTES // 2**20} MiB "
                   "collected to the driver as Arrow (lower snapshot.rows_per_chunk or chunks_per_wave)")
    if refusal is None:
        return "delta-rs"
    if setting == "delta-rs":
        raise SnapshotWriterError(
            f"snapshot.writer is delta-rs, but delta-rs cannot write this table's snapshot exactly: {refusal}",
            remedy="set snapshot.writer to auto (Spark writes such tables) or spark", table=table,
        )
    log.info("snapshot of %s written by Spark: %s", table, refusal, extra=about_table(table))
    return "spark"


def delta_rs_refusal(
    path: str, *, mode: str, deletion_vectors: bool, change_data_feed: bool, storage: SinkStorage,
    column_types: Sequence[tuple[str, str]] = (),
) -> str | None:
    """Why this table's snapshot cannot be written by delta-rs exactly as Spark writes it; None when it can."""
    if mode != "mirror":
        return f"a {mode} table's snapshot carries its mode's columns and correction (Spark writes it)"
    if deletion_vectors:
        return "the table has deletion vectors on (sink.deletion_vectors)"
    if change_data_feed:
        return "the table has the change data feed on (sink.change_data_feed)"
    settings = delta_log.table_detail(path, storage=storage)
    if settings is None:
        if delta_log.table_exists(path, storage=storage):
            return "the table's settings are unreadable"
        # A new table: delta-rs creates it with the wave's columns, under Delta's default statistics settings.
        inexact = inexact_statistics(column_types, {})
        return f"delta-rs writes inexact min/max statistics for {', '.join(inexact)}" if inexact else None
    # An overwrite keeps the table's protocol and properties: the change writer's rules (`batch.writer`) apply.
    reasons = spark_only_reasons(replace(settings, column_types=tuple(column_types)))
    return f"the existing table: {'; '.join(reasons)}" if reasons else None


def frame_column_types(frame: DataFrame) -> list[tuple[str, str]]:
    """The frame's columns with their types as the Delta schema names them (`decimal(20,0)`, `bigint`, …)."""
    return [(field.name, field.dataType.simpleString()) for field in frame.schema.fields]


def write_wave(
    frame: DataFrame,
    path: str,
    *,
    application: str,
    txn_version: int,
    metadata: dict[str, Any],
    overwrite: bool,
    storage: SinkStorage | None = None,
    sort_key: Sequence[str] = (),
    before_commit: Callable[[], None] | None = None,
) -> int:
    """Write one snapshot wave with delta-rs in one idempotent commit; return its Delta version.

    Args:
        frame: the wave's rows as Spark reads and casts them; collected to the driver as Arrow (bounded by the
            wave's size).
        overwrite: the first wave (or a one-wave snapshot): replace the table and its schema, as
            `spark.writer.write_snapshot`; later waves append, as `spark.writer.append_snapshot_wave`.
        sort_key: the table's primary key: the wave is written sorted by it, in files of about the table's
            `file_layout.target_file_bytes` whose key ranges do not overlap, so a later MERGE rewrites only the
            files its keys fall in (docs/performance.md "Files a MERGE rewrites").
        before_commit: called once the wave can no longer be refused, before the table is loaded for the commit
            (the snapshot's fences, cdc_lib/snapshot/chunked.py).
    """
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    storage = storage or storage_for(path)
    done = _committed(path, application, txn_version, storage)
    if done is not None:
        return done  # a replay of a wave already in the log: Spark's writer would skip it too
    exists = delta_log.table_exists(path, storage=storage)
    settings = delta_log.table_detail(path, storage=storage) if exists else None
    properties = settings.properties if settings is not None else {}
    target_size = {file_layout.TARGET_FILE_SIZE_PROPERTY: str(file_layout.TARGET_FILE_BYTES)}
    # A size the table already has (binlake's, or one a person chose) stays; a table without one gets binlake's.
    file_bytes = file_layout.target_file_bytes(properties, table=metadata.get("table"))
    if before_commit is not None:
        before_commit()
    if exists and overwrite and file_layout.TARGET_FILE_SIZE_PROPERTY not in properties:
        _set_target_file_size(path, storage, target_size)
    # The snapshot the commit goes onto, loaded before the (long) read: the exactly-once and fence check is made
    # on it, and any commit after it that carries this app id (a fence: cdc_lib/sink/fencing.py) fails this one in
    # delta-rs's conflict check. delta-rs does not skip a SetTransaction the log holds, as Spark does.
    target: Any = table_uri(path)
    if exists:
        target = DeltaTable(target, storage_options=storage_options(path, storage))
        held = target.transaction_version(application)
        if held is not None and held >= txn_version:
            return delta_log.version_of(path, application, txn_version, storage)  # a replay, or FencedCommitError
    rows = frame.toArrow()
    # The wave is read (the long part): a runner stopped here (SIGSTOP, a VM, a GC) outlives its lease checks.
    failpoint("snapshot_wave_read")
    if sort_key and not _ascending(rows, sort_key):
        rows = rows.sort_by([(name, "ascending") for name in sort_key])
    try:
        write_deltalake(
            target,
            rows,
            # An S3 sink: the settings binlake and Spark use (endpoint, region, credentials, path style).
            storage_options=storage_options(path, storage) if not exists else None,
            mode="overwrite" if overwrite else "append",
            schema_mode="overwrite" if overwrite else None,
            # As Spark's writer creates the table: deletion vectors off, said explicitly (write_snapshot's options).
            # The file size also sets how large delta-rs's later MERGEs and appends write theirs.
            configuration={DELETION_VECTORS: "false", **target_size} if not exists else None,
            target_file_size=file_bytes,
            commit_properties=CommitProperties(
                custom_metadata={"userMetadata": user_metadata({**metadata, "kind": "snapshot"}, application)},
                app_transactions=[Transaction(app_id=application, version=txn_version)],
            ),
        )
    except Exception as exc:
        tail = delta_log.read_log_tail(path, application=application, storage=storage) \
            if "CommitFailed" in type(exc).__name__ else None
        if tail is not None and tail.fenced(txn_version):
            # It met a fence (cdc_lib/sink/fencing.py) carrying this app id: FencedCommitError.
            delta_log.version_of(path, application, txn_version, storage)
        raise
    return delta_log.version_of(path, application, txn_version, storage)


def _ascending(rows: pa.Table, key: Sequence[str]) -> bool:
    """Whether the rows already come in the order of a one-column key (a wave's partitions are key ranges in order,
    which InnoDB reads in key order): then the sort is skipped, ~0.3 s of a 2M-row wave against 1 ms for this."""
    import pyarrow.compute as pc

    if len(key) != 1:
        return False
    values = rows.column(key[0])
    return rows.num_rows < 2 or bool(pc.all(pc.less(values.slice(0, rows.num_rows - 1), values.slice(1))).as_py())


def _set_target_file_size(path: str, storage: SinkStorage, wanted: dict[str, str]) -> None:
    """Give an existing table without a file size binlake's before its snapshot overwrite (an overwrite keeps the
    table's properties, and ignores `configuration`): one metadata-only commit, which the overwrite follows."""
    from deltalake import DeltaTable, PostCommitHookProperties

    table = DeltaTable(table_uri(path), storage_options=storage_options(path, storage))
    table.alter.set_table_properties(
        wanted, raise_if_not_exists=False,
        post_commithook_properties=PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False),
    )


def _committed(path: str, application: str, txn_version: int, storage: SinkStorage) -> int | None:
    """The version of `application`'s commit with `txn_version` when the log already has it (or a later one)."""
    tail = delta_log.read_log_tail(path, application=application, storage=storage)
    if tail is None or tail.last_binlake_commit is None or tail.last_binlake_commit.txn_version < txn_version:
        return None
    return delta_log.version_of(path, application, txn_version, storage)
