"""Where the time of a batch that changes many tables goes (issue 12: 100 tables vs 1 table ≤ 3×).

    PYTHONPATH=$PWD python -m bench.keepup.many_tables [--changes 10000] [--tables 1,20,100] [--repeat 1]
        [--variants 'spark:writer=spark;delta-rs:writer=delta-rs;delta-rs-1:writer=delta-rs,threads=1']

One MariaDB and one warm SparkSession serve every case. Per case: N tables of `changes / N` rows, a snapshot,
a warm-up batch (the first MERGE into each fresh table), then `repeat` timed batches of `changes` changes
(half new keys, half updates: `keepup_costs.write_changes`), each `sync(until_caught_up=True)` of one batch.

For the timed batches it prints the wall seconds, the process's CPU seconds (all its threads: on a loaded machine
the steadier figure) and a breakdown (`--profile DIR` adds a cProfile file per batch): thread-seconds spent in
the steps of a table's apply (wrapped here, the engine is unchanged), and the Spark jobs the batch ran (the
status tracker's job ids, so no listener is needed) with their descriptions counted per kind.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.common import PASSWORD, USER, pipeline_config
from bench.keepup.keepup_costs import create_tables, write_changes
from cdc_lib.config.load import load_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline


class StepClock:
    """Thread-seconds and calls per named step, from wrapped functions (any thread)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seconds: dict[str, float] = collections.defaultdict(float)
        self.calls: dict[str, int] = collections.defaultdict(int)
        self.restore: list[Callable[[], None]] = []

    def reset(self) -> None:
        with self.lock:
            self.seconds.clear()
            self.calls.clear()

    def wrap(self, owner: Any, attribute: str, step: str) -> None:
        original = getattr(owner, attribute)
        clock = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                with clock.lock:
                    clock.seconds[step] += time.perf_counter() - started
                    clock.calls[step] += 1

        setattr(owner, attribute, timed)
        self.restore.append(lambda: setattr(owner, attribute, original))

    def unwrap(self) -> None:
        for undo in reversed(self.restore):
            undo()
        self.restore.clear()


def instrument(clock: StepClock) -> None:
    """Wrap the steps of a table's apply; names say what each covers."""
    from delta.tables import DeltaMergeBuilder, DeltaTable

    from cdc_lib.pipeline import sync
    from cdc_lib.sink import commits, delta_log
    from cdc_lib.sink.delta_rs import writer as delta_rs_writer
    from cdc_lib.sink.spark import parallel_apply
    from cdc_lib.sink.spark import writer as spark_writer
    from cdc_lib.sink.spark.staging import StagedChanges

    clock.wrap(sync, "_write_table", "table apply, whole (incl. waits)")
    clock.wrap(sync, "snapshot_begun", "snapshot document read")
    clock.wrap(commits, "existing_tail", "log tail read (Python)")
    clock.wrap(delta_log, "version_of", "version after commit (Python)")
    clock.wrap(StagedChanges, "add", "staging: records → Arrow → Parquet")
    clock.wrap(StagedChanges, "frame", "staging: Parquet → DataFrame")
    clock.wrap(spark_writer, "mirror_records", "staging: fold → records")
    clock.wrap(DeltaTable, "forPath", "DeltaTable.forPath (snapshot load)")
    clock.wrap(DeltaMergeBuilder, "execute", "MERGE execute (jobs + commit)")
    clock.wrap(spark_writer, "_append", "append (jobs + commit)")
    clock.wrap(parallel_apply, "isolated_session", "session clone")
    clock.wrap(delta_rs_writer, "write_batch", "delta-rs write (merge or append + commit)")
    instrument_delta_rs(clock)
    instrument_batch(clock)


def instrument_batch(clock: StepClock) -> None:
    """The batch's steps around the tables' writes (main thread): what a changed table costs outside its write."""
    from cdc_lib.pipeline import sync
    from cdc_lib.state import offset_store

    clock.wrap(sync, "run_batch", "batch: run_batch, whole")
    clock.wrap(sync, "reconcile_with_delta", "sync: reconcile_with_delta (before the batches)")
    clock.wrap(offset_store.StateHandle, "acquire", "sync: lease acquire (StateHandle.acquire)")
    clock.wrap(offset_store.StateHandle, "release", "sync: lease release (StateHandle.release)")
    clock.wrap(sync, "_write_tables", "batch: every table's write (_write_tables)")
    clock.wrap(sync, "read_batch", "batch: binlog read and fold (read_batch)")
    clock.wrap(sync, "settle_snapshots", "batch: snapshot documents (settle_snapshots)")
    clock.wrap(sync, "_resumed", "batch: per-table resume check (_resumed)")
    clock.wrap(sync, "_settle_table", "batch: per-table settle (_settle_table)")
    clock.wrap(sync, "record_of_batch", "batch: catch-up record (record_of_batch)")
    clock.wrap(offset_store.StateHandle, "save", "batch: offset store saves (StateHandle.save)")


