"""binlake on a table shaped like OLake's published MySQL benchmark table, for rows/s per core beside theirs.

OLake's MySQL → Iceberg benchmark (olake.io docs, "Ingestion Benchmarks", MySQL tab; datazip-inc/olake-docs
`docs/benchmarks/ingestion.mdx`) uses the NYC taxi `trips` table below (29 columns: BIGINT key, 10 INT, 2 DATETIME,
1 TINYINT(1), 15 DECIMAL(10,2)) and reports 139,773 rows/s full load and 59,951 rows/s CDC (50 M inserted rows) on
an Azure D64ls v5, 64 vCPUs. Their rows are taxi trips; ours are generated with the same columns and types (two of
the decimals NULL, as `ehail_fee` and `airport_fee` mostly are).

`python -m bench.peers.olake --rows N --changes M` runs it alone; `python -m bench.peers` runs it after the peers.
Per core: OLake's figure divided by its 64 vCPUs (their VM's CPU use is not published); binlake's both ways, its
wall rate over this machine's cores, and its rows per CPU second (binlake's process and JVM, from /proc).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

os.environ["TZ"] = "UTC"

from bench.common import PASSWORD, USER  # noqa: E402
from bench.peers import proc  # noqa: E402
from cdc_lib.config.load import load_config  # noqa: E402
from cdc_lib.dev.local_mariadb import LocalMariaDB  # noqa: E402
from cdc_lib.pipeline.pipeline import Pipeline  # noqa: E402

#: OLake's published MySQL `trips` table, column for column (their AUTO_INCREMENT dropped: the bench sets ids).
TRIPS = """CREATE TABLE bench.trips (
    id BIGINT NOT NULL, cab_type_id INT NULL, vendor_id INT NULL, pickup_datetime DATETIME NULL,
    dropoff_datetime DATETIME NULL, store_and_fwd_flag TINYINT(1) NULL, rate_code_id INT NULL,
    pickup_longitude DECIMAL(10,2) NULL, pickup_latitude DECIMAL(10,2) NULL, dropoff_longitude DECIMAL(10,2) NULL,
    dropoff_latitude DECIMAL(10,2) NULL, passenger_count INT NULL, trip_distance DECIMAL(10,2) NULL,
    fare_amount DECIMAL(10,2) NULL, extra DECIMAL(10,2) NULL, mta_tax DECIMAL(10,2) NULL, tip_amount DECIMAL(10,2) NULL,
    tolls_amount DECIMAL(10,2) NULL, ehail_fee DECIMAL(10,2) NULL, improvement_surcharge DECIMAL(10,2) NULL,
    congestion_surcharge DECIMAL(10,2) NULL, airport_fee DECIMAL(10,2) NULL, total_amount DECIMAL(10,2) NULL,
    payment_type INT NULL, trip_type INT NULL, pickup_nyct2010_gid INT NULL, dropoff_nyct2010_gid INT NULL,
    pickup_location_id INT NULL, dropoff_location_id INT NULL, PRIMARY KEY (id))"""
COLUMNS = 29
OLAKE_VCPUS = 64
OLAKE_FULL_LOAD = 139_773
OLAKE_CDC = 59_951


def insert_trips(server: LocalMariaDB, first: int, count: int, *, per_statement: int = 100_000) -> None:
    """`count` generated trips with ids from `first`, `per_statement` rows a transaction."""
    for low in range(first, first + count, per_statement):
        high = min(low + per_statement, first + count) - 1
        server.execute(
            "INSERT INTO bench.trips SELECT seq, 1 + seq % 2, 1 + seq % 3, "
            "TIMESTAMP('2026-01-01') + INTERVAL seq SECOND, TIMESTAMP('2026-01-01') + INTERVAL seq + 900 SECOND, "
            "seq % 2, 1 + seq % 6, -73.99 + (seq % 50) / 100, 40.75 + (seq % 40) / 100, -73.95 + (seq % 30) / 100, "
            "40.70 + (seq % 60) / 100, 1 + seq % 4, (seq % 3000) / 100, 2.5 + (seq % 5000) / 100, 0.50, 0.50, "
            "(seq % 700) / 100, IF(seq % 10 = 0, 6.55, 0), NULL, 0.30, 2.50, NULL, 4.0 + (seq % 9000) / 100, "
            "1 + seq % 4, 1, 1 + seq % 2000, 1 + (seq * 7) % 2000, 1 + seq % 263, 1 + (seq * 13) % 263 "
            f"FROM bench.seq_{low}_to_{high}"
        )


@dataclass(frozen=True)
class Phase:
    rows: int
    seconds: float
    cpu_seconds: float
    load: proc.Load

    @property
    def rate(self) -> float:
        return self.rows / self.seconds

    @property
    def per_cpu_second(self) -> float:
        return self.rows / self.cpu_seconds if self.cpu_seconds else float("inf")


def run(server: LocalMariaDB, work: Path, rows: int, changes: int) -> tuple[Phase, Phase]:
    """binlake's snapshot of `rows` trips and its sync of `changes` inserted trips (one caught-up sync)."""
    server.execute(TRIPS)
    insert_trips(server, 1, rows)
    config_path = work / "olake.yaml"
    config_path.write_text(
        "pipeline: olake\n"
        f"source: {{host: 127.0.0.1, port: {server.port}, user: {USER}, password: {PASSWORD}, server_id: 7741, "
        "tables: [bench.trips]}\n"
        f"sink: {{path: {work / 'lake-olake'}}}\n"
        'spark: {master: "local[2]"}\n'
        "batch: {max_events: 200000, max_seconds: 600}\n"
    )
    pipeline = Pipeline(load_config(config_path))
    server_pid = server.pid
    assert server_pid is not None

    def measured(step: str, count: int) -> Phase:
        before, load_before = proc.tree_cpu_seconds(os.getpid(), exclude=(server_pid,)), proc.load_now()
        started = time.perf_counter()
        if step == "snapshot":
            seconds = pipeline.snapshot()[0].seconds
        else:
            batches = pipeline.sync(until_caught_up=True)
            assert sum(batch.row_changes for batch in batches) == count, "sync must carry every change"
            seconds = time.perf_counter() - started
        cpu = proc.tree_cpu_seconds(os.getpid(), exclude=(server_pid,)) - before
        return Phase(count, seconds, cpu, proc.Load(load_before, proc.load_now()))

    pipeline.snapshot()  # the JVM's start and the first write's warm-up, outside the figures (as bench.peers does)
    snapshot = measured("snapshot", rows)
    insert_trips(server, rows + 1, changes, per_statement=1000)
    return snapshot, measured("sync", changes)


