"""Where binlake's CPU per row change goes: a sync of one workload, profiled end to end.

`python -m bench.peers.profile --rows N --changes M [--workload mixed|insert] [--writer auto|spark]` starts its own
MariaDB, loads and snapshots `bench.orders`, writes M row changes in transactions of `--per-transaction` rows
(mixed: inserts, updates, deletes in turn; insert: inserts only), then syncs them once with cProfile on and prints:

  CPU by thread       from /proc/<pid>/task: the Python main thread, delta-rs's Rust workers (Parquet encoding,
                      the MERGE's scan and join, the commit's file writes), the rest; the Spark JVM apart
  Python by stage     the main thread's CPU (cProfile with a thread-CPU clock) by stage: decode (python-mysql-
                      replication, binlake's reader), fold, Arrow staging, the delta-rs call, commit and state
  top functions       the main thread's most expensive functions, own time

The sync's read-ahead thread is switched off here, so all Python work runs on the profiled main thread; it does the
same work, only not overlapped. The MariaDB serving the binlog is counted on its own.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ["TZ"] = "UTC"

from bench.common import PASSWORD, USER, load_rows  # noqa: E402
from bench.peers import proc  # noqa: E402
from cdc_lib.config.load import load_config  # noqa: E402
from cdc_lib.dev.local_mariadb import LocalMariaDB  # noqa: E402
from cdc_lib.pipeline import read_ahead  # noqa: E402
from cdc_lib.pipeline.pipeline import Pipeline  # noqa: E402

#: Stages by where a function is defined, first match wins; a C function (a builtin, pyarrow's or deltalake's
#: compiled code) is put with the stage of the Python function that calls it most.
STAGES: list[tuple[str, tuple[str, ...]]] = [
    ("decode: python-mysql-replication, pymysql", ("pymysqlreplication/", "pymysql/")),
    ("decode: binlake's reader (row decoder, batch, transactions)", ("cdc_lib/binlog/", "cdc_lib/model/charsets")),
    ("fold (last change per key)", ("cdc_lib/changes/",)),
    ("Arrow staging", ("pyarrow/", "delta_rs/writer.py:arrow", "delta_rs/writer.py:_is_upsert")),
    ("delta-rs write (Parquet encoding, MERGE, commit: Rust)", ("deltalake/", "cdc_lib/sink/delta_rs/")),
    ("Spark (Python side)", ("pyspark/", "py4j/", "cdc_lib/sink/spark/")),
    ("commit checks, Delta log reads, offsets", ("cdc_lib/sink/", "cdc_lib/state/")),
    ("batch loop (pipeline)", ("cdc_lib/pipeline/",)),
]
OTHER = "other (stdlib, socket reads, logging)"


def stage_of(where: str) -> str | None:
    for stage, markers in STAGES:
        if any(marker in where for marker in markers):
            return stage
    return None


def _where(function: tuple[str, int, str]) -> str:
    filename, _, name = function
    return f"{filename}:{name}"


def by_stage(stats: pstats.Stats) -> dict[str, float]:
    """Own CPU seconds of every profiled function, summed by stage."""
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    totals: dict[str, float] = {}

    def stage(function: tuple[str, int, str], depth: int = 0) -> str:
        found = stage_of(_where(function))
        if found is not None or depth > 8:
            return found or OTHER
        callers = table.get(function, (0, 0, 0, 0, {}))[4]
        if not callers:
            return OTHER
        # The caller that spent the most in it: a builtin (`~`) or C method belongs to who called it.
        caller = max(callers, key=lambda key: callers[key][3])
        return stage(caller, depth + 1)

    for function, (_, _, own, _, _) in table.items():
        name = stage(function)
        totals[name] = totals.get(name, 0.0) + own
    return totals


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """CPU seconds of every live thread of `pid`, by thread id, with its name."""
    found: dict[int, tuple[str, float]] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text()
            fields_after = fields[fields.rindex(")") + 2:].split()
        except OSError:
            continue
        found[int(task.name)] = (name, (int(fields_after[11]) + int(fields_after[12])) / proc.TICKS)
    return found


def thread_group(name: str, main: bool) -> str:
    if main:
        return "Python main thread"
    if name.startswith("tokio") or name.startswith("datafusion") or "rayon" in name:
        return "delta-rs / DataFusion workers (Rust)"
    return "other threads (Arrow, pymysql, heartbeat)"


@dataclass
class Profile:
    workload: str
    writer: str
    changes: int
    seconds: float
    threads: dict[str, float]
    jvm: float
    mariadb: float
    stages: dict[str, float]
    top: list[tuple[str, float, int]] = field(default_factory=list)

    @property
    def binlake(self) -> float:
        return sum(self.threads.values()) + self.jvm


def profile_sync(pipeline: Pipeline, server: LocalMariaDB, changes: int, *, workload: str, writer: str,
                 top: int, profiled: bool = True, dump: Path | None = None) -> Profile:
    server_pid = server.pid
    assert server_pid is not None
    me = os.getpid()
    jvm_pids = [pid for pid in proc.descendants(me) if pid != server_pid and pid not in proc.descendants(server_pid)]

    def jvm_cpu() -> float:
        total = 0.0
        for pid in jvm_pids:
            try:
                total += proc.process_cpu_seconds(pid)
            except OSError:
                continue
        return total

    profiler = cProfile.Profile(time.thread_time)
    threads_before, jvm_before = thread_cpu(me), jvm_cpu()
    served_before = proc.process_cpu_seconds(server_pid)
    started = time.perf_counter()
    if profiled:
        profiler.enable()
    batches = pipeline.sync(until_caught_up=True)
    profiler.disable()
    seconds = time.perf_counter() - started
    threads_after, jvm_after = thread_cpu(me), jvm_cpu()
    served = proc.process_cpu_seconds(server_pid) - served_before
    carried = sum(batch.row_changes for batch in batches)
    assert carried == changes, f"sync carried {carried} of {changes} row changes"
    threads: dict[str, float] = {}
    for tid, (name, after) in threads_after.items():
        spent = after - threads_before.get(tid, (name, 0.0))[1]
        group = thread_group(name, tid == me)
        threads[group] = threads.get(group, 0.0) + spent
    if not profiled:
        return Profile(workload, writer, changes, seconds, threads, jvm_after - jvm_before, served, {})
    stats = pstats.Stats(profiler)
    if dump is not None:
        stats.dump_stats(dump)
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    ranked = sorted(table.items(), key=lambda item: item[1][2], reverse=True)[:top]
    top_functions = [(f"{Path(fn[0]).name}:{fn[1]} {fn[2]}", values[2], values[1]) for fn, values in ranked]
    return Profile(workload, writer, changes, seconds, threads, jvm_after - jvm_before, served, by_stage(stats),
                   top_functions)


def mixed_changes(server: LocalMariaDB, changes: int, first_new_id: int, per_transaction: int) -> int:
    """Inserts, updates and deletes in turn, `per_transaction` rows a transaction (autocommit statements)."""
    statements: list[str] = []
    done, next_id, step, half = 0, first_new_id, 0, per_transaction // 2
    while done < changes:
        kind = step % 3
        if kind == 0:
            statements.append(
                "INSERT INTO bench.orders SELECT seq, seq % 5000, 1.25, 'new', 'fresh', NOW(6), NOW(6) "
                f"FROM bench.seq_{next_id}_to_{next_id + per_transaction - 1}")
            next_id += per_transaction
        elif kind == 1:
            low = 1 + (step * per_transaction) % max(first_new_id - per_transaction - 1, 1)
            statements.append(f"UPDATE bench.orders SET amount = amount + 1, status = 'paid' "
                              f"WHERE id BETWEEN {low} AND {low + per_transaction - 1}")
        else:
            low = next_id - per_transaction
            statements.append(f"DELETE FROM bench.orders WHERE id BETWEEN {low} AND {low + half - 1}")
            statements.append(f"UPDATE bench.orders SET note = 'touched' "
                              f"WHERE id BETWEEN {low + half} AND {low + per_transaction - 1}")
        done += per_transaction
        step += 1
    for first in range(0, len(statements), 500):
        server.execute(*statements[first:first + 500])
    return done


def insert_changes(server: LocalMariaDB, changes: int, first_new_id: int, per_transaction: int) -> int:
    statements = [
        "INSERT INTO bench.orders SELECT seq, seq % 5000, 2.5, 'new', 'inserted', NOW(6), NOW(6) "
        f"FROM bench.seq_{low}_to_{low + per_transaction - 1}"
        for low in range(first_new_id, first_new_id + changes, per_transaction)
    ]
    for first in range(0, len(statements), 500):
        server.execute(*statements[first:first + 500])
    return len(statements) * per_transaction


def mariadb_cpu(server: LocalMariaDB, write: Callable[[], int]) -> tuple[int, float]:
    pid = server.pid
    assert pid is not None
    before = proc.process_cpu_seconds(pid)
    rows = write()
    return rows, proc.process_cpu_seconds(pid) - before


def config_text(port: int, lake: Path, writer: str) -> str:
    return (
        "pipeline: profile\n"
        f"source: {{host: 127.0.0.1, port: {port}, user: {USER}, password: {PASSWORD}, server_id: 7731, "
        "tables: [bench.orders]}\n"
        f"sink: {{path: {lake}}}\n"
        'spark: {master: "local[2]"}\n'
        f"batch: {{max_events: 200000, max_seconds: 600, writer: {writer}}}\n"
    )


def run(rows: int, changes: int, per_transaction: int, workloads: list[str], writer: str, top: int, *,
        dump: Path | None = None, plain_only: bool = False) -> list[tuple[Profile, Profile, float]]:
    work = Path(tempfile.mkdtemp(prefix="binlake-profile-"))
    server = LocalMariaDB(work / "mariadb", server_id=1).start()
    found: list[tuple[Profile, Profile, float]] = []
    # The read-ahead reads on a worker thread that cProfile does not see: off, the same work runs on the main one.
    original_start = read_ahead.ReadAhead.start
    read_ahead.ReadAhead.start = lambda self, cursors, *, not_before=None: None  # type: ignore[method-assign]
    try:
        server.create_cdc_user(USER, PASSWORD)
        load_rows(server, rows)
        config_path = work / "binlake.yaml"
        config_path.write_text(config_text(server.port, work / "lake", writer))
        pipeline = Pipeline(load_config(config_path))
        pipeline.snapshot()
        # A first small sync: the writer's imports and first-use costs stay out of the profile.
        insert_changes(server, per_transaction, rows + 1, per_transaction)
        pipeline.sync(until_caught_up=True)
        first_new = rows + per_transaction + 1
        lake, pristine = work / "lake", work / "lake-pristine"
        for workload in workloads:
            write = mixed_changes if workload == "mixed" else insert_changes
            changed, served = mariadb_cpu(server, functools.partial(write, server, changes, first_new,
                                                                    per_transaction))
            first_new += changes + per_transaction
            # Twice over the same changes from the same lake (its state included): once for the CPU without the
            # profiler's own cost, once profiled for the split by stage.
            shutil.rmtree(pristine, ignore_errors=True)
            shutil.copytree(lake, pristine)
            plain = profile_sync(pipeline, server, changed, workload=workload, writer=writer, top=top, profiled=False)
            if plain_only:
                found.append((plain, plain, served / changed))
                continue
            shutil.rmtree(lake)
            shutil.copytree(pristine, lake)
            found.append((plain, profile_sync(pipeline, server, changed, workload=workload, writer=writer, top=top,
                                              dump=dump and dump.with_suffix(f".{workload}.pstats")),
                          served / changed))
    finally:
        read_ahead.ReadAhead.start = original_start  # type: ignore[method-assign]
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return found


def report(found: list[tuple[Profile, Profile, float]]) -> str:
    lines: list[str] = []
    for plain, profile, mariadb_per_row in found:
        per_row = 1e6 / profile.changes
        lines += [
            f"## {profile.workload}: {profile.changes:,} row changes, batch.writer {profile.writer}, "
            f"{plain.seconds:.1f} s wall ({profile.seconds:.1f} s profiled), load {proc.load_now():.1f}",
            "",
            "| CPU | µs a row change | profiled run |",
            "| --- | --- | --- |",
        ]
        for group in sorted(plain.threads, key=lambda name: -plain.threads[name]):
            lines.append(f"| {group} | {plain.threads[group] * per_row:.2f} "
                         f"| {profile.threads.get(group, 0.0) * per_row:.2f} |")
        lines += [
            f"| Spark JVM | {plain.jvm * per_row:.2f} | {profile.jvm * per_row:.2f} |",
            f"| **binlake in all** | **{plain.binlake * per_row:.2f}** | {profile.binlake * per_row:.2f} |",
            f"| MariaDB applying the changes | {mariadb_per_row * 1e6:.2f} | |",
            f"| MariaDB serving binlake's binlog read | {plain.mariadb * per_row:.2f} "
            f"| {profile.mariadb * per_row:.2f} |",
            "",
            "cProfile's own cost inflates the profiled run's Python figures; the shares below are of that run.",
            "",
            "| Python main thread, by stage | µs a row change | share |",
            "| --- | --- | --- |",
        ]
        python = sum(profile.stages.values()) or 1.0
        for stage, seconds in sorted(profile.stages.items(), key=lambda item: -item[1]):
            lines.append(f"| {stage} | {seconds * per_row:.2f} | {100 * seconds / python:.0f} % |")
        lines += ["", "| top functions (own CPU) | µs a row change | calls |", "| --- | --- | --- |"]
        for name, seconds, calls in profile.top:
            lines.append(f"| `{name}` | {seconds * per_row:.3f} | {calls:,} |")
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--per-transaction", type=int, default=100)
    parser.add_argument("--workload", choices=("mixed", "insert", "both"), default="both")
    parser.add_argument("--writer", choices=("auto", "spark", "delta-rs"), default="auto")
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--plain", action="store_true", help="CPU by thread only, no profiled run")
    parser.add_argument("--dump", type=Path, help="also write each workload's pstats next to this path")
    arguments = parser.parse_args()
    workloads = ["mixed", "insert"] if arguments.workload == "both" else [arguments.workload]
    print(report(run(arguments.rows, arguments.changes, arguments.per_transaction, workloads, arguments.writer,
                     arguments.top, dump=arguments.dump, plain_only=arguments.plain)))


if __name__ == "__main__":
    main()
