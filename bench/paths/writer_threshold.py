"""Spark MERGE against delta-rs MERGE by source size, into one large table (the `batch.writer: auto` threshold).

    PYTHONPATH=$PWD python -m bench.paths.writer_threshold [--target 2000000] [--sources 1000,100000,1000000] \
        [--repeat 2]

One table of `target` rows (bigint key, an int, a double, a 40-character string, a timestamp), written once by
Spark; then, per source size and repeat, one MERGE by each engine in turn (alternating, same process, warm JVM),
of a source that is half updates of existing keys, half new keys, in the staged shape binlake merges (the row's
columns and `_binlake_op`). Each MERGE goes through binlake's own writers (`merge.merge_changes` with
`writer=spark` or `delta-rs`), so the figures include staging, the log reads and the commit. Prints wall seconds
and peak RSS growth per engine and size.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cdc_lib.changes.events import TableChanges
from cdc_lib.config.model import SparkConfig
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from cdc_lib.sink import merge
from cdc_lib.sink.spark.session import spark_session

COLUMNS = (("id", "bigint", "bigint(20)"), ("qty", "int", "int(11)"), ("price", "double", "double"),
           ("label", "varchar", "varchar(40)"), ("seen", "datetime", "datetime(6)"))


def bench_schema() -> TableSchema:
    columns = tuple(
        ColumnInfo(name, kind, column_type, nullable=name != "id", datetime_precision=6 if kind == "datetime" else None,
                   character_set="utf8mb4" if kind == "varchar" else None)
        for name, kind, column_type in COLUMNS
    )
    return TableSchema(table=TableRef("bench", "wide"), columns=columns, primary_key=("id",))


def create_target(spark: Any, path: str, rows: int) -> None:
    from pyspark.sql import functions as F

    frame = spark.range(rows).select(
        F.col("id"), (F.col("id") % 1000).cast("int").alias("qty"), (F.col("id") / 7.25).alias("price"),
        F.sha1(F.col("id").cast("string")).alias("label"),
        F.timestamp_seconds(F.col("id") + 1_700_000_000).cast("timestamp_ntz").alias("seen"),
    )
    frame.repartition(4).write.format("delta").save(path)


def changes_of(size: int, target: int, round_number: int) -> TableChanges:
    """Half updates spread over the table's keys, half keys past its end (inserts)."""
    changes = TableChanges((0,))
    stamp = datetime(2026, 11, 24, 3, 4, 5, 120_000 + round_number, tzinfo=UTC).replace(tzinfo=None)
    step = max(1, target // max(1, size // 2))
    for number in range(size // 2):
        key = number * step
        changes.update((key, 12, 3.5, "old", stamp), (key, 13, 4.25, f"u{round_number}", stamp))
    first_new = target + round_number * size
    for number in range(size - size // 2):
        changes.insert((first_new + number, 7, 12.25, f"i{round_number}", stamp))
    return changes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--target", type=int, default=2_000_000)
    parser.add_argument("--sources", default="1000,100000,1000000")
    parser.add_argument("--repeat", type=int, default=2)
    arguments = parser.parse_args()
    spark = spark_session(SparkConfig(master="local[2]"))
    work = Path(tempfile.mkdtemp(prefix="binlake-writer-threshold-"))
    schema = bench_schema()
    figures: dict[str, dict[str, list[float]]] = {}
    paths = {engine: str(work / engine) for engine in ("spark", "delta-rs")}
    for path in paths.values():
        create_target(spark, path, arguments.target)
    round_number = 0
    for size in (int(value) for value in arguments.sources.split(",")):
        for _ in range(arguments.repeat):
            for engine, path in paths.items():
                round_number += 1
                changes = changes_of(size, arguments.target, round_number)
                rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
                started = time.perf_counter()
                merge.merge_changes(
                    spark if engine == "spark" else None, path, schema, changes, application="bench:wide",
                    txn_version=round_number, metadata={"bench": True}, writer=engine,  # type: ignore[arg-type]
                )
                seconds = time.perf_counter() - started
                growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
                figures.setdefault(f"{size} rows", {}).setdefault(engine, []).append(round(seconds, 3))
                print(f"{size:>8} rows  {engine:<8} {seconds:7.3f} s  peak RSS +{growth:.0f} MB", flush=True)
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
