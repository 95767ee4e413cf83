"""A year of minute batches on one table, with and without maintenance (`python -m bench.soak.soak --commits 20000`).

One mirror table is driven through `--commits` small mixed batches (inserts of new keys, updates biased to recent
keys, deletes) written by binlake's own batch write path (`cdc_lib.sink.merge.merge_changes` with the delta-rs
writer: the SetTransaction, the replay check, the key-ordered rewrite), as fast as the machine allows. The batches
are generated in Python, not read from a MariaDB binlog: the binlog read costs the same per batch with or
without maintenance, and leaving it out is what lets 20,000 commits run in minutes on two cores. A Python dict
of the table is the source of truth the result is checked against (read with `deltalake`).

Twice, from the same seed: with maintenance every `--maintain-every` commits (`cdc_lib.maintenance.run.maintain`,
the code `binlake maintain` runs, with retention 0: a year of minute batches keeps Delta's 7 days, scaled down
here), and without. Each records per-batch write time (percentiles), the cost of reading the log's tail (the
listing and reads each batch's replay check does: `delta_log.read_log_tail`) and of opening the table, the file
count, bytes on disk ÷ bytes of a freshly written copy of the same rows, the newest checkpoint's size and the
removed-file records in it, and a full scan with `deltalake`; then the same rows freshly written in as many files
as the soaked table has live after its last maintenance are scanned for the baseline (so the ratio compares the
log and the layout, not a different number of Parquet files).

On a shared machine `--minutes` bounds each half: it stops at the commits it reached, measures and says so;
`--only` runs one half (the two halves as two processes).
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cdc_lib.changes.events import TableChanges
from cdc_lib.config.parse import parse_config
from cdc_lib.maintenance.run import maintain
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from cdc_lib.sink import delta_log
from cdc_lib.sink.commits import OPERATION_COLUMN
from cdc_lib.sink.delta_rs import file_layout
from cdc_lib.sink.delta_rs.writer import arrow_records
from cdc_lib.sink.merge import merge_changes
from cdc_lib.sink.storage import sink_storage
from cdc_lib.state.context import PipelineContext
from cdc_lib.state.offset_store import open_offset_store
from cdc_lib.state.offsets import PipelineState, TableState

TABLE = "soak.events"
COLUMNS = (
    ColumnInfo("id", "bigint", "bigint(20)", False),
    ColumnInfo("account", "int", "int(11)", False),
    ColumnInfo("amount", "bigint", "bigint(20)", True),
    ColumnInfo("status", "varchar", "varchar(16)", True, character_set="utf8mb4"),
    ColumnInfo("note", "varchar", "varchar(200)", True, character_set="utf8mb4"),
)
SCHEMA = TableSchema(table=TableRef.parse(TABLE), columns=COLUMNS, primary_key=("id",))
Row = tuple[Any, ...]


@dataclass
class Run:
    name: str
    batch_seconds: list[float] = field(default_factory=list)
    maintenance_seconds: list[float] = field(default_factory=list)
    compacted_files: int = 0
    vacuumed_files: int = 0
    log_files_removed: int = 0
    tombstones_dropped: int = 0
    commits: int = 0
    figures: dict[str, float] = field(default_factory=dict)


def make_row(key: int, rng: random.Random) -> Row:
    return (key, rng.randrange(10_000), rng.randrange(1_000_000), rng.choice(("new", "paid", "shipped")),
            "n" * rng.randrange(10, 120))


def context_for(work: Path) -> PipelineContext:
    """A pipeline context on `work` whose state holds the soak table (maintain reads its schema there)."""
    config = parse_config({
        "pipeline": "soak",
        "source": {"host": "127.0.0.1", "port": 3306, "user": "unused", "password": "unused", "server_id": 1,
                   "tables": [TABLE]},
        "sink": {"path": str(work / "lake"), "tables": {TABLE: {"maintenance": {
            "min_files_to_compact": 4, "vacuum_retention_hours": 0, "checkpoint_every_commits": 100}}}},
        "offsets": {"uri": str(work / "offsets")},
        "batch": {"writer": "delta-rs"},
    })
    context = PipelineContext(config=config, store=open_offset_store(config.offsets), sink=sink_storage(config.sink))
    start = BinlogPosition("binlog.000001", 4)
    table = TableState(position=start, snapshot_low=start, snapshot_high=start, snapshot_at="2026-01-01T00:00:00Z",
                       schema=SCHEMA.to_json(), consistent=True)
    context.store.write(PipelineState(pipeline="soak", tables={TABLE: table}), None)
    return context


def initial_table(path: str, rows: dict[int, Row], files: int = 1) -> None:
    """The table as a delta-rs snapshot leaves it: sorted by key, files of binlake's target size (`files` > 1:
    that many files of equal row counts, one append each, since delta-rs 1.x sizes files by bytes only)."""
    from deltalake import write_deltalake

    records = arrow_records(SCHEMA, [(*rows[key], "u") for key in sorted(rows)]).drop_columns([OPERATION_COLUMN])
    per_file = -(-len(rows) // max(1, files))
    write_deltalake(path, records.slice(0, per_file), configuration={
        file_layout.TARGET_FILE_SIZE_PROPERTY: str(file_layout.TARGET_FILE_BYTES),
        # The log's retention scaled down with the year (30 days of minute batches would be all of them). The
        # file retention is left at Delta's 7 days: maintenance's checkpoint drops the tombstones of the files
        # its VACUUM removed (retention 0 here), not the table property.
        "delta.logRetentionDuration": "interval 0 hours",
    }, target_file_size=file_layout.TARGET_FILE_BYTES)
    for start in range(per_file, len(rows), per_file):
        write_deltalake(path, records.slice(start, per_file), mode="append",
                        target_file_size=file_layout.TARGET_FILE_BYTES)


def batch(rows: dict[int, Row], next_key: int, rng: random.Random, *, inserts: int, updates: int,
          deletes: int) -> tuple[TableChanges, int]:
    """A minute's mixed changes: new keys at the top, updates and deletes mostly among the recent keys."""
    changes = TableChanges(key_positions=(0,))
    for _ in range(inserts):
        row = make_row(next_key, rng)
        changes.insert(row)
        rows[next_key] = row
        next_key += 1
    keys = list(rows)
    for count, kind in ((updates, "update"), (deletes, "delete")):
        for _ in range(count):
            # Three in four changes among the newest tenth of the keys: a CDC table's hot rows are its recent ones.
            pool = keys[-max(1, len(keys) // 10):] if rng.random() < 0.75 else keys
            key = rng.choice(pool)
            if key not in rows:
                continue
            if kind == "update":
                after = make_row(key, rng)
                changes.update(rows[key], after)
                rows[key] = after
            else:
                changes.delete(rows.pop(key))
    return changes, next_key


def disk_bytes(path: str) -> int:
    return sum(file.stat().st_size for file in Path(path).rglob("*") if file.is_file() and "_delta_log" not in
               file.parts)


def measure(path: str, rows: dict[int, Row], run: Run, label: str, context: PipelineContext) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable

    started = time.perf_counter()
    tail = delta_log.read_log_tail(path, application=context.application(TABLE), storage=context.sink)
    run.figures[f"{label} log tail read ms"] = (time.perf_counter() - started) * 1000
    assert tail is not None
    started = time.perf_counter()
    table = DeltaTable(path)
    run.figures[f"{label} table open ms"] = (time.perf_counter() - started) * 1000
    files = pa.table(table.get_add_actions(flatten=True))
    run.figures[f"{label} files"] = files.num_rows
    run.figures[f"{label} log files"] = len(list((Path(path) / "_delta_log").iterdir()))
    # What opening the table reads first: the newest checkpoint (its size and the removed-file records in it).
    if tail.checkpoint_version is not None:
        checkpoint = Path(path) / "_delta_log" / f"{tail.checkpoint_version:020d}.checkpoint.parquet"
        import pyarrow.parquet as pq

        content = pq.read_table(checkpoint, columns=["remove"])
        run.figures[f"{label} checkpoint KiB"] = checkpoint.stat().st_size / 1024
        run.figures[f"{label} checkpoint tombstones"] = content.num_rows - content.column("remove").null_count
    scans = []
    for _ in range(5):
        started = time.perf_counter()
        scanned = DeltaTable(path).to_pyarrow_table()
        scans.append(time.perf_counter() - started)
    run.figures[f"{label} full scan ms"] = min(scans) * 1000
    run.figures[f"{label} disk ÷ live"] = disk_bytes(path) / max(1, sum(files.column("size_bytes").to_pylist()))
    assert scanned.num_rows == len(rows), f"{run.name}: {scanned.num_rows} rows in Delta, {len(rows)} in the source"
    assert sorted(tuple(row.values()) for row in scanned.to_pylist()) == [rows[key] for key in sorted(rows)], \
        f"{run.name}: the table differs from the source"


def fresh_scan_ms(path: str, rows: dict[int, Row], files: int) -> tuple[float, int]:
    """The scan time and bytes of the same rows freshly written in `files` files (the baseline the targets compare
    with: as many files as the soaked table has live after its last maintenance, so the scans compare the log and
    the layout, not a different number of Parquet files)."""
    from deltalake import DeltaTable

    initial_table(path, rows, files=files)
    scans = []
    for _ in range(5):
        started = time.perf_counter()
        DeltaTable(path).to_pyarrow_table()
        scans.append(time.perf_counter() - started)
    return min(scans) * 1000, disk_bytes(path)


def soak(work: Path, *, commits: int, maintain_every: int | None, seed: int, initial_rows: int,
         minutes: float | None = None) -> tuple[Run, dict]:
    rng = random.Random(seed)
    context = context_for(work)
    path = context.table_path(TABLE)
    rows = {key: make_row(key, rng) for key in range(1, initial_rows + 1)}
    initial_table(path, rows)
    next_key = initial_rows + 1
    run = Run("with maintenance" if maintain_every else "without maintenance", commits=commits)
    application = context.application(TABLE)
    deadline = time.monotonic() + minutes * 60 if minutes else None
    for sequence in range(1, commits + 1):
        if deadline is not None and time.monotonic() > deadline:
            # Out of time on a shared machine: the run ends here and says how far it got.
            print(f"  {run.name}: stopped at {sequence - 1} of {commits} commits (--minutes {minutes})", flush=True)
            run.commits = sequence - 1
            break
        changes, next_key = batch(rows, next_key, rng, inserts=rng.randrange(1, 8), updates=rng.randrange(0, 8),
                                  deletes=rng.randrange(0, 3))
        started = time.perf_counter()
        merge_changes(None, path, SCHEMA, changes, application=application, txn_version=sequence,
                      metadata={"table": TABLE}, storage=context.sink, writer="delta-rs")
        run.batch_seconds.append(time.perf_counter() - started)
        if maintain_every and sequence % maintain_every == 0:
            started = time.perf_counter()
            (outcome,) = maintain(context)
            run.maintenance_seconds.append(time.perf_counter() - started)
            run.compacted_files += outcome.compacted_files
            run.vacuumed_files += outcome.vacuumed_files
            run.log_files_removed += outcome.log_files_removed
            run.tombstones_dropped += outcome.tombstones_dropped
        if sequence % 1000 == 0:
            print(f"  {run.name}: {sequence}/{commits} commits, last batch {run.batch_seconds[-1] * 1000:.1f} ms",
                  flush=True)
    measure(path, rows, run, "end", context)
    # What one maintenance run does to the table as it ends (for the run without: a first one after a year).
    started = time.perf_counter()
    maintain(context)
    run.figures["final maintenance s"] = time.perf_counter() - started
    measure(path, rows, run, "after maintenance", context)
    return run, rows


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=20_000)
    parser.add_argument("--maintain-every", type=int, default=60, help="commits between maintenance runs (hourly)")
    parser.add_argument("--unmaintained-commits", type=int, default=None,
                        help="commits of the run without maintenance (default --commits); its batches slow down as "
                             "its log grows, so a shorter one fits a time budget (the report says so)")
    parser.add_argument("--only", choices=("maintained", "unmaintained"),
                        help="run one half (e.g. the two halves as two processes, each reported on its own)")
    parser.add_argument("--minutes", type=float, default=None,
                        help="each half stops after this long, at the commits it reached (the report says how many)")
    parser.add_argument("--initial-rows", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--workdir", help="default: a temporary folder, removed afterwards")
    arguments = parser.parse_args(argv)
    base = Path(arguments.workdir or tempfile.mkdtemp(prefix="binlake-soak-"))
    runs = []
    try:
        unmaintained = arguments.unmaintained_commits or arguments.commits
        for every, commits in ((arguments.maintain_every, arguments.commits), (None, unmaintained)):
            if arguments.only and arguments.only != ("maintained" if every else "unmaintained"):
                continue
            work = base / ("maintained" if every else "unmaintained")
            shutil.rmtree(work, ignore_errors=True)
            started = time.perf_counter()
            run, rows = soak(work, commits=commits, maintain_every=every, seed=arguments.seed,
                             initial_rows=arguments.initial_rows, minutes=arguments.minutes)
            run.figures["wall seconds"] = time.perf_counter() - started
            fresh_ms, fresh_bytes = fresh_scan_ms(str(base / f"fresh-{every or 0}"), rows,
                                                  int(run.figures["after maintenance files"]))
            run.figures["fresh full scan ms"] = fresh_ms
            run.figures["after maintenance disk ÷ fresh bytes"] = \
                disk_bytes(str(work / "lake" / "soak" / "events")) / fresh_bytes
            run.figures["end scan ÷ fresh scan"] = run.figures["end full scan ms"] / fresh_ms
            after = run.figures["after maintenance full scan ms"]
            run.figures["after maintenance scan ÷ fresh scan"] = after / fresh_ms
            # What a commit costs end to end, and how much of it is the batch's own write (the rest: maintenance,
            # generating the changes, the measures).
            run.figures["wall ms per commit"] = run.figures["wall seconds"] * 1000 / max(1, run.commits)
            run.figures["batch write share of wall"] = sum(run.batch_seconds) / run.figures["wall seconds"]
            runs.append(run)
            # After each half: a run cut short still leaves the half it finished.
            report(runs, arguments.maintain_every)
    finally:
        if not arguments.workdir:
            shutil.rmtree(base, ignore_errors=True)


def report(runs: list[Run], every: int) -> None:
    print(f"\nSoak: {' / '.join(f'{run.commits} ({run.name})' for run in runs)} mixed batches (1-7 inserts, "
          f"0-7 updates, 0-2 deletes each); maintenance every {every} commits in the first run", flush=True)
    header = f"{'':38}" + "".join(f"{run.name:>22}" for run in runs)
    print(header)

    def line(label: str, values: list[str]) -> None:
        print(f"{label:38}" + "".join(f"{value:>22}" for value in values))

    for share, name in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
        line(f"batch write {name} ms", [f"{percentile(run.batch_seconds, share):.1f}" for run in runs])
    line("batch write mean ms", [f"{statistics.mean(run.batch_seconds) * 1000:.1f}" for run in runs])
    line("last 1000 batches mean ms", [f"{statistics.mean(run.batch_seconds[-1000:]) * 1000:.1f}" for run in runs])
    line("maintenance runs / mean s", [f"{len(run.maintenance_seconds)} / "
                                       f"{statistics.mean(run.maintenance_seconds or [0]):.2f}" for run in runs])
    line("files compacted / vacuumed", [f"{run.compacted_files} / {run.vacuumed_files}" for run in runs])
    line("log files removed", [str(run.log_files_removed) for run in runs])
    line("tombstones dropped from checkpoints", [str(run.tombstones_dropped) for run in runs])
    for key in runs[0].figures:
        line(key, [f"{run.figures.get(key, float('nan')):.2f}" for run in runs])


if __name__ == "__main__":
    main()
