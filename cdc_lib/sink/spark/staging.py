"""Staging a batch's change records for Spark: as Parquet parts Arrow writes, or inside the query plan.

The records are a fold's rows, then any extra columns (a table mode's), then the operation
(`commits.OPERATION_COLUMN`); the MERGEs of `writer` and `modes` read them as their source.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_lib.changes.events import TableChanges
from cdc_lib.changes.spill import ParquetParts, SpillError, arrow_type
from cdc_lib.common.faults import failpoint
from cdc_lib.model.tables import TableSchema
from cdc_lib.model.types import spark_type_ddl
from cdc_lib.sink.commits import OPERATION_COLUMN
from cdc_lib.sink.spark.session import STAGING_PATH_CONF, is_local_master

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def spark_schema(
    schema: TableSchema, *, with_operation: bool = False, extra_columns: tuple[tuple[str, str], ...] = ()
) -> Any:
    """The Spark schema of the table's rows; `extra_columns` ((name, Spark type) …) and the operation column
    follow the source's columns."""
    from pyspark.sql.types import StringType, StructField, StructType, _parse_datatype_string

    fields = [
        StructField(column.name, _parse_datatype_string(spark_type_ddl(column)), True) for column in schema.columns
    ]
    fields += [StructField(name, _parse_datatype_string(ddl), True) for name, ddl in extra_columns]
    if with_operation:
        fields.append(StructField(OPERATION_COLUMN, StringType(), False))
    return StructType(fields)


class StagedChanges:
    """A batch's change records as a DataFrame, added in parts.

    The records go through Parquet files written by Arrow (one per part), several times faster than pickling
    rows through py4j, when executors can read the driver's files: on local Spark, or on a cluster with a
    shared `spark.staging_path`. Otherwise the rows travel inside the query plan, which needs them all in
    Python at once: refused for a spilled batch (`SpillError`), whose point is not to.

    Each record is the row's columns, then `extra_columns` ((name, Spark type) …), then the operation.
    """

    def __init__(self, spark: SparkSession, schema: TableSchema, extra_columns: tuple[tuple[str, str], ...] = (),
                 *, spilled: bool = False) -> None:
        import pyarrow as pa

        self.spark = spark
        self.struct = spark_schema(schema, with_operation=True, extra_columns=extra_columns)
        self.names = [*schema.column_names, *(name for name, _ in extra_columns), OPERATION_COLUMN]
        self.types = [arrow_type(spark_type_ddl(column)) for column in schema.columns]
        self.types += [arrow_type(ddl) for _, ddl in extra_columns] + [pa.string()]
        self.arrow_schema = pa.schema(list(zip(self.names, self.types, strict=True)))
        staging_root = spark.conf.get(STAGING_PATH_CONF, None)
        self.folder: Path | None = None
        self.in_plan: list[tuple[Any, ...]] | None = None
        self.parts = 0
        self.rows = 0  # records added so far
        self.spilled = spilled
        if staging_root is None and not is_local_master(spark.sparkContext.master or ""):
            if spilled:
                raise SpillError(
                    "a batch spilled to local Parquet (batch.max_buffered_changes), and the Spark cluster's "
                    "executors cannot read the driver's files",
                    remedy="set spark.staging_path to a folder shared by the driver and every worker, or raise "
                    "batch.max_buffered_changes (and the driver's memory)",
                    table=schema.table.name,
                )
            self.in_plan = []
            return
        if staging_root is not None:
            Path(staging_root).mkdir(parents=True, exist_ok=True)
        self.folder = Path(tempfile.mkdtemp(prefix="binlake-batch-", dir=staging_root))
        self.files = ParquetParts(self.folder, "changes", self.arrow_schema)

    def __enter__(self) -> StagedChanges:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.folder is not None:
            self.files.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    def add(self, records: list[tuple[Any, ...]]) -> None:
        self.rows += len(records)
        if self.in_plan is not None:
            self.in_plan.extend(records)
            return
        import pyarrow as pa

        columns = list(zip(*records, strict=True)) if records else [() for _ in self.names]
        table = pa.Table.from_arrays(
            [pa.array(values, type=kind) for values, kind in zip(columns, self.types, strict=True)],
            schema=self.arrow_schema,
        )
        self.files.write(table)  # one row group per part, in a few files
        self.parts += 1

    def frame(self) -> DataFrame:
        if self.spilled:
            failpoint("spilled_apply")  # every part staged from the spill, the Delta commit not yet made
        if self.in_plan is not None:
            return self.spark.createDataFrame(self.in_plan, schema=self.struct)
        if self.parts == 0:
            self.add([])
        self.files.close()
        return self.spark.read.schema(self.struct).parquet(str(self.folder))


@contextmanager
def staged_source(
    spark: SparkSession,
    schema: TableSchema,
    records: list[tuple[Any, ...]],
    extra_columns: tuple[tuple[str, str], ...] = (),
) -> Iterator[DataFrame]:
    """The records as a DataFrame, in one part (see `StagedChanges`)."""
    with StagedChanges(spark, schema, extra_columns) as staged:
        staged.add(records)
        yield staged.frame()



def mirror_records(schema: TableSchema, changes: TableChanges) -> list[tuple[Any, ...]]:
    """A mirror fold as staged rows: upserts with their row, deletes as the key in an otherwise empty row."""
    width = len(schema.columns)
    key_positions = [schema.column_names.index(key) for key in schema.primary_key]
    records: list[tuple[Any, ...]] = [(*row, "u") for row in changes.upserts()]
    for key in changes.deleted_keys():
        placeholder: list[Any] = [None] * width
        for position, value in zip(key_positions, key, strict=True):
            placeholder[position] = value
        records.append((*placeholder, "d"))
    return records


__all__ = ["StagedChanges", "mirror_records", "spark_schema", "staged_source"]
