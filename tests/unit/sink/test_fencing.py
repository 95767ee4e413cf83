"""cdc_lib/sink/fencing.py on a real delta-rs table: a fence is read back, refuses an older commit found in the log,
and fails a commit prepared on a snapshot from before it (Delta's conflict check on the app id)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from cdc_lib.errors import FencedCommitError
from cdc_lib.sink import delta_log, fencing
from cdc_lib.sink.storage import storage_for

APP = "binlake:p:db.t"
SNAPSHOT_APP = "binlake:p:db.t:snapshot:abc"


def _commit(target: str | DeltaTable, ids: list[int], app: str, version: int, kind: str = "merge") -> None:
    metadata = json.dumps({"app_id": app, "kind": kind, "end": {"file": "b.1", "pos": 4}})
    write_deltalake(target, pa.table({"id": pa.array(ids, pa.int64())}), mode="append",
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": metadata},
                                                       app_transactions=[Transaction(app_id=app, version=version)]))


def _table(tmp_path: Path) -> str:
    path = str(tmp_path / "t")
    _commit(path, [1, 2], APP, 3)
    return path


def test_a_fence_is_read_back_and_refuses_the_versions_below_it(tmp_path: Path) -> None:
    path = _table(tmp_path)
    storage = storage_for(path)
    version = fencing.fence_table(path, fences={APP: 7, SNAPSHOT_APP: fencing.SUPERSEDED}, storage=storage,
                                  metadata={"table": "db.t"})
    assert version == 1
    tail = delta_log.read_log_tail(path, application=APP, storage=storage)
    assert tail is not None and tail.fence == 7 and tail.last_binlake_commit is not None
    assert tail.last_binlake_commit.txn_version == 3, "a fence is no binlake commit: the last batch stays the last"
    assert tail.fenced(7) and tail.fenced(4) and not tail.fenced(8)
    assert DeltaTable(path).transaction_version(SNAPSHOT_APP) == fencing.SUPERSEDED
    with pytest.raises(FencedCommitError, match="fenced at 7"):
        delta_log.version_of(path, APP, 5, storage)  # what a Spark write skipped by the fence finds
    assert delta_log.version_of(path, APP, 3, storage) == 0, "an older commit that landed is still found"


def test_a_newer_commit_clears_the_fence_and_a_fence_never_lowers_a_version(tmp_path: Path) -> None:
    path = _table(tmp_path)
    storage = storage_for(path)
    fencing.fence_table(path, fences={APP: 7}, storage=storage, metadata={})
    _commit(path, [3], APP, 8)
    tail = delta_log.read_log_tail(path, application=APP, storage=storage)
    assert tail is not None and tail.fence is None and not tail.fenced(8)
    fencing.fence_table(path, fences={APP: 2}, storage=storage, metadata={})
    assert DeltaTable(path).transaction_version(APP) == 8


def test_a_commit_prepared_before_the_fence_fails_in_the_conflict_check(tmp_path: Path) -> None:
    path = _table(tmp_path)
    stale = DeltaTable(path)  # a writer that loaded the table, then was paused
    assert stale.transaction_version(APP) == 3
    fencing.fence_table(path, fences={APP: 7}, storage=storage_for(path), metadata={})
    with pytest.raises(Exception, match="(?i)transaction|conflict|concurrent") as raised:
        _commit(stale, [9], APP, 4)
    assert "CommitFailed" in type(raised.value).__name__
    assert sorted(DeltaTable(path).to_pyarrow_table().column("id").to_pylist()) == [1, 2]


def test_no_table_no_fence(tmp_path: Path) -> None:
    path = str(tmp_path / "missing")
    assert fencing.fence_table(path, fences={APP: 1}, storage=storage_for(path), metadata={}) is None