def report(snapshot: Phase, sync: Phase) -> str:
    cores = os.cpu_count() or 1
    lines = [
        f"OLake-shaped table (their MySQL `trips`: {COLUMNS} columns), {snapshot.rows:,} rows snapshot, "
        f"{sync.rows:,} inserted rows synced; OLake's figures per vCPU are theirs over their 64 vCPUs",
        "",
        "| phase | binlake rows/s | binlake rows/s per core (wall ÷ cores) | binlake rows per CPU second "
        "| OLake rows/s (64 vCPUs) | OLake rows/s per vCPU | load |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    phases = (("full load / snapshot", snapshot, OLAKE_FULL_LOAD), ("CDC (inserts)", sync, OLAKE_CDC))
    for name, phase, theirs in phases:
        lines.append(f"| {name} | {phase.rate:,.0f} | {phase.rate / cores:,.0f} | {phase.per_cpu_second:,.0f} "
                     f"| {theirs:,} | {theirs / OLAKE_VCPUS:,.0f} | {phase.load.describe()} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.olake", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=200_000)
    arguments = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="binlake-olake-"))
    server = LocalMariaDB(work / "mariadb", server_id=1).start()
    try:
        server.create_cdc_user(USER, PASSWORD)
        server.execute("DROP DATABASE IF EXISTS bench", "CREATE DATABASE bench")
        print(report(*run(server, work, arguments.rows, arguments.changes)))
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
