"""Where a followed row's time goes (issue 12): one follow trial at a fixed rate, with time accounting.

Starts its own MariaDB; for each variant creates a keep-up table (`bench.keepup_load`), snapshots it, and
runs `bench.keepup.follow_trial` (the load writer at `--rate` rows/s in its own process, this process syncing
back to back) with the steps of a batch timed: the binlog read and decode (`read_batch`, wall and CPU of the
thread that runs it), staging to Arrow, the delta-rs write (load, MERGE or append, commit), the offsets save,
and the rest of `sync` (lease, server checks, listings). CPU of MariaDB (from /proc), of the load writer (a
reaped child) and of this process over each trial say how much of the 2 cores is left for binlake.

    python -m bench.keepup_profile --workload mixed --rate 50000 --seconds 60 [--variants base,...]
    python -m bench.keepup_profile --kept-table-growth 1000     (no MariaDB: delta-rs appends only)

Variants (alternated in one process):
  follow   `cdc_lib.pipeline.follow` as `bench.keepup` now follows: open-ended read-ahead with the cycle floor (a read
           that follows one which reached the binlog end begins a poll after it), table maps parsed once per
           reader connection, the fold staged to Arrow a column at a time
  nofloor  `follow` without the cycle floor: the next read begins as soon as the last one ended (batches back
           to back, as before the floor)
  sync     the same code, but `Pipeline.sync()` back to back (how `bench.keepup` followed before: no read-ahead)
  before   `sync`, with each table map parsed anew and the fold staged as record tuples (the code before)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import keepup
from bench.keepup_load import create_table
from cdc_lib.binlog import replication_library
from cdc_lib.changes.events import TableChanges
from cdc_lib.config.load import load_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline import read_ahead, sync
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.delta_rs import writer as delta_rs_writer
from cdc_lib.sink.spark import writer as spark_writer
from cdc_lib.state import offset_store

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Accounts:
    """Seconds (wall, and CPU of the calling thread) per step, summed over a trial."""

    wall: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    cpu: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Per delta-rs write: (rows staged, appended rather than MERGEd, seconds).
    writes: list[tuple[int, bool, float]] = field(default_factory=list)
    #: Per step, the wall seconds of each call in order: does a step's cost grow over the trial?
    each: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            with self.lock:
                self.each[name].append(time.perf_counter() - wall)
                self.wall[name] += time.perf_counter() - wall
                self.cpu[name] += time.thread_time() - cpu
                self.calls[name] += 1

    def clear(self) -> None:
        self.wall.clear()
        self.cpu.clear()
        self.calls.clear()
        self.writes.clear()
        self.each.clear()


ACCOUNTS = Accounts()


def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with ACCOUNTS.step(name):
            return function(*args, **kwargs)

    return wrapper


def timed_write(function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(path: str, schema: Any, batch: delta_rs_writer.BatchWrite, **kwargs: Any) -> Any:
        started = time.perf_counter()
        with ACCOUNTS.step("delta-rs write (load, MERGE/append, commit)"):
            version = function(path, schema, batch, **kwargs)
        ACCOUNTS.writes.append((batch.records.num_rows, batch.append, time.perf_counter() - started))
        return version

    return wrapper


def write_trend(writes: list[tuple[int, bool, float]]) -> dict[str, Any]:
    """Mean rows and seconds of the first and the last third of the writes: does a write grow with the table?"""
    third = max(1, len(writes) // 3)
    parts = {"first third": writes[:third], "last third": writes[-third:]}
    return {label: {"writes": len(part), "rows": round(sum(w[0] for w in part) / len(part)),
                    "seconds": round(sum(w[2] for w in part) / len(part), 3),
                    "appends": sum(1 for w in part if w[1])} for label, part in parts.items() if part}


def step_trend(each: dict[str, list[float]]) -> dict[str, list[float]]:
    """Per step, its mean milliseconds a call in each fifth of the trial: a cost that grows with the table or
    its log shows as a rising row."""
    trend = {}
    for name, calls in sorted(each.items()):
        fifth = max(1, len(calls) // 5)
        parts = [calls[index:index + fifth] for index in range(0, fifth * 5, fifth)]
        trend[name] = [round(1000 * sum(part) / len(part), 1) for part in parts if part]
    return trend


def instrument() -> None:
    """Wrap the steps of a batch where their callers look them up (module attributes)."""
    sync.read_batch = timed("read+decode (read_batch)", sync.read_batch)
    read_ahead.read_batch = sync.read_batch
    spark_writer._mirror_records = timed("fold → records (before)", spark_writer._mirror_records)
    delta_rs_writer.arrow_records = timed("records → Arrow (before)", delta_rs_writer.arrow_records)
    delta_rs_writer.arrow_fold = timed("fold → Arrow", delta_rs_writer.arrow_fold)
    delta_rs_writer.write_batch = timed_write(delta_rs_writer.write_batch)
    delta_rs_writer._merge = timed("  of which MERGE execute", delta_rs_writer._merge)
    spark_writer.existing_tail = timed("log-tail read", spark_writer.existing_tail)
    offset_store.StateHandle.save = timed("offsets save", offset_store.StateHandle.save)  # type: ignore[method-assign]
    sync.settle_snapshots = timed("snapshot listing", sync.settle_snapshots)
    sync.run_batch = timed("run_batch (whole)", sync.run_batch)


def process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


TABLE_MAPS_KEPT = replication_library.TABLE_MAPS_KEPT


def _fold_of(schema: Any, upserts: list[Any], deleted: list[Any]) -> TableChanges:
    """A fold holding exactly `upserts` and `deleted` keys, for the record staging of the `before` variant."""
    positions = tuple(schema.column_names.index(key) for key in schema.primary_key)
    changes = TableChanges(positions)
    for row in upserts:
        changes.rows[tuple(row[index] for index in positions)] = ("upsert", row)
    for key in deleted:
        changes.rows[key] = ("delete", None)
    return changes


def java_children() -> list[int]:
    """This process's JVM children (the SparkSession's gateway), alive but idle while delta-rs writes."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid() and "java" in stat.split(")")[0]:
                found.append(int(entry.name))
    return found


