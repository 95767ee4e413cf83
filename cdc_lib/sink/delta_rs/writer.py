"""Writing a mirror table's change batch with delta-rs (`deltalake`), without Spark or a JVM.

A Spark MERGE costs five Spark jobs and a commit whatever the batch's size (~0.36 s per changed table), and a
scheduled run that has changes must start a JVM first. delta-rs MERGEs the same staged records (the row's
columns and `_binlake_op`, built from the fold by `arrow_fold`) in tens of milliseconds, in process.

The commit is binlake's as Spark writes it: the same SetTransaction (app id, version = batch sequence) and the
same `userMetadata` (`kind`, `path`, `applied_through`, `app_id`, …, plus `writer`), so `delta_log.read_log_tail`
and every caller see no difference. delta-rs does not skip a commit whose SetTransaction version is not newer
(Spark does): the caller's log-tail check does that, and `write_batch` checks again on the very snapshot it
merges into. Under binlake's lease binlake is the table's only writer.

Which files a batch rewrites: a one-column integer key's mixed batch replaces only the files its keys are in, sorted
by key (`key_rewrite`); other batches MERGE, pruned by the keys' ranges (docs/performance.md "Files a MERGE
rewrites").

Which tables (`batch.writer`, `cdc_lib.sink.choice.writer_for`): a mirror table whose Delta protocol delta-rs writes
exactly and whose batch did not spill. Everything else stays on Spark (docs/performance.md "A writer without Spark").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_lib.changes.events import TableChanges
from cdc_lib.changes.spill import arrow_type
from cdc_lib.common.s3 import S3Settings, is_s3_uri
from cdc_lib.errors import DeltaStateError, SinkError
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import spark_type_ddl
from cdc_lib.sink import delta_log, key_absence
from cdc_lib.sink.commits import OPERATION_COLUMN, BatchCommit, user_metadata
from cdc_lib.sink.delta_rs import file_layout, key_rewrite
from cdc_lib.sink.key_bounds import KeyBounds
from cdc_lib.sink.loaded_tables import LOADED_TABLES, KnownLog
from cdc_lib.sink.storage import S3SinkStorage, SinkStorage

if TYPE_CHECKING:
    import pyarrow as pa

#: Spark writes a checkpoint every this many commits unless the table sets `delta.checkpointInterval`.
SPARK_CHECKPOINT_INTERVAL = 10
#: A batch that only deletes at most this many integer keys is a DELETE (`DeltaTable.delete`, no join) instead
#: of a MERGE; more keys make the predicate's IN list longer than the join costs.
DELETE_KEYS_LIMIT = 1000


def quote(name: str) -> str:
    """A column name as a DataFusion SQL identifier (any MySQL name: spaces, case, quotes, unicode)."""
    return '"' + name.replace('"', '""') + '"'


def arrow_schema(schema: TableSchema) -> pa.Schema:
    """The staged records' Arrow schema: the Delta table's column types exactly, then the operation."""
    import pyarrow as pa

    fields = [pa.field(column.name, arrow_type(spark_type_ddl(column))) for column in schema.columns]
    return pa.schema([*fields, pa.field(OPERATION_COLUMN, pa.string(), nullable=False)])


def arrow_records(schema: TableSchema, records: list[tuple[Any, ...]]) -> pa.Table:
    """Staged records (row columns, then the operation) as an Arrow table of `arrow_schema`: the row-wise form
    of `arrow_fold`, which the writer uses; kept as the reference the staging tests compare `arrow_fold` with."""
    import pyarrow as pa

    target = arrow_schema(schema)
    columns = list(zip(*records, strict=True)) if records else [() for _ in target.names]
    return pa.Table.from_arrays(
        [pa.array(values, type=field.type) for values, field in zip(columns, target, strict=True)], schema=target
    )


def arrow_fold(schema: TableSchema, upserts: list[tuple[Any, ...]], deleted_keys: list[tuple[Any, ...]]) -> pa.Table:
    """A mirror fold staged as `arrow_records` stages it (upserts, then deletes as their key in an otherwise
    empty row), built from the fold's row tuples by Arrow's own converter: one struct array of the rows, split
    into its columns (no record tuple per row, no transposition in Python: ~20 % less time per row than a
    column at a time, docs/performance.md)."""
    import pyarrow as pa

    target = arrow_schema(schema)
    width = len(schema.columns)
    row_fields = list(target)[:width]
    columns = pa.array(upserts, type=pa.struct(row_fields)).flatten() if upserts else [
        pa.array([], type=field.type) for field in row_fields]
    if deleted_keys:
        key_type = pa.struct([row_fields[schema.column_names.index(key)] for key in schema.primary_key])
        keys = dict(zip(schema.primary_key, pa.array(deleted_keys, type=key_type).flatten(), strict=True))
        columns = [
            pa.concat_arrays([column, keys[field.name] if field.name in keys
                              else pa.nulls(len(deleted_keys), field.type)])
            for column, field in zip(columns, row_fields, strict=True)
        ]
    operations = pa.array(["u"] * len(upserts) + ["d"] * len(deleted_keys), type=target.field(width).type)
    return pa.Table.from_arrays([*columns, operations], schema=target)


def storage_options(path: str, storage: SinkStorage) -> dict[str, str] | None:
    """delta-rs's object-store options for the sink: the S3 settings binlake and Spark use.

    `AWS_S3_ALLOW_UNSAFE_RENAME`: S3 has no atomic put-if-absent rename for delta-rs without a locking
    provider. binlake's lease makes it the table's single writer, which is the same premise Spark's default S3
    log store relies on (docs/s3.md).
    """
    if not is_s3_uri(path):
        return None
    settings = storage.settings if isinstance(storage, S3SinkStorage) else S3Settings()
    options = {"AWS_S3_ALLOW_UNSAFE_RENAME": "true", "AWS_REGION": settings.resolved_region()}
    if settings.endpoint_url is not None:
        options["AWS_ENDPOINT_URL"] = settings.endpoint_url
        if settings.endpoint_url.startswith("http://"):
            options["AWS_ALLOW_HTTP"] = "true"
    options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false" if settings.path_style else "true"
    options.update(settings.delta_rs_timeouts())  # a silent store ends the call (source.network_timeout_seconds)
    if settings.credentials is not None:
        options["AWS_ACCESS_KEY_ID"] = settings.credentials.access_key_id
        options["AWS_SECRET_ACCESS_KEY"] = settings.credentials.secret_access_key
        if settings.credentials.session_token:
            options["AWS_SESSION_TOKEN"] = settings.credentials.session_token
    return options


def table_uri(path: str) -> str:
    """The table's location as delta-rs names it (`s3://`, not Hadoop's `s3a://`)."""
    for scheme in ("s3a://", "s3n://"):
        if path.startswith(scheme):
            return "s3://" + path.removeprefix(scheme)
    return path


@dataclass(frozen=True, kw_only=True)
class BatchWrite:
    """One table's staged batch and how it goes in (see `cdc_lib.sink.merge.merge_changes`)."""

    records: pa.Table
    #: Only new keys: appended without a join.
    append: bool
    #: The smallest and largest leading key the table may hold among the batch's keys (integer keys).
    key_range: tuple[Any, Any] | None
    truncated: bool


