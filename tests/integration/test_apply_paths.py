"""The apply paths of issue 12: tables written in parallel, and inserted keys appended without a MERGE.

Each path is checked for its result (Delta equals the source, read by delta-rs), for the commits it leaves
(each table's commits carry its own SetTransaction and metadata; a batch is committed once) and for a SIGKILL
at the failpoints around the commits, resumed.
"""

from __future__ import annotations

import json
import signal
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdc_lib.changes.events import TableChanges
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink import merge
from cdc_lib.sink.commits import APPLIED_THROUGH
from cdc_lib.sink.spark import writer as spark_writer
from tests.conftest import run_cli, scan_rows, source_rows, sql
from tests.integration.conftest import assert_each_change_applied_once
from tests.integration.mixed_batches import config_file_with, make_tables, mixed


def inserts(mariadb: Any, table: str, first: int, count: int) -> None:
    db = table.split(".")[0]
    sql(mariadb, f"INSERT INTO {table} SELECT {first} + seq, seq, 12.125, 'new' FROM {db}.seq_1_to_{count}")


def delta_log(pipeline: Pipeline, table: str) -> list[dict[str, Any]]:
    """Each commit of the table's Delta log: its operation, SetTransaction and binlake metadata."""
    commits = []
    for file in sorted((Path(pipeline.table_path(table)) / "_delta_log").glob("*.json")):
        entry: dict[str, Any] = {"version": int(file.stem)}
        for line in file.read_text().split("\n"):
            action = json.loads(line) if line.strip() else {}
            if "txn" in action:
                entry["txn"] = action["txn"]
            if "commitInfo" in action:
                entry["operation"] = action["commitInfo"]["operation"]
                metadata = action["commitInfo"].get("userMetadata")
                entry["metadata"] = json.loads(metadata) if metadata else None
        commits.append(entry)
    return commits


def assert_equal_to_source(mariadb: Any, pipeline: Pipeline, table: str) -> None:
    delta = sorted(scan_rows(pipeline.table_path(table)))
    assert len({row[0] for row in delta}) == len(delta), f"{table}: a key is in Delta twice"
    assert delta == source_rows(mariadb, table), f"{table}: Delta differs from the source"


@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_inserted_keys_are_appended_once_the_table_is_consistent(mariadb, database, make_config, writer) -> None:
    (table,) = make_tables(mariadb, database, 1)
    pipeline = Pipeline(make_config([table], batch__writer=writer))
    pipeline.snapshot()
    inserts(mariadb, table, 5_000, 40)
    pipeline.sync(until_caught_up=True)
    inserts(mariadb, table, 6_000, 25)
    pipeline.sync(until_caught_up=True)
    mixed(mariadb, table, 2)
    pipeline.sync(until_caught_up=True)

    commits = [commit for commit in delta_log(pipeline, table) if commit.get("txn")]
    operations = [commit["operation"] for commit in commits[1:]]
    # The first batch may start inside the snapshot's catch-up window (MERGE, or WRITE if it is past it); the
    # second is past it: its inserts are appended, the mixed batch after it is MERGEd (delta-rs: rewritten by key,
    # cdc_lib.sink.delta_rs.key_rewrite, a WRITE of the files its keys are in).
    assert len(operations) == 3 and operations[1:] == ["WRITE", "MERGE" if writer == "spark" else "WRITE"], operations
    assert commits[2]["metadata"]["path"] == "append" and "path" not in commits[3]["metadata"]
    assert [commit["metadata"]["writer"] for commit in commits[2:]] == [writer, writer]
    assert all(APPLIED_THROUGH in commit["metadata"] for commit in commits[1:])
    assert_equal_to_source(mariadb, pipeline, table)
    assert_each_change_applied_once(pipeline.config, table)


