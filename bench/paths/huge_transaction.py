"""Peak memory of one huge transaction: a `DELETE` of every row of a table, applied in one sync.

For each size, one table of that many rows is snapshotted by two pipelines, then emptied by a single
`DELETE` (one transaction). Each pipeline then syncs it in a fresh Python process, which reports how much its
peak RSS (VmHWM, the JVM excluded: Spark runs in a child process) grew during the sync:

  today   batch.max_buffered_changes above the transaction: every change folded in Python lists
  spill   batch.max_buffered_changes 20,000 (`--bound`): the table spills to Parquet (docs/performance.md)

Today's path is measured only at sizes it can hold (`--today-rows`); the spilled one also at 5,000,000 rows
with `--huge` (84 s of sync for 5M rows on 2 loaded cores, plus loading and the snapshot). The slope (MB per
100,000 rows) is printed for both.

    PYTHONPATH=$PWD python -m bench.paths.huge_transaction [--rows 50000,200000] [--huge]

`python -m bench.paths.huge_transaction --measure CONFIG [CONFIG …]` is the measuring process itself: it syncs each
pipeline in turn and prints one JSON line per pipeline (tests/integration/test_huge_transaction.py uses it).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ["TZ"] = "UTC"

from bench.common import PASSWORD, USER  # noqa: E402

TODAY_BOUND = 1_000_000_000
#: The spilled path's `batch.max_buffered_changes`: below the default (200,000) so that the default run's
#: sizes spill; `--bound 200000` measures the default.
SPILL_BOUND = 20_000
MB = 1024 * 1024


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def _reset_peak() -> None:
    """Reset VmHWM to the current RSS (Linux ≥ 4.0: writing 5 to clear_refs), so the peak is the sync's own."""
    Path("/proc/self/clear_refs").write_text("5")


def measure(config_paths: list[str]) -> list[dict[str, Any]]:
    """Sync each pipeline in this process, one after another; the growth of the peak RSS each caused.

    Spark is started and every table read once before the first measure, so the imports and py4j's first
    calls are not counted; the peak is reset before each sync.
    """
    from cdc_lib.config.load import load_config
    from cdc_lib.pipeline.pipeline import Pipeline

    pipelines = [Pipeline(load_config(path)) for path in config_paths]
    for pipeline in pipelines:
        spark = pipeline.spark()
        for table in pipeline.config.source.tables:
            spark.read.format("delta").load(pipeline.table_path(table)).limit(1).collect()
    _warm_up()

    outcomes = []
    trace = os.environ.get("BINLAKE_BENCH_TRACE") == "1"
    for pipeline in pipelines:
        gc.collect()
        if trace:
            import tracemalloc

            tracemalloc.start(8)
        _reset_peak()
        before = _status_kib("VmRSS")
        started = time.monotonic()
        results = pipeline.sync(until_caught_up=True)
        seconds = time.monotonic() - started
        peak = _status_kib("VmHWM")
        heap_peak = None
        if trace:
            heap_peak = tracemalloc.get_traced_memory()[1]
            snapshot = tracemalloc.take_snapshot()
            tracemalloc.stop()
            for stat in snapshot.statistics("lineno")[:8]:
                print(stat, file=sys.stderr)
        outcomes.append({
            "python_heap_peak_bytes": heap_peak,
            "pipeline": pipeline.config.pipeline,
            "growth_bytes": (peak - before) * 1024,
            "peak_bytes": peak * 1024,
            "seconds": seconds,
            "row_changes": sum(result.row_changes for result in results),
        })
    return outcomes


def _warm_up() -> None:
    """What any earlier batch of a long-running process has done once: import the reader and the apply path,
    and write and replay a small spill (Arrow's compute kernels and Parquet writer are ~40 MB when first used)."""
    import pyarrow.compute  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import cdc_lib.pipeline.sync  # noqa: F401
    from cdc_lib.changes.spill import INSERT, ChangeLog
    from cdc_lib.model.tables import TableRef, TableSchema
    from cdc_lib.model.types import ColumnInfo

    schema = TableSchema(TableRef.parse("warm.up"), (ColumnInfo("id", "int", "int(11)", False),), ("id",))
    folder = Path(tempfile.mkdtemp(prefix="binlake-warm-up-"))
    change_log = ChangeLog(folder, schema, mode="mirror", key_positions=(0,), limit=10)
    for key in range(40):
        change_log.append(INSERT, (key,))
    change_log.commit([(0, 39)], None)
    for _ in change_log.folds():
        pass
    change_log.remove()


