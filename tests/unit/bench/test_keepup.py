"""The keep-up benchmark's pure logic: lag from timelines, the steadiness verdict, the rate search."""

from __future__ import annotations

import math

import pytest

from bench.keepup.keepup_search import (
    FollowSample,
    LagPoint,
    RateSearch,
    SourceCommit,
    applied_all,
    catch_up_seconds,
    judge,
    lag_series,
)

FILE = "mariadb-bin.000003"


def test_lag_is_the_age_of_the_oldest_unapplied_commit() -> None:
    commits = [SourceCommit(at=10.0 + i, rows=7, end=(FILE, 1000 + 100 * i)) for i in range(5)]
    samples = [
        FollowSample(at=12.25, applied=(FILE, 1100)),  # commits 0, 1 applied; 2 (at 12.0) behind
        FollowSample(at=13.5, applied=(FILE, 1050)),  # inside commit 1: only commit 0 counts as applied
        FollowSample(at=20.0, applied=(FILE, 1400)),  # everything applied
        FollowSample(at=9.0, applied=(FILE, 900)),  # before the first commit: nothing is behind
    ]
    series = lag_series(commits, samples)
    assert series[0] == LagPoint(12.25, 0.25, 7)
    assert series[1] == LagPoint(13.5, 2.5, 21)
    assert series[2] == LagPoint(20.0, 0.0, 0)
    assert series[3] == LagPoint(9.0, 0.0, 0)


def test_a_later_binlog_file_counts_as_applied_past_every_offset_of_the_earlier_one() -> None:
    commits = [SourceCommit(at=1.0, rows=3, end=(FILE, 9_000_000))]
    assert lag_series(commits, [FollowSample(at=4.5, applied=("mariadb-bin.000004", 256))])[0].lag_s == 0.0


def sawtooth(rate_of_growth: float, *, peak: float = 3.0) -> list[LagPoint]:
    return [LagPoint(float(t), peak * (t % 3) / 3 + rate_of_growth * t, 0) for t in range(0, 121)]


def test_a_sawtooth_lag_is_steady_and_a_growing_one_is_not() -> None:
    steady = judge(sawtooth(0.0), window_start=0.0, window_end=120.0)
    assert steady.steady and steady.max_lag_s == pytest.approx(2.0)
    growing = judge(sawtooth(0.125), window_start=0.0, window_end=120.0)
    assert not growing.steady and "grows" in growing.reason
    assert growing.late_slope == pytest.approx(0.125, abs=0.02)


def test_lag_past_the_limit_fails_even_when_flat() -> None:
    flat = [LagPoint(float(t), 61.25, 0) for t in range(30)]
    verdict = judge(flat, window_start=0.0, window_end=29.0)
    assert not verdict.steady and "61.2" in verdict.reason


def test_a_follower_that_stopped_before_the_window_ended_fails() -> None:
    verdict = judge([LagPoint(1.0, 0.5, 0), LagPoint(2.0, 0.5, 0)], window_start=0.0, window_end=30.0)
    assert not verdict.steady and "not applied" in verdict.reason


def test_a_follower_stopped_between_batches_just_before_the_window_end_passes_once_it_drains() -> None:
    """The 300 s confirmation's false failure: a follower stops between batches, so the batch in flight when the
    writer stops may end 0.04 s before the window's last commit. Run on until that commit is applied, the series
    ends with a drained point after the window; its lag counts, and the aging backlog after the window does not
    count as growth."""
    steady = [LagPoint(float(t), 1.25 + 0.5 * (t % 2), 700) for t in range(1, 30)]
    cut = [*steady, LagPoint(29.96, 1.75, 700)]
    assert not judge(cut, window_start=0.0, window_end=30.0).steady
    drained = [*cut, LagPoint(31.5, 0.0, 0)]
    verdict = judge(drained, window_start=0.0, window_end=30.0)
    assert verdict.steady, verdict
    assert verdict.late_slope == pytest.approx(0.0, abs=0.01)
    # A drain that takes its time: the lag after the window counts against the limit, not towards the slope.
    slow = [*cut, LagPoint(33.0, 3.25, 700), LagPoint(45.0, 0.0, 0)]
    assert judge(slow, window_start=0.0, window_end=30.0).steady
    late = [*cut, LagPoint(95.0, 0.0, 0)]  # applied, but 65 s after the window: outside it, so not drained in time
    assert not judge(late, window_start=0.0, window_end=30.0, limit_s=60.0).steady


def test_the_last_commit_is_applied_once_the_latest_sample_reaches_its_end() -> None:
    last = SourceCommit(at=30.0, rows=100, end=(FILE, 52_000))
    assert not applied_all([], last)
    assert not applied_all([FollowSample(at=30.5, applied=(FILE, 51_999))], last)
    assert applied_all([FollowSample(at=30.5, applied=(FILE, 51_999)), FollowSample(at=31.25, applied=(FILE, 52_000))],
                       last)
    assert applied_all([FollowSample(at=31.25, applied=("mariadb-bin.000004", 4))], last)


def test_the_search_converges_on_the_capacity() -> None:
    capacity = 3_700.0
    search = RateSearch(low=400.0, high=12_000.0, steps=8)
    while not search.done():
        rate = search.propose()
        search.record(rate, rate <= capacity)
    assert search.best is not None
    assert capacity * 0.85 <= search.best <= capacity


def test_the_search_moves_down_when_the_low_guess_fails() -> None:
    search = RateSearch(low=1_000.0, high=4_000.0, steps=6)
    while not search.done():
        rate = search.propose()
        search.record(rate, rate <= 300.0)
    assert search.best is not None and 150.0 <= search.best <= 300.0


def test_catch_up_time() -> None:
    assert catch_up_seconds(36_000, 1_250, 250) == pytest.approx(36.0)
    assert math.isinf(catch_up_seconds(36_000, 900, 900))


def test_the_mixed_workload_inserts_updates_and_deletes_its_own_oldest_rows() -> None:
    from bench.keepup.keepup_load import Workload

    workload = Workload("load_mixed", "mixed", txn_rows=100, first_id=1001, base_rows=1000)
    first = workload.statements()
    assert len(first) == 2  # nothing of its own to delete yet
    assert "seq_1001_to_1050" in first[0] and "BETWEEN 1 AND 33" in first[1]
    second = workload.statements()
    assert "seq_1051_to_1100" in second[0]
    assert second[2] == "DELETE FROM load_mixed WHERE id BETWEEN 1001 AND 1017"
    assert workload.oldest_own == 1018
    appends = Workload("load_insert", "insert", txn_rows=37, first_id=5, base_rows=0)
    assert ["seq_5_to_41" in statement for statement in appends.statements()] == [True]
