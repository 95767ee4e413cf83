"""Where one snapshot's time goes (issue 12, docs/performance.md "Snapshot speed").

For each table size: the table is created (the keep-up workload's columns), then, `repeat` times and
interleaved so that the machine's load hits both alike, `mysqldump --single-transaction` of it and one
`Pipeline.snapshot()` of it in a warm SparkSession (one snapshot first warms the JVM, not counted). Each
snapshot runs with the engine's steps wrapped by a clock that charges every second to the innermost step
running on the main thread, so the steps add up to the wall time ("other" is what no step covers).

With `--write-stages`, each run also ends the same chunk plan's read in different sinks: a no-op sink
(JDBC read + type casts), plain Parquet with each codec, Delta with no column statistics, statistics on the
key columns only, statistics on every column (Delta's default, the first 32 columns), and
`spark_writer.write_snapshot` itself. The differences between those medians split the write into read, Parquet
encoding, Delta's statistics and commit, and what binlake's own commit adds. The last run's Spark jobs are
listed with their start, duration and tasks: the write's seconds outside them are the driver's.

`--writers spark delta-rs` snapshots the table once per `snapshot.writer` in each run, in turn (the order
alternating between runs), each into a lake of its own, in the same process and warm SparkSession. The write
stages also end the read handed to Python as Arrow (`toArrow`), and that Arrow written by delta-rs with binlake's
SetTransaction and metadata; `--stages` picks some of them by label.

Each snapshot's CPU seconds are read from /proc for the JVM, `mariadbd` and this process (delta-rs's threads
included): unlike the wall time, they do not move with the load or the run order.

    python -m bench.snapshot.snapshot_profile --rows 200000 2000000 --repeat 3
    python -m bench.snapshot.snapshot_profile --rows 200000 2000000 --repeat 5 --writers spark delta-rs
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import PASSWORD, USER, create_table, pipeline_config
from cdc_lib.config.load import load_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline


@dataclass
class _Running:
    started: float
    #: Seconds spent in steps called from this one (charged to them, not to it).
    inner: float = 0.0


class StepClock:
    """Seconds per named step, each second charged to the innermost step running (main thread only: the
    lease heartbeat thread renews the snapshot document meanwhile, which costs the snapshot nothing)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._stack: list[_Running] = []

    def wrap(self, step: str, function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread() is not threading.main_thread():
                return function(*args, **kwargs)
            running = _Running(started=time.perf_counter())
            self._stack.append(running)
            try:
                return function(*args, **kwargs)
            finally:
                self._stack.pop()
                spent = time.perf_counter() - running.started
                self.seconds[step] = self.seconds.get(step, 0.0) + spent - running.inner
                self.calls[step] = self.calls.get(step, 0) + 1
                if self._stack:
                    self._stack[-1].inner += spent

        return timed

    @contextmanager
    def patched(self, targets: list[tuple[Any, str, str]]) -> Iterator[StepClock]:
        """Wrap each `(owner, attribute, step)` for the block's duration; put the originals back after."""
        with ExitStack() as undo:
            for owner, attribute, step in targets:
                if not hasattr(owner, attribute):
                    continue  # a step the engine no longer has under this name (moved or merged): not timed
                original = getattr(owner, attribute)
                setattr(owner, attribute, self.wrap(step, original))
                undo.callback(setattr, owner, attribute, original)
            yield self


def _engine_steps() -> list[tuple[Any, str, str]]:
    """The engine's steps of a mirror table's snapshot (names as the calling modules bind them)."""
    from cdc_lib.sink import delta_log
    from cdc_lib.sink.delta_rs import snapshot_wave
    from cdc_lib.sink.spark import writer as spark_writer
    from cdc_lib.snapshot import chunked as chunked_snapshot
    from cdc_lib.snapshot import tables
    from cdc_lib.source import binlog_status, checks
    from cdc_lib.source import server as mysql
    from cdc_lib.state import context as pipeline_context
    from cdc_lib.state import offset_store, snapshot_documents

    return [
        (checks, "check_server_settings", "server settings check"),
        (mysql, "resolve_tables", "describe (tables, columns)"),
        (mysql, "describe_table", "describe (tables, columns)"),
        (binlog_status, "current_position", "wave watermarks (low, high)"),
        (chunked_snapshot, "consistent_low_watermark", "consistent low watermark"),
        (chunked_snapshot, "before_prepared_xa", "consistent low watermark"),
        (chunked_snapshot, "plan_snapshot_chunks", "plan"),
        (chunked_snapshot, "read_document", "document reads"),
        (snapshot_documents.DocumentHandle, "take", "document and lease writes"),
        (snapshot_documents.DocumentHandle, "save", "document and lease writes"),
        (snapshot_documents.DocumentHandle, "release", "document and lease writes"),
        (chunked_snapshot, "read_table", "Spark plan of the read"),
        (pipeline_context.PipelineContext, "spark", "SparkSession (warm)"),
        (spark_writer, "write_snapshot", "write: JDBC read + Parquet + stats + commit"),
        (spark_writer, "append_snapshot_wave", "write: JDBC read + Parquet + stats + commit"),
        (snapshot_wave, "write_wave", "write (delta-rs): JDBC read + Arrow + Parquet + stats + commit"),
        (snapshot_wave, "delta_rs_refusal", "writer choice (table settings)"),
        (spark_writer, "_properties", "write: table properties (DESCRIBE DETAIL)"),
        (spark_writer, "table_features", "write: protocol features (DESCRIBE DETAIL)"),
        (spark_writer, "_drop_deletion_vectors", "write: protocol features (DESCRIBE DETAIL)"),
        (spark_writer, "table_exists", "Delta log reads"),
        (spark_writer, "_version_of", "Delta log reads"),
        (spark_writer, "written_rows", "Delta log reads"),
        (delta_log, "read_log_tail", "Delta log reads"),
        (tables, "try_install", "install"),
        (tables, "register_after_snapshot", "catalog registration"),
        (offset_store.LocalOffsetStore, "write", "offset saves (pipeline state)"),
        (offset_store.LocalOffsetStore, "read", "offset reads (pipeline state)"),
    ]


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far, all its threads (delta-rs's included in Python's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _jvm_pid() -> int | None:
    """The Spark driver JVM this process launched (a child or grandchild running java), if any."""
    def children(pid: int) -> list[int]:
        found = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            found += [int(child) for child in (task / "children").read_text().split()]
        return found

    for child in children(os.getpid()):
        for candidate in [child, *children(child)]:
            if b"java" in Path(f"/proc/{candidate}/cmdline").read_bytes():
                return candidate
    return None


def _cpu_snapshot(mariadb_pid: int | None) -> dict[str, float]:
    jvm = _jvm_pid()
    found = {"python (delta-rs included)": _cpu_seconds(os.getpid())}
    if jvm is not None:
        found["JVM"] = _cpu_seconds(jvm)
    if mariadb_pid is not None:
        found["mariadbd"] = _cpu_seconds(mariadb_pid)
    return found


def _dump_seconds(server: LocalMariaDB, database: str, table: str) -> float:
    dump = shutil.which("mariadb-dump") or shutil.which("mysqldump") or "mysqldump"
    started = time.perf_counter()
    subprocess.run([dump, "--single-transaction", f"--socket={server.socket_path}", "-uroot", database, table],
                   stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def profile_table(server: LocalMariaDB, work: Path, *, rows: int, repeat: int, server_id: int,
                  write_stages: bool, codecs: list[str], settings: str = "",
                  spark_conf: dict[str, str] | None = None, only_stages: list[str] | None = None,
                  writers: list[str] | None = None) -> dict[str, Any]:
    """`repeat` interleaved runs of mysqldump and a warm snapshot of a `rows`-row table, with the step clock.

    With several `writers` (`snapshot.writer` values), each run snapshots the table once per writer, in turn,
    into a pipeline (and lake) of its own, in the same process and SparkSession; the first writer's figures are
    the top-level ones, every writer's are under `by_writer`."""
    table = f"profile_{rows}"
    connection = server.admin_connection("keepup")
    try:
        create_table(connection, table, rows)
    finally:
        connection.close()
    chosen = writers or [""]
    pipelines: dict[str, Pipeline] = {}
    first_s: dict[str, float] = {}
    for writer in chosen:
        name = f"profile_{rows}" + (f"_{writer.replace('-', '_')}" if writer else "")
        config = pipeline_config(work, server.port, name, [f"keepup.{table}"], server_id)
        if settings:
            config.write_text(config.read_text() + settings.replace(";", "\n") + "\n")
        if writer:
            config.write_text(config.read_text() + f"snapshot: {{writer: {writer}}}\n")
        pipelines[writer] = Pipeline(load_config(config))
        for key, value in (spark_conf or {}).items():
            pipelines[writer].spark().conf.set(key, value)
        started = time.perf_counter()
        pipelines[writer].snapshot()  # warms the JVM and this table's first write: not counted, reported apart
        first_s[writer] = time.perf_counter() - started
    pipeline = pipelines[chosen[0]]
    dumps: list[float] = []
    walls: dict[str, list[float]] = {writer: [] for writer in chosen}
    steps: dict[str, list[dict[str, float]]] = {writer: [] for writer in chosen}
    cpu: dict[str, list[dict[str, float]]] = {writer: [] for writer in chosen}
    jobs: dict[str, list[SparkJob]] = {}
    spark = pipeline.spark()
    with ExitStack() as cleanup:
        stages = _write_stages(pipeline, f"keepup.{table}", codecs=codecs, cleanup=cleanup) if write_stages else {}
        if only_stages:
            stages = {stage: run for stage, run in stages.items() if any(part in stage for part in only_stages)}
        for run in stages.values():
            run()  # each sink's first job compiles its own code paths: not counted
        stage_seconds: dict[str, list[float]] = {stage: [] for stage in stages}
        for round_number in range(repeat):
            # Interleaved: dump, snapshot and every write stage in turn, so the machine's load (other agents')
            # hits them alike. (Run one after the other, the snapshot's write and the bare Delta write of the
            # same read once differed by 2.9 s at 200k rows; interleaved, by ~0.4 s: docs/performance.md.)
            dumps.append(_dump_seconds(server, "keepup", table))
            # The writers' order alternates between rounds: the first snapshot of a round was measured ~20 %
            # faster than the second, whichever it was (docs/performance.md, "Pipelining the wave").
            for writer in chosen if round_number % 2 == 0 else chosen[::-1]:
                clock = StepClock()
                known = _last_job_id(spark)
                with clock.patched(_engine_steps()):
                    origin_ms = _jvm_millis(spark)
                    cpu_before = _cpu_snapshot(server.pid)
                    started = time.perf_counter()
                    result = pipelines[writer].snapshot()[0]
                    wall = time.perf_counter() - started
                    cpu_after = _cpu_snapshot(server.pid)
                cpu[writer].append({name: cpu_after[name] - cpu_before[name] for name in cpu_after
                                    if name in cpu_before})
                jobs[writer] = _jobs_since(spark, known, origin_ms)
                assert result.rows == rows, (writer, result.rows, rows)
                walls[writer].append(wall)
                clock.seconds["other"] = wall - sum(clock.seconds.values())
                steps[writer].append(clock.seconds)
            for stage, run in stages.items():
                started = time.perf_counter()
                run()
                stage_seconds[stage].append(time.perf_counter() - started)
    dump_s = statistics.median(dumps)
    by_writer = {writer: _writer_figures(walls[writer], steps[writer], jobs[writer], first_s[writer], dump_s,
                                         cpu[writer]) for writer in chosen}
    figures: dict[str, Any] = {"rows": rows, "chunks": result.chunks, "mysqldump_s": dump_s, "mysqldump_runs": dumps,
                               **by_writer[chosen[0]]}
    if writers:
        figures["by_writer"] = by_writer
    if stages:
        figures["write_stages_s"] = {stage: statistics.median(values) for stage, values in stage_seconds.items()}
    return figures


def _writer_figures(walls: list[float], steps: list[dict[str, float]], jobs: list[SparkJob], first_s: float,
                    dump_s: float, cpu: list[dict[str, float]]) -> dict[str, Any]:
    names = sorted({name for run in steps for name in run}, key=lambda name: -statistics.median(
        run.get(name, 0.0) for run in steps))
    snapshot_s = statistics.median(walls)
    return {
        "first_snapshot_s": first_s, "snapshot_s": snapshot_s, "snapshot_runs": walls,
        "steps_s": {name: statistics.median(run.get(name, 0.0) for run in steps) for name in names},
        "spark_jobs_of_last_run": [job.__dict__ for job in jobs],
        "spark_job_seconds_of_last_run": sum(job.seconds for job in jobs),
        "last_run_s": walls[-1], "snapshot_vs_mysqldump": dump_s / snapshot_s,
        # CPU seconds per process and snapshot (medians): unlike wall time, not moved by the run order or by the
        # share of the cores other processes take.
        "cpu_s": {name: statistics.median(run[name] for run in cpu) for name in (cpu[0] if cpu else {})},
    }


@dataclass(frozen=True)
class SparkJob:
    """One Spark job of a snapshot: when it started (seconds after the snapshot did), how long it ran, its tasks
    and its description (Delta names its state reconstruction "Compute snapshot for version: N")."""

    job: int
    start_s: float
    seconds: float
    tasks: int
    name: str


def _jvm_millis(spark: Any) -> int:
    return int(spark.sparkContext._jvm.System.currentTimeMillis())


def _job_data(spark: Any) -> list[Any]:
    # The status store keeps each job's submission and completion times, which the Python status tracker does
    # not expose; it is kept with the UI off too.
    listed = spark.sparkContext._jsc.sc().statusStore().jobsList(None).iterator()
    found = []
    while listed.hasNext():
        found.append(listed.next())
    return found


def _last_job_id(spark: Any) -> int:
    return max((int(job.jobId()) for job in _job_data(spark)), default=-1)


def _jobs_since(spark: Any, after: int, origin_ms: int) -> list[SparkJob]:
    """The jobs after job `after`, in order, timed against `origin_ms` (the JVM's clock when the run began)."""
    jobs = []
    for data in _job_data(spark):
        if int(data.jobId()) <= after:
            continue
        submitted, completed = data.submissionTime(), data.completionTime()
        start_ms = submitted.get().getTime() if submitted.isDefined() else origin_ms
        end_ms = completed.get().getTime() if completed.isDefined() else start_ms
        description = data.description().get() if data.description().isDefined() else data.name()
        jobs.append(SparkJob(job=int(data.jobId()), start_s=(start_ms - origin_ms) / 1000,
                             seconds=(end_ms - start_ms) / 1000, tasks=int(data.numTasks()),
                             name=str(description)[:80]))
    return sorted(jobs, key=lambda job: job.job)


def _write_stages(pipeline: Pipeline, name: str, *, codecs: list[str], cleanup: ExitStack
                  ) -> dict[str, Callable[[], object]]:
    """The snapshot's read (its chunk plan, all chunks in one Spark job) ended in each sink, one callable each.
    The last is `spark_writer.write_snapshot` itself (SetTransaction, user metadata, overwriteSchema) on a table
    of its own: the snapshot's write without the chunked engine around it."""
    from cdc_lib.model.tables import TableRef
    from cdc_lib.sink.spark import writer as spark_writer
    from cdc_lib.snapshot.jdbc_read import plan_snapshot_chunks, read_table
    from cdc_lib.source.server import describe_table, source_connection

    config = pipeline.config
    spark = pipeline.context.spark()
    with source_connection(config.source) as connection:
        schema = describe_table(connection, TableRef.parse(name))
        plan = plan_snapshot_chunks(connection, schema, rows_per_chunk=config.snapshot.chunk_rows())
    predicates = plan.predicates  # every chunk in one job: the whole table, as mysqldump reads it
    scratch = Path(config.sink.path) / "_profile_write_stages"
    cleanup.callback(shutil.rmtree, scratch, True)
    keys = ",".join(schema.primary_key)

    def frame() -> Any:
        return read_table(spark, config.source, schema, predicates)

    stages: dict[str, Callable[[], object]] = {
        "JDBC read + casts (noop sink)": lambda: frame().write.format("noop").mode("overwrite").save(),
    }
    for codec in codecs:
        stages[f"+ Parquet {codec}"] = functools.partial(
            lambda codec: frame().write.mode("overwrite").option("compression", codec).parquet(
                str(scratch / f"parquet_{codec}")), codec)
    for label, options in (
        ("+ Delta, no column stats", {"delta.dataSkippingNumIndexedCols": "0"}),
        ("+ Delta, stats on key columns", {"delta.dataSkippingStatsColumns": keys}),
        ("+ Delta, stats on all columns", {}),
    ):
        target = scratch / label.split(",")[1].strip().replace(" ", "_")
        stages[label] = functools.partial(
            lambda options, target: frame().write.format("delta").mode("overwrite").options(**options).save(
                str(target)), options, target)
    commits = iter(range(1, 1_000_000))
    stages["+ write_snapshot (txn, metadata)"] = lambda: spark_writer.write_snapshot(
        spark, frame(), str(scratch / "write_snapshot"), application="snapshot-profile",
        txn_version=next(commits), metadata={"table": name})
    # The second engine: the same read handed to Python as Arrow (Spark's own Arrow collect), then written by
    # delta-rs (Rust Parquet writer and statistics) in one commit with the same SetTransaction and metadata.
    stages["Spark → Arrow (toArrow, no write)"] = lambda: frame().toArrow()
    rs_commits = iter(range(1, 1_000_000))
    stages["+ delta-rs write (toArrow → write_deltalake)"] = lambda: _delta_rs_overwrite(
        frame().toArrow(), str(scratch / "delta_rs"), application="snapshot-profile",
        txn_version=next(rs_commits), metadata={"table": name, "kind": "snapshot"})
    return stages


def _delta_rs_overwrite(table: Any, path: str, *, application: str, txn_version: int,
                        metadata: dict[str, Any]) -> None:
    from deltalake import CommitProperties, Transaction, write_deltalake

    write_deltalake(path, table, mode="overwrite", schema_mode="overwrite",
                    configuration={"delta.enableDeletionVectors": "false"},
                    commit_properties=CommitProperties(
                        custom_metadata={"userMetadata": json.dumps({**metadata, "app_id": application})},
                        app_transactions=[Transaction(app_id=application, version=txn_version)]))


def print_profile(figures: dict[str, Any]) -> None:
    for writer, figured in (figures.get("by_writer") or {"": figures}).items():
        label = f" [snapshot.writer: {writer}]" if writer else ""
        print(f"\n{figures['rows']:,} rows, {figures['chunks']} chunk(s){label}: "
              f"snapshot {figured['snapshot_s']:.2f} s, "
              f"mysqldump {figures['mysqldump_s']:.2f} s → {figured['snapshot_vs_mysqldump']:.2f}× "
              f"(medians of {len(figured['snapshot_runs'])}: {_runs(figured['snapshot_runs'])}; mysqldump "
              f"{_runs(figures['mysqldump_runs'])}; the first, of a new table, "
              f"took {figured['first_snapshot_s']:.2f} s)")
        if figured.get("cpu_s"):
            print("  CPU seconds per snapshot: " + ", ".join(f"{name} {seconds:.2f}"
                                                         for name, seconds in figured["cpu_s"].items()))
        for step, seconds in figured["steps_s"].items():
            if seconds >= 0.0005:
                print(f"  {step:<60} {seconds:7.3f} s  {100 * seconds / figured['snapshot_s']:5.1f} %")
        jobs = figured["spark_jobs_of_last_run"]
        print(f"  Spark jobs of the last run ({figured['last_run_s']:.2f} s): {len(jobs)}, "
              f"{figured['spark_job_seconds_of_last_run']:.2f} s in jobs, the rest on the driver")
        for job in jobs:
            print(f"    +{job['start_s']:6.3f} s {job['seconds']:6.3f} s {job['tasks']:3d} tasks  {job['name']}")
    stages = figures.get("write_stages_s")
    if stages:
        print("  the write alone, by sink:")
        for stage, seconds in stages.items():
            print(f"    {stage:<46} {seconds:7.3f} s  {figures['mysqldump_s'] / seconds:5.2f}× mysqldump")


def _runs(seconds: list[float]) -> str:
    return ", ".join(f"{value:.2f}" for value in seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 2_000_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-stages", action="store_true", help="also time the write alone, by sink")
    parser.add_argument("--codecs", nargs="*", default=["snappy", "zstd", "lz4"])
    parser.add_argument("--writers", nargs="*", default=[], help="snapshot.writer values to snapshot with in turn, "
                        "each run (e.g. spark delta-rs); none: the config's default")
    parser.add_argument("--stages", nargs="*", default=[], help="only the write stages whose label holds one of "
                        "these (e.g. 'noop' 'stats on all' 'write_snapshot' 'Arrow' 'delta-rs')")
    parser.add_argument("--settings", default="", help="YAML lines added to the pipeline config, split on ';' "
                        "(e.g. 'snapshot: {rows_per_chunk: 100000}')")
    parser.add_argument("--spark-conf", nargs="*", default=[], help="key=value session settings for the run")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="binlake-snapshot-profile-"))
    server = LocalMariaDB(work / "mariadb", server_id=1).start()
    results = []
    try:
        server.create_cdc_user(USER, PASSWORD)
        server.execute("CREATE DATABASE keepup")
        for index, rows in enumerate(arguments.rows):
            figures = profile_table(server, work, rows=rows, repeat=arguments.repeat, server_id=7790 + index,
                                    write_stages=arguments.write_stages, codecs=arguments.codecs,
                                    settings=arguments.settings, only_stages=arguments.stages,
                                    writers=arguments.writers,
                                    spark_conf=dict(item.split("=", 1) for item in arguments.spark_conf))
            print_profile(figures)
            results.append(figures)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
