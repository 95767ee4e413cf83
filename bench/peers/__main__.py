"""binlake beside Debezium (and Flink CDC, if served) on one MariaDB, and CPU seconds per row change.

`python -m bench.peers --rows N --changes M [--repeat R]` starts its own MariaDB, loads `bench.orders`, and measures,
each a median of R runs with the 1-minute load average before→after ("noisy" when above the cores):
  snapshot rows/s   binlake snapshot into Delta  vs  Debezium's embedded engine snapshot, records counted only
  binlog rows/s     binlake sync --until-caught-up  vs  Debezium resuming from its offsets over the same changes
  CPU per row       binlake (Python + its Spark JVM, from /proc) vs MariaDB (mariadbd) applying the same changes,
                    mixed and insert-only; target binlake ≤ MariaDB
  OLake's table     binlake on a table shaped like OLake's published MySQL benchmark table (bench/peers/olake.py),
                    rows/s per core beside OLake's published per-vCPU figures (--olake-rows 0 skips it)
Where binlake's CPU per row goes: python -m bench.peers.profile (bench/peers/profile.py).
The peers capture only (no lake write): they bound what a JVM reader does; binlake's figures are end to end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["TZ"] = "UTC"

from bench.common import PASSWORD, USER, load_rows  # noqa: E402
from bench.peers import debezium, flink, olake, proc  # noqa: E402
from cdc_lib.config.load import load_config  # noqa: E402
from cdc_lib.dev.local_mariadb import LocalMariaDB  # noqa: E402
from cdc_lib.pipeline.pipeline import Pipeline  # noqa: E402


def measured(repeat: int, measure: Callable[[], float]) -> dict[str, Any]:
    """The median of `repeat` runs of `measure`, every run, and the load around them."""
    before = proc.load_now()
    runs = [measure() for _ in range(repeat)]
    load = proc.Load(before, proc.load_now())
    return {"median": statistics.median(runs), "runs": runs, "load": load.describe(), "noisy": load.noisy}


def insert_changes(server: LocalMariaDB, changes: int, first_id: int) -> int:
    """Insert-only workload: `changes` new rows, 1000 per transaction."""
    for low in range(first_id, first_id + changes, 1000):
        server.execute(
            "INSERT INTO bench.orders SELECT seq, seq % 5000, 2.5, 'new', 'inserted', NOW(6), NOW(6) "
            f"FROM bench.seq_{low}_to_{low + 999}"
        )
    return changes - changes % 1000 + (1000 if changes % 1000 else 0)


def mariadb_cpu(server: LocalMariaDB, write: Callable[[], int]) -> tuple[int, float]:
    """Rows `write` changed and the CPU seconds mariadbd spent while it ran."""
    pid = server.pid
    assert pid is not None
    before = proc.process_cpu_seconds(pid)
    rows = write()
    return rows, proc.process_cpu_seconds(pid) - before


def config_text(port: int, lake: Path) -> str:
    return (
        "pipeline: peers\n"
        f"source: {{host: 127.0.0.1, port: {port}, user: {USER}, password: {PASSWORD}, server_id: 7721, "
        "tables: [bench.orders]}\n"
        f"sink: {{path: {lake}}}\n"
        'spark: {master: "local[2]"}\n'
        "batch: {max_events: 200000, max_seconds: 600}\n"
    )


def run(rows: int, changes: int, repeat: int, *, flink_check: bool = True, olake_rows: int = 0,
        olake_changes: int = 0) -> dict[str, Any]:
    from bench.__main__ import make_changes

    work = Path(tempfile.mkdtemp(prefix="binlake-peers-"))
    server = LocalMariaDB(work / "mariadb", server_id=1).start()
    results: dict[str, Any] = {"rows": rows, "changes": changes, "repeat": repeat, "cores": os.cpu_count()}
    try:
        server.create_cdc_user(USER, PASSWORD)
        load_rows(server, rows)
        source = debezium.Source(server.port, USER, PASSWORD, server_id=7722)
        debezium.prepare(server.execute, source)
        config_path = work / "binlake.yaml"
        config_path.write_text(config_text(server.port, work / "lake"))
        pipeline = Pipeline(load_config(config_path))
        pipeline.snapshot()  # the JVM's start and the first write's warm-up, outside the figures
        results["binlake_snapshot_s"] = measured(repeat, lambda: pipeline.snapshot()[0].seconds)
        pipeline.snapshot()
        pristine = work / "lake-pristine"
        shutil.copytree(work / "lake", pristine)

        dbz_runs: list[debezium.PhaseResult] = []

        def dbz_snapshot() -> float:
            # A fresh offsets directory each run; the last one is where the binlog runs resume from.
            shutil.rmtree(work / "dbz", ignore_errors=True)
            result = debezium.snapshot(server.execute, source, work / "dbz", rows)
            assert result.records == rows, (result.records, rows)
            dbz_runs.append(result)
            return result.seconds

        results["debezium_snapshot_s"] = measured(repeat, dbz_snapshot)
        results["debezium_snapshot_from_first_s"] = statistics.median(run.seconds_from_first for run in dbz_runs)
        dbz_pristine = work / "dbz-pristine"
        shutil.copytree(work / "dbz", dbz_pristine)

        changed, mariadb_mixed_cpu = mariadb_cpu(server, lambda: make_changes(server, changes, rows + 1))
        results["changed"] = changed
        results["mariadb_cpu_per_row_mixed"] = mariadb_mixed_cpu / changed

        def binlake_sync(expected: int, start_from: Path, cpu: list[float], served: list[float]) -> float:
            shutil.rmtree(work / "lake")
            shutil.copytree(start_from, work / "lake")
            server_pid = server.pid
            assert server_pid is not None
            # binlake's tree without the MariaDB this process started: the server's time is counted on its own.
            cpu_before = proc.tree_cpu_seconds(os.getpid(), exclude=(server_pid,))
            served_before = proc.process_cpu_seconds(server_pid)
            started = time.perf_counter()
            batches = pipeline.sync(until_caught_up=True)
            seconds = time.perf_counter() - started
            cpu.append(proc.tree_cpu_seconds(os.getpid(), exclude=(server_pid,)) - cpu_before)
            served.append(proc.process_cpu_seconds(server_pid) - served_before)
            assert sum(batch.row_changes for batch in batches) == expected, "sync must carry every change"
            return seconds

        mixed_cpu: list[float] = []
        mixed_served: list[float] = []
        results["binlake_sync_s"] = measured(repeat, lambda: binlake_sync(changed, pristine, mixed_cpu, mixed_served))
        results["binlake_cpu_per_row_mixed"] = statistics.median(mixed_cpu) / changed
        results["mariadb_serving_cpu_per_row_mixed"] = statistics.median(mixed_served) / changed

        stream_runs: list[debezium.PhaseResult] = []

        def dbz_stream() -> float:
            shutil.rmtree(work / "dbz")
            shutil.copytree(dbz_pristine, work / "dbz")
            result = debezium.stream(source, work / "dbz", changed)
            assert result.records == changed, (result.records, changed)
            stream_runs.append(result)
            return result.seconds

        results["debezium_stream_s"] = measured(repeat, dbz_stream)
        results["debezium_stream_from_first_s"] = statistics.median(run.seconds_from_first for run in stream_runs)
        results["debezium_cpu_per_row_stream"] = statistics.median(run.cpu_seconds for run in stream_runs) / changed

        # Insert-only: from the lake caught up with the mixed changes.
        after_mixed = work / "lake-after-mixed"
        shutil.copytree(work / "lake", after_mixed)
        first_new = 10 * (rows + changes)  # past every key the mixed changes used
        inserted, mariadb_insert_cpu = mariadb_cpu(server, lambda: insert_changes(server, changes, first_new))
        results["inserted"] = inserted
        results["mariadb_cpu_per_row_insert"] = mariadb_insert_cpu / inserted
        insert_cpu: list[float] = []
        insert_served: list[float] = []
        results["binlake_sync_insert_s"] = measured(
            repeat, lambda: binlake_sync(inserted, after_mixed, insert_cpu, insert_served)
        )
        results["binlake_cpu_per_row_insert"] = statistics.median(insert_cpu) / inserted
        results["mariadb_serving_cpu_per_row_insert"] = statistics.median(insert_served) / inserted
        if olake_rows:
            results["olake"] = olake.run(server, work, olake_rows, olake_changes)
        if flink_check:
            results["flink_cdc"] = flink.resolve()
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(results: dict[str, Any]) -> str:
    def rate(key: str, rows: int) -> float:
        return float(rows / results[key]["median"])

    def met(ok: bool) -> str:
        return "met" if ok else "not met"

    rows, changed, inserted = results["rows"], results["changed"], results["inserted"]
    snap, dbz_snap = rate("binlake_snapshot_s", rows), rate("debezium_snapshot_s", rows)
    sync, dbz_sync = rate("binlake_sync_s", changed), rate("debezium_stream_s", changed)
    lines = [
        f"workload: {rows:,} rows snapshot, {changed:,} mixed and {inserted:,} insert-only row changes, "
        f"median of {results['repeat']}, {results['cores']} cores; load = 1-min load average before→after",
        "",
        "| measurement | binlake (end to end into Delta) | peer (capture only) | ratio | load |",
        "| --- | --- | --- | --- | --- |",
        f"| snapshot rows/s | {snap:,.0f} | Debezium embedded {dbz_snap:,.0f} (from its first record "
        f"{rows / results['debezium_snapshot_from_first_s']:,.0f}) | {snap / dbz_snap:.2f}× "
        f"| {results['binlake_snapshot_s']['load']} / {results['debezium_snapshot_s']['load']} |",
        f"| binlog rows/s, mixed | {sync:,.0f} | Debezium embedded {dbz_sync:,.0f} (from its first record "
        f"{changed / results['debezium_stream_from_first_s']:,.0f}) | {sync / dbz_sync:.2f}× "
        f"| {results['binlake_sync_s']['load']} / {results['debezium_stream_s']['load']} |",
        f"| Flink CDC MySQL source | — | {results.get('flink_cdc', 'not tried')} | — | — |",
        "",
        "| CPU ms per row change | binlake (Python + JVM) | MariaDB applying it | ratio | target binlake ≤ MariaDB "
        "| MariaDB serving binlake's binlog | load |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for kind, label in (("mixed", "mixed"), ("insert", "insert-only")):
        ours, theirs = results[f"binlake_cpu_per_row_{kind}"], results[f"mariadb_cpu_per_row_{kind}"]
        load = results["binlake_sync_s" if kind == "mixed" else "binlake_sync_insert_s"]["load"]
        lines.append(f"| {label} | {ours * 1000:.4f} | {theirs * 1000:.4f} | {ours / theirs:.2f}× "
                     f"| {met(ours <= theirs)} | {results[f'mariadb_serving_cpu_per_row_{kind}'] * 1000:.4f} "
                     f"| {load} |")
    lines.append(f"| Debezium binlog phase (whole JVM, its start included) | "
                 f"{results['debezium_cpu_per_row_stream'] * 1000:.4f} | — | — | — | — | — |")
    if "olake" in results:
        lines += ["", olake.report(*results["olake"])]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-flink", action="store_true", help="skip the Flink CDC artifact check")
    parser.add_argument("--olake-rows", type=int, default=500_000, help="rows of the OLake-shaped table (0: skip)")
    parser.add_argument("--olake-changes", type=int, default=100_000, help="rows inserted into it for the CDC figure")
    arguments = parser.parse_args()
    print(report(run(arguments.rows, arguments.changes, arguments.repeat, flink_check=not arguments.no_flink,
                     olake_rows=arguments.olake_rows, olake_changes=arguments.olake_changes)))


if __name__ == "__main__":
    main()
