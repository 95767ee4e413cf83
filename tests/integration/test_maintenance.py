"""Table maintenance (`binlake maintain`, cdc_lib/maintenance/) beside the sync: compaction that changes no row and
fails no batch, VACUUM that keeps what a change-feed consumer still reads, a maintain killed before its commit,
a dry run that changes nothing, and a replayed batch still found applied after a compaction.

Tables are compared with the source through delta-rs (`deltalake`), a reader that is not binlake's.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from deltalake import DeltaTable

from cdc_lib.changes.events import TableChanges
from cdc_lib.common.formats import SNAPSHOT_DOCUMENT_FORMAT
from cdc_lib.config.model import PipelineConfig
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.maintenance.run import last_maintenance, maintain
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.pipeline.sync import SyncResult
from cdc_lib.sink import delta_log
from cdc_lib.sink.change_feed import consume
from cdc_lib.sink.delta_rs import key_rewrite
from cdc_lib.sink.delta_rs.writer import arrow_fold, storage_options, table_uri
from cdc_lib.sink.merge import merge_changes
from tests.conftest import run_cli, source_rows, sql, write_config_file
from tests.integration.conftest import s3_sink
from tests.integration.mixed_batches import mixed

#: Settings that make a small test table worth maintaining at once: every removed file may go.
EAGER = {"min_files_to_compact": 2, "vacuum_retention_hours": 0, "checkpoint_every_commits": 3}


def items(mariadb: LocalMariaDB, database: str, rows: int = 400) -> str:
    table = f"{database}.items"
    sql(mariadb, f"CREATE TABLE {table} (id INT PRIMARY KEY, qty INT NOT NULL, price DECIMAL(9,3), label VARCHAR(20))",
        f"INSERT INTO {table} SELECT seq, seq * 3, seq / 8, 'start' FROM {database}.seq_1_to_{rows}")
    return table


def appended(mariadb: LocalMariaDB, table: str, round_number: int) -> None:
    database = table.split(".")[0]
    sql(mariadb, f"INSERT INTO {table} SELECT {100_000 * (round_number + 1)} + seq, seq, 1.5, 'new' "
        f"FROM {database}.seq_1_to_25")


def batches(mariadb: LocalMariaDB, pipeline: Pipeline, table: str) -> None:
    """A mixed batch, then three of new keys: four small files (the writer merges them itself at the fifth)."""
    mixed(mariadb, table, 0)
    pipeline.sync(until_caught_up=True)
    for round_number in (1, 2, 3):
        appended(mariadb, table, round_number)
        pipeline.sync(until_caught_up=True)


def read_back(path: str) -> list[tuple[Any, ...]]:
    """The table as delta-rs's pyarrow path reads it (no deletion vectors on these tables)."""
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    return sorted(tuple(row.values()) for row in rows)


def data_files(path: str) -> set[str]:
    """Every Parquet file on disk under the table, referenced or not (the log aside)."""
    root = Path(path)
    return {str(file.relative_to(root)) for file in root.rglob("*.parquet") if "_delta_log" not in file.parts}


def live_files(path: str) -> int:
    return pa.table(DeltaTable(path).get_add_actions(flatten=True)).num_rows


def live_paths(path: str) -> set[str]:
    return set(pa.table(DeltaTable(path).get_add_actions(flatten=True)).column("path").to_pylist())


def assert_no_failed_batch(results: list[SyncResult]) -> None:
    failed = [(table.table, table.error or table.retrying) for result in results for table in result.tables
              if table.error or table.retrying]
    assert failed == [] and not any(result.retrying_tables or result.skipped_tables for result in results)