def write_changes(
    schema: TableSchema, changes: TableChanges, live: key_absence.LiveKeys | None, commit: BatchCommit,
    tail: delta_log.LogTail,
) -> int:
    """The Spark path's plan (append when only keys proven new, else MERGE pruned to the keys' range) on delta-rs.

    A spilled batch never comes here (`choice.writer_for`): it is staged in one Arrow table. `tail`, the
    log read that just checked for a replay, lets the writer use a `DeltaTable` kept from an earlier batch when
    the log agrees with it (`loaded_tables.LoadedTables`).
    """
    rows = changes.rows
    if live is not None:
        _, rest = live.split(changes)
        rows = rest.rows
    bounds = KeyBounds(schema)
    bounds.add(rows)
    batch = BatchWrite(
        records=arrow_fold(schema, changes.upserts(), changes.deleted_keys()),
        append=live is not None and not rows, key_range=None if changes.truncated else bounds.range(),
        truncated=changes.truncated,
    )
    kind = {"kind": "merge", "path": "append"} if batch.append else {"kind": "merge"}
    known = KnownLog(latest_version=tail.latest_version, checkpoint_version=tail.checkpoint_version)
    return write_batch(commit.path, schema, batch, application=commit.application, txn_version=commit.txn_version,
                       metadata={**commit.metadata, **kind}, storage=commit.storage, known_log=known)


