"""What a binlake commit carries, whichever engine makes it, and the names both engines write into a table.

Every binlake commit carries a SetTransaction (`txnAppId` = pipeline + table, `txnVersion` = batch sequence) and a
JSON `userMetadata` with the binlog position it brings the table to (`user_metadata`, the one builder Spark's and
delta-rs's writes share). `delta_log.read_log_tail` reads that back from the `_delta_log` folder without Spark,
from its last checkpoint on, so reconciling offsets with Delta is cheap however long the table's history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc_lib.common.formats import COMMIT_FORMAT
from cdc_lib.errors import DeltaStateError
from cdc_lib.model.tables import TableSchema
from cdc_lib.sink import delta_log
from cdc_lib.sink.storage import SinkStorage

#: The staged records' operation column (`u`: upsert, `d`: delete), after the row's columns, in either engine.
OPERATION_COLUMN = "_binlake_op"
#: The table properties binlake sets per table (`sink.deletion_vectors`, `sink.change_data_feed`).
DELETION_VECTORS = "delta.enableDeletionVectors"
CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
#: Delta UniForm: the formats whose metadata Delta writes beside its log after each commit (`iceberg`, `hudi`).
UNIFORM_FORMATS = "delta.universalFormat.enabledFormats"

#: Commit metadata: the binlog position up to which the table holds the source's changes, which can lie past
#: the commit's `end` (a table held by a prepared XA branch stays at its PREPARE while later changes are
#: applied). Carried from commit to commit; a table is exactly the source at its offset only once the offset
#: has reached it.
APPLIED_THROUGH = "applied_through"


@dataclass(frozen=True, kw_only=True)
class BatchCommit:
    """One table's commit of a batch, as `merge.merge_changes` hands it to an engine: the table, the
    SetTransaction (`application`, `txn_version`) and the commit's metadata."""

    path: str
    application: str
    txn_version: int
    metadata: dict[str, Any]
    storage: SinkStorage
    #: The predicate (target alias `t`) of the rows the commit may touch; None: the whole table.
    scope: str | None = None


def app_id(pipeline: str, table: str) -> str:
    return f"binlake:{pipeline}:{table}"


def user_metadata(metadata: Mapping[str, Any], application: str) -> str:
    """A binlake commit's `userMetadata`: `metadata` with the app id and the commit format, as JSON."""
    return json.dumps({**metadata, "app_id": application, "format": COMMIT_FORMAT}, sort_keys=True)


def fence_metadata(metadata: Mapping[str, Any], fences: Mapping[str, int]) -> str:
    """A fence commit's `userMetadata` (cdc_lib/sink/fencing.py): its `fences` map each app id to its version."""
    return json.dumps({**metadata, "kind": delta_log.FENCE_KIND, "fences": dict(fences)}, sort_keys=True)


def existing_tail(path: str, schema: TableSchema, *, application: str, storage: SinkStorage) -> delta_log.LogTail:
    """The table's log tail; DeltaStateError (re-snapshot) when the table is missing."""
    tail = delta_log.read_log_tail(path, application=application, storage=storage)
    if tail is None:
        raise DeltaStateError(
            f"the Delta table at {path} is missing",
            remedy=f"re-snapshot the table: binlake snapshot --table {schema.table.name}",
            table=schema.table.name,
        )
    return tail


__all__ = [
    "APPLIED_THROUGH", "CHANGE_DATA_FEED", "DELETION_VECTORS", "OPERATION_COLUMN", "UNIFORM_FORMATS", "BatchCommit",
    "app_id", "existing_tail",
    "fence_metadata", "user_metadata",
]
