"""A table's layout on Spark's writes: partition columns and liquid clustering (docs/layout.md).

Delta 4.0.1 keeps neither by itself through binlake's overwrites (a snapshot, a column retype), as measured:
an overwrite with `overwriteSchema` and no `partitionBy` leaves the table unpartitioned, and any overwrite of a
clustered table resets its clustering columns to none (a path write's `clusterBy` is ignored, and an overwrite
with it clears them too). So every overwrite names the partition columns again, and clustering is set after it
with `ALTER TABLE … CLUSTER BY`, a metadata-only commit that is a no-op when the table already has it (a replay
after a crash between the two commits sets it then). Appends, MERGEs and `ADD COLUMNS` keep both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cdc_lib.config.model import TableLayout
from cdc_lib.errors import LayoutError
from cdc_lib.model.types import quote_identifier
from cdc_lib.sink import delta_log
from cdc_lib.sink.storage import SinkStorage

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def check_layout(layout: TableLayout, columns: Sequence[str], *, table: str) -> None:
    """Refuse a layout naming a column the table does not land (a typo, a column dropped from the source).

    Raises:
        LayoutError: a partition or clustering column is not among `columns`.
    """
    key = "partition_by" if layout.partition_by else "cluster_by"
    for name in (*layout.partition_by, *layout.cluster_by):
        if name not in columns:
            raise LayoutError(
                f"sink.tables.{table}.{key} names column '{name}', which the table does not have "
                f"(columns: {', '.join(columns)})",
                remedy=f"fix sink.tables.{table}.{key}, then snapshot the table again", table=table,
            )


def partition_columns(path: str, *, storage: SinkStorage) -> tuple[str, ...]:
    """The table's partition columns, from its Delta log (empty: none, or no table)."""
    settings = delta_log.table_detail(path, storage=storage)
    return settings.partition_columns if settings is not None else ()


def clustering_columns(spark: SparkSession, path: str, *, storage: SinkStorage) -> tuple[str, ...]:
    """The table's liquid clustering columns (empty: not clustered). Spark is asked only for a table whose
    protocol has the `clustering` feature (DESCRIBE DETAIL is a Spark job)."""
    settings = delta_log.table_detail(path, storage=storage)
    if settings is None or "clustering" not in settings.features:
        return ()
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").select("clusteringColumns").first()
    return tuple(detail[0]) if detail is not None and detail[0] is not None else ()


def set_clustering(spark: SparkSession, path: str, wanted: tuple[str, ...], *, storage: SinkStorage) -> None:
    """Cluster the table by `wanted` (empty: by nothing), unless it already is."""
    current = clustering_columns(spark, path, storage=storage)
    if current == wanted:
        return
    columns = ", ".join(quote_identifier(name) for name in wanted) if wanted else "NONE"
    spark.sql(f"ALTER TABLE delta.`{path}` CLUSTER BY {'(' + columns + ')' if wanted else columns}")


__all__ = ["check_layout", "clustering_columns", "partition_columns", "set_clustering"]
