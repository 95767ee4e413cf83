"""Where a replay of served binlog bytes starts: the table's state as binlake's one-shot snapshot leaves it.

The protocol stubs (tests/mysql_stub.py, tests/mariadb_stub.py) cannot serve a snapshot's JDBC read, so a replay
test gives the table its state the one documented way that needs none: a snapshot commit (`kind: snapshot`, its
`end` the table's offset, the SetTransaction of the table's app id) written to the Delta table with `deltalake`, as a
snapshot that crashed before its offset write leaves it. The sync's first step adopts it as the table's offset
(`state.table_offsets.reconcile_with_delta`: the Delta log wins, invariant 3).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from deltalake import CommitProperties, Transaction, write_deltalake

from cdc_lib.common.formats import COMMIT_FORMAT
from cdc_lib.config.model import PipelineConfig
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.model.tables import TableRef, TableSchema
from cdc_lib.model.types import ColumnInfo
from cdc_lib.sink.commits import app_id
from cdc_lib.sink.delta_rs import writer as delta_rs_writer
from tests.mysql_stub import StubTable


def stub_schema(table: StubTable) -> TableSchema:
    """The table as binlake's `describe_table` reads it from the stub's information_schema answer."""
    columns = tuple(
        ColumnInfo(name=name, data_type=data_type, column_type=column_type, nullable=nullable == "YES",
                   numeric_precision=precision, numeric_scale=scale, datetime_precision=fsp, column_default=default,
                   character_set=charset, collation=collation)
        for name, data_type, column_type, nullable, precision, scale, fsp, default, charset, collation
        in (column.information_schema() for column in table.columns)
    )
    return TableSchema(table=TableRef(table.database, table.name), columns=columns, primary_key=table.primary_key)


def write_snapshot_commit(config: PipelineConfig, schema: TableSchema, rows: list[dict[str, Any]],
                          end: BinlogPosition) -> str:
    """Write `rows` as the table's snapshot ending at `end`, with `deltalake`; returns the table's path."""
    name = schema.table.name
    application = app_id(config.pipeline, name)
    target = delta_rs_writer.arrow_schema(schema)
    target = target.remove(target.get_field_index(delta_rs_writer.OPERATION_COLUMN))
    metadata = {
        "pipeline": config.pipeline, "table": name, "batch_seq": 1, "snapshot_low": end.to_json(), "end": end.to_json(),
        "schema": schema.to_json(), "kind": "snapshot", "app_id": application, "writer": "delta-rs",
        "format": COMMIT_FORMAT,
    }
    path = config.sink.table_path(schema.table.database, schema.table.table)
    write_deltalake(
        path, pa.Table.from_pylist(rows, schema=target), mode="overwrite",
        commit_properties=CommitProperties(
            custom_metadata={"userMetadata": json.dumps(metadata, sort_keys=True)},
            app_transactions=[Transaction(app_id=application, version=1)],
        ),
    )
    return path
