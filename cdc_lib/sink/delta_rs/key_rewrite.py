"""A mirror batch written by rewriting only the files its keys are in, sorted by key: binlake's own MERGE for
delta-rs tables with a one-column integer key.

Why not delta-rs's MERGE (measured, docs/performance.md "Files a MERGE rewrites"): delta-rs 1.6.6 rewrites only
the files holding a matched row, but it hash-partitions the joined rows by key over the CPU count and writes each
partition's rows to its own files, together with the batch's inserted rows. Every file a MERGE writes then spans
the key range of every file it rewrote plus the new keys, so the next batch's updates match every such file
again, and the rows inserted by earlier batches are copied batch after batch: the cost follows the table.

Here, in one commit with binlake's SetTransaction and metadata:

1. the files whose key statistics (min/max of the key) may hold one of the batch's keys are candidates; their
   key column is read and a file is touched only when it does hold one (exactly: `pyarrow.compute.is_in`);
2. the touched files' rows without the batch's keys, plus the batch's upserted rows, sorted by key, are written
   by delta-rs's own writer (its statistics, its types) as new files of `file_layout.TARGET_FILE_BYTES`, in a
   scratch table under the table's folder (`SCRATCH_FOLDER`), whose log is read and then removed;
3. one commit removes the touched files and adds the new ones (`DeltaTable.create_write_transaction`).

The batch's new keys thus go into files of their own (above the table's keys, they sort last), and a file holds a
run of adjacent keys: a later batch rewrites only the files its own keys are in.

`compacting_append`: a batch of only new keys appended, and in the same commit the small files the earlier
appends left at the top of the key order merged into files of the target size (`dataChange: false`).
"""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import spark_type_ddl
from cdc_lib.sink.delta_rs import file_layout
from cdc_lib.sink.key_bounds import ORDERED_KEY_TYPES, FileKeys, file_keys

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable, PostCommitHookProperties, Transaction

#: Where the rewritten files go, under the table's folder (not hidden: Spark's VACUUM skips folders whose name
#: starts with `_` or `.`, and must remove these files once they are no longer referenced).
SCRATCH_FOLDER = "binlake-files"
#: The most Parquet bytes of candidate files one batch rewrites in memory: a batch whose keys are in more (e.g.
#: updates all over a large table) goes to delta-rs's MERGE, which streams (`rewrite_batch` returns None).
MAX_CANDIDATE_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class Rewrite:
    """What `rewrite_batch` did: files read for their keys, files replaced, rows copied unchanged, files added."""

    candidate_files: int
    touched_files: int
    rows_copied: int
    files_added: int


def applies(schema: TableSchema, truncated: bool) -> bool:
    """Whether a batch of this table can be rewritten by key: a one-column integer key and no TRUNCATE (a
    TRUNCATE's batch deletes every row it does not hold: delta-rs's MERGE does that with one clause)."""
    if truncated or len(schema.primary_key) != 1:
        return False
    column = next(column for column in schema.columns if column.name == schema.primary_key[0])
    return spark_type_ddl(column) in ORDERED_KEY_TYPES


