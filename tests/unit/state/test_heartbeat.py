"""Heartbeat and the pipeline lease it renews: renewal, a store that fails for a while, a refusal, check() timing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cdc_lib.errors import ConcurrentRunError, OffsetStoreError
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.state.heartbeat import Heartbeat, LeaseLostError
from cdc_lib.state.offset_store import LocalOffsetStore, StateHandle
from cdc_lib.state.offsets import PipelineState, TableState


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Renewals:
    """A renew() whose next outcome the test decides."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail_with: Exception | None = None

    def __call__(self) -> None:
        self.calls += 1
        if self.fail_with is not None:
            raise self.fail_with


def test_renewal_keeps_the_lease_and_check_times_out_at_80_percent() -> None:
    clock, renewals = FakeClock(), Renewals()
    beat = Heartbeat(renewals, lease_seconds=37.5, what="pipeline p", clock=clock)
    assert beat.interval_seconds == pytest.approx(12.5)
    clock.now += 29.0
    beat.check()  # 29 s of 37.5: under 80 %
    beat.beat()
    assert renewals.calls == 1 and beat.renewals == 1
    clock.now += 29.9
    beat.check()  # counted from the renewal
    clock.now += 0.1  # 30.0 s = 80 % of 37.5
    with pytest.raises(LeaseLostError, match="not renewed for 30s of its 38s") as raised:
        beat.check()
    assert raised.value.retryable


def test_a_store_failing_for_a_while_is_retried_then_counts() -> None:
    clock, renewals = FakeClock(), Renewals()
    beat = Heartbeat(renewals, lease_seconds=60, what="pipeline p", clock=clock)
    renewals.fail_with = OffsetStoreError("cannot write s3://b/offsets (503)", remedy="retry", retryable=True)
    clock.now += 20
    beat.beat()
    assert beat.lost_because is None and beat.renewals == 0
    clock.now += 20
    renewals.fail_with = None
    beat.beat()  # the store answers again before the lease ran out
    clock.now += 47
    beat.check()
    renewals.fail_with = OffsetStoreError("timed out", remedy="retry", retryable=True)
    beat.beat()
    clock.now += 1.5
    with pytest.raises(LeaseLostError, match="offset store did not answer"):
        beat.check()


def test_a_refused_renewal_loses_the_lease_for_good() -> None:
    clock, renewals = FakeClock(), Renewals()
    beat = Heartbeat(renewals, lease_seconds=60, what="pipeline p", clock=clock)
    renewals.fail_with = ConcurrentRunError("offset store changed by another runner", remedy="wait")
    beat.beat()
    renewals.fail_with = None
    beat.beat()  # lost stays lost: no renewal is tried again
    assert renewals.calls == 1
    with pytest.raises(LeaseLostError, match="another runner holds it now"):
        beat.check()  # at once, long before any timeout


def _table(offset: int) -> TableState:
    position = BinlogPosition(file="mariadb-bin.000001", pos=offset)
    return TableState(position=position, snapshot_low=position, snapshot_high=position, snapshot_at="t", schema={})


