"""The catch-up arithmetic: lag / (apply rate − source rate), and where each rate comes from."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

import pytest

from cdc_lib.display.report import catch_up_text
from cdc_lib.model.positions import BinlogPosition
from cdc_lib.state.offsets import RECENT_BATCHES, BatchRecord, PipelineState
from cdc_lib.status.catch_up import apply_rate, bytes_between, catch_up, source_rate

NOW = dt.datetime(2026, 11, 23, 12, 0, tzinfo=dt.UTC)
LOGS = [("bin.000007", 1_000_000), ("bin.000008", 2_500_000), ("bin.000009", 731_250)]


def record(*, seconds: float, moved: int, limited: bool, minutes_ago: float = 5.0,
           end: BinlogPosition | None = None) -> BatchRecord:
    return BatchRecord(started_at=(NOW - dt.timedelta(minutes=minutes_ago)).isoformat(), seconds=seconds,
                       binlog_bytes=moved, limited=limited, server_end=end)


@pytest.mark.parametrize(
    ("lag", "apply", "source", "lower_bound", "verdict", "seconds"),
    [
        (1_225_000, 12_250.0, 2_250.0, False, "catching_up", 122.5),
        (1_225_000, 12_250.0, None, False, "catching_up", 100.0),  # no source sample: counted as writing nothing
        (1_225_000, 12_250.0, 12_250.0, False, "not_catching_up", None),
        (1_225_000, 2_250.0, 12_250.0, False, "not_catching_up", None),
        (1_225_000, 2_250.0, 12_250.0, True, "unknown", None),  # only a lower bound of the capacity
        (1_225_000, None, 2_250.0, False, "unknown", None),
        (0, 2_250.0, 12_250.0, False, "caught_up", 0.0),
    ],
)
def test_catch_up_arithmetic(lag, apply, source, lower_bound, verdict, seconds) -> None:
    estimate = catch_up(lag, apply_rate=apply, source_rate=source, apply_rate_is_lower_bound=lower_bound)
    assert estimate.verdict == verdict
    assert estimate.seconds == (pytest.approx(seconds) if seconds is not None else None)
    assert estimate.warning == (verdict == "not_catching_up")


def test_apply_rate_prefers_batches_that_hit_their_limit() -> None:
    records = [
        record(seconds=4.0, moved=49_000, limited=True),
        record(seconds=6.0, moved=73_500, limited=True),
        record(seconds=3.0, moved=1_200, limited=False),  # reached the end: says nothing of capacity
    ]
    assert apply_rate(records) == (pytest.approx(12_250.0), False)
    assert apply_rate(records[2:]) == (pytest.approx(400.0), True)
    assert apply_rate([record(seconds=3.0, moved=0, limited=False)]) == (None, False)
    assert apply_rate([]) == (None, False)


def test_source_rate_is_binlog_growth_since_the_oldest_recent_sample() -> None:
    records = [
        record(seconds=1, moved=1, limited=False, minutes_ago=300, end=BinlogPosition("bin.000007", 4)),
        record(seconds=1, moved=1, limited=False, minutes_ago=40, end=BinlogPosition("bin.000008", 500_000)),
        record(seconds=1, moved=1, limited=False, minutes_ago=10, end=BinlogPosition("bin.000009", 100_000)),
    ]
    # The 5-hour-old sample is past the window: 2,000,000 + 731,250 bytes in 40 minutes.
    assert source_rate(records, LOGS, now=NOW) == pytest.approx(2_731_250 / 2400)
    # Only old samples: the newest of them.
    assert source_rate(records[:1], LOGS, now=NOW) == pytest.approx((999_996 + 2_500_000 + 731_250) / 18_000)
    # A sample in a purged file, or none at all: unknown.
    purged = record(seconds=1, moved=1, limited=False, end=BinlogPosition("bin.000003", 4))
    assert source_rate([purged], LOGS, now=NOW) is None
    assert source_rate([], LOGS, now=NOW) is None


def test_bytes_between_positions() -> None:
    assert bytes_between(BinlogPosition("bin.000008", 400), BinlogPosition("bin.000008", 1_625), LOGS) == 1_225
    assert bytes_between(BinlogPosition("bin.000007", 999_000), BinlogPosition("bin.000009", 250), LOGS) == (
        1_000 + 2_500_000 + 250)
    assert bytes_between(BinlogPosition("bin.000007", 4), BinlogPosition("bin.000010", 250), LOGS) is None


def test_the_state_keeps_recent_batches_and_a_few_limited_ones() -> None:
    state = PipelineState(pipeline="p")
    state.record_batch(record(seconds=4.5, moved=49_000, limited=True, end=BinlogPosition("bin.000008", 17)))
    for _ in range(RECENT_BATCHES + 3):
        state.record_batch(record(seconds=0.25, moved=0, limited=False))
    assert len(state.recent_batches) == RECENT_BATCHES + 1 and state.recent_batches[0].limited
    again = PipelineState.from_json(state.to_json())
    assert again.recent_batches == state.recent_batches
    assert again.recent_batches[0].server_end == BinlogPosition("bin.000008", 17)


def test_text_for_people() -> None:
    assert catch_up_text(catch_up(1_225_000, apply_rate=12_250.0, source_rate=2_250.0).to_json()) == "2.0m"
    assert catch_up_text(catch_up(1_225_000, apply_rate=None, source_rate=None).to_json()) == "-"
    text = catch_up_text(catch_up(1_225_000, apply_rate=2_250.0, source_rate=312_500.0).to_json())
    assert text == "NOT CATCHING UP (applies 2.2 kB/s, source writes 0.31 MB/s)"


def test_the_lag_check_warns_when_not_catching_up_even_under_its_threshold() -> None:
    import dagster as dg

    from assets.checks import lag_result
    from cdc_lib.status.table_status import TableStatus

    def status(apply: float) -> TableStatus:
        estimate = catch_up(1_225_000, apply_rate=apply, source_rate=12_250.0)
        return replace(
            TableStatus.not_snapshotted("db.t"), snapshotted=True, lag_seconds=37.5, lag_bytes=1_225_000,
            catch_up=estimate.to_json(), catch_up_warning=estimate.warning,
        )

    key = dg.AssetKey(["mysql", "db", "t"])
    catching_up = lag_result(key, status(24_500.0), threshold=300.0)
    assert catching_up.passed and catching_up.metadata["catch_up_seconds"].value == 100.0
    stuck = lag_result(key, status(2_250.0), threshold=300.0)
    assert not stuck.passed and stuck.severity == dg.AssetCheckSeverity.WARN
    assert stuck.description is not None and "NOT CATCHING UP" in stuck.description
    assert stuck.metadata["source_bytes_per_second"].value == 12_250.0
