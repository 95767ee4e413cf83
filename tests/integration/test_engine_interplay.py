"""Two Delta writers on one table: delta-spark and delta-rs (`deltalake` 1.6.6) taking turns.

A mirror table is created by a Spark snapshot and then written batch after batch by either engine
(`batch.writer`). binlake reads the Delta log itself (cdc_lib/sink/delta_log.py) to reconcile offsets, so each
engine's commits and checkpoints must read back the same: the newest binlake commit and its SetTransaction,
the table's settings, the commit's row counts. And each engine must read the other's rows, and respect the
other's SetTransactions where Delta promises it.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, Transaction, write_deltalake

from cdc_lib.config.model import SparkConfig
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink import delta_log
from cdc_lib.sink.choice import delta_rs_write_blocker
from cdc_lib.sink.commits import OPERATION_COLUMN
from cdc_lib.sink.spark import writer as spark_writer
from cdc_lib.sink.spark.commit import IdempotentCommit
from cdc_lib.sink.spark.session import spark_session
from cdc_lib.sink.storage import storage_for
from tests.conftest import sql
from tests.integration.type_rows import COLUMNS, ROWS

OP = OPERATION_COLUMN


# -- the two writers, as binlake's batches use them ------------------------------------------------


def _metadata(application: str, txn_version: int, writer: str) -> dict[str, Any]:
    return {"kind": "merge", "batch_seq": txn_version, "writer": writer}


def rs_merge(path: str, source: pa.Table, *, application: str, txn_version: int, key: str = "id",
             checkpoint_hook: bool = False) -> None:
    """One delta-rs MERGE of staged upserts (`u`) and deletes (`d`), with binlake's SetTransaction and metadata."""
    columns = {name: f"s.{name}" for name in source.column_names if name != OP}
    (
        DeltaTable(path).merge(
            source, f"t.{key} = s.{key}", source_alias="s", target_alias="t",
            commit_properties=_commit_properties(application, txn_version),
            post_commithook_properties=PostCommitHookProperties(create_checkpoint=checkpoint_hook,
                                                                cleanup_expired_logs=False),
        )
        .when_matched_delete(predicate=f"s.{OP} = 'd'")
        .when_matched_update(updates=columns)
        .when_not_matched_insert(updates=columns, predicate=f"s.{OP} = 'u'")
        .execute()
    )


def rs_append(path: str, rows: pa.Table, *, application: str, txn_version: int) -> None:
    write_deltalake(path, rows.drop_columns([OP]), mode="append",
                    commit_properties=_commit_properties(application, txn_version),
                    post_commithook_properties=PostCommitHookProperties(create_checkpoint=False,
                                                                        cleanup_expired_logs=False))


def _commit_properties(application: str, txn_version: int) -> CommitProperties:
    metadata = {**_metadata(application, txn_version, "delta-rs"), "app_id": application}
    return CommitProperties(custom_metadata={"userMetadata": json.dumps(metadata, sort_keys=True)},
                            app_transactions=[Transaction(application, txn_version)])


def spark_merge(spark: Any, path: str, staged: str, *, application: str, txn_version: int, key: str = "id") -> None:
    """One Spark MERGE of the same staged Parquet, as spark_writer commits it (session txnAppId/txnVersion)."""
    from delta.tables import DeltaTable as SparkTable
    from pyspark.sql import Column
    from pyspark.sql.types import StringType, StructField, StructType

    target = spark.read.format("delta").load(path).schema
    source = spark.read.schema(StructType([*target.fields, StructField(OP, StringType())])).parquet(staged)
    columns: dict[str, str | Column] = {f"`{name}`": f"s.`{name}`" for name in target.fieldNames()}
    builder = (
        SparkTable.forPath(spark, path).alias("t").merge(source.alias("s"), f"t.`{key}` = s.`{key}`")
        .whenMatchedDelete(condition=f"s.{OP} = 'd'")
        .whenMatchedUpdate(set=columns)
        .whenNotMatchedInsert(condition=f"s.{OP} = 'u'", values=columns)
    )
    with IdempotentCommit(spark, application, txn_version,
                          _metadata(application, txn_version, "spark")):
        builder.execute()