def rewrite_batch(
    table: DeltaTable,
    schema: TableSchema,
    records: pa.Table,
    *,
    operation_column: str,
    storage_options: dict[str, str] | None,
    custom_metadata: dict[str, str],
    transactions: list[Transaction],
    hooks: PostCommitHookProperties,
) -> Rewrite | None:
    """Apply the staged mirror records (`writer.arrow_fold`: upserts, then deleted keys) to `table` in one
    commit that replaces only the files holding one of their keys. Commits nothing when no file holds one and
    nothing is upserted (the caller then leaves the SetTransaction with an empty append). None, having done
    nothing, when the candidate files are more than `MAX_CANDIDATE_BYTES` or one is named by an absolute path
    (a shallow clone's): the caller MERGEs instead."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    from deltalake.fs import DeltaStorageHandler
    from deltalake.transaction import AddAction, RemoveAction

    key = schema.primary_key[0]
    batch_keys = records.column(key)
    key_values = sorted(set(batch_keys.to_pylist()))
    files = file_keys(table, key)
    candidates = [file for file in files if _may_hold(file, key_values)]
    if sum(file.size for file in candidates) > MAX_CANDIDATE_BYTES or any(
            "://" in file.path or file.path.startswith("/") for file in candidates):
        return None
    root = table.table_uri.rstrip("/")
    storage = DeltaStorageHandler(root, storage_options)
    filesystem = pa.fs.PyFileSystem(storage)
    target = _target_schema(records, operation_column)
    touched: list[FileKeys] = []
    kept: list[pa.Table] = []
    found: list[pa.ChunkedArray] = []  # the batch's keys the table held
    for file in candidates:
        # One open and one footer read per file: its key column first, the whole file only when it is touched.
        with filesystem.open_input_file(unquote(file.path)) as source:
            parquet = pq.ParquetFile(source, coerce_int96_timestamp_unit="us")
            keys = parquet.read(columns=[key]).column(key)
            held = pc.is_in(keys, value_set=batch_keys)
            if not pc.any(held).as_py():
                continue
            rows = _as_target(parquet.read(), target)
        found.append(keys.filter(held))
        kept.append(rows.filter(pc.invert(pc.is_in(rows.column(key), value_set=batch_keys))))
        touched.append(file)
    is_upsert = pc.equal(records.column(operation_column), "u")
    upserts = records.filter(is_upsert).drop_columns([operation_column])
    rows_copied = sum(part.num_rows for part in kept)
    if not touched and upserts.num_rows == 0:
        return Rewrite(len(candidates), 0, 0, 0)
    held_keys = pa.chunked_array([chunk for keys in found for chunk in keys.chunks], type=batch_keys.type)
    updated = pc.sum(pc.is_in(upserts.column(key), value_set=held_keys)).as_py() or 0
    written = pa.concat_tables([*kept, upserts.cast(target)]).sort_by([(key, "ascending")])
    adds = _write_files(table, storage, root, written, storage_options) if written.num_rows else []
    now = int(time.time() * 1000)
    actions: list[Any] = [
        AddAction(f"{SCRATCH_FOLDER}/{add['path']}", int(add["size"]), {}, int(add["modificationTime"]), True,
                  add.get("stats") or "")
        for add in adds
    ]
    actions += [RemoveAction(file.path, True, now, file.size, {}) for file in touched]
    # Spark's names for a MERGE's metrics (strings, as Spark writes them; `delta_log.commit_metrics` reads them).
    metrics = {
        "numTargetFilesAdded": len(adds), "numTargetFilesRemoved": len(touched), "numTargetRowsCopied": rows_copied,
        "numTargetRowsUpdated": updated, "numTargetRowsInserted": upserts.num_rows - updated,
        "numTargetRowsDeleted": held_keys.length() - updated, "numOutputRows": written.num_rows,
        "numTargetFilesScanned": len(candidates), "numTargetFilesSkippedDuringScan": len(files) - len(candidates),
    }
    _commit(table, actions, metrics, custom_metadata=custom_metadata, transactions=transactions, hooks=hooks)
    return Rewrite(len(candidates), len(touched), rows_copied, len(adds))


#: A file under this share of the table's target size is small: the compacting append gathers such files.
SMALL_FILE_SHARE = 4
#: The compacting append runs once this many small files lie next to each other at the top of the key order.
COMPACT_MIN_FILES = 4


def compacting_append(
    table: DeltaTable,
    schema: TableSchema,
    rows: pa.Table,
    *,
    storage_options: dict[str, str] | None,
    custom_metadata: dict[str, str],
    transactions: list[Transaction],
    hooks: PostCommitHookProperties,
) -> Rewrite | None:
    """Append a batch of only new keys (`rows`) and, in the same commit, merge the small files at the top of the
    table's key order (the earlier appends' files) into files of the target size; None, having done nothing,
    when fewer than `COMPACT_MIN_FILES` small files lie there (the caller appends as before).

    The merged files' removes and adds say `dataChange: false` (a rearrangement: a streaming reader sees no
    change), the batch's rows are added with `dataChange: true` in files of their own; the commit carries the
    batch's SetTransaction and metadata, so binlake's log reads and the append path's `applied_through` see the
    batch's commit as before. Its cost is bounded: at most the target size of small files is read.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake.fs import DeltaStorageHandler
    from deltalake.transaction import AddAction, RemoveAction

    key = schema.primary_key[0]
    run = small_files_at_top(table, key)
    if len(run) < COMPACT_MIN_FILES:
        return None
    root = table.table_uri.rstrip("/")
    storage = DeltaStorageHandler(root, storage_options)
    filesystem = pa.fs.PyFileSystem(storage)
    merged = pa.concat_tables([
        _as_target(pq.read_table(unquote(file.path), filesystem=filesystem, coerce_int96_timestamp_unit="us"),
                   rows.schema)
        for file in run
    ]).sort_by([(key, "ascending")])
    now = int(time.time() * 1000)
    actions: list[Any] = []
    for part, data_change in ((merged, False), (rows.sort_by([(key, "ascending")]), True)):
        actions += [
            AddAction(f"{SCRATCH_FOLDER}/{add['path']}", int(add["size"]), {}, int(add["modificationTime"]),
                      data_change, add.get("stats") or "")
            for add in _write_files(table, storage, root, part, storage_options)
        ]
    actions += [RemoveAction(file.path, False, now, file.size, {}) for file in run]
    metrics = {"numOutputRows": rows.num_rows, "numCompactedFiles": len(run), "numCompactedRows": merged.num_rows,
               "numFiles": len(actions) - len(run)}
    _commit(table, actions, metrics, custom_metadata=custom_metadata, transactions=transactions, hooks=hooks)
    return Rewrite(len(run), len(run), merged.num_rows, len(actions) - len(run))