def instrument_delta_rs(clock: StepClock) -> None:
    """The steps inside a delta-rs table's write (`delta_rs_writer.write_batch`) and its engine choice."""
    import deltalake
    from deltalake.table import TableMerger

    from cdc_lib.sink import choice, delta_log
    from cdc_lib.sink.delta_rs import writer as delta_rs_writer

    clock.wrap(choice, "writer_for", "delta-rs: writer choice (writer_for, whole)")
    clock.wrap(delta_log, "table_detail", "delta-rs: table settings read (Python)")
    clock.wrap(delta_rs_writer, "arrow_records", "delta-rs: records → Arrow")
    clock.wrap(deltalake.DeltaTable, "__init__", "delta-rs: DeltaTable load")
    clock.wrap(deltalake.DeltaTable, "transaction_version", "delta-rs: transaction_version")
    clock.wrap(deltalake.DeltaTable, "update_incremental", "delta-rs: update_incremental")
    clock.wrap(deltalake.DeltaTable, "delete", "delta-rs: DELETE (+ commit)")
    clock.wrap(delta_rs_writer.LOADED_TABLES, "take", "delta-rs: kept table or load (LOADED_TABLES.take)")
    clock.wrap(deltalake.DeltaTable, "create_checkpoint", "delta-rs: create_checkpoint")
    clock.wrap(deltalake.DeltaTable, "metadata", "delta-rs: metadata")
    clock.wrap(TableMerger, "execute", "delta-rs: MERGE execute (+ commit)")
    clock.wrap(deltalake, "write_deltalake", "delta-rs: append (+ commit)")


def delta_rs_write_before(
    path: str, schema: Any, batch: Any, *, application: str, txn_version: int, metadata: dict[str, Any],
    storage: Any, known_log: Any = None,
) -> int:
    """`delta_rs_writer.write_batch` before the kept tables (`--variants 'before:writer=delta-rs,delta_rs=before'`):
    a fresh `DeltaTable` load per write, and every batch a MERGE with the operation-testing clauses (no DELETE
    for a delete-only batch, no plain clauses for one without deletes)."""
    import json as json_module

    from deltalake import CommitProperties, DeltaTable, PostCommitHookProperties, Transaction, write_deltalake

    from cdc_lib.model.types import spark_type_ddl
    from cdc_lib.sink import delta_log
    from cdc_lib.sink.commits import OPERATION_COLUMN
    from cdc_lib.sink.delta_rs import file_layout
    from cdc_lib.sink.delta_rs import writer as delta_rs_writer
    from cdc_lib.sink.delta_rs.writer import quote

    table = DeltaTable(delta_rs_writer.table_uri(path), storage_options=delta_rs_writer.storage_options(path, storage))
    committed = table.transaction_version(application)
    if committed is not None and committed >= txn_version:
        return delta_log.version_of(path, application, txn_version, storage)
    loaded = table.version()
    user_metadata = json_module.dumps({**metadata, "app_id": application, "writer": "delta-rs"}, sort_keys=True)
    commit = CommitProperties(custom_metadata={"userMetadata": user_metadata},
                              app_transactions=[Transaction(app_id=application, version=txn_version)])
    hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
    if batch.append:
        rows = batch.records.filter(delta_rs_writer._is_upsert(batch.records)).drop_columns([OPERATION_COLUMN])
        write_deltalake(table, rows, mode="append", commit_properties=commit, post_commithook_properties=hooks)
    else:
        condition = " AND ".join(f"t.{quote(key)} = s.{quote(key)}" for key in schema.primary_key)
        if batch.key_range is not None and not batch.truncated:
            lead = schema.primary_key[0]
            ddl = spark_type_ddl(next(column for column in schema.columns if column.name == lead))
            condition += f" AND {file_layout.ranges_predicate(f't.{quote(lead)}', ddl, [batch.key_range])}"
        columns = {quote(name): f"s.{quote(name)}" for name in schema.column_names}
        merger = (
            table.merge(batch.records, condition, source_alias="s", target_alias="t", commit_properties=commit,
                        post_commithook_properties=hooks)
            .when_matched_delete(f"s.{OPERATION_COLUMN} = 'd'")
            .when_matched_update(columns)
            .when_not_matched_insert(columns, predicate=f"s.{OPERATION_COLUMN} = 'u'")
        )
        if batch.truncated:
            merger = merger.when_not_matched_by_source_delete()
        merger.execute()
    version = table.version()
    assert version > loaded, "a MERGE that changed nothing (the bench's batches always change rows)"
    interval = int(table.metadata().configuration.get("delta.checkpointInterval")
                   or delta_rs_writer.SPARK_CHECKPOINT_INTERVAL)
    if version % interval == 0:
        table.create_checkpoint()
    return version


