"""Freshness of the other tables while a big table is being snapshotted (issue 11).

Starts its own MariaDB (or uses the one `python -m bench` started), snapshots N small tables, then snapshots a big
table in a `binlake snapshot` child process. Meanwhile a writer changes every small table twice a second and this
process runs a micro-batch (`Pipeline.sync`, its SparkSession kept warm) every few seconds. Sampled every 0.5 s,
a small table's lag is the age of its oldest change not yet in its Delta table (0 when it has them all; read with
delta-rs, so no Spark). Printed: the max and median lag of the small tables during the snapshot (from the big
table's first progress line to its last), and how many micro-batches ran or were refused meanwhile.

With one pipeline lease held by the snapshot from first row to last, every micro-batch is refused while it runs,
so the lag grows with the snapshot's length; with snapshots under a table lease of their own, it should stay at
the sync interval.

    python -m bench.snapshot.snapshot_freshness [--big-rows 12000000] [--small-tables 5] [--sync-every 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import PASSWORD, USER
from cdc_lib.config.load import load_config
from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.errors import ConcurrentRunError
from cdc_lib.pipeline.pipeline import Pipeline

DATABASE = "bench_fresh"
SAMPLE_SECONDS = 0.5
WRITE_SECONDS = 0.5


def config_text(port: int, work: Path, tables: list[str]) -> str:
    return json.dumps({
        "pipeline": "snapshot_freshness",
        "source": {"host": "127.0.0.1", "port": port, "user": USER, "password": PASSWORD, "server_id": 7911,
                   "tables": tables},
        "sink": {"path": str(work / "lake")},
        "offsets": {"uri": str(work / "lake" / "_offsets")},
        "spark": {"master": "local[2]"},
        "snapshot": {"rows_per_partition": 1_000_000, "max_partitions": 4},
    })


def load(server: LocalMariaDB, *, big_rows: int, small_tables: int) -> list[str]:
    server.execute(
        f"DROP DATABASE IF EXISTS {DATABASE}", f"CREATE DATABASE {DATABASE}",
        f"CREATE TABLE {DATABASE}.big (id BIGINT PRIMARY KEY, qty INT NOT NULL, note VARCHAR(120) NOT NULL)",
    )
    chunk = 500_000
    for start in range(0, big_rows, chunk):
        count = min(chunk, big_rows - start)
        server.execute(
            f"INSERT INTO {DATABASE}.big SELECT seq, seq % 977, REPEAT(CHAR(97 + seq % 26), 40 + seq % 80) "
            f"FROM {DATABASE}.seq_{start + 1}_to_{start + count}"
        )
    small = [f"{DATABASE}.small_{number}" for number in range(small_tables)]
    for table in small:
        server.execute(
            f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT NOT NULL)",
            f"INSERT INTO {table} SELECT seq, 0 FROM {DATABASE}.seq_1_to_100",
        )
    return small


@dataclass
class Writer:
    """Changes every small table every `WRITE_SECONDS`; remembers when each value of row 1 was committed."""

    server: LocalMariaDB
    tables: list[str]
    committed: list[tuple[int, float]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        value = 0
        while not self.stop.wait(WRITE_SECONDS):
            value += 1
            self.server.execute(*(f"UPDATE {table} SET v = {value} WHERE id = 1" for table in self.tables))
            self.committed.append((value, time.time()))

    def lag(self, applied: int, now: float) -> float:
        """Age of the oldest committed change past `applied` (0 when none is missing)."""
        for value, at in self.committed:
            if value > applied:
                return now - at
        return 0.0


def applied_value(path: str) -> int:
    from deltalake import DeltaTable

    rows = DeltaTable(path).to_pyarrow_table(columns=["id", "v"]).to_pylist()
    return max((row["v"] for row in rows if row["id"] == 1), default=0)


def measure(server: LocalMariaDB, work: Path, *, big_rows: int, small_tables: int, sync_every: float
            ) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    print(f"snapshot freshness: loading {big_rows:,} rows and {small_tables} small tables …", flush=True)
    small = load(server, big_rows=big_rows, small_tables=small_tables)
    big = f"{DATABASE}.big"
    config_path = work / "snapshot_freshness.json"
    config_path.write_text(config_text(server.port, work, [big, *small]))
    pipeline = Pipeline(load_config(config_path))
    pipeline.snapshot(small)
    pipeline.sync()  # the warm SparkSession every later micro-batch of this process uses
    writer = Writer(server, small)
    writing = threading.Thread(target=writer.run, daemon=True)
    writing.start()
    time.sleep(2)
    environment = {**os.environ, "TZ": "UTC"}
    snapshot = subprocess.Popen(
        [sys.executable, "-m", "cdc_lib.cli", "--config", str(config_path), "snapshot", "--table", big,
         "--progress-every", "5"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment,
    )
    errors: list[str] = []
    reading = threading.Thread(target=lambda: errors.extend(snapshot.stderr or []), daemon=True)
    reading.start()
    # Its first progress line comes once it holds its lease(s): a micro-batch started before would take the
    # pipeline lease first and make today's snapshot fail at once, measuring nothing.
    while snapshot.poll() is None and not any("snapshot progress:" in line for line in errors):
        time.sleep(0.05)
    # The window measured: from the table's first progress line to its last ("done in"), not the process's
    # JVM start and exit around them.
    started = time.time()
    samples: list[float] = []
    applied = {table: applied_value(pipeline.table_path(table)) for table in small}
    batches = refused = 0
    next_sync = time.time()
    while snapshot.poll() is None and not any("done in" in line for line in errors):
        now = time.time()
        if now >= next_sync:
            try:
                pipeline.sync()
                batches += 1
                applied = {table: applied_value(pipeline.table_path(table)) for table in small}
            except ConcurrentRunError:
                refused += 1
            next_sync = time.time() + sync_every
        now = time.time()
        samples.extend(writer.lag(applied[table], now) for table in small)
        time.sleep(SAMPLE_SECONDS)
    snapshot_seconds = time.time() - started
    writer.stop.set()
    writing.join()
    snapshot.wait()
    reading.join()
    assert snapshot.returncode == 0, "".join(errors)[-2000:]
    return {
        "big_rows": big_rows,
        "small_tables": small_tables,
        "sync_every_s": sync_every,
        "snapshot_s": round(snapshot_seconds, 1),
        "micro_batches_run": batches,
        "micro_batches_refused": refused,
        "lag_max_s": round(max(samples), 1),
        "lag_median_s": round(statistics.median(samples), 1),
        "samples": len(samples),
    }


def run(*, big_rows: int, small_tables: int, sync_every: float) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="binlake-snapshot-freshness-"))
    server = LocalMariaDB(work / "mariadb", server_id=19).start()
    try:
        server.create_cdc_user(USER, PASSWORD)
        return measure(server, work, big_rows=big_rows, small_tables=small_tables, sync_every=sync_every)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def summary(results: dict[str, Any]) -> str:
    return (
        f"during a {results['snapshot_s']:.0f} s snapshot of {results['big_rows']:,} rows, {results['small_tables']} "
        f"small tables changing twice a second, a micro-batch tried every {results['sync_every_s']:g} s: "
        f"lag max {results['lag_max_s']:.1f} s, median {results['lag_median_s']:.1f} s "
        f"({results['micro_batches_run']} micro-batches ran, {results['micro_batches_refused']} refused)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--big-rows", type=int, default=12_000_000)
    parser.add_argument("--small-tables", type=int, default=5)
    parser.add_argument("--sync-every", type=float, default=3.0)
    arguments = parser.parse_args()
    results = run(big_rows=arguments.big_rows, small_tables=arguments.small_tables, sync_every=arguments.sync_every)
    print(json.dumps(results, indent=1))
    print(summary(results))


if __name__ == "__main__":
    main()