def measure_in_subprocess(config_paths: list[Path], *, env: dict[str, str] | None = None,
                          timeout: float = 3600) -> list[dict[str, Any]]:
    """`measure` of each config in a fresh Python process of its own; one result per config.

    One process per config: a second sync in the same process reuses the heap the first one grew and freed
    (the allocator keeps it), so it would look smaller than it is.
    """
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "TZ": "UTC", "PYTHONPATH": str(root), **(env or {})}
    outcomes = []
    for path in config_paths:
        completed = subprocess.run(
            [sys.executable, "-m", "bench.paths.huge_transaction", "--measure", str(path)],
            capture_output=True, text=True, env=environment, timeout=timeout, cwd=root,
        )
        if completed.returncode != 0:
            raise RuntimeError(f"the measuring process failed ({completed.returncode}): {completed.stderr[-3000:]}")
        if environment.get("BINLAKE_BENCH_TRACE") == "1":
            print(completed.stderr[-4000:], file=sys.stderr)
        outcomes += [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    return outcomes


def _config_text(name: str, port: int, lake: Path, table: str, bound: int, spill: Path) -> str:
    return (
        f"pipeline: {name}\n"
        f"source: {{host: 127.0.0.1, port: {port}, user: {USER}, password: {PASSWORD}, "
        f"server_id: {7800 + abs(hash(name)) % 100}, tables: [{table}]}}\n"
        f"sink: {{path: {lake}}}\n"
        'spark: {master: "local[2]"}\n'
        f"batch: {{max_events: 100000000, max_seconds: 86400, max_buffered_changes: {bound}, spill_path: {spill}}}\n"
    )


def _run_size(server: Any, work: Path, rows: int, *, today: bool, bound: int) -> list[dict[str, Any]]:
    from cdc_lib.config.load import load_config
    from cdc_lib.pipeline.pipeline import Pipeline

    server.execute("DROP DATABASE IF EXISTS huge", "CREATE DATABASE huge",
                   "CREATE TABLE huge.t (id BIGINT PRIMARY KEY, amount DECIMAL(12,3) NOT NULL, "
                   "note VARCHAR(64) NOT NULL, at DATETIME(6) NOT NULL)")
    chunk = 500_000
    for start in range(0, rows, chunk):
        count = min(chunk, rows - start)
        server.execute(f"INSERT INTO huge.t SELECT seq, seq * 12.25 - 7.125, CONCAT('row ', seq, ' of the table'), "
                       f"TIMESTAMP('2026-01-01') + INTERVAL seq SECOND FROM huge.seq_{start + 1}_to_{start + count}")
    variants = [("spill", bound)] + ([("today", TODAY_BOUND)] if today else [])
    paths = []
    for variant, bound in variants:
        folder = work / f"{variant}-{rows}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        path = folder / "binlake.yaml"
        path.write_text(_config_text(f"huge_{variant}_{rows}", server.port, folder / "lake", "huge.t", bound,
                                     folder / "spill"))
        Pipeline(load_config(path)).snapshot()
        paths.append(path)
    server.execute("DELETE FROM huge.t")  # one statement, one transaction: `rows` row changes
    outcomes = measure_in_subprocess(paths)
    for (variant, _), outcome in zip(variants, outcomes, strict=True):
        outcome["variant"], outcome["rows"] = variant, rows
        leftovers = list((work / f"{variant}-{rows}" / "spill").rglob("*.parquet"))
        outcome["spill_files_left"] = len(leftovers)
    return outcomes


def _slope(points: list[dict[str, Any]]) -> float | None:
    """MB of peak growth per 100,000 rows, between the smallest and the largest size."""
    if len(points) < 2:
        return None
    low, high = min(points, key=lambda p: p["rows"]), max(points, key=lambda p: p["rows"])
    return (high["growth_bytes"] - low["growth_bytes"]) / MB / ((high["rows"] - low["rows"]) / 100_000)


def report(outcomes: list[dict[str, Any]]) -> str:
    lines = ["huge transaction: one DELETE of every row, synced in one process (peak RSS growth of Python)",
             f"{'path':<6} {'rows':>10} {'peak growth MB':>15} {'peak RSS MB':>12} {'seconds':>9} {'left':>5}"]
    for outcome in sorted(outcomes, key=lambda o: (o["variant"], o["rows"])):
        lines.append(
            f"{outcome['variant']:<6} {outcome['rows']:>10,} {outcome['growth_bytes'] / MB:>15.1f} "
            f"{outcome['peak_bytes'] / MB:>12.1f} {outcome['seconds']:>9.1f} {outcome['spill_files_left']:>5}"
        )
    for variant in ("today", "spill"):
        slope = _slope([o for o in outcomes if o["variant"] == variant])
        if slope is not None:
            lines.append(f"slope {variant}: {slope:.1f} MB per 100,000 rows")
    return "\n".join(lines)


def run_on(server: Any, work: Path, *, rows: list[int], today_rows: int, huge: bool,
           bound: int = SPILL_BOUND) -> list[dict[str, Any]]:
    """Every size on a running server (with the bench's binlake user), in folders under `work`."""
    outcomes = []
    for size in [*rows, *([HUGE_ROWS] if huge else [])]:
        outcomes += _run_size(server, work, size, today=size <= today_rows, bound=bound)
    return outcomes


HUGE_ROWS = 5_000_000


def run(*, rows: list[int], today_rows: int, huge: bool, bound: int = SPILL_BOUND) -> str:
    from cdc_lib.dev.local_mariadb import LocalMariaDB

    work = Path(tempfile.mkdtemp(prefix="binlake-huge-"))
    server = LocalMariaDB(work / "mariadb", server_id=1).start()
    try:
        server.create_cdc_user(USER, PASSWORD)
        return report(run_on(server, work, rows=rows, today_rows=today_rows, huge=huge, bound=bound))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", nargs="+", metavar="CONFIG", help="measure these pipelines' syncs (internal)")
    parser.add_argument("--rows", default="50000,200000", help="table sizes, comma-separated")
    parser.add_argument("--today-rows", type=int, default=400_000, help="largest size today's path is run at")
    parser.add_argument("--huge", action="store_true", help="also 5,000,000 rows (spilled path only; a few minutes)")
    parser.add_argument("--bound", type=int, default=SPILL_BOUND, help="the spilled path's max_buffered_changes")
    arguments = parser.parse_args()
    if arguments.measure:
        for outcome in measure(arguments.measure):
            print(json.dumps(outcome), flush=True)
        return
    print(run(rows=[int(size) for size in arguments.rows.split(",")], today_rows=arguments.today_rows,
              huge=arguments.huge, bound=arguments.bound))


if __name__ == "__main__":
    main()
