"""Snapshot documents, the table lease, the chunk predicates' key comparison and the new `snapshot.` keys."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import socket
import time
from pathlib import Path

import pytest

from cdc_lib.common.faults import failpoint
from cdc_lib.config.model import SnapshotConfig
from cdc_lib.config.parse import parse_config
from cdc_lib.errors import ConcurrentRunError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.snapshot.jdbc_read import compare_key
from cdc_lib.state.offset_store import LocalOffsetStore
from cdc_lib.state.offsets import PipelineState
from cdc_lib.state.snapshot_documents import (
    DocumentHandle,
    SnapshotDocument,
    TableLease,
    Wave,
    documents_in_flight,
    install,
    read_document,
)
from tests.unit.config.documents import VALID


def position(offset: int) -> BinlogPosition:
    return BinlogPosition(file="mariadb-bin.000003", pos=offset)


def document(**changes: object) -> SnapshotDocument:
    made = SnapshotDocument(
        table="shop.orders", snapshot_id="5e1f", status="running", low=position(1207), schema={"columns": []},
        plan=["`_binlake_key_0` < 17", "`_binlake_key_0` >= 17"], plan_method="integer", rows_estimated=33,
        mode="mirror", started_at="2026-11-23T10:00:00+00:00",
    )
    for key, value in changes.items():
        setattr(made, key, value)
    return made


@pytest.mark.parametrize(
    ("columns", "operator", "expected"),
    [
        (["a"], ">", "a > 1"),
        (["a"], "<=", "a <= 1"),
        (["a", "b"], ">", "(a > 1) OR (a = 1 AND b > 'x')"),
        (["a", "b", "c"], "<=", "(a < 1) OR (a = 1 AND b < 'x') OR (a = 1 AND b = 'x' AND c <= 2.5)"),
    ],
)
def test_compare_key_spells_a_row_comparison_out(columns: list[str], operator: str, expected: str) -> None:
    assert compare_key(columns, ["1", "'x'", "2.5"][: len(columns)], operator) == expected


def test_document_round_trips_through_json() -> None:
    wave = Wave(number=1, first_chunk=0, end_chunk=1, rows=17, low=position(1300), high=position(1450),
                delta_version=4)
    written = document(waves=[wave], chunks_read=3)
    again = SnapshotDocument.from_json(written.to_json())
    assert again.to_json() == written.to_json()
    assert again.chunks_done == 1 and again.rows_done == 17 and again.high == position(1450)


def test_a_lease_is_free_for_its_owner_when_expired_or_when_its_process_died() -> None:
    later = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=7)).isoformat()
    now = dt.datetime.now(dt.UTC)
    elsewhere = TableLease(owner="r1", host="another-host", pid=os.getpid(), expires_at=later)
    assert elsewhere.free_for("r1", now) and not elsewhere.free_for("r2", now)
    assert elsewhere.free_for("r2", now + dt.timedelta(minutes=8))
    here_alive = TableLease(owner="r1", host=socket.gethostname(), pid=os.getpid(), expires_at=later)
    assert not here_alive.free_for("r2", now)  # same host and PID, but no process identity: only expiry frees it
    this_process = TableLease.for_this_process("r1", seconds=420)
    assert not this_process.free_for("r2", now)
    assert this_process.started_ticks is not None
    restarted = dataclasses.replace(this_process, started_ticks=this_process.started_ticks + 1)
    assert restarted.free_for("r2", now)  # its PID now belongs to a process started at another time: dead


def test_documents_are_written_compare_and_swap(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    first = DocumentHandle(store, "shop", lease_seconds=60)
    first.take(document(), None)
    second = DocumentHandle(store, "shop", lease_seconds=60)
    with pytest.raises(ConcurrentRunError):
        second.take(document(snapshot_id="other"), None)  # it exists: only a writer with its token may write
    stored, token = read_document(store, "shop", "shop.orders")
    assert stored is not None and stored.lease is not None and stored.lease.owner == first.owner
    second.take(stored, token)  # a takeover with the current token wins …
    with pytest.raises(ConcurrentRunError):
        first.save()  # … and the first holder's next write fails
    assert set(documents_in_flight(store, "shop")) == {"shop.orders"}
    assert store.list_documents("elsewhere", "snapshots") == []


def test_install_puts_a_complete_snapshot_in_the_state_once() -> None:
    wave = Wave(number=1, first_chunk=0, end_chunk=2, rows=33, low=position(1300), high=position(1450),
                delta_version=4)
    complete = document(waves=[wave], status="complete", finished_at="2026-11-23T10:05:00+00:00")
    state = PipelineState(pipeline="shop", batch_seq=41)
    assert install(state, complete)
    table = state.tables["shop.orders"]
    assert (table.position, table.snapshot_low, table.snapshot_high) == (position(1207), position(1207),
                                                                         position(1450))
    assert table.applied_seq == 41 and table.delta_version == 4 and not table.consistent
    table.position = position(9000)
    assert not install(state, complete), "installed twice would move the offset back"
    assert state.tables["shop.orders"].position == position(9000)


def test_snapshot_keys_parse_and_default_to_the_partition_settings() -> None:
    default = parse_config(VALID).snapshot
    assert default.chunk_rows() == 500_000 and default.wave_chunks(default_parallelism=2) == 2
    configured = parse_config({**VALID, "snapshot": {"rows_per_chunk": 1234, "chunks_per_wave": 3}}).snapshot
    assert configured == SnapshotConfig(rows_per_chunk=1234, chunks_per_wave=3)
    assert configured.chunk_rows() == 1234 and configured.wave_chunks(default_parallelism=16) == 3
    assert SnapshotConfig(max_partitions=4).wave_chunks(default_parallelism=16) == 4


def test_failpoint_at_acts_only_at_the_nth_arrival(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE", "unit_counted_point")
    monkeypatch.setenv("BINLAKE_FAILPOINT_PAUSE_SECONDS", "0.3")
    monkeypatch.setenv("BINLAKE_FAILPOINT_AT", "3")
    timings = []
    for _ in range(4):
        started = time.monotonic()
        failpoint("unit_counted_point")
        timings.append(time.monotonic() - started)
    assert [timing > 0.25 for timing in timings] == [False, False, True, False]