def test_append_is_refused_while_the_delta_log_shows_rows_past_the_offset(mariadb, database, make_config) -> None:
    """A commit whose `applied_through` lies past the offset (a held XA branch replays what was applied): the
    batch is MERGEd, so a key the replay inserts again is not doubled. The same batch on a table that the log
    shows exact at its offset is appended."""
    from decimal import Decimal

    tables = make_tables(mariadb, database, 2)
    pipeline = Pipeline(make_config(tables))
    pipeline.snapshot()
    state = pipeline.read_state()
    spark = pipeline.spark()
    outcomes = {}
    for table, ahead in zip(tables, (True, False), strict=True):
        schema = TableSchema.from_json(TableRef.parse(table), state.tables[table].schema)
        offset = state.tables[table].position
        through = replace(offset, pos=offset.pos + 100_000) if ahead else offset
        first = TableChanges(key_positions=(0,))
        first.update((3, 9, Decimal("0.375"), "start"), (3, 9, Decimal("0.375"), "drei"))
        application, path = pipeline.application(table), pipeline.table_path(table)
        merge.merge_changes(spark, path, schema, first, txn_version=state.batch_seq + 1, application=application,
                            metadata={"end": offset.to_json()}, applied_through=through)
        replay = TableChanges(key_positions=(0,))
        replay.insert((11, 33, Decimal("1.375"), "again") if ahead else (517, 1, Decimal("2.5"), "fresh"))
        merge.merge_changes(spark, path, schema, replay, txn_version=state.batch_seq + 2,
                            application=application, metadata={"end": through.to_json()},
                            applied_through=through, append_from=offset)
        rows = sorted(scan_rows(pipeline.table_path(table)))
        outcomes[table] = (len(rows), [row for row in rows if row[0] in (3, 11, 517)],
                           [commit["operation"] for commit in delta_log(pipeline, table)][-2:])
    held, exact = (outcomes[table] for table in tables)
    assert held == (120, [(3, 9, Decimal("0.375"), "drei"), (11, 33, Decimal("1.375"), "again")], ["MERGE", "MERGE"])
    assert exact == (121, [(3, 9, Decimal("0.375"), "drei"), (11, 33, Decimal("1.375"), "start"),
                           (517, 1, Decimal("2.500"), "fresh")], ["MERGE", "WRITE"])


def test_tables_written_in_parallel_keep_their_own_transactions(mariadb, database, make_config) -> None:
    tables = make_tables(mariadb, database, 5)
    # Spark: each writer thread needs a session of its own (cdc_lib.sink.spark.parallel_apply); delta-rs's are in
    # tests/integration/test_delta_rs_writes.py.
    pipeline = Pipeline(make_config(tables, batch__apply_threads=3, batch__writer="spark"))
    pipeline.snapshot()
    for round_number in range(3):
        for index, table in enumerate(tables):
            mixed(mariadb, table, round_number + index)
        pipeline.sync(until_caught_up=True)

    for table in tables:
        application = pipeline.application(table)
        for commit in delta_log(pipeline, table):
            if commit.get("txn") is None:
                continue
            if commit["txn"]["appId"].startswith(f"{application}:snapshot:"):  # a wave of the chunked snapshot
                assert commit["metadata"]["table"] == table
                continue
            assert commit["txn"]["appId"] == application, f"{table} v{commit['version']} has another table's txn"
            assert commit["metadata"]["app_id"] == application and commit["metadata"]["table"] == table
            assert commit["metadata"].get("batch_seq", commit["txn"]["version"]) == commit["txn"]["version"]
        assert_equal_to_source(mariadb, pipeline, table)
        assert_each_change_applied_once(pipeline.config, table)
    state = pipeline.read_state()
    assert {state.tables[table].applied_seq for table in tables} == {state.batch_seq}


