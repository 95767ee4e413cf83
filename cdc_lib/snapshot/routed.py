"""A routed source's snapshot (`sink.routes`; docs/routing.md): its rows stamped with the source's names, and the
refusals that keep one shard's snapshot from touching, or reshaping, its siblings' rows.

The waves themselves are the chunked snapshot's (`cdc_lib.snapshot.chunked`); the first one replaces only this
source's rows (`replace_where`), and every wave is checked to have the target's columns and types first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cdc_lib.changes import routing
from cdc_lib.errors import RoutingError
from cdc_lib.model.tables import TableRef
from cdc_lib.sink import delta_log
from cdc_lib.sink.storage import SinkStorage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def routed_frame(frame: DataFrame, table: TableRef) -> DataFrame:
    """The source's rows with `_binlake_source_db` and `_binlake_source_table` after its columns."""
    from pyspark.sql import functions as F

    for name, value in zip(routing.NAMES, routing.source_values(table), strict=True):
        frame = frame.withColumn(name, F.lit(value))
    return frame


def replace_where(table: TableRef) -> str:
    """The predicate of the source's rows: what its snapshot's first wave replaces (Delta's `replaceWhere`)."""
    return routing.scope(table)


def check_mode(table: TableRef, mode: str, target: str) -> None:
    """A routed table is a mirror (a `database.*` pattern may route a table the config could not name)."""
    if mode != "mirror":
        raise RoutingError(
            f"{table.name} is routed into {target} (sink.routes) but its mode is {mode}; routed tables are mirrors",
            remedy="land it as a mirror, or leave it out of sink.routes (docs/routing.md)", table=table.name,
        )


def check_target_schema(
    spark: SparkSession, path: str, frame: DataFrame, *, table: TableRef, target: str, storage: SinkStorage
) -> None:
    """Refuse a wave whose columns or types differ from the target's: the shards of one routed table have one
    schema, so a wave never reshapes (or is silently cast into) the table its siblings share."""
    if not delta_log.table_exists(path, storage=storage):
        return  # the first source to land creates the target
    existing = [(field.name, field.dataType.simpleString()) for field in spark.read.format("delta").load(path).schema]
    wanted = [(field.name, field.dataType.simpleString()) for field in frame.schema]
    if existing == wanted:
        return
    differing = ", ".join(f"{name} {kind}" for name, kind in sorted(set(existing) ^ set(wanted))) or "column order"
    raise RoutingError(
        f"{table.name} does not have the schema of its routed table {target} (differing: {differing}); a snapshot "
        "would reshape the rows of the other sources",
        remedy=f"give every source routed into {target} the same columns and types (ALTER them alike), then "
        f"re-snapshot it; to change the group's schema, drop the target Delta table and snapshot every source again "
        "(docs/routing.md)",
        table=table.name,
    )


__all__ = ["check_mode", "check_target_schema", "replace_where", "routed_frame"]