# -- reading rows back with both engines -----------------------------------------------------------


def _plain(value: Any) -> Any:
    """One comparable form for what Spark and deltalake hand back (UTC instants, bytes)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


def rs_rows(path: str, key: str = "id") -> dict[Any, dict[str, Any]]:
    table = pa.RecordBatchReader.from_stream(DeltaTable(path).scan()).read_all()
    return {row[key]: {name: _plain(value) for name, value in row.items()} for row in table.to_pylist()}


def spark_rows(spark: Any, path: str, key: str = "id") -> dict[Any, dict[str, Any]]:
    rows = spark.read.format("delta").load(path).collect()
    return {row[key]: {name: _plain(value) for name, value in row.asDict().items()} for row in rows}


def arrow_schema(path: str) -> pa.Schema:
    return pa.RecordBatchReader.from_stream(DeltaTable(path).scan()).schema


# -- one table of every binlake type, written by both engines in turn ----------------------------


class Turns:
    """A mirror table and the rows it must hold; each turn stages changes once and lets one engine commit them."""

    def __init__(self, spark: Any, path: str, application: str, staging: Path, txn_version: int) -> None:
        self.spark, self.path, self.application, self.staging = spark, path, application, staging
        self.txn_version = txn_version
        self.schema = arrow_schema(path).append(pa.field(OP, pa.string()))
        self.model = rs_rows(path)
        self.next_id = 100
        self.staged = ""

    def stage(self, *, inserts: int, updates: list[int], deletes: list[int]) -> pa.Table:
        template = self.model[1]
        records = []
        for number in range(inserts):
            self.next_id += 3
            row = {**template, "id": self.next_id, "vc": f"turn {self.txn_version + 1} · {number} 😀",
                   "dec_small": Decimal(f"-{self.next_id}.25"), "dt6": dt.datetime(1999, 12, 31, 23, 59, 59, number)}
            records.append({**row, OP: "u"})
        for key in updates:
            changed = {"i": -(self.txn_version * 1000 + key), "tx": f"updated {key} ✓"}
            records.append({**self.model[key], **changed, OP: "u"})
        for key in deletes:
            records.append({"id": key, OP: "d"})
        source = pa.Table.from_pylist([{name: record.get(name) for name in self.schema.names} for record in records],
                                      schema=self.schema)
        self.staged = str(self.staging / f"turn-{self.txn_version + 1}.parquet")
        pq.write_table(source, self.staged)
        return source

    def commit(self, engine: str, source: pa.Table, *, append: bool = False, checkpoint_hook: bool = False) -> int:
        self.txn_version += 1
        if engine == "spark":
            spark_merge(self.spark, self.path, self.staged, application=self.application, txn_version=self.txn_version)
        elif append:
            rs_append(self.path, source, application=self.application, txn_version=self.txn_version)
        else:
            rs_merge(self.path, source, application=self.application, txn_version=self.txn_version,
                     checkpoint_hook=checkpoint_hook)
        for record in source.to_pylist():
            key = record.pop("id")
            op = record.pop(OP)
            if op == "d":
                self.model.pop(key, None)
            else:
                self.model[key] = {"id": key, **{name: _plain(value) for name, value in record.items()}}
        return delta_log.newest_version(self.path) or 0


def test_spark_and_delta_rs_take_turns_on_a_table_of_every_type(mariadb, database, make_config,
                                                                 tmp_path: Path) -> None:
    sql(mariadb, f"CREATE TABLE {database}.every_type ({COLUMNS})",
        f"INSERT INTO {database}.every_type VALUES {', '.join(ROWS)}")
    name = f"{database}.every_type"
    config = make_config([name])
    pipeline = Pipeline(config)
    pipeline.snapshot()
    path, application = pipeline.table_path(name), pipeline.application(name)
    storage = storage_for(path)
    spark = spark_session(config.spark)
    snapshot = delta_log.read_log_tail(path, application=application)
    # The snapshot commits under its own app id; the batches' SetTransactions start after it.
    assert snapshot is not None and snapshot.last_binlake_commit is None and snapshot.latest_version == 0
    # Every 5 commits: Spark checkpoints at the versions divisible by 5 it commits, delta-rs's post-commit hook
    # one version earlier (when version + 1 is: 4, 9 …).
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.checkpointInterval' = '5')")
    turns = Turns(spark, path, application, tmp_path, 0)
    assert rs_rows(path) == spark_rows(spark, path) == turns.model and len(turns.model) == 4

    # (engine, append, inserts, updates, deletes, delta-rs post-commit checkpoint, explicit delta-rs checkpoint)
    plan = [
        ("delta-rs", False, 2, [1], [], False, False),      # v2
        ("spark", False, 1, [103], [6], False, False),      # v3: updates a row delta-rs inserted
        ("delta-rs", False, 0, [2, 109], [3], True, False),  # v4: the hook writes delta-rs's checkpoint 4
        ("delta-rs", True, 2, [], [], False, False),        # v5: an append (insert-only batch)
        ("spark", False, 1, [112], [], False, False),       # v6
        ("delta-rs", False, 1, [1], [106], False, True),    # v7, then create_checkpoint() at 7
        ("spark", False, 0, [115], [103], False, False),    # v8
        ("delta-rs", True, 1, [], [], False, False),        # v9
        ("spark", False, 2, [1, 2], [], False, False),      # v10: Spark's own checkpoint 10
        ("delta-rs", False, 1, [121, 124], [2], False, False),  # v11: after Spark's checkpoint
        ("spark", False, 1, [127], [112], False, False),    # v12
    ]
    checkpoints: dict[int, str] = {}
    for engine, append, inserts, updates, deletes, hook, explicit in plan:
        source = turns.stage(inserts=inserts, updates=updates, deletes=deletes)
        version = turns.commit(engine, source, append=append, checkpoint_hook=hook)
        if explicit:
            DeltaTable(path).create_checkpoint()
        if hook or explicit or (engine == "spark" and version % 5 == 0):
            checkpoints[version] = engine
        txn = turns.txn_version
        what = f"{engine} at v{version}, batch {txn}"

        # binlake's own reading of the log, from the newest checkpoint on, whichever engine wrote what.
        tail = delta_log.read_log_tail(path, application=application)
        assert tail is not None and tail.last_binlake_commit is not None, what
        assert (tail.latest_version, tail.last_binlake_commit.delta_version, tail.last_binlake_commit.txn_version) \
            == (version, version, txn), what
        assert tail.last_binlake_commit.metadata["writer"] == engine and tail.last_binlake_commit.kind == "merge"
        assert tail.checkpoint_version == max(checkpoints, default=None), what
        assert delta_log.version_of(path, application, txn, storage) == version
        assert delta_log.commit_engine(path, version) == engine
        metrics = delta_log.commit_metrics(path, version)
        if append:
            assert delta_log.written_rows(path, version) == inserts, (what, metrics)
        else:
            inserted = inserts
            assert (metrics["numTargetRowsInserted"], metrics["numTargetRowsUpdated"],
                    metrics["numTargetRowsDeleted"]) == (inserted, len(updates), len(deletes)), (what, metrics)
        settings = delta_log.table_detail(path)
        assert settings is not None
        assert settings.properties["delta.checkpointInterval"] == "5"
        assert settings.properties["delta.enableDeletionVectors"] == "false", what
        assert "timestampNtz" in settings.features and settings.writer_version == 7, what
        assert [column for column, _ in settings.column_types] == list(turns.model[1]), what

        # Both engines read the rows the model holds.
        assert rs_rows(path) == turns.model, what
        assert spark_rows(spark, path) == turns.model, what

        # Delta's idempotence across engines: Spark skips a SetTransaction version already in the log,
        # whoever wrote it; deltalake reports the version Spark or delta-rs committed.
        assert DeltaTable(path).transaction_version(application) == txn
        if engine == "delta-rs":
            spark_merge(spark, path, turns.staged, application=application, txn_version=txn)
            assert delta_log.newest_version(path) == version, f"Spark replayed {what}"

    for version, engine in checkpoints.items():
        assert Path(path, "_delta_log", f"{version:020d}.checkpoint.parquet").exists(), (version, engine)
    assert sorted(checkpoints.items()) == [(4, "delta-rs"), (7, "delta-rs"), (10, "spark")]
    final = delta_log.read_log_tail(path, application=application)
    assert final is not None and final.last_binlake_commit is not None
    assert final.last_binlake_commit.txn_version == turns.txn_version == len(plan)


def test_delta_rs_does_not_skip_a_replayed_set_transaction(tmp_path: Path) -> None:
    """Spark refuses a SetTransaction version the log holds; delta-rs 1.6.6 commits it again.

    So a delta-rs writer must ask the log first (binlake's merge does: `read_log_tail` before every batch, a
    batch at or below the newest binlake txn version is not written): Delta's guard does not cover it.
    """
    spark = spark_session(SparkConfig(master="local[2]"))
    path = str(tmp_path / "replay")
    application = "binlake:interplay:replay"
    spark_writer.write_snapshot(spark, spark.createDataFrame([(1, "a")], "id int, v string"), path,
                                application=application, txn_version=1, metadata={"end": {}})
    source = pa.table({"id": pa.array([7], pa.int32()), "v": ["seven"], OP: ["u"]})
    rs_append(path, source, application=application, txn_version=2)
    rs_append(path, source, application=application, txn_version=2)  # a replay delta-rs does not refuse
    assert delta_log.newest_version(path) == 2
    assert sorted(rs_rows(path)) == [1, 7] and len(pa.RecordBatchReader.from_stream(
        DeltaTable(path).scan()).read_all()) == 3, "delta-rs wrote the replay: the row is there twice"
    staged = str(tmp_path / "replay.parquet")
    pq.write_table(source, staged)
    spark_merge(spark, path, staged, application=application, txn_version=2)
    spark_merge(spark, path, staged, application=application, txn_version=1)
    assert delta_log.newest_version(path) == 2, "Spark skips a txn version at or below the log's"


# -- which tables delta-rs writes exactly -----------------------------------------------------------


def _spark_table(spark: Any, path: str, *, deletion_vectors: bool = False, change_data_feed: bool = False,
                 ddl: str = "id int, v string, at timestamp_ntz", column_mapping: bool = False) -> None:
    rows = [(number, f"v{number}", dt.datetime(2024, 2, 29, 12, 0, number)) for number in range(1, 21)]
    frame = spark.createDataFrame([row[: len(ddl.split(","))] for row in rows], ddl).coalesce(1)
    if column_mapping:
        frame.write.format("delta").option("delta.columnMapping.mode", "name").save(path)
        return
    spark_writer.write_snapshot(spark, frame, path, application="binlake:interplay:features", txn_version=1,
                                metadata={"end": {}}, deletion_vectors=deletion_vectors,
                                change_data_feed=change_data_feed)


CASES = ["plain", "deletion_vectors", "change_data_feed", "after_dropping_deletion_vectors", "column_mapping",
         "legacy_protocol"]


@pytest.mark.parametrize("case", CASES)
def test_delta_rs_write_blocker_matches_what_delta_rs_does(case: str, tmp_path: Path) -> None:
    spark = spark_session(SparkConfig(master="local[2]"))
    path = str(tmp_path / case)
    ddl = "id int, v string" if case == "legacy_protocol" else "id int, v string, at timestamp_ntz"
    _spark_table(spark, path, deletion_vectors=case in ("deletion_vectors", "after_dropping_deletion_vectors"),
                 change_data_feed=case == "change_data_feed", ddl=ddl, column_mapping=case == "column_mapping")
    if case == "deletion_vectors":
        spark.sql(f"DELETE FROM delta.`{path}` WHERE id = 4")  # a deletion vector on the one data file
        assert any('"deletionVector":{' in line for line in Path(path, "_delta_log", f"{1:020d}.json").open())
    if case == "after_dropping_deletion_vectors":
        frame = spark.read.format("delta").load(path)
        spark_writer.write_snapshot(spark, frame.localCheckpoint(), path, application="binlake:interplay:features",
                                    txn_version=2, metadata={"end": {}}, deletion_vectors=False)
    settings = delta_log.table_detail(path)
    assert settings is not None
    blocker = delta_rs_write_blocker(settings)
    expected = spark_rows(spark, path)
    schema = arrow_schema(path).append(pa.field(OP, pa.string()))
    at = {"at": dt.datetime(2024, 2, 29, 12, 0, 59, 250000)} if "at" in schema.names else {}
    records = [{"id": 5, "v": "five, updated", **at, OP: "u"}, {"id": 77, "v": "seventy-seven", **at, OP: "u"},
               {"id": 9, OP: "d"}]
    source = pa.Table.from_pylist([{name: record.get(name) for name in schema.names} for record in records],
                                  schema=schema)
    try:
        rs_merge(path, source, application="binlake:interplay:features", txn_version=10)
    except Exception as error:  # noqa: BLE001 - the refusal is the point
        assert blocker is not None, f"delta-rs refused a table the blocker lets through: {error}"
        assert case == "after_dropping_deletion_vectors" and "checkpointProtection" in str(error)
        assert "checkpointProtection" in blocker
        return
    for record in records:
        if record[OP] == "d":
            expected.pop(record["id"])
        else:
            expected[record["id"]] = {name: _plain(record.get(name)) for name in expected[1]}
    if case == "deletion_vectors":
        assert 4 not in expected
    assert spark_rows(spark, path) == expected, case
    assert rs_rows(path) == expected, case
    assert blocker is None, f"delta-rs wrote {case} exactly, yet the blocker says: {blocker}"
    if case == "change_data_feed":
        changes = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1) \
            .load(path).select("id", "_change_type").collect()
        assert sorted((row.id, row._change_type) for row in changes) == [
            (5, "update_postimage"), (5, "update_preimage"), (9, "delete"), (77, "insert")]


def test_delta_rs_decimal_statistics_make_spark_skip_rows_unless_excluded(tmp_path: Path) -> None:
    """delta-rs 1.6.6 writes a DECIMAL(20,0) (BIGINT UNSIGNED, BIT(64)) past 2^63 - 1 with a clamped min/max,
    and wide DECIMALs through a float: Spark's data skipping (binlake's MERGE key-range pruning, any reader's
    filter) then misses the row. The blocker names those columns; with them out of the statistics it clears."""
    spark = spark_session(SparkConfig(master="local[2]"))
    unsigned = Decimal(18446744073709551615)
    wide = Decimal("1234567890123456.7")
    ddl = "id decimal(20,0), w decimal(17,1), s decimal(15,3), k decimal(18,0)"
    schema = pa.schema([("id", pa.decimal128(20, 0)), ("w", pa.decimal128(17, 1)), ("s", pa.decimal128(15, 3)),
                        ("k", pa.decimal128(18, 0))])
    row = {"id": unsigned, "w": wide, "s": Decimal("-999999999999.875"), "k": Decimal("-999999999999999999")}
    for excluded in (False, True):
        path = str(tmp_path / f"decimals-{excluded}")
        spark.createDataFrame([(Decimal(1), Decimal("0.5"), Decimal("0.125"), Decimal(3))], ddl).write \
            .format("delta").save(path)
        if excluded:
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.dataSkippingStatsColumns' = 's,k')")
        settings = delta_log.table_detail(path)
        assert settings is not None
        blocker = delta_rs_write_blocker(settings)
        write_deltalake(path, pa.Table.from_pylist([row], schema=schema), mode="append")
        frame = spark.read.format("delta").load(path)
        found = {column: frame.where(f"{column} = {value}").count() for column, value in row.items()}
        if excluded:
            assert blocker is None
            assert found == {"id": 1, "w": 1, "s": 1, "k": 1}
        else:
            assert blocker is not None and "id (decimal(20,0))" in blocker and "w (decimal(17,1))" in blocker
            assert "s (decimal" not in blocker and "k (decimal" not in blocker
            # What the blocker prevents: Spark's filter misses the rows delta-rs wrote, by their statistics.
            assert found == {"id": 0, "w": 0, "s": 1, "k": 1}
        shutil.rmtree(path)