def write_batch(
    path: str,
    schema: TableSchema,
    batch: BatchWrite,
    *,
    application: str,
    txn_version: int,
    metadata: dict[str, Any],
    storage: SinkStorage,
    known_log: KnownLog | None = None,
) -> int:
    """Write the batch in one delta-rs commit carrying binlake's SetTransaction and metadata; its version.

    A replay of a committed `txn_version` writes nothing and returns the committed version. `known_log`: the
    caller's read of the log just before (lets a `DeltaTable` kept from an earlier batch be used,
    `loaded_tables.LoadedTables`).

    Raises:
        SinkError: (retryable) delta-rs could not read or write the sink's files (its object-store errors are
            OSError): the run fails before any offset moves and the next run retries, as a Spark write's
            unreachable sink does; it is not the table's fault.
    """
    with _reported_as_sink_error(path):
        from deltalake import CommitProperties, PostCommitHookProperties, Transaction, write_deltalake

        options = storage_options(path, storage)
        uri = table_uri(path)
        table = LOADED_TABLES.take(uri, options, known_log)
        # The exactly-once check on the very snapshot the commit goes onto (delta-rs does not skip a replay itself).
        committed = table.transaction_version(application)
        if committed is not None and committed >= txn_version:
            LOADED_TABLES.keep(uri, options, table)
            return delta_log.version_of(path, application, txn_version, storage)
        loaded = table.version()
        custom_metadata = {"userMetadata": user_metadata({**metadata, "writer": "delta-rs"}, application)}
        transactions = [Transaction(app_id=application, version=txn_version)]
        commit = CommitProperties(custom_metadata=custom_metadata, app_transactions=transactions)
        # Checkpoints at Spark's cadence (below), never log cleanup: delta-rs would delete by its own rules; Spark's
        # next checkpoint removes expired log files as it always does.
        hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
        if batch.append:
            rows = batch.records.filter(_is_upsert(batch.records)).drop_columns([OPERATION_COLUMN])
            # The earlier appends' small files are merged in the same commit once enough lie at the top of the keys.
            compacted = KEY_REWRITE and key_rewrite.applies(schema, batch.truncated) and rows.num_rows > 0 and \
                key_rewrite.compacting_append(table, schema, rows, storage_options=options,
                                              custom_metadata=custom_metadata, transactions=transactions,
                                              hooks=hooks) is not None
            if not compacted:
                write_deltalake(table, rows, mode="append", commit_properties=commit, post_commithook_properties=hooks)
        else:
            deleted_keys = _delete_predicate(schema, batch)
            if deleted_keys is not None:
                table.delete(deleted_keys, commit_properties=commit, post_commithook_properties=hooks)
            elif not _rewritten_by_key(table, schema, batch, options, custom_metadata, transactions, hooks):
                _merge(table, schema, batch, commit, hooks)
            if table.version() == loaded:
                # delta-rs commits nothing when a MERGE or DELETE changes no row (a batch that deletes only keys the
                # table does not hold, e.g. rows deleted before the snapshot read them). The batch must still leave its
                # SetTransaction, as Spark's MERGE does: an empty append carries it.
                write_deltalake(table, batch.records.drop_columns([OPERATION_COLUMN]).slice(0, 0), mode="append",
                                commit_properties=commit, post_commithook_properties=hooks)
        # delta-rs moves the table's state to the commit it just made (MERGE, DELETE and write all do): its version is
        # the commit's, without listing and reading the log again (~2 ms a table, docs/performance.md).
        version = table.version()
        if version <= loaded:
            raise DeltaStateError(
                f"delta-rs reported no new commit in {path} for batch {txn_version} (version {version})",
                remedy="retry the run; if it repeats, write the table with Spark (batch.writer: spark) and report it",
                table=metadata.get("table"),
            )
        interval = int(table.metadata().configuration.get("delta.checkpointInterval") or SPARK_CHECKPOINT_INTERVAL)
        if version % interval == 0:
            table.create_checkpoint()
        # Kept only after a write that went through: a failed one may leave the object's state anywhere.
        LOADED_TABLES.keep(uri, options, table)
        return version


@contextmanager
def _reported_as_sink_error(path: str) -> Iterator[None]:
    """delta-rs's object-store errors (OSError) as a retryable SinkError (see `write_batch`)."""
    try:
        yield
    except OSError as exc:
        raise SinkError(
            f"delta-rs could not read or write {path} ({type(exc).__name__}: {str(exc)[:300]})",
            remedy="check that the sink is reachable with the configured endpoint and credentials; the next run "
            "retries the batch",
            retryable=True,
        ) from exc


def _rewritten_by_key(table: Any, schema: TableSchema, batch: BatchWrite, options: dict[str, str] | None,
                      custom_metadata: dict[str, str], transactions: list[Any], hooks: Any) -> bool:
    """Whether `key_rewrite` wrote the batch (a one-column integer key, no TRUNCATE, candidate files it may hold
    in memory); else the caller MERGEs (docs/performance.md "Files a MERGE rewrites")."""
    if not KEY_REWRITE or not key_rewrite.applies(schema, batch.truncated):
        return False
    done = key_rewrite.rewrite_batch(table, schema, batch.records, operation_column=OPERATION_COLUMN,
                                     storage_options=options, custom_metadata=custom_metadata,
                                     transactions=transactions, hooks=hooks)
    return done is not None