@pytest.mark.parametrize("failpoint", ["after_delta_commit", "before_offset_write"])
@pytest.mark.parametrize("writer", ["spark", "delta-rs"])
def test_kill_around_an_append_then_resume(writer, failpoint, mariadb, database, make_config, tmp_path) -> None:
    (table,) = make_tables(mariadb, database, 1)
    config = make_config([table], batch__writer=writer)
    pipeline = Pipeline(config)
    pipeline.snapshot()
    inserts(mariadb, table, 5_000, 10)
    pipeline.sync(until_caught_up=True)  # past the snapshot's high watermark
    config_path = config_file_with(config, tmp_path / "binlake.yaml", apply_threads=1)

    inserts(mariadb, table, 7_000, 60)
    crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": failpoint})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    landed = delta_log(pipeline, table)[-1]
    assert (landed["operation"], landed["metadata"]["writer"]) == ("WRITE", writer), "the append landed first"

    inserts(mariadb, table, 8_000, 15)
    resumed = Pipeline(config)
    resumed.sync(until_caught_up=True)
    assert_equal_to_source(mariadb, resumed, table)
    assert_each_change_applied_once(config, table)
    state = resumed.read_state()
    assert state.tables[table].applied_seq == state.batch_seq


def test_kill_while_tables_are_written_in_parallel_then_resume(mariadb, database, make_config, tmp_path) -> None:
    tables = make_tables(mariadb, database, 4)
    config = make_config(tables, batch__writer="spark")  # Spark's sessions per thread; delta-rs: its own test file
    pipeline = Pipeline(config)
    pipeline.snapshot()
    config_path = config_file_with(config, tmp_path / "binlake.yaml", apply_threads=4)
    for index, table in enumerate(tables):
        mixed(mariadb, table, index)
    crashed = run_cli(config_path, "sync", env={"BINLAKE_FAILPOINT": "after_delta_commit"})
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]

    for index, table in enumerate(tables):
        mixed(mariadb, table, index + 5)
    resumed = run_cli(config_path, "sync", "--until-caught-up")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    for table in tables:
        assert_equal_to_source(mariadb, pipeline, table)
        assert_each_change_applied_once(config, table)


def spark_jobs_after(spark: Any, run: Any) -> list[str]:
    """The descriptions of the Spark jobs `run()` started (from Spark's status store; no listener needed)."""
    store = spark.sparkContext._jsc.sc().statusStore()

    def job_ids_and_descriptions() -> dict[int, str]:
        jobs = store.jobsList(None)
        described = {}
        for index in range(jobs.size()):
            job = jobs.apply(index)
            description = job.description()
            described[job.jobId()] = str(description.get() if description.isDefined() else job.name())
        return described

    before = set(job_ids_and_descriptions())
    run()
    return [text for job, text in sorted(job_ids_and_descriptions().items()) if job not in before]


@pytest.mark.parametrize("small", [True, False])
def test_a_small_merge_runs_fewer_jobs_and_leaves_the_session_as_it_was(
    small, mariadb, database, make_config, monkeypatch
) -> None:
    """A MERGE of a small staged source skips Delta's copy of the source and adaptive execution's stage-by-stage
    jobs (docs/performance.md "Many tables in one batch"); a larger one keeps adaptive execution. Either way the
    table equals the source, and the session's own settings are back once the commit is made."""
    (table,) = make_tables(mariadb, database, 1)
    pipeline = Pipeline(make_config([table], batch__writer="spark"))
    pipeline.snapshot()
    if not small:
        monkeypatch.setattr(spark_writer, "SMALL_MERGE_ROWS", 7)  # the mixed round stages ~60 rows
    spark = pipeline.spark()
    spark.conf.set("spark.databricks.delta.merge.materializeSource", "all")
    settings = ("spark.databricks.delta.merge.materializeSource", "spark.sql.adaptive.enabled")
    before = {key: spark.conf.get(key) for key in settings}

    mixed(mariadb, table, 3)
    jobs = spark_jobs_after(spark, lambda: pipeline.sync(until_caught_up=True))

    assert delta_log(pipeline, table)[-1]["operation"] == "MERGE"
    assert not [job for job in jobs if "materialize source" in job], jobs
    writes = [job for job in jobs if job.startswith("Delta: Writing modified data - MERGE")]
    # Adaptive execution runs each query stage of the rewrite as a job of its own: 1 job without it, 3 with.
    assert (len(writes) == 1) == small, jobs
    assert {key: spark.conf.get(key) for key in settings} == before
    spark.conf.unset("spark.databricks.delta.merge.materializeSource")
    assert_equal_to_source(mariadb, pipeline, table)
    assert_each_change_applied_once(pipeline.config, table)