def spark_jobs_since(spark: Any, first_job: int) -> list[str]:
    """Descriptions (or call sites) of the Spark jobs numbered from `first_job` on."""
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    described = []
    for index in range(jobs.size()):
        job = jobs.apply(index)
        if job.jobId() >= first_job:
            description = job.description()
            text = description.get() if description.isDefined() else job.name()
            described.append(str(text).split("\n")[0][:90])
    return described


def next_job_id(spark: Any) -> int:
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    return max((jobs.apply(index).jobId() for index in range(jobs.size())), default=-1) + 1


@contextmanager
def _measured(clock: StepClock, spark: Any, profile: Path | None = None) -> Iterator[dict[str, Any]]:
    clock.reset()
    first_job = next_job_id(spark)
    figures: dict[str, Any] = {}
    # cProfile sees the calling thread only: the writers' threads show as waits unless the variant sets threads=1.
    profiler = cProfile.Profile() if profile is not None else None
    started, cpu = time.perf_counter(), os.times()
    if profiler is not None:
        profiler.enable()
    yield figures
    if profiler is not None:
        profiler.disable()
    figures["wall_s"] = time.perf_counter() - started
    # This process's CPU seconds (every thread, delta-rs's too; not MariaDB's, not a JVM's): on a loaded machine
    # the wall time mostly says how long the batch waited for a core, its CPU time what it needed.
    after = os.times()
    figures["cpu_s"] = (after.user - cpu.user) + (after.system - cpu.system)
    if profiler is not None and profile is not None:
        profiler.dump_stats(profile)
        figures["profile"] = str(profile)
    figures["steps"] = {step: {"thread_s": round(seconds, 3), "calls": clock.calls[step]}
                        for step, seconds in sorted(clock.seconds.items(), key=lambda item: -item[1])}
    jobs = spark_jobs_since(spark, first_job)
    figures["spark_jobs"] = len(jobs)
    figures["spark_job_kinds"] = dict(collections.Counter(jobs).most_common(12))
    if len(jobs) <= 30:
        figures["spark_job_sequence"] = jobs


