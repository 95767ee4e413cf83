"""What every step of a pipeline run shares: its config, offset store and sink, and the names derived from them.

`Pipeline` (the front door) holds one; the snapshot, sync and status steps take it instead of the
`Pipeline`, so none of them depends on the front door.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import pymysql

from cdc_lib.config.model import PipelineConfig
from cdc_lib.model.tables import TableRef
from cdc_lib.sink.commits import app_id
from cdc_lib.sink.spark.session import spark_session
from cdc_lib.sink.storage import SinkStorage
from cdc_lib.source import server as mysql
from cdc_lib.state.offset_store import OffsetStore, StateHandle
from cdc_lib.state.offsets import PipelineState

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class PipelineView(Protocol):
    """What a reader of a pipeline's offsets needs (the binlog runway): a `Pipeline` or a `PipelineContext`."""

    @property
    def config(self) -> PipelineConfig: ...

    def read_state(self) -> PipelineState: ...


@dataclass(frozen=True, kw_only=True)
class PipelineContext:
    config: PipelineConfig
    store: OffsetStore
    sink: SinkStorage

    def table_path(self, name: str) -> str:
        ref = TableRef.parse(name)
        return self.config.sink.table_path(ref.database, ref.table)

    def application(self, name: str) -> str:
        """The Delta SetTransaction app id of the table's commits."""
        return app_id(self.config.pipeline, name)

    def spark(self) -> SparkSession:
        """The process's SparkSession (built on first use), carrying the sink settings (s3a endpoint, credentials)."""
        return spark_session(self.config.spark, sink=self.config.sink)

    def handle(self) -> StateHandle:
        """A handle on the pipeline's state; `acquire` takes the lease."""
        return StateHandle(self.store, self.config.pipeline, lease_seconds=self.config.offsets.lease_seconds)

    def configured_tables(self, connection: pymysql.connections.Connection) -> list[TableRef]:
        return mysql.resolve_tables(connection, self.config.source.tables)

    def read_state(self) -> PipelineState:
        """The stored state, read without taking the lease (empty before the first snapshot)."""
        state, _ = self.store.read(self.config.pipeline)
        return state or PipelineState(pipeline=self.config.pipeline)