def _commit(table: DeltaTable, actions: list[Any], metrics: dict[str, int], *, custom_metadata: dict[str, str],
            transactions: list[Transaction], hooks: PostCommitHookProperties) -> None:
    """One commit of `actions` with the batch's SetTransaction, binlake's metadata and the `metrics` (strings, as
    Spark writes them; `delta_log.commit_metrics` reads them)."""
    from deltalake import CommitProperties

    # No retry on a newer version: delta-rs checks a write transaction's removes against no concurrent commit
    # (two commits removing one file both land, measured on 1.6.6), so a commit rebased over a compaction that
    # removed a file read here would bring that file's rows back. Failing instead lets the caller's conflict
    # retry (`pipeline/table_failures.write_with_retries`) run the whole rewrite again on a fresh snapshot.
    commit = CommitProperties(
        custom_metadata={**custom_metadata, "operationMetrics": {name: str(value) for name, value in metrics.items()}},
        app_transactions=transactions, max_commit_retries=0,
    )
    table.create_write_transaction(actions, "append", table.schema(), commit_properties=commit,
                                   post_commithook_properties=hooks)
    # A write transaction does not move the object's state to its commit (MERGE and write do): the caller reads
    # the new version from it.
    table.update_incremental()


def compact_runs(
    table: DeltaTable,
    key: str,
    runs: list[list[FileKeys]],
    *,
    storage_options: dict[str, str] | None,
    scratch: str,
    target_bytes: int,
    custom_metadata: dict[str, str],
    before_commit: Callable[[], None] = lambda: None,
) -> Rewrite:
    """Each run of files (next to each other in `key` order) merged into files of `target_bytes`, sorted by key,
    in one commit that changes no data (`dataChange: false` on every remove and add): table maintenance.

    Written under its own scratch table `scratch` (never the batches' `SCRATCH_FOLDER`, which a batch running at
    the same time writes and removes). The commit is not retried on a newer version: a batch that committed
    meanwhile may have rewritten one of the runs' files, so the caller plans again on a fresh snapshot.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import CommitProperties, PostCommitHookProperties
    from deltalake.fs import DeltaStorageHandler
    from deltalake.transaction import AddAction, RemoveAction

    root = table.table_uri.rstrip("/")
    storage = DeltaStorageHandler(root, storage_options)
    filesystem = pa.fs.PyFileSystem(storage)
    arrow = pa.schema(table.schema().to_arrow())
    target = pa.schema([pa.field(field.name, _plain(field.type), field.nullable) for field in arrow])
    now = int(time.time() * 1000)
    actions: list[Any] = []
    rows = added = removed = 0
    for run in runs:
        merged = pa.concat_tables([
            _as_target(pq.read_table(unquote(file.path), filesystem=filesystem, coerce_int96_timestamp_unit="us"),
                       target)
            for file in run
        ]).sort_by([(key, "ascending")])
        adds = _write_files(table, storage, root, merged, storage_options, scratch=scratch, size=target_bytes)
        actions += [AddAction(f"{scratch}/{add['path']}", int(add["size"]), {}, int(add["modificationTime"]), False,
                              add.get("stats") or "") for add in adds]
        actions += [RemoveAction(file.path, False, now, file.size, {}) for file in run]
        rows += merged.num_rows
        added += len(adds)
        removed += len(run)
    metrics = {"numRemovedFiles": removed, "numAddedFiles": added, "numCompactedRows": rows}
    before_commit()
    commit = CommitProperties(
        custom_metadata={**custom_metadata, "operationMetrics": {name: str(value) for name, value in metrics.items()}},
        max_commit_retries=0,
    )
    # No log cleanup after it: delta-rs would remove log files a change-feed consumer may still read.
    hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    table.create_write_transaction(actions, "append", table.schema(), commit_properties=commit,
                                   post_commithook_properties=hooks)
    table.update_incremental()
    return Rewrite(removed, removed, rows, added)


def _plain(kind: Any) -> Any:
    """An Arrow type as Parquet files of the table hold it (delta-rs's schema says `string_view`, files say either)."""
    import pyarrow as pa

    if kind == pa.string_view():
        return pa.string()
    if kind == pa.binary_view():
        return pa.binary()
    return kind


def small_files_at_top(table: DeltaTable, key: str) -> list[FileKeys]:
    """The small files that come last in the order of `key`, next to each other, up to the table's target size in
    all: an insert-only table's recent appends, which the next append merges once there are
    `COMPACT_MIN_FILES`."""
    return _top_small_files(file_keys(table, key), _target_bytes(table))


def _top_small_files(files: list[FileKeys], target_bytes: int) -> list[FileKeys]:
    """`small_files_at_top` of `files`. A file without key statistics ends the run (its place is unknown)."""
    ordered = sorted((file for file in files if file.low is not None and file.high is not None),
                     key=lambda file: (file.low, file.high))
    if len(ordered) < len(files):
        return []
    run: list[FileKeys] = []
    total = 0
    for file in reversed(ordered):
        if file.size * SMALL_FILE_SHARE >= target_bytes or total + file.size > target_bytes:
            break
        if run and file.high >= run[-1].low:
            break  # overlaps the run: not next to it in key order
        run.append(file)
        total += file.size
    return run


def _target_bytes(table: DeltaTable) -> int:
    return file_layout.target_file_bytes(table.metadata().configuration)


def _may_hold(file: FileKeys, sorted_keys: list[Any]) -> bool:
    """Whether a key of `sorted_keys` lies within the file's min/max (a file without statistics: always)."""
    if file.low is None or file.high is None:
        return True
    index = bisect.bisect_left(sorted_keys, file.low)
    return index < len(sorted_keys) and sorted_keys[index] <= file.high


def _target_schema(records: pa.Table, operation_column: str) -> pa.Schema:
    return records.schema.remove(records.schema.get_field_index(operation_column))


def _as_target(rows: pa.Table, target: pa.Schema) -> pa.Table:
    """A data file's rows in the table's Arrow types, as a reader of the table sees them: the embedded Arrow types
    of delta-rs's own files (`string_view`) and Spark's INT96 timestamps cast exactly, and a column the file
    predates (added to the table later) all NULL."""
    import pyarrow as pa

    columns = [rows.column(field.name).cast(field.type) if field.name in rows.column_names
               else pa.nulls(rows.num_rows, field.type) for field in target]
    return pa.Table.from_arrays(columns, schema=target)


def _write_files(
    table: DeltaTable, storage: Any, root: str, rows: pa.Table, storage_options: dict[str, str] | None,
    *, scratch: str = SCRATCH_FOLDER, size: int | None = None,
) -> list[dict[str, Any]]:
    """`rows` (sorted by key) written by delta-rs as files of the table's target size (or `size`) in the scratch
    table `scratch` under the table's folder; their add actions (path relative to `scratch`, size, statistics)."""
    from deltalake import write_deltalake
    from pyarrow.fs import FileSelector

    properties = table.metadata().configuration
    size = size or _target_bytes(table)
    # The statistics the table's own writes collect (which columns), so the added files carry the same.
    statistics = {name: value for name, value in properties.items()
                  if name.startswith("delta.dataSkipping") and value is not None}
    from pyarrow.fs import FileType

    scratch_log = f"{scratch}/_delta_log"
    scratch_uri = f"{root}/{scratch}"
    # The scratch table's log is removed after every batch; one left by a run that failed in between is removed
    # first (its files, never committed to the table, are for VACUUM), so this write creates the scratch table
    # anew with this batch's schema. The adds are read from the version the write made all the same.
    if storage.get_file_info([scratch_log])[0].type != FileType.NotFound:
        storage.delete_dir(scratch_log)
    write_deltalake(scratch_uri, rows, mode="append", target_file_size=size, configuration=statistics or None,
                    storage_options=storage_options)
    # The newest commit of the scratch log by one listing, not a `DeltaTable` load of it (~1 ms a table).
    listed = storage.get_file_info_selector(FileSelector(scratch_log))
    version = max(int(entry.path.rsplit("/", 1)[-1].removesuffix(".json"))
                  for entry in listed if entry.path.endswith(".json"))
    with storage.open_input_stream(f"{scratch_log}/{version:020d}.json") as stream:
        text = stream.read().decode()
    storage.delete_dir(scratch_log)
    adds = []
    for line in text.split("\n"):  # not splitlines(): U+0085 and U+2028 occur raw in column statistics
        if line.strip():
            action = json.loads(line)
            if "add" in action:
                adds.append(action["add"])
    return adds


__all__ = [
    "SCRATCH_FOLDER", "Rewrite", "applies", "compact_runs", "compacting_append", "rewrite_batch", "small_files_at_top",
]