def one_case(server: LocalMariaDB, work: Path, clock: StepClock, *, tables: int, changes: int, repeat: int,
             server_id: int, extra_batch: str = "", variants: dict[str, dict[str, str]] | None = None,
             profile: Path | None = None) -> dict[str, Any]:
    database = f"many_{tables}"
    names = create_tables(server, database, count=tables, rows_per_table=changes // tables)
    config = pipeline_config(work, server.port, f"many_{tables}", [f"{database}.*"], server_id, max_events=1_000_000)
    if extra_batch:
        config.write_text(config.read_text().replace("max_seconds: 600", f"max_seconds: 600, {extra_batch}"))
    pipeline = Pipeline(load_config(config))
    pipeline.snapshot()
    rounds = iter(range(repeat * max(1, len(variants or {})) + 1))

    def batch() -> None:
        write_changes(server, names, changes // tables, next(rounds))
        batches = pipeline.sync(until_caught_up=True)
        carried = sum(result.row_changes for result in batches)
        assert len(batches) == 1 and carried == changes, (len(batches), carried)

    batch()  # warm-up: the first MERGE into each fresh table
    spark = pipeline.spark()
    runs = []
    for index in range(repeat):
        for variant, settings in (variants or {"default": {}}).items():
            profile_file = profile / f"tables{tables}-{variant}-{index}.prof" if profile is not None else None
            with _variant(pipeline, spark, settings):
                with _measured(clock, spark, profile_file) as figures:
                    batch()
            figures["variant"] = variant
            runs.append(figures)
    walls: dict[str, list[float]] = collections.defaultdict(list)
    cpus: dict[str, list[float]] = collections.defaultdict(list)
    for run in runs:
        walls[run["variant"]].append(run["wall_s"])
        cpus[run["variant"]].append(run["cpu_s"])
    return {"tables": tables, "changes": changes, "runs": runs,
            "wall_s": {variant: sorted(values)[len(values) // 2] for variant, values in walls.items()},
            "cpu_s": {variant: sorted(values)[len(values) // 2] for variant, values in cpus.items()}}


@contextmanager
def _variant(pipeline: Pipeline, spark: Any, settings: dict[str, str]) -> Iterator[None]:
    """Spark confs set on the pipeline's session for one batch; five keys are not confs: `threads`
    (batch.apply_threads), `writer` (batch.writer: spark, delta-rs, auto), `engine=before` (the MERGE without
    `spark_writer.merge_settings`), `delta_rs=before` (delta-rs's write as first merged, `delta_rs_write_before`)
    and `rewrite=off` (delta-rs's MERGE instead of binlake's key rewrite, `delta_rs_writer.KEY_REWRITE`)."""
    from cdc_lib.sink.delta_rs import writer as delta_rs_writer
    from cdc_lib.sink.spark import writer as spark_writer

    settings = dict(settings)
    threads = settings.pop("threads", None)
    writer = settings.pop("writer", None)
    engine = settings.pop("engine", None)
    delta_rs = settings.pop("delta_rs", None)
    rewrite = settings.pop("rewrite", None)
    previous = {key: spark.conf.get(key, None) for key in settings}
    config, merge_settings = pipeline.context.config, spark_writer.merge_settings
    for key, value in settings.items():
        spark.conf.set(key, value)
    batch = config.batch
    if threads is not None:
        batch = replace(batch, apply_threads=int(threads))
    if writer is not None:
        batch = replace(batch, writer=writer)  # type: ignore[arg-type]
    object.__setattr__(pipeline.context, "config", replace(config, batch=batch))
    if engine == "before":
        spark_writer.merge_settings = lambda rows: {}  # type: ignore[assignment]
    write_batch, key_rewrite = delta_rs_writer.write_batch, delta_rs_writer.KEY_REWRITE
    delta_rs_writer.KEY_REWRITE = rewrite != "off"
    if delta_rs == "before":
        delta_rs_writer.write_batch = delta_rs_write_before
    try:
        yield
    finally:
        spark_writer.merge_settings = merge_settings
        delta_rs_writer.write_batch, delta_rs_writer.KEY_REWRITE = write_batch, key_rewrite
        object.__setattr__(pipeline.context, "config", config)
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def parse_variants(text: str) -> dict[str, dict[str, str]]:
    """`name:key=value,key=value;name2:…` → {name: {key: value}}; a key without a prefix is a Delta conf."""
    variants: dict[str, dict[str, str]] = {}
    for part in filter(None, text.split(";")):
        name, _, pairs = part.partition(":")
        settings = {}
        for pair in filter(None, pairs.split(",")):
            key, _, value = pair.partition("=")
            plain = key.startswith("spark.") or key in ("threads", "engine", "writer", "delta_rs")
            settings[key if plain else f"spark.databricks.delta.{key}"] = value
        variants[name] = settings
    return variants


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--tables", default="1,20,100")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--batch", default="", help="extra batch settings, e.g. 'apply_threads: 1'")
    parser.add_argument("--variants", default="", help="Spark conf sets run alternately, e.g. "
                        "'base:;nomat:merge.materializeSource=none'")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--profile", type=Path, help="a folder: each timed batch's cProfile statistics (calling "
                        "thread only; a variant with threads=1 profiles the writes too), tables<N>-<variant>-<i>.prof")
    arguments = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="binlake-many-tables-"))
    if arguments.profile is not None:
        arguments.profile.mkdir(parents=True, exist_ok=True)
    server = LocalMariaDB(work / "mariadb", server_id=1).start()
    clock = StepClock()
    instrument(clock)
    results: dict[str, Any] = {"load_before": os.getloadavg()}
    try:
        server.create_cdc_user(USER, PASSWORD)
        for offset, tables in enumerate(int(value) for value in arguments.tables.split(",")):
            case = one_case(server, work, clock, tables=tables, changes=arguments.changes, repeat=arguments.repeat,
                            server_id=7790 + offset, extra_batch=arguments.batch,
                            variants=parse_variants(arguments.variants), profile=arguments.profile)
            results[f"tables_{tables}"] = case
            print(json.dumps(case, indent=1), flush=True)
    finally:
        clock.unwrap()
        server.stop()
    results["load_after"] = os.getloadavg()
    base = results.get("tables_1")
    print(f"load average before {results['load_before']}, after {results['load_after']}")
    for key, case in results.items():
        if key.startswith("tables_"):
            for variant, seconds in case["wall_s"].items():
                ratio = f"  ({seconds / base['wall_s'][variant]:.1f}× 1 table)" if base else ""
                cpu = case["cpu_s"][variant]
                cpu_ratio = f"  ({cpu / base['cpu_s'][variant]:.1f}× 1 table)" if base else ""
                print(f"{case['tables']:>4} tables, {variant}: {seconds:.2f} s{ratio}; CPU {cpu:.2f} s{cpu_ratio}")
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