def test_maintenance_beside_a_running_sync_compacts_and_vacuums_and_fails_no_batch(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig]
) -> None:
    table = items(mariadb, database)
    config = make_config([table], batch__writer="delta-rs", sink__tables={table: {"maintenance": EAGER}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    path = pipeline.table_path(table)
    # The log is kept 30 days unless the table says otherwise (Delta's own setting, which maintenance follows).
    pipeline.spark().sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.logRetentionDuration' = "
                         "'interval 0 hours')")
    results: list[SyncResult] = []
    failures: list[BaseException] = []
    done = threading.Event()
    maintenance_runs = threading.Semaphore(0)

    def sync_loop() -> None:
        try:
            for round_number in range(16):
                # Batches of new keys only (appended: a small file each at the top of the key order), then a mixed
                # one (rewritten by key): what a CDC table sees, and what leaves small files behind.
                if round_number % 4 == 3:
                    mixed(mariadb, table, round_number)
                    # The batches do not outrun maintenance (a loaded machine once let all 16 pass beside one run):
                    # after each mixed batch, wait until a maintenance run has ended, then go on beside the next.
                    assert maintenance_runs.acquire(timeout=300), "no maintenance run ended within 300 s"
                else:
                    appended(mariadb, table, round_number)
                results.extend(pipeline.sync(until_caught_up=True))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=sync_loop, name="sync-loop")
    worker.start()
    outcomes = []
    while not done.wait(0.5):  # a schedule far tighter than a real one (hourly), still beside every batch
        outcomes += maintain(pipeline.context)
        maintenance_runs.release()
    worker.join()
    assert failures == []
    assert_no_failed_batch(results)
    assert len(outcomes) >= 2, "maintenance ran at least twice beside the sync"
    assert sum(outcome.compacted_files for outcome in outcomes) > 0, "a compaction landed beside the sync"

    # What the batches left: compacted, checkpointed, every removed file removed from disk.
    for round_number in (20, 21, 22):
        appended(mariadb, table, round_number)
        assert_no_failed_batch(pipeline.sync(until_caught_up=True))
    before_live, before_on_disk = live_paths(path), data_files(path)
    final = maintain(pipeline.context)[0]
    after_on_disk, after_live = data_files(path), live_paths(path)
    assert final.compacted_files >= EAGER["min_files_to_compact"] and len(after_live) < len(before_live)
    assert final.vacuumed_files > 0 and len(after_on_disk) < len(before_on_disk)
    assert after_live <= after_on_disk and not (before_live - after_live) & after_on_disk, \
        "every file the compaction removed is gone from disk, every live one is there"
    # Files no version names (a batch's write whose commit met a maintenance commit, then retried) stay while
    # younger than the floor (operations.UNTRACKED_FLOOR_HOURS): a running batch may be about to commit one.
    assert read_back(path) == source_rows(mariadb, table)
    record = last_maintenance(pipeline.context, table)
    assert record is not None and record["compacted_files"] == final.compacted_files
    # A checkpoint was written, and the log before the newest kept checkpoint is gone.
    tail = delta_log.read_log_tail(path, application=pipeline.application(table), storage=pipeline.sink)
    assert tail is not None and tail.checkpoint_version is not None
    assert any(outcome.log_files_removed for outcome in [*outcomes, final])
    # The next batch still goes on from where it was.
    mixed(mariadb, table, 98)
    assert_no_failed_batch(pipeline.sync(until_caught_up=True))
    assert read_back(path) == source_rows(mariadb, table)


