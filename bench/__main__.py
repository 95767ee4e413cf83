"""Benchmarks binlake against its baselines in one run and prints medians and ratios.

Starts its own MariaDB, generates the workload server-side, then measures:
  snapshot     binlake snapshot rows/s  vs  mysqldump --single-transaction to /dev/null
  sync         binlake sync --until-caught-up rows/s  vs  a bare python-mysql-replication loop
  read path    binlake's binlog reader alone (decode + fold, no Spark) over the same range
  idle         wall time of a `binlake sync` process with no relevant change (and whether Spark started)
  snapshot-freshness  the lag of small tables while a big one is snapshotted (bench/snapshot/snapshot_freshness.py)
  keep-up      issue 12's table (bench/keepup/): sustainable rate vs MariaDB's apply rate (mixed,
               insert-only), 100 tables vs 1, snapshot of 200k rows, a new Dagster/CLI process's cost to its
               commit, a table with 10,000 commits; printed after the main table
  peers        Debezium's embedded engine (and Flink CDC if its artifact is served) beside binlake, and CPU seconds
               per row change for binlake and MariaDB (bench/peers/, runnable alone: python -m bench.peers)
Sizes are flags; `--quick` fits in a few minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["TZ"] = "UTC"

from bench import peer, scenarios  # noqa: E402
from bench.common import PASSWORD, USER, installed_like_environment, load_rows  # noqa: E402
from bench.keepup import keepup_report  # noqa: E402
from bench.load import around, load_text  # noqa: E402
from bench.paths import huge_transaction  # noqa: E402
from bench.peers import __main__ as peers_main  # noqa: E402
from bench.snapshot import snapshot_freshness, snapshot_resume  # noqa: E402
from cdc_lib.config.load import load_config  # noqa: E402
from cdc_lib.dev.local_mariadb import LocalMariaDB  # noqa: E402
from cdc_lib.pipeline.pipeline import Pipeline  # noqa: E402


def median_of(runs: int, measure: Callable[[], float]) -> tuple[float, list[float]]:
    values = [measure() for _ in range(runs)]
    return statistics.median(values), values


def make_changes(server: LocalMariaDB, changes: int, first_new_id: int) -> int:
    """Inserts, multi-row updates and deletes, ~1000 rows per transaction; returns rows changed."""
    done, next_id, step = 0, first_new_id, 0
    while done < changes:
        kind = step % 3
        if kind == 0:
            server.execute(
                "INSERT INTO bench.orders SELECT seq, seq % 5000, 1.25, 'new', 'fresh', NOW(6), NOW(6) "
                f"FROM bench.seq_{next_id}_to_{next_id + 999}"
            )
            next_id += 1000
        elif kind == 1:
            low = 1 + (step * 1000) % max(first_new_id - 1001, 1)
            server.execute(
                f"UPDATE bench.orders SET amount = amount + 1, status = 'paid' WHERE id BETWEEN {low} AND {low + 999}"
            )
        else:
            low = next_id - 1000
            server.execute(f"DELETE FROM bench.orders WHERE id BETWEEN {low} AND {low + 499}")
            server.execute(f"UPDATE bench.orders SET note = 'touched' WHERE id BETWEEN {low + 500} AND {low + 999}")
        done += 1000
        step += 1
    return done


def config_text(port: int, lake: Path, pipeline: str, table: str = "bench.orders") -> str:
    return (
        f"pipeline: {pipeline}\n"
        f"source: {{host: 127.0.0.1, port: {port}, user: {USER}, password: {PASSWORD}, server_id: 7701, "
        f"tables: [{table}]}}\n"
        f"sink: {{path: {lake}}}\n"
        'spark: {master: "local[2]"}\n'
        "batch: {max_events: 200000, max_seconds: 600}\n"
        "snapshot: {rows_per_partition: 1000000, max_partitions: 8}\n"
    )


def bare_reader(server: LocalMariaDB, start: dict[str, Any]) -> tuple[int, float]:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    started = time.perf_counter()
    stream = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": server.port, "user": USER, "password": PASSWORD},
        server_id=7702, resume_stream=True, log_file=start["file"], log_pos=start["pos"], blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], only_tables=["orders"],
        only_schemas=["bench"], enable_logging=False,
    )
    rows = 0
    touched = 0
    for event in stream:
        for row in event.rows:
            values = row.get("after_values") or row["values"]
            for value in values.values():
                touched += value is not None
            rows += 1
    stream.close()
    return rows, time.perf_counter() - started


def read_path(config_path: Path, start: dict[str, Any]) -> tuple[int, float]:
    """binlake's reader alone over the sync range, in the sync's batch size: decode and fold, no Spark."""
    from cdc_lib.binlog.batch import TableCursor
    from cdc_lib.binlog.stream import read_batch
    from cdc_lib.model.positions import BinlogPosition
    from cdc_lib.model.tables import TableRef
    from cdc_lib.source.server import describe_table, source_connection

    config = load_config(config_path)
    with source_connection(config.source) as connection:
        schema = describe_table(connection, TableRef.parse("bench.orders"))
    position, rows = BinlogPosition.from_json(start), 0
    started = time.perf_counter()
    while True:
        read = read_batch(config.source, [TableCursor("bench.orders", position, schema)], config.batch)
        rows += read.row_changes
        position = read.end
        if read.reached_end:
            return rows, time.perf_counter() - started


def attempt(results: dict[str, Any], key: str, measure: Callable[[], Any]) -> None:
    """Run one extra measurement; a failure is reported in the results instead of losing the others."""
    try:
        results[key] = around(results, key, measure)
    except Exception as error:  # noqa: BLE001 - a benchmark reports what broke and goes on
        results.setdefault("failures", {})[key] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
        print(f"{key} failed: {results['failures'][key]}", flush=True)


def run(arguments: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="binlake-bench-"))
    server = LocalMariaDB(work / "mariadb", server_id=1).start()
    runs_extra: dict[str, list[float]] = {}
    results: dict[str, Any] = {"rows": arguments.rows, "changes": arguments.changes, "repeat": arguments.repeat,
                               "merge_changes": arguments.merge_changes}
    try:
        server.create_cdc_user(USER, PASSWORD)
        print(f"loading {arguments.rows:,} rows …", flush=True)
        load_rows(server, arguments.rows)

        dump = shutil.which("mariadb-dump") or shutil.which("mysqldump") or "mysqldump"

        def mysqldump_seconds() -> float:
            started = time.perf_counter()
            subprocess.run(
                [dump, "--single-transaction", f"--socket={server.socket_path}", "-uroot", "bench", "orders"],
                stdout=subprocess.DEVNULL, check=True,
            )
            return time.perf_counter() - started

        dump_median, dump_runs = around(results, 'mysqldump', lambda: median_of(arguments.repeat, mysqldump_seconds))
        results["mysqldump_rows_per_s"] = arguments.rows / dump_median

        config_path = work / "binlake.yaml"
        config_path.write_text(config_text(server.port, work / "lake", "bench"))
        pipeline = Pipeline(load_config(config_path))
        started = time.perf_counter()
        # The first one includes the JVM start and the first-write warm-up.
        around(results, "first_snapshot", pipeline.snapshot)
        results["first_snapshot_s_with_jvm_start"] = time.perf_counter() - started

        def snapshot_seconds() -> float:
            return pipeline.snapshot()[0].seconds

        snap_median, snap_runs = around(results, 'snapshot', lambda: median_of(arguments.repeat, snapshot_seconds))
        results["snapshot_rows_per_s"] = arguments.rows / snap_median
        results["snapshot_vs_mysqldump"] = results["snapshot_rows_per_s"] / results["mysqldump_rows_per_s"]
        if "snapshot-stages" in arguments.only:
            print("snapshot stages …", flush=True)
            attempt(results, "snapshot_stages", lambda: scenarios.snapshot_stages(
                pipeline, "bench.orders", arguments.repeat
            ))

        # A snapshot before the changes, kept aside so every sync run starts from the same offset.
        pipeline.snapshot()
        pristine = work / "lake-pristine"
        shutil.copytree(work / "lake", pristine)
        start = pipeline.read_state().tables["bench.orders"].position.to_json()
        print(f"writing {arguments.changes:,} row changes …", flush=True)
        changed = make_changes(server, arguments.changes, arguments.rows + 1)

        def sync_seconds() -> float:
            shutil.rmtree(work / "lake")
            shutil.copytree(pristine, work / "lake")
            started = time.perf_counter()
            batches = pipeline.sync(until_caught_up=True)
            seconds = time.perf_counter() - started
            assert sum(batch.row_changes for batch in batches) == changed, "sync must carry every change"
            return seconds

        sync_median, sync_runs = around(results, 'sync', lambda: median_of(arguments.repeat, sync_seconds))
        results["sync_rows_per_s"] = changed / sync_median

        def bare_seconds() -> float:
            rows, seconds = bare_reader(server, start)
            assert rows == changed, (rows, changed)
            return seconds

        bare_median, bare_runs = around(results, 'bare_reader', lambda: median_of(arguments.repeat, bare_seconds))
        results["bare_reader_rows_per_s"] = changed / bare_median
        results["sync_vs_bare_reader"] = results["sync_rows_per_s"] / results["bare_reader_rows_per_s"]

        def read_path_seconds() -> float:
            rows, seconds = read_path(config_path, start)
            assert rows == changed, (rows, changed)
            return seconds

        read_median, read_runs = around(results, 'read_path', lambda: median_of(arguments.repeat, read_path_seconds))
        results["read_path_rows_per_s"] = changed / read_median
        results["read_path_vs_bare_reader"] = results["read_path_rows_per_s"] / results["bare_reader_rows_per_s"]

        if "peer" in arguments.only:
            print("peer: pipelinewise-tap-mysql LOG_BASED …", flush=True)

            def peer_seconds() -> float:
                rows, seconds = peer.run_peer(server.port, USER, PASSWORD, start, work)
                assert rows >= changed, f"the tap emitted {rows} records for {changed} changes"
                return seconds

            peer_median, peer_runs = around(results, 'peer', lambda: median_of(arguments.repeat, peer_seconds))
            results["peer_rows_per_s"] = changed / peer_median
            results["sync_vs_peer"] = results["sync_rows_per_s"] / results["peer_rows_per_s"]
            runs_extra["peer_s"] = peer_runs

        if "merge" in arguments.only:
            print("MERGE scaling …", flush=True)
            attempt(results, "merge_scaling_s", lambda: scenarios.merge_scaling(
                pipeline, arguments.merge_sizes, arguments.merge_changes, arguments.repeat
            ))
        if "memory" in arguments.only:
            print("memory …", flush=True)
            attempt(results, "memory", lambda: {
                str(size): scenarios.memory(config_path, pristine, work / "lake", size)
                for size in (arguments.changes // 10, arguments.changes // 2)
            })  # each run ends caught up, so the idle measurement below finds nothing to do

        installed_like = installed_like_environment(work)

        def idle_seconds() -> float:
            started = time.perf_counter()
            output = subprocess.run(
                [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), "sync", "--json"],
                capture_output=True, text=True, check=True, env=installed_like,
            ).stdout
            seconds = time.perf_counter() - started
            assert json.loads(output)[0]["spark_started"] is False
            return seconds

        idle_median, idle_runs = around(results, 'idle', lambda: median_of(arguments.repeat, idle_seconds))
        results["idle_sync_wall_s"] = idle_median
        if "freshness" in arguments.only:
            print("freshness …", flush=True)
            fresh_config = work / "fresh.yaml"
            fresh_config.write_text(config_text(server.port, work / "lake-fresh", "fresh", "bench.fresh"))
            attempt(results, "freshness", lambda: scenarios.freshness(
                server, fresh_config, rows_per_second=500, seconds=arguments.freshness_seconds
            ))
        if "snapshot-freshness" in arguments.only:
            print("freshness of the other tables during a big snapshot …", flush=True)
            attempt(results, "snapshot_freshness", lambda: snapshot_freshness.measure(
                server, work / "snapshot-freshness", big_rows=arguments.snapshot_freshness_rows, small_tables=5,
                sync_every=3.0,
            ))
        if "snapshot-resume" in arguments.only:
            print("snapshot killed at 50 % and resumed …", flush=True)

            def resume_figures() -> dict[str, Any]:
                snapshot_resume.load(server, arguments.rows)
                return snapshot_resume.measure(server, work, rows=arguments.rows,
                                               rows_per_chunk=max(10_000, arguments.rows // 20), chunks_per_wave=2)

            attempt(results, "snapshot_resume", resume_figures)
        if set(keepup_report.PARTS) & arguments.only:
            keepup_report.run(server, work, arguments, results, attempt)
        if "huge-transaction" in arguments.only:
            print("huge transaction …", flush=True)
            sizes = [int(size) for size in arguments.huge_rows.split(",")]
            attempt(results, "huge_transaction", lambda: huge_transaction.run_on(
                server, work / "huge", rows=sizes, today_rows=max(sizes), huge=arguments.huge,
            ))
        results["runs"] = {
            "mysqldump_s": dump_runs, "snapshot_s": snap_runs, "sync_s": sync_runs, "bare_reader_s": bare_runs,
            "read_path_s": read_runs,
            "idle_sync_s": idle_runs, **runs_extra,
        }
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        f"workload: {results['rows']:,} rows snapshot, {results['changes']:,} row changes, "
        f"median of {results['repeat']} runs",
        "",
        "load: the 1-minute load average before→after each measurement (\"noisy\" when above the cores)",
        "",
        "| measurement | binlake | baseline | ratio | load |",
        "| --- | --- | --- | --- | --- |",
        f"| snapshot rows/s | {results['snapshot_rows_per_s']:,.0f} | mysqldump {results['mysqldump_rows_per_s']:,.0f} "
        f"| {results['snapshot_vs_mysqldump']:.2f}× | {load_text(results, 'mysqldump', 'snapshot')} |",
        f"| sync rows/s | {results['sync_rows_per_s']:,.0f} | bare python-mysql-replication "
        f"{results['bare_reader_rows_per_s']:,.0f} | {results['sync_vs_bare_reader']:.2f}× "
        f"| {load_text(results, 'sync', 'bare_reader')} |",
        f"| read path rows/s (reader alone, no Spark) | {results['read_path_rows_per_s']:,.0f} | bare "
        f"python-mysql-replication {results['bare_reader_rows_per_s']:,.0f} | "
        f"{results['read_path_vs_bare_reader']:.2f}× | {load_text(results, 'read_path')} |",
        *(
            [f"| sync rows/s vs peer | {results['sync_rows_per_s']:,.0f} | pipelinewise-tap-mysql LOG_BASED "
             f"{results['peer_rows_per_s']:,.0f} | {results['sync_vs_peer']:.2f}× | {load_text(results, 'peer')} |"]
            if "peer_rows_per_s" in results else []
        ),
        f"| idle sync wall s | {results['idle_sync_wall_s']:.2f} | target ≤ 5 s, no JVM | — "
        f"| {load_text(results, 'idle')} |",
        f"| first snapshot incl. JVM start s | {results['first_snapshot_s_with_jvm_start']:.1f} | — | — "
        f"| {load_text(results, 'first_snapshot')} |",
    ]
    if "merge_scaling_s" in results:
        merge = results["merge_scaling_s"]
        sizes = [key for key in merge if key.isdigit()]
        figures = ", ".join(f"{int(size):,} rows {merge[size]:.2f} s" for size in sizes)
        lines.append(f"| MERGE of {results['merge_changes']:,} changes | {figures} | target largest ≤ 3× smallest "
                     f"| {merge['largest_vs_smallest']:.2f}× | {load_text(results, 'merge_scaling_s')} |")
    if "freshness" in results:
        fresh = results["freshness"]
        lines.append(f"| freshness at {fresh['rows_per_second']} rows/s | p50 {fresh['p50_s']:.2f} s, "
                     f"p95 {fresh['p95_s']:.2f} s ({fresh['samples']} commits) | — | — "
                     f"| {load_text(results, 'freshness')} |")
    if "snapshot_stages" in results:
        stages = results["snapshot_stages"]
        dump = results["mysqldump_rows_per_s"]
        for stage, label in (("read_to_noop", "JDBC read + casts, no write"), ("to_parquet", "… + plain Parquet"),
                             ("to_delta", "… + Delta (stats on all columns)"),
                             ("to_delta_key_stats", "… + Delta (stats on key columns)")):
            figure = stages[f"{stage}_rows_per_s"]
            lines.append(f"| snapshot stage: {label} | {figure:,.0f} rows/s | mysqldump {dump:,.0f} "
                         f"| {figure / dump:.2f}× | {load_text(results, 'snapshot_stages')} |")
    if "snapshot_freshness" in results:
        during = snapshot_freshness.summary(results["snapshot_freshness"])
        lines.append(f"| other tables during a big snapshot | {during} | — | — "
                     f"| {load_text(results, 'snapshot_freshness')} |")
    if "snapshot_resume" in results:
        resume = results["snapshot_resume"]
        lines.append(f"| snapshot killed at 50 %, resume to the end s | {resume['resume_s']:.1f} (re-read "
                     f"{resume['reread_chunks']} chunks) | uninterrupted {resume['uninterrupted_s']:.1f} "
                     f"| {resume['resume_vs_uninterrupted']:.2f}× | {load_text(results, 'snapshot_resume')} |")
    for key, failure in results.get("failures", {}).items():
        lines.append(f"| {key} | FAILED: {failure} | — | — | {load_text(results, key)} |")
    for size, peak in results.get("memory", {}).items():
        lines.append(f"| peak RSS, max_events={int(size):,} | Python {peak['python_peak_mb']:.0f} MB, "
                     f"JVM {peak['jvm_peak_mb']:.0f} MB ({peak['batches']} batches) | — | — "
                     f"| {load_text(results, 'memory')} |")
    return "\n".join(lines)


def versions() -> str:
    from importlib.metadata import version

    packages = ("pyspark", "delta-spark", "mysql-replication", "PyMySQL", "pyarrow")
    server = subprocess.run(["mariadbd", "--version"], capture_output=True, text=True).stdout.strip()
    return ", ".join(f"{name} {version(name)}" for name in packages) + f"; {server}"


def write_results(text: str, results: dict[str, Any]) -> None:
    path = Path(__file__).with_name("RESULTS.md")
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    path.write_text(
        "# binlake benchmark results\n\n"
        f"Refreshed {stamp} by `python -m bench {' '.join(sys.argv[1:])}`.\n\n"
        f"Versions: {versions()}.\n\n{text}\n\n"
        "Raw figures (every run, seconds):\n\n```json\n"
        f"{json.dumps(results.get('runs', {}), indent=1)}\n```\n"
    )


def _plain(value: Any) -> Any:
    """A figure's JSON form: the peers' per-phase results are dataclasses (bench/peers/olake.py `Phase`)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return str(value)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200k rows, 100k changes")
    parser.add_argument("--json", type=Path, help="also write the raw figures here")
    parser.add_argument("--no-results-file", action="store_true", help="do not rewrite bench/RESULTS.md")
    extras = ",".join(
        ("snapshot-stages", "peer", "peers", "merge", "freshness", "snapshot-freshness", "memory", "snapshot-resume",
         *keepup_report.PARTS, "huge-transaction")
    )
    parser.add_argument("--only", default=extras, help=f"extra measurements, comma separated: {extras} (or 'none')")
    parser.add_argument("--merge-sizes", default="100000,1000000,10000000")
    parser.add_argument("--merge-changes", type=int, default=10_000)
    parser.add_argument("--freshness-seconds", type=float, default=30.0)
    parser.add_argument("--snapshot-freshness-rows", type=int, default=12_000_000,
                        help="rows of the big table snapshotted while the small ones change")
    parser.add_argument("--huge-rows", default="50000,200000",
                        help="huge transaction: sizes of the one-DELETE transaction, both paths")
    parser.add_argument("--huge", action="store_true",
                        help="huge transaction: also 5,000,000 rows on the spilled path (a few minutes)")
    keepup_report.add_arguments(parser)
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.rows, arguments.changes = 200_000, 100_000
        arguments.merge_sizes = "10000,100000,1000000"
        arguments.freshness_seconds = 15.0
        arguments.snapshot_freshness_rows = 1_000_000
        keepup_report.quick(arguments)
        arguments.huge_rows = "20000,80000"
    arguments.only = set(arguments.only.split(","))
    arguments.merge_sizes = [int(size) for size in arguments.merge_sizes.split(",")]
    results = run(arguments)
    text = report(results)
    if "peers" in arguments.only:
        # Its own MariaDB and load, after the main run's server has stopped, so the two do not share the cores.
        print("peers: Debezium embedded engine, CPU per row …", flush=True)
        try:
            # The OLake-shaped table (bench/peers/olake.py) in the same run, on the same server, after the peers.
            results["peers"] = peers_main.run(arguments.rows, arguments.changes, arguments.repeat,
                                              olake_rows=min(arguments.rows, 500_000),
                                              olake_changes=min(arguments.changes, 100_000))
            text += ("\n\nPeers and CPU per row change (issue 30, bench/peers/):\n\n"
                     + peers_main.report(results["peers"]))
        except Exception as error:  # noqa: BLE001 - a benchmark reports what broke and goes on
            text += f"\n\npeers: FAILED: {type(error).__name__}: {str(error).splitlines()[0][:300]}"
    if set(keepup_report.PARTS) & arguments.only:
        text += "\n\nKeeping up with a busy primary (issue 12):\n\n" + keepup_report.report(results)
    if results.get("huge_transaction"):
        text += "\n\n" + huge_transaction.report(results["huge_transaction"])
    print(text)
    if not arguments.no_results_file:
        write_results(text, results)
    if arguments.json:
        arguments.json.write_text(json.dumps(results, indent=1, default=_plain))


if __name__ == "__main__":
    main()
