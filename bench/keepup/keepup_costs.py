"""Fixed and per-table costs of keeping up (issue 12), each against its own baseline.

many tables    one batch of N changes over 100 tables vs one batch of N changes in 1 table (median sync s)
small snapshot snapshot of a 200k-row table vs mysqldump --single-transaction (the fixed costs of a snapshot)
process cost   a new process that applies a few changes: `dagster job execute` of the sync job (as a
               schedule's run does: process, definitions, Spark, MERGE) and `binlake sync`; seconds from
               process start to the Delta commit file, and to the process exit; and a process that only
               imports the engine and gets its SparkSession ready (the share of the fixed cost Spark takes)
long log       a table whose `_delta_log` holds 10,000 commits vs one with 10: `read_log_tail`, an idle
               sync, a one-row sync (MERGE) and a status call, each in-process and warm
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import ROOT, create_table, installed_like_environment, pipeline_config
from cdc_lib.config.load import load_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink import delta_log


def median_seconds(repeat: int, measure: Callable[[], float]) -> tuple[float, list[float]]:
    values = [measure() for _ in range(repeat)]
    return statistics.median(values), values


def write_changes(server: LocalMariaDB, tables: list[str], per_table: int, round_number: int) -> None:
    """`per_table` changes in each table, one transaction per table: half new keys, half updates."""
    connection = server.admin_connection()
    inserts = per_table // 2
    updates = per_table - inserts
    first = 1_000_000 + round_number * inserts
    try:
        with connection.cursor() as cursor:
            for table in tables:
                database = table.split(".")[0]
                cursor.execute("BEGIN")
                cursor.execute(f"INSERT INTO {table} SELECT seq, 7, 12.25, 'new', 'fresh', NOW(6), NOW(6) "
                               f"FROM {database}.seq_{first}_to_{first + inserts - 1}")
                cursor.execute(f"UPDATE {table} SET amount = amount + 1, updated = NOW(6) WHERE id <= {updates}")
                cursor.execute("COMMIT")
    finally:
        connection.close()


def many_tables(server: LocalMariaDB, work: Path, *, changes: int, tables: int, repeat: int) -> dict[str, Any]:
    """Median seconds of one sync batch carrying `changes` changes over `tables` tables vs over one table."""
    results: dict[str, Any] = {"changes": changes, "tables": tables}
    for label, database, count, server_id in (("one", "keepup_one", 1, 7721), ("many", "keepup_many", tables, 7722)):
        figures = _one_batch_case(server, work, label=label, database=database, count=count, changes=changes,
                                  server_id=server_id, repeat=repeat)
        results.update({f"{label}_{key}": value for key, value in figures.items()})
    results["many_s"], results["one_s"] = results["many_batch_s"], results["one_batch_s"]
    results["many_vs_one"] = results["many_s"] / results["one_s"]
    return results


def create_tables(server: LocalMariaDB, database: str, *, count: int, rows_per_table: int) -> list[str]:
    """A new database with `count` bench tables `t001`… of `rows_per_table` rows each; their names."""
    server.execute(f"CREATE DATABASE {database}")
    names = [f"{database}.t{index:03d}" for index in range(1, count + 1)]
    connection = server.admin_connection(database)
    try:
        for name in names:
            create_table(connection, name.split(".")[1], rows_per_table)
    finally:
        connection.close()
    return names


def _one_batch_case(server: LocalMariaDB, work: Path, *, label: str, database: str, count: int, changes: int,
                    server_id: int, repeat: int) -> dict[str, Any]:
    names = create_tables(server, database, count=count, rows_per_table=changes // count)
    config = pipeline_config(work, server.port, f"keepup_{label}", [f"{database}.*"], server_id,
                             max_events=1_000_000)
    pipeline = Pipeline(load_config(config))
    started = time.perf_counter()
    pipeline.snapshot()
    snapshot_s = time.perf_counter() - started
    rounds = iter(range(repeat + 1))

    def one_batch() -> float:
        write_changes(server, names, changes // count, next(rounds))
        started = time.perf_counter()
        batches = pipeline.sync(until_caught_up=True)
        seconds = time.perf_counter() - started
        carried = sum(batch.row_changes for batch in batches)
        assert len(batches) == 1 and carried == changes, (len(batches), carried)
        return seconds

    one_batch()  # the first MERGE into each fresh table warms Spark's plans; not counted
    batch_s, runs = median_seconds(repeat, one_batch)
    return {"snapshot_s": snapshot_s, "batch_s": batch_s, "runs": runs}


def small_snapshot(server: LocalMariaDB, work: Path, *, rows: int, repeat: int) -> dict[str, Any]:
    """Snapshot of a `rows`-row table vs mysqldump of it (medians; the snapshot in a warm SparkSession, end to
    end; bench/snapshot/snapshot_profile.py splits it into its steps)."""
    connection = server.admin_connection("keepup")
    try:
        create_table(connection, "small_snapshot", rows)
    finally:
        connection.close()
    dump = shutil.which("mariadb-dump") or shutil.which("mysqldump") or "mysqldump"

    def dump_seconds() -> float:
        started = time.perf_counter()
        subprocess.run([dump, "--single-transaction", f"--socket={server.socket_path}", "-uroot", "keepup",
                        "small_snapshot"], stdout=subprocess.DEVNULL, check=True)
        return time.perf_counter() - started

    pipeline = Pipeline(load_config(pipeline_config(work, server.port, "keepup_small", ["keepup.small_snapshot"],
                                                    7723)))

    def snapshot_seconds() -> float:
        # The whole call, as a user waits for it: plan, waves, install, catalog; `result.seconds` stops before
        # the install.
        started = time.perf_counter()
        pipeline.snapshot()
        return time.perf_counter() - started

    pipeline.snapshot()  # a warm session, as a running code location has: the JVM start is process_cost's
    dump_s, dump_runs = median_seconds(repeat, dump_seconds)
    snapshot_s, snapshot_runs = median_seconds(repeat, snapshot_seconds)
    return {"rows": rows, "mysqldump_s": dump_s, "snapshot_s": snapshot_s, "mysqldump_runs": dump_runs,
            "snapshot_runs": snapshot_runs, "snapshot_vs_mysqldump": dump_s / snapshot_s}


# A process that only gets ready to MERGE: imports, config, SparkSession with the Delta jars, one tiny job.
_SPARK_READY = """
import sys, time
from cdc_lib.config.load import load_config
from cdc_lib.pipeline.pipeline import Pipeline
imported = time.time()
spark = Pipeline(load_config(sys.argv[1])).spark()
spark.range(1).count()
print(imported, time.time())
"""


def _newest_commit_mtime(table_path: str) -> float:
    log = Path(table_path) / "_delta_log"
    return max(entry.stat().st_mtime for entry in log.iterdir() if entry.name.endswith(".json"))


def process_cost(server: LocalMariaDB, work: Path, *, repeat: int) -> dict[str, Any]:
    """A new process applying 10 changes: `dagster job execute` of the sync job, and `binlake sync`."""
    connection = server.admin_connection("keepup")
    try:
        create_table(connection, "scheduled", 1000)
    finally:
        connection.close()
    config = pipeline_config(work, server.port, "keepup_scheduled", ["keepup.scheduled"], 7724)
    pipeline = Pipeline(load_config(config))
    pipeline.snapshot()
    table_path = pipeline.table_path("keepup.scheduled")
    dagster_home = Path(tempfile.mkdtemp(prefix="dagster-home-", dir=work))
    environment = {**installed_like_environment(work), "BINLAKE_CONFIG": str(config),
                   "DAGSTER_HOME": str(dagster_home), "TZ": "UTC", "PYTHONPATH": str(ROOT)}
    dagster = str(Path(sys.executable).with_name("dagster"))
    commands = {
        "dagster": [dagster, "job", "execute", "-m", "orchestration.definitions",
                    "-j", "binlake_keepup_scheduled_sync"],
        "cli": [sys.executable, "-m", "cdc_lib.cli", "--config", str(config), "sync", "--json"],
    }
    rounds = iter(range(2 * repeat))
    results: dict[str, Any] = {}
    for label, command in commands.items():
        commit_runs, exit_runs = [], []
        for _ in range(repeat):
            first = 10_000 + next(rounds) * 10
            server.execute(f"INSERT INTO keepup.scheduled SELECT seq, 7, 12.25, 'new', 'x', NOW(6), NOW(6) "
                           f"FROM keepup.seq_{first}_to_{first + 9}")
            before = _newest_commit_mtime(table_path)
            started = time.time()
            done = subprocess.run(command, capture_output=True, text=True, env=environment, cwd=ROOT, timeout=900)
            exited = time.time() - started
            if done.returncode != 0:
                raise RuntimeError(f"{label} run failed: {done.stderr[-1500:]}")
            committed = _newest_commit_mtime(table_path)
            if committed <= before:
                raise RuntimeError(f"the {label} run wrote no Delta commit")
            commit_runs.append(committed - started)
            exit_runs.append(exited)
        results[f"{label}_to_commit_s"] = statistics.median(commit_runs)
        results[f"{label}_exit_s"] = statistics.median(exit_runs)
        results[f"{label}_to_commit_runs"] = commit_runs
    ready_runs, import_runs = [], []
    for _ in range(repeat):
        started = time.time()
        done = subprocess.run([sys.executable, "-c", _SPARK_READY, str(config)], capture_output=True, text=True,
                              env=environment, cwd=ROOT, timeout=600, check=True)
        imported, ready = (float(value) for value in done.stdout.split())
        import_runs.append(imported - started)
        ready_runs.append(ready - started)
    results["process_imports_s"] = statistics.median(import_runs)
    results["spark_ready_s"] = statistics.median(ready_runs)
    return results


def _filler_commits(table_path: str, first: int, last: int) -> None:
    """Commits `first`..`last` that carry only commitInfo: valid Delta commits that change no data."""
    log = Path(table_path) / "_delta_log"
    stamp = int(time.time() * 1000)
    for version in range(first, last + 1):
        info = {"commitInfo": {"timestamp": stamp + version, "operation": "bench filler",
                               "operationParameters": {}, "isBlindAppend": True}}
        (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n")


def long_log(server: LocalMariaDB, work: Path, *, commits: int, repeat: int) -> dict[str, Any]:
    """Per-batch costs on a table whose log holds `commits` commits vs one holding 10.

    The log is built from a binlake snapshot, then commitInfo-only filler commits up to `commits - 2`, a
    checkpoint there (delta-rs, as delta-spark keeps one every 10 commits), then a real binlake MERGE.
    """
    results: dict[str, Any] = {"commits": commits}
    for label, count, server_id in (("short", 10, 7725), ("long", commits, 7726)):
        figures = _log_case(server, work, label=label, count=count, server_id=server_id, repeat=repeat)
        results.update({f"{label}_{key}": value for key, value in figures.items()})
    for measure in ("read_log_tail", "idle_sync", "status", "one_row_sync"):
        results[f"{measure}_long_vs_short"] = results[f"long_{measure}_s"] / results[f"short_{measure}_s"]
    return results


def _log_case(server: LocalMariaDB, work: Path, *, label: str, count: int, server_id: int,
              repeat: int) -> dict[str, Any]:
    from deltalake import DeltaTable

    name = f"keepup.log_{label}"
    connection = server.admin_connection("keepup")
    try:
        create_table(connection, f"log_{label}", 100)
    finally:
        connection.close()
    pipeline = Pipeline(load_config(pipeline_config(work, server.port, f"keepup_log_{label}", [name], server_id)))
    pipeline.snapshot()
    path = pipeline.table_path(name)
    started = time.perf_counter()
    _filler_commits(path, 1, count - 2)
    DeltaTable(path).create_checkpoint()
    figures: dict[str, Any] = {"build_s": time.perf_counter() - started}
    keys = iter(range(5_000_000, 5_000_000 + 10 * repeat + 10))

    def one_row_sync() -> float:
        server.execute(f"INSERT INTO {name} VALUES ({next(keys)}, 7, 12.25, 'new', 'x', NOW(6), NOW(6))")
        started = time.perf_counter()
        batches = pipeline.sync()
        assert batches[0].row_changes == 1
        return time.perf_counter() - started

    def timed(call: Callable[[], object]) -> float:
        started = time.perf_counter()
        call()
        return time.perf_counter() - started

    one_row_sync()  # the first MERGE after the filler commits loads the log from the checkpoint
    assert DeltaTable(path).version() == count - 1, "the log must hold the planned number of commits"
    application = pipeline.application(name)
    calls = max(repeat, 5)
    figures["read_log_tail_s"], _ = median_seconds(
        calls, lambda: timed(lambda: delta_log.read_log_tail(path, application=application))
    )
    figures["idle_sync_s"], _ = median_seconds(calls, lambda: timed(pipeline.sync))
    figures["status_s"], _ = median_seconds(calls, lambda: timed(pipeline.status))
    figures["one_row_sync_s"], figures["one_row_sync_runs"] = median_seconds(repeat, one_row_sync)
    figures["log_files"] = len(list((Path(path) / "_delta_log").iterdir()))
    return figures