def _without_floor(config: Any, target: Any, *, open_ended: bool = False, min_interval: float = 0.0
                   ) -> read_ahead.ReadAhead:
    """`ReadAhead` as follow mode builds it (`sync.run_until_caught_up`), less the cycle floor (the `nofloor`
    variant)."""
    return read_ahead.ReadAhead(config, target, open_ended=open_ended, min_interval=0.0)


def trial(pipeline: Pipeline, writer: keepup.Writer, table: str, server: LocalMariaDB, *, variant: str,
          rate: float, seconds: float, work: Path) -> dict[str, Any]:
    pipeline.sync(until_caught_up=True)
    server_pid = server.pid
    assert server_pid is not None
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    self_before = resource.getrusage(resource.RUSAGE_SELF)
    server_before = process_cpu(server_pid)
    jvms = java_children()
    jvm_before = sum(process_cpu(pid) for pid in jvms)
    load_before = os.getloadavg()[0]
    ACCOUNTS.clear()
    started = time.perf_counter()
    mode: keepup.FollowMode = "follow" if variant in ("follow", "nofloor") else "sync"
    staging = delta_rs_writer.arrow_fold
    if variant == "nofloor":
        sync.ReadAhead = _without_floor  # type: ignore[assignment,misc]
    if variant == "before":
        replication_library.TABLE_MAPS_KEPT = 0
        delta_rs_writer.arrow_fold = lambda schema, upserts, deleted_keys: delta_rs_writer.arrow_records(
            schema, spark_writer._mirror_records(schema, _fold_of(schema, upserts, deleted_keys)))
    try:
        result = keepup.follow_trial(pipeline, writer, table, rate=rate, window_s=seconds, limit_s=60.0, work=work,
                                     mode=mode)
    finally:
        replication_library.TABLE_MAPS_KEPT = TABLE_MAPS_KEPT
        delta_rs_writer.arrow_fold = staging
        sync.ReadAhead = read_ahead.ReadAhead  # type: ignore[misc]
    wall = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    figures = {
        "variant": variant, "wall_s": round(wall, 1), "load_average_1m": (load_before, os.getloadavg()[0]),
        "cpu_s": {"mariadb": round(process_cpu(server_pid) - server_before, 1),
                  "load writer": round(children.ru_utime + children.ru_stime - children_before.ru_utime
                                       - children_before.ru_stime, 1),
                  "idle JVM (Spark of the snapshot)": round(sum(process_cpu(pid) for pid in jvms) - jvm_before, 1),
                  "binlake (this process)": round(own.ru_utime + own.ru_stime - self_before.ru_utime
                                                  - self_before.ru_stime, 1)},
        "batches_per_minute": round(60 * result["batches"] / seconds, 1),
        "binlake_cpu_us_per_row": round(1e6 * (own.ru_utime + own.ru_stime - self_before.ru_utime
                                               - self_before.ru_stime) / max(1.0, result["achieved_rows_per_s"]
                                                                              * seconds), 2),
        "steps": {name: {"wall_s": round(ACCOUNTS.wall[name], 2), "thread_cpu_s": round(ACCOUNTS.cpu[name], 2),
                         "calls": ACCOUNTS.calls[name]} for name in sorted(ACCOUNTS.wall)},
        "write_trend": write_trend(ACCOUNTS.writes),
        "step_trend_ms": step_trend(ACCOUNTS.each),
        **{key: value for key, value in result.items() if key not in ("lag_s", "sample_at_s")},
        "lag_s_tail": result["lag_s"][-5:],
        "lag_by_time": list(zip(result["sample_at_s"], result["lag_s"], strict=True))[::10],
    }
    return figures