def test_a_renewal_writes_the_last_saved_document_not_the_half_updated_state(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    handle = StateHandle(store, "p", lease_seconds=60)
    handle.acquire()
    handle.state.tables["db.t"] = _table(1234)
    handle.save()
    saved_lease = handle.state.lease
    handle.state.tables["db.t"] = _table(98765)  # mid-batch: not saved yet
    handle.state.batch_seq = 41
    handle.renew()
    stored, _ = store.read("p")
    assert stored is not None and stored.tables["db.t"].position.pos == 1234 and stored.batch_seq == 0
    assert stored.lease is not None and saved_lease is not None and stored.lease.expires_at > saved_lease.expires_at
    handle.save()  # the main thread's next save goes through: the renewal shared its token
    stored, _ = store.read("p")
    assert stored is not None and stored.tables["db.t"].position.pos == 98765 and stored.batch_seq == 41


def test_the_heartbeat_thread_keeps_a_short_lease_and_notices_a_takeover(tmp_path: Path) -> None:
    store = LocalOffsetStore(tmp_path)
    handle = StateHandle(store, "p", lease_seconds=2)  # renewed every 2/3 s
    handle.acquire(heartbeat=True)
    try:
        time.sleep(2.75)  # longer than the lease
        with pytest.raises(ConcurrentRunError, match="held by runner"):
            StateHandle(store, "p", lease_seconds=2).acquire()
        handle.check_lease()
        assert handle.heartbeat is not None and handle.heartbeat.renewals >= 3
        # Another runner writes the document (as one that took an expired lease would): the next renewal is refused.
        state, token = store.read("p")
        assert state is not None
        store.write(PipelineState(pipeline="p", batch_seq=state.batch_seq + 7), token)
        deadline = time.monotonic() + 5
        while handle.heartbeat.lost_because is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(LeaseLostError, match="another runner holds it now"):
            handle.check_lease()
    finally:
        handle.release()
    stored, _ = store.read("p")
    assert stored is not None and stored.batch_seq == 7, "the runner that lost the lease wrote nothing more"


def test_without_a_heartbeat_check_lease_refuses_a_lease_about_to_run_out(tmp_path: Path) -> None:
    handle = StateHandle(LocalOffsetStore(tmp_path), "p", lease_seconds=5)
    handle.acquire()
    handle.check_lease()
    time.sleep(4.1)  # under a fifth of the lease left
    with pytest.raises(LeaseLostError, match="runs out in"):
        handle.check_lease()


def test_a_stalled_runner_stops_renewing_and_resumes_when_it_moves() -> None:
    clock, renewals = FakeClock(), Renewals()
    beat = Heartbeat(renewals, lease_seconds=30, what="pipeline p", clock=clock, stall_seconds=8)
    clock.now += 5
    beat.progress()
    clock.now += 8  # 8 s since the last progress: not past the bound yet
    beat.beat()
    assert renewals.calls == 1
    clock.now += 0.5
    beat.beat()  # 8.5 s without progress: the work is stuck, the lease is left to run out
    clock.now += 10
    beat.beat()
    assert renewals.calls == 1 and beat.withheld == 2
    clock.now += 20  # 30.5 s since the last renewal, past 80 % of the lease
    with pytest.raises(LeaseLostError, match="made no progress for more than 8s") as raised:
        beat.check()
    assert raised.value.retryable
    beat.progress()  # it moves again: renewing is safe (compare-and-swap refuses it if someone took over)
    beat.beat()
    assert renewals.calls == 2 and beat.withheld == 0
    beat.check()


def test_work_bounded_elsewhere_counts_as_progress_throughout() -> None:
    clock, renewals = FakeClock(), Renewals()
    beat = Heartbeat(renewals, lease_seconds=30, what="pipeline p", clock=clock, stall_seconds=8)
    with beat.working():
        clock.now += 100  # a long MERGE on Spark
        beat.beat()
        assert renewals.calls == 1
    clock.now += 8
    beat.beat()  # progress counts from the end of the work
    assert renewals.calls == 2


def test_without_a_stall_bound_the_heartbeat_renews_while_the_process_lives() -> None:
    clock, renewals = FakeClock(), Renewals()
    beat = Heartbeat(renewals, lease_seconds=30, what="snapshot of shop.orders", clock=clock)
    clock.now += 1000
    beat.beat()
    assert renewals.calls == 1 and beat.withheld == 0


def test_the_handle_reports_progress_to_its_heartbeat(tmp_path: Path) -> None:
    handle = StateHandle(LocalOffsetStore(str(tmp_path)), "p", lease_seconds=30)
    handle.progress()  # no heartbeat: nothing to tell
    with handle.working():
        pass
    handle.acquire(heartbeat=True, stall_seconds=0.2)
    try:
        assert handle.heartbeat is not None and handle.heartbeat.stall_seconds == 0.2
        time.sleep(0.3)
        assert handle.heartbeat.stalled_for() is not None
        handle.progress()
        assert handle.heartbeat.stalled_for() is None
        with handle.working():
            time.sleep(0.3)
            assert handle.heartbeat.stalled_for() is None
    finally:
        handle.release()