def test_a_replayed_batch_after_a_compaction_is_found_applied_and_a_stale_rewrite_fails(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig]
) -> None:
    table = items(mariadb, database, rows=50)
    config = make_config([table], batch__writer="delta-rs",
                         sink__tables={table: {"maintenance": {"min_files_to_compact": 2}}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    path = pipeline.table_path(table)
    batches(mariadb, pipeline, table)
    application = pipeline.application(table)
    last = delta_log.read_log_tail(path, application=application, storage=pipeline.sink)
    assert last is not None and last.last_binlake_commit is not None
    stale = DeltaTable(path)  # a batch's snapshot, loaded before the compaction below
    assert maintain(pipeline.context)[0].compacted_files > 0
    compacted_at = delta_log.newest_version(path)

    # The last batch again (a replay after a crash): found applied across the maintenance commit, nothing written.
    schema = TableSchema.from_json(TableRef.parse(table), pipeline.read_state().tables[table].schema)
    replay = TableChanges(key_positions=(0,))
    replay.update((1, 3, None, "start"), (1, 1, None, "replayed"))
    version = merge_changes(None, path, schema, replay, application=application,
                            txn_version=last.last_binlake_commit.txn_version, metadata={}, writer="delta-rs")
    assert version == last.last_binlake_commit.delta_version and delta_log.newest_version(path) == compacted_at

    # A batch that read its files before the compaction must not commit over it: its rows would come back twice.
    key_value = read_back(path)[0][0]
    records = arrow_fold(schema, [(key_value, 5, None, "late")], [])
    with pytest.raises(Exception, match="(?i)commit") as raised:
        key_rewrite.rewrite_batch(stale, schema, records, operation_column="_binlake_op", storage_options=None,
                                  custom_metadata={}, transactions=[], hooks=None)  # type: ignore[arg-type]
    assert "CommitFailed" in type(raised.value).__name__
    assert read_back(path) == source_rows(mariadb, table)


class Amounts:
    """A change-feed consumer keeping (id, qty) of the source: what a downstream job would hold."""

    name = "amounts"

    def compute(self, rows: Any) -> Any:
        return rows.select("id", "qty")

    def merge(self, spark: Any, output_path: str, changes: Any) -> None:
        from delta.tables import DeltaTable as SparkDeltaTable
        from pyspark.sql import Window
        from pyspark.sql import functions as f

        latest = (changes.filter(f.col("_change_type") != "update_preimage")
                  .withColumn("n", f.row_number().over(Window.partitionBy("id").orderBy(f.desc("_commit_version"))))
                  .filter("n = 1"))
        (SparkDeltaTable.forPath(spark, output_path).alias("o").merge(latest.alias("c"), "o.id = c.id")
         .whenMatchedDelete("c._change_type = 'delete'").whenMatchedUpdate(set={"qty": "c.qty"})
         .whenNotMatchedInsert("c._change_type != 'delete'", values={"id": "c.id", "qty": "c.qty"}).execute())


def test_vacuum_keeps_what_a_change_feed_consumer_still_reads(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig]
) -> None:
    table = items(mariadb, database, rows=60)
    config = make_config([table], sink__tables={table: {"change_data_feed": True, "maintenance": EAGER}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    path = pipeline.table_path(table)
    output = f"{config.sink.path}/_derived/{Amounts.name}"
    assert consume(pipeline.spark, consumer=Amounts(), source_path=path, output_path=output).mode == "initial"
    for round_number in range(3):  # MERGEs that rewrite (remove) the files the consumer has yet to read
        mixed(mariadb, table, round_number)
        pipeline.sync(until_caught_up=True)
    on_disk = data_files(path)

    outcome = maintain(pipeline.context, [table])[0]
    # The consumer reads its next range after the VACUUM, from the feed, and gets the source's rows.
    result = consume(pipeline.spark, consumer=Amounts(), source_path=path, output_path=output)
    assert result.mode == "incremental"
    expected = sorted((row[0], row[1]) for row in source_rows(mariadb, table))
    assert read_back(output) == expected
    assert data_files(path) >= on_disk - {name for name in on_disk if name.startswith("_change_data")}, \
        "no file a commit after the consumer's version removed is gone"
    assert outcome.engine == "spark" and "amounts" in outcome.retention_reason and outcome.retention_hours > 0

    # Once the consumer is past them, the same retention setting removes them.
    later = maintain(pipeline.context, [table])[0]
    assert "amounts" not in later.retention_reason and later.vacuumed_files > 0
    assert len(data_files(path)) < len(on_disk)
    assert read_back(path) == sorted(source_rows(mariadb, table))


def config_with_maintenance(config: PipelineConfig, path: Path, table: str) -> Path:
    write_config_file(config, path)
    document = yaml.safe_load(path.read_text())
    document["sink"]["tables"] = {table: {"maintenance": EAGER}}
    path.write_text(yaml.safe_dump(document))
    return path


def test_a_maintain_killed_before_its_commit_loses_nothing_and_the_next_run_completes(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig], tmp_path: Path
) -> None:
    table = items(mariadb, database, rows=80)
    config = make_config([table], batch__writer="delta-rs")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    batches(mariadb, pipeline, table)
    path = pipeline.table_path(table)
    config_path = config_with_maintenance(config, tmp_path / "binlake.yaml", table)
    version, files = delta_log.newest_version(path), live_files(path)

    killed = run_cli(config_path, "maintain", env={"BINLAKE_FAILPOINT": "maintenance.before_commit"})
    assert killed.returncode == -9, killed.stderr
    assert delta_log.newest_version(path) == version and live_files(path) == files
    assert read_back(path) == source_rows(mariadb, table)
    leftover = [name for name in data_files(path) if "/maintain-" in name]
    assert leftover, "the killed run had written its compacted files, which no version names"

    # The sync goes on, and the next maintenance completes what the killed one began.
    mixed(mariadb, table, 7)
    assert_no_failed_batch(pipeline.sync(until_caught_up=True))
    finished = run_cli(config_path, "maintain")
    assert finished.returncode == 0, finished.stderr
    assert "compaction: merge" in finished.stdout and live_files(path) < files
    assert read_back(path) == source_rows(mariadb, table)
    # The dead run's files are no version's: VACUUM keeps them only while a batch could still be committing them.
    assert set(leftover) <= data_files(path)


def test_a_dry_run_says_what_it_would_do_and_changes_nothing(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig], tmp_path: Path
) -> None:
    table = items(mariadb, database, rows=80)
    config = make_config([table], batch__writer="delta-rs")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    batches(mariadb, pipeline, table)
    path = pipeline.table_path(table)
    config_path = config_with_maintenance(config, tmp_path / "binlake.yaml", table)
    lake = Path(config.sink.path)
    before = {str(file): file.stat().st_mtime_ns for file in lake.rglob("*") if file.is_file()}

    dry = run_cli(config_path, "maintain", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "would merge" in dry.stdout and "would remove" in dry.stdout and "KiB" in dry.stdout, dry.stdout
    after = {str(file): file.stat().st_mtime_ns for file in lake.rglob("*") if file.is_file()}
    assert after == before, "a dry run wrote or removed nothing (no Delta commit, no record)"

    real = run_cli(config_path, "maintain", "--table", table)
    assert real.returncode == 0, real.stderr
    status = run_cli(config_path, "status")
    assert f"{table}: last maintenance 20" in status.stdout and "files compacted" in status.stdout, status.stdout
    assert live_files(path) < len([name for name in before if name.endswith(".parquet") and "_delta_log" not in name])
    assert read_back(path) == source_rows(mariadb, table)


def test_leftovers_a_dead_batch_scratch_log_and_an_abandoned_snapshot_document_are_removed(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig]
) -> None:
    table = items(mariadb, database, rows=40)
    pipeline = Pipeline(make_config([table], batch__writer="delta-rs"))
    pipeline.snapshot()
    path = Path(pipeline.table_path(table))
    # What a batch killed between its scratch write and its commit leaves (key_rewrite removes it right after).
    scratch = path / key_rewrite.SCRATCH_FOLDER / "_delta_log"
    scratch.mkdir(parents=True)
    (scratch / "00000000000000000000.json").write_text("{}\n")
    fresh = path / key_rewrite.SCRATCH_FOLDER / "maintain-running" / "_delta_log"
    fresh.mkdir(parents=True)
    (fresh / "00000000000000000000.json").write_text("{}\n")
    hours_ago = time.time() - 2 * 3600
    os.utime(scratch / "00000000000000000000.json", (hours_ago, hours_ago))
    document = {"format": SNAPSHOT_DOCUMENT_FORMAT, "table": table, "snapshot_id": "dead", "status": "abandoned",
                "low": {"file": "binlog.000001", "pos": 4}, "schema": {}, "plan": [], "started_at": "2026-01-01"}
    store, name = pipeline.store, pipeline.config.pipeline
    store.write_document(name, f"snapshots/{table}.json", document, None)

    dry = maintain(pipeline.context, dry_run=True)[0]
    assert any("scratch log" in leftover for leftover in dry.leftovers_removed) and list(scratch.glob("*"))
    assert store.read_document(name, f"snapshots/{table}.json")[0] is not None
    done = maintain(pipeline.context)[0]
    assert not list(scratch.glob("*")), "a scratch log no batch has used for an hour is removed"
    assert list(fresh.glob("*")), "a younger one may be a running batch's or maintenance run's"
    assert store.read_document(name, f"snapshots/{table}.json")[0] is None
    assert any("abandoned snapshot document" in leftover for leftover in done.leftovers_removed)
    assert read_back(str(path)) == source_rows(mariadb, table)


def data_objects(endpoint: str, bucket: str) -> list[str]:
    """The Parquet objects of the tables in `bucket` (the log aside)."""
    import boto3

    client = boto3.client("s3", endpoint_url=endpoint)
    keys = [item["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="lake/")
            for item in page.get("Contents", [])]
    return [key for key in keys if key.endswith(".parquet") and "/_delta_log/" not in key]


def test_maintenance_on_an_s3_sink(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig], s3_endpoint: str,
    s3_bucket: str,
) -> None:
    table = items(mariadb, database, rows=60)
    config = make_config([table], sink=s3_sink(s3_endpoint, s3_bucket, tables={table: {"maintenance": EAGER}}),
                         offsets={}, batch__writer="delta-rs")
    pipeline = Pipeline(config)
    pipeline.snapshot()
    batches(mariadb, pipeline, table)
    path = pipeline.table_path(table)
    objects = data_objects(s3_endpoint, s3_bucket)

    outcome = maintain(pipeline.context)[0]
    assert outcome.compacted_files >= 2 and outcome.vacuumed_files > 0 and outcome.vacuumed_bytes > 0
    # The checkpoint was rewritten on S3 without the removed files' records, and delta-rs reads it below.
    assert outcome.tombstones_dropped > 0
    left = data_objects(s3_endpoint, s3_bucket)
    assert len(left) < len(objects)
    options = storage_options(path, pipeline.sink)
    scanned = DeltaTable(table_uri(path), storage_options=options).to_pyarrow_table().to_pylist()
    assert sorted(tuple(row.values()) for row in scanned) == source_rows(mariadb, table)
    assert last_maintenance(pipeline.context, table) is not None


def tombstones(path: str) -> set[str]:
    """The files the newest checkpoint still names as removed (its `remove` records), read with pyarrow."""
    import json

    import pyarrow.parquet as pq

    version = json.loads((Path(path) / "_delta_log" / "_last_checkpoint").read_text())["version"]
    checkpoint = pq.read_table(Path(path) / "_delta_log" / f"{version:020d}.checkpoint.parquet", columns=["remove"])
    return {remove["path"] for remove in checkpoint.column("remove").to_pylist() if remove is not None}


def test_the_checkpoint_after_maintenance_drops_the_tombstones_of_the_files_vacuum_removed(
    mariadb: LocalMariaDB, database: str, make_config: Callable[..., PipelineConfig]
) -> None:
    # delta-rs keeps a removed file's record in every checkpoint for the table's deletedFileRetentionDuration (7
    # days here), whatever VACUUM removed: each reader that opens the table would read them all.
    table = items(mariadb, database, rows=80)
    config = make_config([table], batch__writer="delta-rs", sink__tables={table: {"maintenance": EAGER}})
    pipeline = Pipeline(config)
    pipeline.snapshot()
    path = pipeline.table_path(table)
    batches(mariadb, pipeline, table)
    removed_before = data_files(path) - live_paths(path)
    assert removed_before, "the batches removed files (a MERGE's rewrite)"

    outcome = maintain(pipeline.context, [table])[0]
    assert outcome.vacuumed_files > 0 and outcome.checkpoint_version is not None
    gone = removed_before - data_files(path)
    assert gone, "VACUUM removed the files the batches had removed"
    assert tombstones(path) & gone == set(), "the newest checkpoint names none of the files VACUUM removed"
    assert outcome.tombstones_dropped >= len(gone)
    assert read_back(path) == source_rows(mariadb, table)

    # Readers and writers go on from the checkpoint without those records: the next batch, the next maintenance,
    # and a reader that travels back to the checkpoint's version.
    checkpoint_version = outcome.checkpoint_version
    mixed(mariadb, table, 5)
    assert_no_failed_batch(pipeline.sync(until_caught_up=True))
    assert read_back(path) == source_rows(mariadb, table)
    assert DeltaTable(path, version=checkpoint_version).to_pyarrow_table().num_rows > 0
    later = maintain(pipeline.context, [table])[0]
    assert later.skipped is None and tombstones(path) & removed_before == set()
    assert read_back(path) == source_rows(mariadb, table)