def kept_table_growth(commits: int, *, rows: int = 2000, every: int = 200) -> dict[str, list[float]]:
    """Mean ms of an append batch as binlake's delta-rs writer makes it (a kept `DeltaTable` taken and kept back,
    a checkpoint every 10 commits), by `every` commits: the kept table never reloaded (before) against
    `LoadedTables.RELOAD_AFTER_COMMITS` (after)."""
    import pyarrow as pa
    from deltalake import CommitProperties, PostCommitHookProperties, Transaction, write_deltalake

    from cdc_lib.sink.loaded_tables import KnownLog, LoadedTables

    def rows_from(start: int) -> pa.Table:
        return pa.table({"id": pa.array(range(start, start + rows), pa.int64()),
                         "customer_id": pa.array([7] * rows, pa.int32()), "note": pa.array(["fresh"] * rows)})

    figures: dict[str, list[float]] = {}
    for label, reload_after in (("never reloaded", 10**9), ("reloaded", LoadedTables.RELOAD_AFTER_COMMITS)):
        path = tempfile.mkdtemp(prefix="binlake-kept-table-")
        write_deltalake(path, rows_from(0))
        tables = LoadedTables()
        tables.RELOAD_AFTER_COMMITS = reload_after
        hooks = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
        checkpoint: int | None = None
        window: list[float] = []
        figures[label] = []
        for version in range(1, commits + 1):
            started = time.perf_counter()
            table = tables.take(path, None, KnownLog(latest_version=version - 1, checkpoint_version=checkpoint))
            table.transaction_version("bench")
            write_deltalake(table, rows_from(version * rows), mode="append", post_commithook_properties=hooks,
                            commit_properties=CommitProperties(app_transactions=[Transaction("bench", version)]))
            if table.version() % 10 == 0:
                table.create_checkpoint()
                checkpoint = table.version()
            tables.keep(path, None, table)
            window.append(time.perf_counter() - started)
            if version % every == 0:
                figures[label].append(round(1000 * sum(window) / len(window), 1))
                window = []
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workload", choices=("mixed", "insert"), default="mixed")
    parser.add_argument("--rate", type=float, default=50_000)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--txn-rows", type=int, default=100)
    parser.add_argument("--variants", default="follow,sync")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--max-events", type=int, default=None)
    parser.add_argument("--kept-table-growth", type=int, default=0, metavar="COMMITS",
                        help="only time delta-rs appends over this many commits, kept table reloaded or not")
    arguments = parser.parse_args()
    if arguments.kept_table_growth:
        print(json.dumps(kept_table_growth(arguments.kept_table_growth)), flush=True)
        return
    work = Path(tempfile.mkdtemp(prefix="binlake-keepup-profile-"))
    server = LocalMariaDB(work / "mariadb", server_id=13).start()
    try:
        server.create_cdc_user(keepup.USER, keepup.PASSWORD)
        server.execute("CREATE DATABASE keepup")
        instrument()
        trial_number = 0
        for _ in range(arguments.rounds):
            for variant in arguments.variants.split(","):
                # Each trial on a table of its own, fresh from the snapshot: a MERGE's cost grows with the table
                # (docs/performance.md), so a variant run after another would otherwise meet a larger table.
                trial_number += 1
                table = f"keepup.load_{arguments.workload}_{trial_number}"
                connection = server.admin_connection("keepup")
                try:
                    create_table(connection, table.split(".")[1], keepup.BASE_ROWS)
                finally:
                    connection.close()
                config = keepup.pipeline_config(work, server.port, f"keepup_profile_{trial_number}", [table],
                                                7790 + trial_number, max_events=arguments.max_events)
                pipeline = Pipeline(load_config(config))
                pipeline.snapshot()
                writer = keepup.Writer(server, table, arguments.workload, arguments.txn_rows)
                figures = trial(pipeline, writer, table, server, variant=variant, rate=arguments.rate,
                                seconds=arguments.seconds, work=work)
                print(json.dumps(figures), flush=True)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
