"""What deletion vectors save on one MERGE: 10,000 changes into a 1,000,000-row table, with and without them.

    python -m bench.paths.deletion_vectors [--rows 1000000] [--changes 10000] [--files 8]

Each run builds the table the way a snapshot does (`delta.enableDeletionVectors` set as a table property), then
times one MERGE shaped like binlake's (update or delete by primary key; 10% of the changes are deletes) whose keys
are spread over the whole table, the usual case for updates to old rows. Without deletion vectors the MERGE
rewrites every file holding a changed row; with them it writes only the changed rows and a small bitmap per file.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column


def merge_seconds(
    *, rows: int, changes: int, files: int, deletion_vectors: bool, folder: Path
) -> tuple[float, dict[str, str]]:
    """Seconds one MERGE took, and its Delta operation metrics (rows copied, deletion vectors added…)."""
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    from cdc_lib.config.model import SparkConfig
    from cdc_lib.sink.spark.session import spark_session

    spark = spark_session(SparkConfig(master="local[2]"))
    path = str(folder / f"dv-{str(deletion_vectors).lower()}")
    (
        spark.range(rows).repartition(files, "id")
        .select(F.col("id"), (F.col("id") % 1000).alias("qty"), F.sha2(F.col("id").cast("string"), 256).alias("pad"))
        .write.format("delta").option("delta.enableDeletionVectors", str(deletion_vectors).lower()).save(path)
    )
    step = rows // changes
    source = spark.range(0, changes).select(
        (F.col("id") * step).alias("id"), F.lit(-1).cast("bigint").alias("qty"), F.lit("changed").alias("pad"),
        F.when(F.col("id") % 10 == 0, "d").otherwise("u").alias("_op"),
    ).cache()
    source.count()
    columns: dict[str, str | Column] = {name: f"s.{name}" for name in ("id", "qty", "pad")}
    started = time.monotonic()
    (
        DeltaTable.forPath(spark, path).alias("t").merge(source.alias("s"), "t.id = s.id")
        .whenMatchedDelete(condition="s._op = 'd'").whenMatchedUpdate(set=columns)
        .whenNotMatchedInsert(condition="s._op = 'u'", values=columns).execute()
    )
    seconds = time.monotonic() - started
    expected = rows - changes // 10
    assert spark.read.format("delta").load(path).count() == expected
    metrics = DeltaTable.forPath(spark, path).history(1).select("operationMetrics").first()
    return seconds, dict(metrics[0]) if metrics is not None else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=8)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="binlake-dv-bench-") as folder:
        # The first MERGE of a session pays for JIT and planning warm-up: spend it on a small table.
        merge_seconds(rows=20_000, changes=2_000, files=2, deletion_vectors=False, folder=Path(folder, "warm-up"))
        for deletion_vectors in (False, True):
            seconds, metrics = merge_seconds(rows=arguments.rows, changes=arguments.changes, files=arguments.files,
                                    deletion_vectors=deletion_vectors, folder=Path(folder))
            print(f"deletion_vectors={str(deletion_vectors).lower():5}  MERGE of {arguments.changes:,} changes into "
                  f"{arguments.rows:,} rows ({arguments.files} files): {seconds:.1f} s; "
                  f"rows rewritten {metrics.get('numTargetRowsCopied')}, files added "
                  f"{metrics.get('numTargetFilesAdded')}, deletion vectors added "
                  f"{metrics.get('numTargetDeletionVectorsAdded')}", flush=True)


if __name__ == "__main__":
    main()
