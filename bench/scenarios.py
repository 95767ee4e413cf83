"""Measurements beyond snapshot/sync/idle: MERGE cost vs table size, freshness, memory per batch size."""

from __future__ import annotations

import datetime as dt
import json
import random
import statistics
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc_lib.dev.local_mariadb import LocalMariaDB
from cdc_lib.pipeline.pipeline import Pipeline


def merge_scaling(pipeline: Pipeline, sizes: list[int], changes: int, repeat: int) -> dict[str, Any]:
    """Seconds to MERGE `changes` random-key changes into Delta tables of each size (orders schema)."""
    from pyspark.sql import functions as F

    from cdc_lib.changes.events import TableChanges
    from cdc_lib.model.tables import TableRef, TableSchema
    from cdc_lib.sink import merge
    from cdc_lib.sink.spark.session import spark_session

    spark = spark_session(pipeline.config.spark)
    schema = TableSchema.from_json(TableRef("bench", "orders"), pipeline.read_state().tables["bench.orders"].schema)
    results: dict[str, Any] = {}
    chooser = random.Random(7)
    for size in sizes:
        path = f"{pipeline.config.sink.path}/merge_scaling/{size}"
        frame = spark.range(1, size + 1, numPartitions=max(2, size // 1_000_000)).select(
            F.col("id"),
            (F.col("id") % 5000).cast("int").alias("customer_id"),
            (F.col("id") % 100000 / 100).cast("decimal(12,2)").alias("amount"),
            F.lit("new").alias("status"),
            F.lit("x" * 60).alias("note"),
            F.lit("2026-01-01 00:00:00").cast("timestamp_ntz").alias("created"),
            F.lit("2026-01-01 00:00:00").cast("timestamp").alias("updated"),
        )
        frame.write.format("delta").mode("overwrite").save(path)
        seconds = []
        for attempt in range(repeat):
            batch = TableChanges(key_positions=(0,))
            stamp = dt.datetime(2026, 2, 1)
            stamp_utc = stamp.replace(tzinfo=dt.UTC)
            for _ in range(changes // 2):
                key = chooser.randint(1, size)
                batch.update((key,), (key, 1, Decimal("2.00"), "paid", "u", stamp, stamp_utc))
            for index in range(changes // 4):
                key = size + attempt * changes + index + 1
                batch.insert((key, 1, Decimal("1.00"), "new", "i", stamp, stamp_utc))
            for _ in range(changes // 4):
                batch.delete((chooser.randint(1, size), 0, Decimal("0"), "", "", stamp, stamp_utc))
            started = time.perf_counter()
            merge.merge_changes(
                spark, path, schema, batch, application=f"bench:{size}", txn_version=attempt + 1,
                metadata={"end": {"file": "x", "pos": 4}},
            )
            seconds.append(time.perf_counter() - started)
        results[str(size)] = statistics.median(seconds)
    smallest, largest = str(sizes[0]), str(sizes[-1])
    results["largest_vs_smallest"] = results[largest] / results[smallest]
    return results


def freshness(server: LocalMariaDB, config_path: Path, *, rows_per_second: int, seconds: float) -> dict[str, Any]:
    """p50/p95 seconds from a row's commit to its visibility in Delta, syncing back to back."""
    from cdc_lib.config.load import load_config

    server.execute("CREATE TABLE IF NOT EXISTS bench.fresh (id BIGINT PRIMARY KEY, created DATETIME(6) NOT NULL)")
    pipeline = Pipeline(load_config(config_path))
    pipeline.snapshot()
    stop = threading.Event()
    commits: list[tuple[int, float]] = []

    def writer() -> None:
        connection = server.admin_connection("bench")
        next_id, per_tick = 1, max(1, rows_per_second // 20)
        try:
            while not stop.is_set():
                tick = time.perf_counter()
                with connection.cursor() as cursor:
                    values = ", ".join(f"({next_id + i}, NOW(6))" for i in range(per_tick))
                    cursor.execute(f"INSERT INTO fresh VALUES {values}")
                commits.append((next_id + per_tick - 1, time.perf_counter()))
                next_id += per_tick
                time.sleep(max(0.0, 0.05 - (time.perf_counter() - tick)))
        finally:
            connection.close()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    syncs: list[tuple[float, float]] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        started = time.perf_counter()
        pipeline.sync()
        syncs.append((started, time.perf_counter()))
    stop.set()
    thread.join()
    latencies = []
    for _, committed in commits:
        visible = next((end for start, end in syncs if start >= committed), None)
        if visible is not None:
            latencies.append(visible - committed)
    latencies.sort()
    return {
        "rows_per_second": rows_per_second,
        "samples": len(latencies),
        "p50_s": latencies[len(latencies) // 2],
        "p95_s": latencies[int(len(latencies) * 0.95)],
    }


MEMORY_PROBE = """
import json, resource, sys
from cdc_lib.config.load import load_config
from cdc_lib.pipeline.pipeline import Pipeline
from cdc_lib.sink.spark import session as spark
pipeline = Pipeline(load_config(sys.argv[1]))
batches = pipeline.sync(until_caught_up=True)
jvm_peak_kb = 0
if spark._session is not None:
    pid = spark._session.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            jvm_peak_kb = int(line.split()[1])
print(json.dumps({"python_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "jvm_peak_mb": jvm_peak_kb / 1024, "batches": len(batches),
                  "rows": sum(b.row_changes for b in batches)}))
"""


def memory(config_path: Path, pristine: Path, lake: Path, max_events: int) -> dict[str, Any]:
    """Peak RSS of the Python process and the JVM for a sync of the whole backlog at a batch size."""
    import shutil

    shutil.rmtree(lake)
    shutil.copytree(pristine, lake)
    text = config_path.read_text()
    sized = config_path.with_name(f"memory-{max_events}.yaml")
    sized.write_text(text.replace("max_events: 200000", f"max_events: {max_events}"))
    output = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(sized)], capture_output=True, text=True,
                            check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def snapshot_stages(pipeline: Pipeline, table: str, repeat: int) -> dict[str, Any]:
    """Where a snapshot's time goes: the same JDBC read ending in no-op, plain Parquet, Delta, Delta with key stats.

    Each stage adds one cost to the previous one (read + type casts, Parquet encoding, Delta's per-file column
    statistics), so the differences between the medians are the profile of `binlake snapshot`.
    """
    import shutil

    from cdc_lib.model.tables import TableRef
    from cdc_lib.sink.spark.session import spark_session
    from cdc_lib.snapshot.jdbc_read import partition_predicates, read_table
    from cdc_lib.source.server import describe_table, query, source_connection

    config = pipeline.config
    spark = spark_session(config.spark)
    database, name = table.split(".")
    with source_connection(config.source) as connection:
        schema = describe_table(connection, TableRef(database, name))
        predicates, _ = partition_predicates(
            connection, schema, config.snapshot, default_parallelism=spark.sparkContext.defaultParallelism
        )
        rows = int(query(connection, f"SELECT COUNT(*) FROM {database}.{name}")[0][0])
    scratch = Path(config.sink.path) / "_bench_snapshot_stages"
    key_only = ",".join(schema.primary_key)

    def to_noop() -> None:
        read_table(spark, config.source, schema, predicates).write.format("noop").mode("overwrite").save()

    def to_parquet() -> None:
        read_table(spark, config.source, schema, predicates).write.mode("overwrite").parquet(str(scratch / "parquet"))

    def to_delta() -> None:
        read_table(spark, config.source, schema, predicates).write.format("delta").mode("overwrite").save(
            str(scratch / "delta")
        )

    def to_delta_key_stats() -> None:
        read_table(spark, config.source, schema, predicates).write.format("delta").mode("overwrite").option(
            "delta.dataSkippingStatsColumns", key_only
        ).save(str(scratch / "delta_key_stats"))

    stages = {"read_to_noop": to_noop, "to_parquet": to_parquet, "to_delta": to_delta,
              "to_delta_key_stats": to_delta_key_stats}
    results: dict[str, Any] = {"partitions": len(predicates)}
    try:
        for stage, run in stages.items():
            seconds = []
            for _ in range(repeat):
                started = time.perf_counter()
                run()
                seconds.append(time.perf_counter() - started)
            results[f"{stage}_rows_per_s"] = rows / statistics.median(seconds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return results