def _is_upsert(records: pa.Table) -> Any:
    import pyarrow.compute as pc

    return pc.equal(records.column(OPERATION_COLUMN), "u")


def _delete_predicate(schema: TableSchema, batch: BatchWrite) -> str | None:
    """`<key> IN (…) AND <key> BETWEEN …` for a batch that only deletes a few integer keys (no TRUNCATE); else None.

    Such a batch is a DELETE, which deletes exactly the rows the MERGE's `WHEN MATCHED … DELETE` would, without
    joining a source: ~7 ms a table instead of ~14 (docs/performance.md).
    """
    import pyarrow.compute as pc

    records = batch.records
    if (batch.truncated or batch.key_range is None or len(schema.primary_key) != 1 or records.num_rows == 0
            or records.num_rows > DELETE_KEYS_LIMIT or pc.any(_is_upsert(records)).as_py()):
        return None
    lead = schema.primary_key[0]
    column = next(column for column in schema.columns if column.name == lead)
    ddl = spark_type_ddl(column)
    if ddl not in ("tinyint", "smallint", "int", "bigint"):
        return None  # e.g. a DECIMAL(20,0) key: its literals need a cast; the MERGE handles it
    keys = ", ".join(str(int(value)) for value in records.column(lead).to_pylist())
    return f"{quote(lead)} IN ({keys}) AND {file_layout.ranges_predicate(quote(lead), ddl, [batch.key_range])}"


def _merge(table: Any, schema: TableSchema, batch: BatchWrite, commit: Any, hooks: Any) -> None:
    import pyarrow.compute as pc

    condition = " AND ".join(f"t.{quote(key)} = s.{quote(key)}" for key in schema.primary_key)
    if batch.key_range is not None and not batch.truncated:
        condition += f" AND {_ranges_predicate(schema, batch)}"
    columns = {quote(name): f"s.{quote(name)}" for name in schema.column_names}
    merger = table.merge(batch.records, condition, source_alias="s", target_alias="t", commit_properties=commit,
                         post_commithook_properties=hooks)
    if pc.all(_is_upsert(batch.records)).as_py() is not False:
        # No delete in the batch (the usual shape: inserts and updates): the plain clauses, without the operation
        # tests (a little less for DataFusion to plan and evaluate per row).
        merger = merger.when_matched_update(columns).when_not_matched_insert(columns)
    else:
        merger = (
            merger.when_matched_delete(f"s.{OPERATION_COLUMN} = 'd'")
            .when_matched_update(columns)
            .when_not_matched_insert(columns, predicate=f"s.{OPERATION_COLUMN} = 'u'")
        )
    if batch.truncated:
        merger = merger.when_not_matched_by_source_delete()
    merger.execute()


#: Write a mixed batch of a one-column integer key by rewriting only the files its keys are in, sorted by key
#: (`key_rewrite`), instead of delta-rs's MERGE (False: the MERGE, for the bench's comparison).
KEY_REWRITE = True
#: The most ranges `_ranges_predicate` names (`file_layout.MAX_KEY_RANGES`; 1 is the single BETWEEN of before).
KEY_RANGES_LIMIT = file_layout.MAX_KEY_RANGES


def _ranges_predicate(schema: TableSchema, batch: BatchWrite) -> str:
    """The target's leading key in a few ranges that hold every key of the batch the table may hold.

    `batch.key_range` bounds those keys (the batch's keys that are not provably new, `write_changes`);
    the batch's leading key values inside it, cut at their largest gaps (`file_layout.key_ranges`), cover every
    one of them, so a file the predicate lets delta-rs skip holds none of the batch's keys. A source row whose key
    lies outside every range (a new key above the bound) joins nothing, as with the single range: it is inserted.
    """
    assert batch.key_range is not None
    lead = schema.primary_key[0]
    column = next(column for column in schema.columns if column.name == lead)
    low, high = batch.key_range
    values = [value for value in batch.records.column(lead).to_pylist() if low <= value <= high]
    ranges = file_layout.key_ranges(values, KEY_RANGES_LIMIT) or [(low, high)]
    return file_layout.ranges_predicate(f"t.{quote(lead)}", spark_type_ddl(column), ranges)


__all__ = [
    "LOADED_TABLES", "BatchWrite", "KnownLog", "arrow_records", "arrow_schema", "quote", "storage_options", "table_uri",
    "write_batch", "write_changes",
]
